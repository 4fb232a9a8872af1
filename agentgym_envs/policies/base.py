"""The policy protocol, and scripted policies as an agent of the one episode runner.

A policy is told the task at the start of an episode (``begin``) and then maps each observation to
the next action (``act``). Policies that must not see the verifier's data (a "tools only" oracle)
read nothing but ``task.prompt``; callers can enforce that with :func:`prompt_only`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from agentgym_envs.actions import answer_action, tool_call_action
from agentgym_envs.runner import AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from tasks import Task


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


class ScriptedAgent:
    """Scripted policies as an :class:`~agentgym_envs.runner.Agent`: one policy per episode.

    Args:
        make_policy: A fresh policy for an episode's request (policies keep per-episode state).
        shown: What a policy is told about the task (default: the task itself); pass :func:`prompt_only`
            to hide the gold answer and metadata.
    """

    def __init__(self, make_policy: Callable[[EpisodeRequest], Policy],
                 shown: Callable[[Task], Task] | None = None) -> None:
        self.make_policy = make_policy
        self.shown = shown or (lambda task: task)
        self._policies: dict[int, Policy] = {}

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Make the episode's policy and tell it the task."""
        request = EpisodeRequest(episode.env_id, task, episode.group, episode.seed)
        policy = self._policies[id(episode)] = self.make_policy(request)
        policy.begin(self.shown(task), prompt, info)

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | None]:
        """Each episode's policy acts on its latest observation."""
        return [AgentTurn(self._policies[id(episode)].act(observation, info))
                for episode, observation, info in zip(episodes, observations, infos, strict=True)]

    def finish(self, episode: Episode) -> None:
        """Drop the episode's policy."""
        self._policies.pop(id(episode), None)


def run_episode(env: gym.Env, policy: Policy, task: Task, *, seed: int | None = None,
                shown_task: Task | None = None, max_turns: int | None = None) -> Episode:
    """Play one episode of ``policy`` on ``task`` in ``env``, through :class:`~agentgym_envs.runner.EpisodeRunner`.

    Args:
        env: The environment (a ``gym.make`` env or a bare TextEnv); it is not closed.
        policy: The agent.
        task: The task to play.
        seed: Passed to ``reset``.
        shown_task: What the policy is told about the task (default ``task``); pass
            ``prompt_only(task)`` to hide the gold answer and metadata.
        max_turns: Most turns to play (the env's own turn limit also applies); None for the env's only.

    Raises:
        InfrastructureError: The env could not be reset (no sandbox); later faults end the episode with
            ``infra_error`` instead.
    """
    env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    agent = ScriptedAgent(lambda _: policy, shown=(lambda _: shown_task) if shown_task is not None else None)
    runner = EpisodeRunner(EnvPool(lambda _: env), workers=1, max_turns=max_turns)
    return runner.run(agent, [EpisodeRequest(env_id=env_id, task=task, group=0, seed=seed)])[0]


def prompt_only(task: Task) -> Task:
    """A copy of ``task`` that keeps only what the agent is shown: id, env, family, prompt, difficulty."""
    return Task(id=task.id, env=task.env, family=task.family, prompt=task.prompt, answer=None,
                difficulty=task.difficulty, metadata={})


__all__ = ["Policy", "ScriptedAgent", "answer_action", "prompt_only", "run_episode", "tool_call_action"]
