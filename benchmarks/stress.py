"""Tool-concurrency stress: a load ramp of concurrent episodes, with fault injection and a leak check.

For each concurrency level N, N workers each own one environment (so one sandbox) and play scripted
episodes back to back for ``--duration`` seconds; then every worker finishes its episode and closes
its env. Setting up the N sandboxes (with bounded parallelism) is timed apart from the measured window.
Any registered env can be stressed: its spec's stress profile (:class:`agentgym_envs.spec.StressProfile`)
says how. Each episode makes ``--calls-per-episode`` load calls (the profile's ``load_action``: a small
``python`` call ``sum(range(1000))`` on PythonSandbox-v0 and DataAnalysis-v0, ``bash`` ``true`` on SWE-v0),
then the env's oracle finishes it (its random policy for an env with no oracle); an env with no load call
(Search-v0, WebShop-v0, a profile-less third-party env) is played by its oracle alone. An env whose spec names a
shared service (WebShop-v0's shop server) gets one per level, started before the N envs, shared by them and
stopped once they closed.

One row per level:

    ===============  ===============================================================================
    column           meaning
    ===============  ===============================================================================
    setup s          building N envs and starting their sandboxes (not part of the window)
    episodes         episodes that ended, answered or not (the drain after the window included)
    calls/s          tool calls completed inside the window, per second of window
    p50/p95/p99 ms   latency of those tool calls (``info["tool_calls"][i]["latency_s"]``)
    agent err        tool calls that failed by the agent's doing, plus wrong answers
    infra err        tool calls or answers flagged ``infra_error``, plus resets that raised an
                     infrastructure error (SandboxError, ShopUnavailableError, ...)
    leaks            labelled containers, child processes and open fds left after every env closed,
                     and sessions left on the shared service (the shop server's ``/api/health``)
    ===============  ===============================================================================

Faults (``--faults``, among those the env's stress profile lists: ``kill,timeout,stall,daemon-restart`` on
PythonSandbox-v0, DataAnalysis-v0 and SWE-v0, ``service-stall,service-restart`` on WebShop-v0) are injected
once each per level, spread over the window. A worker fault hits a worker in the middle of an episode, just
before one of its load calls; a service fault (the daemon, the shared service) hits every worker at once:

    ===============  ==========================================================  =====================
    fault            what is done                                                expected report
    ===============  ==========================================================  =====================
    kill             ``docker kill`` of the worker's container (docker only)      ``infra_error``
    timeout          the load call is replaced by ``while True: pass`` (SWE-v0:   agent error (limit)
                     ``bash`` ``while :; do :; done``, its time limit the run's)
    stall            ``docker pause`` of the container (a freeze of the bwrap     ``infra_error``
                     sandbox's cgroup) past the call's hard timeout, then undone
    daemon-restart   dockerd stopped and started again as the project starts it   ``infra_error``
    service-stall    the shared service stops answering past the envs' timeout   ``infra_error``
                     (the shop server: SIGSTOP past :data:`~agentgym_envs.webshop.env.SHOP_TIMEOUT_S`,
                     then SIGCONT)
    service-restart  the shared service killed and started again where the envs  ``infra_error``
                     reach it (the shop server: SIGKILL, same port)
                     (its sessions, so the episodes in flight, are lost)
    ===============  ==========================================================  =====================

A runaway cell is the agent's doing and must be scored as such (an ``infra_error`` is never scored,
so reporting it as one would let a policy escape a penalty); the other faults are the
infrastructure's. A service fault must not be scored as the agent's either: an episode it overlapped
that ends as a wrong answer (or at the turn limit) reports the fault as an ``agent error`` (the
oracles solve every task when nothing fails). Every fault must also be recovered from: the worker
(every worker, after a service fault) later finishes a correct episode. Episodes are recorded as they
end, so a fault never loses a finished one.

Example:
    python -m benchmarks.stress --env agentrl/PythonSandbox-v0 --concurrency 1,8,64,256 --duration 30
    python -m benchmarks.stress --env python --concurrency 4 --duration 20 --faults kill,timeout,stall --timeout-s 2
    python -m benchmarks.stress --env agentrl/WebShop-v0 --concurrency 1,8,64 --duration 60 \\
        --faults service-stall,service-restart
    python -m benchmarks.stress --env agentrl/DataAnalysis-v0 --concurrency 1,16,64 --duration 30
    python -m benchmarks.stress --env agentrl/SWE-v0 --concurrency 16 --duration 30
    python -m benchmarks.stress --env agentrl/SWE-v0 --split all --concurrency 16 --duration 60  # 4 repositories,
        # each task in its repository's own environment (SWE-v0's profile; the first episodes build them)

Each level ends with its target line: N concurrent episodes, 0 infrastructure errors outside injected faults,
nothing leaked, MET or MISSED with the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
import gymnasium as gym
import numpy as np
import psutil
from rich.console import Console
from rich.table import Table

import agentgym_envs  # noqa: F401 (registers the agentrl ids)
from agentgym_envs.policies import Policy, ScriptedAgent
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.registration import SPECS, env_spec, runs_agent_code
from agentgym_envs.runner import AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from agentgym_envs.sandbox import KernelSandbox, SandboxLimits
from agentgym_envs.sandbox import system as sandbox_system
from agentgym_envs.sandbox.kernel_client import HARD_TIMEOUT_GRACE_S
from agentgym_envs.spec import EnvSpec, SharedService, StressSettings
from rewards.math import close_verifier_workers
from tasks import InfrastructureError, Task

WORKER_FAULTS = ("kill", "timeout", "stall")
SERVICE_FAULTS = ("daemon-restart", "service-stall", "service-restart")
"""Faults of a service every worker uses: injected once for all of them, by the injector itself."""
FAULTS = (*WORKER_FAULTS, *SERVICE_FAULTS)
EXPECTED_REPORT = {"kill": "infra_error", "timeout": "agent error", "stall": "infra_error",
                   "daemon-restart": "infra_error", "service-stall": "infra_error", "service-restart": "infra_error"}
"""How the environment must report each fault."""

DEFAULT_MEMORY_MB = 256
"""Sandbox memory of a run that names none, for an env whose stress profile names none."""

DOCKER_ONLY_FAULTS = frozenset({"kill", "daemon-restart"})
RESET_RETRY_S = 0.5
"""Pause before a worker retries after a reset that raised an infrastructure error (the daemon may be down)."""




# ------------------------------------------------------------------------------------------ config


@dataclass(frozen=True)
class StressConfig:
    """One stress run.

    Attributes:
        env_id: Registered id (or alias) of the env to stress; its spec's stress profile says how.
        concurrency: Concurrency levels, run one after the other.
        duration_s: Length of each level's measured window.
        backend: Sandbox backend of the envs that run agent code (``docker`` or ``bwrap``).
        limits: Sandbox limits of every sandbox.
        calls_per_episode: Load calls before the oracle's own actions (the envs that run agent code).
        faults: Faults to inject once per level, among :data:`FAULTS`.
        setup_parallelism: Sandboxes started at once during set-up.
        split: Task split to draw from.
        seed: Seed of the task draws and of the fault targets.
    """

    env_id: str
    concurrency: tuple[int, ...] = (1, 8, 64, 256)
    duration_s: float = 30.0
    backend: str = "docker"
    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(memory_mb=DEFAULT_MEMORY_MB))
    calls_per_episode: int = 4
    faults: tuple[str, ...] = ()
    setup_parallelism: int = 8
    split: str = "train"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.env_id not in SPECS:
            raise ValueError(f"env_id: expected a registered id or alias among {SPECS.names()}, got {self.env_id!r}")
        object.__setattr__(self, "env_id", env_spec(self.env_id).id)
        if not self.concurrency or min(self.concurrency) < 1:
            raise ValueError(f"concurrency: expected levels >= 1, got {self.concurrency}")
        if self.duration_s <= 0 or self.setup_parallelism < 1 or self.calls_per_episode < 1:
            raise ValueError("duration_s, setup_parallelism and calls_per_episode: expected positive values, got "
                             f"{self.duration_s}, {self.setup_parallelism}, {self.calls_per_episode}")
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"faults: expected a subset of {FAULTS}, got {sorted(unknown)}")
        takes = self.spec.stress.faults
        foreign = sorted(set(self.faults) - set(takes))
        if foreign:
            raise ValueError(f"faults: {self.env_id} takes faults among {takes} (its spec's stress profile), got "
                             f"{foreign}")
        if self.backend != "docker" and DOCKER_ONLY_FAULTS & set(self.faults):
            raise ValueError(f"faults {sorted(DOCKER_ONLY_FAULTS & set(self.faults))} need backend='docker', "
                             f"got {self.backend!r}")

    @property
    def spec(self) -> EnvSpec:
        """The spec of the env stressed."""
        return env_spec(self.env_id)

    def settings(self) -> StressSettings:
        """What every env of the run is asked for (its stress profile turns this into keyword arguments)."""
        return StressSettings(split=self.split, backend=self.backend, limits=self.limits)


# ----------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ToolCallSample:
    """One tool call: when it ended (seconds since the window opened), how long it took, how it went."""

    ended_s: float
    latency_s: float
    ok: bool
    infra_error: bool


@dataclass
class EpisodeRecord:
    """One episode, recorded the moment it ended.

    Attributes:
        worker: Index of the worker that played it.
        task_id: The task.
        started_s, ended_s: Seconds since the window opened.
        answered: The agent answered (``terminated``).
        correct: The answer earned the full reward.
        infra_error: An infrastructure fault ended it (a reset that failed included).
        tool_calls: Every tool call of the episode.
        detail: The observation (or exception) that ended it, when it ended in an error.
    """

    worker: int
    task_id: str
    started_s: float
    ended_s: float
    answered: bool = False
    correct: bool = False
    infra_error: bool = False
    tool_calls: list[ToolCallSample] = field(default_factory=list)
    detail: str = ""

    @property
    def agent_errors(self) -> int:
        """Failed tool calls that were the agent's doing, plus a wrong answer."""
        failed = sum(1 for call in self.tool_calls if not call.ok and not call.infra_error)
        return failed + int(self.answered and not self.correct)

    @property
    def infra_errors(self) -> int:
        """Tool calls flagged ``infra_error``, or 1 when the fault was outside a tool call (reset, scoring)."""
        in_calls = sum(1 for call in self.tool_calls if call.infra_error)
        return in_calls or int(self.infra_error)


@dataclass
class FaultRecord:
    """One injected fault and what became of it.

    Attributes:
        kind: One of :data:`FAULTS`.
        worker: The worker hit (None for a service fault, which hits every worker).
        scheduled_s: When the injector fired it (seconds since the window opened).
        injected_s: When it took effect (None when the window closed first).
        expected: How the env must report it (:data:`EXPECTED_REPORT`).
        reported: How the env reported it: ``infra_error``, ``agent error``, ``no error`` or ``not injected``.
        observation: The start of what the env said.
        over_s: When the fault was over: the end of the episode it hit, or the service answering again.
        recovered_s: When the worker (the last worker, after a service fault) next finished a correct
            episode; None when it never did.
        infra_episodes: Episodes that ended with ``infra_error`` after the fault and started before it
            was over.
        wrong_episodes: Episodes that a service fault overlapped and that ended scored as the agent's
            failure (a wrong answer, the turn limit): the env blamed the agent for the infrastructure.
        detail: Anything else (daemon downtime, the container paused or the cgroup frozen by a stall).
    """

    kind: str
    worker: int | None
    scheduled_s: float
    injected_s: float | None = None
    expected: str = ""
    reported: str = "not injected"
    observation: str = ""
    over_s: float | None = None
    recovered_s: float | None = None
    infra_episodes: int = 0
    wrong_episodes: int = 0
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Reported as expected and recovered from."""
        return self.reported == self.expected and self.recovered_s is not None


@dataclass
class Leaks:
    """What outlived a level: compared with a snapshot taken before its envs were made.

    Attributes:
        containers: Short ids of this process's labelled containers left (then swept).
        processes: ``"pid name"`` of child processes left.
        fds: Open descriptors of this process, after minus before.
        rss_mb: Resident memory of this process, after minus before (reported, not a leak by itself).
        sessions: Sessions left on the level's shared service once every env closed (the shop server); None when the
            server did not answer (counted as a leak: nothing shows that the sessions are gone).
    """

    containers: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    fds: int = 0
    rss_mb: float = 0.0
    sessions: int | None = 0

    @property
    def any(self) -> bool:
        """True when a container, a process, a descriptor or a service session leaked."""
        return bool(self.containers or self.processes or self.fds > 0 or self.sessions != 0)


@dataclass
class LevelReport:
    """Everything one concurrency level measured (see the module docstring for the columns).

    ``unexplained_infra_errors`` counts the infra errors that no injected fault accounts for, ``unsolved`` the
    episodes that ended unsolved (a wrong answer, or none by the turn limit) with no infra error and no injected
    fault overlapping them: both targets are zero (a load episode ends with the env's oracle).
    """

    concurrency: int
    setup_s: float
    window_s: float
    drain_s: float
    teardown_s: float
    episodes: int
    correct: int
    tool_calls: int
    calls_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    agent_errors: int
    infra_errors: int
    unexplained_infra_errors: int
    unsolved: int
    setup_errors: list[str]
    worker_crashes: list[str]
    min_available_gb: float
    faults: list[FaultRecord]
    leaks: Leaks
    records: list[EpisodeRecord] = field(default_factory=list, repr=False)
    """Every episode of the level, in the order they ended (left out of the JSON report)."""


@dataclass
class Report:
    """A whole run: the configuration, one report per level and the machine."""

    env_id: str
    backend: str
    limits: dict[str, Any]
    calls_per_episode: int
    levels: list[LevelReport] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """No infra error outside the injected faults, no unsolved episode outside them (for an env with an
        oracle), nothing leaked, every fault passed, no crash."""
        solves = env_spec(self.env_id).oracle is not None
        return all(not (level.worker_crashes or level.setup_errors or level.leaks.any
                        or level.unexplained_infra_errors or (solves and level.unsolved))
                   and all(fault.passed for fault in level.faults)
                   for level in self.levels)


class WindowClock:
    """Seconds since the measured window opened (negative before it opens)."""

    def __init__(self) -> None:
        self._origin = time.perf_counter()

    def open(self) -> None:
        """Open the window now."""
        self._origin = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self._origin

    def at(self, perf_counter: float) -> float:
        """Seconds since the window opened at the ``time.perf_counter()`` reading ``perf_counter``."""
        return perf_counter - self._origin


class Ledger:
    """Thread-safe, append-only record of finished episodes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._episodes: list[EpisodeRecord] = []

    def add(self, record: EpisodeRecord) -> None:
        """Keep ``record``."""
        with self._lock:
            self._episodes.append(record)

    def episodes(self) -> list[EpisodeRecord]:
        """A copy of every record so far."""
        with self._lock:
            return list(self._episodes)


# ---------------------------------------------------------------------------------------- policies


class LoadPolicy:
    """Keeps the tool busy: ``calls`` small tool calls, then the reference oracle's actions.

    Args:
        calls: Load calls per episode.
        oracle: The env's reference oracle, which ends each episode.
        load_action: The load call (the env's stress profile's).
    """

    name = "load"

    def __init__(self, calls: int, oracle: Policy, load_action: str) -> None:
        self.calls = calls
        self.load_action = load_action
        self._oracle = oracle
        self._made = 0

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Start an episode: the load calls first."""
        self._oracle.begin(task, prompt, info)
        self._made = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """A load call while some are left, else the oracle's next action."""
        if self._made < self.calls:
            self._made += 1
            return self.load_action
        return self._oracle.act(observation, info)


def stress_policy(config: StressConfig, seed: int) -> Policy:
    """The policy of one worker: ``calls_per_episode`` load calls, then the env's oracle (its random policy for an
    env with none); the oracle alone for an env with no load call."""
    spec = config.spec
    finisher = (spec.oracle or spec.random)(seed)
    load_action = spec.stress.load_action
    return LoadPolicy(config.calls_per_episode, finisher, load_action) if load_action else finisher


# ------------------------------------------------------------------------------------------ faults


def worker_sandbox(env: gym.Env) -> KernelSandbox:
    """The sandbox an env currently holds (:attr:`agentgym_envs.SandboxEnv.sandbox`)."""
    return env.unwrapped.sandbox


def kill_container(sandbox: KernelSandbox) -> str:
    """``docker kill`` the sandbox's container."""
    container = sandbox.container  # type: ignore[attr-defined]
    container.kill()
    return f"killed container {container.short_id}"


STALL_MARGIN_S = 1.0
"""How much longer than the host's hard timeout of a call a ``stall`` fault lasts, so that the call sees it."""


def stall_kernel(sandbox: KernelSandbox, cell_grace_s: float = 0.0) -> str:
    """Stop the whole sandbox from outside for longer than a call may take, then let it run again.

    ``docker pause`` of the container, or a freeze of the bwrap sandbox's cgroup: what an operator or a
    scheduler does, and what no process inside the sandbox can do (a SIGSTOP the agent's own code could
    send is the agent's outcome, not an infrastructure fault). The sandbox is reached the way
    :func:`kill_container` reaches it: ``sandbox.container`` on docker, ``sandbox.cgroup`` on bwrap.

    Args:
        sandbox: The worker's sandbox.
        cell_grace_s: How much longer than ``limits.timeout_s`` the env gives a load call's cell.

    Raises:
        RuntimeError: A bwrap sandbox without a freezable cgroup (the host does not run as root, or has
            no freezer).
    """
    stall_s = sandbox.limits.timeout_s + cell_grace_s + HARD_TIMEOUT_GRACE_S + STALL_MARGIN_S
    if sandbox.backend == "docker":
        container = sandbox.container  # type: ignore[attr-defined]
        container.pause()
        threading.Timer(stall_s, unpause, args=(container,)).start()
        return f"paused container {container.short_id} for {stall_s:g} s"
    cgroup = sandbox.cgroup  # type: ignore[attr-defined]
    if cgroup is None or cgroup.freezer_path is None:
        raise RuntimeError("stall: expected a bwrap sandbox with a freezable cgroup (run as root on a host with "
                           "a cgroup freezer), got none")
    cgroup.freeze()
    threading.Timer(stall_s, cgroup.thaw).start()
    return f"froze cgroup {cgroup.freezer_path} for {stall_s:g} s"


def unpause(container: Any) -> None:
    """``docker unpause`` a container the stall paused, unless it was removed (or unpaused) meanwhile."""
    with contextlib.suppress(docker.errors.APIError):  # NotFound, or "container is not paused"
        container.unpause()


def restart_docker_daemon(wait_s: float = 90.0) -> tuple[str, int]:
    """Stop dockerd and start it again the way ``python -m agentgym_envs.sandbox setup`` does.

    Returns:
        A description of what was done, and the new daemon's pid (a child of this process).

    Raises:
        RuntimeError: The running daemon was not started the project's way, so this harness must not
            restart it with other arguments.
    """
    pid = int(sandbox_system.DOCKERD_PIDFILE.read_text().strip())
    daemon = psutil.Process(pid)
    expected = ["dockerd", *sandbox_system.DOCKERD_ARGS]
    if [Path(daemon.cmdline()[0]).name, *daemon.cmdline()[1:]] != expected:
        raise RuntimeError(f"daemon-restart: expected dockerd running as {' '.join(expected)}, "
                           f"got {' '.join(daemon.cmdline())}; restart it yourself")
    stopped = time.perf_counter()
    daemon.terminate()
    daemon.wait(timeout=wait_s)
    down_s = time.perf_counter() - stopped
    sandbox_system.ensure_docker(install=False, wait_s=wait_s)
    new_pid = int(sandbox_system.DOCKERD_PIDFILE.read_text().strip())
    return (f"dockerd {pid} stopped in {down_s:.1f} s, dockerd {new_pid} answering after "
            f"{time.perf_counter() - stopped:.1f} s"), new_pid


# ----------------------------------------------------------------------------------------- workers


class Worker:
    """One env and its policy, playing episodes back to back; applies the faults aimed at it.

    Args:
        index: Position among the level's workers.
        config: The run's configuration.
        clock: Seconds since the level's window opened.
        service_kwargs: The env arguments that reach the level's shared service (none without one).
    """

    def __init__(self, index: int, config: StressConfig, clock: WindowClock,
                 service_kwargs: Mapping[str, Any]) -> None:
        self.index = index
        self.profile = config.spec.stress
        self.config = config
        self.clock = clock
        self.service_kwargs = dict(service_kwargs)
        self.policy = stress_policy(config, config.seed + index)
        self.rng = np.random.default_rng([config.seed, index])
        self.env: gym.Env | None = None
        self.runner: EpisodeRunner | None = None
        self.setup_error: str | None = None
        self._pending: FaultRecord | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Make the env and start its sandbox (a first reset), outside the window."""
        try:
            kwargs = {**self.profile.kwargs(self.config.settings()), **self.service_kwargs}
            self.env = gym.make(self.config.env_id, **kwargs)
            self.runner = EpisodeRunner(EnvPool(lambda _: self.env), workers=1)
            self.env.reset(seed=self.config.seed + self.index)
        except InfrastructureError as exc:  # no sandbox (SandboxError), no service (ShopUnavailableError, ...)
            self.setup_error = f"worker {self.index}: {exc}"

    def aim(self, fault: FaultRecord) -> bool:
        """Take ``fault`` to apply before the next load call; False when one is already pending."""
        with self._lock:
            if self._pending is not None or self.env is None:
                return False
            self._pending = fault
            return True

    def run(self, deadline_s: float, ledger: Ledger) -> None:
        """Play episodes until ``deadline_s``, recording each as it ends."""
        if self.env is None:
            return
        tasks = self.env.unwrapped.tasks
        while self.clock() < deadline_s:
            task = tasks[int(self.rng.integers(len(tasks)))]
            ledger.add(self.play(task))

    def play(self, task: Task) -> EpisodeRecord:
        """One episode of ``task`` through the episode runner; never raises for a sandbox fault."""
        assert self.runner is not None
        record = EpisodeRecord(worker=self.index, task_id=task.id, started_s=self.clock(), ended_s=0.0)
        agent = FaultingAgent(self)
        episode = self.runner.run(agent, [EpisodeRequest(self.config.env_id, task, group=0, seed=None)])[0]
        if episode.trajectory is None:  # the reset failed (the daemon may be down)
            time.sleep(RESET_RETRY_S)
            record.infra_error, record.detail, record.ended_s = True, episode.error, self.clock()
            return record
        record.tool_calls = tool_call_samples(episode, self.clock)
        agent.observe_fault(episode)
        record.ended_s, record.answered = self.clock(), episode.terminated
        record.correct = episode.success
        record.infra_error = episode.infra_error
        if record.infra_error or not record.correct:
            record.detail = episode.turns[-1].observation[:300] if episode.turns else episode.error
        return record

    def apply_pending(self, action: str) -> tuple[FaultRecord | None, str]:
        """Apply the pending fault if ``action`` is a load call; return it and the action to take."""
        if self.profile.load_action is None or action != self.profile.load_action:
            return None, action
        with self._lock:
            fault, self._pending = self._pending, None
        if fault is None:
            return None, action
        fault.injected_s = self.clock()
        if fault.kind == "timeout":
            fault.detail = "load call replaced by a runaway one"
            assert self.profile.spin_action is not None, "the timeout fault is among the profile's faults"
            return fault, self.profile.spin_action
        sandbox = worker_sandbox(self.env)
        assert sandbox is not None, "a load call runs in a started sandbox"
        fault.detail = (kill_container(sandbox) if fault.kind == "kill"
                        else stall_kernel(sandbox, self.profile.cell_grace_s))
        return fault, action

    def close(self) -> None:
        """Close the env (and with it the sandbox)."""
        if self.env is not None:
            self.env.close()
            self.env = None


class FaultingAgent(ScriptedAgent):
    """A worker's policy as the runner's agent, with the fault aimed at the worker applied at its next load call.

    How the env reported the fault is written down as soon as the step it was injected into returned: at the
    next turn, or (when that step ended the episode) by :meth:`observe_fault` after the episode.

    Attributes:
        fault: The fault applied in this episode, if any.
        fault_turn: Index of the turn it was applied in.
    """

    def __init__(self, worker: Worker) -> None:
        super().__init__(lambda _: worker.policy,
                         shown=None if worker.config.spec.oracle_sees_reference else prompt_only)
        self.worker = worker
        self.fault: FaultRecord | None = None
        self.fault_turn = -1
        self._observed = False

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | None]:
        """The policy's action, or the fault's replacement of it."""
        self.observe_fault(episodes[0])
        (turn,) = super().act(episodes, observations, infos)
        assert turn is not None
        fault, action = self.worker.apply_pending(turn.action)
        if fault is not None:
            self.fault, self.fault_turn = fault, len(episodes[0].turns)
        return [AgentTurn(action)]

    def observe_fault(self, episode: Episode) -> None:
        """Write down how the env reported the fault, once the step it was injected into has returned."""
        if self.fault is None or self._observed or len(episode.turns) <= self.fault_turn:
            return
        turn = episode.turns[self.fault_turn]
        if turn.infra_error:
            self.fault.reported = "infra_error"
        else:
            self.fault.reported = "no error" if turn.ok else "agent error"
        self.fault.observation = " ".join(turn.observation.split())[:160]
        self._observed = True


def tool_call_samples(episode: Episode, clock: WindowClock) -> list[ToolCallSample]:
    """Every tool call of ``episode``, stamped with the window time at which its turn's step returned."""
    calls = iter(episode.tool_calls)
    samples = []
    for turn in episode.turns:
        for _ in turn.tools:
            call = next(calls)
            samples.append(ToolCallSample(clock.at(turn.ended_at), call["latency_s"], call["ok"], call["infra_error"]))
    return samples


# ------------------------------------------------------------------------------------------ levels


@dataclass
class Snapshot:
    """What this process holds: labelled containers, child processes, fds, RSS."""

    containers: dict[str, str]
    children: dict[int, str]
    fds: int
    rss_mb: float

    @classmethod
    def take(cls, docker_used: bool) -> Snapshot:
        """Take one now (after a garbage collection, so that dropped clients close their sockets)."""
        gc.collect()
        me = psutil.Process()
        children = {}
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                if child.status() != psutil.STATUS_ZOMBIE:
                    children[child.pid] = child.name()
        return cls(containers=own_containers() if docker_used else {}, children=children,
                   fds=len(os.listdir("/proc/self/fd")), rss_mb=me.memory_info().rss / 2**20)


def own_containers() -> dict[str, str]:
    """Short id to name of every sandbox container this process labelled."""
    from agentgym_envs.sandbox.docker import OWNER_LABEL, connect

    client = connect()
    try:
        listed = client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={os.getpid()}"})
        return {container.short_id: container.name for container in listed}
    finally:
        client.close()


def sweep_own_containers() -> int:
    """Remove this process's labelled containers (the leak check's clean-up)."""
    from agentgym_envs.sandbox.docker import OWNER_LABEL, sweep

    return sweep(extra_labels=[f"{OWNER_LABEL}={os.getpid()}"])


def compare(before: Snapshot, after: Snapshot, spared: set[int]) -> Leaks:
    """What ``after`` holds that ``before`` did not; ``spared`` pids (a restarted dockerd) are no leak."""
    processes = [f"{pid} {name}" for pid, name in after.children.items()
                 if pid not in before.children and pid not in spared]
    return Leaks(containers=sorted(set(after.containers) - set(before.containers)), processes=processes,
                 fds=after.fds - before.fds, rss_mb=after.rss_mb - before.rss_mb)


def with_descendants(pids: set[int]) -> set[int]:
    """``pids`` and every process under them (a restarted dockerd and its containerd)."""
    found = set(pids)
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.update(child.pid for child in psutil.Process(pid).children(recursive=True))
    return found


def close_service(service: SharedService | None) -> int | None:
    """Stop the level's shared service, once every env closed; return the sessions it still held then (None
    when it did not answer or cannot tell)."""
    if service is None:
        return 0
    try:
        return service.sessions()
    except InfrastructureError:
        return None
    finally:
        service.close()


def start_workers(workers: Sequence[Worker], parallelism: int) -> None:
    """Start every worker's sandbox, ``parallelism`` at a time."""
    with ThreadPoolExecutor(max_workers=parallelism) as pool:
        list(pool.map(Worker.start, workers))


def close_workers(workers: Sequence[Worker]) -> None:
    """Close every worker's env, 16 at a time."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(Worker.close, workers))


def schedule_faults(config: StressConfig) -> list[FaultRecord]:
    """One record per fault, fired at evenly spaced points of the window, leaving its last third to recover in."""
    count = len(config.faults)
    return [FaultRecord(kind=kind, worker=None, scheduled_s=config.duration_s * (i + 1) / (count + 2),
                        expected=EXPECTED_REPORT[kind]) for i, kind in enumerate(config.faults)]


class Injector(threading.Thread):
    """Fires the scheduled faults: aims worker faults at a random idle worker, injects service faults itself.

    Args:
        faults: The level's scheduled faults.
        workers: The level's workers.
        clock: Seconds since the window opened.
        seed: Seed of the choice of workers.
        service: The level's shared service (the env spec's), for the service faults.
    """

    def __init__(self, faults: Sequence[FaultRecord], workers: Sequence[Worker], clock: Callable[[], float],
                 seed: int, service: SharedService | None = None) -> None:
        super().__init__(name="stress-injector", daemon=True)
        self.faults, self.workers, self.clock, self.service = faults, workers, clock, service
        self.rng = np.random.default_rng(seed)
        self.stop = threading.Event()
        self.spared_pids: set[int] = set()
        self.error: str | None = None

    def run(self) -> None:
        """Wait for each fault's time, then fire it."""
        for fault in self.faults:
            if self.stop.wait(max(0.0, fault.scheduled_s - self.clock())):
                return
            try:
                self._fire(fault)
            except (RuntimeError, OSError, psutil.Error, InfrastructureError) as exc:
                fault.detail, self.error = f"could not inject: {exc}", f"{fault.kind}: {exc}"

    def _fire(self, fault: FaultRecord) -> None:
        if fault.kind in SERVICE_FAULTS:  # every worker at once: done here, over when the service answers again
            fault.injected_s = self.clock()
            fault.detail = self._service_fault(fault.kind)
            fault.over_s = self.clock()
            return
        for index in self.rng.permutation(len(self.workers)):
            if self.workers[index].aim(fault):
                fault.worker = int(index)
                return

    def _service_fault(self, kind: str) -> str:
        """Inject a service fault (blocking until the service is back); returns what was done."""
        if kind == "daemon-restart":
            detail, new_pid = restart_docker_daemon()
            self.spared_pids.add(new_pid)
            return detail
        if self.service is None:
            raise RuntimeError(f"{kind}: expected a shared service, got none (the env's spec names none)")
        return self.service.stall(STALL_MARGIN_S) if kind == "service-stall" else self.service.restart()


def judge_faults(faults: Sequence[FaultRecord], episodes: Sequence[EpisodeRecord]) -> int:
    """Fill in each fault's outcome from the recorded episodes; return the infra errors no fault explains."""
    explained: set[int] = set()
    for fault in faults:
        if fault.injected_s is None:
            continue
        hit = sorted((e for e in episodes if fault.worker in (None, e.worker) and e.ended_s >= fault.injected_s),
                     key=lambda e: e.ended_s)
        if fault.worker is not None and hit:
            fault.over_s = hit[0].ended_s  # a worker fault is over when the episode it hit ends
        overlapped = [e for e in hit if fault.over_s is not None and e.started_s <= fault.over_s]
        struck = [e for e in overlapped if e.infra_error]
        explained.update(id(e) for e in struck)
        fault.infra_episodes = len(struck)
        if fault.kind in SERVICE_FAULTS:
            judge_service_fault(fault, overlapped)
        fault.recovered_s = recovery_time(fault, hit)
    return sum(e.infra_errors for e in episodes if e.infra_errors and id(e) not in explained)


def unsolved_outside_faults(faults: Sequence[FaultRecord], episodes: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The episodes that ended unsolved with no infra error, and that no injected fault overlapped (call after
    :func:`judge_faults`, which sets when each fault was over)."""
    def overlapped(episode: EpisodeRecord, fault: FaultRecord) -> bool:
        return (fault.injected_s is not None and fault.worker in (None, episode.worker)
                and episode.ended_s >= fault.injected_s and (fault.over_s is None or episode.started_s <= fault.over_s))

    return [e for e in episodes if not e.correct and not e.infra_error
            and not any(overlapped(e, fault) for fault in faults)]


def judge_service_fault(fault: FaultRecord, overlapped: Sequence[EpisodeRecord]) -> None:
    """How the env reported a service fault, from the episodes it overlapped: ``agent error`` when one of them
    was scored as the agent's failure (the oracles fail no task otherwise), else ``infra_error`` when one ended
    with it, else ``no error``."""
    struck = [e for e in overlapped if e.infra_error]
    wrong = [e for e in overlapped if not e.infra_error and not e.correct]
    fault.wrong_episodes = len(wrong)
    fault.reported = "agent error" if wrong else "infra_error" if struck else "no error"
    fault.observation = next((" ".join(e.detail.split())[:160] for e in [*wrong, *struck]), "")


def recovery_time(fault: FaultRecord, hit: Sequence[EpisodeRecord]) -> float | None:
    """When the worker hit (every worker that played on, after a service fault) next finished a correct episode.

    After a service fault the episode must also have started after the service answered again.
    """
    firsts: dict[int, float] = {}
    for episode in hit:
        fresh = fault.worker is not None or (fault.over_s is not None and episode.started_s >= fault.over_s)
        if episode.correct and not episode.infra_error and fresh:
            firsts.setdefault(episode.worker, episode.ended_s)
    players = {episode.worker for episode in hit}
    if not firsts or set(firsts) != players:
        return None
    return max(firsts.values())


def memory_watch(stop: threading.Event, floor: list[float]) -> None:
    """Keep the lowest available host memory (GB) seen until ``stop`` is set."""
    while not stop.wait(0.5):
        floor[0] = min(floor[0], psutil.virtual_memory().available / 2**30)


@contextlib.contextmanager
def watching_memory() -> Iterator[list[float]]:
    """Sample the host's available memory in the background; yields a one-item list holding the minimum."""
    floor = [psutil.virtual_memory().available / 2**30]
    stop = threading.Event()
    thread = threading.Thread(target=memory_watch, args=(stop, floor), daemon=True)
    thread.start()
    try:
        yield floor
    finally:
        stop.set()
        thread.join()


def play_window(workers: Sequence[Worker], config: StressConfig, clock: Callable[[], float],
                ledger: Ledger, injector: Injector) -> list[str]:
    """Run every worker until the window closes (each finishes its episode); return worker crashes."""
    crashes: list[str] = []
    injector.start()
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(worker.run, config.duration_s, ledger) for worker in workers]
        for worker, future in zip(workers, futures, strict=True):
            error = future.exception()
            if error is not None:
                crashes.append(f"worker {worker.index}: {type(error).__name__}: {error}")
    injector.stop.set()
    injector.join()
    return crashes


def run_level(config: StressConfig, concurrency: int) -> LevelReport:
    """Set up ``concurrency`` workers, play the window (injecting faults), close, check for leaks."""
    docker_used = runs_agent_code(config.env_id) and config.backend == "docker"
    close_verifier_workers()  # process-wide, started on demand: each level's leak check starts and ends without them
    before = Snapshot.take(docker_used)
    clock = WindowClock()
    started = time.perf_counter()
    start_service = config.spec.service
    service = start_service(config.split) if start_service is not None else None
    workers = [Worker(i, config, clock, service.env_kwargs() if service else {}) for i in range(concurrency)]
    start_workers(workers, config.setup_parallelism)
    setup_s = time.perf_counter() - started
    ledger, faults = Ledger(), schedule_faults(config)
    injector = Injector(faults, workers, clock, config.seed, service)
    with watching_memory() as floor:
        clock.open()
        crashes = play_window(workers, config, clock, ledger, injector)
        window_end = clock()
    started = time.perf_counter()
    close_workers(workers)
    sessions = close_service(service)
    teardown_s = time.perf_counter() - started
    setup_errors = [w.setup_error for w in workers if w.setup_error]
    del workers
    close_verifier_workers()
    leaks = compare(before, Snapshot.take(docker_used), with_descendants(injector.spared_pids))
    leaks.sessions = sessions
    if docker_used and leaks.containers:
        sweep_own_containers()
    if injector.error:
        crashes.append(f"injector: {injector.error}")
    episodes = ledger.episodes()
    unexplained = judge_faults(faults, episodes)
    level = summarize(config, concurrency, episodes, faults, leaks,
                      timings=(setup_s, max(0.0, window_end - config.duration_s), teardown_s),
                      errors=(setup_errors, crashes), min_available_gb=floor[0])
    level.unexplained_infra_errors, level.records = unexplained, episodes
    level.unsolved = len(unsolved_outside_faults(faults, episodes))
    return level


def summarize(config: StressConfig, concurrency: int, episodes: Sequence[EpisodeRecord],
              faults: list[FaultRecord], leaks: Leaks, *, timings: tuple[float, float, float],
              errors: tuple[list[str], list[str]], min_available_gb: float) -> LevelReport:
    """Turn the recorded episodes of one level into its report."""
    calls = [call for episode in episodes for call in episode.tool_calls]
    in_window = [call.latency_s * 1000.0 for call in calls if call.ended_s <= config.duration_s]
    p50, p95, p99 = np.percentile(in_window, [50, 95, 99]).tolist() if in_window else (0.0, 0.0, 0.0)
    setup_s, drain_s, teardown_s = timings
    return LevelReport(
        concurrency=concurrency, setup_s=setup_s, window_s=config.duration_s, drain_s=drain_s,
        teardown_s=teardown_s, episodes=len(episodes), correct=sum(e.correct for e in episodes),
        tool_calls=len(calls), calls_per_s=len(in_window) / config.duration_s, p50_ms=p50, p95_ms=p95, p99_ms=p99,
        agent_errors=sum(e.agent_errors for e in episodes), infra_errors=sum(e.infra_errors for e in episodes),
        unexplained_infra_errors=0, unsolved=0, setup_errors=errors[0], worker_crashes=errors[1],
        min_available_gb=min_available_gb, faults=faults, leaks=leaks)


def run_stress(config: StressConfig, *, on_level: Callable[[LevelReport], None] | None = None) -> Report:
    """Run every concurrency level of ``config`` and return the report.

    Args:
        config: What to run.
        on_level: Called with each level's report as soon as it is done (to print it).
    """
    report = Report(env_id=config.env_id, backend=config.backend if runs_agent_code(config.env_id) else "-",
                    limits=asdict(config.limits), calls_per_episode=config.calls_per_episode,
                    machine={"cpus": str(os.cpu_count()), "platform": platform.platform(),
                             "python": platform.python_version(),
                             "memory_gb": f"{psutil.virtual_memory().total / 2**30:.1f}"})
    for concurrency in config.concurrency:
        level = run_level(config, concurrency)
        report.levels.append(level)
        if on_level is not None:
            on_level(level)
    return report


# ------------------------------------------------------------------------------------------ output


def level_table(report: Report) -> Table:
    """One row per concurrency level."""
    table = Table(title=f"Tool-concurrency stress: {report.env_id} ({report.backend}, "
                        f"{report.machine['cpus']} CPUs, {report.machine['memory_gb']} GB)")
    columns = ("N", "setup s", "episodes", "correct", "calls/s", "p50 ms", "p95 ms", "p99 ms", "agent err",
               "infra err", "leaks", "min free GB")
    for column in columns:
        table.add_column(column, justify="right")
    for level in report.levels:
        table.add_row(str(level.concurrency), f"{level.setup_s:.1f}", str(level.episodes), str(level.correct),
                      f"{level.calls_per_s:,.1f}", f"{level.p50_ms:,.1f}", f"{level.p95_ms:,.1f}",
                      f"{level.p99_ms:,.1f}", str(level.agent_errors), str(level.infra_errors),
                      leak_text(level.leaks), f"{level.min_available_gb:.1f}")
    return table


def leak_text(leaks: Leaks) -> str:
    """``none``, or what leaked."""
    if not leaks.any:
        return "none"
    sessions = "?" if leaks.sessions is None else str(leaks.sessions)
    return f"{len(leaks.containers)} ctr, {len(leaks.processes)} proc, {leaks.fds:+d} fd, {sessions} sess"


def fault_table(report: Report) -> Table:
    """One row per injected fault of every level."""
    table = Table(title="Injected faults")
    for column in ("N", "fault", "worker", "at s", "expected", "reported", "recovered at s", "infra eps",
                   "wrong eps", "ok", "what the env said / detail"):
        table.add_column(column, justify="left" if column.startswith(("what", "fault", "expected", "rep")) else "right")
    for level in report.levels:
        for fault in level.faults:
            at = "-" if fault.injected_s is None else f"{fault.injected_s:.1f}"
            recovered = "never" if fault.recovered_s is None else f"{fault.recovered_s:.1f}"
            worker = "all" if fault.worker is None else str(fault.worker)
            table.add_row(str(level.concurrency), fault.kind, worker, at, fault.expected, fault.reported, recovered,
                          str(fault.infra_episodes), str(fault.wrong_episodes), "yes" if fault.passed else "NO",
                          f"{fault.observation[:90]} [{fault.detail}]")
    return table


def target_line(level: LevelReport) -> str:
    """The concurrency target of a level in one line, with its numbers: every episode of N concurrent ones free of
    infrastructure errors (outside injected faults) and nothing left behind."""
    met = level.unexplained_infra_errors == 0 and not level.leaks.any and not level.setup_errors
    leaked = (f"{len(level.leaks.containers)} containers, {len(level.leaks.processes)} processes, "
              f"{max(level.leaks.fds, 0)} descriptors, {level.leaks.sessions} sessions" if level.leaks.any
              else "nothing")
    return (f"target: {level.concurrency} concurrent episodes with 0 infra errors and nothing leaked: "
            f"{'MET' if met else 'MISSED'} ({level.episodes} episodes, {level.unexplained_infra_errors} infra errors "
            f"outside injected faults, {len(level.setup_errors)} setup errors, {leaked} leaked)")


def render(report: Report, console: Console) -> None:
    """Print the level table, the fault table and any problem in words."""
    console.print(level_table(report))
    if any(level.faults for level in report.levels):
        console.print(fault_table(report))
    for level in report.levels:
        for problem in [*level.setup_errors, *level.worker_crashes, *level.leaks.containers, *level.leaks.processes]:
            console.print(f"[red]N={level.concurrency}[/red]: {problem}")
        unsolved = unsolved_outside_faults(level.faults, level.records)
        if unsolved:
            console.print(f"[red]N={level.concurrency}[/red]: {len(unsolved)} of {level.episodes} episodes ended "
                          f"unsolved outside any injected fault (a wrong answer, or none by the turn limit); the "
                          f"first ended with: {unsolved[0].detail[:200]!r}")
        console.print(f"N={level.concurrency}: setup {level.setup_s:.1f} s, window {level.window_s:g} s, "
                      f"drain {level.drain_s:.1f} s, teardown {level.teardown_s:.1f} s, "
                      f"{level.tool_calls} tool calls, RSS {level.leaks.rss_mb:+.0f} MB")
        console.print(target_line(level))
    verdict = "CLEAN" if report.clean else "NOT CLEAN"
    console.print(f"{verdict}: zero infra errors and unsolved episodes outside injected faults, nothing leaked, "
                  "every fault reported as expected and recovered from")


def write_json(report: Report, path: Path) -> None:
    """Write the report (every level, fault and leak) as JSON."""
    payload = asdict(report)
    for level in payload["levels"]:
        del level["records"]
    payload["clean"] = report.clean
    path.write_text(json.dumps(payload, indent=2) + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stress", description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, choices=SPECS.names(), metavar="ENV",
                        help=f"registered env id or alias to stress, among {', '.join(SPECS.names())}")
    parser.add_argument("--concurrency", default="1,8,64,256", help="comma-separated concurrency levels")
    parser.add_argument("--duration", type=float, default=30.0, help="measured window per level, in seconds")
    parser.add_argument("--backend", default="docker", choices=("docker", "bwrap"), help="sandbox backend")
    parser.add_argument("--calls-per-episode", type=int, default=4, help="load calls before the oracle's answer")
    parser.add_argument("--faults", default="", help=f"comma-separated faults to inject once per level: {FAULTS}")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="SandboxLimits.timeout_s of each sandbox")
    parser.add_argument("--memory-mb", type=int, default=None,
                        help="SandboxLimits.memory_mb of each sandbox (default: the env's stress profile's, else "
                             f"{DEFAULT_MEMORY_MB})")
    parser.add_argument("--setup-parallelism", type=int, default=8, help="sandboxes started at once in set-up")
    parser.add_argument("--split", default="train", help="task split")
    parser.add_argument("--seed", type=int, default=0, help="seed of task draws and fault targets")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the report to PATH")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when the run is not clean")
    return parser


def config_from_args(args: argparse.Namespace) -> StressConfig:
    """A :class:`StressConfig` from parsed arguments."""
    try:
        levels = tuple(int(level) for level in args.concurrency.split(",") if level.strip())
    except ValueError as exc:
        raise SystemExit(f"--concurrency: expected comma-separated integers, got {args.concurrency!r}") from exc
    faults = tuple(name.strip() for name in args.faults.split(",") if name.strip())
    memory_mb = args.memory_mb or env_spec(args.env).stress.memory_mb or DEFAULT_MEMORY_MB
    limits = SandboxLimits(timeout_s=args.timeout_s, memory_mb=memory_mb)
    return StressConfig(env_id=args.env, concurrency=levels, duration_s=args.duration, backend=args.backend,
                        limits=limits, calls_per_episode=args.calls_per_episode, faults=faults,
                        setup_parallelism=args.setup_parallelism, split=args.split, seed=args.seed)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the stress test; status 1 with ``--check`` when the run is not clean."""
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc
    console = Console(width=max(Console().width, 160))  # the fault table needs the room
    report = run_stress(config, on_level=lambda level: console.print(
        f"level N={level.concurrency} done: {level.episodes} episodes, {level.calls_per_s:,.1f} calls/s"))
    render(report, console)
    if args.json is not None:
        write_json(report, args.json)
    return 1 if args.check and not report.clean else 0


if __name__ == "__main__":
    sys.exit(main())
