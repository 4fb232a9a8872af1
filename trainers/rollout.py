"""The multi-turn rollout engine: G episodes per task against any agentrl environment, token in, token out.

Each round, every episode still running gets one turn: the generator continues all of their token
contexts in one batch, stopping each at ``</tool_call>``, ``</answer>`` or the end of the turn, within
a per-turn token limit. The decoded action goes to the episode's env, and the ``step`` calls of all
episodes run concurrently in a thread pool (tools block on sandboxes and services, not on Python).
Each observation is tokenized once, wrapped in the template's tool-response turn, and appended with
``env_mask`` 0; the sampled ids and their logprobs are appended as they came, with ``env_mask`` 1.
Nothing is ever re-tokenized from decoded text, so the ids the loss sees are the ids that were sampled.

An episode ends when the agent answers (``terminated``), at the env's turn limit or the engine's
``max_turns`` (``truncated``), when the next turn would not fit the context budget (``"context"``), or
on an infrastructure fault (``infra_error``: the trainer drops it from the loss rather than scoring it
as a wrong answer).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from agentgym_envs.errors import SandboxError
from tasks import Task
from trainers.chat import ChatTokens
from trainers.generation import GeneratedTurn, Generator


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
    """

    max_turns: int = 4
    max_tokens_per_turn: int = 128
    max_context_tokens: int = 2048
    min_turn_tokens: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    tool_workers: int = 32

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_tokens_per_turn < 1 or self.tool_workers < 1:
            raise ValueError("RolloutConfig: expected max_turns, max_tokens_per_turn and tool_workers >= 1, got "
                             f"{self.max_turns}, {self.max_tokens_per_turn}, {self.tool_workers}")
        if self.min_turn_tokens > self.max_tokens_per_turn:
            raise ValueError(f"RolloutConfig.min_turn_tokens: expected <= max_tokens_per_turn "
                             f"({self.max_tokens_per_turn}), got {self.min_turn_tokens}")
        if self.temperature < 0:
            raise ValueError(f"RolloutConfig.temperature: expected >= 0 (0 = greedy), got {self.temperature}")


@dataclass
class TurnRecord:
    """One model turn of an episode.

    Attributes:
        start: Offset of the turn's first generated id in ``completion_ids``.
        length: Number of generated ids.
        action: The decoded action text handed to the env.
        tools: Names of the tools it called.
        after_tool_result: The turn came right after a tool result (not the first turn, not after a format error).
        ok: The env accepted the action (well formed, tools succeeded).
    """

    start: int
    length: int
    action: str
    tools: tuple[str, ...]
    after_tool_result: bool
    ok: bool


@dataclass
class Episode:
    """What one rollout produced, ready for a loss.

    Attributes:
        env_id: The environment's registry id.
        task_id: The task.
        group: Index of the task's group in the batch (episodes of one group share a task).
        prompt_ids: The rendered prompt.
        completion_ids: Everything after the prompt: generated turns and wrapped observations.
        logprobs: Per completion id, the sampling logprob (0.0 at env tokens).
        env_mask: Per completion id, 1 for a token the model generated and 0 for template and observation tokens.
        turns: One record per model turn.
        reward: The env's reward (0.0 if the episode never finished).
        reward_components: The reward's components on the final step.
        terminated: The agent answered.
        infra_error: An infrastructure fault ended the episode.
        stop_reason: ``"answered"``; ``"turn_limit"`` (the env's); ``"max_turns"`` (the engine's, after an
            observation no turn answered); ``"context"``; or ``"infra_error"``.
        tool_calls: Per tool call: name, ok, infra_error, latency_s.
    """

    env_id: str
    task_id: str
    group: int
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    infra_error: bool = False
    stop_reason: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """The episode has ended."""
        return bool(self.stop_reason)

    @property
    def context_length(self) -> int:
        """Prompt plus completion length in tokens."""
        return len(self.prompt_ids) + len(self.completion_ids)

    def append(self, ids: Sequence[int], *, generated: bool, logprobs: Sequence[float] | None = None) -> None:
        """Append ids to the completion with their mask (and logprobs, for generated ids)."""
        self.completion_ids.extend(ids)
        self.env_mask.extend([1 if generated else 0] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


class EnvFactory(Protocol):
    """Makes an environment for a registry id (called once per concurrent episode slot)."""

    def __call__(self, env_id: str) -> gym.Env: ...


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to run: an env id, a task, the group it belongs to, and the env's reset seed."""

    env_id: str
    task: Task
    group: int
    seed: int


class EnvPool:
    """Environments kept open between batches, one per concurrent episode, per env id.

    Args:
        factory: Makes an env for an id, e.g. ``lambda env_id: gym.make(env_id, split="train")``.
    """

    def __init__(self, factory: EnvFactory | Callable[[str], gym.Env]) -> None:
        self.factory = factory
        self._envs: dict[str, list[gym.Env]] = {}

    def take(self, requests: Sequence[EpisodeRequest]) -> list[gym.Env]:
        """One env per request, creating envs only when a batch needs more of an id than exist."""
        handed: dict[str, int] = {}
        envs = []
        for request in requests:
            pool = self._envs.setdefault(request.env_id, [])
            index = handed.get(request.env_id, 0)
            if index == len(pool):
                pool.append(self.factory(request.env_id))
            handed[request.env_id] = index + 1
            envs.append(pool[index])
        return envs

    def close(self) -> None:
        """Close every env (containers, browsers, retrievers)."""
        for pool in self._envs.values():
            for env in pool:
                env.close()
        self._envs.clear()


class RolloutEngine:
    """Runs batches of multi-turn episodes with a generator and environments.

    Args:
        generator: Continues token contexts (transformers or vLLM).
        tokenizer: The model's tokenizer (its chat template shapes the turns).
        envs: Where the episodes' environments come from.
        config: Limits and sampling.
    """

    def __init__(self, generator: Generator, tokenizer, envs: EnvPool, config: RolloutConfig | None = None) -> None:
        self.generator = generator
        self.tokenizer = tokenizer
        self.chat = ChatTokens(tokenizer)
        self.envs = envs
        self.config = config or RolloutConfig()
        self._stop_ids = stop_token_ids(tokenizer)

    def run(self, requests: Sequence[EpisodeRequest]) -> list[Episode]:
        """Roll out one episode per request, all in flight together; returns them in request order."""
        envs = self.envs.take(requests)
        with ThreadPoolExecutor(max_workers=self.config.tool_workers) as pool:
            episodes = list(pool.map(self._start, envs, requests))
            for _ in range(self.config.max_turns):
                active = [i for i, episode in enumerate(episodes) if not episode.done]
                if not active:
                    break
                self._play_turn(pool, [envs[i] for i in active], [episodes[i] for i in active])
        for episode in episodes:
            if not episode.done:
                episode.stop_reason = "max_turns"
        return episodes

    def _start(self, env: gym.Env, request: EpisodeRequest) -> Episode:
        """Reset the env; a sandbox that fails to reset ends the episode at once as an infrastructure error."""
        try:
            observation, _ = env.reset(seed=request.seed, options={"task": request.task})
        except SandboxError:
            return Episode(env_id=request.env_id, task_id=request.task.id, group=request.group,
                           prompt_ids=self.chat.prompt_ids(request.task.prompt), infra_error=True,
                           stop_reason="infra_error")
        return Episode(env_id=request.env_id, task_id=request.task.id, group=request.group,
                       prompt_ids=self.chat.prompt_ids(observation))

    def _play_turn(self, pool: ThreadPoolExecutor, envs: list[gym.Env], episodes: list[Episode]) -> None:
        budgets = [self.config.max_context_tokens - episode.context_length for episode in episodes]
        playing = [i for i, budget in enumerate(budgets) if budget >= self.config.min_turn_tokens]
        for i in set(range(len(episodes))) - set(playing):
            episodes[i].stop_reason = "context"
        if not playing:
            return
        contexts = [episodes[i].prompt_ids + episodes[i].completion_ids for i in playing]
        limits = [min(self.config.max_tokens_per_turn, budgets[i]) for i in playing]
        turns = self.generator.generate(contexts, limits, stop_token_ids=self._stop_ids,
                                        temperature=self.config.temperature, top_p=self.config.top_p)
        for i, turn in zip(playing, turns, strict=True):
            self._record_action(episodes[i], turn)
        steps = pool.map(_step, [envs[i] for i in playing], [episodes[i].turns[-1].action for i in playing])
        for i, step in zip(playing, steps, strict=True):
            self._record_step(episodes[i], step)

    def _record_action(self, episode: Episode, turn: GeneratedTurn) -> None:
        action = self.tokenizer.decode(turn.ids, skip_special_tokens=False)
        episode.turns.append(TurnRecord(start=len(episode.completion_ids), length=len(turn.ids),
                                        action=_strip_turn_end(action, self.tokenizer), tools=(),
                                        after_tool_result=bool(episode.turns and episode.turns[-1].tools),
                                        ok=False))
        episode.append(turn.ids, generated=True, logprobs=turn.logprobs)
        episode.append(self.chat.close_turn_ids(turn.ids), generated=False)

    def _record_step(self, episode: Episode, step: tuple[str, float, bool, bool, dict[str, Any]]) -> None:
        observation, reward, terminated, truncated, info = step
        record = episode.turns[-1]
        record.tools = tuple(call["name"] for call in info.get("tool_calls", []))
        record.ok = bool(info.get("ok"))
        episode.tool_calls.extend(info.get("tool_calls", []))
        if terminated or truncated:
            episode.reward, episode.terminated = float(reward), terminated
            episode.reward_components = dict(info.get("reward_components", {}))
            episode.infra_error = bool(info.get("infra_error"))
            episode.stop_reason = ("answered" if terminated else "infra_error" if episode.infra_error
                                   else "turn_limit")
            return
        episode.append(self.chat.observation_ids(observation), generated=False)


def _step(env: gym.Env, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    return env.step(action)


def _strip_turn_end(action: str, tokenizer) -> str:
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


def group_requests(tasks: Sequence[tuple[str, Task]], group_size: int, seed: int) -> list[EpisodeRequest]:
    """``group_size`` consecutive requests per ``(env_id, task)``, with distinct reset seeds."""
    requests = []
    for group, (env_id, task) in enumerate(tasks):
        for member in range(group_size):
            requests.append(EpisodeRequest(env_id=env_id, task=task, group=group,
                                           seed=seed + group * group_size + member))
    return requests


def episode_summary(episode: Episode) -> Mapping[str, Any]:
    """A JSON-friendly summary of an episode (for logs)."""
    summary = copy.copy(episode.__dict__)
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
        summary.pop(key)
    summary["turns"] = [turn.__dict__ for turn in episode.turns]
    summary["completion_tokens"] = len(episode.completion_ids)
    summary["generated_tokens"] = sum(episode.env_mask)
    return summary
