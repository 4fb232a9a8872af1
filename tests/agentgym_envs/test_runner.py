"""The episode runner's schedules: episodes advance independently (async) or in rounds, with the same outcomes."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401
from agentgym_envs.policies import ScriptedAgent, answer_action, tool_call_action
from agentgym_envs.runner import AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from tasks import InfrastructureError, Task, load_split

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:4]


class SearchThenAnswer:
    """Searches ``searches`` times (a different query each time), then answers the gold answer."""

    def __init__(self, searches: int) -> None:
        self.searches = searches
        self._task: Task | None = None
        self._done = 0

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        self._task, self._done = task, 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        assert self._task is not None
        if self._done < self.searches:
            self._done += 1
            return tool_call_action("search", query=f"{self._task.prompt} {self._done}", k=2)
        return answer_action(self._task.answer[0])


class RecordingAgent(ScriptedAgent):
    """A scripted agent that records which episodes each ``act`` call acted for, and every ``finish``."""

    def __init__(self, searches: Sequence[int]) -> None:
        super().__init__(lambda request: SearchThenAnswer(searches[request.seed]))
        self.batches: list[list[int]] = []
        self.finished: list[int] = []

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | None]:
        self.batches.append([episode.index for episode in episodes])
        return super().act(episodes, observations, infos)

    def finish(self, episode: Episode) -> None:
        self.finished.append(episode.index)
        super().finish(episode)


class HeldStep(gym.Wrapper):
    """Holds its first step until ``release`` is set (at most ``timeout_s``), and says whether it was released."""

    def __init__(self, env: gym.Env, release: threading.Event, timeout_s: float = 20.0) -> None:
        super().__init__(env)
        self.release = release
        self.timeout_s = timeout_s
        self.released: bool | None = None

    def step(self, action: str):
        if self.released is None:
            self.released = self.release.wait(self.timeout_s)
        return self.env.step(action)


def requests(count: int) -> list[EpisodeRequest]:
    return [EpisodeRequest(ENV_ID, TASKS[i % len(TASKS)], group=i, seed=i) for i in range(count)]


def outcome(episodes: Sequence[Episode]) -> list[tuple]:
    return [(e.index, e.task_id, e.stop_reason, e.reward, [t.action for t in e.turns], [t.observation for t in e.turns])
            for e in episodes]


@pytest.fixture
def pool():
    envs = EnvPool(lambda env_id: gym.make(env_id, split="train"))
    yield envs
    envs.close()


class ReleasingAgent(RecordingAgent):
    """Sets ``release`` once the episodes ``others`` have all finished."""

    def __init__(self, searches: Sequence[int], release: threading.Event, others: set[int]) -> None:
        super().__init__(searches)
        self.release, self.others = release, others

    def finish(self, episode: Episode) -> None:
        super().finish(episode)
        if set(self.finished) >= self.others:
            self.release.set()


def test_a_slow_tool_stalls_no_other_episode_under_the_async_schedule():
    release = threading.Event()
    held = HeldStep(gym.make(ENV_ID, split="train"), release)
    made = iter([held, *(gym.make(ENV_ID, split="train") for _ in range(3))])  # the pool makes them in request order
    envs = EnvPool(lambda _: next(made))
    agent = ReleasingAgent([1, 2, 3, 2], release, others={1, 2, 3})
    try:
        episodes = EpisodeRunner(envs, workers=4, schedule="async").run(agent, requests(4))
    finally:
        envs.close()
    assert held.released  # episode 0's tool call returned only after the three others had played to their end
    assert agent.finished[-1] == 0
    assert [(episode.stop_reason, len(episode.turns)) for episode in episodes] == [
        ("answered", 2), ("answered", 3), ("answered", 4), ("answered", 3)]


@pytest.mark.parametrize("workers", [1, 8])
def test_async_and_rounds_schedules_play_the_same_episodes(pool, workers: int):
    searches = [0, 3, 1, 2, 2, 0, 1, 3]
    rounds_agent, async_agent = RecordingAgent(searches), RecordingAgent(searches)
    in_rounds = EpisodeRunner(pool, workers=workers, schedule="rounds").run(rounds_agent, requests(8))
    in_async = EpisodeRunner(pool, workers=workers, schedule="async", batch_window_s=0.0).run(async_agent, requests(8))
    assert outcome(in_async) == outcome(in_rounds)
    assert [len(e.turns) for e in in_async] == [n + 1 for n in searches]
    # rounds: each act call is every episode still running, in lockstep
    assert rounds_agent.batches == [[i for i, n in enumerate(searches) if n >= turn] for turn in range(4)]
    assert sorted(rounds_agent.finished) == sorted(async_agent.finished) == list(range(8))


def test_steps_that_return_together_are_acted_on_in_one_batch(pool):
    runner = EpisodeRunner(pool, workers=6, schedule="async", batch_window_s=1.0)
    runner.run(RecordingAgent([0] * 6), requests(6))  # the envs exist and their search index is built
    agent = RecordingAgent([2] * 6)
    runner.run(agent, requests(6))
    assert agent.batches == [list(range(6))] * 3


def test_a_batch_turn_limit_overrides_the_runners(pool):
    runner = EpisodeRunner(pool, max_turns=3, schedule="async")
    short = runner.run(RecordingAgent([5] * 2), requests(2), max_turns=1)
    assert [(len(e.turns), e.stop_reason) for e in short] == [(1, "max_turns")] * 2
    default = runner.run(RecordingAgent([5] * 2), requests(2))
    assert [(len(e.turns), e.stop_reason) for e in default] == [(3, "max_turns")] * 2
    with pytest.raises(ValueError, match="max_turns"):
        runner.run(RecordingAgent([1]), requests(1), max_turns=0)


class OutOfContext(RecordingAgent):
    """Its context budget is spent before its first turn."""

    def act(self, episodes, observations, infos):
        return [None] * len(episodes)


UNANSWERED = {"outcome": 0.0, "f1": 0.0, "format": 0.0, "tool_use": 0.0}  # Search's terms, none scored


def test_an_episode_that_ends_unanswered_reports_every_term_of_its_reward_as_zero(pool):
    runner = EpisodeRunner(pool, schedule="async")
    stopped = runner.run(RecordingAgent([5, 0]), requests(2), max_turns=1)  # the runner's limit; an answer
    assert [(e.stop_reason, e.reward_components) for e in stopped] == [
        ("max_turns", UNANSWERED), ("answered", {**stopped[1].reward_components, "outcome": 1.0})]
    assert set(stopped[1].reward_components) > set(UNANSWERED)  # scored: the terms and their sub-components
    (limited,) = runner.run(RecordingAgent([12]), requests(1))  # the env's 10 turns: the env reports them
    assert (limited.stop_reason, limited.reward, limited.reward_components) == ("turn_limit", 0.0, UNANSWERED)
    (cut,) = runner.run(OutOfContext([0]), requests(1))
    assert (cut.stop_reason, cut.reward_components) == ("context", UNANSWERED)


class FailingStep(gym.Wrapper):
    """Its second step raises an infrastructure fault (a remote worker that died)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: str):
        self.steps += 1
        if self.steps == 2:
            raise InfrastructureError("env worker died")
        return self.env.step(action)


class FailingReset(gym.Wrapper):
    def reset(self, **kwargs):
        raise InfrastructureError("sandbox did not start")


@pytest.mark.parametrize("schedule", ["async", "rounds"])
def test_an_infrastructure_fault_raised_by_a_step_or_reset_ends_that_episode_only(schedule: str):
    made = iter([FailingStep(gym.make(ENV_ID, split="train")), FailingReset(gym.make(ENV_ID, split="train")),
                 gym.make(ENV_ID, split="train")])
    envs = EnvPool(lambda _: next(made))
    agent = RecordingAgent([3, 3, 3])
    try:
        failed_step, failed_reset, fine = EpisodeRunner(envs, schedule=schedule).run(agent, requests(3))
    finally:
        envs.close()
    assert (failed_step.stop_reason, failed_step.infra_error, len(failed_step.turns)) == ("infra_error", True, 2)
    assert failed_step.turns[-1].infra_error and "env worker died" in failed_step.turns[-1].observation
    assert (failed_reset.stop_reason, failed_reset.turns, failed_reset.trajectory) == ("infra_error", [], None)
    assert (fine.stop_reason, fine.reward) == ("answered", 1.0)
    assert sorted(agent.finished) == [0, 1, 2]


def test_an_unknown_schedule_is_refused(pool):
    with pytest.raises(ValueError, match="schedule"):
        EpisodeRunner(pool, schedule="eager")
