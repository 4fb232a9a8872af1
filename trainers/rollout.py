"""The model as an agent of the one episode runner: G episodes per task, token in, token out.

:class:`~agentgym_envs.runner.EpisodeRunner` plays the episodes (resets, concurrent env steps, stop
reasons, the :class:`~agentgym_envs.runner.Episode` record, the asynchronous schedule); this module adds
what a model needs. Whenever episodes wait for a turn, :class:`ModelAgent` continues their token contexts
in one batch, stopping each at ``</tool_call>``, ``</answer>`` or the end of the turn, within a per-turn
token limit; the decoded action goes to the episode's env. Each turn is sampled with its own seed (from
the run's seed, the episode's position and the turn number), so an episode's tokens do not depend on
which other episodes shared its batch: the asynchronous schedule plays the same episodes as the
round-synchronous one. The generator keeps each episode's KV cache between its turns (prefix reuse: a
turn's context is the previous turn's plus new tokens), keyed by the episode and dropped when it ends.

Each observation is tokenized once, wrapped in the template's tool-response turn, and appended with
``env_mask`` 0; the sampled ids and their logprobs are appended as they came, with ``env_mask`` 1.
Nothing is ever re-tokenized from decoded text, so the ids the loss sees are the ids that were sampled.
:class:`ChatRecorder` is that bookkeeping, shared with the SFT demonstrations (scripted actions encoded
as the model would have produced them).

An episode ends when the agent answers (``terminated``), at the env's turn limit or the engine's
``max_turns`` (``truncated``), when the next turn would not fit the context budget (``"context"``), or
on an infrastructure fault (``infra_error``: the trainer drops it from the loss rather than scoring it
as a wrong answer).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agentgym_envs.runner import (
    SCHEDULES,
    AgentTurn,
    EnvPool,
    Episode,
    EpisodeRequest,
    EpisodeRunner,
    TurnRecord,
    group_requests,
)
from tasks import Task
from trainers.chat import ChatTokens
from trainers.generation import Generator

__all__ = ["ENV_WORKERS", "ChatRecorder", "EnvPool", "Episode", "EpisodeRequest", "ModelAgent", "RolloutConfig",
           "RolloutEngine", "TurnRecord", "check_env_workers", "episode_summary", "group_requests", "make_env_factory",
           "stop_token_ids", "strip_turn_end", "turn_seed"]


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes are rolled out.

    Attributes:
        max_turns: Most model turns per episode (the env's own turn limit also applies).
        max_tokens_per_turn: Most tokens generated in one turn.
        max_context_tokens: Budget for prompt plus all turns; an episode whose next turn cannot get
            ``min_turn_tokens`` within it ends with stop reason ``"context"``.
        min_turn_tokens: Smallest useful turn.
        temperature: Sampling temperature (the logprobs are of the tempered distribution, as TRL computes them);
            0 decodes greedily (for evaluation).
        top_p: Nucleus sampling.
        tool_workers: Threads running env steps; 1 runs them one after another.
        schedule: ``"async"`` (episodes advance independently; tools run while other turns are generated) or
            ``"rounds"`` (round-synchronous); see :class:`~agentgym_envs.runner.EpisodeRunner`.
        cache_prefixes: Keep each episode's KV cache between its turns (the generator continues it instead of
            encoding the whole context again).
        batch_window_s: Async: how long to wait for more env steps returning close together before a turn's
            batch is generated (see :class:`~agentgym_envs.runner.EpisodeRunner`).
    """

    max_turns: int = 4
    max_tokens_per_turn: int = 128
    max_context_tokens: int = 2048
    min_turn_tokens: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    tool_workers: int = 32
    schedule: str = "async"
    cache_prefixes: bool = True
    batch_window_s: float = 0.01

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_tokens_per_turn < 1 or self.tool_workers < 1:
            raise ValueError("RolloutConfig: expected max_turns, max_tokens_per_turn and tool_workers >= 1, got "
                             f"{self.max_turns}, {self.max_tokens_per_turn}, {self.tool_workers}")
        if self.min_turn_tokens > self.max_tokens_per_turn:
            raise ValueError(f"RolloutConfig.min_turn_tokens: expected <= max_tokens_per_turn "
                             f"({self.max_tokens_per_turn}), got {self.min_turn_tokens}")
        if self.temperature < 0:
            raise ValueError(f"RolloutConfig.temperature: expected >= 0 (0 = greedy), got {self.temperature}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"RolloutConfig.schedule: expected one of {SCHEDULES}, got {self.schedule!r}")


class ChatRecorder:
    """Token bookkeeping of an episode as the model's chat template renders it.

    ``start`` renders the prompt; :meth:`observe` appends the observation that came before a turn (never the
    first turn's: that is the prompt) with ``env_mask`` 0; :meth:`record` appends a turn's ids with
    ``env_mask`` 1 and their logprobs, then the template's end-of-turn ids with ``env_mask`` 0.

    Args:
        chat: Token pieces of the model's chat template.
    """

    def __init__(self, chat: ChatTokens) -> None:
        self.chat = chat

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Render the prompt."""
        episode.prompt_ids = self.chat.prompt_ids(prompt)

    def observe(self, episode: Episode, observation: str) -> None:
        """Append the observation that answered the episode's last turn (nothing before its first turn)."""
        if episode.turns:
            episode.append(self.chat.observation_ids(observation), generated=False)

    def record(self, episode: Episode, action: str, ids: Sequence[int],
               logprobs: Sequence[float] | None = None) -> AgentTurn:
        """Append one turn's ids (and the template's end of turn); returns the turn for the runner."""
        start = len(episode.completion_ids)
        episode.append(ids, generated=True, logprobs=logprobs)
        episode.append(self.chat.close_turn_ids(ids), generated=False)
        return AgentTurn(action=action, start=start, length=len(ids))


class ModelAgent(ChatRecorder):
    """A model as an :class:`~agentgym_envs.runner.Agent`: one batched generation per round.

    Args:
        generator: Continues token contexts (transformers or vLLM).
        tokenizer: The model's tokenizer (its chat template shapes the turns).
        config: Token limits and sampling.
    """

    def __init__(self, generator: Generator, tokenizer, config: RolloutConfig) -> None:
        super().__init__(ChatTokens(tokenizer))
        self.generator = generator
        self.tokenizer = tokenizer
        self.config = config
        self.run_seed = 0
        self._stop_ids = stop_token_ids(tokenizer)

    def begin_run(self) -> None:
        """Draw the seed of a new batch's sampling from torch's global RNG (``torch.manual_seed`` fixes it)."""
        self.run_seed = int(torch.randint(0, 2**62, ()).item())

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | None]:
        """Append each observation, then generate the next turn of every episode whose context has room."""
        for episode, observation in zip(episodes, observations, strict=True):
            self.observe(episode, observation)
        budgets = [self.config.max_context_tokens - episode.context_length for episode in episodes]
        playing = [i for i, budget in enumerate(budgets) if budget >= self.config.min_turn_tokens]
        turns: list[AgentTurn | None] = [None] * len(episodes)
        if not playing:
            return turns
        contexts = [episodes[i].prompt_ids + episodes[i].completion_ids for i in playing]
        limits = [min(self.config.max_tokens_per_turn, budgets[i]) for i in playing]
        keys = [id(episodes[i]) for i in playing] if self.config.cache_prefixes else None
        seeds = [self.turn_seed(episodes[i]) for i in playing]
        generated = self.generator.generate(contexts, limits, stop_token_ids=self._stop_ids,
                                            temperature=self.config.temperature, top_p=self.config.top_p,
                                            keys=keys, seeds=seeds)
        for i, turn in zip(playing, generated, strict=True):
            action = strip_turn_end(self.tokenizer.decode(turn.ids, skip_special_tokens=False), self.tokenizer)
            turns[i] = self.record(episodes[i], action, turn.ids, turn.logprobs)
        return turns

    def finish(self, episode: Episode) -> None:
        """Drop the episode's cached prefix."""
        if self.config.cache_prefixes:
            self.generator.release([id(episode)])

    def turn_seed(self, episode: Episode) -> int:
        """The sampling seed of the episode's next turn (:func:`turn_seed`)."""
        return turn_seed(self.run_seed, episode.index, len(episode.turns))


def turn_seed(run_seed: int, index: int, turn: int) -> int:
    """The sampling seed of turn ``turn`` of the episode at position ``index`` of a batch whose seed is
    ``run_seed`` (the in-process rollout and the policy endpoint seed their turns alike)."""
    state = np.random.SeedSequence([run_seed, index, turn]).generate_state(2)
    return int(state[0]) << 31 | int(state[1]) >> 1


class RolloutEngine:
    """Runs batches of multi-turn episodes of a model: :class:`ModelAgent` on the one episode runner.

    Args:
        generator: Continues token contexts (transformers or vLLM).
        tokenizer: The model's tokenizer (its chat template shapes the turns).
        envs: Where the episodes' environments come from.
        config: Limits and sampling.
    """

    def __init__(self, generator: Generator, tokenizer, envs: EnvPool, config: RolloutConfig | None = None) -> None:
        self.config = config or RolloutConfig()
        self.envs = envs
        self.agent = ModelAgent(generator, tokenizer, self.config)
        self.runner = EpisodeRunner(envs, max_turns=self.config.max_turns, workers=self.config.tool_workers,
                                    schedule=self.config.schedule, batch_window_s=self.config.batch_window_s)

    def run(self, requests: Sequence[EpisodeRequest], *, max_turns: int | None = None) -> list[Episode]:
        """Roll out one episode per request, all in flight together; returns them in request order.

        Args:
            requests: One episode each.
            max_turns: This batch's turn limit instead of ``config.max_turns`` (a horizon curriculum).
        """
        self.agent.begin_run()
        return self.runner.run(self.agent, requests, max_turns=max_turns)


def strip_turn_end(action: str, tokenizer) -> str:
    """The action text without the end-of-turn token the model may have emitted."""
    eos = tokenizer.eos_token or ""
    return action[: -len(eos)] if eos and action.endswith(eos) else action


def stop_token_ids(tokenizer) -> list[int]:
    """Ids that end a turn: the end-of-turn token, and ``</tool_call>`` / ``</answer>`` when they are single tokens."""
    ids = [tokenizer.eos_token_id]
    for tag in ("</tool_call>", "</answer>"):
        encoded = tokenizer.encode(tag, add_special_tokens=False)
        if len(encoded) == 1:
            ids.append(encoded[0])
    return ids


def episode_summary(episode: Episode) -> Mapping[str, Any]:
    """A JSON-friendly summary of an episode (for logs): its outcome, turns and tool calls, no token lists."""
    summary = copy.copy(episode.__dict__)
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "trajectory"):
        summary.pop(key)
    summary["turns"] = [{key: value for key, value in turn.__dict__.items() if key != "observation"}
                        for turn in episode.turns]
    summary["completion_tokens"] = len(episode.completion_ids)
    summary["generated_tokens"] = sum(episode.env_mask)
    return summary


ENV_WORKERS = ("local", "ray")
"""Where a run's environments live: in this process, or in Ray actors (:mod:`agentgym_envs.ray_workers`)."""


def check_env_workers(env_workers: str) -> None:
    """Raise ValueError unless ``env_workers`` is one of :data:`ENV_WORKERS`."""
    if env_workers not in ENV_WORKERS:
        raise ValueError(f"env_workers: expected one of {ENV_WORKERS}, got {env_workers!r}")


def make_env_factory(env_kwargs: Mapping[str, Mapping[str, Any]], *, workers: str = "local",
                     ray_address: str | None = None) -> Callable[[str], gym.Env]:
    """Makes an env per id with ``gym.make(env_id, **env_kwargs[env_id])``: in this process (``workers="local"``),
    or in a Ray actor each (``"ray"``, after joining the cluster at ``ray_address``; None: a local, loopback-only
    one; see :mod:`agentgym_envs.ray_workers`, imported only then: ray is an optional extra)."""
    check_env_workers(workers)
    if workers == "ray":
        from agentgym_envs import ray_workers

        ray_workers.connect_ray(ray_address)
        return ray_workers.ray_env_factory(env_kwargs)
    return lambda env_id: gym.make(env_id, **env_kwargs.get(env_id, {}))
