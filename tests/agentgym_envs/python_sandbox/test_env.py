"""PythonSandbox-v0 end to end on the real backends: tools, verifiers, hidden tests, limits, infra errors."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.python_sandbox import PythonSandboxEnv
from agentgym_envs.sandbox import SandboxLimits
from tasks import Task, load_split

TEST_TASKS = load_split("PythonSandbox", "test")
MATH = next(t for t in TEST_TASKS if t.family == "math")
CODE = next(t for t in TEST_TASKS if t.family == "code")


def python_call(code: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'python', 'arguments': {'code': code}})}</tool_call>"


def code_answer(source: str) -> str:
    return f"<answer>```python\n{source}```</answer>"


@pytest.fixture
def env(backend):
    env = gym.make("agentrl/PythonSandbox-v0", sandbox=backend, split="test")
    yield env
    env.close()


def test_math_episode_with_the_reference_solution_scores_one(env):
    observation, info = env.reset(options={"task": MATH.id})
    assert MATH.prompt in observation and '"name": "python"' in observation
    assert info["tools"][0]["function"]["name"] == "python"
    observation, reward, terminated, truncated, info = env.step(python_call(MATH.metadata["reference_solution"]))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool"] == "python" and info["ok"] and not info["infra_error"] and info["latency_s"] > 0
    printed = observation.splitlines()[-1]
    _, reward, terminated, _, info = env.step(f"<answer>{printed}</answer>")
    assert terminated and reward == 1.0
    assert info["reward_components"]["outcome"] == 1.0
    assert {"format", "tool_use"} <= set(info["reward_components"])  # weight-0 terms are logged


def test_wrong_math_answer_scores_zero(env):
    env.reset(options={"task": MATH.id})
    _, reward, terminated, _, info = env.step("<answer>definitely not it</answer>")
    assert terminated and reward == 0.0 and info["reward_components"]["outcome"] == 0.0


def test_kernel_state_persists_across_turns(env):
    env.reset(options={"task": MATH.id})
    env.step(python_call("import math\nvalue = math.factorial(5)\nopen('note.txt', 'w').write('kept')"))
    observation, *_ = env.step(python_call("print(value, open('note.txt').read())"))
    assert "120 kept" in observation


def test_reset_gives_a_clean_sandbox(env):
    env.reset(options={"task": MATH.id})
    env.step(python_call("secret = 1\nopen('left.txt', 'w').write('x')"))
    env.reset(options={"task": MATH.id})
    observation, *_ = env.step(python_call("import os\nprint('secret' in globals(), os.listdir('.'))"))
    assert "False []" in observation


def test_correct_code_solution_passes_every_hidden_test(env):
    env.reset(options={"task": CODE.id})
    _, reward, terminated, _, info = env.step(code_answer(CODE.metadata["reference_solution"]))
    assert terminated and reward == 1.0
    assert info["reward_components"]["outcome/total"] == len(CODE.metadata["tests"])


def test_partly_wrong_code_gets_partial_credit(env):
    # a solution that is right only on the first hidden test's arguments
    first = CODE.metadata["tests"][0]
    source = (f"def {CODE.metadata['entry_point']}(*args):\n"
              f"    if list(args) == {first['args']!r}:\n        return {first['expected']!r}\n"
              f"    return None\n")
    env.reset(options={"task": CODE.id})
    _, reward, terminated, _, _ = env.step(code_answer(source))
    assert terminated and 0.0 < reward < 1.0


@pytest.mark.parametrize("source", [
    "import os\nos._exit(0)\n",                                   # exit early with success
    "import sys\nprint('all tests passed')\nsys.exit(0)\n",        # claim success and stop
    "raise SystemExit(0)\n",                                      # the same through an exception
])
def test_early_exit_cannot_pass_hidden_tests(env, source):
    env.reset(options={"task": CODE.id})
    _, reward, terminated, _, _ = env.step(code_answer(source))
    assert terminated and reward == 0.0


def test_hidden_tests_are_not_in_the_sandbox_during_the_episode(env):
    env.reset(options={"task": CODE.id})
    needle = json.dumps(CODE.metadata["tests"][-1]["args"])[:40]
    search = ("import os\nhits = []\nfor root in ('/work', '/tmp'):\n"
              "    for d, _, files in os.walk(root):\n"
              "        for f in files:\n"
              "            p = os.path.join(d, f)\n"
              "            try:\n                data = open(p, errors='ignore').read()\n"
              "            except OSError:\n                continue\n"
              f"            hits += [p] if {needle!r} in data or 'expected' in data else []\n"
              "print('hits', hits)")
    observation, *_ = env.step(python_call(search))
    assert "hits []" in observation


def test_malformed_and_unknown_tool_calls_are_observations(env):
    env.reset(options={"task": MATH.id})
    observation, reward, terminated, truncated, info = env.step('<tool_call>{"name": "python"</tool_call>')
    assert "is not valid JSON" in observation and not (terminated or truncated)
    assert info["format_errors"] and not info["ok"] and reward == 0.0
    observation, *_, info = env.step('<tool_call>{"name": "pyhton", "arguments": {"code": "1"}}</tool_call>')
    assert "Unknown tool 'pyhton'" in observation and "Did you mean 'python'?" in observation
    assert info["tool_calls"][0]["ok"] is False and not info["infra_error"]
    observation, *_ = env.step('<tool_call>{"name": "python", "arguments": {"code": 5}}</tool_call>')
    assert "Invalid arguments for python" in observation and "is not of type 'string'" in observation
    observation, *_ = env.step('<tool_call>{"name": "python", "arguments": {"cmd": "1"}}</tool_call>')
    assert "'code' is a required property" in observation


def test_turn_limit_truncates(env):
    env.reset(options={"task": MATH.id})
    truncated = terminated = False
    for _ in range(env.spec.max_episode_steps):
        _, _, terminated, truncated, _ = env.step("thinking out loud, no tags")
    assert truncated and not terminated


def test_step_before_reset_is_an_error(backend):
    env = PythonSandboxEnv(sandbox=backend, split="test")
    with pytest.raises(gym.error.ResetNeeded):
        env.step("<answer>1</answer>")
    env.close()


@pytest.mark.docker
def test_dead_container_is_an_infrastructure_error_not_a_wrong_answer(backend_problems):
    if backend_problems["docker"]:
        pytest.skip(backend_problems["docker"])
    env = PythonSandboxEnv(sandbox="docker", split="test")
    try:
        env.reset(options={"task": MATH.id})
        env.unwrapped.sandbox.container.kill()
        observation, reward, terminated, truncated, info = env.step(python_call("print(1)"))
        assert info["infra_error"] and info["tool_calls"][0]["infra_error"]
        assert truncated and not terminated and reward == 0.0
        assert "not your fault" in observation
        env.reset(options={"task": MATH.id})  # a new container replaces the dead one
        observation, *_ = env.step(python_call("print(6 * 7)"))
        assert "42" in observation
    finally:
        env.close()


def test_vector_envs(backend):
    def make():
        return gym.make("agentrl/PythonSandbox-v0", sandbox=backend, split="test")

    for vector in (gym.vector.SyncVectorEnv([make, make]),
                   gym.vector.AsyncVectorEnv([make, make], shared_memory=False)):
        try:
            observations, _ = vector.reset(seed=[1, 2])
            assert all(isinstance(o, str) and "python" in o for o in observations)
            observations, *_ = vector.step([python_call("print(40 + 2)")] * 2)
            assert all("42" in o for o in observations)
        finally:
            vector.close()


def _oracle_episode(env: PythonSandboxEnv, task: Task) -> tuple[float, bool]:
    env.reset(options={"task": task.id})
    observation, *_, info = env.step(python_call(task.metadata["reference_solution"]))
    infra = info["infra_error"]
    answer = (f"<answer>{observation.splitlines()[-1]}</answer>" if task.family == "math"
              else code_answer(task.metadata["reference_solution"]))
    _, reward, _, _, info = env.step(answer)
    return reward, infra or info["infra_error"]


@pytest.mark.docker
def test_64_concurrent_episodes_without_infra_errors_or_leftovers(backend_problems):
    if backend_problems["docker"]:
        pytest.skip(backend_problems["docker"])
    import os

    from agentgym_envs.sandbox.docker import OWNER_LABEL, connect

    tasks = TEST_TASKS[:64]
    # 64 kernels importing sympy on two cores: generous time limits, so only infrastructure can fail
    limits = SandboxLimits(timeout_s=120)
    envs = [PythonSandboxEnv(sandbox="docker", split="test", sandbox_limits=limits, test_timeout_s=60)
            for _ in tasks]
    try:
        with ThreadPoolExecutor(max_workers=64) as workers:
            outcomes = list(workers.map(_oracle_episode, envs, tasks))
    finally:
        for env in envs:
            env.close()
    assert not any(infra for _, infra in outcomes)
    failed = [task.id for task, (reward, _) in zip(tasks, outcomes, strict=True) if reward != 1.0]
    assert failed == []  # the oracle solves every one
    left = connect().containers.list(all=True, filters={"label": f"{OWNER_LABEL}={os.getpid()}"})
    assert left == []
