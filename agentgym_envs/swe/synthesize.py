"""SWE task synthesis: run a repository's suite in sandboxes and keep the planted bugs its tests catch.

The env-layer half of the one SWE task builder, :mod:`tasks.swe.synthesis`: that module says how a repository
becomes tasks (its source, the candidate bugs, the slots, the verdicts combined across backends, the tasks and
the bundle's manifest); this one runs the suites. Every run of a repository's suite is in its own
per-repository environment (the source's ``environment``: a pin's pinned requirements and editable install, a
``src/`` layout's package root; :func:`open_backends` opens its image on docker and binds its tree on bwrap, built
once per environment as ``python -m agentgym_envs.swe env build`` builds it), and its tasks record it, so that
grading runs them there too. For one repository (:func:`~tasks.swe.synthesis.pin_source`,
:func:`~tasks.swe.synthesis.folder_source`):

1. the clean suite runs :data:`~tasks.swe.synthesis.RUNS_PER_TREE` times on each backend (docker and bubblewrap
   by default: their pytest versions and site-packages differ, so outcome sets differ), each run the whole suite;
2. single-bug candidates (:func:`tasks.swe.bugs.bug_candidates`, seeded) are judged one by one: the
   buggy tree's whole suite runs twice on every backend, in parallel across backends, and
   :func:`tasks.swe.keep.judge_candidate` judges each backend's runs. The first run that decides a drop stops
   the candidate everywhere (more runs can only shrink FAIL_TO_PASS and PASS_TO_PASS, so an early drop is
   final). A test is in FAIL_TO_PASS / PASS_TO_PASS only where every backend agrees
   (:func:`~tasks.swe.synthesis.combine_judgements`);
3. tasks with 2 or 3 bugs combine kept single bugs in different functions (SWE-smith's way of making harder
   tasks from validated bugs), and the combination is judged again. It is kept only if every one of its bugs
   still matters: the tests that bug breaks on its own meet the combination's lists, so fixing every other bug
   leaves a test failing;
4. each kept bug becomes an instance (:func:`tasks.swe.instances.make_instance`) at the hint level its slot
   asks for; levels 2 and 3 quote the first FAIL_TO_PASS test's failure output on the buggy tree.

Every bug run has a time limit (:data:`~tasks.swe.synthesis.TIMEOUT_FACTOR` times the slowest clean run, at least
:data:`~tasks.swe.synthesis.MIN_TIMEOUT_S`); a timeout drops the candidate. The whole suite runs for every bug: a
subset of test files would only be sound if it were known which tests can reach the mutated code, and the suites
here take a second or two, so the early drop on the first deciding run is the speed-up instead. Every run uses
the pytest configuration the task records (:func:`~agentgym_envs.swe.testing.repo_pytest_config`), as grading
does.

Usage::

    python -m agentgym_envs.swe.synthesize --pin toolz --count 20 --seed 0 --out tasks.jsonl [--backends docker,bwrap]
    python -m agentgym_envs.swe.synthesize --path ~/src/mylib --source mylib --tests tests --count 10 --out mine.jsonl
    python -m agentgym_envs.swe.synthesize --bundle            # rebuild tasks/data/swe/ (see build_bundle)

The output is task JSONL (:func:`tasks.read_tasks`; an env's ``tasks=``), or SWE-bench instances with
``--format swebench``; kept and dropped counts per reason and the timings are printed. The builder's names
(``pin_source``, ``SynthesisSettings``, ...) are importable from here too.

Example:
    >>> source = pin_source("toolz")                                          # doctest: +SKIP
    >>> with open_backends(["bwrap"], environment=source.environment) as sandboxes:  # doctest: +SKIP
    ...     report = synthesize(source, SynthesisSettings(count=5, seed=0), sandboxes)
    >>> report.summary()                                                      # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import re
import secrets
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agentgym_envs.errors import ImageBuildError, SandboxUnavailableError
from agentgym_envs.sandbox import KernelSandbox, SandboxLimits, open_sandbox
from agentgym_envs.swe.environment import environment_sandbox
from agentgym_envs.swe.testing import (
    ENV_SITE_PATH_SOURCE,
    TESTBED,
    PytestConfig,
    prepare_tree,
    repo_pytest_config,
    run_tests,
)
from tasks.errors import TaskError
from tasks.records import Task, read_tasks
from tasks.swe.environments import RepoEnvironment
from tasks.swe.instances import SWEInstance, make_instance, write_instances
from tasks.swe.keep import Judgement, judge_candidate
from tasks.swe.synthesis import (
    BUNDLE_FOLDER,
    BUNDLE_PLAN,
    COMBINATION_TRIES,
    DIFFICULTY_SLOTS,
    MAX_CANDIDATES_PER_TASK,
    MIN_TIMEOUT_S,
    TIMEOUT_FACTOR,
    KeptBug,
    SuiteSource,
    SynthesisError,
    SynthesisReport,
    SynthesisSettings,
    bug_candidates,
    bundle_entry,
    bundle_header,
    bundled_pins,
    combine_judgements,
    drop_category,
    every_bug_matters,
    folder_source,
    pin_record,
    pin_source,
    plant,
    report_tasks,
    task_plan,
    top_level_modules,
    write_tasks,
)
from tasks.swe.testrun import TestRun

__all__ = [  # the builder's names are re-exported: scripts import them from here
    "BUNDLE_FOLDER",
    "BUNDLE_PLAN",
    "CLEAN_TIMEOUT_S",
    "DEFAULT_BACKENDS",
    "DIFFICULTY_SLOTS",
    "OUTPUT_TIMEOUT_S",
    "SYNTHESIS_LIMITS",
    "SuiteSource",
    "SynthesisError",
    "SynthesisReport",
    "SynthesisSettings",
    "Synthesizer",
    "build_bundle",
    "combine_judgements",
    "drop_category",
    "failing_output",
    "failure_section",
    "folder_source",
    "main",
    "open_backends",
    "pin_source",
    "refuse_installed",
    "synthesize",
    "task_plan",
    "validated_tasks",
]

DEFAULT_BACKENDS = ("docker", "bwrap")
"""The backends a synthesis runs on unless told otherwise (those of them that work here)."""
CLEAN_TIMEOUT_S = 600.0
"""The time limit of a clean run."""
OUTPUT_TIMEOUT_S = 60.0
"""The time limit of the run that records a failing test's output."""
SYNTHESIS_LIMITS = SandboxLimits(timeout_s=120.0, memory_mb=2048, pids=128, cpus=1.0, output_bytes=65_536,
                                 disk_mb=256)
"""Room for a real repository's suite (boltons writes .pyc files for 70 modules)."""


PYTEST_START = f"""import os, site, sys
{ENV_SITE_PATH_SOURCE}sys.path.insert(0, os.getcwd())
import pytest
raise SystemExit(pytest.console_main())"""
"""``python -c`` code that starts pytest with the repository's environment (its packages and editable install at
:data:`~agentgym_envs.swe.testing.ENV_SITE`) ahead of the interpreter's own packages, as the grading run's
bootstrap does."""

OUTPUT_CELL = r'''
def _agentrl_failing_output(repo, config, test_id, timeout_s, cap, nonce):
    import json, os, subprocess, sys
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.dirname(config), "LANG": "C.UTF-8",
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-B", "-c", @START@, "-p", "no:cacheprovider", "-c", config, "--rootdir", repo,
               "-q", "--tb=short", "--color=no", test_id]
    try:
        output = subprocess.run(command, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=timeout_s, start_new_session=True).stdout
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout or b""
    text = output.decode("utf-8", "replace")
    header = max(text.find("= FAILURES ="), text.find("= ERRORS ="))
    text = text[text.rfind("\n", 0, header) + 1:] if header >= 0 else text
    print(nonce + ":" + json.dumps({"output": text[-cap:]}))
'''.replace("@START@", repr(PYTEST_START))
"""A cell that prints the failure output of one test (pytest started by :data:`PYTEST_START`)."""


def failure_section(output: str) -> str:
    """The FAILURES (or ERRORS) section of pytest's ``-q --tb=short`` output, without its header and the summary
    after it; when the header was cut off, everything before the summary."""
    lines = output.splitlines()
    start = next((index for index, line in enumerate(lines) if re.match(r"^=+ (FAILURES|ERRORS) =+$", line)), -1)
    end = next((index for index in range(start + 1, len(lines)) if lines[index].startswith("====")), len(lines))
    return "\n".join(lines[start + 1:end]).strip()


def failing_output(sandbox: KernelSandbox, test_id: str, config: PytestConfig, *,
                   timeout_s: float = OUTPUT_TIMEOUT_S) -> str:
    """The failure output of one test on the tree now in the sandbox's ``testbed/`` (for a problem statement;
    not a graded run).

    Raises:
        SynthesisError: The harness cell failed.
    """
    nonce = secrets.token_hex(8)
    cap = max(1000, sandbox.limits.output_bytes // 3)  # JSON escaping may double it; the kernel cuts past the limit
    scratch = f".agentrl-output-{nonce}"
    config_path = f"{scratch}/{config.name}"
    call = (f"import os, shutil\n_agentrl_failing_output(os.path.abspath({TESTBED!r}), "
            f"os.path.abspath({config_path!r}), {test_id!r}, {timeout_s!r}, {cap!r}, {nonce!r})\n"
            f"shutil.rmtree({scratch!r}, ignore_errors=True)")
    sandbox.write_file(config_path, config.data)
    result = sandbox.run_code(OUTPUT_CELL + "\n" + call, timeout_s=timeout_s + 30.0)
    match = re.search(rf"(?:^|\n){nonce}:(\{{.*\}})", result.output)
    if not result.ok or match is None:
        raise SynthesisError(f"expected the failing output of {test_id}, got: {result.output[-500:]}")
    return failure_section(json.loads(match.group(1))["output"])


@contextlib.contextmanager
def open_backends(backends: Sequence[str] | None = None, *, environment: RepoEnvironment | None = None,
                  limits: SandboxLimits = SYNTHESIS_LIMITS,
                  log: Callable[[str], object] = print) -> Iterator[dict[str, KernelSandbox]]:
    """One sandbox per backend, closed on exit.

    Args:
        backends: The backends to use, all of which must work; ``None``: those of :data:`DEFAULT_BACKENDS` that
            work here (said through ``log``), at least one.
        environment: The repository's environment (a :class:`~tasks.swe.synthesis.SuiteSource`'s): each sandbox
            has it (its image on docker, its tree on bwrap; built first when not cached); ``None``: the plain
            sandbox.
        limits: The sandboxes' limits.
        log: Where notes and build lines go.

    Raises:
        SandboxUnavailableError: A requested backend does not work here, or none of the defaults does.
        ImageBuildError: The environment could not be built (which package, and why).
    """
    sandboxes: dict[str, KernelSandbox] = {}
    try:
        for backend in backends or DEFAULT_BACKENDS:
            try:
                sandboxes[backend] = (open_sandbox(backend, limits) if environment is None
                                      else environment_sandbox(backend, environment, limits, log=log))
            except SandboxUnavailableError as error:
                if backends:
                    raise
                log(f"note: the {backend} backend does not work here, synthesizing without it: {error}")
        if not sandboxes:
            raise SandboxUnavailableError(f"expected one of the backends {DEFAULT_BACKENDS} to work, got none")
        yield sandboxes
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()


class Synthesizer:
    """Judges candidates of one repository on several sandboxes (one per backend, reused for every tree).

    Use :func:`synthesize`; this class holds the state one synthesis shares: the clean runs, the kept single bugs
    and how often each was used, the combinations tried, and the report.
    """

    def __init__(self, source: SuiteSource, settings: SynthesisSettings, sandboxes: Mapping[str, KernelSandbox],
                 log: Callable[[str], object]) -> None:
        self.source = source
        self.config = repo_pytest_config(source.repo_source, source.files)
        self.settings = settings
        self.sandboxes = dict(sandboxes)
        self.log = log
        self.rng = random.Random(settings.seed)
        self.report = SynthesisReport(backends=tuple(sandboxes))
        self.clean_runs: dict[str, list[TestRun]] = {}
        self.timeout_s = 0.0
        self.singles: list[KeptBug] = []
        self.used_alone: set[int] = set()
        self.uses: Counter[int] = Counter()
        self.tried: set[str] = set()
        self.candidates = bug_candidates(source.files, source.library, random.Random(settings.seed), bugs=1)
        self.pool = ThreadPoolExecutor(max_workers=len(self.sandboxes), thread_name_prefix="swe-synthesis")

    def close(self) -> None:
        """Stop the worker threads."""
        self.pool.shutdown(wait=True)

    def _timed(self, phase: str, started: float) -> None:
        self.report.seconds[phase] += time.monotonic() - started

    def run_clean(self) -> None:
        """Run the clean suite on every backend and set the bug runs' time limit.

        Raises:
            SynthesisError: A clean run is not ok, or no test passes.
        """
        started = time.monotonic()
        for backend, sandbox in self.sandboxes.items():
            prepare_tree(sandbox, self.source.files)
            runs = [self._suite_run(sandbox, CLEAN_TIMEOUT_S) for _ in range(self.settings.runs_per_tree)]
            bad = [run for run in runs if not run.ok or "passed" not in run.outcomes.values()]
            if bad:
                raise SynthesisError(f"expected the clean suite of {self.source.spec.repo} to run with passing tests "
                                     f"on {backend}, got a run {bad[0].status!r} with "
                                     f"{dict(Counter(bad[0].outcomes.values()))}: {bad[0].detail}")
            self.clean_runs[backend] = runs
        slowest = max(run.duration_s for runs in self.clean_runs.values() for run in runs)
        self.timeout_s = self.settings.timeout_s or max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * slowest)
        self.report.timeout_s = self.timeout_s
        self._timed("clean", started)

    def _suite_run(self, sandbox: KernelSandbox, timeout_s: float) -> TestRun:
        return run_tests(sandbox, None, timeout_s=timeout_s, config=self.config,
                         suite_paths=self.source.spec.test_paths)

    def _judge_on(self, backend: str, tree: Mapping[str, bytes], stop: threading.Event) -> Judgement | None:
        """One backend's verdict on a buggy tree; ``None`` when another backend dropped it first."""
        sandbox = self.sandboxes[backend]
        prepare_tree(sandbox, tree)
        runs: list[TestRun] = []
        verdict = None
        for _ in range(self.settings.runs_per_tree):
            if stop.is_set():
                return None
            runs.append(self._suite_run(sandbox, self.timeout_s))
            verdict = judge_candidate(self.clean_runs[backend], runs)
            if not verdict.kept:
                stop.set()
                return verdict
        return verdict

    def judge(self, tree: Mapping[str, bytes]) -> Judgement:
        """The verdict of every backend on a buggy tree, combined (:func:`combine_judgements`)."""
        started = time.monotonic()
        stop = threading.Event()
        futures = [self.pool.submit(self._judge_on, backend, tree, stop) for backend in self.sandboxes]
        verdicts = [future.result() for future in futures]
        self._timed("judging", started)
        return combine_judgements([verdict for verdict in verdicts if verdict is not None])

    def _drop(self, reason: str) -> None:
        self.report.dropped[drop_category(reason)] += 1

    def next_single(self) -> KeptBug | None:
        """Judge candidates until one is kept; ``None`` when they (or ``max_candidates``) run out."""
        limit = self.settings.max_candidates
        for bug in self.candidates:
            if limit is not None and self.report.candidates >= limit:
                return None
            self.report.candidates += 1
            judgement = self.judge(bug.buggy_tree(self.source.files))
            if self.report.candidates % 25 == 0:
                self.log(f"{self.source.spec.repo}: {self.report.candidates} candidates judged, "
                         f"{self.report.kept_singles} kept")
            if judgement.kept:
                self.report.kept_singles += 1
                self.singles.append(KeptBug(bug, judgement))
                self.tried.add(bug.bug_patch)
                return self.singles[-1]
            self._drop(judgement.reason)
        return None

    def single_for_slot(self) -> KeptBug | None:
        """A kept single bug not yet made into a one-bug instance."""
        for index, kept in enumerate(self.singles):
            if index not in self.used_alone:
                self.used_alone.add(index)
                self.uses[index] += 1
                return kept
        kept = self.next_single()
        if kept is not None:
            self.used_alone.add(len(self.singles) - 1)
            self.uses[len(self.singles) - 1] += 1
        return kept

    def _pick_parts(self, bugs: int) -> list[int] | None:
        """Indices of ``bugs`` kept singles in different functions, least used first (ties broken by the rng),
        forming a combination not tried before; ``None`` when the kept singles allow none."""
        order = sorted(range(len(self.singles)), key=lambda index: (self.uses[index], self.rng.random()))
        for combination in itertools.islice(itertools.combinations(order, bugs), 200):
            sites = [site for index in combination for site in self.singles[index].bug.sites]
            if len({(path, site.function) for path, site in sites}) == len(sites) and \
                    self._key(combination) not in self.tried:
                return list(combination)
        return None

    def _key(self, combination: Sequence[int]) -> str:
        return "\n".join(sorted(self.singles[index].bug.bug_patch for index in combination))

    def combination(self, bugs: int) -> KeptBug | None:
        """A kept combination of ``bugs`` kept single bugs (drawing more singles when needed)."""
        for _ in range(COMBINATION_TRIES):
            parts = self._pick_parts(bugs)
            if parts is None:
                if self.next_single() is None:
                    return None
                continue
            self.tried.add(self._key(parts))
            kept = self._judge_combination(parts)
            if kept is not None:
                return kept
        return None

    def _judge_combination(self, parts: Sequence[int]) -> KeptBug | None:
        """Plant the parts together and judge them; the combination if kept and every bug matters."""
        self.report.combinations += 1
        try:
            bug = plant(self.source.files, [site for index in parts for site in self.singles[index].bug.sites])
        except TaskError as error:
            self._drop(f"the bugs could not be planted together ({type(error).__name__})")
            return None
        judgement = self.judge(bug.buggy_tree(self.source.files))
        if not judgement.kept:
            self._drop(judgement.reason)
            return None
        if not every_bug_matters(judgement, [self.singles[index] for index in parts]):
            self._drop("a bug of the combination breaks none of its tests")
            return None
        for index in parts:
            self.uses[index] += 1
        return KeptBug(bug, judgement)

    def instance(self, kept: KeptBug, level: int) -> SWEInstance:
        """The instance of a kept bug at a hint level (levels 2 and 3 quote the failing test's output)."""
        started = time.monotonic()
        output = ""
        if level > 1:
            backend = next(iter(self.sandboxes))
            prepare_tree(self.sandboxes[backend], kept.bug.buggy_tree(self.source.files))
            output = failing_output(self.sandboxes[backend], kept.judgement.fail_to_pass[0], self.config)
        self._timed("output", started)
        return make_instance(self.source.spec, self.source.files, kept.bug, kept.judgement, level=level,
                             failing_output=output)


def synthesize(source: SuiteSource, settings: SynthesisSettings, sandboxes: Mapping[str, KernelSandbox], *,
               log: Callable[[str], object] = print) -> SynthesisReport:
    """Synthesize up to ``settings.count`` instances of a repository (see the module docstring).

    Args:
        source: The repository (:func:`pin_source`, :func:`folder_source`).
        settings: Count, seed, runs, time limit.
        sandboxes: One sandbox per backend (:func:`open_backends`); every tree runs on each.
        log: Where progress lines go.

    Returns:
        The report; fewer instances than asked when the candidates (or ``max_candidates``) ran out.

    Raises:
        SynthesisError: The clean suite does not run cleanly on a backend.
        SandboxError: A sandbox failed.
    """
    if not sandboxes:
        raise SynthesisError("expected at least one sandbox to run the suites in, got none")
    if not source.spec.test_paths:
        raise SynthesisError(f"expected the suite's paths of {source.spec.repo} (e.g. tests), got none")
    refuse_installed(source, sandboxes)
    started = time.monotonic()
    synthesizer = Synthesizer(source, settings, sandboxes, log)
    try:
        synthesizer.run_clean()
        for number, slot in enumerate(task_plan(settings.count, synthesizer.rng, settings.difficulties), 1):
            kept = synthesizer.single_for_slot() if slot.bugs == 1 else synthesizer.combination(slot.bugs)
            if kept is None:
                log(f"{source.spec.repo}: candidates ran out at instance {number} of {settings.count}")
                break
            synthesizer.report.instances.append(synthesizer.instance(kept, slot.level))
            synthesizer.report.slots.append(slot)
    finally:
        synthesizer.close()
    synthesizer.report.seconds["total"] = time.monotonic() - started
    return synthesizer.report


FIND_MODULES = """
import importlib.util as _agentrl_util, json as _agentrl_json
print({marker!r} + _agentrl_json.dumps({{name: getattr(_agentrl_util.find_spec(name), "origin", None) or "found"
                                         if _agentrl_util.find_spec(name) else None for name in {names!r}}}))
del _agentrl_util, _agentrl_json
"""
"""A cell that prints, after a marker, where the sandbox's Python finds each of ``names`` (None: nowhere)."""


def refuse_installed(source: SuiteSource, sandboxes: Mapping[str, KernelSandbox]) -> None:
    """Refuse a repository whose package the sandbox's Python can already import.

    A planted bug's fix is then readable in the sandbox: the installed release is the untouched code, and copying
    it over the repository resolves every task (the ``find-history-or-fix`` probe of ``benchmarks.probes`` found
    ``six`` in Debian's and the host's site-packages).

    Raises:
        SynthesisError: A backend's Python finds one of the repository's top-level modules outside the repository.
    """
    names = top_level_modules(source.library)
    marker = f"agentrl-modules-{secrets.token_hex(8)}:"
    for backend, sandbox in sandboxes.items():
        result = sandbox.run_code(FIND_MODULES.format(marker=marker, names=names))
        line = next((line for line in result.output.splitlines() if line.startswith(marker)), None)
        if line is None:
            raise SynthesisError(f"could not ask the {backend} sandbox's Python for {names}: {result.output[-300:]}")
        found = {name: origin for name, origin in json.loads(line[len(marker):]).items() if origin}
        if found:
            raise SynthesisError(
                f"expected a repository the {backend} sandbox's Python does not have, got {source.spec.repo} whose "
                f"modules it imports from {found}: the installed release would be the fix of every planted bug; "
                "choose another repository")


def build_bundle(folder: Path, backends: Sequence[str] = DEFAULT_BACKENDS, *,
                 plan: Mapping[str, Sequence[tuple[str, int, int]]] = BUNDLE_PLAN,
                 log: Callable[[str], object] = print) -> dict[str, Any]:
    """Synthesize the bundled splits into ``folder`` (``<split>.jsonl`` and ``MANIFEST.json``).

    Each repository runs in its own environment (its sandboxes opened for it on every backend of ``backends``,
    all of which must work). Its instances are then validated on every backend as a user's would be
    (:func:`agentgym_envs.swe.validation.validate`: the fix and no change graded by SWEEnv in the task's
    environment); only those usable on every backend are kept, and the manifest's record of the repository counts
    the others per backend and reason. A repository the bundle already in ``folder`` holds with the same inputs
    (:func:`~tasks.swe.synthesis.bundled_pins`) is kept as it is, not made again. Each repository's tasks are also
    kept in ``folder/.partial/`` as they are made, so a build that stops goes on where it stopped; the folder is
    removed at the end.

    Returns:
        The manifest written.

    Raises:
        SandboxUnavailableError: A backend does not work here.
        ImageBuildError: A repository's environment could not be built.
        SynthesisError: A repository's clean suite does not run cleanly.
    """
    partial = folder / ".partial"
    partial.mkdir(parents=True, exist_ok=True)
    bundled = bundled_pins(folder, plan, backends)
    manifest: dict[str, Any] = {**bundle_header(plan, backends), "pins": {}, "splits": {}}
    for split, entries in plan.items():
        tasks: list[Task] = []
        for name, count, seed in entries:
            if name in bundled:
                pin_tasks, manifest["pins"][name] = bundled[name]
                log(f"{split}/{name}: kept the {len(pin_tasks)} instances already bundled")
            else:
                pin_tasks, manifest["pins"][name] = _pin_tasks(partial, split, name, count, seed, backends, log)
            tasks += pin_tasks
        write_tasks(tasks, folder / f"{split}.jsonl")
        manifest["splits"][split] = bundle_entry(tasks, f"{split}.jsonl", [name for name, _, _ in entries])
    manifest["build_seconds"] = round(sum(record["seconds"]["total"] for record in manifest["pins"].values()), 1)
    (folder / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(partial)
    return manifest


def _pin_tasks(partial: Path, split: str, name: str, count: int, seed: int, backends: Sequence[str],
               log: Callable[[str], object]) -> tuple[list[Task], dict[str, Any]]:
    """One repository's validated tasks and manifest record, from ``partial`` if an earlier build made them."""
    tasks_file, record_file = partial / f"{name}.jsonl", partial / f"{name}.json"
    if tasks_file.is_file() and record_file.is_file():
        return read_tasks(tasks_file), json.loads(record_file.read_text(encoding="utf-8"))
    source = pin_source(name)
    settings = SynthesisSettings(count=count, seed=seed, max_candidates=MAX_CANDIDATES_PER_TASK * count)
    with open_backends(backends, environment=source.environment, log=log) as sandboxes:
        report = synthesize(source, settings, sandboxes, log=log)
    log(f"{split}/{name}:\n{report.summary()}")
    started = time.monotonic()
    tasks, validation = validated_tasks(report_tasks(source, report), backends)
    report.seconds["validation"] = time.monotonic() - started
    report.seconds["total"] += report.seconds["validation"]
    record = {**pin_record(source, report, split, seed), "validation": validation}
    log(f"{split}/{name}: {len(tasks)} of {len(report.instances)} instances usable on {', '.join(backends)}")
    write_tasks(tasks, tasks_file)
    record_file.write_text(json.dumps(record), encoding="utf-8")
    return tasks, record


def validated_tasks(tasks: Sequence[Task], backends: Sequence[str]) -> tuple[list[Task], dict[str, Any]]:
    """The tasks usable on every backend (:func:`~agentgym_envs.swe.validation.validate`, strict rules; the
    backends validate at the same time), and a summary: verdicts per backend (reason -> count) and how many were
    dropped."""
    from agentgym_envs.swe.validation import validate

    with ThreadPoolExecutor(max_workers=len(backends), thread_name_prefix="swe-validation") as pool:
        reports = dict(zip(backends, pool.map(lambda backend: validate(tasks, sandbox=backend), backends),
                           strict=True))
    usable = {task.id for task in tasks}
    summary: dict[str, Any] = {}
    for backend, report in reports.items():
        summary[backend] = dict(sorted(report["summary"].items()))
        usable &= {task_id for task_id, verdict in report["instances"].items() if verdict["usable"]}
    kept = [task for task in tasks if task.id in usable]
    return kept, {"per_backend": summary, "dropped": len(tasks) - len(kept)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agentgym_envs.swe.synthesize",
                                     description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--pin", help="a pinned repository of tasks.swe.repos (e.g. toolz)")
    where.add_argument("--path", type=Path, help="a repository folder of your own, with a pytest suite")
    where.add_argument("--bundle", type=Path, nargs="?", const=BUNDLE_FOLDER,
                       help=f"rebuild the bundled splits into this folder (default {BUNDLE_FOLDER})")
    parser.add_argument("--source", action="append", default=[],
                        help="with --path: a package folder or module bugs may be planted in (repeatable)")
    parser.add_argument("--tests", action="append", default=[],
                        help="with --path: what pytest runs for the whole suite, e.g. tests (repeatable)")
    parser.add_argument("--name", help="with --path: the repository's short name (default: the folder's name)")
    parser.add_argument("--empty-config", action="store_true",
                        help="with --path: run pytest with an empty configuration instead of the repository's")
    parser.add_argument("--count", type=int, default=20, help="instances wanted (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of candidates, slots and combinations")
    parser.add_argument("--backends", help="comma-separated backends, e.g. docker,bwrap (default: those that work)")
    parser.add_argument("--timeout", type=float, help="a bug run's time limit in seconds (default: from the clean "
                        f"runs, x{TIMEOUT_FACTOR:g}, at least {MIN_TIMEOUT_S:g})")
    parser.add_argument("--max-candidates", type=int, help="the most single-bug candidates to judge")
    parser.add_argument("--format", choices=("tasks", "swebench"), default="tasks",
                        help="tasks: task JSONL for an env's tasks= (default); swebench: SWE-bench instance JSONL")
    parser.add_argument("--out", type=Path, help="the JSONL file to write (not with --bundle)")
    return parser


def _source(args: argparse.Namespace) -> SuiteSource:
    if args.pin:
        return pin_source(args.pin)
    if not args.source or not args.tests:
        raise SynthesisError("expected --source PKG and --tests PATH with --path, got "
                             f"--source {args.source} --tests {args.tests}")
    return folder_source(args.path, args.source, args.tests, name=args.name, own_config=not args.empty_config)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (2 with the message on a synthesis or task error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.bundle is None) == (args.out is None):
        parser.error("expected --out FILE with --pin or --path, and no --out with --bundle")
    backends = args.backends.split(",") if args.backends else None
    try:
        if args.bundle is not None:
            manifest = build_bundle(args.bundle, backends or DEFAULT_BACKENDS)
            print(f"wrote the SWE bundle to {args.bundle} ({manifest['build_seconds']:.0f} s of build time recorded "
                  "over its repositories): "
                  + ", ".join(f"{split} {entry['count']}" for split, entry in manifest["splits"].items()))
            return 0
        source = _source(args)
        settings = SynthesisSettings(count=args.count, seed=args.seed, timeout_s=args.timeout,
                                     max_candidates=args.max_candidates)
        with open_backends(backends, environment=source.environment) as sandboxes:
            report = synthesize(source, settings, sandboxes)
    except (SynthesisError, TaskError, SandboxUnavailableError, ImageBuildError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.format == "tasks":
        write_tasks(report_tasks(source, report), args.out)
    else:
        write_instances(report.instances, args.out)
    print(report.summary())
    print(f"wrote {len(report.instances)} instances to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
