"""The fast tier's marking (tests/durations.py), in pytest runs of their own: what is measured slow is stored, what
is stored slow is marked, and xdist gets the longest files first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import durations

SUITE = '''
import time

import pytest


@pytest.fixture(scope="module")
def server():
    time.sleep(0.3)


def test_quick():
    pass


def test_sleeps():
    time.sleep(0.3)


def test_uses_the_server(server):
    pass


def test_uses_the_server_too(server):
    pass
'''
"""A module with a quick test, a slow one, and two tests sharing a slow module fixture."""


@pytest.fixture
def stored(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The suite written, and durations.json moved to a temporary file, with 0.2 s thresholds."""
    pytester.makepyfile(test_suite=SUITE)
    path = tmp_path / "durations.json"
    monkeypatch.setattr(durations, "DURATIONS_FILE", path)
    monkeypatch.setattr(durations, "SLOW_S", 0.2)
    monkeypatch.setattr(durations, "SLOW_FIXTURE_S", 0.2)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inner pytest run with the plugin (one process: not an xdist worker, even inside one)."""
    return pytester.runpytest_inprocess("-p", "tests.durations", "-p", "no:cacheprovider", "-p", "no:xdist", *args)


def test_a_run_stores_the_slow_tests_and_fixtures_and_the_next_marks_them(pytester, stored):
    run(pytester, "--store-durations").assert_outcomes(passed=4)
    measured = json.loads(stored.read_text())
    assert list(measured["tests"]) == ["test_suite.py::test_sleeps", "test_suite.py::test_uses_the_server"]
    assert list(measured["fixtures"]) == ["test_suite.py::server"]
    fast = run(pytester, "-m", "not slow", "-v")
    fast.assert_outcomes(passed=1, deselected=3)  # the server's second user is slow too: it would pay the fixture
    fast.stdout.fnmatch_lines(["*::test_quick PASSED*"])


def test_the_longest_time_measured_stays(pytester, stored):
    stored.write_text(json.dumps({"tests": {"test_suite.py::test_sleeps": 9.0}, "fixtures": {}}))
    run(pytester, "--store-durations").assert_outcomes(passed=4)
    assert json.loads(stored.read_text())["tests"]["test_suite.py::test_sleeps"] == 9.0


def test_without_the_option_nothing_is_written(pytester, stored):
    run(pytester).assert_outcomes(passed=4)
    assert not stored.exists()


@dataclass
class Item:
    nodeid: str


def test_files_are_handed_out_longest_first_keeping_each_files_order():
    items = [Item("a.py::one"), Item("b.py::one"), Item("c.py::one"), Item("a.py::two"), Item("b.py::two")]
    durations.longest_files_first(items, {"b.py::one": 2.0, "b.py::two": 2.0, "a.py::two": 3.0})
    assert [item.nodeid for item in items] == ["b.py::one", "b.py::two", "a.py::one", "a.py::two", "c.py::one"]
