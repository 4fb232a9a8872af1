"""Registration of the ``agentrl/...-v0`` ids in Gymnasium's own registry.

Gymnasium 1.x has no plugin discovery: ids are registered when this package is imported, from the env specs
(:mod:`agentgym_envs.spec`) of the bundled envs and of installed packages (the ``agentrl.envs`` entry points).
``gym.make("agentgym_envs:agentrl/PythonSandbox-v0")`` imports it for you.
"""

from __future__ import annotations

from difflib import get_close_matches
from importlib import import_module
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from agentgym_envs.errors import UnknownEnvError
from agentgym_envs.spec import EnvSpec, SpecRegistry, installed_specs

NAMESPACE = "agentrl"
BUNDLED_SPECS = ("agentgym_envs.data_analysis.spec", "agentgym_envs.python_sandbox.spec", "agentgym_envs.search.spec",
                 "agentgym_envs.swe.spec", "agentgym_envs.webshop.spec")
"""The modules of the bundled envs' specs (each exports ``SPEC``)."""
SPECS = SpecRegistry()
"""Every registered spec: the bundled ones and those of installed packages
(:data:`~agentgym_envs.spec.ENTRY_POINT_GROUP`)."""


REMOTE_ID = f"{NAMESPACE}/Remote-v0"
"""The client env of any OpenEnv server (``gym.make(REMOTE_ID, url=...)``); not a spec: it has no tasks of its own."""


def register_envs() -> None:
    """Register the bundled specs and those of installed packages, each in :data:`SPECS` and its id in Gymnasium's
    registry, and :data:`REMOTE_ID` (idempotent)."""
    for spec in [*(import_module(name).SPEC for name in BUNDLED_SPECS), *installed_specs()]:
        register_spec(spec)
    if REMOTE_ID not in gym.registry:
        gym.register(id=REMOTE_ID, entry_point="agentgym_envs.remote:RemoteEnv")


def register_spec(spec: EnvSpec) -> None:
    """Register ``spec`` in :data:`SPECS` and its id in Gymnasium's registry (a package may call this itself).

    Raises:
        ValueError: Another spec holds its id or one of its aliases.
    """
    SPECS.add(spec)
    if spec.id not in gym.registry:
        gym.register(id=spec.id, entry_point=spec.entry_point, max_episode_steps=spec.max_episode_steps,
                     kwargs=spec.make_kwargs())


def registered_ids() -> list[str]:
    """The ids of every registered spec."""
    return SPECS.ids()


def env_spec(name: str) -> EnvSpec:
    """The spec of a registered id or alias (``"agentrl/Search-v0"`` or ``"search"``).

    Raises:
        UnknownEnvError: No spec has that id or alias.
    """
    return SPECS.get(name)


def canonical_env_id(name: str) -> str:
    """The id of a registered id or alias (``"data"`` gives ``"agentrl/DataAnalysis-v0"``); any other name as given
    (a Gymnasium id registered without a spec)."""
    return SPECS.get(name).id if name in SPECS.names() else name


def runs_agent_code(env_id: str) -> bool:
    """True for an env whose tools run the agent's code in a sandbox, so that it takes ``sandbox=`` and friends.

    Raises:
        UnknownEnvError: ``env_id`` is not registered.
    """
    from agentgym_envs.sandboxed import SandboxEnv  # the env classes import this module's package

    if env_id not in gym.registry:
        raise UnknownEnvError(unknown_id_message(env_id))
    entry_point = gym.spec(env_id).entry_point
    env_class = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return isinstance(env_class, type) and issubclass(env_class, SandboxEnv)


def sandbox_kwargs(env_id: str, backend: str, **settings: Any) -> dict[str, Any]:
    """``{"sandbox": backend, **settings}`` for an env that runs agent code, ``{}`` for one that runs none.

    Code that makes every agentrl env with one sandbox backend passes ``**sandbox_kwargs(env_id, backend)``.
    """
    return {"sandbox": backend, **settings} if runs_agent_code(env_id) else {}


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make`` with an error that suggests the close match for a mistyped id.

    Raises:
        UnknownEnvError: ``env_id`` is not registered; the message names the closest id.

    Example:
        >>> make("agentrl/PythonSandbx-v0")
        Traceback (most recent call last):
        ...
        agentgym_envs.errors.UnknownEnvError: no environment 'agentrl/PythonSandbx-v0'; did you mean ...
    """
    if env_id not in gym.registry:
        raise UnknownEnvError(unknown_id_message(env_id))
    return gym.make(env_id, **kwargs)


def unknown_id_message(env_id: str) -> str:
    """Say that ``env_id`` is unknown, with the closest registered id when there is one."""
    candidates = list(gym.registry)
    close = get_close_matches(env_id, candidates, n=1, cutoff=0.6)
    if not close:  # a lower-cased or namespace-less spelling of one of ours
        lowered = {c.lower().split("/")[-1]: c for c in registered_ids()}
        close = [lowered[k] for k in get_close_matches(env_id.lower().split("/")[-1], list(lowered), n=1)]
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no environment {env_id!r}{hint} The agentrl ids are: {', '.join(registered_ids())}."


__all__ = ["BUNDLED_SPECS", "REMOTE_ID", "SPECS", "env_spec", "make", "register_envs", "register_spec",
           "registered_ids", "runs_agent_code", "sandbox_kwargs"]
