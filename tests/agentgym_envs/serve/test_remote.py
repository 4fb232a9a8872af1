"""agentrl/Remote-v0: a served agentrl env, and an OpenEnv server agentrl did not write, as Gymnasium envs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("openenv")

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.registration import REMOTE_ID, env_spec
from tasks import load_split
from tests.agentgym_envs.serve.served import Served, free_port

pytestmark = pytest.mark.slow  # a server process (imports openenv-core and openreward)
SEARCH = "agentrl/Search-v0"
TASKS = load_split("Search", "test")[:2]


@pytest.fixture(scope="module")
def search_server() -> Iterator[Served]:
    served = Served(SEARCH, "--env-kwargs", '{"split": "test"}')
    yield served
    served.stop()


def test_the_remote_env_passes_check_env(search_server):
    env = gym.make(REMOTE_ID, url=search_server.url)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_the_remote_env_plays_the_oracle_with_the_rewards_of_the_env_in_process(search_server):
    spec = env_spec(SEARCH)
    remote, local = gym.make(REMOTE_ID, url=search_server.url), gym.make(SEARCH, split="test")
    try:
        for task in TASKS:
            remote_observation, remote_info = remote.reset(seed=0, options={"task": task.id})
            local_observation, local_info = local.reset(seed=0, options={"task": task.id})
            assert remote_observation == local_observation and remote_info["task_id"] == task.id
            policy = spec.policy("oracle", seed=0)
            policy.begin(task, local_observation, local_info)
            done = False
            while not done:
                action = policy.act(local_observation, local_info)
                local_observation, reward, terminated, truncated, local_info = local.step(action)
                step = remote.step(action)
                assert step[:4] == (local_observation, reward, terminated, truncated)
                done = terminated or truncated
            assert reward > 0
    finally:
        remote.close()
        local.close()


def test_the_remote_env_sends_structured_actions(search_server):
    env = gym.make(REMOTE_ID, url=search_server.url)
    try:
        env.reset(seed=0, options={"task": TASKS[0].id})
        observation, _, _, _, info = env.step({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c7", "type": "function", "function": {"name": "search", "arguments": '{"query": "river"}'}}]})
        assert observation.startswith("[search result (ok)]") and info["tool_messages"][0]["tool_call_id"] == "c7"
        observation, _, terminated, _, _ = env.step({"name": "answer", "arguments": {"answer": "x"}})
        assert terminated
    finally:
        env.close()


def test_a_url_without_a_server_is_a_clear_error():
    with pytest.raises(EnvConfigError, match="expected an OpenEnv server"):
        gym.make(REMOTE_ID, url=f"http://127.0.0.1:{free_port()}")


@pytest.fixture(scope="module")
def foreign_server() -> Iterator[str]:
    """An OpenEnv server agentrl did not write: openenv-core's MCP environment with a counter tool and an answer
    tool (done, reward 1 for the answer "3")."""
    import uvicorn
    from fastmcp import FastMCP
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import Action, Observation, State

    class CounterEnvironment(MCPEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            self.count = 0
            mcp = FastMCP("counter")

            @mcp.tool()
            def increment(by: int) -> str:
                """Add to the counter."""
                self.count += by
                return f"count={self.count}"

            @mcp.tool()
            def answer(answer: str) -> str:
                """Give the final answer."""
                return "right" if answer == str(self.count) else "wrong"

            super().__init__(mcp)

        def reset(self, seed=None, episode_id=None, **kwargs) -> Observation:
            self.count = 0
            return Observation(metadata={"prompt": "Reach 3, then answer the count."})

        def _step_impl(self, action: Action, timeout_s=None, **kwargs) -> Observation:
            return Observation()

        async def _async_handle_call_tool(self, action: CallToolAction, timeout_s=None) -> CallToolObservation:
            observation = await super()._async_handle_call_tool(action, timeout_s=timeout_s)
            if action.tool_name == "answer":
                observation.done, observation.reward = True, float(self.count == 3)
            return observation

        @property
        def state(self) -> State:
            return State(step_count=self.count)

    port = free_port()
    app = create_fastapi_app(CounterEnvironment, Action, Observation, max_concurrent_envs=4)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_the_remote_env_plays_an_mcp_server_agentrl_did_not_write(foreign_server):
    env = gym.make(REMOTE_ID, url=foreign_server)
    try:
        assert not env.unwrapped.served_by_agentrl
        env.reset(seed=0)
        observation, reward, terminated, _, _ = env.step(
            '<tool_call>{"name": "increment", "arguments": {"by": 1}}</tool_call>'
            '<tool_call>{"name": "increment", "arguments": {"by": 2}}</tool_call>')
        assert "count=1" in observation and "count=3" in observation and not terminated
        observation, reward, terminated, _, _ = env.step("<tool_call>{bad json</tool_call>")
        assert "could not be used" in observation and not terminated
        observation, reward, terminated, _, _ = env.step("<answer>3</answer>")
        assert "right" in observation and reward == 1.0 and terminated
    finally:
        env.close()
