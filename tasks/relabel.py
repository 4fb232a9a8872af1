"""Hindsight relabeling: reuse a finished episode as a success on a goal it did achieve.

An agent that answers the wrong question well has still done something: its final answer may be
the right answer to another question. Relabeling turns such an episode into a training example
for that other task (hindsight experience replay, adapted to language agents). Two parts are
environment-specific and passed in by the caller, because ``tasks`` cannot import them:

- a :class:`GoalProposer`, which proposes tasks whose goal the trajectory achieved (for Search,
  :func:`tasks.search.relabel.question_for_answer` builds one);
- a :data:`Verifier`, the environment's own outcome verifier, which has the last word: a
  proposed goal it does not confirm is dropped.

The agent's turns are kept exactly as generated; only the task (the goal) changes. Turns hold
actions and observations, not the task prompt, so a chat-based trainer must re-render the
prompt turn from the new task's ``prompt`` (and keep the agent's tokens as they were) before
training on a relabeled episode. Where observations themselves quote the goal, pass a
``rewrite`` hook to :func:`relabel` that edits them for the new task.

Relabeling only applies where an achieved outcome really is the goal of another task: each env's spec says
whether it does and why (:attr:`agentgym_envs.spec.EnvSpec.relabeling`).

Example:
    >>> from tasks.records import Task, Trajectory, Turn
    >>> class AnswerAsGoal:
    ...     def propose(self, task, trajectory):
    ...         return [Task(f"{task.id}/hindsight", task.env, task.family, "Say it.", trajectory.final_answer)]
    >>> def exact(task, trajectory):
    ...     return float(trajectory.final_answer == task.answer)
    >>> task = Task("q1", "Toy", "toy", "Say 'blue'.", "blue")
    >>> episode = Trajectory((Turn("<answer>red</answer>", "", answer="red"),))
    >>> [(e.task.answer, e.reward, e.source_task_id) for e in relabel(task, episode, AnswerAsGoal(), exact)]
    [('red', 1.0, 'q1')]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real
from typing import Protocol

from tasks.records import Task, Trajectory

Verifier = Callable[[Task, Trajectory], float]
"""An outcome verifier: the reward of ``trajectory`` on ``task`` (the env/trainer layer owns the real ones)."""

TrajectoryRewriter = Callable[[Task, Trajectory], Trajectory]
"""Adapts a trajectory to a new task (e.g. observations that quote the goal); must keep the agent's actions."""


class GoalProposer(Protocol):
    """Environment-specific: goals that a finished trajectory achieved."""

    def propose(self, task: Task, trajectory: Trajectory) -> list[Task]:
        """New tasks whose goal ``trajectory`` achieved; empty when there are none."""
        ...


@dataclass(frozen=True)
class RelabeledEpisode:
    """A finished episode reused for a goal it achieved.

    Attributes:
        task: The new task (the relabeled goal).
        trajectory: The agent's trajectory, as it applies to ``task``.
        reward: The verifier's reward of ``trajectory`` on ``task``.
        source_task_id: Id of the task the episode was actually run on.
    """

    task: Task
    trajectory: Trajectory
    reward: float
    source_task_id: str


def relabel(
    task: Task,
    trajectory: Trajectory,
    proposer: GoalProposer,
    verifier: Verifier,
    *,
    min_reward: float = 1.0,
    rewrite: TrajectoryRewriter | None = None,
) -> list[RelabeledEpisode]:
    """Relabel a finished episode with the goals it achieved, each confirmed by the verifier.

    Trajectories without a final answer are not relabeled (the proposer is not called). Every
    proposed task other than ``task`` itself (and each proposed id once) is scored by
    ``verifier`` on the (optionally rewritten) trajectory; episodes whose reward is below
    ``min_reward`` are dropped.

    Args:
        task: The task the episode was run on.
        trajectory: The finished episode.
        proposer: Proposes tasks whose goal the trajectory achieved.
        verifier: The same outcome verifier the environment scores ``task`` with.
        min_reward: Least verifier reward for a relabeled episode to be kept.
        rewrite: Adapts the trajectory to each new task; by default it is kept unchanged.

    Returns:
        The kept episodes, in the proposer's order.

    Raises:
        ValueError: ``min_reward`` or a verifier reward is not a finite number, or ``rewrite``
            changed the agent's actions.
    """
    _check_finite("min_reward", min_reward)
    if trajectory.final_answer is None:
        return []
    episodes = []
    for goal in _distinct_goals(task, proposer.propose(task, trajectory)):
        relabeled = trajectory if rewrite is None else _rewritten(rewrite, goal, trajectory)
        reward = _check_finite("verifier reward", verifier(goal, relabeled))
        if reward >= min_reward:
            episodes.append(RelabeledEpisode(goal, relabeled, reward, source_task_id=task.id))
    return episodes


def _distinct_goals(source: Task, proposed: list[Task]) -> list[Task]:
    """Proposed tasks other than ``source``, first occurrence of each id."""
    seen = {source.id}
    goals = []
    for goal in proposed:
        if goal.id not in seen:
            seen.add(goal.id)
            goals.append(goal)
    return goals


def _rewritten(rewrite: TrajectoryRewriter, goal: Task, trajectory: Trajectory) -> Trajectory:
    """``rewrite(goal, trajectory)``, checked to keep the agent's actions as they were."""
    rewritten = rewrite(goal, trajectory)
    if [turn.action for turn in rewritten.turns] != [turn.action for turn in trajectory.turns]:
        raise ValueError(f"expected the rewrite for {goal.id!r} to keep the agent's actions unchanged, got others")
    return rewritten


def _check_finite(name: str, value: float) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` unless it is a finite real number."""
    if not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"expected {name} to be a finite number, got {value!r}")
    return float(value)
