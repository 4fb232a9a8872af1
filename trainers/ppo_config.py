"""Settings of :mod:`trainers.ppo`: one dataclass, parsed from YAML and the command line by ``trl.TrlParser``.

Example:
    python -m trainers.ppo --config trainers/configs/ppo_tiny_cpu.yaml --max_steps 4
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainers.horizon import HorizonSchedule


@dataclass
class PPOConfig:
    """Everything a PPO run needs: model, environment, rollout limits, PPO and optimiser settings.

    Every field carries its help text in ``metadata["help"]`` (shown by ``python -m trainers.ppo --help``).
    """

    # Model and output.
    model_name_or_path: str | None = field(default=None, metadata={
        "help": "Hub id or local folder of a causal LM; None builds (or loads) the tiny default model."})
    output_dir: str = field(default="outputs/ppo-tiny", metadata={
        "help": "Where the policy, its tokenizer, the value head and this config are saved at the end."})
    device: str = field(default="auto", metadata={
        "help": "Torch device: 'auto' (CUDA when available, else CPU), 'cpu', 'cuda', 'cuda:1', ..."})
    seed: int = field(default=0, metadata={
        "help": "Seed of task order, env resets, minibatch shuffling and (in the CLI) torch sampling."})

    # Environment and tasks.
    env_id: str = field(default="agentrl/Search-v0", metadata={"help": "Registry id of the environment."})
    split: str = field(default="train", metadata={
        "help": "Bundled task split to train on (also passed to gym.make as split=)."})
    env_kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Further keyword arguments of gym.make, e.g. {sandbox: bwrap} (set it in the YAML file: the "
                "command line cannot parse a mapping)."})
    env_workers: str = field(default="local", metadata={
        "help": "Where the environments run: 'local' (this process's threads) or 'ray' (one Ray actor per env, "
                "agentgym_envs.ray_workers; needs the ray extra)."})
    ray_address: str | None = field(default=None, metadata={
        "help": "With env_workers 'ray': the address of the Ray cluster to join (None: Ray's default, a local one)."})

    # Rollouts.
    max_steps: int = field(default=2, metadata={"help": "PPO updates to run (one batch of rollouts each)."})
    tasks_per_step: int = field(default=4, metadata={"help": "Tasks rolled out per update."})
    episodes_per_task: int = field(default=1, metadata={
        "help": "Episodes per task per update (PPO needs no groups; more than 1 gives several samples per task)."})
    max_turns: int = field(default=3, metadata={"help": "Most model turns per episode."})
    max_turns_schedule: str | None = field(default=None, metadata={
        "help": "Horizon curriculum: the turn limit by update step as '<turns>@<step>,...', e.g. '5@0,10@20,15@40' "
                "(trainers.horizon); None: max_turns throughout. max_context_tokens still caps every episode."})
    max_tokens_per_turn: int = field(default=64, metadata={"help": "Most tokens generated in one turn."})
    max_context_tokens: int = field(default=2048, metadata={"help": "Prompt plus all turns, in tokens."})
    temperature: float = field(default=1.0, metadata={
        "help": "Sampling temperature; the trainer's logprobs, ratios, KL and entropy use the same tempered "
                "distribution."})

    # Advantages.
    gamma: float = field(default=0.99, metadata={"help": "Discount per agent turn (turn-level GAE)."})
    lam: float = field(default=0.95, metadata={"help": "GAE lambda over turns."})
    whiten_advantages: bool = field(default=True, metadata={
        "help": "Normalise advantages to mean 0, std 1 over the batch's agent tokens."})

    # PPO losses.
    num_ppo_epochs: int = field(default=2, metadata={"help": "Passes over each batch of rollouts."})
    minibatch_size: int = field(default=2, metadata={"help": "Episodes per optimiser step."})
    cliprange: float = field(default=0.2, metadata={"help": "Clip range of the policy ratio."})
    cliprange_value: float = field(default=0.2, metadata={
        "help": "Clip range of the value update around the values at collection time."})
    vf_coef: float = field(default=0.1, metadata={"help": "Weight of the value loss."})
    kl_coef: float = field(default=0.05, metadata={
        "help": "Weight of the per-token K3 KL to the frozen reference policy; 0 keeps no reference model."})
    entropy_coef: float = field(default=0.001, metadata={"help": "Weight of the entropy bonus."})
    ppo_ewma: bool = field(default=False, metadata={
        "help": "PPO-EWMA (Hilton et al., 2021): the proximal policy of the clipped ratio is an exponential moving "
                "average of the policy's weights, not the policy at collection time."})
    ewma_decay: float = field(default=0.9, metadata={
        "help": "Decay of the PPO-EWMA average per optimiser step (the weight kept of the old average)."})

    # Optimiser.
    learning_rate: float = field(default=1e-4, metadata={"help": "AdamW learning rate."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip per optimiser step."})

    def max_turns_at(self, step: int) -> int:
        """The turn limit of update ``step``'s rollouts: the horizon schedule's, else ``max_turns``."""
        if self.max_turns_schedule is None:
            return self.max_turns
        return HorizonSchedule.parse(self.max_turns_schedule).max_turns(step)

    def __post_init__(self) -> None:
        _check_positive(self, ("max_steps", "tasks_per_step", "episodes_per_task", "max_turns",
                               "max_tokens_per_turn", "max_context_tokens", "num_ppo_epochs", "minibatch_size",
                               "temperature", "cliprange", "cliprange_value", "learning_rate", "max_grad_norm"))
        _check_non_negative(self, ("vf_coef", "kl_coef", "entropy_coef", "weight_decay"))
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"PPOConfig.gamma: expected 0 < gamma <= 1 (typically 0.95-0.99), got {self.gamma}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"PPOConfig.lam: expected 0 <= lam <= 1 (typically 0.95), got {self.lam}")
        if not 0.0 <= self.ewma_decay < 1.0:
            raise ValueError(f"PPOConfig.ewma_decay: expected 0 <= ewma_decay < 1 (e.g. 0.9), got {self.ewma_decay}; "
                             "set ppo_ewma: false to use the policy at collection time instead")
        if self.minibatch_size > self.tasks_per_step * self.episodes_per_task:
            raise ValueError(f"PPOConfig.minibatch_size: expected at most tasks_per_step * episodes_per_task = "
                             f"{self.tasks_per_step * self.episodes_per_task} episodes per update, got "
                             f"{self.minibatch_size}; lower minibatch_size or roll out more episodes")
        if self.max_turns_schedule is not None:
            HorizonSchedule.parse(self.max_turns_schedule)
        if self.env_workers not in ("local", "ray"):
            raise ValueError(f"PPOConfig.env_workers: expected 'local' or 'ray', got {self.env_workers!r}")
        if "split" in self.env_kwargs:
            raise ValueError("PPOConfig.env_kwargs: expected no 'split' key (the split field sets it), got "
                             f"{self.env_kwargs}; move it to split:")


def _check_positive(config: PPOConfig, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if value <= 0:
            raise ValueError(f"PPOConfig.{name}: expected > 0, got {value}")


def _check_non_negative(config: PPOConfig, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if value < 0:
            raise ValueError(f"PPOConfig.{name}: expected >= 0 (0 turns the term off), got {value}")
