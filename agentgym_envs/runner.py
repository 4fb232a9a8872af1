"""The one episode runner and the one episode record, for scripted policies and models alike.

Every consumer plays episodes through :class:`EpisodeRunner`: demonstrations for SFT, evaluation,
the stress harness, GRPO and PPO rollouts. An :class:`Agent` acts for a batch of running episodes at
once (a model generates one turn for all of them in one batch; :class:`ScriptedAgent` asks one
scripted :class:`~agentgym_envs.policies.base.Policy` per episode); the runner resets the envs, hands
the observations to the agent, steps the envs concurrently in a thread pool (tools block on
sandboxes and services, not on Python) and records each :class:`Episode` the same way.

Episodes advance independently (``schedule="async"``, the default): whichever episodes are waiting for
a turn are handed to the agent together (continuous batching at the turn level), while the other
episodes' tool calls run in the pool, so a slow tool stalls only its own episode and tools run while the
next turns are generated. ``schedule="rounds"`` is the round-synchronous loop (every running episode acts,
then every env steps, then the next round), kept as the baseline of ``benchmarks.rollout_throughput``.
An agent whose turns depend only on each episode's own history (scripted policies; a model with per-row
seeded sampling) plays the same episodes under both schedules and any number of workers.

The evaluation rules live here too, once: an episode an infrastructure fault ended is left out of
every rate (:attr:`Episode.scored`), and an episode is a success when its ``outcome`` component
(the reward itself when there is none) is 1 (:attr:`Episode.success`).

Example:
    >>> runner = EpisodeRunner(EnvPool(lambda env_id: gym.make(env_id, sandbox="bwrap")))  # doctest: +SKIP
    >>> agent = ScriptedAgent(lambda request: PythonOraclePolicy())                         # doctest: +SKIP
    >>> episodes = runner.run(agent, [EpisodeRequest("agentrl/PythonSandbox-v0", task, 0, 0)])  # doctest: +SKIP
    >>> success_rate(episodes)                                                              # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from tasks import InfrastructureError, Task, Trajectory

SUCCESS_COMPONENT = "outcome"
"""The reward component that says whether a task was solved (1.0 = solved); the reward itself when absent."""
STOP_REASONS = ("answered", "turn_limit", "max_turns", "context", "infra_error", "agent_ended", "agent_error",
                "agent_timeout")
AGENT_STOPS = ("context", "agent_ended", "agent_error", "agent_timeout")
"""The stop reasons an agent may give (:class:`AgentStop`); the last two leave the episode unscored."""
UNSCORED_AGENT_STOPS = frozenset({"agent_error", "agent_timeout"})
SCHEDULES = ("async", "rounds")
"""How :class:`EpisodeRunner` interleaves turns: episodes advance independently, or in lockstep rounds."""
StepResult = tuple[str, float, bool, bool, dict[str, Any]]
PER_STEP_INFO = frozenset({"tool_calls", "tools"})
"""Keys of a step's ``info`` that :attr:`Episode.final_info` leaves out (kept per call in ``Episode.tool_calls``)."""


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to run: an env id, a task, the group it belongs to, and the env's reset seed (None: not reseeded)."""

    env_id: str
    task: Task
    group: int
    seed: int | None


@dataclass
class TurnRecord:
    """One agent turn of an episode.

    Attributes:
        action: The action text handed to the env.
        observation: What the env returned.
        tools: Names of the tools the action called.
        after_tool_result: The turn came right after a tool result (not the first turn, not after a format error).
        ok: The env accepted the action (well formed, tools succeeded).
        infra_error: An infrastructure fault hit one of its tool calls (or its scoring).
        ended_at: ``time.perf_counter()`` when the env's step returned (0.0 until then).
        start: Offset of the turn's first generated id in ``Episode.completion_ids`` (token-level agents).
        length: Number of generated ids (0 for an agent that records no tokens).
    """

    action: str
    observation: str = ""
    tools: tuple[str, ...] = ()
    after_tool_result: bool = False
    ok: bool = False
    infra_error: bool = False
    ended_at: float = 0.0
    start: int = 0
    length: int = 0


@dataclass
class Episode:
    """What one episode produced: the outcome every consumer reads, and the tokens a loss needs.

    Attributes:
        env_id: The environment's registry id.
        task_id: The task.
        group: Index of the task's group in the batch (episodes of one group share a task).
        seed: The env's reset seed (None: the env was not reseeded).
        index: Position of the episode's request in its batch.
        family: The task's family.
        difficulty: The task's difficulty.
        turns: One record per agent turn.
        reward: The env's reward (0.0 if the episode never finished).
        reward_components: The reward's components on the final step.
        terminated: The agent answered.
        infra_error: An infrastructure fault ended the episode (it is left out of the loss and of every rate).
        stop_reason: One of :data:`STOP_REASONS`: ``"answered"``; ``"turn_limit"`` (the env's); ``"max_turns"``
            (the runner's, after an observation no turn answered); ``"context"`` (the agent's context budget);
            ``"infra_error"``; or one an agent gave (:class:`AgentStop`): ``"agent_ended"`` (an agent program returned
            without answering; scored as unanswered), ``"agent_error"`` (it crashed) or ``"agent_timeout"`` (it
            did not finish in time), the last two unscored like an infrastructure fault.
        tool_calls: Per tool call, in order: name, ok, infra_error, latency_s.
        trajectory: The env's own record of the episode (None when the reset failed, or the env could not be
            reached any more).
        error: What the infrastructure fault that ended the episode said, when it was raised outside a step.
        final_info: The ``info`` of the step that ended the episode, less its per-step tool records: the reward
            components and whatever the env's verdict added (SWE-v0's ``grading``: whether the verifier run
            was valid, and why not); empty until the episode ends.
        prompt_ids: The rendered prompt (token-level agents only).
        completion_ids: Everything after the prompt: generated turns and wrapped observations.
        logprobs: Per completion id, the sampling logprob (0.0 at env tokens).
        env_mask: Per completion id, 1 for a token the model generated and 0 for template and observation tokens.
    """

    env_id: str
    task_id: str
    group: int
    seed: int | None = None
    index: int = 0
    family: str = ""
    difficulty: int = 0
    turns: list[TurnRecord] = field(default_factory=list)
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    infra_error: bool = False
    stop_reason: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    trajectory: Trajectory | None = None
    error: str = ""
    final_info: dict[str, Any] = field(default_factory=dict)
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """The episode has ended."""
        return bool(self.stop_reason)

    @property
    def scored(self) -> bool:
        """The episode counts in rates and losses (no infrastructure fault ended it)."""
        return not self.infra_error

    @property
    def success(self) -> bool:
        """The task was solved: the ``outcome`` component (the reward itself when absent) is 1."""
        return self.terminated and self.reward_components.get(SUCCESS_COMPONENT, self.reward) >= 1.0 - 1e-9

    @property
    def context_length(self) -> int:
        """Prompt plus completion length in tokens."""
        return len(self.prompt_ids) + len(self.completion_ids)

    def append(self, ids: Sequence[int], *, generated: bool, logprobs: Sequence[float] | None = None) -> None:
        """Append ids to the completion with their mask (and logprobs, for generated ids)."""
        self.completion_ids.extend(ids)
        self.env_mask.extend([1 if generated else 0] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


def scored(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes that count: those no infrastructure fault ended."""
    return [episode for episode in episodes if episode.scored]


def success_rate(episodes: Sequence[Episode]) -> float:
    """Share of scored episodes that succeeded (NaN when none is scored); infra episodes count in no rate."""
    counted = scored(episodes)
    return sum(episode.success for episode in counted) / len(counted) if counted else float("nan")


@dataclass(frozen=True)
class AgentTurn:
    """What an agent does in one turn.

    Attributes:
        action: The action text for the env.
        start: Offset of the turn's generated ids in the episode's ``completion_ids`` (token-level agents).
        length: Number of generated ids.
    """

    action: str
    start: int = 0
    length: int = 0


@dataclass(frozen=True)
class AgentStop:
    """An agent ends an episode without a turn.

    Attributes:
        reason: One of :data:`AGENT_STOPS`: ``"context"`` (its context budget is spent), ``"agent_ended"`` (an agent
            program returned without answering), ``"agent_error"`` (it crashed) or ``"agent_timeout"`` (it did not
            finish in time); the last two leave the episode unscored (``infra_error``), with ``error`` recorded.
        error: What went wrong, for :attr:`Episode.error`.
    """

    reason: str
    error: str = ""

    def __post_init__(self) -> None:
        if self.reason not in AGENT_STOPS:
            raise ValueError(f"AgentStop.reason: expected one of {AGENT_STOPS}, got {self.reason!r}")


class Agent(Protocol):
    """Acts for a batch of running episodes at once (a model, or scripted policies)."""

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """An episode began on ``task`` with first observation ``prompt``.

        Called for every episode, also for one whose reset failed (already ended as an infra episode; then
        ``prompt`` is the task's own text), so that every episode has a prompt.
        """

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | AgentStop | None]:
        """The next turn of each episode, given its latest observation (the prompt on the first turn).

        An :class:`AgentStop` for an episode the agent ends; None is ``AgentStop("context")`` (its context budget is
        spent).
        """

    def finish(self, episode: Episode) -> None:
        """The episode has ended (called once per episode, whatever ended it): drop what was kept for it."""


class EnvPool:
    """Environments kept open between batches, one per concurrent episode, per env id.

    Args:
        factory: Makes an env for an id, e.g. ``lambda env_id: gym.make(env_id, split="train")``.
    """

    def __init__(self, factory: Callable[[str], gym.Env]) -> None:
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


class EpisodeRunner:
    """Plays batches of episodes of an :class:`Agent` in environments.

    Args:
        envs: Where the episodes' environments come from.
        max_turns: Most agent turns per episode (the env's own turn limit also applies); None for the env's only.
        workers: Threads running env resets and steps; 1 runs them one after another.
        schedule: ``"async"``: episodes advance independently, and the agent acts for whichever episodes wait
            for a turn while the others' tools run; ``"rounds"``: every running episode acts, then every env
            steps (see :data:`SCHEDULES`).
        batch_window_s: Async only: after an env step returns, how long to wait for the next one before the agent
            acts, so that steps returning close together are acted on in one batch (a model's batch costs about
            as much for one episode as for several).
    """

    def __init__(self, envs: EnvPool, *, max_turns: int | None = None, workers: int = 32, schedule: str = "async",
                 batch_window_s: float = 0.01) -> None:
        if workers < 1 or (max_turns is not None and max_turns < 1):
            raise ValueError(f"EpisodeRunner: expected workers >= 1 and max_turns None or >= 1, got {workers}, "
                             f"{max_turns}")
        if schedule not in SCHEDULES:
            raise ValueError(f"EpisodeRunner.schedule: expected one of {SCHEDULES}, got {schedule!r}")
        if batch_window_s < 0:
            raise ValueError(f"EpisodeRunner.batch_window_s: expected >= 0, got {batch_window_s}")
        self.envs = envs
        self.max_turns = max_turns
        self.workers = workers
        self.schedule = schedule
        self.batch_window_s = batch_window_s

    def run(self, agent: Agent, requests: Sequence[EpisodeRequest], *, max_turns: int | None = None) -> list[Episode]:
        """Play one episode per request, all in flight together; returns them in request order.

        Args:
            agent: Acts for the episodes.
            requests: One episode each.
            max_turns: This batch's turn limit instead of the runner's (a horizon curriculum); None: the runner's.
        """
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"EpisodeRunner.run: expected max_turns None or >= 1, got {max_turns}")
        envs = self.envs.take(requests)
        batch = _Batch(agent, envs, requests, max_turns if max_turns is not None else self.max_turns)
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            pending = {pool.submit(_reset, envs[index], episode, requests[index]): index
                       for index, episode in enumerate(batch.episodes)}
            while pending or batch.waiting:
                for future in self._returned(pending):
                    batch.returned(pending.pop(future), future.result())
                for index, action in batch.act():
                    pending[pool.submit(_step, envs[index], action)] = index
        return batch.episodes

    def _returned(self, pending: dict[Future, int]) -> list[Future]:
        """The resets and steps that have returned, at least one (none when none is pending).

        Rounds: every pending call. Async: the first to return, and those returning within
        :attr:`batch_window_s` of the one before.
        """
        if not pending:
            return []
        if self.schedule == "rounds":
            return list(wait(pending).done)
        returned = wait(pending, return_when=FIRST_COMPLETED).done
        while len(returned) < len(pending):
            more = wait(pending.keys() - returned, timeout=self.batch_window_s, return_when=FIRST_COMPLETED).done
            if not more:
                break
            returned |= more
        return list(returned)


class _Batch:
    """The episodes of one :meth:`EpisodeRunner.run` call and which of them wait for the agent."""

    def __init__(self, agent: Agent, envs: Sequence[gym.Env], requests: Sequence[EpisodeRequest],
                 max_turns: int | None) -> None:
        self.agent = agent
        self.envs = envs
        self.requests = requests
        self.max_turns = max_turns
        self.episodes = [Episode(env_id=request.env_id, task_id=request.task.id, group=request.group,
                                 seed=request.seed, index=index, family=request.task.family,
                                 difficulty=request.task.difficulty) for index, request in enumerate(requests)]
        self.observations = [""] * len(requests)
        self.infos: list[Mapping[str, Any]] = [{} for _ in requests]
        self.waiting: list[int] = []

    def returned(self, index: int, result: tuple[str, dict[str, Any]] | StepResult) -> None:
        """Take a reset's ``(observation, info)`` or a step's result for episode ``index``."""
        episode = self.episodes[index]
        if not episode.turns:
            observation, info = result
            self.agent.start(episode, self.requests[index].task, observation or self.requests[index].task.prompt,
                             info)
        else:
            record_step(episode, result)
            observation, info = result[0], result[4]
            if not episode.done and self.max_turns is not None and len(episode.turns) >= self.max_turns:
                episode.stop_reason = "max_turns"
        if episode.done:
            self._finish(index)
        else:
            self.observations[index], self.infos[index] = observation, info
            self.waiting.append(index)

    def act(self) -> list[tuple[int, str]]:
        """The agent acts for every waiting episode; returns ``(episode index, action)`` of each turn taken."""
        acting, self.waiting = sorted(self.waiting), []
        if not acting:
            return []
        episodes = [self.episodes[i] for i in acting]
        turns = self.agent.act(episodes, [self.observations[i] for i in acting], [self.infos[i] for i in acting])
        actions = []
        for index, episode, turn in zip(acting, episodes, turns, strict=True):
            if turn is None or isinstance(turn, AgentStop):
                _stop(episode, turn or AgentStop("context"))
                self._finish(index)
                continue
            episode.turns.append(TurnRecord(action=turn.action, start=turn.start, length=turn.length,
                                            after_tool_result=bool(episode.turns and episode.turns[-1].tools)))
            actions.append((index, turn.action))
        return actions

    def _finish(self, index: int) -> None:
        """The episode has ended: keep the env's record of it and tell the agent. An episode that ended unscored
        (stopped by this runner, or truncated by a turn limit the env did not know) reports its family's
        unanswered components (:meth:`~agentgym_envs.card.FamilyCard.unanswered_components`), as the env does at its
        own turn limit."""
        episode = self.episodes[index]
        if not episode.infra_error and "reward_components" not in episode.final_info:
            card = self.envs[index].unwrapped.card
            episode.reward_components = card.families[episode.family].unanswered_components()
        if episode.turns or not episode.infra_error:  # not for a failed reset: the env holds an older one
            try:
                episode.trajectory = self.envs[index].unwrapped.trajectory
            except InfrastructureError:  # a remote env whose worker died: its record is lost with it
                episode.trajectory = None
        self.agent.finish(episode)


def _stop(episode: Episode, stop: AgentStop) -> None:
    """End ``episode`` as the agent said; a crashed or timed-out agent leaves it unscored."""
    episode.stop_reason = stop.reason
    if stop.reason in UNSCORED_AGENT_STOPS:
        episode.infra_error, episode.error = True, stop.error or stop.reason


def _reset(env: gym.Env, episode: Episode, request: EpisodeRequest) -> tuple[str, dict[str, Any]]:
    """Reset the env on the request's task; an infrastructure fault at reset ends the episode at once."""
    try:
        return env.reset(seed=request.seed, options={"task": request.task})
    except InfrastructureError as exc:
        episode.infra_error, episode.stop_reason, episode.error = True, "infra_error", f"reset failed: {exc}"
        return "", {}


def _step(env: gym.Env, action: str) -> StepResult:
    """Step the env; an infrastructure fault raised by the step (e.g. a remote env's worker died) ends the
    episode as one, truncated, rather than the run."""
    try:
        return env.step(action)
    except InfrastructureError as exc:
        return (f"[infrastructure error] {exc}", 0.0, False, True,
                {"ok": False, "infra_error": True, "error": str(exc), "tool_calls": []})


def record_step(episode: Episode, step: StepResult) -> None:
    """Record an env step's outcome on the episode's latest turn, and end the episode when the step did."""
    observation, reward, terminated, truncated, info = step
    record = episode.turns[-1]
    record.observation = observation
    record.tools = tuple(call["name"] for call in info.get("tool_calls", []))
    record.ok = bool(info.get("ok"))
    record.infra_error = bool(info.get("infra_error"))
    record.ended_at = time.perf_counter()
    episode.tool_calls.extend(info.get("tool_calls", []))
    if terminated or truncated:
        episode.reward, episode.terminated = float(reward), terminated
        episode.reward_components = dict(info.get("reward_components", {}))
        episode.final_info = {key: value for key, value in info.items() if key not in PER_STEP_INFO}
        episode.infra_error = bool(info.get("infra_error"))
        episode.stop_reason = "answered" if terminated else "infra_error" if episode.infra_error else "turn_limit"


def group_requests(tasks: Sequence[tuple[str, Task]], group_size: int, seed: int) -> list[EpisodeRequest]:
    """``group_size`` consecutive requests per ``(env_id, task)``, with distinct reset seeds."""
    requests = []
    for group, (env_id, task) in enumerate(tasks):
        for member in range(group_size):
            requests.append(EpisodeRequest(env_id=env_id, task=task, group=group,
                                           seed=seed + group * group_size + member))
    return requests
