"""Unit-test verifier: the fraction of hidden tests that passed, or all-or-nothing.

The environment runs the hidden tests in its sandbox and hands the outcome over as
``evidence["unit_tests"]``, a :class:`UnitTestEvidence`. The agent never sees the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewards.base import RewardFn, RewardResult, required_evidence
from tasks.records import Task, Trajectory

UNIT_TESTS_KEY = "unit_tests"
"""The evidence key under which environments store a :class:`UnitTestEvidence`."""


@dataclass(frozen=True)
class UnitTestEvidence:
    """Outcome of running a task's hidden unit tests against the agent's code.

    Attributes:
        results: One entry per test, True when it passed.
        error: Why the tests could not run normally (the code did not import, the run timed
            out), or None.
    """

    results: tuple[bool, ...]
    error: str | None = None

    @property
    def passed(self) -> int:
        """Number of tests that passed."""
        return sum(1 for result in self.results if result)

    @property
    def total(self) -> int:
        """Number of tests that ran."""
        return len(self.results)


def unit_test_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: the fraction of hidden unit tests that passed (partial credit).

    Reads ``evidence["unit_tests"]``; zero tests score 0.0.

    Returns:
        ``RewardResult(passed / total, {"passed": passed, "total": total})``.

    Raises:
        RewardComputationError: When the evidence is missing or not a :class:`UnitTestEvidence`.
    """
    return _score(_unit_test_evidence(evidence), all_or_nothing=False)


def make_unit_test_reward(all_or_nothing: bool = False) -> RewardFn:
    """Build a unit-test reward term.

    Args:
        all_or_nothing: When True the value is 1.0 only if every test passed; otherwise it is
            the fraction passed, as in :func:`unit_test_reward`. Zero tests always score 0.0.

    Returns:
        A picklable reward function returning ``RewardResult(value, {"passed": p, "total": t})``.

    Example:
        >>> from tasks.records import Task, Trajectory
        >>> task = Task("code/0", "PythonSandbox", "code", "Write f.", answer=None)
        >>> strict = make_unit_test_reward(all_or_nothing=True)
        >>> strict(task, Trajectory(), {"unit_tests": UnitTestEvidence((True, False))}).value
        0.0
    """
    return functools.partial(_unit_test_term, all_or_nothing=all_or_nothing)


def _unit_test_term(
    task: Task, trajectory: Trajectory, evidence: Mapping[str, Any], *, all_or_nothing: bool
) -> RewardResult:
    return _score(_unit_test_evidence(evidence), all_or_nothing=all_or_nothing)


def _score(tests: UnitTestEvidence, *, all_or_nothing: bool) -> RewardResult:
    if tests.total == 0:
        value = 0.0
    elif all_or_nothing:
        value = float(tests.passed == tests.total)
    else:
        value = tests.passed / tests.total
    return RewardResult(value=value, components={"passed": float(tests.passed), "total": float(tests.total)})


def _unit_test_evidence(evidence: Mapping[str, Any]) -> UnitTestEvidence:
    return required_evidence(evidence, UNIT_TESTS_KEY, UnitTestEvidence, holding="the hidden test results",
                             form="a UnitTestEvidence")
