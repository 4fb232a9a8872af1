"""The contract the base classes write once: reward dispatch, infrastructure faults, the one episode runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import pytest

from agentgym_envs import EnvConfigError, TextEnv, Tool, ToolResult
from agentgym_envs.policies import ScriptedAgent, answer_action, tool_call_action
from agentgym_envs.runner import EnvPool, EpisodeRequest, EpisodeRunner, success_rate
from agentgym_envs.search import SearchEnv
from rewards import CompositeReward, JudgeUnavailableError, LLMJudge, OpenAICompatibleBackend, Term
from tasks import InfrastructureError, Task, Trajectory, load_split

TASKS = load_split("Search", "test")[:4]


class Answer:
    """Answers the gold answer (or a wrong one) at once."""

    name = "answer"

    def __init__(self, right: bool) -> None:
        self.right, self.task = right, None

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        self.task = task

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        return answer_action(self.task.answer[0] if self.right else "nobody")


def plain_float(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> float:
    """A reward function that returns a bare float (the protocol allows it)."""
    return 0.5


def service_down(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> float:
    raise InfrastructureError("the grading service does not answer")


def test_a_reward_that_returns_a_float_is_converted_for_every_family():
    env = SearchEnv(tasks=TASKS, reward=plain_float)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(answer_action("x"))
    assert (reward, terminated, info["reward_components"]) == (0.5, True, {})


def test_a_reward_mapping_must_cover_every_family():
    with pytest.raises(EnvConfigError, match=r"missing \['bridge', 'comparison'\]"):
        SearchEnv(tasks=TASKS, reward={"single": plain_float})
    with pytest.raises(EnvConfigError, match="expected a reward function"):
        SearchEnv(tasks=TASKS, reward=3)


def test_an_infrastructure_fault_while_scoring_is_an_infra_episode_never_a_score():
    env = SearchEnv(tasks=TASKS, reward=service_down)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(answer_action("x"))
    assert (reward, terminated, truncated, info["infra_error"]) == (0.0, False, True, True)
    assert "not your fault" in observation and "reward_components" not in info


def test_a_judge_whose_endpoint_is_down_makes_an_infra_episode_not_a_crash():
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    judge = LLMJudge("Is the answer right?", [OpenAICompatibleBackend("http://127.0.0.1:9/v1", model="m",
                                                                      max_attempts=1)])
    env = SearchEnv(tasks=TASKS, reward=CompositeReward([Term("judge", judge)]))
    episodes = EpisodeRunner(EnvPool(lambda _: env), workers=1).run(
        ScriptedAgent(lambda _: Answer(right=True)), [EpisodeRequest("agentrl/Search-v0", TASKS[0], 0, 0)])
    assert episodes[0].infra_error and episodes[0].stop_reason == "infra_error" and not episodes[0].scored
    assert issubclass(JudgeUnavailableError, InfrastructureError)


def test_the_runner_plays_scripted_agents_with_the_evaluation_rules():
    env = gym.make("agentrl/Search-v0", tasks=TASKS)
    try:
        runner = EpisodeRunner(EnvPool(lambda _: env), workers=1)
        right = runner.run(ScriptedAgent(lambda _: Answer(right=True)), [EpisodeRequest(env.spec.id, TASKS[0], 0, 1)])
        wrong = runner.run(ScriptedAgent(lambda _: Answer(right=False)), [EpisodeRequest(env.spec.id, TASKS[1], 0, 1)])
    finally:
        env.close()
    assert right[0].success and right[0].stop_reason == "answered" and right[0].trajectory.final_answer
    assert not wrong[0].success and wrong[0].scored
    assert success_rate(right + wrong) == 0.5


class FailingReset(gym.Env):
    """An env whose reset hits an infrastructure fault (a sandbox that cannot start)."""

    def reset(self, *, seed=None, options=None):
        raise InfrastructureError("no sandbox")


def test_an_infra_episode_counts_in_no_rate():
    ok_env = SearchEnv(tasks=TASKS)
    envs = iter([ok_env, FailingReset()])
    runner = EpisodeRunner(EnvPool(lambda _: next(envs)), workers=2)
    requests = [EpisodeRequest("agentrl/Search-v0", TASKS[0], group=0, seed=seed) for seed in (0, 1)]
    good, failed = runner.run(ScriptedAgent(lambda _: Answer(right=True)), requests)
    assert good.success and failed.infra_error and failed.stop_reason == "infra_error" and failed.trajectory is None
    assert "reset failed: no sandbox" in failed.error
    assert success_rate([good, failed]) == 1.0  # not 0.5: the fault is not the agent's


class Vending(TextEnv):
    """A toy env whose task a tool call ends: ``press`` the right button; scored from evidence."""

    env_name = "Vending"
    task_families = ("buy",)

    def __init__(self, reward=None) -> None:
        super().__init__(tasks=[Task("vending/0", "Vending", "buy", "Press B2.", answer="B2")], reward=reward)
        self.pressed: list[str] = []
        self._tools = (Tool("press", "Press a button.", {"type": "object", "properties": {"button": {"type": "string"}},
                                                           "required": ["button"]}, self._press),)

    @property
    def tools(self):
        return self._tools

    def default_reward(self, family):
        return lambda task, trajectory, evidence: float(evidence["pressed"] == task.answer)

    def _begin_episode(self, task):
        self.pressed = []

    def _press(self, button: str) -> ToolResult:
        self.pressed.append(button)
        return ToolResult(f"pressed {button}")

    def _task_over(self) -> bool:
        return len(self.pressed) > 0

    def _evidence(self, task, trajectory):
        return {"pressed": self.pressed[0]}


def test_a_tool_call_that_ends_the_task_is_scored_and_stops_the_later_calls():
    env = Vending()
    env.reset(seed=0)
    calls = tool_call_action("press", button="B2") + tool_call_action("press", button="A1")
    observation, reward, terminated, truncated, info = env.step(calls)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert env.pressed == ["B2"]  # the second call never ran
    assert "1 later tool call not run" in observation and "pressed B2" in observation
    assert [call["name"] for call in info["tool_calls"]] == ["press"]
    assert env.trajectory.turns[-1].tool_calls[0].arguments == {"button": "B2"}


def test_an_infrastructure_fault_after_a_task_ending_tool_call_is_an_infra_episode():
    env = Vending(reward=service_down)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(tool_call_action("press", button="B2"))
    assert (reward, terminated, truncated, info["infra_error"]) == (0.0, False, True, True)
    assert observation.startswith("[press result (ok)]\npressed B2") and "not your fault" in observation
