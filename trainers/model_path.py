"""Check a model's name or path before loading it: a missing local folder is an error naming it, not a hub timeout.

``transformers`` takes whatever is not an existing folder for a hub id and asks the hub, so a mistyped
checkpoint folder shows as a network timeout or a "not a valid model identifier" far from the cause.
:func:`check_model_path` says what is wrong first. A name is taken for a local path when it starts with
``/``, ``.`` or ``~``, or cannot be a hub id (``name`` or ``org/name``: one slash at most, letters, digits,
``-``, ``_``, ``.``); such a path must exist. ``org/name`` stays a hub id (``runs/sft`` as well, when no
such folder exists), except with the hub offline (``HF_HUB_OFFLINE``): then it must be a folder or in the
local hub cache.

Example:
    >>> check_model_path("./runs/missing")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trainers.model_path.ModelNotFoundError: model: expected an existing local folder, got './runs/missing' ...
"""

from __future__ import annotations

from pathlib import Path

TINY_MODEL = "tiny"
"""The name of the tiny default model, built locally (:func:`trainers.tiny_model.load_model`)."""


class ModelNotFoundError(FileNotFoundError, ValueError):
    """A model's local path does not exist (or, offline, a hub id is not in the cache); the message names it."""


def looks_like_path(name_or_path: str) -> bool:
    """Whether ``name_or_path`` can only mean a local path: it starts with ``/``, ``.`` or ``~``, or is no hub id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if name_or_path.startswith(("/", ".", "~")):
        return True
    try:
        validate_repo_id(name_or_path)
    except HFValidationError:
        return True
    return False


def in_hub_cache(repo_id: str) -> bool:
    """Whether the local hub cache holds the model ``repo_id`` (its ``config.json``)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def check_model_path(name_or_path: str) -> None:
    """Raise :class:`ModelNotFoundError` when ``name_or_path`` names a local model that does not exist.

    ``"tiny"`` (the locally built default) and existing folders pass; so does a hub id, unless the hub is
    offline and the id is not in the local cache.

    Args:
        name_or_path: ``"tiny"``, a checkpoint folder or a hub id, as given to a trainer or to evaluation.

    Raises:
        ModelNotFoundError: The path does not exist; the message names it and what would fix it.
    """
    from huggingface_hub import is_offline_mode

    path = Path(name_or_path).expanduser()
    if name_or_path == TINY_MODEL or path.exists():
        return
    if looks_like_path(name_or_path):
        raise ModelNotFoundError(
            f"model: expected an existing local folder, got {name_or_path!r} ({path.absolute()} does not exist); "
            "check the path (a checkpoint folder holds config.json), or give a hub id as 'org/name'")
    if is_offline_mode() and not in_hub_cache(name_or_path):
        raise ModelNotFoundError(
            f"model: expected a local folder or a hub id in the local hub cache (HF_HUB_OFFLINE is set), got "
            f"{name_or_path!r}: no folder {path.absolute()} and no cached model of that id; check the path, or "
            "download the model first with the hub online")
