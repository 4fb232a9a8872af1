"""The SWE task builder: how a repository becomes SWE tasks, everything but running its test suite.

One builder serves the bundled SWE splits, ``python -m agentgym_envs.swe.synthesize`` and ``python -m tasks.swe
candidates``. For one repository (:func:`pin_source`, a pin of :mod:`tasks.swe.repos`; :func:`folder_source`, a
folder of the user's):

1. candidate bugs are drawn, seeded (:func:`bug_candidates`, :mod:`tasks.swe.bugs`);
2. the env layer (:mod:`agentgym_envs.swe.synthesize`) runs the suite :data:`RUNS_PER_TREE` times per tree on each
   backend and judges every run with :func:`tasks.swe.keep.judge_candidate`; a bug is kept only where every backend
   agrees (:func:`combine_judgements`), and a combination of kept bugs only if every one of its bugs still matters
   (:func:`every_bug_matters`);
3. the instances wanted are slots of a hint level and a number of bugs whose difficulties cycle (:func:`task_plan`);
   each kept bug becomes an instance (:func:`tasks.swe.instances.make_instance`) and a task (:func:`report_tasks`);
4. the bundle (:data:`BUNDLE_PLAN`, written to :data:`BUNDLE_FOLDER`) records how it was built
   (:func:`bundle_header`), each split as :func:`bundle_entry` and each repository as :func:`pin_record`; a
   rebuild keeps the repositories whose inputs did not change (:func:`bundled_pins`).

Which pytest configuration a run uses matters: the pins' own configuration files ask for plugins or options
the sandbox lacks (parse's ``addopts`` wants pytest-cov, toolz's warns), so a pin runs with an empty one, as
its suite was measured (:mod:`tasks.swe.repos`); a user's folder runs with its own by default. The choice is
recorded in each task's ``metadata["repo_source"]["pytest_config"]`` (``"empty"`` or ``"repository"``), and
grading uses the same.

Example:
    >>> settings = SynthesisSettings(count=10, seed=0)
    >>> [slot.difficulty for slot in task_plan(settings.count, random.Random(settings.seed))]
    [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.errors import TaskError, UnknownTaskError
from tasks.records import Task
from tasks.splits import bundle_manifest, load_split
from tasks.swe.bugs import Bug, bug_candidates, plant
from tasks.swe.environments import RepoEnvironment, derive_environment
from tasks.swe.instances import SWEInstance, difficulty_of, pypi_source
from tasks.swe.keep import Judgement
from tasks.swe.repos import RepoSpec, folder_files, library_files, pin, pin_environment, repository_files

__all__ = [
    "BUNDLE_FOLDER",
    "BUNDLE_PLAN",
    "COMBINATION_TRIES",
    "DIFFICULTY_SLOTS",
    "MAX_CANDIDATES_PER_TASK",
    "MIN_TIMEOUT_S",
    "RUNS_PER_TREE",
    "SYNTHESIS_VERSION",
    "TIMEOUT_FACTOR",
    "Bug",
    "KeptBug",
    "LocalRepoSpec",
    "Slot",
    "SuiteSource",
    "SynthesisError",
    "SynthesisReport",
    "SynthesisSettings",
    "bug_candidates",
    "bundle_entry",
    "bundle_header",
    "bundled_pins",
    "combine_judgements",
    "drop_category",
    "every_bug_matters",
    "folder_source",
    "pin_record",
    "pin_source",
    "plant",
    "report_tasks",
    "task_plan",
    "top_level_modules",
    "write_tasks",
]

SYNTHESIS_VERSION = 1
"""Bumped when the driver's choices change what a seed produces."""
RUNS_PER_TREE = 2
"""Runs of the suite per tree and backend (SWE-smith's and SWE-bench's rule: two)."""
MIN_TIMEOUT_S = 20.0
"""The shortest time limit of a bug run."""
TIMEOUT_FACTOR = 5.0
"""A bug run's time limit, as a multiple of the slowest clean run."""
MAX_CANDIDATES_PER_TASK = 15
"""A bundle build judges at most this many single-bug candidates per instance wanted."""
COMBINATION_TRIES = 20
"""Combinations tried for one multi-bug slot before it is given up."""
DIFFICULTY_SLOTS: dict[int, tuple[tuple[int, int], ...]] = {
    difficulty: tuple((level, bugs) for bugs in (1, 2, 3) for level in (3, 2, 1) if difficulty_of(level, bugs) ==
                      difficulty)
    for difficulty in range(1, 6)
}
"""Difficulty -> the ``(hint level, bugs)`` pairs that have it (:func:`tasks.swe.instances.difficulty_of`)."""
_RUN_DROP = re.compile(r"^a run of the (\w+) tree is '(\w+)'")


class SynthesisError(TaskError):
    """A repository cannot be synthesized from: no Python library file or suite, no backend works, the sandbox's
    Python already has its package, or its clean suite does not run cleanly."""


class LocalRepoSpec(RepoSpec):
    """A user's repository, described like a pin so that instances can be made from it (``repo`` is
    ``"local/<name>"``, ``version`` is ``"local"``)."""

    @property
    def repo(self) -> str:
        """The repository's name in SWE-bench's ``repo`` field, e.g. ``"local/mylib"``."""
        return f"local/{self.name}"


@dataclass(frozen=True)
class SuiteSource:
    """A repository to synthesize from.

    Attributes:
        spec: The pin (or a :class:`LocalRepoSpec`): name, version, suite paths.
        files: The clean tree, path -> bytes.
        library: The files bugs may be planted in.
        repo_source: The tasks' ``metadata["repo_source"]``; its ``"pytest_config"`` (``"empty"`` or
            ``"repository"``) says which pytest configuration every run uses.
        environment: The per-repository environment every run of its suite uses, and its tasks' grading
            (``metadata["environment"]``): a pin's :func:`~tasks.swe.repos.pin_environment`, a folder's derived one.
    """

    spec: RepoSpec
    files: Mapping[str, bytes]
    library: tuple[str, ...]
    repo_source: Mapping[str, Any]
    environment: RepoEnvironment


def pin_source(name: str) -> SuiteSource:
    """A pinned repository (fetched with pip into the cache if needed), run with an empty pytest configuration in
    its own environment (:func:`~tasks.swe.repos.pin_environment`).

    Raises:
        UnknownTaskError: No such pin.
        RepoError: The sdist could not be fetched or does not match its pin.
    """
    spec = pin(name)
    files = repository_files(spec)
    library = tuple(sorted(library_files(files, spec.source_folders, spec.test_paths)))
    return SuiteSource(spec=spec, files=files, library=library,
                       repo_source={**pypi_source(spec), "pytest_config": "empty"},
                       environment=pin_environment(spec, files))


def folder_source(folder: str | Path, source_folders: Sequence[str], test_paths: Sequence[str], *,
                  name: str | None = None, own_config: bool = True) -> SuiteSource:
    """A repository folder of the user's, run in the environment derived from its metadata
    (:func:`~tasks.swe.environments.derive_environment`: its dependencies, a ``src/`` layout).

    Args:
        folder: The repository's root.
        source_folders: Package folders or modules bugs may be planted in, relative to the root.
        test_paths: What pytest runs for the whole suite, relative to the root (never mutated; needed to run it).
        name: The repository's short name (the folder's name when ``None``).
        own_config: Run with the repository's pytest configuration (else an empty one).

    Raises:
        RepoError: ``folder`` is not a folder.
        SynthesisError: No Python library file under ``source_folders``.
    """
    files = folder_files(folder)
    library = tuple(sorted(library_files(files, source_folders, test_paths)))
    if not library:
        raise SynthesisError(f"expected Python library files under {list(source_folders)} in {folder}, got none")
    root = Path(folder).resolve()
    spec = LocalRepoSpec(name or root.name, "local", "", "", tuple(source_folders), tuple(test_paths),
                         suite_seconds=0.0, tests_passed=0)
    return SuiteSource(spec=spec, files=files, library=library,
                       repo_source={"kind": "path", "path": str(root),
                                    "pytest_config": "repository" if own_config else "empty"},
                       environment=derive_environment(spec.repo, spec.version, files))


@dataclass(frozen=True)
class SynthesisSettings:
    """What to synthesize.

    Attributes:
        count: Instances wanted.
        seed: Seeds the candidates' order, the slots' hint levels and bug counts, and the combinations.
        runs_per_tree: Runs of each tree per backend.
        timeout_s: A bug run's time limit; ``None``: :data:`TIMEOUT_FACTOR` times the slowest clean run, at
            least :data:`MIN_TIMEOUT_S`.
        max_candidates: The most single-bug candidates judged (``None``: until the slots are filled or the
            candidates run out).
        difficulties: The difficulties the slots cycle through.
    """

    count: int
    seed: int
    runs_per_tree: int = RUNS_PER_TREE
    timeout_s: float | None = None
    max_candidates: int | None = None
    difficulties: tuple[int, ...] = (1, 2, 3, 4, 5)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise SynthesisError(f"expected a count of at least 1 instance, got {self.count}")
        if self.runs_per_tree < 1:
            raise SynthesisError(f"expected at least 1 run per tree, got {self.runs_per_tree}")
        unknown = sorted(set(self.difficulties) - set(DIFFICULTY_SLOTS))
        if unknown or not self.difficulties:
            raise SynthesisError(f"expected difficulties in {sorted(DIFFICULTY_SLOTS)}, got {self.difficulties}")


@dataclass(frozen=True)
class Slot:
    """One instance to make: its hint level and number of bugs."""

    level: int
    bugs: int

    @property
    def difficulty(self) -> int:
        """The instance's difficulty."""
        return difficulty_of(self.level, self.bugs)


def task_plan(count: int, rng: random.Random, difficulties: Sequence[int] = (1, 2, 3, 4, 5)) -> list[Slot]:
    """``count`` slots whose difficulties cycle through ``difficulties``; each slot's (level, bugs) pair is drawn
    from those of its difficulty (:data:`DIFFICULTY_SLOTS`)."""
    return [Slot(*rng.choice(DIFFICULTY_SLOTS[difficulties[index % len(difficulties)]])) for index in range(count)]


@dataclass(frozen=True)
class KeptBug:
    """A bug whose suites every backend agrees on."""

    bug: Bug
    judgement: Judgement


@dataclass
class SynthesisReport:
    """What a synthesis made and dropped.

    Attributes:
        instances: The instances, in slot order.
        slots: Each instance's slot (hint level and number of bugs).
        candidates: Single-bug candidates judged.
        kept_singles: Of those, the kept ones.
        combinations: Multi-bug combinations judged.
        dropped: Drops per reason (single candidates and combinations).
        seconds: Wall time per phase (``clean``, ``judging``, ``output``, ``total``).
        timeout_s: The bug runs' time limit.
        backends: The backends every tree ran on.
    """

    instances: list[SWEInstance] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    candidates: int = 0
    kept_singles: int = 0
    combinations: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    timeout_s: float = 0.0
    backends: tuple[str, ...] = ()

    @property
    def keep_rate(self) -> float:
        """Kept single-bug candidates over those judged."""
        return self.kept_singles / self.candidates if self.candidates else 0.0

    def summary(self) -> str:
        """A few lines for a person: counts, drops per reason, timings."""
        levels = Counter(instance.difficulty for instance in self.instances)
        lines = [f"instances: {len(self.instances)} (per difficulty: {dict(sorted(levels.items()))}) on "
                 f"{', '.join(self.backends)}",
                 f"single-bug candidates: {self.candidates} judged, {self.kept_singles} kept "
                 f"(keep rate {self.keep_rate:.0%}); combinations judged: {self.combinations}",
                 f"bug-run time limit: {self.timeout_s:.0f} s"]
        lines += [f"dropped ({count}): {reason}" for reason, count in self.dropped.most_common()]
        lines.append("seconds: " + ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in self.seconds.items()))
        return "\n".join(lines)


def drop_category(reason: str) -> str:
    """A judgement's reason as a countable category: ``"timeout"`` / ``"error"`` for a run that is not ok (the
    detail differs per run), the reason itself otherwise."""
    match = _RUN_DROP.match(reason)
    return f"{match.group(2)} run with the bug" if match else reason


def combine_judgements(judgements: Sequence[Judgement]) -> Judgement:
    """One verdict from every backend's: the first drop if any; else the tests every backend agrees on.

    FAIL_TO_PASS and PASS_TO_PASS are the intersections of the backends' lists; flaky tests are their union.
    Kept only if both intersections are non-empty.

    Raises:
        SynthesisError: No judgement.
    """
    if not judgements:
        raise SynthesisError("expected a judgement per backend, got none")
    dropped = [judgement for judgement in judgements if not judgement.kept]
    if dropped:
        return dropped[0]
    fail_to_pass = set.intersection(*(set(judgement.fail_to_pass) for judgement in judgements))
    pass_to_pass = set.intersection(*(set(judgement.pass_to_pass) for judgement in judgements))
    flaky = set().union(*(judgement.flaky for judgement in judgements))
    reason = ("kept" if fail_to_pass and pass_to_pass
              else "the backends agree on no FAIL_TO_PASS test" if not fail_to_pass
              else "the backends agree on no PASS_TO_PASS test")
    return Judgement(kept=reason == "kept", fail_to_pass=tuple(sorted(fail_to_pass)),
                     pass_to_pass=tuple(sorted(pass_to_pass)), flaky=tuple(sorted(flaky)), reason=reason)


def every_bug_matters(combined: Judgement, parts: Sequence[KeptBug]) -> bool:
    """Whether each part's own FAIL_TO_PASS meets the combination's lists (so fixing the other bugs alone leaves a
    listed test failing)."""
    listed = set(combined.fail_to_pass) | set(combined.pass_to_pass)
    return all(listed & set(part.judgement.fail_to_pass) for part in parts)


def top_level_modules(library: Iterable[str]) -> list[str]:
    """The importable top-level names of a repository's library files (``toolz/itertoolz.py`` -> ``toolz``)."""
    return sorted({path.split("/", 1)[0].removesuffix(".py") for path in library})


def report_tasks(source: SuiteSource, report: SynthesisReport) -> list[Task]:
    """A report's instances as tasks (family ``"synthetic"``, with ``repo_source``), their slot's ``hint_level`` and
    ``bugs`` and the source's ``environment`` (which grading runs them in) added to the metadata."""
    tasks = []
    for instance, slot in zip(report.instances, report.slots, strict=True):
        task = instance.to_task(source.repo_source, family="synthetic")
        tasks.append(dataclasses.replace(task, metadata={**task.metadata, "hint_level": slot.level,
                                                         "bugs": slot.bugs,
                                                         "environment": source.environment.to_dict()}))
    return tasks


def write_tasks(tasks: Sequence[Task], path: str | Path) -> None:
    """Write tasks as JSONL (:func:`tasks.read_tasks` reads it; an env takes it as ``tasks=``)."""
    Path(path).write_text("".join(task.to_json() + "\n" for task in tasks), encoding="utf-8")


BUNDLE_PLAN: dict[str, tuple[tuple[str, int, int], ...]] = {
    "test": (("parse", 35, 302), ("inflection", 30, 201), ("isodate", 40, 303), ("face", 30, 304)),
    "dev": (("tabulate", 30, 102), ("addict", 30, 104), ("simpleeval", 35, 103)),
    "train": (("toolz", 60, 101), ("humanize", 40, 105), ("freezegun", 35, 106), ("semver", 35, 109),
              ("schema", 35, 110), ("sqlparse", 20, 111), ("funcy", 30, 108), ("python-slugify", 35, 107)),
}
"""Split -> (pin, instances, seed) per repository, each in its own environment. The splits are disjoint by
repository, so no split's code is seen in another, and the test and train splits have a ``src/`` layout and a
dependency among their repositories: test holds fast suites (parse and inflection, about 0.3 s a run; isodate, a
``src/`` layout; face, which needs boltons) so that re-validating its instances in CI stays quick; dev tabulate,
addict and simpleeval (a one-module library: its 26 candidates ran out at 22 instances); train toolz, humanize (a
``src/`` layout whose tests need freezegun), freezegun (python-dateutil), semver (a ``src/`` layout), schema,
sqlparse (a 2.4 s suite, so fewer instances), funcy (its test-only ``whatever``) and python-slugify
(text-unidecode; its candidates ran out at 31 instances). six is not used although it is pinned: the sandbox's
Python has it installed (Debian's python3-six, the host's for bwrap), so its release is every bug's fix in plain
sight (:func:`agentgym_envs.swe.synthesize.refuse_installed`); boltons (2.4 s a run) is left out for time.
A repository costs about 20 s of two loaded cores per instance, half synthesis and half validation on both
backends (several times that when the machine is busy); ``python -m agentgym_envs.swe.synthesize`` makes as many
more as you like from any pin or folder."""
BUNDLE_FOLDER = Path(__file__).resolve().parents[1] / "data" / "swe"
"""The bundle in a source checkout."""


def bundle_entry(tasks: Sequence[Task], file: str, repos: Sequence[str]) -> dict[str, Any]:
    """A split's manifest entry: file, sha256, count, repositories, and counts per difficulty, level and bugs."""
    data = "".join(task.to_json() + "\n" for task in tasks).encode("utf-8")
    return {"file": file, "sha256": hashlib.sha256(data).hexdigest(), "count": len(tasks), "repos": list(repos),
            "per_difficulty": _counts(task.difficulty for task in tasks),
            "per_hint_level": _counts(task.metadata["hint_level"] for task in tasks),
            "per_bugs": _counts(task.metadata["bugs"] for task in tasks)}


def bundle_header(plan: Mapping[str, Sequence[tuple[str, int, int]]], backends: Sequence[str]) -> dict[str, Any]:
    """The manifest's fields that say how a bundle was built: the backends, the runs per tree, the builder's
    versions and the plan (split -> ``[pin, instances, seed]`` entries)."""
    return {"env": "SWE", "backends": list(backends), "runs_per_tree": RUNS_PER_TREE,
            "generator_versions": {"synthesis": SYNTHESIS_VERSION, "libcst": importlib.metadata.version("libcst")},
            "plan": {split: [list(entry) for entry in entries] for split, entries in plan.items()}}


def bundled_pins(folder: str | Path, plan: Mapping[str, Sequence[tuple[str, int, int]]],
                 backends: Sequence[str]) -> dict[str, tuple[list[Task], dict[str, Any]]]:
    """The repositories of the SWE bundle in ``folder`` that a build of ``plan`` on ``backends`` keeps as they are:
    pin name -> (its tasks, its manifest record).

    A repository is kept when nothing its tasks came from changed: the bundle's backends, runs per tree and
    builder versions (:func:`bundle_header`), the repository's entry in the plan (split, instances, seed), and its
    pin's version and sha256. Its tasks are read from its split's file, checked against the manifest's sha256, in
    file order. A folder without an SWE bundle keeps none; so does one whose builder versions differ.

    Raises:
        SplitIntegrityError: A split file does not match its manifest.
    """
    try:
        manifest = bundle_manifest("SWE", splits_dir=folder)
    except UnknownTaskError:
        return {}
    header = bundle_header(plan, backends)
    if any(manifest.get(key) != header[key] for key in ("backends", "runs_per_tree", "generator_versions")):
        return {}
    kept: dict[str, tuple[list[Task], dict[str, Any]]] = {}
    for split, entries in header["plan"].items():
        built = [entry for entry in entries if entry in manifest["plan"].get(split, [])]
        names = {name for name, _, _ in built if _same_pin(manifest["pins"].get(name), pin(name), split)}
        if names:
            tasks = load_split("SWE", split, splits_dir=folder)
            for name in names:
                kept[name] = ([task for task in tasks if task.metadata["repo_source"]["name"] == name],
                              manifest["pins"][name])
    return kept


def _same_pin(record: Mapping[str, Any] | None, spec: RepoSpec, split: str) -> bool:
    """Whether a manifest's record of a repository was built from ``spec`` into ``split``."""
    return record is not None and (record["split"], record["version"], record["sha256"]) == (
        split, spec.version, spec.sha256)


def _counts(values: Iterable[int]) -> dict[str, int]:
    return {str(value): count for value, count in sorted(Counter(values).items())}


def pin_record(source: SuiteSource, report: SynthesisReport, split: str, seed: int) -> dict[str, Any]:
    """A repository's record in the bundle's manifest (``pins``): its pin, seed, counts (``instances``: those
    synthesized; the bundle keeps those that then validate on every backend), drops per reason and timings."""
    return {"split": split, "version": source.spec.version, "sha256": source.spec.sha256, "seed": seed,
            "instances": len(report.instances), "candidates": report.candidates,
            "kept_singles": report.kept_singles, "keep_rate": round(report.keep_rate, 3),
            "combinations": report.combinations, "dropped": dict(sorted(report.dropped.items())),
            "bug_run_timeout_s": round(report.timeout_s, 1),
            "seconds": {phase: round(seconds, 1) for phase, seconds in report.seconds.items()}}
