from __future__ import annotations

import pickle

import pytest

import rewards
from rewards import (
    JudgeError,
    JudgeUnavailableError,
    RewardComputationError,
    RewardConfigError,
    RewardError,
    UnitTestEvidence,
    VerifierUnavailableError,
    exact_match_reward,
    format_reward,
    make_length_penalty,
    make_tool_shaping_reward,
    make_unit_test_reward,
    math_equivalence_reward,
    unit_test_reward,
)
from tasks.errors import InfrastructureError
from tasks.records import Task, ToolCall, Trajectory, Turn


@pytest.mark.parametrize("name", rewards.__all__)
def test_public_names_are_exported(name: str) -> None:
    # every advertised name exists and is documented
    obj = getattr(rewards, name)
    assert obj.__doc__


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        # bad parameters are also ValueErrors
        (RewardConfigError, (RewardError, ValueError)),
        # failures while scoring
        (RewardComputationError, (RewardError,)),
        # judge backends and cache
        (JudgeError, (RewardError,)),
        # a judge service that does not answer: the env makes it an infrastructure episode
        (JudgeUnavailableError, (JudgeError, RewardError, InfrastructureError)),
        # no verifier worker process could be started
        (VerifierUnavailableError, (RewardError, InfrastructureError)),
        # the root
        (RewardError, (Exception,)),
    ],
)
def test_error_tree(error: type[Exception], bases: tuple[type[Exception], ...]) -> None:
    assert all(issubclass(error, base) for base in bases)


@pytest.mark.parametrize("error", [RewardConfigError, RewardComputationError, JudgeError, RewardError])
def test_user_and_term_errors_are_not_infrastructure_errors(error: type[Exception]) -> None:
    # a bad configuration, a corrupt judge cache or a failing term is never left out as "infra"
    assert not issubclass(error, InfrastructureError)


def test_computation_errors_are_not_value_errors() -> None:
    # a failing term must not be mistaken for a bad argument by `except ValueError`
    assert not issubclass(RewardComputationError, ValueError)


TASK = Task(id="code/0", env="PythonSandbox", family="code", prompt="Write f.", answer="42")
TRAJECTORY = Trajectory(
    (Turn(action="<answer>42</answer>", observation="", tool_calls=(ToolCall("run", {}),), answer="42"),)
)
EVIDENCE = {"unit_tests": UnitTestEvidence((True, False))}


@pytest.mark.parametrize(
    "fn",
    [
        make_unit_test_reward(all_or_nothing=True),
        make_tool_shaping_reward(required_tools=["run"]),
        make_length_penalty("linear", target=1, max_length=10),
        make_length_penalty("dapo", max_length=10, cache_length=5),
        unit_test_reward,
        format_reward,
        exact_match_reward,
        math_equivalence_reward,
    ],
)
def test_reward_functions_survive_pickling(fn) -> None:
    # multiprocessing workers receive reward functions by pickle, which cannot carry closures
    restored = pickle.loads(pickle.dumps(fn))
    assert restored(TASK, TRAJECTORY, EVIDENCE) == fn(TASK, TRAJECTORY, EVIDENCE)
