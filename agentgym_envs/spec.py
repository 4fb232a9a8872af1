"""Environment specs: everything the project's tooling needs to know about an environment, in one typed object.

An env's *card* (:class:`~agentgym_envs.EnvCard`) is what an episode shows; its :class:`EnvSpec` is what the
tooling needs: the registry id and entry point, default keyword arguments, short names, its oracle and random
policies, the service its envs share (WebShop's shop server), how the stress harness loads it and which
faults it can take, and its reward-hacking probes. ``benchmarks.evaluate``, ``benchmarks.stress`` and
``benchmarks.probes`` loop over the registered specs and name no environment.

Each bundled env exports its spec as ``SPEC`` from ``agentgym_envs/<env>/spec.py``. A third-party package
declares its own in the ``agentrl.envs`` entry-point group; ``import agentgym_envs`` loads them::

    # pyproject.toml of the package "calculator-env"
    [project.entry-points."agentrl.envs"]
    calculator = "calculator_env.spec:SPEC"       # an EnvSpec, or a list of them

Everything beyond ``id``, ``entry_point`` and ``max_episode_steps`` is optional: an env with no oracle is
evaluated with its random policy and models only, one with no stress profile is stressed as a plain env (its
oracle's own tool calls, no faults), one with no probes is skipped by the probes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentgym_envs.actions import tool_call_action
from agentgym_envs.errors import UnknownEnvError

if TYPE_CHECKING:
    from agentgym_envs.policies.base import Policy
    from agentgym_envs.sandbox import SandboxLimits

ENTRY_POINT_GROUP = "agentrl.envs"
"""The entry-point group through which installed packages register their specs."""

PolicyFactory = Callable[[int], "Policy"]
"""Makes a fresh policy from an episode's seed."""


class SharedService(Protocol):
    """A service every env of a run shares (WebShop's shop server): started once, stopped once.

    A run starts it before it makes its envs (``spec.service(split)``), passes :meth:`env_kwargs` to every
    env it makes, and calls :meth:`close` after the last env closed. The stress harness also injects the
    ``service-stall`` and ``service-restart`` faults through :meth:`stall` and :meth:`restart`.
    """

    def env_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that make an env use this service."""

    def sessions(self) -> int | None:
        """Sessions still open on the service (None: it cannot tell); checked once every env closed."""

    def stall(self, margin_s: float) -> str:
        """Make the service stop answering for ``margin_s`` longer than an env waits for it, then answer again
        (blocking meanwhile); says what was done."""

    def restart(self) -> str:
        """Kill the service and start it again where the envs reach it; says what was done."""

    def close(self) -> None:
        """Stop the service (idempotent)."""


@dataclass(frozen=True)
class StressSettings:
    """What one stress run asks of every env it makes.

    Attributes:
        split: The bundled split the tasks come from.
        backend: Sandbox backend of an env that runs agent code (``docker`` or ``bwrap``).
        limits: Sandbox limits of the run.
    """

    split: str
    backend: str
    limits: SandboxLimits


PYTHON_LOAD_ACTION = tool_call_action("python", code="sum(range(1000))")
"""The small load call of an env with a ``python`` tool."""
PYTHON_SPIN_ACTION = tool_call_action("python", code="while True:\n    pass")
"""The runaway cell of an env with a ``python`` tool (the ``timeout`` fault)."""
SANDBOX_FAULTS = ("kill", "timeout", "stall", "daemon-restart")
"""The faults of an env whose tools run in a sandbox."""


def split_only(settings: StressSettings) -> dict[str, Any]:
    """The stress kwargs of an env that runs no agent code: the split."""
    return {"split": settings.split}


def sandboxed(settings: StressSettings) -> dict[str, Any]:
    """The stress kwargs of an env that runs agent code: the split, the backend and the run's limits."""
    return {"split": settings.split, "sandbox": settings.backend, "sandbox_limits": settings.limits}


@dataclass(frozen=True)
class StressProfile:
    """How ``benchmarks.stress`` loads an env and which faults it can inject into it.

    Attributes:
        kwargs: The env's keyword arguments for one run.
        load_action: The small tool call a load episode repeats ``--calls-per-episode`` times before its oracle
            plays (None: the oracle alone plays).
        spin_action: A tool call that never ends by itself (the ``timeout`` fault; None: the env has none).
        cell_grace_s: How much longer than the limits' ``timeout_s`` a load call may take.
        faults: The faults it can take: ``kill``, ``timeout``, ``stall``, ``daemon-restart`` (a sandbox) and
            ``service-stall``, ``service-restart`` (its :attr:`EnvSpec.service`).
        memory_mb: Sandbox memory of a run that names none (None: the harness default).
    """

    kwargs: Callable[[StressSettings], dict[str, Any]] = split_only
    load_action: str | None = None
    spin_action: str | None = None
    cell_grace_s: float = 0.0
    faults: tuple[str, ...] = ()
    memory_mb: int | None = None


@dataclass(frozen=True)
class ProbeSettings:
    """What one run of the reward-hacking probes asks of an env.

    Attributes:
        split: The bundled split the tasks come from.
        limit: Tasks per verifier.
        sandbox: Sandbox backend of an env that runs agent code.
        slow: Include the probes that wait for timeouts.
    """

    split: str = "test"
    limit: int = 3
    sandbox: str = "docker"
    slow: bool = True


@dataclass(frozen=True)
class Relabeling:
    """Whether hindsight relabeling (:mod:`tasks.relabel`) applies to an env's episodes, and why.

    Attributes:
        applies: An outcome the agent achieved is the goal of another task of the env.
        reason: Why (or why not), in a sentence or two.
    """

    applies: bool
    reason: str


@dataclass(frozen=True)
class BenchmarkMetrics:
    """A public benchmark's own metrics of an evaluation's episodes (DABench's ABQ, PSAQ and UASQ, say).

    Attributes:
        benchmark: The benchmark's name.
        values: The metrics, JSON-serialisable (they go into ``report.json``).
        lines: The metrics as the benchmark prints them (they go into ``report.md`` and onto the terminal).
    """

    benchmark: str
    values: Mapping[str, Any]
    lines: tuple[str, ...]


BenchmarkScorer = Callable[[Sequence[Any], Sequence[Any]], "BenchmarkMetrics | None"]
"""Scores the episodes (``agentgym_envs.runner.Episode``) of an evaluation's tasks (``tasks.Task``) as a public
benchmark does; None when the tasks are none of that benchmark's."""


def random_policy(seed: int) -> Policy:
    """The generic random policy (random tool calls and answers), for an env that names none of its own."""
    from agentgym_envs.policies.random_policy import RandomPolicy

    return RandomPolicy(seed=seed)


@dataclass(frozen=True)
class EnvSpec:
    """Everything the project's tooling needs to know about one registered environment.

    Attributes:
        id: The Gymnasium id, ``namespace/Name-vN``.
        entry_point: ``module:Class`` of the env (imported only when an env is made).
        max_episode_steps: The turn limit (Gymnasium's ``TimeLimit``).
        aliases: Short names the command lines take for the id (``search`` for ``agentrl/Search-v0``).
        kwargs: Default keyword arguments of ``gym.make``.
        oracle: Makes the env's oracle policy, one that solves its tasks (None: it has none).
        oracle_sees_reference: The oracle reads the task's metadata (a reference oracle); otherwise it is shown
            the prompt only and must solve the task through the tools.
        oracle_deterministic: Every oracle episode of a task is the same, so evaluation plays one per task.
        random: Makes the env's random policy (default: random tool calls and answers).
        policies: More scripted policies by name (a demonstrator for SFT, say); with ``oracle`` and ``random``,
            what :meth:`policy` makes.
        service: Starts the service every env of a run shares, from the run's split (None: envs start what they
            need themselves).
        stress: How the stress harness loads it (default: the split alone, its oracle's own tool calls, no
            faults).
        probes: Plays its reward-hacking probes and returns one ``agentgym_envs.probing.EpisodeRecord`` per
            episode (None: it has none).
        probe_catalogue: Lists its reward-hacking probes (``agentgym_envs.probing.Probe``) without playing them
            (None: it lists none).
        splits_dir: The folder of its bundled task splits (None: the project's ``tasks/data``).
        speed: Runs its speed benchmark on command-line arguments and returns the exit status
            (``python -m benchmarks.speed <alias> ...``; None: it has none).
        relabeling: Whether hindsight relabeling applies to it, and why (None: not assessed).
        benchmark_metrics: Scores an evaluation's episodes as the public benchmark its tasks came from does, beside
            the project's own numbers (``benchmarks.evaluate``; None: it has no such benchmark).
    """

    id: str
    entry_point: str
    max_episode_steps: int
    aliases: tuple[str, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    oracle: PolicyFactory | None = None
    oracle_sees_reference: bool = False
    oracle_deterministic: bool = True
    random: PolicyFactory = random_policy
    policies: Mapping[str, PolicyFactory] = field(default_factory=dict)
    service: Callable[[str], SharedService] | None = None
    stress: StressProfile = StressProfile()
    probes: Callable[[ProbeSettings], Sequence[Any]] | None = None
    probe_catalogue: Callable[[], Sequence[Any]] | None = None
    splits_dir: Path | None = None
    speed: Callable[[Sequence[str]], int] | None = None
    relabeling: Relabeling | None = None
    benchmark_metrics: BenchmarkScorer | None = None

    def __post_init__(self) -> None:
        if "/" not in self.id or "-v" not in self.id:
            raise ValueError(f"EnvSpec.id: expected 'namespace/Name-vN', got {self.id!r}")
        if ":" not in self.entry_point:
            raise ValueError(f"EnvSpec {self.id}: entry_point: expected 'module:Class', got {self.entry_point!r}")
        if self.max_episode_steps < 1:
            raise ValueError(f"EnvSpec {self.id}: max_episode_steps: expected >= 1, got {self.max_episode_steps}")

    def policy_names(self) -> list[str]:
        """The scripted policies :meth:`policy` makes: ``oracle`` (when there is one), ``random`` and
        :attr:`policies`."""
        return [*(["oracle"] if self.oracle is not None else []), "random", *self.policies]

    def policy(self, name: str, seed: int = 0) -> Policy:
        """A fresh scripted policy of this env by name (see :meth:`policy_names`).

        Raises:
            ValueError: It has no policy of that name; the message lists those it has.
        """
        factories = {"oracle": self.oracle, "random": self.random, **self.policies}
        factory = factories.get(name)
        if factory is None:
            raise ValueError(f"{self.id}: expected a scripted policy among {self.policy_names()}, got {name!r}")
        return factory(seed)

    @property
    def names(self) -> tuple[str, ...]:
        """The id and every alias."""
        return (self.id, *self.aliases)

    def make_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """The keyword arguments of ``gym.make``: :attr:`kwargs`, :attr:`splits_dir`, then ``overrides``."""
        bundle = {"splits_dir": str(self.splits_dir)} if self.splits_dir is not None else {}
        return {**bundle, **self.kwargs, **overrides}


class SpecRegistry:
    """The registered specs, by id, with their aliases.

    Args:
        specs: Specs registered at once.
    """

    def __init__(self, specs: Sequence[EnvSpec] = ()) -> None:
        self._specs: dict[str, EnvSpec] = {}
        self._aliases: dict[str, str] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: EnvSpec) -> None:
        """Register ``spec``; registering the same spec again does nothing.

        Raises:
            ValueError: Another spec holds its id or one of its aliases.
        """
        if self._specs.get(spec.id) == spec:
            return
        taken = [name for name in spec.names if name in self._specs or name in self._aliases]
        if taken:
            raise ValueError(f"EnvSpec {spec.id}: expected unused ids and aliases, got {taken} already registered")
        self._specs[spec.id] = spec
        self._aliases.update(dict.fromkeys(spec.aliases, spec.id))

    def __iter__(self) -> Iterator[EnvSpec]:
        return iter(sorted(self._specs.values(), key=lambda spec: spec.id))

    def __contains__(self, name: object) -> bool:
        return name in self._specs or name in self._aliases

    def ids(self) -> list[str]:
        """Every registered id, sorted."""
        return sorted(self._specs)

    def names(self) -> list[str]:
        """Every id and alias, sorted."""
        return sorted([*self._specs, *self._aliases])

    def get(self, name: str) -> EnvSpec:
        """The spec of an id or alias.

        Raises:
            UnknownEnvError: No spec has that id or alias; the message lists what there is.
        """
        if name in self._aliases:
            name = self._aliases[name]
        if name not in self._specs:
            raise UnknownEnvError(f"no environment spec {name!r}: expected an id or alias among {self.names()}")
        return self._specs[name]

    def resolve(self, names: Sequence[str]) -> list[EnvSpec]:
        """The specs of ``names`` (ids or aliases), in order, each once."""
        specs = [self.get(name) for name in names]
        return list({spec.id: spec for spec in specs}.values())

    @contextmanager
    def added(self, spec: EnvSpec) -> Iterator[EnvSpec]:
        """Register ``spec`` for the block only (tests)."""
        self.add(spec)
        try:
            yield spec
        finally:
            self._specs.pop(spec.id, None)
            for alias in spec.aliases:
                self._aliases.pop(alias, None)


def installed_specs(group: str = ENTRY_POINT_GROUP) -> list[EnvSpec]:
    """The specs that installed packages declare in the entry-point ``group``.

    A package whose entry point fails to load, or loads something other than an :class:`EnvSpec` or a list of
    them, is left out with a warning that names it and says why: one broken package must not break
    ``import agentgym_envs`` for every other env.
    """
    specs: list[EnvSpec] = []
    for entry in entry_points(group=group):
        try:
            specs += _specs_of(entry)
        except Exception as error:  # any failure of a third-party package is reported, not raised
            warnings.warn(f"agentrl: the environment package entry point {entry.name!r} ({entry.value}) "
                          f"was not loaded: {type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)
    return specs


def _specs_of(entry: EntryPoint) -> list[EnvSpec]:
    loaded = entry.load()
    specs = list(loaded) if isinstance(loaded, list | tuple) else [loaded]
    wrong = [type(spec).__name__ for spec in specs if not isinstance(spec, EnvSpec)]
    if wrong:
        raise TypeError(f"expected an agentgym_envs.spec.EnvSpec or a list of them, got {', '.join(wrong)}")
    return specs


__all__ = [
    "ENTRY_POINT_GROUP",
    "PYTHON_LOAD_ACTION",
    "PYTHON_SPIN_ACTION",
    "SANDBOX_FAULTS",
    "BenchmarkMetrics",
    "BenchmarkScorer",
    "EnvSpec",
    "PolicyFactory",
    "ProbeSettings",
    "Relabeling",
    "SharedService",
    "SpecRegistry",
    "StressProfile",
    "StressSettings",
    "installed_specs",
    "random_policy",
    "sandboxed",
    "split_only",
]
