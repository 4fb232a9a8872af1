"""The server, against real clients on loopback: openenv-core's own clients, the openreward SDK, TRL's
OpenRewardSpec and ``openenv validate``; rewards checked against the same actions played in process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from typing import Any

import gymnasium as gym
import httpx
import pytest

pytest.importorskip("openenv")
pytest.importorskip("openreward")

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.actions import ANSWER_TOOL, parse_action
from agentgym_envs.registration import env_spec
from agentgym_envs.serve.__main__ import main as serve_main
from tasks import load_split
from tests.agentgym_envs.serve.served import Served

SEARCH = "agentrl/Search-v0"
TASKS = load_split("Search", "test")[:3]
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")  # the SDK's client would ask PyPI for its version



def oracle_actions(task) -> list[tuple[str, float, bool]]:
    """The Search oracle's actions on ``task`` in process, with each step's reward and terminated."""
    spec = env_spec(SEARCH)
    env = gym.make(SEARCH, split="test")
    try:
        observation, info = env.reset(seed=0, options={"task": task.id})
        policy = spec.policy("oracle", seed=0)
        policy.begin(task, observation, info)
        steps = []
        while True:
            action = policy.act(observation, info)
            observation, reward, terminated, truncated, info = env.step(action)
            steps.append((action, reward, terminated))
            if terminated or truncated:
                return steps
    finally:
        env.close()


def tool_calls(action: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of a text action, its answer as the ``answer`` tool."""
    parsed = parse_action(action)
    assert parsed.well_formed, parsed.errors
    if parsed.answer is not None:
        return [(ANSWER_TOOL, {"answer": parsed.answer})]
    return [(call.name, call.arguments) for call in parsed.tool_calls]


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_openenv_client_plays_the_oracle_with_the_in_process_rewards(search_server, task):
    from openenv.core.generic_client import GenericEnvClient

    expected = oracle_actions(task)
    assert expected[-1][1] > 0  # the oracle scores: equal rewards compare a real verdict
    with GenericEnvClient(base_url=search_server.url).sync() as env:
        result = env.reset(task=task.id, seed=0)
        assert result.observation["info"]["task_id"] == task.id
        for action, reward, terminated in expected:
            result = env.step({"content": action})
            assert (result.reward, result.observation["terminated"]) == (reward, terminated)
        assert result.done and "reward_components" in result.observation["info"]


def test_mcp_tools_are_the_env_tools_and_answer_and_finish_an_episode(search_server):
    from openenv.core.mcp_client import MCPToolClient

    task = TASKS[0]
    expected = oracle_actions(task)
    env = gym.make(SEARCH, split="test")
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in env.reset(seed=0)[1]["tools"]}
    env.close()
    with MCPToolClient(base_url=search_server.url).sync() as client:
        tools = {tool.name: tool.input_schema for tool in client.list_tools()}
        assert list(tools) == [*schemas, ANSWER_TOOL]
        assert all(tools[name] == schema for name, schema in schemas.items())
        client.reset(task=task.id, seed=0)
        for action, reward, terminated in expected:
            (name, arguments), = tool_calls(action)
            step = client.call_tool(name, **arguments)
            assert (step["reward"], step["terminated"]) == (reward, terminated)
        assert step["info"]["reward_components"]["outcome"] == 1.0


def test_the_ors_sdk_plays_episodes_with_the_reward_on_each_call(search_server, monkeypatch):
    import openreward

    monkeypatch.setenv("OPENREWARD_SESSION_URL", search_server.url)  # the SDK would prepend "sessions." to the host
    monkeypatch.setenv("OPENREWARD_API_URL", search_server.url)
    environment = openreward.OpenReward(base_url=search_server.url).environments.get("env")
    assert sorted(tool.name for tool in environment.list_tools()) == sorted(["search", "open", ANSWER_TOOL])
    tasks = environment.list_tasks("test")
    for index, task in enumerate(TASKS):
        assert tasks[index].task_spec["task_id"] == task.id
        expected = oracle_actions(task)
        with environment.session(split="test", index=index) as session:
            assert task.prompt in "".join(block.text for block in session.get_prompt())
            for action, reward, terminated in expected:
                (name, arguments), = tool_calls(action)
                output = session.call_tool(name, arguments)
                assert (output.reward, output.metadata["terminated"], output.finished) == (reward, terminated,
                                                                                           terminated)


def test_trl_openreward_spec_plays_episodes_to_the_end_with_the_right_rewards(search_server, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.openreward import OpenRewardSpec

    monkeypatch.setenv("OPENREWARD_SESSION_URL", search_server.url)
    monkeypatch.setenv("OPENREWARD_API_URL", search_server.url)
    spec = OpenRewardSpec(search_server.url, split="test", num_tasks=len(TASKS))
    assert spec.train_dataset["task_id"] == [task.id for task in TASKS]
    environments = [spec.environment_factory() for _ in TASKS]
    for index, (task, environment) in enumerate(zip(TASKS, environments, strict=True)):
        prompt = environment.reset(task_index=index)
        assert task.prompt in prompt
        for action, _, _ in oracle_actions(task):
            (name, arguments), = tool_calls(action)
            getattr(environment, name)(**arguments)
        environment._close()
    assert spec.reward_funcs(environments) == [oracle_actions(task)[-1][1] for task in TASKS]


def test_openenv_validate_passes(search_server):
    openenv = shutil.which("openenv")
    assert openenv is not None, "openenv-core's CLI is not on PATH"
    result = subprocess.run([openenv, "validate", search_server.url], capture_output=True, text=True, timeout=120)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["passed"], report


def test_bad_input_gets_clear_errors_and_the_session_keeps_working(search_server):
    from websockets.sync.client import connect

    with connect(search_server.url.replace("http", "ws") + "/ws") as socket:
        def exchange(message: str) -> dict[str, Any]:
            socket.send(message)
            return json.loads(socket.recv(timeout=30))

        assert exchange("{not json")["data"]["code"] == "INVALID_JSON"
        assert exchange('{"type": "dance"}')["data"]["code"] == "UNKNOWN_TYPE"
        assert "call reset before step" in exchange('{"type": "step", "data": {"content": "x"}}')["data"]["message"]
        assert "task" in exchange('{"type": "reset", "data": {"task": "no/such/task"}}')["data"]["message"]
        assert exchange('{"type": "step", "data": {"bogus": 1}}')["data"]["code"] == "VALIDATION_ERROR"
        reset = exchange(json.dumps({"type": "reset", "data": {"task": TASKS[0].id}}))
        assert reset["type"] == "observation"
        step = exchange(json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "serch",
                                                             "arguments": {"query": "x"}}}))
        assert step["data"]["observation"]["error"]["error_type"] == "tool_not_found"  # MCP refuses it
        step = exchange(json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "search",
                                                             "arguments": {"query": 5}}}))
        assert "Invalid arguments for search" in step["data"]["observation"]["result"]["content"][0]["text"]
        step = exchange(json.dumps({"type": "step", "data": {"tool_calls": [{"name": "search", "arguments": 5}]}}))
        assert step["data"]["observation"]["info"]["format_errors"] and not step["data"]["done"]
    answer = httpx.post(f"{search_server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                                          "params": {"session_id": "no-such-session"}}).json()
    assert "Unknown session_id" in answer["error"]["message"]
    assert httpx.post(f"{search_server.url}/mcp", content=b"{oops").json()["error"]["code"] == -32700


def test_concurrent_sessions_play_without_errors(search_server):
    from openenv.core.generic_client import GenericEnvClient

    expected = oracle_actions(TASKS[1])
    rewards: list[float] = []
    errors: list[BaseException] = []

    def play() -> None:
        try:
            with GenericEnvClient(base_url=search_server.url).sync() as env:
                env.reset(task=TASKS[1].id, seed=0)
                for action, _, _ in expected:
                    result = env.step({"content": action})
                rewards.append(result.reward)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=play) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == [] and rewards == [expected[-1][1]] * 16


def test_sessions_over_the_limit_are_refused_and_closed_ones_free_their_slot():
    from openenv.core.generic_client import GenericEnvClient
    from websockets.sync.client import connect

    served = Served(SEARCH, "--max-sessions", "2")
    try:
        first, second = (GenericEnvClient(base_url=served.url).sync() for _ in range(2))
        first.reset(seed=0)
        second.reset(seed=0)
        with connect(served.url.replace("http", "ws") + "/ws") as third:
            refusal = json.loads(third.recv(timeout=30))
        assert refusal["data"]["code"] == "CAPACITY_REACHED" and refusal["data"]["max_sessions"] == 2
        created = httpx.post(f"{served.url}/create", json={"split": "train", "index": 0},
                             headers={"X-Session-ID": "over-the-limit"})
        assert created.status_code == 500 and "most sessions (2)" in created.text
        first.close()
        time.sleep(0.5)
        with GenericEnvClient(base_url=served.url).sync() as fourth:
            assert fourth.reset(seed=0).observation["text"]
        second.close()
    finally:
        served.stop()


def test_a_token_is_required_when_given():
    from openenv.core.generic_client import GenericEnvClient

    served = Served(SEARCH, "--token", "s3cret")
    try:
        assert httpx.get(f"{served.url}/health").status_code == 401
        assert httpx.get(f"{served.url}/health", headers={"X-API-Key": "wrong"}).status_code == 401
        assert httpx.get(f"{served.url}/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with GenericEnvClient(base_url=f"{served.url}/auth/s3cret").sync() as env:
            assert env.reset(seed=0).observation["text"]
        with pytest.raises(ConnectionError, match="HTTP 403"), GenericEnvClient(base_url=served.url).sync() as env:
            env.reset(seed=0)
    finally:
        served.stop()


def test_serving_off_loopback_needs_a_token(monkeypatch):
    monkeypatch.delenv("AGENTRL_SERVE_TOKEN", raising=False)
    with pytest.raises(SystemExit, match="needs a token"):
        serve_main([SEARCH, "--host", "0.0.0.0"])


def bwrap_processes(pid: int) -> int:
    """bubblewrap processes under the server process."""
    import psutil

    return sum("bwrap" in child.name() for child in psutil.Process(pid).children(recursive=True))


@pytest.mark.bwrap
def test_a_sandboxed_env_is_played_and_released_even_when_its_client_vanishes_mid_step(backend_problems):
    from openenv.core.generic_client import GenericEnvClient
    from websockets.sync.client import connect

    from tests.conftest import require_backend

    require_backend("bwrap", backend_problems)
    env_id = "agentrl/PythonSandbox-v0"
    task = load_split("PythonSandbox", "test")[0]
    served = Served(env_id, "--env-kwargs", '{"sandbox": "bwrap", "split": "test"}', "--max-sessions", "2")
    try:
        spec = env_spec(env_id)
        with GenericEnvClient(base_url=served.url).sync() as env:
            result = env.reset(task=task.id, seed=0)
            policy = spec.policy("oracle", seed=0)
            policy.begin(task, result.observation["text"], result.observation["info"])
            while not result.done:
                result = env.step({"content": policy.act(result.observation["text"], result.observation["info"])})
                assert not result.observation["info"]["infra_error"]
            assert result.reward > 0 and bwrap_processes(served.process.pid) > 0
        with connect(served.url.replace("http", "ws") + "/ws") as socket:
            socket.send(json.dumps({"type": "reset", "data": {"task": task.id}}))
            socket.recv(timeout=60)
            code = 'import time; time.sleep(5); print("late")'
            socket.send(json.dumps({"type": "step", "data": {"tool_calls": [
                {"name": "python", "arguments": {"code": code}}]}}))
            time.sleep(0.5)  # the step is running; the client goes away
        deadline = time.monotonic() + 30
        while bwrap_processes(served.process.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert bwrap_processes(served.process.pid) == 0
        with GenericEnvClient(base_url=served.url).sync() as env:  # the server goes on
            assert env.reset(task=task.id, seed=0).observation["info"]["task_id"] == task.id
        # A server stop with a kernel running in a session of each protocol: the client is told, nothing is left.
        import psutil

        with connect(served.url.replace("http", "ws") + "/ws") as socket:
            for message in ({"type": "reset", "data": {"task": task.id}},
                            {"type": "step", "data": {"tool_calls": [{"name": "python",
                                                                      "arguments": {"code": "x = 1"}}]}}):
                socket.send(json.dumps(message))
                socket.recv(timeout=60)
            headers = {"X-Session-ID": "ors-session"}
            assert httpx.post(f"{served.url}/create", json={"split": "test", "index": 0}, headers=headers).is_success
            called = httpx.post(f"{served.url}/agentrlenvironment/call", headers=headers, timeout=60,
                                json={"name": "python", "input": {"code": "1"}})
            assert '"ok":true' in called.text
            children = psutil.Process(served.process.pid).children(recursive=True)
            assert sum("bwrap" in child.name() for child in children) >= 2
            served.stop()
            _, alive = psutil.wait_procs(children, timeout=15)
            assert alive == []
            with pytest.raises(Exception, match="1012"):  # the client learns the server went away (service restart)
                socket.send(json.dumps({"type": "step", "data": {"content": "<answer>1</answer>"}}))
                socket.recv(timeout=10)
    finally:
        if served.process.poll() is None:
            served.stop()


def test_trl_grpo_trains_two_steps_through_openrewardspec_on_the_server(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOConfig, GRPOTrainer
    from trl.experimental.openreward import OpenRewardSpec

    from benchmarks.rollout_throughput import Settings, load_warm_model
    from trainers.rollout import stop_token_ids
    from trainers.trl_environment import tool_calling_tokenizer

    served = Served(SEARCH, "--env-kwargs", '{"split": "test", "prompt_style": "task"}')
    try:
        monkeypatch.setenv("OPENREWARD_SESSION_URL", served.url)
        monkeypatch.setenv("OPENREWARD_API_URL", served.url)
        spec = OpenRewardSpec(served.url, split="test", num_tasks=4)
        # The warm-started tiny model calls tools (cached; shared with the rollout-throughput benchmark).
        model, tokenizer = load_warm_model(Settings())
        model.generation_config.eos_token_id = stop_token_ids(tokenizer)
        before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}

        def tool_calls(environments, **_):
            """Logged only: the tool calls each rollout made on the server."""
            return [float(len(environment.rewards)) for environment in environments]

        def length_parity(completions, **_):
            """A stand-in with variance, so that GRPO has a signal whatever the verifier says."""
            return [float(len(str(messages)) % 2) for messages in completions]

        args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, max_steps=2,
                          max_completion_length=256, max_tool_calling_iterations=2, learning_rate=1e-2,
                          generation_kwargs={"max_new_tokens": 48}, use_cpu=True, bf16=False, report_to=[],
                          save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0,
                          reward_weights=[1.0, 1.0, 0.0])
        trainer = GRPOTrainer(model=model, processing_class=tool_calling_tokenizer(tokenizer, list_tools=False),
                              args=args, train_dataset=spec.train_dataset,
                              environment_factory=spec.environment_factory,
                              reward_funcs=[spec.reward_funcs, length_parity, tool_calls])
        try:
            trainer.train()
        finally:  # TRL never closes its environments: end their ORS sessions (and the SDK's pings)
            for environment in (env for pool in trainer._environment_pool.values() for env in pool):
                environment._close()
        assert trainer.state.global_step == 2
        logged = [entry for entry in trainer.state.log_history if "rewards/tool_calls/mean" in entry]
        assert len(logged) == 2 and sum(entry["rewards/tool_calls/mean"] for entry in logged) > 0
        assert any(not (parameter == before[name]).all() for name, parameter in model.named_parameters())
    finally:
        served.stop()
