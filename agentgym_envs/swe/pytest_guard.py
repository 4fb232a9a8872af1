"""A pytest plugin that reports each test's outcome to the grader and trips when the run's reporting is tampered with.

This file is shipped into the sandbox as source (:func:`agentgym_envs.swe.testing.run_tests` writes it into a
per-run folder outside the repository) and runs on the sandbox's own pytest (Debian's 7.2 in the Docker image,
the host's on bubblewrap), so it uses only the standard library, pytest and pluggy.

The run's bootstrap imports it before the repository is on ``sys.path`` and before pytest reads any
configuration, so its snapshot of pytest's reporting internals is taken before any code of the repository runs.
It then:

* keeps only the requested tests (``pytest_collection_modifyitems``: by full node id, or under the ``swebench``
  rules as SWE-bench's grading reads its ids, cut at the first whitespace) and records collection errors;
* records, from the innermost user-level wrapper of each phase (``trylast`` hook wrappers of
  ``pytest_runtest_setup`` / ``_call`` / ``_teardown``), whether the phase raised;
* checks every report it sees: a phase that raised cannot be ``passed``, a report must come from
  ``pytest_runtest_makereport`` and must not change after it was made; a subtest report (pytest 9 reports
  unittest's ``subTest`` and the ``subtests`` fixture natively, as a ``SubtestReport`` copied from a report
  ``pytest_runtest_makereport`` made) must be the copy of one such report, not yet used, of its test's call
  phase with the same outcome; a failed subtest fails its test;
* checks at every report and at the end that the watched objects (:data:`WATCHED`) and the plugins implementing
  the reporting hooks (:data:`REPORTING_HOOKS`) are the ones it saw at the start;
* writes, at the very end of ``pytest_sessionfinish``, a JSON report carrying the run's nonce (read from a file
  it deletes at import, so that it is neither in ``argv`` nor in the environment nor on disk while tests run).

Code under test runs in this same process, so none of this is a wall: it is a tripwire that catches a patch
which rewrites reports, monkeypatches pytest, registers a plugin or exits early. What it cannot stop, because
any code in the process can do it: finding this module (``sys.modules``, the plugin manager) and rewriting its
state or the nonce in its memory; replacing a test function's code object or ``item.obj`` so that a test runs
something else; a hook wrapper in a *conftest* registered ``tryfirst`` after this plugin that clears
``call.excinfo`` before the report is made; a ``pytest_pyfunc_call`` in a conftest that skips the test. Those
last two need a conftest, which the grader restores from its own copy (removing added ones) before the run; the
first two need code written against this plugin, which a policy can learn only by reading it in the sandbox.
The grader's wall is that it runs on a fresh copy of the repository with only the agent's diff applied and the
test files restored, in a sandbox where no process of the agent lives on.

PYTEST_DONT_REWRITE: imported before pytest starts, this module cannot have its asserts rewritten (it needs no
assert's message); the marker keeps pytest from warning so when ``-p`` names it, a warning that a repository's
``filterwarnings = error`` (humanize's, for one) would turn into a failed run.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

import pytest

CONFIG_FILE = "guard.json"
"""The run's settings, next to this file: nonce, requested test ids (or null) and the report's path."""

WATCHED = {
    "_pytest.runner": ("call_and_report", "runtestprotocol", "call_runtest_hook", "check_interactive_exception",
                       "pytest_runtest_protocol", "pytest_runtest_makereport", "pytest_runtest_setup",
                       "pytest_runtest_call", "pytest_runtest_teardown", "CallInfo"),
    "_pytest.reports": ("BaseReport", "TestReport", "CollectReport"),
    "_pytest.skipping": ("pytest_runtest_makereport", "pytest_runtest_setup", "pytest_runtest_call",
                         "evaluate_skip_marks", "evaluate_xfail_marks"),
    "_pytest.python": ("pytest_pyfunc_call", "Function"),
    "_pytest.main": ("pytest_runtestloop", "wrap_session", "Session"),
    "_pytest.outcomes": ("OutcomeException", "Skipped", "Failed", "XFailed", "fail", "skip", "xfail", "exit"),
    "pluggy._callers": ("_multicall",),
    "pluggy._hooks": ("HookCaller", "_HookCaller", "HookImpl"),
    "pluggy._manager": ("PluginManager",),
    "pluggy._result": ("Result", "_Result"),
    "pytest": ("TestReport", "CollectReport", "fail", "skip", "xfail", "exit", "main", "console_main"),
    "_pytest.unittest": ("TestCaseFunction",),
    "_pytest.subtests": ("SubtestReport", "SubtestContext", "_SubTestContextManager", "pytest_report_teststatus"),
}
"""Module -> names whose identity is checked; a class is checked member by member. Names a pytest or pluggy
version lacks are skipped, and so are the modules of :data:`OPTIONAL_MODULES` it lacks."""

OPTIONAL_MODULES = frozenset({"_pytest.subtests"})
"""Watched modules that only some pytest versions have (subtests are pytest 9's)."""

REPORTING_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
                   "pytest_pyfunc_call", "pytest_runtest_makereport", "pytest_runtest_logreport",
                   "pytest_runtestloop", "pytest_collection_modifyitems", "pytest_sessionfinish")
"""Hooks whose implementing plugins must not change once the session has started."""

MAX_TAMPER_NOTES = 20
"""Most tamper findings kept in the report (the first ones say enough)."""

_dumps = json.dumps
_os_open, _os_write, _os_close = os.open, os.write, os.close


def _load_settings() -> dict[str, Any]:
    """Read this run's settings and delete the file, so that code under test cannot read the nonce from it."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), CONFIG_FILE)
    with open(path, encoding="utf-8") as handle:
        settings = json.load(handle)
    os.remove(path)
    return settings


def _members(value: object) -> dict[str, int]:
    """Identity of a watched object: its own id under ``""`` and, for a class, the id of everything in its
    ``__dict__``."""
    members = {"": id(value)}
    if isinstance(value, type):
        members.update({name: id(member) for name, member in vars(value).items()})
    return members


def _inherited(value: object) -> frozenset[str]:
    """The names a watched class inherits without defining them (none for any other object): an attribute added
    to a class is a tamper only when it hides one of them (pytest itself adds new ones, such as
    ``Session.startdir``, at configure). Taken once, at the snapshot: ``dir`` is the slow part of an identity."""
    if not isinstance(value, type):
        return frozenset()
    own = vars(value)
    return frozenset(name for name in dir(value) if name not in own)


def _lookup(module_name: str, name: str) -> object:
    """``module_name.name`` now (``name`` "" is the module itself); :data:`_GONE` when it is gone."""
    module = sys.modules.get(module_name)
    if module is None:
        return _GONE
    return getattr(module, name, _GONE) if name else module


_GONE = object()
"""What :func:`_lookup` returns for a watched object that is no longer there."""


def _identity(module_name: str, name: str) -> dict[str, int] | None:
    """Identity of ``module_name.name`` now (``name`` "" is the module itself); None when it is gone."""
    value = _lookup(module_name, name)
    return None if value is _GONE else _members(value)


def _watched() -> list[tuple[str, str]]:
    """``(module, name)`` of everything watched: the modules themselves (name ""), their watched names, and this
    plugin's own hooks and state."""
    watched = [(__name__, name) for name in OWN_NAMES]
    for module_name, names in WATCHED.items():
        watched += [(module_name, ""), *((module_name, name) for name in names)]
    return watched


def _import_watched() -> None:
    """Import every watched module this pytest has (a missing one is an error unless it is optional)."""
    for module_name in WATCHED:
        try:
            importlib.import_module(module_name)
        except ModuleNotFoundError:
            if module_name not in OPTIONAL_MODULES:
                raise


Snapshot = dict[tuple[str, str], tuple[dict[str, int], frozenset[str]]]
"""``(module, name)`` -> the identity of a watched object at the start (:func:`_members`) and the names it inherits
(:func:`_inherited`)."""


def _snapshot() -> Snapshot:
    """Identity and inherited names of every watched object this pytest and pluggy have (their modules imported
    first)."""
    _import_watched()
    values = {key: _lookup(*key) for key in _watched()}
    return {key: (_members(value), _inherited(value)) for key, value in values.items() if value is not _GONE}


def _changed_members(before: dict[str, int], inherited: frozenset[str], after: dict[str, int] | None) -> list[str]:
    """Names of the members that were replaced or removed, or added over an inherited one (``"<itself>"`` for
    the object)."""
    if after is None:
        return ["<removed>"]
    if after == before:  # the common case, checked at every test: nothing moved
        return []
    changed = [name for name, identity in before.items() if after.get(name) != identity]
    changed += (after.keys() - before.keys()) & inherited
    return sorted(name or "<itself>" for name in changed)


def _swebench_key(nodeid: str) -> str:
    """A node id as SWE-bench's pytest log parser stores it: cut at its first whitespace (the grader's
    ``rewards.swe.swebench_test_key``, which this file cannot import)."""
    words = nodeid.split()
    return words[0] if words else nodeid


def _subtest_report_class() -> type | None:
    """pytest 9's ``SubtestReport`` class; None for a pytest without native subtests."""
    _import_watched()
    module = sys.modules.get("_pytest.subtests")
    return getattr(module, "SubtestReport", None)


def _fingerprint(report: Any) -> tuple[Any, ...]:
    """What a subtest report keeps of the report it was copied from (``SubtestReport._new``)."""
    return (report.nodeid, report.when, report.outcome, report.duration, getattr(report, "start", None),
            getattr(report, "stop", None), report.location)


def _hookimpls(config: pytest.Config, name: str) -> list[tuple[str, int]]:
    """``(plugin name, function id)`` of every implementation of hook ``name`` that is not in a ``conftest.py``.

    Conftest files are loaded during collection too, so they may join after the session started; the grader
    trusts them because it restores them from its own copy (and removes added ones) before the run.
    """
    caller = getattr(config.pluginmanager.hook, name)
    return [(impl.plugin_name, id(impl.function)) for impl in caller.get_hookimpls()
            if os.path.basename(getattr(impl.plugin, "__file__", None) or "") != "conftest.py"]


class Guard:
    """The state of one run: requested tests, what each phase raised, the outcomes and the findings."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.nonce: str = settings["nonce"]
        self.report_path: str = settings["report"]
        requested = settings["test_ids"]
        self.requested: set[str] | None = None if requested is None else set(requested)
        self.rules: str = settings.get("rules", "strict")
        self.subtest_class: type | None = _subtest_report_class()
        self.subtest_failures: dict[str, int] = {}
        self.snapshot: Snapshot = {}
        self.hookimpls: dict[str, list[tuple[str, int]]] = {}
        self.raised: dict[tuple[str, str], bool] = {}
        self.made: dict[int, tuple[Any, str]] = {}
        self.outcomes: dict[str, str] = {}
        self.collection_errors: list[str] = []
        self.not_collected: list[str] = []
        self.tamper: list[str] = []

    def note(self, finding: str) -> None:
        """Record a tamper finding (the first :data:`MAX_TAMPER_NOTES` distinct ones)."""
        if finding not in self.tamper and len(self.tamper) < MAX_TAMPER_NOTES:
            self.tamper.append(finding)

    def check_identities(self) -> None:
        """Note every watched object that is no longer the one seen at import."""
        for (module_name, name), (before, inherited) in self.snapshot.items():
            changed = _changed_members(before, inherited, _identity(module_name, name))
            if changed:
                what = f"{module_name}.{name}" if name else module_name
                self.note(f"{what} was replaced or modified ({', '.join(changed[:5])})")

    def record_hookimpls(self, config: pytest.Config) -> None:
        """Remember which plugins implement the reporting hooks at the session's start."""
        self.hookimpls = {name: _hookimpls(config, name) for name in REPORTING_HOOKS}

    def check_hookimpls(self, config: pytest.Config) -> None:
        """Note reporting hooks whose implementations changed since the session started."""
        for name, before in self.hookimpls.items():
            now = _hookimpls(config, name)
            if now != before:
                added = sorted({plugin for plugin, _ in now} - {plugin for plugin, _ in before})
                self.note(f"the implementations of {name} changed during the run (new: {', '.join(added) or 'none'})")

    def check_all(self, config: pytest.Config) -> None:
        """Every identity and hook check."""
        self.check_identities()
        self.check_hookimpls(config)

    def requested_ids(self, nodeid: str) -> list[str]:
        """The requested ids that name the test ``nodeid`` (under the ``swebench`` rules, those equal to its
        cut id, or cut mid-parameter, with more ``[`` than ``]``, and beginning it)."""
        assert self.requested is not None
        if self.rules != "swebench":
            return [nodeid] if nodeid in self.requested else []
        key = _swebench_key(nodeid)
        return [test_id for test_id in self.requested
                if test_id == key or (test_id.count("[") > test_id.count("]") and key.startswith(test_id))]

    def is_subtest_report(self, report: Any) -> bool:
        """Whether ``report`` is one of pytest 9's subtest reports (exactly its class, not a subclass)."""
        return self.subtest_class is not None and type(report) is self.subtest_class

    def take_subtest_source(self, report: Any) -> bool:
        """Find, and use up, the report ``pytest_runtest_makereport`` made that the subtest report ``report`` was
        copied from; False when there is none."""
        fingerprint = _fingerprint(report)
        for key, (made, outcome) in self.made.items():
            if outcome == made.outcome and _fingerprint(made) == fingerprint:
                del self.made[key]
                return True
        return False

    def record_subtest(self, report: Any) -> None:
        """A failed subtest fails its test (pytest 9 fails a passed test with failed subtests)."""
        if report.failed:
            self.subtest_failures[report.nodeid] = self.subtest_failures.get(report.nodeid, 0) + 1
            if self.outcomes.get(report.nodeid) in ("passed", "xpassed"):
                self.outcomes[report.nodeid] = "failed"

    def record_outcome(self, report: pytest.TestReport) -> None:
        """Fold one phase's report into its test's outcome."""
        wasxfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.passed and self.subtest_failures.get(report.nodeid):
                self.outcomes[report.nodeid] = "failed"
            elif report.passed:
                self.outcomes[report.nodeid] = "xpassed" if wasxfail else "passed"
            elif report.failed:
                self.outcomes[report.nodeid] = "failed"
            else:
                self.outcomes[report.nodeid] = "xfailed" if wasxfail else "skipped"
        elif report.failed:  # an error in setup or teardown
            self.outcomes[report.nodeid] = "error"
        elif report.skipped and report.when == "setup":
            self.outcomes[report.nodeid] = "xfailed" if wasxfail else "skipped"

    def write_report(self, exitstatus: int) -> None:
        """Write the report, with the nonce, where the host reads it."""
        report = {"nonce": self.nonce, "exitstatus": exitstatus, "outcomes": self.outcomes,
                  "collection_errors": self.collection_errors, "not_collected": self.not_collected,
                  "tamper": self.tamper}
        fd = _os_open(self.report_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _os_write(fd, _dumps(report).encode())
        finally:
            _os_close(fd)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the requested tests; note the requested ones that were not collected."""
    if _GUARD.requested is None:
        return
    named = {item.nodeid: _GUARD.requested_ids(item.nodeid) for item in items}
    kept = [item for item in items if named[item.nodeid]]
    dropped = [item for item in items if not named[item.nodeid]]
    _GUARD.not_collected = sorted(_GUARD.requested - {test_id for ids in named.values() for test_id in ids})
    items[:] = kept
    if dropped:
        config.hook.pytest_deselected(items=dropped)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Record a file or class that failed to collect."""
    if report.failed:
        _GUARD.collection_errors.append(report.nodeid or "<session>")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Check nothing moved since import, then remember the reporting hooks' implementations (after pytest's own
    session plugins have registered)."""
    _GUARD.check_identities()
    _GUARD.record_hookimpls(session.config)


def _phase_wrapper(item: pytest.Item, when: str) -> Any:
    """Body of the innermost user-level wrapper of one phase: record whether the phase raised."""
    outcome = yield
    _GUARD.raised[(item.nodeid, when)] = outcome.excinfo is not None


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """Record whether setup raised, before any other plugin's wrapper can swallow it."""
    yield from _phase_wrapper(item, "setup")


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Record whether the test raised, before any other plugin's wrapper can swallow it."""
    yield from _phase_wrapper(item, "call")


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    """Record whether teardown raised, before any other plugin's wrapper can swallow it."""
    yield from _phase_wrapper(item, "teardown")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember each report as made, and check it against what the phase did."""
    outcome = yield
    report = outcome.get_result()
    _GUARD.made[id(report)] = (report, report.outcome)
    if report.passed and _GUARD.raised.get((item.nodeid, call.when)):
        _GUARD.note(f"{item.nodeid}: the {call.when} phase raised but its report says passed")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Check the report is the one made for this phase, unchanged, then fold it into the outcomes."""
    if _GUARD.is_subtest_report(report):
        if report.when != "call" or not _GUARD.take_subtest_source(report):
            _GUARD.note(f"{report.nodeid}: a subtest report that pytest_runtest_makereport did not make")
        _GUARD.record_subtest(report)
        return
    made = _GUARD.made.pop(id(report), None)
    if made is None or made[0] is not report:
        _GUARD.note(f"{report.nodeid}: a {report.when} report that pytest_runtest_makereport did not make")
    elif made[1] != report.outcome:
        _GUARD.note(f"{report.nodeid}: the {report.when} report was changed from {made[1]} to {report.outcome}")
    if report.passed and _GUARD.raised.get((report.nodeid, report.when)):
        _GUARD.note(f"{report.nodeid}: the {report.when} phase raised but its report says passed")
    if report.when == "call":
        _GUARD.check_identities()
    _GUARD.record_outcome(report)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Any:
    """After every other plugin's sessionfinish: the last checks, then the report."""
    yield
    _GUARD.check_all(session.config)
    _GUARD.write_report(int(session.exitstatus))


OWN_NAMES = ("Guard", "_GUARD", "_swebench_key", "_fingerprint", "pytest_collection_modifyitems",
             "pytest_collectreport", "pytest_sessionstart", "pytest_runtest_setup", "pytest_runtest_call",
             "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_runtest_logreport",
             "pytest_sessionfinish")
"""This plugin's state and hooks, watched like pytest's internals."""

_GUARD = Guard(_load_settings())
_GUARD.snapshot = _snapshot()  # after _GUARD exists, so that it is watched too
