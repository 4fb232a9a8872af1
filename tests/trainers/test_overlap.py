"""Off-policy overlap in GRPO: the next batch is generated in the background by a snapshot of the policy one
optimizer step old, stale batches are regenerated, TRL's importance-sampling correction applies, and the run
closes its thread and envs."""

from __future__ import annotations

import json
import threading

import pytest
import torch
from transformers import TrainerCallback

from tests.trainers.test_grpo import SLOT_PREFIX, make_config, make_trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OVERLAP = {"overlap_rollouts": True, "vllm_importance_sampling_mode": "token_truncate",
           "vllm_importance_sampling_clip_max": 3.0}


def weights(model: torch.nn.Module) -> torch.Tensor:
    """All of a model's parameters as one flat tensor (a copy)."""
    return torch.cat([parameter.detach().flatten() for parameter in model.parameters()]).clone()


class RecordWeights(TrainerCallback):
    """The policy's weights after every optimizer step, by global step (step 0: before training)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.by_step = {0: weights(model)}

    def on_step_end(self, args, state, control, **kwargs):
        self.by_step[state.global_step] = weights(self.model)


def record_generations(trainer) -> list[tuple[str, torch.Tensor]]:
    """Per generate() call of the rollouts: the calling thread's name and the generating model's weights."""
    generator = trainer.rollouts._engine(trainer).agent.generator
    calls: list[tuple[str, torch.Tensor]] = []
    generate = generator.generate

    def recording(*args, **kwargs):
        calls.append((threading.current_thread().name, weights(generator.model)))
        return generate(*args, **kwargs)

    generator.generate = recording
    return calls


def test_each_batch_is_generated_in_the_background_by_the_policy_one_step_old(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=3, **OVERLAP)
    recorder = RecordWeights(trainer.model)
    trainer.add_callback(recorder)
    calls = record_generations(trainer)
    assert trainer.rollouts.generator.model is not trainer.model  # the snapshot generates, never the policy
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    steps = recorder.by_step
    assert not torch.equal(steps[0], steps[1]) and not torch.equal(steps[1], steps[2])  # the policy moved
    # batch 0: generated on the training thread by the initial weights; batches 1 and 2 in the background, by the
    # weights of steps 0 and 1 (each generated while the step before it trained)
    versions = []
    for thread, generating in calls:
        versions.append((thread.startswith("rollout-prefetch"),
                         next(step for step, trained in steps.items() if torch.equal(trained, generating))))
    assert sorted(set(versions)) == [(False, 0), (True, 0), (True, 1)]
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [record["rollout/staleness"] for record in records] == [0, 1, 1]
    assert [record["rollout/regenerated"] for record in records] == [0, 0, 0]
    assert all(record["rollout/staleness"] <= trainer.args.max_staleness for record in records)


def test_trls_importance_sampling_correction_reweights_the_stale_batches(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=3, **OVERLAP)
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 3
    assert all({"sampling/importance_sampling_ratio/max", "sampling/sampling_logp_difference/mean",
                "mismatch/ratio_p99", "mismatch/ess"} <= set(entry) for entry in logs)
    fresh, *stale = logs
    # step 0: sampled by the policy being trained (bf16 autocast: rounding only)
    assert fresh["sampling/sampling_logp_difference/max"] < 1e-2
    for entry in stale:  # steps 1 and 2: sampled by the policy one step old
        assert entry["sampling/sampling_logp_difference/max"] > 0.1
        assert (entry["sampling/importance_sampling_ratio/min"], entry["sampling/importance_sampling_ratio/max"]) \
            != (1.0, 1.0)
        assert entry["sampling/importance_sampling_ratio/max"] <= 3.0  # truncated at vllm_importance_sampling_clip_max
        assert entry["mismatch/ess"] < min(fresh["mismatch/ess"], 0.99)  # the monitor's view of the same weights
    assert trainer.use_vllm is False  # the gate TRL reads is open only during its own calls


def test_a_batch_older_than_max_staleness_is_thrown_away_and_played_again(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=4, **OVERLAP)
    rows = [{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)]
    try:
        trainer._generate_and_score_completions(rows)  # step 0: played now, step 1's batch starts in the background
        first = trainer.rollouts.monitor.flush(step=0)
        trainer.state.global_step = 2  # the background batch (weights of step 0) is now two steps old
        trainer._generate_and_score_completions(rows)
        second = trainer.rollouts.monitor.flush(step=2)
    finally:
        trainer.rollouts.close()
    assert (first["rollout/staleness"], first["rollout/regenerated"]) == (0, 0)
    assert (second["rollout/staleness"], second["rollout/regenerated"]) == (0, 1)  # played again with step 2's weights
    assert trainer.rollouts.snapshot.version == 2


def test_closing_ends_the_background_thread_and_closes_the_envs(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=4, **OVERLAP)
    rows = [{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)]
    trainer._generate_and_score_completions(rows)  # leaves a batch in flight
    assert any(thread.name.startswith("rollout-prefetch") for thread in threading.enumerate())
    trainer.rollouts.close()
    assert not any(thread.name.startswith("rollout-prefetch") for thread in threading.enumerate())
    assert trainer.rollouts.envs._envs == {}


@pytest.mark.parametrize(("overrides", "message"), [
    ({"max_staleness": 0}, "max_staleness: expected >= 1"),
    ({"num_iterations": 2}, "at most max_staleness"),  # each batch would be two steps old when trained on
    ({"steps_per_generation": 3, "gradient_accumulation_steps": 2}, "multiple of gradient_accumulation_steps"),
])
def test_overlap_settings_that_cannot_work_are_refused(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        make_config(tmp_path, **(OVERLAP | overrides))
    make_config(tmp_path, **(OVERLAP | overrides | {"overlap_rollouts": False}))  # fine without the overlap


def test_ppo_overlap_trains_on_batches_one_update_old_weighted_by_the_behaviour_policy():
    from tasks import load_split
    from trainers.ppo import PPOTrainer
    from trainers.ppo_config import PPOConfig
    from trainers.tiny_model import load_or_build_tiny_model

    model, tokenizer = load_or_build_tiny_model()
    config = PPOConfig(device="cpu", max_steps=3, tasks_per_step=2, episodes_per_task=2, max_turns=2,
                       max_tokens_per_turn=8, num_ppo_epochs=1, minibatch_size=4, learning_rate=1e-2,
                       overlap_rollouts=True)
    trainer = PPOTrainer(config, model, tokenizer, tasks=load_split("Search", "train")[:6])
    assert trainer.engine.agent.generator.model is trainer.snapshot.model  # the snapshot generates
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert not any(thread.name.startswith("rollout-prefetch") for thread in threading.enumerate())
    assert trainer.engine.envs._envs == {}
    assert [metrics["rollout/staleness"] for metrics in history] == [0, 1, 1]
    fresh, *stale = history
    assert fresh["rollout_logprob_gap"] < 1e-3 and fresh["behaviour_weight_max"] == 1.0  # on policy: plain PPO
    for metrics in stale:  # sampled by the policy one update old: pi_prox / pi_behaviour reweights the tokens
        assert metrics["rollout_logprob_gap"] > 1e-2 and metrics["behaviour_weight_max"] > 1.0
    assert trainer.snapshot.version == 1  # the last batch was rolled out by the weights after update 1


def test_ppo_overlap_builds_its_own_engine():
    from trainers.ppo import PPOTrainer, make_engine
    from trainers.ppo_config import PPOConfig
    from trainers.tiny_model import load_or_build_tiny_model

    model, tokenizer = load_or_build_tiny_model()
    engine = make_engine(PPOConfig(), model, tokenizer)
    with pytest.raises(ValueError, match="expected no engine= with overlap_rollouts"):
        PPOTrainer(PPOConfig(device="cpu", overlap_rollouts=True), model, tokenizer, engine=engine, tasks=[])
    engine.envs.close()
