"""agentrl/Remote-v0: a served agentrl env, and an OpenEnv server agentrl did not write, as Gymnasium envs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("openenv")

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs import describe
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.registration import REMOTE_ID, env_spec
from benchmarks import evaluate
from tasks import InfrastructureError, load_split
from tests.agentgym_envs.serve.served import Served, free_port

SEARCH = "agentrl/Search-v0"
TASKS = load_split("Search", "test")[:2]


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


def evaluate_report(out: Path, *args: str) -> tuple[int, dict, str]:
    """``python -m benchmarks.evaluate`` (in this process) with ``args``: its status, report.json and episodes.jsonl."""
    status = evaluate.main([*args, "--out", str(out)])
    return status, json.loads((out / "report.json").read_text()), (out / "episodes.jsonl").read_text()


def test_the_remote_env_gives_the_served_envs_card_and_tasks_as_the_agent_sees_them(search_server):
    env, local = gym.make(REMOTE_ID, url=search_server.url), gym.make(SEARCH, split="test")
    try:
        assert describe(env) == describe(local)  # the served id and turn limit, not Remote-v0's
        assert [task.id for task in env.unwrapped.tasks] == [task.id for task in local.unwrapped.tasks]
        shown = env.unwrapped.tasks[0]
        assert shown.prompt == local.unwrapped.tasks[0].prompt and shown.answer is None and shown.metadata == {}
    finally:
        env.close()
        local.close()


def test_evaluate_through_the_remote_env_gives_the_numbers_of_evaluate_in_process(search_server, tmp_path):
    common = ("--model", "oracle", "--model", "random", "--suite", "search", "--limit", "4", "--samples", "2")
    status, local, local_episodes = evaluate_report(tmp_path / "local", *common)
    remote_status, remote, remote_episodes = evaluate_report(tmp_path / "remote", *common, "--remote",
                                                             search_server.url)
    assert status == remote_status == 0
    assert remote["config"]["remote"] == search_server.url
    assert remote["results"] == local["results"] and remote["fingerprint"] == local["fingerprint"]
    assert remote_episodes == local_episodes
    oracle, random = local["results"]
    assert oracle["pass_at"]["1"] == 1.0 and oracle["episodes"] == 4 and random["episodes"] == 8  # real verdicts
    assert (tmp_path / "remote" / "report.md").read_text().count(f"played on the server at {search_server.url}") == 1


@pytest.mark.parametrize(("args", "message"), [
    (("--split", "train"), "serves split 'test' in prompt style 'full', not 'train'"),
    (("--suite", "python"), "serves agentrl/Search-v0, not agentrl/PythonSandbox-v0"),
    (("--suite", "search,python"), "--remote plays one suite"),
    (("--suite", "python", "--model", "oracle"), "oracle reads the task's reference solution, which a server never"),
])
def test_evaluate_refuses_a_remote_suite_the_server_does_not_serve(search_server, args, message):
    with pytest.raises(SystemExit, match=message):
        evaluate.main(["--model", "random", "--remote", search_server.url, *args])


def test_infrastructure_faults_on_the_server_and_of_the_server_are_counted_as_in_process(tmp_path, monkeypatch):
    """A served Search-v0 whose retriever does not answer: every episode an infrastructure fault, counted by
    evaluate's own summary exactly as in process, and unscored over ORS; a session idle past ``--idle-timeout``
    and a server that stops are infrastructure faults of the client env (the episode runner counts them), not
    crashes."""
    import openreward

    dead = f"http://127.0.0.1:{free_port()}"
    served = Served(SEARCH, "--env-kwargs", json.dumps({"split": "test", "retriever": dead}), "--idle-timeout", "4")
    tasks = load_split("Search", "test")[:3]
    requests = evaluate.group_requests([(SEARCH, task) for task in tasks], 2, 0)
    try:
        summaries = []
        for env in (gym.make(SEARCH, split="test", retriever=dead), gym.make(REMOTE_ID, url=served.url)):
            try:
                episodes = evaluate.play_scripted("random", "search", env, requests, lambda _: None)
            finally:
                env.close()
            summaries.append(evaluate.summarize("random", "search", "scripted", episodes, samples=2, ks=(1, 2)))
        local, remote = summaries
        assert remote == local
        assert remote.infra_errors == remote.episodes == 6 and remote.scored == 0
        assert dead.removeprefix("http://") in remote.first_infra_error
        status, report, _ = evaluate_report(tmp_path, "--model", "random", "--limit", "2", "--remote", served.url)
        assert status == 1 and report["results"][0]["infra_errors"] == 2  # nothing scored: the run says so

        monkeypatch.setenv("OPENREWARD_SESSION_URL", served.url)
        monkeypatch.setenv("OPENREWARD_API_URL", served.url)
        environment = openreward.OpenReward(base_url=served.url).environments.get("env")
        with environment.session(split="test", index=0) as session:
            output = session.call_tool("search", {"query": "Maemton"})
        assert output.reward is None and output.finished and output.metadata["info"]["infra_error"]

        env = gym.make(REMOTE_ID, url=served.url)
        env.reset(seed=0, options={"task": tasks[0]})
        time.sleep(11)  # idle past --idle-timeout 4 (openenv-core's reaper looks every 5 s)
        with pytest.raises(InfrastructureError, match="closed this session"):
            env.step("<answer>x</answer>")
        assert env.reset(seed=0, options={"task": tasks[0]})[1]["task_id"] == tasks[0].id  # a new session
        served.stop()
        with pytest.raises(InfrastructureError, match="did not answer"):
            env.step("<answer>x</answer>")
        env.close()
    finally:
        if served.process.poll() is None:
            served.stop()


def test_grpo_reads_the_served_envs_tasks_and_card(search_server, tmp_path):
    """What ``python -m trainers.grpo --envs agentrl/Remote-v0 --env_kwargs '{"agentrl/Remote-v0": {"url": ...}}'``
    reads before its rollouts: the served env's tasks and its card (reward components, required tools)."""
    from trainers.grpo import AgentGRPOConfig, default_env_factory, env_cards, reward_component_names, tasks_from_envs

    config = AgentGRPOConfig(output_dir=str(tmp_path), envs=[REMOTE_ID], max_steps=1, use_cpu=True, report_to=[],
                             env_kwargs={REMOTE_ID: {"url": search_server.url}})
    local = gym.make(SEARCH, split="test")
    try:
        assert [task.id for task in tasks_from_envs(config)[REMOTE_ID]] == [task.id for task in local.unwrapped.tasks]
        cards = env_cards(config.envs, default_env_factory(config))
        assert cards[REMOTE_ID] == describe(local) and reward_component_names(cards)[0] == "outcome"
    finally:
        local.close()
