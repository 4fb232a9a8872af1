"""SWE-v0 speed: episode set-up, tool calls and grading through the env, against a fresh sandbox per episode.

For each backend (docker, bwrap) that works here, in one run, on the bundled tasks of ``--split``:

    =============  =============================================================================================
    row            one sample
    =============  =============================================================================================
    reset          ``env.reset()`` on a warm env: the sandbox reset, the task's repository shipped into
                   ``testbed/`` (one archive), the shell set up (a different task each time, tasks cycled)
    bash           ``env.step`` of a ``bash`` call ``ls``
    editor view    ``env.step`` of an ``editor`` ``view`` of the file the task's fix edits
    grading        ``env.step`` of ``submit`` after the oracle's edits (the reference fix through the editor):
                   the tree read back, the sandbox reset, the grading tree written, the FAIL_TO_PASS and
                   PASS_TO_PASS tests run under the guard; a sample fails unless the task is resolved
    ... (naive)    the same in a fresh sandbox with a fresh copy of the repository, the way one would do it
                   without a warm pool: ``docker run --rm -i --network none <image>`` (bwrap: a new bwrap
                   namespace like the sandbox's) whose Python unpacks the repository from a tar on its stdin,
                   then runs ``ls`` (reset) or pytest on the task's tests over the fixed tree (grading)
    =============  =============================================================================================

A tool call's latency is the env's own clock, ``info["tool_calls"][0]["latency_s"]``; a reset and a grading step
are timed around ``env.reset`` and ``env.step``. ``x warm`` is a naive row's p50 over the warm row's p50. Every
timed row follows untimed warm-up calls: one reset per timed task (the sandbox started, the tree cache warm, as in
training where tasks recur) and one graded episode.

Then, unless ``--no-targets``, the issue's four targets for per-repository environments
(:mod:`agentgym_envs.swe.environment`), each printed with its number and MET or MISSED:

    ======================  ===================================================================================
    target                  how it is measured
    ======================  ===================================================================================
    reset p50 < 1 s         ``env.reset`` over the tasks of one repository of ``--split`` in its own environment
                            (:func:`~tasks.swe.instances.with_pin_environment`: its image on docker, its tree on
                            bwrap), on a warm env (one sandbox, reused from episode to episode)
    grading <= 1.5x bare    the ``submit`` step after the reference fix (p50) over a bare pytest run of the same
                            test files in the same sandbox and environment (``bash``: :func:`pytest_argv`)
    build < 60 s, cached    an environment of :data:`BUILD_REQUIREMENTS` (5 distributions) built from nothing (an
                            empty cache, pip's own included, so the wheels come from PyPI), then asked again: no
                            rebuild (pip not run, the same image or tree)
    16 episodes, 4 envs     16 threads, each an env on one of the four bundled repositories in its own
                            environment, play the reference fix and submit: every task resolved, 0 infrastructure
                            errors, no container or process left once closed
    ======================  ===================================================================================

``python -m benchmarks.stress --env agentrl/SWE-v0 --split all --concurrency 16`` measures the last one under
load (for a time window, with faults if asked).

Example:
    python -m benchmarks.speed swe                       # both backends, ~1-2 minutes
    python -m benchmarks.speed swe --backends bwrap --episodes 30 --json swe_speed.json
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import platform
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich import box
from rich.console import Console
from rich.table import Table

from agentgym_envs import make
from agentgym_envs.errors import ImageBuildError, SandboxUnavailableError
from agentgym_envs.policies import tool_call_action
from agentgym_envs.policies.swe_oracle import fix_actions
from agentgym_envs.swe.env import test_ids
from agentgym_envs.timing import Sample, milliseconds, percentiles, time_calls, timed_reset, tool_call
from tasks import Task, load_split
from tasks.swe.patches import apply_patch, parse_patch

ENV_ID = "agentrl/SWE-v0"
TARGET_RESET_P50_S = 1.0
"""Target: the median ``env.reset`` on a warm env, in seconds."""
TARGET_GRADING_OVERHEAD = 1.5
"""Target: the grading step's p50 over a bare pytest run's p50 of the same tests in the same environment."""
TARGET_BUILD_S = 60.0
"""Target: an environment of :data:`BUILD_REQUIREMENTS` built from nothing, in seconds."""
TARGET_CONCURRENCY = 16
"""Target: concurrent episodes over :data:`TARGET_ENVIRONMENTS` repository environments, 0 infra errors."""
TARGET_ENVIRONMENTS = 4
BUILD_REQUIREMENTS = ("freezegun==1.5.1", "python-dateutil==2.9.0.post0", "six==1.16.0", "idna==3.7",
                      "packaging==24.1")
"""The environment the build target builds: five distributions (freezegun needs python-dateutil, which needs
six)."""

MAX_EPISODE_STEPS = 100_000
"""The turn limit of the benchmark's env: the tool-call rows are turns of a single episode."""

TURNS_PER_EPISODE = 20
"""Tool calls timed per episode (under the registered turn limit of 30)."""

NAIVE_TIMEOUT_S = 300.0
"""Longest a fresh sandbox may take."""

NAIVE_FOLDER = "/tmp/testbed"
"""Where the naive way unpacks the repository (writable by the sandbox's user on both backends)."""

NAIVE_PROGRAM = """
import os, subprocess, sys, tarfile
tarfile.open(fileobj=sys.stdin.buffer, mode="r|").extractall({folder!r})
sys.exit(subprocess.call({argv!r}, cwd={folder!r}, env={{**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}}))
"""
"""What the naive way's Python runs: unpack the repository from stdin, run ``argv`` in it (with pytest's plugin
autoload off, as the env grades: an installed plugin that imports ``html.parser`` fails six's ``test_lazy``), exit
with its status."""


@dataclass(frozen=True)
class Row:
    """Timings of one (backend, what, via) triple, in milliseconds.

    Attributes:
        backend: ``docker`` or ``bwrap``.
        what: ``reset``, ``bash``, ``editor view`` or ``grading``.
        via: ``env.reset``, ``tool call``, ``env.step`` or ``naive``.
        method: What one sample runs, in words.
        calls: Timed samples (warm-up excluded).
        p50_ms: Median latency.
        p99_ms: 99th percentile latency.
        warm_ratio: ``p50_ms`` over the warm row's ``p50_ms`` (naive rows only).
        failed: Samples that did not succeed (a failed call, an unresolved task, a non-zero exit).
        infra_errors: Samples the env reported as infrastructure errors.
    """

    backend: str
    what: str
    via: str
    method: str
    calls: int
    p50_ms: float
    p99_ms: float
    warm_ratio: float | None = None
    failed: int = 0
    infra_errors: int = 0


@dataclass(frozen=True)
class TargetResult:
    """One of the issue's targets on one backend.

    Attributes:
        target: The target, in words.
        backend: ``docker`` or ``bwrap``.
        measured: What was measured, with its numbers.
        met: Whether the target was met.
    """

    target: str
    backend: str
    measured: str
    met: bool

    def line(self) -> str:
        """``backend: target: MET|MISSED (measured)``."""
        return f"{self.backend}: {self.target}: {'MET' if self.met else 'MISSED'} ({self.measured})"


@dataclass
class BackendReport:
    """Everything measured on one backend.

    Attributes:
        backend: ``docker`` or ``bwrap``.
        rows: The measured rows, in display order.
        target_met: True when the reset p50 is under :data:`TARGET_RESET_P50_S`.
        targets: The per-repository environment targets (none with ``--no-targets``).
    """

    backend: str
    rows: list[Row] = field(default_factory=list)
    target_met: bool = False
    targets: list[TargetResult] = field(default_factory=list)

    def row(self, what: str, via: str) -> Row:
        """The row of ``what`` measured ``via``.

        Raises:
            KeyError: No such row.
        """
        for row in self.rows:
            if (row.what, row.via) == (what, via):
                return row
        raise KeyError(f"expected a row ({what!r}, {via!r}), got {[(r.what, r.via) for r in self.rows]}")


@dataclass
class Report:
    """Everything one run measured.

    Attributes:
        tasks: Ids of the tasks reset, viewed and graded (cycled).
        backends: One report per measured backend.
        skipped: Backends not measured, with the reason.
        settings: The run's sample counts and split.
        target_reset_p50_s: The reset target.
        machine: CPU count, platform and Python version of the host.
    """

    tasks: list[str]
    backends: list[BackendReport] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    target_reset_p50_s: float = TARGET_RESET_P50_S
    machine: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ rows


def summarize(backend: str, what: str, via: str, method: str, samples: Sequence[Sample],
              warm: Row | None = None) -> Row:
    """A :class:`Row` of ``samples``, failures counted, with the ratio to ``warm`` when given."""
    p50, p99 = percentiles(samples)
    return Row(backend=backend, what=what, via=via, method=method, calls=len(samples), p50_ms=p50, p99_ms=p99,
               warm_ratio=None if warm is None else p50 / warm.p50_ms,
               failed=sum(not sample.ok for sample in samples),
               infra_errors=sum(sample.infra_error for sample in samples))


def measure_resets(env: gym.Env, backend: str, tasks: Sequence[Task], episodes: int) -> Row:
    """``episodes`` timed resets, each on the next of ``tasks`` (cycled)."""
    samples = [timed_reset(env, tasks[index % len(tasks)]) for index in range(episodes)]
    return summarize(backend, "reset", "env.reset", "sandbox reset, repository shipped, shell set up", samples)


def edited_file(task: Task) -> str:
    """The first file the task's reference fix edits (the file the ``editor view`` row opens)."""
    return next(str(section.new_path) for section in parse_patch(task.answer) if section.new_path is not None)


def tool_rows(env: gym.Env, backend: str, task: Task, calls: int) -> list[Row]:
    """A ``bash ls`` row and an ``editor view`` row, ``env.step`` latencies in one episode of ``task``."""
    bash = time_calls(in_episode(env, task, tool_call(env, "bash", command="ls")), calls)
    view = time_calls(in_episode(env, task, tool_call(env, "editor", command="view", path=edited_file(task))), calls)
    return [summarize(backend, "bash", "tool call", "env.step: bash ls", bash),
            summarize(backend, "editor view", "tool call", "env.step: editor view", view)]


def in_episode(env: gym.Env, task: Task, call: Callable[[], Sample]) -> Callable[[], Sample]:
    """``call`` in an episode of ``task``, a new one (reset untimed) every :data:`TURNS_PER_EPISODE` calls (the
    env's own turn limit ends an episode)."""
    made = [0]

    def call_in_episode() -> Sample:
        if made[0] % TURNS_PER_EPISODE == 0:
            env.reset(options={"task": task})
        made[0] += 1
        return call()
    return call_in_episode


def graded_episode(env: gym.Env, task: Task) -> Sample:
    """Reset on ``task``, apply the reference fix through the editor, and time the ``submit`` step that grades.

    The sample is ok when every edit went through and the task is resolved (reward 1, episode over).
    """
    env.reset(options={"task": task})
    edits_ok, infra = True, False
    for action in fix_actions(task.answer):
        _, _, _, _, info = env.step(action)
        edits_ok &= all(record["ok"] for record in info["tool_calls"])
        infra |= any(record["infra_error"] for record in info["tool_calls"])
    started = time.perf_counter()
    _, reward, terminated, _, info = env.step(tool_call_action("submit"))
    elapsed = (time.perf_counter() - started) * 1000.0
    infra |= bool(info.get("infra_error"))
    return Sample(elapsed, ok=edits_ok and terminated and reward >= 1.0, infra_error=infra)


def measure_grading(env: gym.Env, backend: str, tasks: Sequence[Task], gradings: int) -> Row:
    """``gradings`` graded episodes over ``tasks`` (cycled), after one untimed."""
    graded = iter(range(gradings + 1))
    samples = time_calls(lambda: graded_episode(env, tasks[next(graded) % len(tasks)]), gradings, warmup=1)
    return summarize(backend, "grading", "env.step", "env.step: submit after the reference fix", samples)


# ----------------------------------------------------------------------------------------------- naive


def tree_archive(files: Mapping[str, bytes]) -> bytes:
    """An uncompressed tar of ``files`` (path -> bytes), readable by every user."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, data in sorted(files.items()):
            member = tarfile.TarInfo(path)
            member.size, member.mode = len(data), 0o644
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def pytest_argv(python: str, task: Task) -> list[str]:
    """Plain pytest, with no configuration file or cache, on the test files that hold the task's FAIL_TO_PASS and
    PASS_TO_PASS tests, whole and in file order, as the env's grading collects them (the ids on their own would
    run in the task's order: six's ``test_lazy`` fails after a test that imports ``html.parser``)."""
    files = sorted({test_id.split("::", 1)[0] for test_id in test_ids(task)})
    return [python, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null", "--rootdir", ".", *files]


def sandbox_prefix(env: gym.Env, backend: str) -> tuple[list[str], str]:
    """The command that starts a fresh sandbox of ``backend`` running Python with stdin attached, and the path of
    that Python inside it.

    Docker: ``docker run --rm -i --network none`` of the env's image (as its default user). bwrap: a new namespace
    like the env's sandbox (:meth:`~agentgym_envs.sandbox.bwrap.BwrapSandbox.python_argv`).
    """
    sandbox = env.unwrapped.sandbox
    if backend == "docker":
        return ["docker", "run", "--rm", "-i", "--network", "none", sandbox.image, "python3", "-I"], "python3"
    argv = sandbox.python_argv()
    return argv, argv[argv.index("--") + 1]


def naive_call(prefix: Sequence[str], files: Mapping[str, bytes], argv: Sequence[str]) -> Sample:
    """One fresh sandbox: the tree archived (timed too: a fresh copy), unpacked inside, ``argv`` run there."""
    started = time.perf_counter()
    program = NAIVE_PROGRAM.format(folder=NAIVE_FOLDER, argv=list(argv))
    completed = subprocess.run([*prefix, "-c", program], input=tree_archive(files), capture_output=True,
                               timeout=NAIVE_TIMEOUT_S)
    return Sample((time.perf_counter() - started) * 1000.0, ok=completed.returncode == 0)


def naive_rows(env: gym.Env, backend: str, tasks: Sequence[Task], calls: int, warm: Mapping[str, Row]) -> list[Row]:
    """The naive set-up (unpack, ``ls``) and grading (unpack the fixed tree, pytest) over ``tasks`` (cycled)."""
    prefix, python = sandbox_prefix(env, backend)
    trees = [env.unwrapped.repository_tree(task) for task in tasks]
    fixed = [apply_patch(tree, task.answer) for tree, task in zip(trees, tasks, strict=True)]
    method = "docker run --rm -i" if backend == "docker" else "bwrap ... python3"
    rows = []
    for what, make_call in (
            ("reset", lambda index: naive_call(prefix, trees[index], ["ls"])),
            ("grading", lambda index: naive_call(prefix, fixed[index], pytest_argv(python, tasks[index])))):
        samples = time_calls(cycled(make_call, len(tasks)), calls, warmup=1)
        rows.append(summarize(backend, what, "naive", f"{method}: tree from a tar, "
                              + ("ls" if what == "reset" else "pytest"), samples, warm=warm[what]))
    return rows


def cycled(call: Callable[[int], Sample], count: int) -> Callable[[], Sample]:
    """``call`` on 0, 1, ..., count - 1, 0, ... at each call."""
    position = [0]

    def next_call() -> Sample:
        index = position[0] % count
        position[0] += 1
        return call(index)
    return next_call


# ----------------------------------------------------------------------------- per-repository environments


def bare_pytest(env: gym.Env, task: Task) -> Sample:
    """Reset on ``task``, apply the reference fix, and time a bare pytest run of the test files that hold its tests
    (:func:`pytest_argv`: no configuration and no plugin autoload, as the task is graded), through ``bash`` in the
    same sandbox and environment (ok: the tests passed)."""
    env.reset(options={"task": task})
    for action in fix_actions(task.answer):
        env.step(action)
    _, _, _, _, info = env.step(tool_call_action("bash", command="PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "
                                                                 + shlex.join(pytest_argv("python", task))))
    (record,) = info["tool_calls"]
    return Sample(record["latency_s"] * 1000.0, ok=record["ok"], infra_error=record["infra_error"])


def one_repository(tasks: Sequence[Task]) -> list[Task]:
    """The tasks of the first task's repository, each in its repository's own environment (one environment, so
    that resets reuse one warm sandbox)."""
    from tasks.swe.instances import with_pin_environment

    repo = tasks[0].metadata.get("repo")
    return [with_pin_environment(task) for task in tasks if task.metadata.get("repo") == repo]


def environment_rows(backend: str, tasks: Sequence[Task], settings: Mapping[str, Any]) -> tuple[list[Row],
                                                                                                list[TargetResult]]:
    """Reset, grading and bare pytest rows of one repository in its own environment, and the reset and grading
    overhead targets."""
    chosen = one_repository(tasks)
    env = make(ENV_ID, sandbox=backend, tasks=chosen, max_episode_steps=MAX_EPISODE_STEPS)
    try:
        for task in chosen:
            env.reset(options={"task": task})  # untimed: the environment built, the sandbox started, trees cached
        via = f"own env ({chosen[0].metadata['repo']})"
        reset = dataclasses.replace(measure_resets(env, backend, chosen, settings["episodes"]), via=via)
        grading = dataclasses.replace(measure_grading(env, backend, chosen, settings["gradings"]), via=via)
        bare_samples = time_calls(cycled(lambda index: bare_pytest(env, chosen[index]), len(chosen)),
                                  settings["gradings"], warmup=1)
        bare = summarize(backend, "bare pytest", via, "bash: python -m pytest on the fixed tree", bare_samples)
    finally:
        env.close()
    overhead = grading.p50_ms / bare.p50_ms
    targets = [
        TargetResult(f"reset p50 under {TARGET_RESET_P50_S:g} s with a per-repository environment", backend,
                     f"p50 {reset.p50_ms / 1000.0:.3f} s, p99 {reset.p99_ms / 1000.0:.3f} s over {reset.calls} resets",
                     reset.p50_ms < TARGET_RESET_P50_S * 1000.0 and reset.failed == 0),
        TargetResult(f"grading at most {TARGET_GRADING_OVERHEAD:g}x a bare pytest run", backend,
                     f"{overhead:.2f}x: grading p50 {grading.p50_ms / 1000.0:.3f} s, bare pytest p50 "
                     f"{bare.p50_ms / 1000.0:.3f} s", overhead <= TARGET_GRADING_OVERHEAD
                     and grading.failed + bare.failed == 0)]
    return [reset, grading, bare], targets


def build_target(backend: str) -> TargetResult:
    """Build an environment of :data:`BUILD_REQUIREMENTS` from nothing for ``backend`` (an empty cache for the
    trees and for pip, a version no earlier build has), then ask for it again; the docker image is removed after."""
    from agentgym_envs.swe.environment import environment_image, host_environment_tree
    from tasks.swe.environments import RepoEnvironment

    environment = RepoEnvironment("agentrl/speed-build", "1.0", BUILD_REQUIREMENTS, dist_name="speed-build",
                                  dist_version=f"1.0.dev{time.time_ns()}")
    pip_runs: list[str] = []

    def log(line: str) -> None:
        if "pip install" in line:
            pip_runs.append(line)

    def build() -> str:
        if backend == "docker":
            return environment_image(environment, log=log)
        return str(host_environment_tree(environment, log=log))

    saved = os.environ.get("XDG_CACHE_HOME")
    with tempfile.TemporaryDirectory(prefix="agentrl-speed-build-") as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        try:
            started = time.perf_counter()
            built = build()
            first = time.perf_counter() - started
            started = time.perf_counter()
            again = build()
            cached = time.perf_counter() - started
        except ImageBuildError as exc:
            return TargetResult(f"environment build under {TARGET_BUILD_S:g} s, none when cached", backend,
                                f"the build failed: {str(exc)[:300]}", False)
        finally:
            if saved is None:
                os.environ.pop("XDG_CACHE_HOME", None)
            else:
                os.environ["XDG_CACHE_HOME"] = saved
            _remove_image(backend, environment)
    rebuilt = again != built or len(pip_runs) != 1
    return TargetResult(f"environment build under {TARGET_BUILD_S:g} s, none when cached", backend,
                        f"{len(BUILD_REQUIREMENTS)} requirements built in {first:.1f} s from nothing, "
                        f"{cached:.2f} s when cached ({'rebuilt' if rebuilt else 'not rebuilt'})",
                        first < TARGET_BUILD_S and not rebuilt)


def _remove_image(backend: str, environment: Any) -> None:
    """Remove the build target's image (docker), so that runs do not pile images up."""
    if backend != "docker":
        return
    from agentgym_envs.swe.environment import environment_image_tag

    subprocess.run(["docker", "rmi", "-f", environment_image_tag(environment)], capture_output=True, timeout=120,
                   check=False)


def concurrent_episode(backend: str, task: Task) -> tuple[bool, bool, str]:
    """One env on ``task`` that plays the reference fix and submits: (resolved, infra error, what went wrong)."""
    env = make(ENV_ID, sandbox=backend, tasks=[task], max_episode_steps=MAX_EPISODE_STEPS)
    try:
        env.reset(options={"task": task})
        infra = False
        for action in [*fix_actions(task.answer), tool_call_action("submit")]:
            _, reward, terminated, _, info = env.step(action)
            infra |= bool(info.get("infra_error"))
        return bool(terminated and reward >= 1.0), infra, "" if reward >= 1.0 else str(info.get("grading"))[:200]
    except Exception as exc:  # an env that failed to start or play is counted, named, and the others go on
        return False, True, f"{type(exc).__name__}: {exc}"[:300]
    finally:
        env.close()


def leftovers(backend: str) -> list[str]:
    """What this process left running: its labelled containers (docker), its child processes (bwrap)."""
    if backend == "docker":
        import docker

        from agentgym_envs.sandbox.docker import OWNER_LABEL
        from agentgym_envs.sandbox.labels import SANDBOX_LABEL

        containers = docker.from_env().containers.list(
            all=True, filters={"label": [SANDBOX_LABEL, f"{OWNER_LABEL}={os.getpid()}"]})
        return [f"container {container.short_id}" for container in containers]
    import psutil

    return [f"process {child.pid} {child.name()}" for child in psutil.Process().children(recursive=True)]


def concurrency_target(backend: str) -> TargetResult:
    """:data:`TARGET_CONCURRENCY` concurrent episodes over the bundled repositories (one task of each, in its own
    environment, built beforehand), each its own env in a thread; then what was left."""
    from concurrent.futures import ThreadPoolExecutor

    from tasks.splits import available_splits
    from tasks.swe.instances import with_pin_environment

    firsts: dict[str, Task] = {}
    for split in available_splits()["SWE"]:
        for task in load_split("SWE", split):
            firsts.setdefault(str(task.metadata.get("repo")), task)
    chosen = [with_pin_environment(task) for task in list(firsts.values())[:TARGET_ENVIRONMENTS]]
    for task in chosen:  # untimed: each environment built once
        concurrent_episode(backend, task)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=TARGET_CONCURRENCY) as workers:
        results = list(workers.map(lambda index: concurrent_episode(backend, chosen[index % len(chosen)]),
                                   range(TARGET_CONCURRENCY)))
    elapsed = time.perf_counter() - started
    left = leftovers(backend)
    resolved, infra = sum(result[0] for result in results), sum(result[1] for result in results)
    problems = [result[2] for result in results if result[2]]
    return TargetResult(
        f"{TARGET_CONCURRENCY} concurrent episodes over {len(chosen)} repository environments: 0 infra errors, "
        "nothing leaked", backend,
        f"{resolved}/{len(results)} resolved, {infra} infra errors, {len(left)} left behind{': ' if left else ''}"
        f"{', '.join(left[:3])}, in {elapsed:.1f} s" + (f"; first problem: {problems[0]}" if problems else ""),
        infra == 0 and not left and len(chosen) == TARGET_ENVIRONMENTS)


# --------------------------------------------------------------------------------------------- backends


def unavailable_reason(backend: str) -> str | None:
    """Why ``backend`` cannot run here, or None when it can."""
    if backend == "docker":
        from agentgym_envs.sandbox.system import docker_daemon_reachable

        return None if docker_daemon_reachable() else ("no Docker daemon answers "
                                                         "(run `python -m agentgym_envs.sandbox setup`)")
    from agentgym_envs.sandbox.bwrap import bwrap_available

    return None if bwrap_available() else ("bubblewrap is missing or cannot create namespaces "
                                           "(apt-get install bubblewrap)")


def open_env(backend: str, split: str, tasks: Sequence[Task]) -> gym.Env:
    """The env on ``backend``, reset once on each of ``tasks`` (untimed: the sandbox starts, the trees are cached).

    Raises:
        SandboxUnavailableError, ImageBuildError: The backend cannot run here.
    """
    reason = unavailable_reason(backend)
    if reason is not None:
        raise SandboxUnavailableError(reason)
    env = make(ENV_ID, sandbox=backend, split=split, max_episode_steps=MAX_EPISODE_STEPS)
    try:
        for task in tasks:
            env.reset(options={"task": task})
    except BaseException:
        env.close()
        raise
    return env


def measure_backend(backend: str, tasks: Sequence[Task], settings: Mapping[str, Any]) -> BackendReport:
    """Every row of one backend (the env opened by :func:`open_env`, closed at the end), then, when
    ``settings["targets"]``, the per-repository environment rows and targets."""
    env = open_env(backend, settings["split"], tasks)
    try:
        reset = measure_resets(env, backend, tasks, settings["episodes"])
        tools = tool_rows(env, backend, tasks[0], settings["calls"])
        grading = measure_grading(env, backend, tasks, settings["gradings"])
        naive = naive_rows(env, backend, tasks, settings["naive_calls"], {"reset": reset, "grading": grading})
    finally:
        env.close()
    report = BackendReport(backend, [reset, *tools, grading, *naive], reset.p50_ms < TARGET_RESET_P50_S * 1000.0)
    if settings.get("targets"):
        rows, targets = environment_rows(backend, tasks, settings)
        report.rows += rows
        report.targets = [*targets, build_target(backend), concurrency_target(backend)]
    return report


def run_benchmark(backends: Sequence[str] = ("docker", "bwrap"), *, split: str = "test", tasks: int = 10,
                  episodes: int = 20, calls: int = 30, gradings: int = 10, naive_calls: int = 10,
                  targets: bool = False) -> Report:
    """Measure every row of ``backends`` and return the report.

    Args:
        backends: Which of ``docker`` and ``bwrap`` to measure; an unavailable one is skipped with its reason.
        split: The bundled SWE split whose tasks are used.
        tasks: How many of the split's tasks the rows cycle over (its first ones).
        episodes: Timed resets.
        calls: Timed tool calls per tool row.
        gradings: Timed graded episodes.
        naive_calls: Timed fresh sandboxes per naive row.
        targets: Also measure the per-repository environment targets (see the module docstring; the build
            target fetches wheels from PyPI).

    Returns:
        The report; ``report.backends`` is empty when no backend could run.

    Example:
        >>> report = run_benchmark(["bwrap"], tasks=2, episodes=4, calls=5, gradings=2, naive_calls=2)  # doctest: +SKIP
        >>> report.backends[0].rows[0].what
        'reset'
    """
    chosen = load_split("SWE", split)[:tasks]
    settings = {"split": split, "tasks": len(chosen), "episodes": episodes, "calls": calls, "gradings": gradings,
                "naive_calls": naive_calls, "targets": targets}
    report = Report(tasks=[task.id for task in chosen], settings=settings,
                    machine={"cpus": str(os.cpu_count()), "platform": platform.platform(),
                             "python": platform.python_version()})
    for backend in backends:
        try:
            report.backends.append(measure_backend(backend, chosen, settings))
        except (SandboxUnavailableError, ImageBuildError) as exc:
            report.skipped[backend] = str(exc)
    return report


# ---------------------------------------------------------------------------------------------- report


def target_line(backend: BackendReport) -> str:
    """One sentence: is the backend's reset p50 under the target?"""
    reset = backend.row("reset", "env.reset")
    verdict = "MET" if backend.target_met else "MISSED"
    return (f"{backend.backend}: reset p50 under {TARGET_RESET_P50_S:g} s: {verdict} "
            f"(p50 {reset.p50_ms / 1000.0:.3f} s, p99 {reset.p99_ms / 1000.0:.3f} s)")


def render(report: Report, console: Console) -> None:
    """Print the table, the tasks, the skipped backends and one target line per backend."""
    table = Table(title=f"SWE-v0 speed on {len(report.tasks)} {report.settings.get('split')} tasks "
                        f"({report.machine.get('cpus')} CPUs, Python {report.machine.get('python')})",
                  box=box.SIMPLE_HEAD, caption="x warm = naive p50 / the warm env's p50 of the same row")
    for column in ("backend", "what", "via", "method", "calls", "p50 ms", "p99 ms", "ratio", "failed"):
        table.add_column(column, justify="left" if column in ("backend", "what", "via", "method") else "right",
                         no_wrap=True)
    for backend in report.backends:
        for row in backend.rows:
            ratio = "-" if row.warm_ratio is None else f"{row.warm_ratio:.1f}x warm"
            table.add_row(row.backend, row.what, row.via, row.method, str(row.calls), milliseconds(row.p50_ms),
                          milliseconds(row.p99_ms), ratio, str(row.failed + row.infra_errors))
        table.add_section()
    console.print(table)
    console.print(f"tasks: {', '.join(report.tasks)}")
    for name, reason in report.skipped.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
    for backend in report.backends:
        console.print(target_line(backend))
        for target in backend.targets:
            console.print(target.line())
    if not any(backend.targets for backend in report.backends):
        console.print("the per-repository environment targets were not measured (--no-targets)")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed swe", description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=("docker", "bwrap"), default=["docker", "bwrap"],
                        help="backends to measure (unavailable ones are reported as skipped)")
    parser.add_argument("--split", default="test", help="bundled SWE split (default test)")
    parser.add_argument("--tasks", type=int, default=10, help="tasks the rows cycle over (the split's first)")
    parser.add_argument("--episodes", type=int, default=20, help="timed resets")
    parser.add_argument("--calls", type=int, default=30, help="timed tool calls per tool row")
    parser.add_argument("--gradings", type=int, default=10, help="timed graded episodes")
    parser.add_argument("--naive-calls", type=int, default=10, help="timed fresh sandboxes per naive row")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    parser.add_argument("--targets", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure the per-repository environment targets (PyPI for the build target)")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a backend misses a target")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; status 2 when no backend could run, 1 with --check and a missed target or a failure."""
    args = build_parser().parse_args(argv)
    for name in ("tasks", "episodes", "calls", "gradings", "naive_calls"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}: expected >= 1, got {getattr(args, name)}")
    report = run_benchmark(args.backends, split=args.split, tasks=args.tasks, episodes=args.episodes,
                           calls=args.calls, gradings=args.gradings, naive_calls=args.naive_calls,
                           targets=args.targets)
    render(report, Console(width=None if sys.stdout.isatty() else 150))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
    if not report.backends:
        return 2
    clean = all(row.failed == row.infra_errors == 0 for backend in report.backends for row in backend.rows)
    met = all(backend.target_met and all(target.met for target in backend.targets) for backend in report.backends)
    return 1 if args.check and not (clean and met) else 0


if __name__ == "__main__":
    sys.exit(main())
