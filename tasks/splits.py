"""Bundled benchmark splits: fixed task files shipped inside the package, guarded by a manifest.

Each environment with bundled splits has a folder ``tasks/data/<name>/`` holding one JSONL file
per split (one :meth:`Task.to_json` per line) and a ``MANIFEST.json`` recording, per split, the
file, its task count and its sha256, plus the environment name and the generator versions that
produced it. Files are read through :mod:`importlib.resources`, so loading works the same from a
source checkout and from an installed wheel.

The Search bundle (``tasks/data/search/``) also lists its corpora in the manifest
(``tasks.search.load_corpus`` reads them through :func:`read_bundled_file`).

A manifest may name its ``builder`` (``module:function`` making every file of the folder), which
``python -m tasks.build_splits`` calls to rebuild or check the folder.

A bundle may also live in a folder of your own (``splits_dir=``: the same layout and manifest as
``tasks/data/<name>/``), for an environment whose splits are not installed with this package, or for
splits of ours that you made yourself.

Example:
    >>> available_splits()["PythonSandbox"]
    ['dev', 'test', 'train']
    >>> len(load_split("PythonSandbox", "dev", family="math"))
    50
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from tasks.errors import SplitIntegrityError, UnknownTaskError, did_you_mean
from tasks.records import Task

MANIFEST_NAME = "MANIFEST.json"
SplitsDir = str | os.PathLike[str] | None
"""A bundle folder of one environment (``tasks/data/<name>/``'s layout), or None for the installed bundles."""


@dataclass(frozen=True)
class _Bundle:
    """One environment's folder of splits and its parsed manifest."""

    folder: Traversable
    manifest: dict[str, Any]

    @property
    def splits(self) -> list[str]:
        """Split names, sorted."""
        return sorted(self.manifest["splits"])


def _data_root() -> Traversable:
    """The package's ``data`` folder (a function, so tests can point it elsewhere)."""
    return resources.files("tasks") / "data"


def _read_manifest(folder: Traversable) -> dict[str, Any] | None:
    """The parsed manifest of a bundle folder, or None when it holds none."""
    manifest_file = folder / MANIFEST_NAME
    if not (folder.is_dir() and manifest_file.is_file()):
        return None
    return json.loads(manifest_file.read_text(encoding="utf-8"))


def _bundles() -> dict[str, _Bundle]:
    """Every folder under the data root that holds a manifest, keyed by its environment name."""
    bundles = {}
    for folder in sorted(_data_root().iterdir(), key=lambda entry: entry.name):
        manifest = _read_manifest(folder)
        if manifest is not None:
            bundles[manifest["env"]] = _Bundle(folder, manifest)
    return bundles


def available_splits() -> dict[str, list[str]]:
    """Bundled split names per environment, e.g. ``{"PythonSandbox": ["dev", "test", "train"]}``."""
    return {env: bundle.splits for env, bundle in _bundles().items()}


def _bundle(env: str, splits_dir: SplitsDir = None) -> _Bundle:
    """The bundle of ``env``: the installed one, or the one in ``splits_dir``."""
    if splits_dir is not None:
        return _bundle_at(Path(splits_dir), env)
    bundles = _bundles()
    if env not in bundles:
        raise UnknownTaskError(
            f"expected an environment with bundled splits among {sorted(bundles)}, got {env!r}"
            + did_you_mean(env, bundles)
        )
    return bundles[env]


def _bundle_at(folder: Path, env: str) -> _Bundle:
    """The bundle in ``folder``, which must be ``env``'s."""
    manifest = _read_manifest(folder)
    if manifest is None:
        raise UnknownTaskError(f"splits_dir: expected a folder holding a split bundle's {MANIFEST_NAME} (the layout "
                               f"of tasks/data/<name>/), got {folder}, which has none")
    if manifest.get("env") != env or not isinstance(manifest.get("splits"), Mapping):
        raise UnknownTaskError(f"splits_dir: expected a bundle of {env} (a manifest with \"env\": {env!r} and its "
                               f"\"splits\"), got one of {manifest.get('env')!r} in {folder}")
    return _Bundle(folder, manifest)


def bundle_manifest(env: str, *, splits_dir: SplitsDir = None) -> dict[str, Any]:
    """A copy of the parsed manifest of an environment's bundled data (splits, and e.g. Search corpora).

    Args:
        env: Environment name.
        splits_dir: The bundle folder to read (None: the installed bundle of ``env``).

    Raises:
        UnknownTaskError: ``env`` has no bundled data (the message lists those that do), or ``splits_dir``
            holds no manifest of ``env``.
    """
    return copy.deepcopy(_bundle(env, splits_dir).manifest)


def read_bundled_file(env: str, entry: Mapping[str, Any], *, verify: bool = True,
                      splits_dir: SplitsDir = None) -> bytes:
    """The bytes of a file that an environment's manifest lists, as ``{"file": ..., "sha256": ...}``.

    Raises:
        UnknownTaskError: ``env`` has no bundled data (in ``splits_dir`` when given).
        SplitIntegrityError: ``verify`` is set and the file does not match ``entry["sha256"]``.
    """
    return _read_entry(_bundle(env, splits_dir), entry, verify)


def _read_verified(bundle: _Bundle, split: str, verify: bool) -> bytes:
    """The bytes of a split file, checked against the manifest's sha256 when ``verify``."""
    return _read_entry(bundle, bundle.manifest["splits"][split], verify)


def _read_entry(bundle: _Bundle, entry: Mapping[str, Any], verify: bool) -> bytes:
    """The bytes of a manifest entry's file, checked against its sha256 when ``verify``."""
    data = (bundle.folder / entry["file"]).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if verify and digest != entry["sha256"]:
        raise SplitIntegrityError(
            f"{bundle.folder.name}/{entry['file']}: expected sha256 {entry['sha256']} "
            f"(from {MANIFEST_NAME}), got {digest}. If the change is intended, rebuild with "
            "`python -m tasks.build_splits`."
        )
    return data


def load_split(env: str, split: str, *, family: str | None = None, verify: bool = True,
               splits_dir: SplitsDir = None) -> list[Task]:
    """Load a bundled benchmark split.

    Args:
        env: Environment name, e.g. ``"PythonSandbox"`` (see :func:`available_splits`).
        split: Split name, e.g. ``"train"``, ``"dev"`` or ``"test"``.
        family: Keep only tasks of this family (e.g. ``"math"`` or ``"code"``).
        verify: Check the file against the sha256 in the manifest before parsing it.
        splits_dir: A bundle folder of ``env`` to load from (the layout and manifest of ``tasks/data/<name>/``);
            None for the installed bundle.

    Returns:
        The split's tasks, in file order.

    Raises:
        UnknownTaskError: ``env``, ``split`` or ``family`` does not exist (the message lists what does), or
            ``splits_dir`` holds no bundle of ``env``.
        SplitIntegrityError: ``verify`` is set and the file does not match its manifest.

    Example:
        >>> load_split("PythonSandbox", "test")[0].env
        'PythonSandbox'
    """
    bundle = _bundle(env, splits_dir)
    if split not in bundle.manifest["splits"]:
        raise UnknownTaskError(
            f"expected a split of {env} among {bundle.splits}, got {split!r}"
            + did_you_mean(split, bundle.splits)
        )
    lines = _read_verified(bundle, split, verify).decode("utf-8").splitlines()
    tasks = [Task.from_dict(json.loads(line)) for line in lines if line]
    if family is None:
        return tasks
    families = sorted({task.family for task in tasks})
    if family not in families:
        raise UnknownTaskError(
            f"expected a family of {env}/{split} among {families}, got {family!r}"
            + did_you_mean(family, families)
        )
    return [task for task in tasks if task.family == family]


def write_bundle(folder: str | os.PathLike[str], env: str, splits: Mapping[str, Sequence[Task]], *,
                 manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a split bundle that ``splits_dir=`` reads: one ``<split>.jsonl`` per split and its manifest.

    Args:
        folder: The bundle's folder (made if missing).
        env: The environment name the manifest records (the env's ``env_name``).
        splits: Split name -> its tasks, in file order.
        manifest: More manifest fields, e.g. ``{"generator_versions": {...}}``.

    Returns:
        The manifest written.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> _ = write_bundle(folder, "PythonSandbox", {"mine": load_split("PythonSandbox", "dev")[:5]})
        >>> len(load_split("PythonSandbox", "mine", splits_dir=folder))
        5
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    entries = {}
    for split, tasks in splits.items():
        data = "".join(task.to_json() + "\n" for task in tasks).encode("utf-8")
        (root / f"{split}.jsonl").write_bytes(data)
        entries[split] = {"file": f"{split}.jsonl", "count": len(tasks), "sha256": hashlib.sha256(data).hexdigest()}
    written = {**(manifest or {}), "env": env, "splits": entries}
    (root / MANIFEST_NAME).write_text(json.dumps(written, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return written
