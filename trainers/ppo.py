"""PPO for multi-turn tool-using agents, on the project's rollout engine (TRL 1.16 has no PPO trainer).

One update: roll out a batch of episodes with :class:`~trainers.rollout.RolloutEngine`, drop the ones an
infrastructure fault ended, score them once with the policy as it was at collection time (logprobs and
values) and with the frozen reference, compute turn-level GAE advantages, then run a few epochs of
minibatch steps on the clipped PPO objective. Every term of the loss reads agent tokens only
(``env_mask`` 1): hidden states are gathered at the positions that predict agent tokens before the LM
head and the value head run, so prompt, template and observation positions get exactly zero gradient.

Design choices:

* **Value head on the shared trunk.** A linear head on the policy's last hidden state, not a separate
  critic: one forward pass gives logits and values, and no second network has to fit in memory (this
  trainer's default runs on a CPU). The head starts at zero, so early value-loss gradients do not push
  the trunk around, and ``vf_coef`` bounds its pull afterwards.
* **Turn-level GAE.** An agent turn is one step of the MDP: its state is the context before the turn, its
  action the turn's tokens. The value of a turn is the value at its *first* agent token, which is read
  from the hidden state that predicts that token, so it sees the whole history and none of the turn's own
  action. The episode's reward arrives after the last turn; the episode's end is terminal (the env's
  turn limit is part of the task and it scores truncated episodes itself). Each turn's advantage and
  return are broadcast to all of its tokens; the value loss regresses every agent token's value on its
  turn's return.
* **Losses.** Token-mean over the minibatch's agent tokens of: the clipped policy surrogate, the clipped
  value loss, ``kl_coef`` times the K3 estimator ``exp(ref - logp) - (ref - logp) - 1`` of the KL to the
  frozen reference, and minus ``entropy_coef`` times the entropy. Logprobs, entropy and KL are of the
  tempered distribution the episodes were sampled from.
* **PPO-EWMA** (Hilton et al., 2021, "Batch size-invariance for policy optimization"). With ``ppo_ewma``
  the ratio is taken against a proximal policy whose weights are an exponential moving average of the
  policy's (updated after every optimiser step), and each token's surrogate is weighted by
  ``pi_prox / pi_old`` to correct for the episodes having been sampled by the policy at collection time.
  Without it the proximal policy *is* that policy and the weight is 1: plain PPO.
* **Off-policy overlap** (``overlap_rollouts``). The next update's episodes are rolled out in a background
  thread by a snapshot of the policy (copied once, refreshed between updates) while this update trains,
  so they were sampled by the policy one update old. The loss is then decoupled PPO: the ratio is taken
  against the policy at the start of the update (or the EWMA policy) and each token is weighted by
  ``pi_prox / pi_behaviour``, the behaviour being the sampling logprobs the episodes carry. A batch more
  than ``max_staleness`` updates old is rolled out again.
* The policy is kept in eval mode (dropout off): dropout would make the ratio noisy for no benefit here.

Example:
    python -m trainers.ppo --config trainers/configs/ppo_tiny_cpu.yaml
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from tasks import Task, load_split
from trainers.generation import TransformersGenerator
from trainers.infra_guard import InfraErrorGuard, TooManyInfraErrors
from trainers.model_path import ModelNotFoundError, check_model_path
from trainers.overlap import PolicySnapshot, RolloutBatch, RolloutPrefetch
from trainers.ppo_config import PPOConfig
from trainers.rollout import (
    EnvPool,
    Episode,
    EpisodeRequest,
    RolloutConfig,
    RolloutEngine,
    group_requests,
    make_env_factory,
)
from trainers.scoring import token_logprobs

logger = logging.getLogger(__name__)

VALUE_HEAD_FILE = "value_head.pt"
"""File name of the value head's state dict in the output folder."""


# --- Turn-level advantages --------------------------------------------------------------------------------------


def turn_gae(rewards: Sequence[float], values: Sequence[float], gamma: float, lam: float,
             ) -> tuple[list[float], list[float]]:
    """Generalised advantage estimation over the turns of one episode, which ends after its last turn.

    ``delta_k = r_k + gamma * V_{k+1} - V_k`` with ``V_K = 0`` (terminal), ``A_k = delta_k + gamma * lam * A_{k+1}``,
    and the return target ``R_k = A_k + V_k``.

    Args:
        rewards: Reward after each turn (for an outcome reward: zeros, then the reward after the last turn).
        values: Value of each turn's state.
        gamma: Discount per turn.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, one per turn.

    Example:
        >>> turn_gae([0.0, 1.0], [0.5, 0.5], gamma=1.0, lam=1.0)
        ([0.5, 0.5], [1.0, 1.0])
    """
    if len(rewards) != len(values):
        raise ValueError(f"turn_gae: expected one value per reward, got {len(values)} values for {len(rewards)} "
                         "rewards")
    advantages = [0.0] * len(rewards)
    running, next_value = 0.0, 0.0
    for k in reversed(range(len(rewards))):
        delta = rewards[k] + gamma * next_value - values[k]
        running = delta + gamma * lam * running
        advantages[k], next_value = running, values[k]
    return advantages, [advantage + value for advantage, value in zip(advantages, values, strict=True)]


def turn_lengths(episode: Episode) -> list[int]:
    """Generated tokens of each turn that produced any (a turn with no tokens has nothing to learn from)."""
    return [turn.length for turn in episode.turns if turn.length > 0]


def episode_targets(episode: Episode, token_values: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Turn-level GAE for one episode, broadcast to its agent tokens.

    Args:
        episode: The episode (its reward arrives after its last turn).
        token_values: Value at each agent token, in order (the first token of a turn gives the turn's value).
        gamma: Discount per turn.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)`` per agent token.

    Raises:
        ValueError: The turns' lengths do not add up to the episode's agent tokens.
    """
    lengths = turn_lengths(episode)
    if sum(lengths) != token_values.numel():
        raise ValueError(f"episode {episode.task_id}: expected its turns to cover its {token_values.numel()} agent "
                         f"tokens (env_mask 1), got turns of {lengths} tokens")
    firsts = torch.tensor([0, *lengths[:-1]]).cumsum(0)
    rewards = [0.0] * (len(lengths) - 1) + [episode.reward]
    advantages, returns = turn_gae(rewards, token_values[firsts].tolist(), gamma, lam)
    repeats = torch.tensor(lengths)
    return torch.tensor(advantages).repeat_interleave(repeats), torch.tensor(returns).repeat_interleave(repeats)


def sampling_logprobs(episode: Episode) -> Tensor:
    """The logprobs the generator reported for the episode's agent tokens."""
    return torch.tensor(episode.logprobs)[torch.tensor(episode.env_mask, dtype=torch.bool)]


def whiten(values: Tensor, eps: float = 1e-8) -> Tensor:
    """Shift to mean 0 and scale to std 1 (a single value becomes 0)."""
    centred = values - values.mean()
    return centred / (centred.std(unbiased=False) + eps)


# --- Batching and scoring ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenBatch:
    """Right-padded episodes, with the positions whose next token is an agent token.

    Attributes:
        input_ids: ``(B, L)`` prompt and completion ids.
        attention_mask: ``(B, L)``, 1 on real tokens.
        agent_positions: ``(B, L - 1)`` bool: position ``t`` predicts token ``t + 1``, which has ``env_mask`` 1.
        targets: ``(N,)`` the agent tokens, row by row (the order of ``hidden[agent_positions]``).
    """

    input_ids: Tensor
    attention_mask: Tensor
    agent_positions: Tensor
    targets: Tensor


def collate(episodes: Sequence[Episode], pad_token_id: int, device: torch.device | str = "cpu") -> TokenBatch:
    """Pad ``episodes`` into one :class:`TokenBatch` on ``device``.

    Each episode is cut after its last agent token: what follows (the closing template, an observation no
    turn answered) cannot change an agent token's logits in a causal model.
    """
    lengths = [len(episode.prompt_ids) + scored_completion_length(episode) for episode in episodes]
    input_ids = torch.full((len(episodes), max(lengths)), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    agent_positions = torch.zeros((len(episodes), max(lengths) - 1), dtype=torch.bool)
    for row, (episode, length) in enumerate(zip(episodes, lengths, strict=True)):
        prompt = len(episode.prompt_ids)
        input_ids[row, :length] = torch.tensor((episode.prompt_ids + episode.completion_ids)[:length])
        attention_mask[row, :length] = 1
        agent_positions[row, prompt - 1:length - 1] = torch.tensor(episode.env_mask[:length - prompt], dtype=torch.bool)
    targets = input_ids[:, 1:][agent_positions]
    return TokenBatch(input_ids.to(device), attention_mask.to(device), agent_positions.to(device), targets.to(device))


def scored_completion_length(episode: Episode) -> int:
    """Completion tokens through the last agent token (0 when there is none)."""
    return max((index + 1 for index, mask in enumerate(episode.env_mask) if mask), default=0)


def agent_hidden_states(model: nn.Module, batch: TokenBatch) -> Tensor:
    """The causal LM's last hidden states at the positions that predict agent tokens: ``(N, H)``."""
    hidden = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                 use_cache=False).last_hidden_state
    return hidden[:, :-1][batch.agent_positions]


def policy_logprobs(model: nn.Module, batch: TokenBatch, temperature: float) -> Tensor:
    """Logprobs of the agent tokens under a causal LM (the reference or the EWMA policy)."""
    logits = model.get_output_embeddings()(agent_hidden_states(model, batch))
    return token_logprobs(logits, batch.targets, temperature)[0]


class ActorCritic(nn.Module):
    """A causal LM with a linear value head on its last hidden state (shared trunk).

    Args:
        model: The causal LM (the policy).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        parameter = next(model.parameters())
        self.value_head = nn.Linear(model.config.get_text_config().hidden_size, 1, device=parameter.device)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def forward(self, batch: TokenBatch) -> tuple[Tensor, Tensor]:
        """Logits ``(N, V)`` and values ``(N,)`` at the positions that predict agent tokens."""
        hidden = agent_hidden_states(self.model, batch)
        return self.model.get_output_embeddings()(hidden), self.value_head(hidden.float()).squeeze(-1)


# --- Loss -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenTerms:
    """Per agent token of a minibatch, everything the PPO loss needs (all ``(N,)``).

    Attributes:
        logprobs: Under the current policy (with gradient).
        entropy: Of the current policy (with gradient).
        values: Of the current value head (with gradient).
        old_logprobs: Under the policy that sampled the tokens (the behaviour policy).
        proximal_logprobs: Under the proximal policy (unless PPO-EWMA, the policy at the start of the update: with
            on-policy rollouts, ``old_logprobs``).
        ref_logprobs: Under the frozen reference, or None without a KL term.
        old_values: Values at collection time.
        advantages: Turn-level advantages broadcast to tokens.
        returns: Turn-level return targets broadcast to tokens.
    """

    logprobs: Tensor
    entropy: Tensor
    values: Tensor
    old_logprobs: Tensor
    proximal_logprobs: Tensor
    ref_logprobs: Tensor | None
    old_values: Tensor
    advantages: Tensor
    returns: Tensor


def k3_kl(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Per-token K3 estimator of KL(policy || reference): ``exp(ref - logp) - (ref - logp) - 1`` (always >= 0)."""
    delta = ref_logprobs - logprobs
    return delta.exp() - delta - 1


def ppo_loss(terms: TokenTerms, config: PPOConfig) -> tuple[Tensor, dict[str, float]]:
    """The PPO loss, a token mean over the minibatch's agent tokens, and its statistics.

    Args:
        terms: Per-token inputs.
        config: Clip ranges and coefficients.

    Returns:
        ``(loss, metrics)``.
    """
    ratio = (terms.logprobs - terms.proximal_logprobs).exp()
    behaviour_weight = (terms.proximal_logprobs - terms.old_logprobs).exp()
    clipped_ratio = ratio.clamp(1 - config.cliprange, 1 + config.cliprange)
    surrogate = torch.minimum(ratio * terms.advantages, clipped_ratio * terms.advantages)
    policy_loss = -(behaviour_weight * surrogate).mean()
    value_step = terms.values - terms.old_values
    clipped_values = terms.old_values + value_step.clamp(-config.cliprange_value, config.cliprange_value)
    value_loss = 0.5 * torch.maximum((terms.values - terms.returns) ** 2, (clipped_values - terms.returns) ** 2).mean()
    entropy = terms.entropy.mean()
    loss = policy_loss + config.vf_coef * value_loss - config.entropy_coef * entropy
    metrics = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
               "clip_fraction": (ratio != clipped_ratio).float().mean().item(),
               "value_clip_fraction": (value_step.abs() > config.cliprange_value).float().mean().item(),
               "approx_kl": ((ratio - 1) - ratio.log()).mean().item(),
               "behaviour_weight_max": behaviour_weight.max().item()}
    if terms.ref_logprobs is not None:
        kl = k3_kl(terms.logprobs, terms.ref_logprobs)
        loss = loss + config.kl_coef * kl.mean()
        metrics |= {"kl_ref": kl.mean().item(), "kl_ref_max": kl.max().item()}
    metrics["loss"] = loss.item()
    return loss, metrics


# --- Trainer ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutTargets:
    """Per kept episode, per agent token: what the update's minibatches compare against (all on CPU).

    ``old_logprobs`` are the policy's at the start of the update; ``behaviour_logprobs`` those the episodes were
    sampled with, when that was an older policy (overlap), else None (the same policy).
    """

    old_logprobs: list[Tensor]
    old_values: list[Tensor]
    ref_logprobs: list[Tensor] | None
    advantages: list[Tensor]
    returns: list[Tensor]
    behaviour_logprobs: list[Tensor] | None = None


class PPOTrainer:
    """Rolls out episodes and updates the policy and its value head with PPO.

    Args:
        config: Settings.
        model: The policy, a causal LM (trained in place).
        tokenizer: Its tokenizer.
        engine: Rollout engine; by default one over ``config.env_id`` envs, generating with ``model``.
        tasks: Tasks to train on; by default the bundled ``config.split`` of the env (from
            ``config.env_kwargs["splits_dir"]`` when set, as the env loads it).

    Example:
        >>> trainer = PPOTrainer(PPOConfig(max_steps=1), *load_policy(None))   # doctest: +SKIP
        >>> history = trainer.train()                                        # doctest: +SKIP
    """

    def __init__(self, config: PPOConfig, model: nn.Module, tokenizer, *, engine: RolloutEngine | None = None,
                 tasks: Sequence[Task] | None = None) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.tokenizer = tokenizer
        self.policy = ActorCritic(model.to(self.device)).eval()
        self.reference = frozen_copy(model) if config.kl_coef > 0 else None
        self.ewma = frozen_copy(model) if config.ppo_ewma else None
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=config.learning_rate,
                                           weight_decay=config.weight_decay)
        self.snapshot, self.prefetch = None, None
        if config.overlap_rollouts:
            if engine is not None:
                raise ValueError("PPOTrainer: expected no engine= with overlap_rollouts (the trainer builds one that "
                                 "generates with its snapshot of the policy)")
            self.snapshot, self.prefetch = PolicySnapshot(model), RolloutPrefetch()
            engine = make_engine(config, self.snapshot.model, tokenizer)
        self.engine = engine if engine is not None else make_engine(config, model, tokenizer)
        self.tasks = list(tasks) if tasks is not None else load_split(
            task_env_name(config.env_id), config.split, splits_dir=config.env_kwargs.get("splits_dir"))
        random.Random(config.seed).shuffle(self.tasks)
        self._shuffle = torch.Generator().manual_seed(config.seed)
        self.infra_guard = InfraErrorGuard(config.infra_error_stop_share, config.infra_error_window)

    def train(self, on_update: Callable[[int, dict[str, float]], None] | None = None) -> list[dict[str, float]]:
        """Run ``config.max_steps`` updates, each on a fresh batch of rollouts.

        Args:
            on_update: Called with the step and its metrics after every update (logging, monitoring).

        Returns:
            The metrics of every update.

        Raises:
            TooManyInfraErrors: Too many episodes ended by an infrastructure fault (``infra_error_stop_share``).
        """
        history = []
        for step in range(self.config.max_steps):
            batch = self._rollouts_overlapped(step) if self.prefetch is not None else self._rollouts(step)
            self.infra_guard.observe(batch.episodes, step=step)
            metrics = self.update(batch.episodes, stale=batch.version < step)
            metrics |= batch.metrics(step, overlapped=self.prefetch is not None)
            history.append(metrics)
            if on_update is not None:
                on_update(step, metrics)
        return history

    def _rollouts(self, step: int) -> RolloutBatch:
        """Roll out update ``step``'s episodes now, with the policy as it is (through the snapshot, if any)."""
        if self.snapshot is not None:
            self.snapshot.refresh(self.policy.model, step)
        max_turns = self.config.max_turns_at(step)
        return RolloutBatch(self.engine.run(self.requests(step), max_turns=max_turns), version=step,
                            max_turns=max_turns)

    def _rollouts_overlapped(self, step: int) -> RolloutBatch:
        """The episodes rolled out in the background during the last update, or (none, or more than
        ``max_staleness`` updates old) rolled out now; then the next update's start in the background, by the
        snapshot refreshed with the weights as they are now (no update is running)."""
        batch = self.prefetch.take()
        if batch is None or step - batch.version > self.config.max_staleness:
            batch = dataclasses.replace(self._rollouts(step), regenerated=batch is not None)
        if step + 1 < self.config.max_steps:
            self.snapshot.refresh(self.policy.model, step)
            requests, max_turns = self.requests(step + 1), self.config.max_turns_at(step + 1)
            self.prefetch.start(lambda: self.engine.run(requests, max_turns=max_turns), version=step,
                                max_turns=max_turns)
        return batch

    def requests(self, step: int) -> list[EpisodeRequest]:
        """The episodes of update ``step``: the next ``tasks_per_step`` tasks of the shuffled list, cycling."""
        if not self.tasks:
            raise ValueError("PPOTrainer: expected tasks to roll out, got none; pass tasks= or a split that has some")
        count = self.config.tasks_per_step
        chosen = [self.tasks[(step * count + i) % len(self.tasks)] for i in range(count)]
        return group_requests([(self.config.env_id, task) for task in chosen], self.config.episodes_per_task,
                              seed=self.config.seed + step * count * self.config.episodes_per_task)

    def update(self, episodes: Sequence[Episode], *, stale: bool = False) -> dict[str, float]:
        """One PPO update on a batch of rollouts; infra-error episodes and episodes without agent tokens are dropped.

        Args:
            episodes: The batch.
            stale: They were sampled by an older policy (overlap): their sampling logprobs are the behaviour
                policy's, and each token is weighted by ``pi_prox / pi_behaviour``.

        Returns:
            Averages over the update's optimiser steps, and statistics of the batch (``rollout_logprob_gap``: mean
            absolute difference between the sampling logprobs and the trainer's, a train/inference mismatch check).
        """
        kept = [episode for episode in episodes if not episode.infra_error and any(episode.env_mask)]
        metrics = {"episodes": float(len(kept)), "episodes_dropped": float(len(episodes) - len(kept))}
        if not kept:
            logger.warning("PPO update skipped: every episode of the batch was dropped (infra errors or empty)")
            return metrics
        targets, batch_metrics = self._targets(kept, stale=stale)
        steps = [self._step(kept, targets, minibatch) for _ in range(self.config.num_ppo_epochs)
                 for minibatch in self._minibatches(len(kept))]
        return metrics | batch_metrics | {key: sum(step[key] for step in steps) / len(steps) for key in steps[0]}

    def _minibatches(self, count: int) -> list[list[int]]:
        order = torch.randperm(count, generator=self._shuffle).tolist()
        size = self.config.minibatch_size
        return [sorted(order[start:start + size]) for start in range(0, count, size)]

    @torch.no_grad()
    def _score(self, episodes: Sequence[Episode]) -> tuple[list[Tensor], list[Tensor], list[Tensor] | None]:
        """Per episode, per agent token: logprobs and values of the policy at collection time, reference logprobs."""
        old_logprobs, old_values, ref_logprobs = [], [], []
        for start in range(0, len(episodes), self.config.minibatch_size):
            chunk = episodes[start:start + self.config.minibatch_size]
            batch = collate(chunk, self.tokenizer.pad_token_id, self.device)
            counts = [sum(episode.env_mask) for episode in chunk]
            logits, values = self.policy(batch)
            old_logprobs += token_logprobs(logits, batch.targets, self.config.temperature)[0].cpu().split(counts)
            old_values += values.cpu().split(counts)
            if self.reference is not None:
                ref_logprobs += policy_logprobs(self.reference, batch, self.config.temperature).cpu().split(counts)
        return old_logprobs, old_values, ref_logprobs if self.reference is not None else None

    def _targets(self, episodes: Sequence[Episode], *, stale: bool = False) -> tuple[RolloutTargets, dict[str, float]]:
        """Score the episodes and compute their turn-level advantages; also statistics of the batch."""
        old_logprobs, old_values, ref_logprobs = self._score(episodes)
        gae = [episode_targets(episode, values, self.config.gamma, self.config.lam)
               for episode, values in zip(episodes, old_values, strict=True)]
        raw_advantages = torch.cat([advantages for advantages, _ in gae])
        advantages = whiten(raw_advantages) if self.config.whiten_advantages else raw_advantages
        behaviour = [sampling_logprobs(episode) for episode in episodes]
        targets = RolloutTargets(old_logprobs, old_values, ref_logprobs,
                                 list(advantages.split([len(a) for a, _ in gae])), [returns for _, returns in gae],
                                 behaviour_logprobs=behaviour if stale else None)
        sampled = torch.cat(behaviour)
        return targets, {"reward_mean": sum(episode.reward for episode in episodes) / len(episodes),
                         "agent_tokens": float(len(raw_advantages)),
                         "advantage_mean": raw_advantages.mean().item(),
                         "value_mean": torch.cat(old_values).mean().item(),
                         "rollout_logprob_gap": (sampled - torch.cat(old_logprobs)).abs().mean().item()}

    def _step(self, episodes: Sequence[Episode], targets: RolloutTargets, rows: list[int]) -> dict[str, float]:
        """One optimiser step on the episodes ``rows``."""
        batch = collate([episodes[row] for row in rows], self.tokenizer.pad_token_id, self.device)
        logits, values = self.policy(batch)
        logprobs, entropy = token_logprobs(logits, batch.targets, self.config.temperature)

        def pick(tensors: list[Tensor]) -> Tensor:
            return torch.cat([tensors[row] for row in rows]).to(self.device)

        old_logprobs = pick(targets.old_logprobs)
        behaviour = old_logprobs if targets.behaviour_logprobs is None else pick(targets.behaviour_logprobs)
        terms = TokenTerms(logprobs=logprobs, entropy=entropy, values=values, old_logprobs=behaviour,
                           proximal_logprobs=self._proximal_logprobs(batch, old_logprobs),
                           ref_logprobs=pick(targets.ref_logprobs) if targets.ref_logprobs is not None else None,
                           old_values=pick(targets.old_values), advantages=pick(targets.advantages),
                           returns=pick(targets.returns))
        loss, metrics = ppo_loss(terms, self.config)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        self._update_ewma()
        return metrics | {"grad_norm": grad_norm.item()}

    def _proximal_logprobs(self, batch: TokenBatch, old_logprobs: Tensor) -> Tensor:
        if self.ewma is None:
            return old_logprobs
        with torch.no_grad():
            return policy_logprobs(self.ewma, batch, self.config.temperature)

    @torch.no_grad()
    def _update_ewma(self) -> None:
        if self.ewma is None:
            return
        for average, current in zip(self.ewma.parameters(), self.policy.model.parameters(), strict=True):
            average.lerp_(current, 1 - self.config.ewma_decay)

    def save(self, output_dir: str | Path | None = None) -> Path:
        """Save the policy, tokenizer, value head (``value_head.pt``) and config (``ppo_config.json``)."""
        directory = Path(output_dir or self.config.output_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.policy.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        torch.save(self.policy.value_head.state_dict(), directory / VALUE_HEAD_FILE)
        (directory / "ppo_config.json").write_text(json.dumps(dataclasses.asdict(self.config), indent=2))
        return directory

    def close(self) -> None:
        """Wait for episodes still rolling out in the background (the thread ends), then close the environments."""
        try:
            if self.prefetch is not None:
                self.prefetch.close()
        finally:
            self.engine.envs.close()


# --- Set-up -----------------------------------------------------------------------------------------------------


def resolve_device(name: str) -> torch.device:
    """``"auto"`` is CUDA when available, else CPU; any other name is taken as is."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def frozen_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode with no gradients (the reference, or the EWMA policy's start)."""
    frozen = copy.deepcopy(model).eval()
    frozen.requires_grad_(False)
    return frozen


def task_env_name(env_id: str) -> str:
    """The bundled-split name of an env id: ``"agentrl/Search-v0"`` gives ``"Search"``."""
    return env_id.rsplit("/", 1)[-1].rsplit("-v", 1)[0]


def make_engine(config: PPOConfig, model: nn.Module, tokenizer) -> RolloutEngine:
    """A rollout engine generating with ``model`` in ``config.env_id`` envs of ``config.split``."""
    import agentgym_envs  # noqa: F401  (registers the agentrl/ ids)

    rollout = RolloutConfig(max_turns=config.max_turns, max_tokens_per_turn=config.max_tokens_per_turn,
                            max_context_tokens=config.max_context_tokens, temperature=config.temperature)
    envs = EnvPool(make_env_factory({config.env_id: {"split": config.split, **config.env_kwargs}},
                                    workers=config.env_workers, ray_address=config.ray_address))
    return RolloutEngine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, envs, rollout)


def load_policy(model_name_or_path: str | None):
    """The policy and its tokenizer: the tiny default model for None, else ``from_pretrained``.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ModelNotFoundError: ``model_name_or_path`` is a local path that does not exist
            (:func:`trainers.model_path.check_model_path`).
    """
    if model_name_or_path is None:
        from trainers.tiny_model import load_or_build_tiny_model

        return load_or_build_tiny_model()
    check_model_path(model_name_or_path)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model_name_or_path), AutoTokenizer.from_pretrained(model_name_or_path)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.ppo --config <yaml>``: train with PPO, log each update's metrics, save the policy.

    Exits with status 1 and the reason, saving nothing, when the model path does not exist or too many episodes
    ended by an infrastructure fault (``infra_error_stop_share``).
    """
    from trl import TrlParser

    (config,) = TrlParser((PPOConfig,)).parse_args_and_config(args=list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.manual_seed(config.seed)
    try:
        policy = load_policy(config.model_name_or_path)
    except ModelNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from exc
    trainer = PPOTrainer(config, *policy)
    try:
        trainer.train(on_update=lambda step, metrics: logger.info("step %d %s", step, json.dumps(metrics)))
    except TooManyInfraErrors as exc:
        raise SystemExit(f"error: {exc}\n  the model was not saved to {config.output_dir}") from exc
    finally:
        trainer.close()
    logger.info("saved to %s", trainer.save())
    return 0


if __name__ == "__main__":
    sys.exit(main())
