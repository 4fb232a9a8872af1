"""A short GRPO run of the tiny model on Search-v0 in each process of an ``accelerate launch``; writes what it saw.

Launched by ``tests/trainers/test_grpo_distributed.py`` as two CPU processes (gloo), e.g.::

    PYTHONPATH=. accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \
        --dynamo_backend no --main_process_ip 127.0.0.1 --main_process_port 29555 \
        tests/trainers/distributed_grpo_run.py OUT_DIR

(``--multi_gpu`` only picks accelerate's torchrun launcher; the config's ``use_cpu`` keeps the processes on the
CPU, where accelerate's process group is gloo.) Every process writes ``OUT_DIR/rank-<process index>.json``
with the task ids its episodes played, a hash of the parameters before and after training, the parameters
that changed, the process group's backend, and, per loss computation, whether the CPU output-head speed-up
(:meth:`trainers.grpo.AgentGRPOTrainer._scores_agent_tokens_only`) was taken.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import agentgym_envs  # noqa: F401  (registers the agentrl/... ids)
from tasks import load_split
from trainers.grpo import AgentGRPOConfig, AgentGRPOTrainer, build_trainer
from trainers.tiny_model import load_or_build_tiny_model

ENV_ID = "agentrl/Search-v0"
STEPS = 2


def make_config(output_dir: Path) -> AgentGRPOConfig:
    """Two steps of two groups of two episodes per process (a process's batch holds whole groups)."""
    return AgentGRPOConfig(output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=2,
                           max_steps=STEPS, use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
                           max_turns=2, max_tokens_per_turn=8, learning_rate=1e-2, bf16=False,
                           filter_zero_variance_groups=False, envs=[ENV_ID], disable_tqdm=True, seed=0)


def parameter_digest(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's float32 bytes, in the model's order."""
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def recording_rollouts(trainer: AgentGRPOTrainer, task_ids: list[str]) -> Callable[..., dict[str, list]]:
    """TRL's ``rollout_func`` of ``trainer``, also appending each episode's task id to ``task_ids``."""
    rollout_func = trainer.rollout_func

    def play(prompts: list[Any], trainer_: AgentGRPOTrainer) -> dict[str, list]:
        outputs = rollout_func(prompts, trainer_)
        task_ids.extend(outputs["task_id"])
        return outputs

    return play


def recording_head_choice(trainer: AgentGRPOTrainer, choices: list[bool]) -> Callable[..., bool]:
    """``trainer._scores_agent_tokens_only``, also appending each decision to ``choices``."""
    decide = trainer._scores_agent_tokens_only

    def decide_and_record(model: torch.nn.Module, inputs: dict[str, Any]) -> bool:
        choice = decide(model, inputs)
        choices.append(choice)
        return choice

    return decide_and_record


def main(output_dir: Path) -> None:
    """Train :data:`STEPS` steps in this process and write ``output_dir/rank-<index>.json``."""
    model, tokenizer = load_or_build_tiny_model()
    trainer = build_trainer(make_config(output_dir / "trainer"), model, tokenizer,
                            tasks={ENV_ID: load_split("Search", "train")},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    # The untrained model never answers, so the verifier would score every episode 0 and GRPO would have no
    # signal: rewards 1, 0, 1, 0, ... stand in for it (as in test_grpo.py), so that every group has an advantage.
    counter = iter(range(1_000_000))
    trainer.rollouts._normalized = lambda episode: float(next(counter) % 2 == 0)
    task_ids: list[str] = []
    head_choices: list[bool] = []
    trainer.rollout_func = recording_rollouts(trainer, task_ids)
    trainer._scores_agent_tokens_only = recording_head_choice(trainer, head_choices)
    before = parameter_digest(trainer.model)
    initial = [parameter.detach().clone() for parameter in trainer.model.parameters()]
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    changed = [name for (name, parameter), start in zip(trainer.model.named_parameters(), initial, strict=True)
               if not torch.equal(parameter.detach(), start)]
    record = {"process_index": trainer.accelerator.process_index,
              "num_processes": trainer.accelerator.num_processes,
              "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
              "model_class": type(trainer.model_wrapped).__name__,
              "steps": trainer.state.global_step, "task_ids": task_ids,
              "params_before": before, "params_after": parameter_digest(trainer.model),
              "changed_parameters": changed, "parameter_count": len(initial),
              "agent_token_head": head_choices}
    path = output_dir / f"rank-{trainer.accelerator.process_index}.json"
    path.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTPUT_DIR (expected one argument, got {len(sys.argv) - 1})")
    main(Path(sys.argv[1]))
