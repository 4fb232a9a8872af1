"""Tests of tasks.relabel, with a toy proposer and verifier.

The toy environment: a task asks for a word (``Task.answer``); the verifier gives 1.0 when the
final answer is that word, 0.5 when it only matches case-insensitively, else 0.0. The proposer
proposes "say <final answer>" and whatever extra goals a test gives it.
"""

from __future__ import annotations

import pytest

from tasks import (
    GoalProposer,
    RelabeledEpisode,
    Task,
    ToolCall,
    Trajectory,
    Turn,
    relabel,
)


def word_task(word: str, task_id: str | None = None) -> Task:
    return Task(task_id or f"say/{word}", "Toy", "word", f"Say {word!r}.", word)


def toy_verifier(task: Task, trajectory: Trajectory) -> float:
    answer = trajectory.final_answer or ""
    if answer == task.answer:
        return 1.0
    return 0.5 if answer.lower() == task.answer.lower() else 0.0


class ToyProposer:
    """Proposes the final answer as a goal, plus ``extra`` goals; records its calls."""

    def __init__(self, extra: list[Task] | None = None) -> None:
        self.extra = extra or []
        self.calls = 0

    def propose(self, task: Task, trajectory: Trajectory) -> list[Task]:
        self.calls += 1
        return [word_task(trajectory.final_answer or ""), *self.extra]


def episode(answer: str | None) -> Trajectory:
    """A search call, then an answer turn (or a second action without one)."""
    first = Turn(
        '<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', "found: red", tool_calls=(ToolCall("lookup", {}),)
    )
    last = Turn(f"<answer>{answer}</answer>", "", answer=answer) if answer else Turn("thinking", "no answer yet")
    return Trajectory((first, last), completion_tokens=42)


def test_keeps_a_goal_the_verifier_confirms() -> None:
    source = word_task("blue")
    trajectory = episode("red")
    [kept] = relabel(source, trajectory, ToyProposer(), toy_verifier)
    assert kept == RelabeledEpisode(word_task("red"), trajectory, 1.0, source_task_id="say/blue")
    assert kept.trajectory is trajectory  # the agent's turns, untouched


def test_drops_goals_the_verifier_does_not_confirm() -> None:
    proposer = ToyProposer(extra=[word_task("Red", "say/Red"), word_task("green")])  # 0.5 and 0.0
    kept = relabel(word_task("blue"), episode("red"), proposer, toy_verifier)
    assert [e.task.id for e in kept] == ["say/red"]


def test_min_reward_sets_the_bar() -> None:
    proposer = ToyProposer(extra=[word_task("Red", "say/Red"), word_task("green")])
    kept = relabel(word_task("blue"), episode("red"), proposer, toy_verifier, min_reward=0.5)
    assert [(e.task.id, e.reward) for e in kept] == [("say/red", 1.0), ("say/Red", 0.5)]


def test_no_final_answer_no_relabeling() -> None:
    proposer = ToyProposer()
    assert relabel(word_task("blue"), episode(None), proposer, toy_verifier) == []
    assert proposer.calls == 0


def test_skips_the_source_task_and_repeated_proposals() -> None:
    source = word_task("red")  # solved as is: nothing to relabel
    proposer = ToyProposer(extra=[word_task("red"), word_task("Red", "other"), word_task("Red", "other")])
    kept = relabel(source, episode("red"), proposer, toy_verifier, min_reward=0.0)
    assert [e.task.id for e in kept] == ["other"]


def test_rewrite_hook_adapts_observations_for_the_new_goal() -> None:
    def mention_goal(goal: Task, trajectory: Trajectory) -> Trajectory:
        first, *rest = trajectory.turns
        return Trajectory((Turn(first.action, f"goal: {goal.answer}", first.tool_calls), *rest))

    [kept] = relabel(word_task("blue"), episode("red"), ToyProposer(), toy_verifier, rewrite=mention_goal)
    assert kept.trajectory.turns[0].observation == "goal: red"
    assert [t.action for t in kept.trajectory.turns] == [t.action for t in episode("red").turns]


def test_rewrite_may_not_change_the_agents_actions() -> None:
    def rewrite_actions(goal: Task, trajectory: Trajectory) -> Trajectory:
        return Trajectory(tuple(Turn("edited", t.observation, answer=t.answer) for t in trajectory.turns))

    with pytest.raises(ValueError, match="keep the agent's actions unchanged"):
        relabel(word_task("blue"), episode("red"), ToyProposer(), toy_verifier, rewrite=rewrite_actions)


@pytest.mark.parametrize("reward", [float("nan"), float("inf"), "1.0", None])
def test_a_verifier_reward_must_be_a_finite_number(reward: object) -> None:
    with pytest.raises(ValueError, match="expected verifier reward to be a finite number"):
        relabel(word_task("blue"), episode("red"), ToyProposer(), lambda task, trajectory: reward)  # type: ignore[arg-type, return-value]


def test_min_reward_must_be_finite() -> None:
    with pytest.raises(ValueError, match="expected min_reward to be a finite number, got nan"):
        relabel(word_task("blue"), episode("red"), ToyProposer(), toy_verifier, min_reward=float("nan"))


def test_toy_proposer_satisfies_the_protocol() -> None:
    proposer: GoalProposer = ToyProposer()  # checked statically; the call below checks the shape
    assert proposer.propose(word_task("blue"), episode("red")) == [word_task("red")]
