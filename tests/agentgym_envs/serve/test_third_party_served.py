"""A third-party env served: ``tests/plugins/calculator_env`` (registered through the ``agentrl.envs`` entry point,
agentrl has no line of it) installed into a folder that only the server and the evaluation processes see, served by
``python -m agentgym_envs.serve``, and played by clients that do not have it: ``agentrl/Remote-v0`` and
openenv-core's MCP client in this process, and ``benchmarks.evaluate --remote``, whose numbers equal those of the
same evaluation in process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("openenv")

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs import describe
from agentgym_envs.registration import REMOTE_ID
from agentgym_envs.remote.env import served_description
from tests.agentgym_envs.serve.served import Served
from tests.test_third_party_env import REPO, installed  # noqa: F401  (the fixture: the package in a folder)

CALCULATOR = "calculator/Calculator-v0"
QUESTION = re.compile(r"What is (?P<expression>[-+*/%() \d]+)\?")


@pytest.fixture(scope="module")
def calculator_server(installed: dict[str, str]) -> Iterator[Served]:  # noqa: F811
    served = Served(CALCULATOR, "--env-kwargs", '{"split": "test"}', env=installed)
    yield served
    served.stop()


def expected_value(prompt: str) -> str:
    """The question's value, by Python's own arithmetic (not the env's evaluator)."""
    expression = QUESTION.search(prompt)["expression"]
    return str(eval(expression, {"__builtins__": {}}))  # digits, + - * // % and parentheses only (the regex)


def test_this_process_does_not_have_the_package(calculator_server):
    assert CALCULATOR not in gym.registry  # the clients below play it over the wire alone


def test_the_remote_env_plays_the_served_third_party_env_with_its_verifiers_rewards(calculator_server):
    env = gym.make(REMOTE_ID, url=calculator_server.url)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        card, tasks = describe(env), env.unwrapped.tasks
        assert (card.env_id, card.tool_names, len(tasks)) == (CALCULATOR, ("calculate",), 10)
        for index, task in enumerate(tasks[:3]):
            observation, info = env.reset(seed=0, options={"task": task})
            assert task.prompt in observation and info["task_id"] == task.id
            expression = QUESTION.search(task.prompt)["expression"]
            observation, reward, terminated, _, info = env.step(
                f'<tool_call>{{"name": "calculate", "arguments": {{"expression": "{expression}"}}}}</tool_call>')
            assert expected_value(task.prompt) in observation and info["ok"] and not terminated
            answer = expected_value(task.prompt) if index < 2 else "-1"  # the last one answered wrong
            observation, reward, terminated, _, info = env.step(f"<answer>{answer}</answer>")
            assert terminated and reward == info["reward_components"]["outcome"] == (1.0 if index < 2 else 0.0)
    finally:
        env.close()


def test_openenv_cores_mcp_client_plays_it_with_the_tools_of_its_card(calculator_server):
    from openenv.core.mcp_client import MCPToolClient

    task = served_description(calculator_server.url).tasks[3]
    with MCPToolClient(base_url=calculator_server.url).sync() as client:
        assert [tool.name for tool in client.list_tools()] == ["calculate", "answer"]
        client.reset(task=task.id, seed=0)
        step = client.call_tool("calculate", expression=QUESTION.search(task.prompt)["expression"])
        assert step["observation"].endswith(f"\n{expected_value(task.prompt)}") and not step["terminated"]
        step = client.call_tool("answer", answer=expected_value(task.prompt))
        assert step["terminated"] and step["reward"] == 1.0


def evaluation(environment: dict[str, str], out: Path, *args: str) -> tuple[dict, str]:
    """``python -m benchmarks.evaluate`` in a process with the package installed: report.json and episodes.jsonl."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.evaluate", *args, "--out", str(out)], cwd=REPO,
                          env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "report.json").read_text()), (out / "episodes.jsonl").read_text()


def test_evaluate_plays_it_through_the_remote_env_with_the_numbers_of_evaluate_in_process(
        calculator_server, installed, tmp_path):  # noqa: F811
    common = ("--model", "oracle", "--model", "random", "--suite", "calculator", "--limit", "5", "--samples", "2")
    local, local_episodes = evaluation(installed, tmp_path / "local", *common)
    remote, remote_episodes = evaluation(installed, tmp_path / "remote", *common, "--remote", calculator_server.url)
    assert remote["results"] == local["results"] and remote["fingerprint"] == local["fingerprint"]
    assert remote_episodes == local_episodes
    oracle, random = local["results"]
    assert oracle["pass_at"]["1"] == 1.0 and random["pass_at"]["1"] < 1.0 and random["episodes"] == 10
