"""The reference oracle of PythonSandbox-v0 and the random agent, driven by hand (no sandbox needed)."""

from __future__ import annotations

from typing import Any

import pytest

from agentgym_envs import parse_action
from agentgym_envs.policies import PythonOraclePolicy, RandomPolicy
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.python_sandbox.env import PYTHON_TOOL_SCHEMA
from agentgym_envs.search.env import OPEN_TOOL_SCHEMA, SEARCH_TOOL_SCHEMA
from agentgym_envs.tools import Tool, ToolResult, argument_errors
from tasks import Task, load_split


def _unused(**arguments: Any) -> ToolResult:
    raise AssertionError("the policies are driven by hand here; no tool runs")


SCHEMAS = {"search": SEARCH_TOOL_SCHEMA, "open": OPEN_TOOL_SCHEMA, "python": PYTHON_TOOL_SCHEMA}
TOOLS = {name: Tool(name, f"The {name} tool.", schema, _unused) for name, schema in SCHEMAS.items()}
INFO = {"tools": [tool.schema() for tool in TOOLS.values()]}
OBSERVATION = "[search result (ok)]\n[1] doc-000001 | Marrowick\n    Marrowick is a river port in Kelden."


@pytest.fixture(scope="module")
def python_tasks() -> list[Task]:
    return load_split("PythonSandbox", "test")


def _task(tasks: list[Task], family: str) -> Task:
    return next(task for task in tasks if task.family == family)


# --- PythonOraclePolicy ------------------------------------------------------------------------------


def test_python_oracle_needs_a_reference_solution(python_tasks: list[Task]) -> None:
    with pytest.raises(ValueError, match=r"metadata\['reference_solution'\]"):
        PythonOraclePolicy().begin(prompt_only(_task(python_tasks, "math")), "", INFO)


def test_python_oracle_runs_the_reference_then_answers_its_last_line(python_tasks: list[Task]) -> None:
    task = _task(python_tasks, "math")
    policy = PythonOraclePolicy()
    policy.begin(task, task.prompt, INFO)
    call = parse_action(policy.act(task.prompt, INFO))
    reference = task.metadata["reference_solution"]
    assert [(c.name, c.arguments) for c in call.tool_calls] == [("python", {"code": reference})]
    answer = parse_action(policy.act("[python result (ok)]\nworking...\n-2, 6\n", INFO))
    assert answer.well_formed and answer.answer == "-2, 6"


def test_python_oracle_answers_code_tasks_with_the_reference_source(python_tasks: list[Task]) -> None:
    task = _task(python_tasks, "code")
    policy = PythonOraclePolicy()
    policy.begin(task, task.prompt, INFO)
    policy.act(task.prompt, INFO)
    answer = parse_action(policy.act("[python result (ok)]\n", INFO)).answer
    assert answer is not None and task.metadata["reference_solution"].strip() in answer


# --- RandomPolicy ---------------------------------------------------------------------------------------


def _episode(policy: RandomPolicy, task: Task) -> list[str]:
    """The actions of one hand-driven episode, up to and including the answer."""
    policy.begin(task, task.prompt, INFO)
    actions = [policy.act(task.prompt, INFO)]
    while parse_action(actions[-1]).answer is None:
        assert len(actions) <= policy.max_tool_calls, "the random agent must answer after its tool calls"
        actions.append(policy.act(OBSERVATION, INFO))
    return actions


def test_random_policy_actions_are_well_formed(python_tasks: list[Task]) -> None:
    policy = RandomPolicy(seed=3)
    for task in python_tasks[:30]:
        for action in _episode(policy, task):
            parsed = parse_action(action)
            assert parsed.well_formed, (action, parsed.errors)
            for call in parsed.tool_calls:
                assert argument_errors(TOOLS[call.name], call.arguments) == [], action


def test_random_policy_is_seeded(python_tasks: list[Task]) -> None:
    def run(seed: int) -> list[list[str]]:
        policy = RandomPolicy(seed=seed)
        return [_episode(policy, task) for task in python_tasks[:10]]

    assert run(7) == run(7)
    assert run(7) != run(8)
