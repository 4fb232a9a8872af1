"""The env card: one public, typed description of what an environment offers.

Trainers, the rollout monitor, the evaluation fingerprint and the stress harness learn everything
they need about an environment from its card and from nothing private: its tools with their
schemas, its reward terms (weight, cap, function) per task family, the tools each family's tasks
cannot be solved without, where its tasks come from (split and hashes) and its limits.

Example:
    >>> import gymnasium as gym, agentgym_envs                        # doctest: +SKIP
    >>> card = agentgym_envs.describe(gym.make("agentrl/Search-v0"))  # doctest: +SKIP
    >>> card.required_tools()                                         # doctest: +SKIP
    ('search',)
    >>> card.reward_component_names()                                 # doctest: +SKIP
    ('outcome', 'f1', 'format', 'tool_use')
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from rewards import CompositeReward, RewardFn
from tasks import Task
from tasks.errors import UnknownTaskError
from tasks.splits import bundle_manifest

CARD_VERSION = 1
"""Bumped when the card's fields change meaning, so that stored fingerprints are not compared across versions."""


@dataclass(frozen=True)
class RewardTermCard:
    """One term of a family's reward.

    Attributes:
        name: The component name in ``info["reward_components"]``.
        weight: Its weight in the sum (0 = logged only).
        cap: ``(low, high)`` bounds of its raw value, or None.
        fn: ``module.qualname`` of the function that computes it.
    """

    name: str
    weight: float
    cap: tuple[float, float] | None
    fn: str


@dataclass(frozen=True)
class FamilyCard:
    """What a task family needs and how it is scored.

    Attributes:
        name: The family (``"math"``, ``"bridge"``, ...).
        required_tools: The tools its tasks cannot be solved without (watched by the under-use alert).
        reward: The terms of its reward, in the order they are reported.
        tasks: How many of the env's tasks are of this family.
    """

    name: str
    required_tools: tuple[str, ...]
    reward: tuple[RewardTermCard, ...]
    tasks: int

    def unanswered_components(self) -> dict[str, float]:
        """The reward components of an episode of this family that ended unanswered and unscored (at the turn
        limit of an env that does not score unfinished work, or stopped by its runner): 0.0 for every term, as its
        reward is 0, so that logged means count the episode as they count its reward."""
        return {term.name: 0.0 for term in self.reward}


@dataclass(frozen=True)
class TaskSourceCard:
    """Where the env's tasks come from.

    Attributes:
        env_name: The bundle the tasks belong to (``"Search"``, ``"PythonSandbox"``).
        split: The bundled split loaded, or None for tasks passed in by the caller.
        split_sha256: The split file's sha256 from the manifest (None for explicit tasks).
        manifest_sha256: sha256 of the bundle's manifest (None when the env has no bundle).
        generator_versions: The generator versions the manifest records.
        task_generator_versions: The generator versions found on the tasks themselves.
        tasks: How many tasks the env draws from.
        tasks_sha256: sha256 of the sorted task ids, so that two envs on the same tasks compare equal.
    """

    env_name: str
    split: str | None
    split_sha256: str | None
    manifest_sha256: str | None
    generator_versions: Mapping[str, Any]
    task_generator_versions: tuple[str, ...]
    tasks: int
    tasks_sha256: str


@dataclass(frozen=True)
class LimitsCard:
    """The limits an episode runs under.

    Attributes:
        max_episode_steps: The registered turn limit (None for an env made without ``gym.make``).
        max_action_chars: Longer actions are a format error.
        max_tool_calls_per_turn: Most tool calls in one action.
        max_observation_chars: Observations are cut to this length.
        sandbox_backend: ``"docker"``, ``"bwrap"``, ``"local"``, or None for an env that runs no code.
        sandbox: The sandbox's :class:`~agentgym_envs.sandbox.SandboxLimits` as a dict, or None.
    """

    max_episode_steps: int | None
    max_action_chars: int
    max_tool_calls_per_turn: int
    max_observation_chars: int
    sandbox_backend: str | None = None
    sandbox: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EnvCard:
    """The public description of an environment (see the module docstring).

    Attributes:
        env_name: The env's name (``"Search"``).
        env_id: Its registry id when made with ``gym.make``, else None.
        tools: The tools' schemas in OpenAI function format, as ``info["tools"]`` carries them.
        families: Per task family, its required tools and reward terms.
        source: Where the tasks come from.
        limits: Turn, action, observation and sandbox limits.
        settings: Other settings that change what the agent sees or how it is scored (scalars only).
        prompt_style: ``"full"`` or ``"task"``.
        version: :data:`CARD_VERSION`.
    """

    env_name: str
    env_id: str | None
    tools: tuple[Mapping[str, Any], ...]
    families: Mapping[str, FamilyCard]
    source: TaskSourceCard
    limits: LimitsCard
    settings: Mapping[str, Any] = field(default_factory=dict)
    prompt_style: str = "full"
    version: int = CARD_VERSION

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools' names, in the order the prompt lists them."""
        return tuple(tool["function"]["name"] for tool in self.tools)

    def required_tools(self, *families: str) -> tuple[str, ...]:
        """The tools every one of ``families`` needs (all of the env's families when none is named).

        Raises:
            KeyError: A family the env does not have.
        """
        needed = [set(self.families[family].required_tools) for family in families or self.families]
        common = set.intersection(*needed) if needed else set()
        return tuple(name for name in self.tool_names if name in common)

    def reward_component_names(self) -> tuple[str, ...]:
        """Every reward component any family reports, in first-seen order."""
        names: dict[str, None] = {}
        for family in self.families.values():
            names.update((term.name, None) for term in family.reward)
        return tuple(names)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly form (tuples as lists), e.g. for evaluation fingerprints."""
        return json.loads(json.dumps(dataclasses.asdict(self), sort_keys=True))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvCard:
        """The card of a :meth:`to_dict` form (a served env's card, read by ``agentrl/Remote-v0``);
        ``EnvCard.from_dict(card.to_dict()).to_dict() == card.to_dict()``."""
        families = {name: FamilyCard(name=family["name"], required_tools=tuple(family["required_tools"]),
                                     reward=tuple(RewardTermCard(term["name"], term["weight"],
                                                                 tuple(term["cap"]) if term["cap"] else None,
                                                                 term["fn"]) for term in family["reward"]),
                                     tasks=family["tasks"])
                    for name, family in data["families"].items()}
        source = {**data["source"], "task_generator_versions": tuple(data["source"]["task_generator_versions"])}
        return cls(env_name=data["env_name"], env_id=data["env_id"], tools=tuple(data["tools"]), families=families,
                   source=TaskSourceCard(**source), limits=LimitsCard(**data["limits"]),
                   settings=dict(data["settings"]), prompt_style=data["prompt_style"], version=data["version"])


def describe(env: gym.Env) -> EnvCard:
    """The card of an agentrl env, wrapped (``gym.make``) or bare; fills in the registry id and turn limit (a card
    that names its id already is kept as it is: a served env's, read by ``agentrl/Remote-v0``).

    Raises:
        TypeError: ``env`` is not an agentrl environment (its ``unwrapped`` has no ``card``).
    """
    card = getattr(env.unwrapped, "card", None)
    if not isinstance(card, EnvCard):
        raise TypeError(f"expected an agentrl environment with a card, got {type(env.unwrapped).__name__}")
    spec = env.spec
    if spec is None or card.env_id is not None:
        return card
    limits = dataclasses.replace(card.limits, max_episode_steps=spec.max_episode_steps)
    return dataclasses.replace(card, env_id=spec.id, limits=limits)


def reward_terms(reward: RewardFn) -> tuple[RewardTermCard, ...]:
    """The terms of a composite reward; any other reward function is one term, ``"reward"``, of weight 1."""
    if isinstance(reward, CompositeReward):
        return tuple(RewardTermCard(term.name, float(term.weight), tuple(term.cap) if term.cap else None,
                                    qualified_name(term.fn)) for term in reward.terms)
    return (RewardTermCard("reward", 1.0, None, qualified_name(reward)),)


def qualified_name(fn: object) -> str:
    """``module.qualname`` of a function (of the wrapped function of a partial, of a callable object's class)."""
    if isinstance(fn, functools.partial):
        return qualified_name(fn.func)
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(target, '__module__', '?')}.{target.__qualname__}"


def task_source(env_name: str, split: str | None, tasks: Sequence[Task], *,
                splits_dir: str | os.PathLike[str] | None = None) -> TaskSourceCard:
    """Where ``tasks`` come from: the bundle's manifest entry for ``split``, and a hash of the task ids.

    The bundle is the one in ``splits_dir`` when given, else the installed one of ``env_name``.
    """
    try:
        manifest: Mapping[str, Any] | None = bundle_manifest(env_name, splits_dir=splits_dir)
    except UnknownTaskError:  # an env without bundled splits (tasks always passed in)
        manifest = None
    entry = (manifest or {}).get("splits", {}).get(split or "", {})
    ids = "\n".join(sorted(task.id for task in tasks)).encode()
    return TaskSourceCard(
        env_name=env_name, split=split, split_sha256=entry.get("sha256"),
        manifest_sha256=hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest() if manifest else None,
        generator_versions=dict((manifest or {}).get("generator_versions", {})),
        task_generator_versions=tuple(sorted({str(task.metadata.get("generator_version")) for task in tasks})),
        tasks=len(tasks), tasks_sha256=hashlib.sha256(ids).hexdigest())
