"""One run of a repository's test suite as a plain record, and the reader of pytest's JUnit XML report.

The env layer runs the suite (in a sandbox) and produces a :class:`TestRun`; the tasks layer's keep/drop rules
(:mod:`tasks.swe.keep`) and the rewards layer (``rewards.swe``) read it. Nothing here runs a process.

A test id is pytest's node id relative to the repository root, e.g. ``tests/test_itertoolz.py::test_groupby``
or ``tests/test_x.py::TestC::test_f[1-2]``. An outcome is one of :data:`OUTCOMES`; only ``"passed"`` counts as
passing for FAIL_TO_PASS and PASS_TO_PASS, and a test absent from a run has no outcome (it did not pass).

Example:
    >>> run = TestRun(status="ok", outcomes={"tests/test_a.py::test_one": "passed"}, exit_code=0, duration_s=0.4)
    >>> TestRun.from_dict(run.to_dict()) == run
    True
    >>> run.passed("tests/test_a.py::test_one"), run.passed("tests/test_a.py::test_two")
    (True, False)
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tasks.errors import TaskError

STATUSES = ("ok", "error", "timeout")
"""How a run went as a whole: ``"ok"`` (the suite ran and reported), ``"error"`` (pytest could not run or
collect, crashed, exited non-zero with no failure reported, or the report is missing, incomplete or tampered
with) and ``"timeout"`` (over the time limit). Only an ``"ok"`` run's outcomes may be used."""
REASONS = {
    "timeout": "the test run passed its time limit and was killed",
    "memory": "the test run ran out of memory (a MemoryError in pytest's output)",
    "killed": "pytest was killed by a signal before it reported (the memory limit's OOM killer, or a kill)",
    "collection_error": "a test file failed to collect (an import or syntax error)",
    "internal_error": "pytest stopped with an internal error (exit code 3)",
    "interrupted": "pytest's session was interrupted (exit code 2)",
    "usage_error": "pytest could not start with its configuration and arguments (exit code 4)",
    "no_tests": "pytest collected no tests (exit code 5)",
    "no_report": "pytest ended without this run's well-formed report (it exited or crashed early)",
    "tampered": "the guard found pytest's reporting tampered with",
    "exit_code": "pytest's exit code contradicts its report",
    "not_reported": "a requested test was not reported (deleted, renamed, or an id that names no test)",
    "tree_unreadable": "the working tree could not be read back from the sandbox",
    "tree_unwritable": "the patched repository could not be written into the grading sandbox",
    "test_patch": "the task's test_patch does not apply to its repository (a folder at another commit than "
                  "base_commit?)",
    "grader_error": "the grading code failed (a bug of the grader; the detail names the error)",
}
"""Why a run is not ``"ok"`` (:attr:`TestRun.reason`) -> what that means. The first twelve come from the run
itself; the last four from the grading around it (reading the agent's tree back, writing the grading tree,
applying the task's ``test_patch``, the grader's own code)."""
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
"""The outcome of one test. pytest's JUnit report writes a non-strict xpass as a pass, so
:func:`parse_junit_xml` never returns ``"xpassed"``; other reporters may."""
SEVERITY = {"skipped": 0, "xfailed": 1, "passed": 2, "xpassed": 3, "failed": 4, "error": 5}
"""When a report holds one test twice (a failed call and a failing teardown), the worse outcome is kept."""


class TestRunError(TaskError, ValueError):
    """A test run record, or the JUnit XML report it is read from, is not what was expected."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class TestRun:
    """One run of a test suite.

    Attributes:
        status: One of :data:`STATUSES`.
        outcomes: Test id -> one of :data:`OUTCOMES`, for every test the run reported.
        exit_code: pytest's exit code; ``None`` when it never exited (timeout, killed).
        duration_s: Wall-clock seconds of the run.
        detail: Why the run is not ``"ok"`` (short); empty for an ``"ok"`` run.
        reason: Why the run is not ``"ok"``, as one of :data:`REASONS` (``"timeout"`` for a timeout); empty for
            an ``"ok"`` run (and in records written before reasons were kept).
    """

    __test__: ClassVar[bool] = False  # not a pytest test class, whatever its name

    status: str
    outcomes: Mapping[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    duration_s: float = 0.0
    detail: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise TestRunError(f"expected a run status in {STATUSES}, got {self.status!r}")
        if self.reason and self.reason not in REASONS:
            raise TestRunError(f"expected a reason in {sorted(REASONS)}, got {self.reason!r}")
        if self.status == "ok" and self.reason:
            raise TestRunError(f"expected no reason for an 'ok' run, got {self.reason!r}")
        wrong = {test_id: outcome for test_id, outcome in self.outcomes.items() if outcome not in OUTCOMES}
        if wrong:
            test_id, outcome = next(iter(wrong.items()))
            raise TestRunError(f"expected outcomes in {OUTCOMES}, got {outcome!r} for {test_id!r} "
                               f"({len(wrong)} such tests)")
        object.__setattr__(self, "outcomes", dict(self.outcomes))

    @property
    def ok(self) -> bool:
        """True when the run is valid, i.e. its outcomes may be used."""
        return self.status == "ok"

    def passed(self, test_id: str) -> bool:
        """Whether the run reported ``test_id`` as passed (a test absent from the run did not pass)."""
        return self.outcomes.get(test_id) == "passed"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe form (the ``evidence["test_run"]`` the env hands to ``rewards.swe``)."""
        return {"status": self.status, "outcomes": dict(sorted(self.outcomes.items())), "exit_code": self.exit_code,
                "duration_s": self.duration_s, "detail": self.detail, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TestRun:
        """Rebuild a run from :meth:`to_dict` output.

        Raises:
            TestRunError: A missing status, outcomes that are not a mapping, or an unknown status, outcome or
                reason.
        """
        if "status" not in data:
            raise TestRunError(f"expected a test run with a status, got keys {sorted(data)}")
        outcomes = data.get("outcomes", {})
        if not isinstance(outcomes, Mapping):
            raise TestRunError(f"expected outcomes as a mapping of test id to outcome, got {type(outcomes).__name__}")
        exit_code = data.get("exit_code")
        return cls(status=data["status"], outcomes=outcomes, exit_code=None if exit_code is None else int(exit_code),
                   duration_s=float(data.get("duration_s", 0.0)), detail=str(data.get("detail", "")),
                   reason=str(data.get("reason", "")))


def parse_junit_xml(xml: bytes | str, root: str | os.PathLike[str] | Iterable[str]) -> dict[str, str]:
    """The outcome of every test in a pytest JUnit XML report (``--junitxml``), keyed by node id.

    pytest writes a test ``tests/test_x.py::TestC::test_f[1-2]`` as ``classname="tests.test_x.TestC"`` and
    ``name="test_f[1-2]"``; which dotted prefix of the class name is the file is read from the repository's
    files (the report's ``file`` attribute is used when present, as with ``-o junit_family=xunit1``). A
    module that failed to collect (``classname=""``) is reported under its file path with outcome
    ``"error"``. A test reported twice (a failed call, then a failing teardown) keeps the worse outcome.

    Args:
        xml: The report's bytes (or text).
        root: The repository: a folder on this machine, or the POSIX paths of its files relative to its root
            (e.g. the keys of :func:`tasks.swe.repos.repository_files`).

    Returns:
        Test id -> outcome (one of :data:`OUTCOMES`, never ``"xpassed"``).

    Raises:
        TestRunError: The report is not well-formed XML, is not a JUnit report, or has a test case without a name.
    """
    modules = _module_paths(root)
    outcomes: dict[str, str] = {}
    for case in _testcases(xml):
        test_id = _test_id(case, modules)
        outcome = _outcome(case)
        if test_id not in outcomes or SEVERITY[outcome] > SEVERITY[outcomes[test_id]]:
            outcomes[test_id] = outcome
    return outcomes


def _testcases(xml: bytes | str) -> list[ElementTree.Element]:
    """The ``<testcase>`` elements of a JUnit report, after checking its root element."""
    try:
        report = ElementTree.fromstring(xml)
    except ElementTree.ParseError as error:
        raise TestRunError(f"expected a JUnit XML report, got malformed XML ({error})") from error
    if report.tag not in ("testsuites", "testsuite"):
        raise TestRunError(f"expected a JUnit report whose root is <testsuites> or <testsuite>, got <{report.tag}>")
    return list(report.iter("testcase"))


def _module_paths(root: str | os.PathLike[str] | Iterable[str]) -> dict[str, str]:
    """Dotted module name -> POSIX path, for every ``.py`` file of the repository."""
    if isinstance(root, (str, os.PathLike)):
        folder = Path(root)
        paths: Collection[str] = [path.relative_to(folder).as_posix() for path in folder.rglob("*.py")]
    else:
        paths = list(root)
    return {_dotted(path): path for path in paths if path.endswith(".py")}


def _dotted(path: str) -> str:
    """What pytest writes for a file in a class name: ``tests/test_x.py`` -> ``tests.test_x``."""
    return path.removesuffix(".py").replace("/", ".")


def _test_id(case: ElementTree.Element, modules: Mapping[str, str]) -> str:
    """The node id of one ``<testcase>``: its file, then its classes, then its name."""
    name = case.get("name")
    if not name:
        raise TestRunError(f"expected every <testcase> to have a name, got attributes {dict(case.attrib)}")
    classname = case.get("classname", "")
    if not classname:  # a module that failed to collect: name is the module's dotted path
        return modules.get(name, name.replace(".", "/") + ".py")
    module, classes = _split_classname(classname, case.get("file"), modules)
    return "::".join([module, *classes, name])


def _split_classname(classname: str, file: str | None, modules: Mapping[str, str]) -> tuple[str, list[str]]:
    """``(file path, [class, ...])`` of a dotted class name, longest known module first.

    A class name whose module is not among the repository's files is read as a module path with no class.
    """
    parts = classname.split(".")
    known = {_dotted(file): file} if file else modules
    for cut in range(len(parts), 0, -1):
        path = known.get(".".join(parts[:cut]))
        if path is not None:
            return path, parts[cut:]
    return "/".join(parts) + ".py", []


def _outcome(case: ElementTree.Element) -> str:
    """The outcome one ``<testcase>`` records (error before failure before skip)."""
    if case.find("error") is not None:
        return "error"
    if case.find("failure") is not None:
        return "failed"
    skipped = case.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"
