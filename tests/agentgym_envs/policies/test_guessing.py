"""GuessingPolicy: the careless demonstrator, driven by hand (no sandbox needed)."""

from __future__ import annotations

import pytest

from agentgym_envs import parse_action
from agentgym_envs.policies import PythonOraclePolicy
from agentgym_envs.policies.guessing import NUMBER, GuessingPolicy
from tasks import Task, load_split

INFO: dict = {"tools": []}


@pytest.fixture(scope="module")
def math_tasks() -> list[Task]:
    return [task for task in load_split("PythonSandbox", "test") if task.family == "math"]


def _first_actions(policy: GuessingPolicy, tasks: list[Task]) -> list[tuple[bool, str]]:
    actions = []
    for task in tasks:
        policy.begin(task, task.prompt, INFO)
        actions.append((policy.guessed, policy.act(task.prompt, INFO)))
    return actions


def test_rate_zero_is_the_wrapped_oracle(math_tasks: list[Task]) -> None:
    actions = _first_actions(GuessingPolicy(PythonOraclePolicy(), 0.0), math_tasks)
    assert not any(guessed for guessed, _ in actions)
    assert all(parse_action(action).tool_calls for _, action in actions)


def test_a_guess_answers_at_once_with_a_number_of_the_problem_statement(math_tasks: list[Task]) -> None:
    for task, (guessed, action) in zip(math_tasks, _first_actions(GuessingPolicy(PythonOraclePolicy(), 1.0),
                                                                   math_tasks), strict=True):
        statement = task.prompt.split("\n\n")[0]
        parsed = parse_action(action)
        assert guessed and parsed.answer is not None and not parsed.tool_calls
        assert parsed.answer in NUMBER.findall(statement)


def test_the_share_of_guesses_follows_the_rate_and_the_seed(math_tasks: list[Task]) -> None:
    tasks = math_tasks * 10
    guesses = [guessed for guessed, _ in _first_actions(GuessingPolicy(PythonOraclePolicy(), 0.3, seed=1), tasks)]
    assert 0.2 < sum(guesses) / len(guesses) < 0.4
    again = [guessed for guessed, _ in _first_actions(GuessingPolicy(PythonOraclePolicy(), 0.3, seed=1), tasks)]
    assert guesses == again


def test_a_rate_outside_zero_to_one_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"rate in \[0, 1\], got 1.5"):
        GuessingPolicy(PythonOraclePolicy(), 1.5)
