"""The turn-limit hook of TextEnv: an env that scores unfinished work is scored on its last allowed turn, truncated."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium as gym
import pytest

from agentgym_envs import TextEnv, Tool, ToolResult
from agentgym_envs.policies import answer_action, tool_call_action
from rewards import CompositeReward, RewardResult, Term, format_reward
from tasks import InfrastructureError, Task, Trajectory

LIMIT = 3
DRAFT_ID = "agentrl-test/Draft-v0"
PLAIN_ID = "agentrl-test/PlainDraft-v0"


def draft_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """1 when the draft says the answer; the evidence's turn-limit flag as a component."""
    return RewardResult(float(evidence["draft"] == task.answer), {"at_limit": float(evidence["at_limit"])})


def grader_down(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    raise InfrastructureError("the grader does not answer")


class Draft(TextEnv):
    """A toy env whose work (a draft) can be judged at any time: ``write`` replaces the draft."""

    env_name = "Draft"
    task_families = ("write",)
    scores_at_turn_limit = True

    def __init__(self, reward: Any = None) -> None:
        super().__init__(tasks=[Task("draft/0", "Draft", "write", "Write 'done'.", answer="done")], reward=reward)
        self.draft = ""
        schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        self._tools = (Tool("write", "Replace the draft.", schema, self._write),)

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    def default_reward(self, family: str) -> Any:
        return draft_reward

    def _begin_episode(self, task: Task) -> None:
        self.draft = ""

    def _write(self, text: str) -> ToolResult:
        self.draft = text
        return ToolResult("saved")

    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        return {"draft": self.draft, "at_limit": self.at_turn_limit}


class PlainDraft(Draft):
    """The same env with the hook off (the default of every env)."""

    scores_at_turn_limit = False


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    gym.register(id=DRAFT_ID, entry_point=Draft, max_episode_steps=LIMIT)
    gym.register(id=PLAIN_ID, entry_point=PlainDraft, max_episode_steps=LIMIT)
    yield
    del gym.registry[DRAFT_ID], gym.registry[PLAIN_ID]


def play(env: gym.Env, actions: list[str]) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
    env.reset(seed=0)
    return [env.step(action) for action in actions]


def test_the_last_allowed_turn_of_an_unfinished_episode_is_scored_and_truncated():
    env = gym.make(DRAFT_ID)
    steps = play(env, [tool_call_action("write", text="draft"), "no tags", tool_call_action("write", text="done")])
    assert [(reward, terminated, truncated) for _, reward, terminated, truncated, _ in steps] == [
        (0.0, False, False), (0.0, False, False), (1.0, False, True)]
    assert steps[-1][4]["reward_components"] == {"at_limit": 1.0} and not steps[-1][4]["infra_error"]
    assert "reward_components" not in steps[0][4] and env.unwrapped.turn_limit == LIMIT
    assert not env.unwrapped.at_turn_limit  # only while the evidence is gathered


def test_a_format_error_on_the_last_turn_is_scored_too():
    _, reward, terminated, truncated, info = play(gym.make(DRAFT_ID), [tool_call_action("write", text="done"),
                                                                       "x", "y"])[-1]
    assert (reward, terminated, truncated, info["reward_components"]) == (1.0, False, True, {"at_limit": 1.0})


def test_an_episode_that_ends_on_the_last_turn_is_terminated_as_usual():
    _, reward, terminated, _, info = play(gym.make(DRAFT_ID), ["x", tool_call_action("write", text="done"),
                                                               answer_action("ok")])[-1]
    assert (reward, terminated, info["reward_components"]) == (1.0, True, {"at_limit": 0.0})  # (TimeLimit truncates)


def test_an_infrastructure_fault_while_scoring_at_the_limit_is_an_infra_episode():
    env = gym.make(DRAFT_ID, reward=grader_down)
    observation, reward, terminated, truncated, info = play(env, ["x", "y", "z"])[-1]
    assert (reward, terminated, truncated, info["infra_error"]) == (0.0, False, True, True)
    assert "not your fault" in observation and "reward_components" not in info


def test_the_hook_is_off_by_default_and_without_a_registered_limit():
    steps = play(gym.make(PLAIN_ID), [tool_call_action("write", text="done"), "x", "y"])
    _, reward, _, truncated, info = steps[-1]
    assert (reward, truncated) == (0.0, True)  # TimeLimit's truncation, not scored
    # unanswered: every term of the family's reward reported as 0 (here the one term of a plain function)
    assert info["reward_components"] == {"reward": 0.0} and "reward_components" not in steps[-2][4]
    bare = Draft()  # made directly: no registered limit, so never scored for it
    steps = play(bare, [tool_call_action("write", text="done")] * (LIMIT + 1))
    assert bare.turn_limit is None and all(not truncated for *_, truncated, _ in steps)


class CheckedDraft(Draft):
    """The draft env with a verdict: a note on the scoring step's observation and a key in its info."""

    def _verdict(self) -> tuple[str, dict[str, Any]]:
        return f"Checked: {self.draft!r}.", {"check": {"draft": self.draft}}


def test_the_verdict_joins_the_step_that_scored_on_both_paths():
    env = CheckedDraft()
    env.reset(seed=0)
    env.step(tool_call_action("write", text="done"))
    observation, reward, terminated, _, info = env.step(answer_action("ok"))
    assert (reward, terminated, info["check"]) == (1.0, True, {"draft": "done"})
    assert observation == "Answer received. The episode is over.\n\nChecked: 'done'."
    assert env.trajectory.turns[-1].observation == observation
    gym.register(id="agentrl-test/CheckedDraft-v0", entry_point=CheckedDraft, max_episode_steps=LIMIT)
    try:
        limited = gym.make("agentrl-test/CheckedDraft-v0")
        observation, _, _, truncated, info = play(limited, ["x", "y", tool_call_action("write", text="late")])[-1]
        assert truncated and info["check"] == {"draft": "late"} and observation.endswith("\n\nChecked: 'late'.")
        assert limited.unwrapped.trajectory.turns[-1].observation == observation
    finally:
        del gym.registry["agentrl-test/CheckedDraft-v0"]


def test_no_verdict_after_an_infrastructure_fault():
    env = CheckedDraft(reward=grader_down)
    env.reset(seed=0)
    observation, _, _, truncated, info = env.step(answer_action("ok"))
    assert truncated and info["infra_error"] and "check" not in info and "Checked" not in observation


def test_an_unanswered_episode_reports_each_term_of_its_reward_as_zero_at_the_turn_limit():
    """Logs that average the components (GRPO's rewards/<term>/mean) then count the episode, as its reward of 0."""
    shaped = CompositeReward([Term("outcome", draft_reward, weight=1.0), Term("format", format_reward, weight=0.0)])
    env = gym.make(PLAIN_ID, reward=shaped)
    _, reward, terminated, truncated, info = play(env, [tool_call_action("write", text="done"), "x", "y"])[-1]
    assert (reward, terminated, truncated, info["reward_components"]) == (0.0, False, True,
                                                                         {"outcome": 0.0, "format": 0.0})
    assert env.unwrapped.unanswered_components() == {"outcome": 0.0, "format": 0.0}
    with pytest.raises(gym.error.ResetNeeded):
        PlainDraft().unanswered_components()
