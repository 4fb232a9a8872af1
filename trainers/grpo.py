"""GRPO for multi-turn tool use on TRL's ``GRPOTrainer``, with action masking.

TRL's trainer keeps the loss (DAPO/GRPO/Dr.GRPO/... by ``loss_type``), the KL term (``beta``), clipping
(``epsilon``, and ``epsilon_high`` for DAPO's clip-higher), reward scaling and logging. This module
gives it a ``rollout_func`` that plays whole episodes with :class:`~trainers.rollout.RolloutEngine`
and returns, per episode, the prompt ids, the completion ids and their sampling logprobs, and
``env_mask`` (1 = a token the model generated, 0 = observation or template): TRL multiplies its loss
mask by ``env_mask``, so tool output never receives gradient. No ``tools=`` is passed to TRL (it would
run its own tool loop and ignore ``env_mask``).

Tasks do not come from TRL's dataset: the dataset only holds one row per group slot, and each group's
task is drawn from a curriculum sampler (:mod:`tasks.curriculum`) that is fed every group's success.
The environment's reward reaches TRL as a reward function (``env_reward``); every reward component is
logged through weight-0 reward functions. Optional: per-environment reward normalisation for
multi-environment runs, and zero-variance group filtering (such groups are dropped from the loss).
On a CPU the loss runs the output head at the agent's tokens only (:meth:`AgentGRPOTrainer._compute_loss`).

Example:
    python -m trainers.grpo --config trainers/configs/grpo_search_cpu.yaml --max_steps 20
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser

from agentgym_envs import EnvCard, describe  # importing the package registers the agentrl/... ids
from agentgym_envs.registration import canonical_env_id, registered_ids
from tasks import Task, make_sampler
from tasks.curriculum import TaskSampler
from trainers.agent_client import load_agent_program
from trainers.agent_program import AgentProgramFn, AgentProgramRollout, CommandProgram, WorkerPrograms
from trainers.cli_help import FULL_HELP_FLAG, own_fields, short_help
from trainers.generation import Generator, TransformersGenerator, VLLMGenerator
from trainers.horizon import HorizonSchedule
from trainers.infra_guard import (
    INFRA_ERROR_STOP_SHARE_HELP,
    INFRA_ERROR_WINDOW_HELP,
    InfraErrorGuard,
    TooManyInfraErrors,
    check_infra_error_settings,
)
from trainers.model_path import TINY_MODEL, ModelNotFoundError
from trainers.monitoring import RolloutMonitor, carries_no_signal
from trainers.overlap import PolicySnapshot, RolloutBatch, RolloutPrefetch
from trainers.precision import float32_without_native_bf16
from trainers.rollout import (
    EnvPool,
    Episode,
    EpisodeRequest,
    RolloutConfig,
    RolloutEngine,
    check_env_workers,
    make_env_factory,
)
from trainers.scoring import has_plain_output_head, label_scores
from trainers.tiny_model import load_model

SLOT_PREFIX = "group-slot-"


@dataclass
class AgentGRPOConfig(GRPOConfig):
    """TRL's ``GRPOConfig`` plus what a multi-turn environment run needs.

    Every field of TRL's config keeps its meaning (``num_generations`` is the group size, ``loss_type``,
    ``beta``, ``epsilon``/``epsilon_high``, ``scale_rewards``, ``report_to``...).
    """

    envs: list[str] = field(default_factory=lambda: ["agentrl/Search-v0"],
                            metadata={"help": "Environment ids to train on (several: multi-environment training)."})
    env_kwargs: dict | str | None = field(default=None, metadata={
        "help": "Keyword arguments of gym.make per env id, e.g. {'agentrl/Search-v0': {'families': ['single']}}; "
                "a JSON string on the command line."})
    sampler: str = field(default="uniform", metadata={
        "help": "Curriculum sampler: uniform, staged, learnability or failure_replay (tasks.curriculum)."})
    max_turns: int = field(default=4, metadata={"help": "Most model turns per episode."})
    max_tokens_per_turn: int = field(default=64, metadata={"help": "Most tokens generated in one turn."})
    max_context_tokens: int = field(default=2048, metadata={"help": "Token budget of prompt plus all turns."})
    tool_workers: int = field(default=32, metadata={"help": "Threads running env steps concurrently."})
    filter_zero_variance_groups: bool = field(default=True, metadata={
        "help": "Drop groups whose rewards are all equal from the loss (they carry no GRPO signal)."})
    normalize_rewards_per_env: bool = field(default=True, metadata={
        "help": "Scale each env's rewards by its running std before TRL's group normalisation (multi-env runs)."})
    mismatch_every: int = field(default=1, metadata={
        "help": "Measure sampler/trainer mismatch every this many rollout batches (one extra forward pass); 0: never."})
    episode_log: str | None = field(default=None, metadata={
        "help": "JSONL file of per-step rollout metrics and alerts (default: <output_dir>/rollouts.jsonl); with "
                "several processes, process k > 0 writes those of its own episodes to rollouts.rank<k>.jsonl."})
    max_turns_schedule: str | None = field(default=None, metadata={
        "help": "Horizon curriculum: the turn limit by training step as '<turns>@<step>,...', e.g. '5@0,10@20,15@40' "
                "(trainers.horizon); None: max_turns throughout. max_context_tokens still caps every episode."})
    overlap_rollouts: bool = field(default=False, metadata={
        "help": "Generate the next step's rollouts in a background thread, with a snapshot of the policy, while this "
                "step trains (off-policy by up to max_staleness steps; TRL's importance-sampling correction, "
                "vllm_importance_sampling_mode/_clip_max, reweights the stale tokens). Changes results: off by "
                "default."})
    max_staleness: int = field(default=1, metadata={
        "help": "With overlap_rollouts: a batch generated by a policy more than this many optimizer steps old is "
                "thrown away and generated again."})
    env_workers: str = field(default="local", metadata={
        "help": "Where the environments run: 'local' (this process's threads) or 'ray' (one Ray actor per env, "
                "agentgym_envs.ray_workers; needs the ray extra)."})
    ray_address: str | None = field(default=None, metadata={
        "help": "With env_workers 'ray': the Ray cluster to join ('auto' or 'HEAD_IP:6379'); None starts a local, "
                "loopback-only one (agentgym_envs.ray_workers.connect_ray)."})
    infra_error_stop_share: float = field(default=0.5, metadata={"help": INFRA_ERROR_STOP_SHARE_HELP})
    infra_error_window: int = field(default=3, metadata={"help": INFRA_ERROR_WINDOW_HELP})
    agent_program: str | None = field(default=None, metadata={
        "help": "Train an agent program of your own instead of agentrl's rollout loop: 'module:function', a function "
                "of a trainers.agent_program.AgentSession that talks to the policy over OpenAI's API at "
                "session.base_url and calls the env's tools with session.call (docs/agent-programs.md)."})
    agent_command: str | None = field(default=None, metadata={
        "help": "Train an agent program that is a command, run once per episode in its own process (split like a "
                "shell line): it finds the policy in OPENAI_BASE_URL and the env in AGENTRL_SESSION_URL, e.g. "
                "'python -m trainers.agent_client pkg.module:function' (docs/agent-programs.md)."})
    agent_workers: int = field(default=0, metadata={
        "help": "With agent_program: run it in this many long-lived worker processes, each playing episode after "
                "episode (trainers.agent_program.WorkerPrograms), instead of threads of the trainer; 0: threads."})
    agent_timeout_s: float = field(default=300.0, metadata={
        "help": "With agent_program: most seconds a program may take between two env calls; slower ones end their "
                "episode unscored (agent_timeout)."})
    zero_variance_warn_steps: int = field(default=3, metadata={
        "help": "Warn (a zero_variance_streak alert: the log and the episode log) when every group of this many "
                "steps in a row had equal rewards, i.e. GRPO's gradient was 0 (typically a model never "
                "warm-started: the warning says how to); 0: never. Training goes on."})

    def __post_init__(self) -> None:
        float32_without_native_bf16(self)
        super().__post_init__()
        check_infra_error_settings(self.infra_error_stop_share, self.infra_error_window)
        if self.zero_variance_warn_steps < 0:
            raise ValueError(f"zero_variance_warn_steps: expected >= 0 (0 = never warn), got "
                             f"{self.zero_variance_warn_steps}")
        self.envs = [canonical_env_id(name) for name in self.envs]
        self.env_kwargs = kwargs_of_envs(self.envs, self.env_kwargs)
        if self.max_turns < 1 or self.max_tokens_per_turn < 1:
            raise ValueError(f"max_turns and max_tokens_per_turn: expected >= 1, got {self.max_turns}, "
                             f"{self.max_tokens_per_turn}")
        if self.max_steps <= 0:
            raise ValueError(f"max_steps: expected > 0 (environment training runs by steps, the dataset only holds "
                             f"group slots), got {self.max_steps}")
        if self.episode_log is None:
            self.episode_log = str(Path(self.output_dir) / "rollouts.jsonl")
        self._horizon = HorizonSchedule.parse(self.max_turns_schedule) if self.max_turns_schedule else None
        check_env_workers(self.env_workers)
        if self.overlap_rollouts:
            self._check_overlap()
        self.agent_program, self.agent_command = self.agent_program or None, self.agent_command or None  # "": unset
        if self.agent_program is not None and self.agent_command is not None:
            raise ValueError("agent_program and agent_command: expected one of them, got both")
        if self.agent_program is not None:
            load_agent_program(self.agent_program)  # fail at start, not at the first rollout
        if self.agent_command is not None and not shlex.split(self.agent_command):
            raise ValueError("agent_command: expected a command, got an empty one")
        if self.agent_workers < 0 or (self.agent_workers and self.agent_program is None):
            raise ValueError(f"agent_workers: expected 0, or >= 1 with agent_program set, got {self.agent_workers} "
                             f"with agent_program={self.agent_program!r}")
        if self.agent_timeout_s <= 0:
            raise ValueError(f"agent_timeout_s: expected > 0, got {self.agent_timeout_s}")

    def _check_overlap(self) -> None:
        if self.max_staleness < 1:
            raise ValueError(f"max_staleness: expected >= 1 with overlap_rollouts (a batch is generated one step "
                             f"ahead), got {self.max_staleness}")
        if self.use_vllm:
            raise ValueError("overlap_rollouts: expected use_vllm false (the overlap generates with a snapshot of "
                             "the policy and the transformers generator; it is not implemented for vLLM)")
        micro_steps = self.steps_per_generation * self.num_iterations
        if micro_steps % self.gradient_accumulation_steps or \
                micro_steps // self.gradient_accumulation_steps > self.max_staleness:
            raise ValueError(
                f"overlap_rollouts: expected steps_per_generation * num_iterations ({micro_steps}) to be a multiple of "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps}) and at most max_staleness "
                f"({self.max_staleness}) optimizer steps apart, or every prefetched batch would be too stale to use; "
                "raise max_staleness or lower num_iterations")

    @property
    def steps_per_rollout(self) -> int:
        """Optimizer steps between two rollout batches (1 unless ``num_iterations`` or ``steps_per_generation``
        reuse a batch for several)."""
        return max(1, self.steps_per_generation * self.num_iterations // self.gradient_accumulation_steps)

    def max_turns_at(self, step: int) -> int:
        """The turn limit of the rollouts trained on at ``step``: the horizon schedule's, else ``max_turns``."""
        return self._horizon.max_turns(step) if self._horizon is not None else self.max_turns

    def agent_program_fn(self) -> AgentProgramFn | None:
        """The agent program trained (``agent_program`` or ``agent_command``); None: agentrl's own rollout loop."""
        if self.agent_program is not None and self.agent_workers:
            return WorkerPrograms(self.agent_program, self.agent_workers)
        if self.agent_program is not None:
            return load_agent_program(self.agent_program)
        if self.agent_command is not None:
            return CommandProgram(shlex.split(self.agent_command))
        return None

    def rollout_config(self) -> RolloutConfig:
        """The rollout engine's settings for training (TRL's temperature and top_p)."""
        return RolloutConfig(max_turns=self.max_turns, max_tokens_per_turn=self.max_tokens_per_turn,
                             max_context_tokens=self.max_context_tokens, temperature=self.temperature,
                             top_p=self.top_p, tool_workers=self.tool_workers)


class EnvironmentRollouts:
    """The ``rollout_func`` handed to TRL: draws each group's task, plays the episodes, shapes TRL's inputs.

    An episode ended by an infrastructure fault is no sample of the task: its ``env_reward`` reaches TRL as
    None, so that it stays out of its group's mean and std (TRL then gives it advantage 0), out of the
    zero-variance check, of the running reward statistics and of the curriculum, and its tokens out of the loss.
    When too many episodes are such faults, training stops (:class:`~trainers.infra_guard.InfraErrorGuard`).
    Each process draws its own tasks from a generator seeded with ``config.seed`` and its process index.

    Args:
        config: The run's config.
        tasks: Training tasks per env id.
        env_factory: Makes an env for an id (default ``gym.make(env_id, **config.env_kwargs[env_id])``).
        monitor: Collects rollout metrics and alerts.
    """

    def __init__(self, config: AgentGRPOConfig, tasks: Mapping[str, Sequence[Task]],
                 env_factory=None, monitor: RolloutMonitor | None = None) -> None:
        self.config = config
        self.envs = EnvPool(env_factory or default_env_factory(config))
        self.env_ids = list(tasks)
        self.samplers: dict[str, TaskSampler] = {env_id: make_sampler(config.sampler, list(env_tasks))
                                                 for env_id, env_tasks in tasks.items()}
        self.rng: np.random.Generator | None = None  # this process's, made on the first batch (:meth:`seed_process`)
        self.reward_stats = {env_id: RunningStats() for env_id in tasks}
        self.monitor = monitor or RolloutMonitor()
        self.infra_guard = InfraErrorGuard(config.infra_error_stop_share, config.infra_error_window)
        self.generator: Generator | None = None
        self.engine: RolloutEngine | AgentProgramRollout | None = None
        self.snapshot: PolicySnapshot | None = None  # the generating copy of the policy, with overlap_rollouts
        self.prefetch = RolloutPrefetch() if config.overlap_rollouts else None
        self.generated_lengths: list[int] = []  # tokens the model generated in each episode of the last batch

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, list]:
        """Play one episode per prompt; consecutive equal prompts form a group sharing one task.

        With ``overlap_rollouts``, the episodes are those generated in the background during the last step
        (:meth:`_play_overlapped`); everything else (rewards, curriculum, monitoring) runs here, on the
        training thread.

        Raises:
            TooManyInfraErrors: Too many episodes ended by an infrastructure fault (``infra_error_stop_share``).
        """
        if self.rng is None:
            self.seed_process(trainer.accelerator.process_index, trainer.accelerator.num_processes)
        step = trainer.state.global_step
        batch = self._play_overlapped(prompts, trainer) if self.prefetch is not None else self._play(prompts, trainer)
        episodes = batch.episodes
        self._update_samplers(episodes)
        rewards = self._env_rewards(episodes)
        mask_out = self._masked_out(episodes, rewards)
        self.monitor.observe(episodes, trainer=trainer, dropped=mask_out,
                             batch_metrics=batch.metrics(step, overlapped=self.prefetch is not None))
        self.infra_guard.observe(episodes, step=step)
        self.generated_lengths = [sum(episode.env_mask) for episode in episodes]
        return self._outputs([_never_empty(episode, trainer.processing_class.eos_token_id)
                              for episode in episodes], rewards, mask_out)

    def _play(self, prompts: list[Any], trainer: GRPOTrainer) -> RolloutBatch:
        """Play the batch of the current step now, with the policy as it is, within the step's turn limit."""
        step = trainer.state.global_step
        engine = self._engine(trainer)
        if self.snapshot is not None:
            self.snapshot.refresh(trainer.model, step)
        max_turns = self.config.max_turns_at(step)
        episodes = engine.run(self._requests(prompts), max_turns=max_turns)
        counts = dict(engine.agent.stats) if isinstance(engine, AgentProgramRollout) else {}
        return RolloutBatch(episodes, version=step, max_turns=max_turns, agent_counts=counts)

    def _play_overlapped(self, prompts: list[Any], trainer: GRPOTrainer) -> RolloutBatch:
        """The batch generated in the background during the last step, or, when there is none or it is more than
        ``max_staleness`` steps old, one played now; then the next step's batch starts in the background.

        The snapshot is refreshed here, between optimizer steps and while no batch is in flight, so the
        background thread never reads weights that the optimizer is writing. The next batch's tasks are drawn
        now, with the curriculum as it stands before this batch's results (the overlap's one-batch lag).
        """
        step = trainer.state.global_step
        batch = self.prefetch.take()
        if batch is None or step - batch.version > self.config.max_staleness:
            batch = dataclasses.replace(self._play(prompts, trainer), regenerated=batch is not None)
        next_step = step + self.config.steps_per_rollout
        if next_step < self.config.max_steps:
            engine = self._engine(trainer)
            self.snapshot.refresh(trainer.model, step)
            requests, max_turns = self._requests(prompts), self.config.max_turns_at(next_step)
            self.prefetch.start(lambda: engine.run(requests, max_turns=max_turns), version=step, max_turns=max_turns)
        return batch

    def seed_process(self, process_index: int, num_processes: int) -> None:
        """Seed this process's task generator: deterministic per (``config.seed``, process), different across
        processes, so that ranks play different tasks.

        Args:
            process_index: This process's index (accelerate's ``process_index``).
            num_processes: How many processes train together.

        Raises:
            ValueError: On several processes, when a process's generation batch would split a group.
        """
        local_batch = self.config.per_device_train_batch_size * self.config.steps_per_generation
        if num_processes > 1 and local_batch % self.config.num_generations:
            raise ValueError(
                f"per_device_train_batch_size * steps_per_generation: expected a multiple of num_generations "
                f"({self.config.num_generations}) when {num_processes} processes train, got {local_batch}; a group "
                "split across processes would play a different task on each (make per_device_train_batch_size a "
                "multiple of num_generations)")
        self.rng = np.random.default_rng([self.config.seed, process_index])

    def _engine(self, trainer: GRPOTrainer) -> RolloutEngine | AgentProgramRollout:
        if self.engine is None:
            if self.config.use_vllm:
                self.generator = VLLMGenerator(trainer.vllm_generation)
            elif self.prefetch is not None:
                self.snapshot = PolicySnapshot(trainer.model, trainer.accelerator.autocast)
                self.generator = TransformersGenerator(self.snapshot.model, trainer.processing_class.pad_token_id)
            else:
                self.generator = TransformersGenerator(trainer.model, trainer.processing_class.pad_token_id)
            program = self.config.agent_program_fn()
            if program is not None:
                self.engine = AgentProgramRollout(self.generator, trainer.processing_class, self.envs, program,
                                                  self.config.rollout_config(), timeout_s=self.config.agent_timeout_s)
            else:
                self.engine = RolloutEngine(self.generator, trainer.processing_class, self.envs,
                                            self.config.rollout_config())
        return self.engine

    def _requests(self, prompts: list[Any]) -> list[EpisodeRequest]:
        if self.rng is None:
            raise RuntimeError("the task generator is not seeded yet: call seed_process(process_index, num_processes)")
        requests: list[EpisodeRequest] = []
        group = -1
        for index, prompt in enumerate(prompts):
            if index == 0 or prompt != prompts[index - 1] or index % self.config.num_generations == 0:
                group += 1
                env_id = self.env_ids[int(self.rng.integers(len(self.env_ids)))]
                task = self.samplers[env_id].sample(self.rng, 1)[0]
            requests.append(EpisodeRequest(env_id=env_id, task=task, group=group,
                                           seed=int(self.rng.integers(2**31))))
        return requests

    def _update_samplers(self, episodes: list[Episode]) -> None:
        """Feed each group's mean scored reward to its env's curriculum (an infrastructure fault says nothing
        about the task's difficulty; a group without scored episodes is not fed)."""
        for (env_id, _), members in _groups(episodes).items():
            scored = [episode.reward for episode in members if not episode.infra_error]
            if scored:
                self.samplers[env_id].update(members[0].task_id, float(np.mean(scored)))

    def _env_rewards(self, episodes: list[Episode]) -> list[float | None]:
        """Per episode, the reward GRPO sees: None for an infrastructure fault, else :meth:`_normalized`.

        Every episode of the batch is normalised with its env's statistics from before the batch; the batch's
        scored rewards update them afterwards.
        """
        rewards = [None if episode.infra_error else self._normalized(episode) for episode in episodes]
        if self._normalizes():
            for episode in episodes:
                if not episode.infra_error:
                    self.reward_stats[episode.env_id].add(episode.reward)
        return rewards

    def _normalizes(self) -> bool:
        return self.config.normalize_rewards_per_env and len(self.env_ids) > 1

    def _normalized(self, episode: Episode) -> float:
        """The episode's reward over its env's running std (unchanged until the env has two scored rewards)."""
        stats = self.reward_stats[episode.env_id]
        if not self._normalizes() or stats.count < 2:
            return episode.reward
        return episode.reward / max(stats.std, 1e-3)

    def _masked_out(self, episodes: list[Episode], rewards: Sequence[float | None]) -> set[int]:
        """Episodes kept out of the loss: infrastructure faults, and when filtering, every episode of a group
        with fewer than two distinct scored rewards (:func:`trainers.monitoring.carries_no_signal`)."""
        dropped = {i for i, episode in enumerate(episodes) if episode.infra_error}
        if self.config.filter_zero_variance_groups:
            for members in _group_indices(episodes).values():
                if carries_no_signal([rewards[i] for i in members]):
                    dropped.update(members)
        return dropped

    def _outputs(self, episodes: list[Episode], rewards: list[float | None], mask_out: set[int]) -> dict[str, list]:
        """TRL's rollout outputs. An infrastructure fault's rewards and components are None and empty: TRL
        counts a row as unscorable, out of its group's baseline, only when every reward function returns None."""
        return {
            "prompt_ids": [episode.prompt_ids for episode in episodes],
            "completion_ids": [episode.completion_ids for episode in episodes],
            "logprobs": [episode.logprobs for episode in episodes],
            "env_mask": [[0] * len(e.env_mask) if i in mask_out else e.env_mask for i, e in enumerate(episodes)],
            "env_reward": rewards,
            "raw_reward": [None if episode.infra_error else episode.reward for episode in episodes],
            "reward_components": [{} if episode.infra_error else episode.reward_components for episode in episodes],
            "env_id": [episode.env_id for episode in episodes],
            "task_id": [episode.task_id for episode in episodes],
        }

    def close(self) -> None:
        """Wait for a batch still in flight in the background (its thread ends), then close every environment."""
        try:
            if self.prefetch is not None:
                self.prefetch.close()
            if isinstance(self.engine, AgentProgramRollout):
                self.engine.close()
        finally:
            self.envs.close()


@dataclass
class RunningStats:
    """Running mean and standard deviation (Welford)."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, value: float) -> None:
        """Fold one value in."""
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (value - self.mean)

    @property
    def std(self) -> float:
        """Sample standard deviation (0 with fewer than two values)."""
        return float(np.sqrt(self.m2 / (self.count - 1))) if self.count > 1 else 0.0


def _padded_mask(rows: Sequence[Sequence[int]], width: int) -> torch.Tensor:
    """The rows' 0/1 masks right-padded with 0 (or cut) to ``width`` columns."""
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        mask[index, :min(len(row), width)] = torch.tensor(list(row[:width]), dtype=torch.long)
    return mask


def _never_empty(episode: Episode, eos_token_id: int) -> Episode:
    """An episode that ended at reset has no completion; TRL needs one token, so it gets a masked end token."""
    if not episode.completion_ids:
        episode.append([eos_token_id], generated=False)
    return episode


def _group_indices(episodes: Sequence[Episode]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for index, episode in enumerate(episodes):
        groups.setdefault(episode.group, []).append(index)
    return groups


def _groups(episodes: Sequence[Episode]) -> dict[tuple[str, int], list[Episode]]:
    groups: dict[tuple[str, int], list[Episode]] = {}
    for episode in episodes:
        groups.setdefault((episode.env_id, episode.group), []).append(episode)
    return groups


def env_reward(prompts: list, completions: list, env_reward: list[float | None], **_: Any) -> list[float | None]:
    """The environment's reward (normalised per env when configured): what GRPO optimises.

    None for an episode ended by an infrastructure fault: TRL turns it into NaN and, since every other reward
    function also returns None there, leaves the episode out of its group's mean and std and sets its advantage to 0.
    """
    return list(env_reward)


def component_reward(name: str):
    """A weight-0 reward function that only logs the reward component ``name`` (None where absent)."""

    def component(prompts: list, completions: list, reward_components: list[dict[str, float]],
                  **_: Any) -> list[float | None]:
        return [components.get(name) for components in reward_components]

    component.__name__ = name
    return component


def kwargs_of_envs(envs: Sequence[str], env_kwargs: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """``env_kwargs`` (a JSON string on the command line) keyed by env id, for the envs trained on.

    Kwargs of a registered env that is not trained on are dropped with a warning, so that ``--envs ID`` alone
    overrides a recipe written for another env.

    Raises:
        ValueError: A key that is neither among ``envs`` nor a registered id or alias (a typo).
    """
    given = json.loads(env_kwargs) if isinstance(env_kwargs, str) else dict(env_kwargs or {})
    by_id = {canonical_env_id(name): kwargs for name, kwargs in given.items()}
    unknown = sorted(name for name in by_id if name not in envs and name not in registered_ids())
    if unknown:
        raise ValueError(f"env_kwargs: expected keys among envs {list(envs)} or registered ids, got {unknown}")
    unused = sorted(set(by_id) - set(envs))
    if unused:
        warnings.warn(f"env_kwargs: {unused} not among envs {list(envs)}; their kwargs are not used", stacklevel=2)
    return {env_id: kwargs for env_id, kwargs in by_id.items() if env_id in envs}


def default_env_factory(config: AgentGRPOConfig) -> Callable[[str], gym.Env]:
    """``gym.make(env_id, **config.env_kwargs[env_id])``, here or (``env_workers: ray``) in a Ray actor each."""
    return make_env_factory(config.env_kwargs, workers=config.env_workers, ray_address=config.ray_address)


def env_cards(env_ids: Sequence[str], factory: Callable[[str], gym.Env]) -> dict[str, EnvCard]:
    """The card of each env of the run, as the rollouts' ``factory`` makes it (no sandbox starts before a reset)."""
    cards = {}
    for env_id in env_ids:
        env = factory(env_id)
        try:
            cards[env_id] = describe(env)
        finally:
            env.close()
    return cards


def reward_component_names(cards: Mapping[str, EnvCard]) -> list[str]:
    """Every reward component the envs report (what ``info["reward_components"]`` will hold), first-seen order."""
    names: dict[str, None] = {}
    for card in cards.values():
        names.update(dict.fromkeys(card.reward_component_names()))
    return list(names)


def tasks_from_envs(config: AgentGRPOConfig) -> dict[str, list[Task]]:
    """The training tasks of each env: those of ``gym.make(env_id, **env_kwargs)`` (its split and filters)."""
    tasks = {}
    for env_id in config.envs:
        env = gym.make(env_id, **config.env_kwargs.get(env_id, {}))
        try:
            tasks[env_id] = list(env.unwrapped.tasks)
        finally:
            env.close()
    return tasks


class AgentGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose logs also carry the rollout monitor's metrics (tools, tails, alerts)."""

    def __init__(self, *args: Any, rollouts: EnvironmentRollouts, **kwargs: Any) -> None:
        super().__init__(*args, rollout_func=rollouts, **kwargs)
        self.rollouts = rollouts
        self._agent_tokens: Any = None  # the loss's token mask while :meth:`_compute_loss` runs on the agent's tokens
        self._rollout_env_mask: list[list[int]] | None = None  # the batch's env_mask while it is scored (overlap)

    def _compute_loss(self, model, inputs: dict[str, Any]):
        """TRL's loss; on a CPU, with the output head run at the agent's tokens only.

        TRL's fused head compacts its input to the scored positions only on Triton devices; elsewhere it
        projects every position, prompt, padding and tool output included, onto the vocabulary. In a
        GRPO batch of tool episodes on the tiny model that was 10-30 times more rows than the agent's tokens
        and the largest cost of a step. Logprobs at the positions the loss masks out are then 0, so this
        is done only when the importance ratios compare with this same pass (no stored old logprobs), and
        in one process (a model wrapped for distributed training keeps TRL's head).
        """
        if self._scores_agent_tokens_only(model, inputs):
            mask = inputs["completion_mask"]
            self._agent_tokens = mask * inputs["tool_mask"] if "tool_mask" in inputs else mask
        try:
            with self._stale_rollout_correction():
                return super()._compute_loss(model, inputs)
        finally:
            self._agent_tokens = None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL's; with ``overlap_rollouts``, with its importance-sampling correction on
        (:meth:`_stale_rollout_correction`).

        The correction needs ``old_per_token_logps``; on a CPU they are computed with the output head at the
        agent's tokens only (as the loss's) and kept at 0 elsewhere, so that the loss can score the agent's
        tokens only too (:meth:`_scores_agent_tokens_only`): both then give 0 off the agent's tokens, where
        the importance ratio is 1 and the loss mask 0.
        """
        with self._stale_rollout_correction():
            try:
                output = super()._generate_and_score_completions(inputs)
            finally:
                self._rollout_env_mask = None
        self._log_generated_lengths()
        old_logps = output.get("old_per_token_logps")
        if self.args.overlap_rollouts and old_logps is not None and \
                self._agent_head_applies(self.model, output["completion_ids"]):
            output["old_per_token_logps"] = old_logps * output["completion_mask"] * output["tool_mask"]
        return output

    def _log_generated_lengths(self) -> None:
        """Replace TRL's completion lengths of the batch just scored with the tokens the model generated.

        TRL counts the ``env_mask`` ones, and a group dropped from the loss (zero variance, infrastructure fault)
        has its ``env_mask`` zeroed: a batch of such groups logged a mean length of 0.
        """
        if not self.rollouts.generated_lengths:
            return
        lengths = self.accelerator.gather(torch.tensor(self.rollouts.generated_lengths,
                                                       device=self.accelerator.device)).float()
        metrics = self._metrics["train"]
        for key, value in (("mean", lengths.mean()), ("min", lengths.min()), ("max", lengths.max())):
            if metrics[f"completions/{key}_length"]:
                metrics[f"completions/{key}_length"][-1] = value.item()

    def _generate(self, prompts: list):
        """TRL's; keeps the rollouts' ``env_mask`` while the batch is scored (the agent's tokens of each row)."""
        generated = super()._generate(prompts)
        self._rollout_env_mask = generated[2]
        return generated

    @contextmanager
    def _stale_rollout_correction(self) -> Iterator[None]:
        """With ``overlap_rollouts``: TRL's own importance-sampling correction of the rollouts' sampling logprobs.

        TRL computes ``old_per_token_logps`` with the current policy, the ratio to the ``logprobs`` the rollouts
        were sampled with (truncated or masked by ``vllm_importance_sampling_mode`` and ``_clip_min/_max``),
        reweights the loss with it and logs ``sampling/importance_sampling_ratio/*``. It does all this only
        where ``self.use_vllm`` is set (the sampler it expects to differ from the trainer is vLLM), so it is set
        for the duration of these calls, on the training thread, and the vLLM weight sync TRL would do
        first is marked done (there is no vLLM engine; the rollouts generate with the policy snapshot).
        """
        if not self.args.overlap_rollouts:
            yield
            return
        self.use_vllm, self._last_loaded_step = True, self.state.global_step
        try:
            yield
        finally:
            self.use_vllm = False

    def _scores_agent_tokens_only(self, model, inputs: dict[str, Any]) -> bool:
        """Whether the loss may run the output head at the agent's tokens only: on a CPU, in one process, with a
        plain head, and with no stored old logprobs unless they are 0 off the agent's tokens too (the overlap's,
        :meth:`_generate_and_score_completions`)."""
        return ((inputs.get("old_per_token_logps") is None or self.args.overlap_rollouts)
                and inputs.get("pixel_values") is None and self._agent_head_applies(model, inputs["completion_ids"]))

    def _agent_head_applies(self, model, completion_ids: torch.Tensor) -> bool:
        return (completion_ids.device.type == "cpu" and self.accelerator.num_processes == 1
                and not self.aux_loss_enabled and has_plain_output_head(self.accelerator.unwrap_model(model)))

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args: Any,
                                           **kwargs: Any):
        """TRL's, or while :meth:`_compute_loss` scores the agent's tokens only (or, with ``overlap_rollouts``,
        while the policy's old logprobs of a new batch are computed), those logprobs and entropies (0 elsewhere)."""
        agent_tokens = self._agent_tokens
        if agent_tokens is None and kwargs.get("pixel_values") is None and \
                self._scores_old_logps_on_agent_tokens(model, input_ids):
            agent_tokens = _padded_mask(self._rollout_env_mask, logits_to_keep).to(input_ids.device)
        if agent_tokens is None:
            return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                              *args, **kwargs)
        scored = torch.cat([agent_tokens.new_zeros(input_ids[:, :-logits_to_keep].shape), agent_tokens], 1)
        with self.accelerator.autocast():
            scores = label_scores(model, input_ids, attention_mask, input_ids.masked_fill(scored == 0, -100),
                                  self.temperature)
        return scores.log_probs[:, -logits_to_keep:], scores.entropy[:, -logits_to_keep:], None

    def _scores_old_logps_on_agent_tokens(self, model, input_ids: torch.Tensor) -> bool:
        """With ``overlap_rollouts``: TRL's no-grad pass of the policy over a batch just rolled out (old logprobs)."""
        return (self.args.overlap_rollouts and self._rollout_env_mask is not None and model is self.model
                and not torch.is_grad_enabled() and len(self._rollout_env_mask) == input_ids.shape[0]
                and self._agent_head_applies(model, input_ids))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the rollout metrics gathered since the last log, then log as TRL does. The trainer's last record
        (``train_runtime``...) carries the steps after the last logging step, as TRL's own metrics do there."""
        if "loss" in logs or ("train_runtime" in logs and self.rollouts.monitor.pending):
            logs.update(self.rollouts.monitor.flush(step=self.state.global_step))
        super().log(logs, start_time)


def build_trainer(config: AgentGRPOConfig, model, tokenizer, *, tasks: Mapping[str, Sequence[Task]] | None = None,
                  env_factory=None, peft_config=None) -> AgentGRPOTrainer:
    """A ready :class:`AgentGRPOTrainer`.

    Args:
        config: The run's config.
        model: The policy (a model or a path/hub id).
        tokenizer: Its tokenizer (with a chat template).
        tasks: Training tasks per env id (default: :func:`tasks_from_envs`).
        env_factory: Makes envs (default: :func:`default_env_factory`); their cards tell the reward components
            to log and the tools the under-use alert watches.
        peft_config: A PEFT config for LoRA, or None.
    """
    from datasets import Dataset

    tasks = dict(tasks) if tasks is not None else tasks_from_envs(config)
    factory = env_factory or default_env_factory(config)
    cards = env_cards(list(tasks), factory)
    rollouts = EnvironmentRollouts(config, tasks, env_factory=factory,
                                   monitor=RolloutMonitor(log_path=rank_log_path(config.episode_log,
                                                                                 config.process_index),
                                                          required_tools=required_tools(cards, tasks),
                                                          mismatch_every=config.mismatch_every,
                                                          zero_variance_steps=config.zero_variance_warn_steps,
                                                          max_context_tokens=config.max_context_tokens))
    components = reward_component_names(cards)
    config.reward_weights = [1.0] + [0.0] * len(components)
    slots = config.max_steps * config.gradient_accumulation_steps * config.per_device_train_batch_size
    dataset = Dataset.from_dict({"prompt": [f"{SLOT_PREFIX}{i}" for i in range(slots)]})
    return AgentGRPOTrainer(model=model, reward_funcs=[env_reward, *map(component_reward, components)],
                            args=config, train_dataset=dataset, processing_class=tokenizer,
                            peft_config=peft_config, rollouts=rollouts)


def rank_log_path(path: str, process_index: int) -> Path:
    """This process's episode log: ``path`` on the main process, ``<stem>.rank<k><suffix>`` beside it on process
    ``k`` (each process logs the episodes it played; the metrics TRL logs are the main process's)."""
    log = Path(path)
    return log if process_index == 0 else log.with_name(f"{log.stem}.rank{process_index}{log.suffix}")


def required_tools(cards: Mapping[str, EnvCard], tasks: Mapping[str, Sequence[Task]]) -> dict[str, tuple[str, ...]]:
    """Per env, the tools every family trained on needs (from its card; watched by the under-use alert)."""
    return {env_id: card.required_tools(*sorted({task.family for task in tasks.get(env_id, ())} & set(card.families)))
            for env_id, card in cards.items()}


EFFECTIVE_CONFIG_FILE = "effective_config.json"
"""Written to ``output_dir`` when a run starts: every setting it runs with, after the config file and the flags."""


def save_effective_config(config: AgentGRPOConfig, model_args: ModelConfig, argv: Sequence[str]) -> Path:
    """Write :data:`EFFECTIVE_CONFIG_FILE` beside the checkpoint: the command line, and every field of the run's
    config and model config as they are after the config file, the flags and the checks (``env_kwargs`` by id)."""
    path = Path(config.output_dir) / EFFECTIVE_CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"command": ["python", "-m", "trainers.grpo", *argv], "config": config.to_dict(),
              "model": dataclasses.asdict(model_args)}
    path.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return path


COMMON_TRL_OPTIONS = ("model_name_or_path", "output_dir", "max_steps", "learning_rate", "num_generations",
                      "per_device_train_batch_size", "gradient_accumulation_steps", "temperature", "loss_type", "beta",
                      "epsilon", "epsilon_high", "logging_steps", "report_to", "seed", "use_vllm", "use_peft", "dtype")
"""TRL and transformers options a run commonly sets, shown by ``--help`` after agentrl's own."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.grpo --config <yaml> [--flag value ...]``: train, save to ``output_dir``.

    Exits with status 1 and the reason, saving nothing, when the model path does not exist or too many episodes
    ended by an infrastructure fault (``infra_error_stop_share``).
    """
    from trl import get_peft_config

    args = list(sys.argv[1:] if argv is None else argv)
    parser = TrlParser((AgentGRPOConfig, ModelConfig), prog="python -m trainers.grpo")
    if FULL_HELP_FLAG in args:
        parser.print_help()
        return 0
    if "-h" in args or "--help" in args:
        own = own_fields(AgentGRPOConfig, GRPOConfig)
        print(short_help(parser, "python -m trainers.grpo", own, COMMON_TRL_OPTIONS))
        return 0
    config, model_args = parser.parse_args_and_config(args=args)
    try:
        model, tokenizer = load_model(model_args.model_name_or_path or TINY_MODEL, model_args.dtype)
    except ModelNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from exc
    trainer = build_trainer(config, model, tokenizer, peft_config=get_peft_config(model_args))
    save_effective_config(config, model_args, args)
    try:
        trainer.train()
        trainer.save_model(config.output_dir)
    except TooManyInfraErrors as exc:
        raise SystemExit(f"error: {exc}\n  the model was not saved to {config.output_dir}") from exc
    finally:
        trainer.rollouts.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
