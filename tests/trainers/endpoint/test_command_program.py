"""Agent programs in their own processes: a command per episode, or worker processes that play episode after
episode; the env reached over the endpoint's session routes."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

import agentgym_envs  # noqa: F401
from agentgym_envs.actions import answer_action, tool_call_action
from agentgym_envs.runner import EpisodeRequest
from tasks import load_split
from tests.trainers.endpoint.test_endpoint import ScriptedGenerator, generated_spans
from trainers.agent_client import RemoteSession
from trainers.agent_program import AgentProgramRollout, CommandProgram, WorkerPrograms
from trainers.rollout import RolloutConfig

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:2]
CONFIG = RolloutConfig(max_turns=3, max_tokens_per_turn=12)
TOOL_LOOP = [sys.executable, "-m", "trainers.agent_client", "trainers.agents.openai_sdk:tool_loop"]
SEARCH_THEN_ANSWER = [tool_call_action("search", query="birth year"), answer_action("1970")]


def test_the_tool_loop_as_a_process_per_episode_is_played_and_scored(tokenizer, envs):
    generator = ScriptedGenerator(tokenizer, [tool_call_action("search", query="birth year"), answer_action("1970")])
    with AgentProgramRollout(generator, tokenizer, envs, CommandProgram(TOOL_LOOP), CONFIG) as rollout:
        [episode] = rollout.run([EpisodeRequest(ENV_ID, TASKS[0], 0, 0)])
        assert rollout.endpoint.errors == {} and not rollout.endpoint.sessions

    assert episode.stop_reason == "answered" and episode.success, episode.error
    assert [call["name"] for call in episode.tool_calls] == ["search"]
    assert generated_spans(episode) == generator.ids


def test_a_failing_command_is_an_unscored_agent_error_with_its_stderr(tokenizer, envs):
    failing = CommandProgram([sys.executable, "-c", "import sys; sys.exit('no API key configured')"])
    with AgentProgramRollout(ScriptedGenerator(tokenizer, ["x"]), tokenizer, envs, failing, CONFIG) as rollout:
        episodes = rollout.run([EpisodeRequest(ENV_ID, task, i, i) for i, task in enumerate(TASKS)])
    assert all(e.stop_reason == "agent_error" and not e.scored for e in episodes)
    assert "exited with status 1" in episodes[0].error and "no API key configured" in episodes[0].error


def test_a_command_that_never_finishes_is_timed_out_and_its_process_killed(tokenizer, envs, tmp_path):
    pid_file = tmp_path / "pid"
    hanging = CommandProgram(["sh", "-c", f"echo $$ > {pid_file}; sleep 60"])
    with AgentProgramRollout(ScriptedGenerator(tokenizer, ["x"]), tokenizer, envs, hanging, CONFIG,
                             timeout_s=1.0) as rollout:
        started = time.monotonic()
        [episode] = rollout.run([EpisodeRequest(ENV_ID, TASKS[0], 0, 0)])
        assert time.monotonic() - started < 10
    assert episode.stop_reason == "agent_timeout" and not episode.scored
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited
        return stat.read().split(") ")[1][0] != "Z"


def test_a_process_not_started_by_a_runner_is_told_what_it_lacks():
    with pytest.raises(ValueError, match="expected AGENTRL_SESSION_URL and OPENAI_BASE_URL in the environment"):
        RemoteSession.from_environment({})


def test_a_worker_process_plays_episode_after_episode_and_stops_with_the_rollout(tokenizer, envs):
    workers = WorkerPrograms("trainers.agents.openai_sdk:tool_loop", workers=1)
    generator = ScriptedGenerator(tokenizer, SEARCH_THEN_ANSWER * 2)
    with AgentProgramRollout(generator, tokenizer, envs, workers, CONFIG) as rollout:
        episodes, pids = [], []
        for i, task in enumerate(TASKS):
            episodes += rollout.run([EpisodeRequest(ENV_ID, task, i, i)])
            pids.append(workers.pids)
        assert rollout.endpoint.errors == {} and not rollout.endpoint.sessions
        processes = list(workers._processes)

    assert len(pids[0]) == 1 and pids[0] == pids[1]  # the same process played both episodes
    for i, episode in enumerate(episodes):
        assert episode.stop_reason == "answered" and episode.scored, episode.error
        assert [call["name"] for call in episode.tool_calls] == ["search"]
        assert generated_spans(episode) == generator.ids[2 * i:2 * i + 2]
    assert all(process.poll() is not None for process in processes) and workers.pids == []


def test_a_program_that_raises_in_a_worker_is_an_unscored_agent_error_and_the_worker_plays_on(tokenizer, envs,
                                                                                              tmp_path, monkeypatch):
    (tmp_path / "crashing_agent.py").write_text(textwrap.dedent("""
        def program(session):
            session.call("search", {"query": "birth year"})
            raise RuntimeError("the agent's own bug")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    workers = WorkerPrograms("crashing_agent:program", workers=1, env={"PYTHONPATH": str(tmp_path)})
    generator = ScriptedGenerator(tokenizer, SEARCH_THEN_ANSWER)
    with AgentProgramRollout(generator, tokenizer, envs, workers, CONFIG) as rollout:
        episodes = [rollout.run([EpisodeRequest(ENV_ID, task, i, i)])[0] for i, task in enumerate(TASKS)]
        assert len(workers.pids) == 1
    for episode in episodes:
        assert episode.stop_reason == "agent_error" and not episode.scored
        assert "raised in its worker process" in episode.error and "the agent's own bug" in episode.error
        assert [call["name"] for call in episode.tool_calls] == ["search"]  # what it did before is on the record


def test_a_worker_that_dies_mid_episode_times_the_episode_out_and_is_started_again(tokenizer, envs, tmp_path,
                                                                                  monkeypatch):
    (tmp_path / "dying_agent.py").write_text(textwrap.dedent("""
        import os

        def program(session):
            session.call("search", {"query": "birth year"})
            os._exit(1)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    workers = WorkerPrograms("dying_agent:program", workers=1, env={"PYTHONPATH": str(tmp_path)})
    generator = ScriptedGenerator(tokenizer, SEARCH_THEN_ANSWER)
    with AgentProgramRollout(generator, tokenizer, envs, workers, CONFIG, timeout_s=2.0) as rollout:
        episodes, pids = [], []
        for i, task in enumerate(TASKS):
            episodes += rollout.run([EpisodeRequest(ENV_ID, task, i, i)])
            pids.append(workers.pids)
    assert all(e.stop_reason == "agent_timeout" and not e.scored for e in episodes)
    assert len(pids[1]) == 1 and pids[1] != pids[0]  # a fresh worker played the second episode
