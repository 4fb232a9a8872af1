from __future__ import annotations

import math

import pytest

from rewards import (
    CompositeReward,
    JudgeError,
    JudgeUnavailableError,
    RewardComputationError,
    RewardConfigError,
    RewardResult,
    Term,
    VerifierUnavailableError,
)
from tasks.errors import InfrastructureError
from tasks.records import Task, Trajectory

TASK = Task(id="qa/0", env="Search", family="qa", prompt="Who?", answer="Ada")
TRAJECTORY = Trajectory()


def constant(value: object):
    """A reward function that always returns ``value``."""
    return lambda task, trajectory, evidence: value


def failing(task: Task, trajectory: Trajectory, evidence: object) -> float:
    raise KeyError("unit_tests")


@pytest.mark.parametrize(
    ("terms", "value", "components"),
    [
        # one plain float term, weight 1
        ([Term("a", constant(0.5))], 0.5, {"a": 0.5}),
        # weighted sum of two terms
        (
            [Term("a", constant(1.0), weight=2.0), Term("b", constant(0.5), weight=-1.0)],
            1.5,
            {"a": 1.0, "b": 0.5},
        ),
        # the cap clips the raw value before weighting, and the component shows the clipped value
        ([Term("a", constant(5.0), weight=0.1, cap=(-1.0, 1.0))], 0.1, {"a": 1.0}),
        # lower bound of the cap
        ([Term("a", constant(-3.0), cap=(-0.2, 0.2))], -0.2, {"a": -0.2}),
        # a weight-0 term is logged but contributes nothing
        ([Term("a", constant(1.0)), Term("log", constant(7.0), weight=0.0)], 1.0, {"a": 1.0, "log": 7.0}),
        # a RewardResult term: its components are nested under the term name
        (
            [Term("tests", constant(RewardResult(0.5, {"passed": 1.0, "total": 2.0})), weight=2.0)],
            1.0,
            {"tests": 0.5, "tests/passed": 1.0, "tests/total": 2.0},
        ),
        # ints and bools are numbers too
        ([Term("a", constant(1)), Term("b", constant(True), weight=0.5)], 1.5, {"a": 1.0, "b": 1.0}),
    ],
)
def test_weighted_sum_and_components(terms: list[Term], value: float, components: dict[str, float]) -> None:
    result = CompositeReward(terms)(TASK, TRAJECTORY, {})
    assert result.value == pytest.approx(value)
    assert dict(result.components) == pytest.approx(components)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        # no terms at all
        (lambda: CompositeReward([]), "at least one Term"),
        # something that is not a Term
        (lambda: CompositeReward([constant(1.0)]), "expected Term instances"),
        # duplicate names would overwrite each other's component
        (lambda: CompositeReward([Term("a", constant(1.0)), Term("a", constant(2.0))]), "unique term names"),
        # every weight zero: the reward would be constant
        (lambda: CompositeReward([Term("a", constant(1.0), weight=0.0)]), "non-zero weight"),
        # empty and blank names
        (lambda: Term("", constant(1.0)), "non-empty term name"),
        (lambda: Term("  ", constant(1.0)), "non-empty term name"),
        # '/' is reserved for nested components
        (lambda: Term("a/b", constant(1.0)), "without '/'"),
        # non-finite weights
        (lambda: Term("a", constant(1.0), weight=math.nan), "finite weight"),
        (lambda: Term("a", constant(1.0), weight=math.inf), "finite weight"),
        # cap bounds in the wrong order, NaN, or not a pair
        (lambda: Term("a", constant(1.0), cap=(1.0, -1.0)), "low <= high"),
        (lambda: Term("a", constant(1.0), cap=(math.nan, 1.0)), "low <= high"),
        (lambda: Term("a", constant(1.0), cap=(1.0,)), "cap=\\(low, high\\)"),
    ],
)
def test_bad_configuration_is_rejected(build, message: str) -> None:
    with pytest.raises(RewardConfigError, match=message):
        build()


def test_config_error_is_a_value_error() -> None:
    # callers that catch ValueError for bad parameters keep working
    with pytest.raises(ValueError, match="expected"):
        Term("a", constant(1.0), weight=math.nan)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        # the term raised: the error names the term and the original exception
        (failing, "reward term 'bad' raised KeyError"),
        # NaN is never a reward
        (constant(math.nan), "finite number, got nan"),
        # infinity neither
        (constant(-math.inf), "finite number, got -inf"),
        # None is not a number (a forgotten return)
        (constant(None), "finite number, got None"),
        # a RewardResult with a non-numeric component
        (constant(RewardResult(1.0, {"note": "hi"})), "numeric components"),
    ],
)
def test_failing_term_is_an_error_naming_it(fn, message: str) -> None:
    reward = CompositeReward([Term("good", constant(1.0)), Term("bad", fn)])
    with pytest.raises(RewardComputationError, match=message) as caught:
        reward(TASK, TRAJECTORY, {})
    assert "'bad'" in str(caught.value)


def test_raising_term_keeps_the_cause() -> None:
    reward = CompositeReward([Term("bad", failing)])
    with pytest.raises(RewardComputationError) as caught:
        reward(TASK, TRAJECTORY, {})
    assert isinstance(caught.value.__cause__, KeyError)


class SandboxDied(InfrastructureError):
    """Stands in for an upper layer's infrastructure error (agentgym_envs' SandboxError)."""


def raising(error: BaseException):
    """A reward function that always raises ``error``."""

    def fn(task: Task, trajectory: Trajectory, evidence: object) -> float:
        raise error

    return fn


@pytest.mark.parametrize(
    "error",
    [
        InfrastructureError("service down"),  # the base itself
        JudgeUnavailableError("expected a reply from http://judge/v1, got timed out"),  # a judge that does not answer
        VerifierUnavailableError("expected a verifier worker to start"),  # a host that cannot start a process
        SandboxDied("container gone"),  # a subclass defined in another layer
    ],
)
def test_infrastructure_error_passes_through_unwrapped(error: InfrastructureError) -> None:
    # the env turns it into an infrastructure episode; wrapping it would end the rollout batch
    reward = CompositeReward([Term("good", constant(1.0)), Term("judge", raising(error), weight=0.0)])
    with pytest.raises(type(error)) as caught:
        reward(TASK, TRAJECTORY, {})
    assert caught.value is error
    assert not isinstance(caught.value, RewardComputationError)


@pytest.mark.parametrize(
    "error",
    [
        JudgeError("expected HTTP 200 from http://judge/v1, got 404"),  # a judge misconfigured: the user's fault
        RuntimeError("boom"),  # a bug in the term
        TimeoutError("timed out"),  # an OSError that is not an InfrastructureError: still the term's failure
        ZeroDivisionError("division by zero"),  # arithmetic on agent data
    ],
)
def test_other_errors_are_wrapped_naming_the_term(error: Exception) -> None:
    reward = CompositeReward([Term("good", constant(1.0)), Term("bad", raising(error))])
    with pytest.raises(RewardComputationError, match=f"reward term 'bad' raised {type(error).__name__}") as caught:
        reward(TASK, TRAJECTORY, {})
    assert caught.value.__cause__ is error


def test_weight_zero_term_that_raises_is_still_an_error() -> None:
    # "logged only" does not mean "failures ignored"
    reward = CompositeReward([Term("a", constant(1.0)), Term("log", failing, weight=0.0)])
    with pytest.raises(RewardComputationError, match="'log'"):
        reward(TASK, TRAJECTORY, {})


def test_terms_and_weights_are_exposed() -> None:
    terms = [Term("a", constant(1.0), weight=1.0), Term("b", constant(0.0), weight=0.25)]
    reward = CompositeReward(terms)
    assert reward.terms == tuple(terms)
    assert dict(reward.weights) == {"a": 1.0, "b": 0.25}
    with pytest.raises(TypeError):
        reward.weights["a"] = 2.0  # type: ignore[index]


def test_terms_receive_task_trajectory_and_evidence() -> None:
    seen = []
    reward = CompositeReward([Term("spy", lambda *args: seen.append(args) or 0.0)])
    evidence = {"unit_tests": None}
    reward(TASK, TRAJECTORY, evidence)
    assert seen == [(TASK, TRAJECTORY, evidence)]
