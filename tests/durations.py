"""Slow tests by measurement, so that ``python -m pytest -m "not slow"`` is the fast tier.

``tests/durations.json`` keeps what was measured slow: tests at :data:`SLOW_S` or more (setup, call and teardown
together), and shared fixtures (of module, class or session scope: one setup, paid by whichever test needs it
first) at :data:`SLOW_FIXTURE_S` or more. A test is marked ``slow`` when it was measured slow, or when it uses a
shared fixture measured slow: with the tests before it deselected, it would pay that fixture in the fast tier.

``--store-durations`` adds what a run measured slow to the file (keeping the rest; the longest time measured
stays)::

    python -m pytest -n 2 --store-durations              # the whole suite
    python -m pytest -n 2 -m "not slow" --store-durations  # the fast tier, until it marks nothing new

A test or fixture not in the file (a new one, or one measured fast) is fast; a test marked ``@pytest.mark.slow`` in
its module stays slow whatever its time. To measure afresh (something made faster), delete the file first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

DURATIONS_FILE = Path(__file__).with_name("durations.json")
SLOW_S = 1.0
"""A test measured at this many seconds or more is slow."""
SLOW_FIXTURE_S = 5.0
"""A shared fixture measured at this many seconds or more makes the tests that use it slow (a cheaper one costs the
fast tier once, less than leaving its tests out would cost in coverage)."""
WORKER_OUTPUT = "agentrl_durations"
"""Where an xdist worker hands its measurements to the controller (``workeroutput``)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"add the tests and shared fixtures this run measured slow to {DURATIONS_FILE.name}")


def stored_durations() -> dict[str, dict[str, float]]:
    """``{"tests": node id -> seconds, "fixtures": fixture key -> seconds}``, what was measured slow."""
    stored = json.loads(DURATIONS_FILE.read_text(encoding="utf-8")) if DURATIONS_FILE.exists() else {}
    return {"tests": stored.get("tests", {}), "fixtures": stored.get("fixtures", {})}


def fixture_key(fixturedef: pytest.FixtureDef) -> str:
    """A shared fixture's name in the file: where it is defined (its node id prefix) and its name."""
    return f"{fixturedef.baseid}::{fixturedef.argname}"


def shared_fixtures(item: pytest.Item) -> Iterator[str]:
    """The keys of the module, class and session fixtures ``item`` uses (those that apply to it)."""
    info = getattr(item, "_fixtureinfo", None)  # a test function's (pytest's own record of what it uses)
    definitions: Mapping[str, list[pytest.FixtureDef]] = info.name2fixturedefs if info is not None else {}
    for name in getattr(item, "fixturenames", ()):
        if definitions.get(name) and definitions[name][-1].scope != "function":
            yield fixture_key(definitions[name][-1])


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    durations = stored_durations()
    slow_fixtures = set(durations["fixtures"])
    for item in items:
        if item.nodeid in durations["tests"] or slow_fixtures.intersection(shared_fixtures(item)):
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # an xdist worker: every worker collects, and in the same order
        longest_files_first(items, durations["tests"])


def longest_files_first(items: list[pytest.Item], durations: Mapping[str, float]) -> None:
    """Order ``items`` by file, the files with the most measured time first (each file's tests in their order), so
    that xdist's ``--dist loadfile`` hands out the longest files first and no long file is left for the end."""
    per_file: dict[str, float] = {}
    for nodeid, seconds in durations.items():
        path = nodeid.split("::", 1)[0]
        per_file[path] = per_file.get(path, 0.0) + seconds
    items.sort(key=lambda item: -per_file.get(item.nodeid.split("::", 1)[0], 0.0))


class DurationRecorder:
    """Measures tests (their reports' phases) and shared fixtures (their setups); stores them at the end of the run.

    Under xdist each worker measures its fixtures and hands them over in ``workeroutput``; the controller, which
    sees every test report, stores.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tests: dict[str, float] = {}
        self.fixtures: dict[str, float] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef) -> Iterator[None]:
        start = time.perf_counter()
        yield
        if fixturedef.scope != "function":
            key = fixture_key(fixturedef)
            self.fixtures[key] = max(self.fixtures.get(key, 0.0), time.perf_counter() - start)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] = self.tests.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl(optionalhook=True)  # xdist's: a worker is done
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        for key, seconds in node.workeroutput.get(WORKER_OUTPUT, {}).items():
            self.fixtures[key] = max(self.fixtures.get(key, 0.0), seconds)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        worker_output = getattr(self.config, "workeroutput", None)
        if worker_output is not None:  # an xdist worker: the controller stores
            worker_output[WORKER_OUTPUT] = self.fixtures
            return
        durations = stored_durations()
        for kind, measured, slow in (("tests", self.tests, SLOW_S), ("fixtures", self.fixtures, SLOW_FIXTURE_S)):
            for key, seconds in measured.items():
                if seconds >= slow:
                    durations[kind][key] = round(max(seconds, durations[kind].get(key, 0.0)), 2)
        stored = {kind: dict(sorted(values.items())) for kind, values in durations.items()}
        DURATIONS_FILE.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"slow: measured at {SLOW_S:g} s or more, or using a shared fixture measured "
                                       f"at {SLOW_FIXTURE_S:g} s or more ({DURATIONS_FILE.name})")
    if config.getoption("--store-durations"):
        config.pluginmanager.register(DurationRecorder(config), "agentrl-duration-recorder")
