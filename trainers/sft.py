"""Supervised warm-start from demonstrations, with the loss on agent tokens only.

Demonstrations are episodes of a scripted policy (an oracle) played in the real environment. Each is
encoded with the same token pieces the rollout engine uses, so the model learns exactly the sequence
it will later generate: the actions' tokens carry ``env_mask`` 1 and are learned; the prompt, the
observations and the template tokens carry 0 and are context only. Training runs on TRL's
``SFTTrainer`` with the mask handed over as ``assistant_masks`` (on a CPU with the output head run at
the learned tokens only, :class:`AgentSFTTrainer`).

Example:
    python -m trainers.sft --config trainers/configs/sft_tiny_cpu.yaml
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from trl import SFTConfig, SFTTrainer

from agentgym_envs.policies import Policy, ScriptedAgent
from agentgym_envs.registration import env_spec
from agentgym_envs.runner import AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from tasks import Task
from trainers.chat import ChatTokens
from trainers.precision import float32_without_native_bf16
from trainers.rollout import ChatRecorder
from trainers.scoring import LabelScores, has_plain_output_head, label_scores
from trainers.tiny_model import load_model


class DemonstrationAgent(ChatRecorder):
    """A scripted policy whose actions are encoded as the model would have generated them.

    Through the one episode runner, a demonstration is recorded exactly as a rollout is: the prompt
    rendered once, each action's ids with ``env_mask`` 1, each observation wrapped in the template's
    tool-response turn with ``env_mask`` 0.

    Args:
        chat: Token pieces of the model's chat template.
        scripted: The demonstrator as an agent.
    """

    def __init__(self, chat: ChatTokens, scripted: ScriptedAgent) -> None:
        super().__init__(chat)
        self.scripted = scripted

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Render the prompt and start the demonstrator."""
        super().start(episode, task, prompt, info)
        self.scripted.start(episode, task, prompt, info)

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | None]:
        """The demonstrator's actions, tokenized and recorded."""
        for episode, observation in zip(episodes, observations, strict=True):
            self.observe(episode, observation)
        turns = self.scripted.act(episodes, observations, infos)
        return [self.record(episode, turn.action, self.chat.action_ids(turn.action)) if turn is not None else None
                for episode, turn in zip(episodes, turns, strict=True)]

    def finish(self, episode: Episode) -> None:
        """Drop the demonstrator's policy of the episode."""
        self.scripted.finish(episode)


MAX_DEMONSTRATION_INFRA_SHARE = 0.5
"""Largest share of the demonstrator's episodes an infrastructure fault may end (judged from the
:data:`INFRA_JUDGED_AFTER`-th episode on) before the collection stops."""
INFRA_JUDGED_AFTER = 8
"""Episodes played before the infrastructure share is judged (one fault among the first few is no verdict)."""


def collect_demonstrations(env: gym.Env, env_id: str, policy: Policy, tasks: Sequence[Task], chat: ChatTokens,
                           *, keep: Callable[[Episode], bool] | None = None,
                           progress: bool = False) -> list[Episode]:
    """Play ``policy`` on each task in ``env`` and keep the encoded episodes ``keep`` accepts (default: solved).

    Args:
        env: The environment (``gym.make(env_id, ...)``), reused across tasks (one reset per episode).
        env_id: Its id, recorded in the episodes.
        policy: The demonstrator.
        tasks: The tasks to play.
        chat: Token pieces of the model's chat template.
        keep: Which episodes to learn from; by default the solved ones (infra episodes never).
        progress: Show a progress bar.

    Raises:
        TooManyInfraErrors: More than :data:`MAX_DEMONSTRATION_INFRA_SHARE` of the episodes played so far ended
            by an infrastructure fault (a sandbox that does not start, a daemon that does not answer): warm-starting
            on what is left would learn from a few episodes, or none, so it stops at once, naming the first fault.
    """
    keep = keep or (lambda episode: episode.success)
    runner = EpisodeRunner(EnvPool(lambda _: env), workers=1)
    agent = DemonstrationAgent(chat, ScriptedAgent(lambda _: policy))
    demonstrations, faulted = [], []
    for played, task in enumerate(_progress(tasks, progress, f"demonstrations ({env_id})"), start=1):
        episode = runner.run(agent, [EpisodeRequest(env_id=env_id, task=task, group=0, seed=None)])[0]
        if not episode.scored:
            faulted.append(episode)
        elif keep(episode):
            demonstrations.append(episode)
        stop_if_mostly_infra(env_id, faulted, played, len(tasks))
    return demonstrations


def stop_if_mostly_infra(env_id: str, faulted: Sequence[Episode], played: int, total: int) -> None:
    """Raise TooManyInfraErrors when more than :data:`MAX_DEMONSTRATION_INFRA_SHARE` of the ``played`` episodes
    (judged from the :data:`INFRA_JUDGED_AFTER`-th on) are the unscored ``faulted`` ones."""
    from trainers.infra_guard import INFRA_HINT, TooManyInfraErrors, first_infra_error

    if played >= min(INFRA_JUDGED_AFTER, total) and len(faulted) > MAX_DEMONSTRATION_INFRA_SHARE * played:
        raise TooManyInfraErrors(
            f"demonstrations in {env_id}: {len(faulted)} of the first {played} episodes (of {total}) ended by an "
            f"infrastructure fault, too many to warm-start on what is left. The first one said: "
            f"{first_infra_error(faulted)}. To fix: {INFRA_HINT}.")


def _progress(items: Sequence[Any], enabled: bool, description: str) -> Sequence[Any]:
    if not enabled:
        return items
    from rich.progress import track

    return list(track(items, description=description, transient=True))


def sft_dataset(episodes: Sequence[Episode]):
    """A ``datasets.Dataset`` of ``input_ids`` and ``assistant_masks`` (1 on agent tokens) for ``SFTTrainer``."""
    from datasets import Dataset

    return Dataset.from_dict({
        "input_ids": [episode.prompt_ids + episode.completion_ids for episode in episodes],
        "assistant_masks": [[0] * len(episode.prompt_ids) + episode.env_mask for episode in episodes],
    })


class AgentSFTConfig(SFTConfig):
    """TRL's ``SFTConfig``, with ``bf16`` left off on a CPU that would emulate it (:mod:`trainers.precision`)."""

    def __post_init__(self) -> None:
        float32_without_native_bf16(self)
        super().__post_init__()


@dataclass
class WarmStartConfig:
    """What ``python -m trainers.sft`` learns from, on top of TRL's ``SFTConfig``."""

    model_name_or_path: str = field(default="tiny", metadata={
        "help": "'tiny' (the local tiny model), a local checkpoint or a hub id."})
    env_id: str = field(default="agentrl/Search-v0", metadata={"help": "Environment the demonstrations are played in."})
    env_kwargs: dict | str | None = field(default=None, metadata={
        "help": "Keyword arguments of gym.make (a JSON string on the command line)."})
    demonstrator: str = field(default="oracle", metadata={
        "help": "Scripted demonstrator: a policy the env's spec names (oracle, random, and its own, e.g. Search's "
                "lookup)."})
    max_tasks: int | None = field(default=None, metadata={"help": "Play at most this many of the env's tasks."})

    def __post_init__(self) -> None:
        if isinstance(self.env_kwargs, str):
            self.env_kwargs = json.loads(self.env_kwargs)
        self.env_kwargs = dict(self.env_kwargs or {})
        known = env_spec(self.env_id).policy_names()
        if self.demonstrator not in known:
            raise ValueError(f"demonstrator: expected a policy of {self.env_id}'s spec among {known}, got "
                             f"{self.demonstrator!r}")


BATCH_KEYS = frozenset({"input_ids", "attention_mask", "labels", "use_cache"})
"""What an SFT batch of the demonstrations holds (no images, not padding-free)."""


class AgentSFTTrainer(SFTTrainer):
    """TRL's ``SFTTrainer``; on a CPU, with the output head run at the learned (agent) tokens only.

    TRL's fused head compacts its input to the labelled positions only on Triton devices; elsewhere it
    projects every position, prompt, padding and tool output included, onto the vocabulary. On the tiny
    model that doubled the time of an SFT step (30 steps: 16.9 s -> 8.2 s). The loss, its metrics and
    everything else stay TRL's; one process only (a model wrapped for distributed training keeps TRL's head).
    """

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self._scores_labels_only(inputs, return_outputs):
            model = _LabelScoring(model, self.accelerator.autocast)
        return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)

    def _scores_labels_only(self, inputs: dict[str, Any], return_outputs: bool) -> bool:
        return (not return_outputs and set(inputs) <= BATCH_KEYS and "attention_mask" in inputs
                and inputs["input_ids"].device.type == "cpu" and self.accelerator.num_processes == 1
                and self.compute_loss_func is None
                and self.label_smoother is None and not self.aux_loss_enabled
                and has_plain_output_head(self.accelerator.unwrap_model(self.model)))


class _LabelScoring:
    """Stands in for the model in ``SFTTrainer.compute_loss``: its fused-head call is :func:`label_scores`."""

    def __init__(self, model, autocast: Callable[[], Any]) -> None:
        self.model, self.autocast = model, autocast

    def __call__(self, *, input_ids, attention_mask, labels, fused_lm_head: bool,
                 use_cache: bool = False) -> LabelScores:
        if not fused_lm_head:
            raise ValueError("_LabelScoring: expected a fused-head call (TRL's SFT loss), got a plain forward")
        with self.autocast():
            return label_scores(self.model, input_ids, attention_mask, labels)


def train_sft(model, tokenizer, episodes: Sequence[Episode], args, callbacks: Sequence[Any] = ()) -> Any:
    """Fine-tune ``model`` on ``episodes`` with TRL's ``SFTTrainer`` (loss on ``env_mask`` 1 tokens only).

    Args:
        model: The policy.
        tokenizer: Its tokenizer.
        episodes: Encoded demonstrations.
        args: A ``trl.SFTConfig`` (``max_length`` must cover the longest episode, or it is cut).
        callbacks: ``transformers.TrainerCallback`` objects added to the trainer.

    Returns:
        The trainer's ``TrainOutput``.
    """
    if not episodes:
        raise ValueError("train_sft: expected at least one demonstration, got none (did every episode fail?)")
    longest = max(episode.context_length for episode in episodes)
    if args.max_length is not None and longest > args.max_length:
        raise ValueError(f"SFTConfig.max_length: expected >= the longest demonstration ({longest} tokens), "
                         f"got {args.max_length}; raise it or drop long demonstrations")
    trainer = AgentSFTTrainer(model=model, args=args, train_dataset=sft_dataset(episodes),
                              processing_class=tokenizer, callbacks=list(callbacks))
    return trainer.train()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.sft --config <yaml>``: play the demonstrator, fine-tune on its solved episodes, save."""
    from trl import TrlParser

    warm, args = TrlParser((WarmStartConfig, AgentSFTConfig)).parse_args_and_config(
        args=list(argv) if argv is not None else None)
    model, tokenizer = load_model(warm.model_name_or_path)
    env = gym.make(warm.env_id, **warm.env_kwargs)
    try:
        tasks = list(env.unwrapped.tasks)[:warm.max_tasks]
        episodes = collect_demonstrations(env, warm.env_id, env_spec(warm.env_id).policy(warm.demonstrator), tasks,
                                          ChatTokens(tokenizer), progress=True)
    finally:
        env.close()
    train_sft(model, tokenizer, episodes, args)
    model.save_pretrained(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
