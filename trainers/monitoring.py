"""Rollout monitoring beyond means: tools, tails, turn types, mismatch, alerts.

:class:`RolloutMonitor` watches every batch of episodes and, at each log step, hands the trainer a
flat dict of metrics (logged through TRL's reporting: TensorBoard, trackio, W&B) and appends the same
record, with any alerts, to a plain JSONL file:

=============================  ==================================================================
metric                         meaning
=============================  ==================================================================
``tools/<env>/<tool>/calls``   calls per episode; ``.../failure_rate`` share of failed calls
``episodes/turns_*``           turn-count mean, p50, max; ``episodes/stop/<reason>`` shares
``episodes/gen_tokens_*``      generated tokens per episode: mean, p90, max
``reward/<env>/mean``          raw environment reward
``groups/zero_variance``       share of groups whose rewards are all equal (no GRPO signal)
``episodes/infra_error``       share of episodes ended by an infrastructure fault
``turns/after_tool/*``         turns right after a tool result vs ``turns/first/*``: ok rate,
                               tokens, mean sampled logprob
``mismatch/*``                 sampler vs trainer on the sampled tokens: p99 importance ratio,
                               max per-token K3 KL, effective sample size of the weights (with
                               off-policy overlap: the stale snapshot vs the policy being trained)
``rollout/*``                  what the trainer reports about each batch (``batch_metrics``): the turn
                               limit ``max_turns`` (horizon curriculum), ``staleness`` (overlap)
=============================  ==================================================================

Per-batch values are averaged over the batches of a log step, except those whose name holds ``max`` or
``p99`` (their largest is kept).

Alerts (logged as warnings and written to the JSONL file):

* ``tool_under_use``: a tool an environment's tasks need is called in fewer than ``min_required_tool_rate``
  of its scored episodes;
* ``reward_spike``: the batch reward jumps more than ``spike_z`` standard deviations above its running
  average (a symptom of reward hacking);
* ``infra_errors``: more than ``infra_alert_share`` of a batch's episodes ended by an infrastructure fault
  (the message quotes the first; the trainers stop at ``infra_error_stop_share``, :mod:`trainers.infra_guard`);
* ``context_budget``: more than ``context_alert_share`` of an environment's episodes in a batch ended because the
  next turn did not fit ``max_context_tokens`` (stop reason ``context``); the message counts them per env and
  says which settings to change. Such episodes are cut before they could answer, so they score as failures.
* ``zero_variance_streak``: every group of ``zero_variance_steps`` batches in a row had equal rewards, so
  GRPO's advantages and gradient are 0 (a policy that never solves a task, typically one never
  warm-started; the message says how to warm-start). Once per streak.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainers.infra_guard import INFRA_HINT, first_infra_error, infra_share
from trainers.rollout import Episode

logger = logging.getLogger(__name__)

WARM_START_HINT = (
    "the policy solves none (or every one) of its tasks. A model never warm-started does not answer: warm-start "
    "it with SFT on demonstrations, `python -m trainers.sft --config trainers/configs/sft_tiny_cpu.yaml`, then "
    "train from it with `--model_name_or_path runs/sft-tiny`; or run the main job, `python -m trainers.pipeline` "
    "(the tiny model's pretraining, demonstrations, SFT, then GRPO). A warm-started one needs easier tasks (a "
    "curriculum `sampler`) or more episodes per group (`num_generations`)")
"""How to give GRPO a policy whose groups differ in reward (the commands of docs/training.md)."""


class RolloutMonitor:
    """Gathers rollout metrics between log steps.

    Args:
        log_path: JSONL file to append one record per log step to (None: no file).
        required_tools: Per env id, the tools its tasks need (for the under-use alert).
        min_required_tool_rate: Alert when a required tool is called in fewer episodes than this share.
        spike_z: Alert when the batch reward exceeds its running mean by this many running stds.
        mismatch_every: Measure sampler/trainer mismatch every this many batches (0 = never); costs one
            forward pass over the batch.
        infra_alert_share: Alert when more than this share of a batch's episodes ended by an infrastructure fault.
        zero_variance_steps: Alert when every group of this many batches in a row had equal rewards (0 = never).
        context_alert_share: Alert when more than this share of an env's episodes in a batch ended at the context
            budget.
        max_context_tokens: The run's context budget, quoted by that alert (None: not quoted).
    """

    def __init__(self, log_path: str | Path | None = None, required_tools: Mapping[str, Sequence[str]] | None = None,
                 min_required_tool_rate: float = 0.1, spike_z: float = 4.0, mismatch_every: int = 1,
                 infra_alert_share: float = 0.25, zero_variance_steps: int = 3, context_alert_share: float = 0.1,
                 max_context_tokens: int | None = None) -> None:
        if zero_variance_steps < 0:
            raise ValueError(f"zero_variance_steps: expected >= 0 (0 = never alert), got {zero_variance_steps}")
        self.log_path = Path(log_path) if log_path else None
        self.required_tools = {env: tuple(tools) for env, tools in (required_tools or {}).items()}
        self.min_required_tool_rate = min_required_tool_rate
        self.spike_z = spike_z
        self.mismatch_every = mismatch_every
        self.infra_alert_share = infra_alert_share
        self.zero_variance_steps = zero_variance_steps
        self.context_alert_share = context_alert_share
        self.max_context_tokens = max_context_tokens
        self._zero_variance_streak = 0
        self._episodes: list[Episode] = []
        self._dropped = 0
        self._batch_metrics: list[dict[str, float]] = []  # mismatch measurements and the trainer's batch_metrics
        self._batches = 0
        self._reward_history: list[float] = []
        self.alerts: list[dict[str, Any]] = []

    def observe(self, episodes: Sequence[Episode], *, trainer: Any = None, dropped: Sequence[int] = (),
                batch_metrics: Mapping[str, float] | None = None) -> None:
        """Record one batch (and measure mismatch against ``trainer.model`` when due).

        Args:
            episodes: The batch.
            trainer: Its ``model`` is measured against the episodes' sampling logprobs (None: no measurement).
            dropped: Indices of the episodes kept out of the loss.
            batch_metrics: Further values describing the batch (e.g. ``rollout/max_turns``), logged as they are.
        """
        self._episodes.extend(episodes)
        self._dropped += len(dropped)
        self._batches += 1
        measured = dict(batch_metrics or {})
        if trainer is not None and self.mismatch_every and self._batches % self.mismatch_every == 0:
            measured |= mismatch_statistics(trainer.model, episodes)
        self._batch_metrics.append(measured)
        self._check_spike(episodes)
        self._check_infra(episodes)
        self._check_context(episodes)
        self._check_zero_variance(episodes)

    @property
    def pending(self) -> int:
        """Episodes observed since the last flush."""
        return len(self._episodes)

    def flush(self, step: int | None = None) -> dict[str, float]:
        """Metrics since the last flush (and write them, with new alerts, to the JSONL file)."""
        episodes, self._episodes = self._episodes, []
        metrics: dict[str, float] = {}
        if episodes:
            metrics |= tool_metrics(episodes) | episode_metrics(episodes) | turn_metrics(episodes)
            metrics["groups/dropped_from_loss"] = self._dropped / len(episodes)
            self._check_tool_use(episodes, step)
        for key in {key for record in self._batch_metrics for key in record}:
            values = [record[key] for record in self._batch_metrics if key in record]
            metrics[key] = float(np.max(values)) if "max" in key or "p99" in key else float(np.mean(values))
        self._batch_metrics, self._dropped = [], 0
        alerts, self.alerts = self.alerts, []
        self._write({"step": step, **metrics, "alerts": alerts})
        return metrics

    def _check_tool_use(self, episodes: Sequence[Episode], step: int | None) -> None:
        for env_id, tools in self.required_tools.items():
            mine = [episode for episode in episodes if episode.env_id == env_id and episode.scored]
            for tool in tools:
                rate = np.mean([any(call["name"] == tool for call in e.tool_calls) for e in mine]) if mine else None
                if rate is not None and rate < self.min_required_tool_rate:
                    self._alert("tool_under_use", f"{env_id}: {tool!r} called in {rate:.0%} of episodes "
                                f"(< {self.min_required_tool_rate:.0%}); the task needs it", step=step)

    def _check_spike(self, episodes: Sequence[Episode]) -> None:
        batch = float(np.mean([episode.reward for episode in episodes]))
        history = self._reward_history[-20:]
        if len(history) >= 5:
            mean, std = float(np.mean(history)), float(np.std(history))
            if batch > mean + self.spike_z * max(std, 0.02):
                self._alert("reward_spike", f"batch reward {batch:.3f} vs running {mean:.3f} ± {std:.3f}: "
                            "inspect the episodes for reward hacking", step=None)
        self._reward_history.append(batch)

    def _check_infra(self, episodes: Sequence[Episode]) -> None:
        share = infra_share(episodes)
        if share > self.infra_alert_share:
            self._alert("infra_errors", f"{share:.0%} of the batch's {len(episodes)} episodes ended by an "
                        f"infrastructure fault (> {self.infra_alert_share:.0%}); they teach nothing.\n"
                        f"  first fault: {first_infra_error(episodes)}\n  to fix: {INFRA_HINT}", step=None)

    def _check_context(self, episodes: Sequence[Episode]) -> None:
        """Alert when an env's episodes end at the context budget, with their counts per env."""
        counts = context_budget_counts(episodes)
        over = {env: (cut, total) for env, (cut, total) in counts.items() if cut > self.context_alert_share * total}
        if not over:
            return
        budget = f"max_context_tokens={self.max_context_tokens}" if self.max_context_tokens else "max_context_tokens"
        listed = ", ".join(f"{short_env_id(env)} {cut} of {total}" for env, (cut, total) in over.items())
        self._alert("context_budget", f"episodes ended because the next turn did not fit {budget}: {listed}; they "
                    "were cut before they could answer and score as failures. Raise max_context_tokens, or lower "
                    "max_turns or max_tokens_per_turn (the env's recipe in trainers/configs sizes them)", step=None)

    def _check_zero_variance(self, episodes: Sequence[Episode]) -> None:
        """Count batches in a row whose every group (of those with a scored episode) had equal rewards; alert
        when the streak reaches ``zero_variance_steps``. A batch with no scored episode leaves the streak as is."""
        zero, scored_groups = zero_variance_groups(episodes)
        if not scored_groups:
            return
        self._zero_variance_streak = self._zero_variance_streak + 1 if zero == scored_groups else 0
        if self.zero_variance_steps and self._zero_variance_streak == self.zero_variance_steps:
            self._alert("zero_variance_streak", f"every group of the last {self.zero_variance_steps} batches had "
                        "equal rewards (zero variance): GRPO's advantages and gradient are 0, nothing is learned; "
                        f"{WARM_START_HINT}", step=None)

    def _alert(self, kind: str, message: str, *, step: int | None) -> None:
        logger.warning("rollout alert (%s): %s", kind, message)
        self.alerts.append({"kind": kind, "message": message, "step": step})

    def _write(self, record: Mapping[str, Any]) -> None:
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")


def tool_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Calls per episode and failure rate of each tool, per env."""
    calls: Counter[tuple[str, str]] = Counter()
    failures: Counter[tuple[str, str]] = Counter()
    per_env = Counter(episode.env_id for episode in episodes)
    for episode in episodes:
        for call in episode.tool_calls:
            calls[episode.env_id, call["name"]] += 1
            failures[episode.env_id, call["name"]] += not call["ok"]
    metrics = {}
    for (env_id, tool), count in calls.items():
        key = f"tools/{short_env_id(env_id)}/{tool}"
        metrics[f"{key}/calls"] = count / per_env[env_id]
        metrics[f"{key}/failure_rate"] = failures[env_id, tool] / count
    return metrics


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Turn counts, generated lengths, stop reasons, rewards per env, zero-variance group share."""
    turns = np.array([len(episode.turns) for episode in episodes])
    generated = np.array([sum(episode.env_mask) for episode in episodes])
    metrics = {"episodes/turns_mean": float(turns.mean()), "episodes/turns_p50": float(np.median(turns)),
               "episodes/turns_max": float(turns.max()), "episodes/gen_tokens_mean": float(generated.mean()),
               "episodes/gen_tokens_p90": float(np.percentile(generated, 90)),
               "episodes/gen_tokens_max": float(generated.max()),
               "episodes/infra_error": float(np.mean([episode.infra_error for episode in episodes]))}
    for reason, count in Counter(episode.stop_reason for episode in episodes).items():
        metrics[f"episodes/stop/{reason}"] = count / len(episodes)
    rewards: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        rewards[episode.env_id].append(episode.reward)
    for env_id, values in rewards.items():
        metrics[reward_metric(env_id)] = float(np.mean(values))
    metrics["groups/zero_variance"] = float(np.mean(list(group_has_zero_variance(episodes).values())))
    return metrics


def context_budget_counts(episodes: Sequence[Episode]) -> dict[str, tuple[int, int]]:
    """Per env id: (episodes that ended at the context budget, episodes), over those with any."""
    totals = Counter(episode.env_id for episode in episodes)
    cut = Counter(episode.env_id for episode in episodes if episode.stop_reason == "context")
    return {env: (cut[env], totals[env]) for env in totals if cut[env]}


def carries_no_signal(rewards: Iterable[float | None]) -> bool:
    """Whether a GRPO group carries no signal: fewer than two distinct scored rewards (None: an infrastructure
    fault, no sample of the task). A group with a single scored episode counts too: TRL's advantage for it is 0
    whatever ``scale_rewards``. GRPO's zero-variance filter and the monitor both judge groups by this."""
    return len({reward for reward in rewards if reward is not None}) < 2


def group_has_zero_variance(episodes: Sequence[Episode]) -> dict[tuple[str, int], bool]:
    """Per ``(env_id, group)``: whether it carries no GRPO signal (:func:`carries_no_signal` of its rewards)."""
    groups: dict[tuple[str, int], list[float | None]] = defaultdict(list)
    for episode in episodes:
        groups[episode.env_id, episode.group].append(episode.reward if episode.scored else None)
    return {key: carries_no_signal(rewards) for key, rewards in groups.items()}


def zero_variance_groups(episodes: Sequence[Episode]) -> tuple[int, int]:
    """``(zero-variance groups, groups)`` among the groups with at least one scored episode."""
    scored = {(episode.env_id, episode.group) for episode in episodes if episode.scored}
    flags = [zero for key, zero in group_has_zero_variance(episodes).items() if key in scored]
    return sum(flags), len(flags)


def turn_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Turns right after a tool result against first turns: ok rate, tokens, mean sampled logprob."""
    metrics = {}
    for label, after_tool in (("after_tool", True), ("first", False)):
        turns = [(episode, turn) for episode in episodes for turn in episode.turns
                 if turn.after_tool_result == after_tool]
        if not turns:
            continue
        logprobs = [lp for episode, turn in turns for lp in episode.logprobs[turn.start:turn.start + turn.length]]
        metrics[f"turns/{label}/count"] = float(len(turns))
        metrics[f"turns/{label}/ok_rate"] = float(np.mean([turn.ok for _, turn in turns]))
        metrics[f"turns/{label}/tokens_mean"] = float(np.mean([turn.length for _, turn in turns]))
        metrics[f"turns/{label}/logprob_mean"] = float(np.mean(logprobs)) if logprobs else 0.0
    return metrics


def mismatch_statistics(model: Any, episodes: Sequence[Episode], batch_size: int = 8) -> dict[str, float]:
    """Sampler vs trainer on the sampled (``env_mask`` 1) tokens.

    Importance weight w = exp(logp_trainer - logp_sampler) per token. Reports its p99, the largest
    per-token K3 estimate of KL(sampler || trainer) (w - 1 - log w), and the effective sample size of
    the weights, (Σw)² / (n Σw²) (1 = no mismatch).
    """
    import torch

    log_ratios = []
    for start in range(0, len(episodes), batch_size):
        chunk = episodes[start:start + batch_size]
        trainer_logps = sequence_logprobs(model, chunk)
        for episode, logps in zip(chunk, trainer_logps, strict=True):
            mask = torch.tensor(episode.env_mask, dtype=torch.bool)
            sampled = torch.tensor(episode.logprobs)
            log_ratios.append((logps - sampled)[mask])
    if not log_ratios or not sum(len(r) for r in log_ratios):
        return {}
    log_w = torch.cat(log_ratios).double().clamp(-20, 20)
    weights = log_w.exp()
    k3 = weights - 1 - log_w
    ess = weights.sum() ** 2 / (len(weights) * (weights**2).sum())
    return {"mismatch/ratio_p99": float(torch.quantile(weights, 0.99)), "mismatch/k3_kl_max": float(k3.max()),
            "mismatch/k3_kl_mean": float(k3.mean()), "mismatch/ess": float(ess)}


def sequence_logprobs(model: Any, episodes: Sequence[Episode], temperature: float = 1.0) -> list[Any]:
    """Per completion token, the model's log-probability of it given everything before (one padded forward)."""
    import torch

    device = next(model.parameters()).device
    sequences = [episode.prompt_ids + episode.completion_ids for episode in episodes]
    width = max(len(ids) for ids in sequences)
    input_ids = torch.zeros((len(sequences), width), dtype=torch.long)
    attention = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, ids in enumerate(sequences):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        attention[row, :len(ids)] = 1
    with torch.no_grad():
        logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits.float().cpu()
    logps = (logits[:, :-1] / temperature).log_softmax(-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return [logps[row, len(e.prompt_ids) - 1:len(e.prompt_ids) - 1 + len(e.completion_ids)]
            for row, e in enumerate(episodes)]


def short_env_id(env_id: str) -> str:
    """``agentrl/Search-v0`` -> ``Search-v0`` (metric names stay readable)."""
    return env_id.split("/")[-1]


def reward_metric(env_id: str) -> str:
    """Name of the logged mean raw reward of ``env_id``'s episodes in a rollout batch."""
    return f"reward/{short_env_id(env_id)}/mean"
