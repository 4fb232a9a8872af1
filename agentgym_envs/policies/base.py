"""The policy protocol and an episode runner.

A policy is told the task at the start of an episode (``begin``) and then maps each observation to
the next action (``act``). Policies that must not see the verifier's data (a "tools only" oracle)
read nothing but ``task.prompt``; callers can enforce that with :func:`prompt_only`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from tasks import Task, Trajectory


@runtime_checkable
class Policy(Protocol):
    """A scripted agent.

    Attributes:
        name: Short name used in reports (``"oracle"``, ``"random"``).
    """

    name: str

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Start an episode on ``task`` whose first observation is ``prompt``."""

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """Return the action text for the latest observation (the prompt on the first turn)."""


@dataclass
class EpisodeResult:
    """What one scripted episode produced.

    Attributes:
        task_id: The task played.
        reward: The final reward (0.0 when the episode truncated).
        terminated: The agent answered.
        truncated: Turn limit or infrastructure fault.
        infra_error: An infrastructure fault ended the episode.
        turns: Number of actions taken.
        trajectory: The env's record of the episode.
        infos: The ``info`` of every step.
    """

    task_id: str
    reward: float
    terminated: bool
    truncated: bool
    infra_error: bool
    turns: int
    trajectory: Trajectory
    infos: list[dict[str, Any]] = field(default_factory=list)


def run_episode(env: gym.Env, policy: Policy, task: Task, *, seed: int | None = None,
                shown_task: Task | None = None) -> EpisodeResult:
    """Play one episode of ``policy`` on ``task`` in ``env`` (a ``gym.make`` env or a bare TextEnv).

    Args:
        env: The environment; ``reset(options={"task": task})`` picks the task.
        policy: The agent.
        task: The task to play.
        seed: Passed to ``reset``.
        shown_task: What the policy is told about the task (default ``task``); pass
            ``prompt_only(task)`` to hide the gold answer and metadata.
    """
    observation, info = env.reset(seed=seed, options={"task": task})
    policy.begin(shown_task or task, observation, info)
    infos: list[dict[str, Any]] = []
    reward, terminated, truncated = 0.0, False, False
    while not (terminated or truncated):
        action = policy.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        infos.append(info)
    return EpisodeResult(task_id=task.id, reward=float(reward), terminated=terminated, truncated=truncated,
                         infra_error=bool(info.get("infra_error")), turns=len(infos),
                         trajectory=env.unwrapped.trajectory, infos=infos)


def prompt_only(task: Task) -> Task:
    """A copy of ``task`` that keeps only what the agent is shown: id, env, family, prompt, difficulty."""
    return Task(id=task.id, env=task.env, family=task.family, prompt=task.prompt, answer=None,
                difficulty=task.difficulty, metadata={})


def tool_call_action(name: str, **arguments: Any) -> str:
    """The action text of one tool call, e.g. ``tool_call_action("search", query="Maemton")``."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def answer_action(answer: str) -> str:
    """The action text of a final answer."""
    return f"<answer>{answer}</answer>"
