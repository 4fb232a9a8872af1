"""The monitor's infrastructure-fault alert and zero-variance streak warning, and the latter in a real GRPO run."""

from __future__ import annotations

import json
import logging

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401  (registers the agentrl/ ids)
from tasks import load_split
from trainers.grpo import AgentGRPOConfig, build_trainer
from trainers.monitoring import RolloutMonitor
from trainers.rollout import Episode
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SEARCH = "agentrl/Search-v0"


def group(rewards: list[float | None], index: int) -> list[Episode]:
    """One group's episodes with these rewards (None: ended by an infrastructure fault)."""
    return [Episode(env_id=SEARCH, task_id=f"t{index}", group=index, reward=reward or 0.0,
                    infra_error=reward is None, error="reset failed: the daemon is down" if reward is None else "",
                    stop_reason="infra_error" if reward is None else "answered") for reward in rewards]


def kinds(monitor: RolloutMonitor, kind: str | None = None) -> list[str]:
    """The kinds of the monitor's alerts (only those of ``kind`` when given)."""
    return [alert["kind"] for alert in monitor.alerts if kind in (None, alert["kind"])]


@pytest.mark.parametrize(("rewards", "alerts"), [
    ([[None, None], [0.0, 1.0]], True),  # 2 of 4 faults: 50% > 25%
    ([[None, 0.0], [0.0, 1.0], [0.0, 1.0]], False),  # 1 of 6: 17%
    ([[None, 0.0], [1.0, 1.0]], False),  # 1 of 4 is exactly 25%: not more
])
def test_the_infra_alert_fires_above_its_share_and_quotes_the_first_fault(rewards, alerts):
    monitor = RolloutMonitor(mismatch_every=0)
    monitor.observe([episode for index, values in enumerate(rewards) for episode in group(values, index)])
    assert ("infra_errors" in kinds(monitor)) == alerts
    if alerts:
        message = monitor.alerts[0]["message"]
        assert "first fault: reset failed: the daemon is down" in message and "sandbox doctor" in message


def test_the_zero_variance_warning_comes_once_per_streak_and_says_how_to_warm_start(caplog):
    monitor = RolloutMonitor(mismatch_every=0, zero_variance_steps=3)
    flat = [*group([0.0, 0.0], 0), *group([1.0, 1.0], 1)]  # equal rewards within each group
    with caplog.at_level(logging.WARNING, logger="trainers.monitoring"):
        for _ in range(2):
            monitor.observe(flat)
        assert kinds(monitor) == []  # two batches: not yet
        monitor.observe(group([None, None], 0))  # no scored episode: neither extends nor breaks the streak
        monitor.observe(flat)
        assert kinds(monitor, "zero_variance_streak") == ["zero_variance_streak"]
        monitor.observe(flat)
        assert kinds(monitor, "zero_variance_streak") == ["zero_variance_streak"]  # once per streak
        monitor.observe([*group([0.0, 1.0], 0), *group([1.0, 1.0], 1)])  # one group with signal ends the streak
        for _ in range(3):
            monitor.observe(flat)
    assert kinds(monitor, "zero_variance_streak") == ["zero_variance_streak"] * 2
    message = next(alert["message"] for alert in monitor.alerts if alert["kind"] == "zero_variance_streak")
    assert "python -m trainers.sft --config trainers/configs/sft_tiny_cpu.yaml" in message
    assert "--model_name_or_path runs/sft-tiny" in message and "python -m trainers.pipeline" in message
    assert sum("zero_variance_streak" in record.getMessage() for record in caplog.records) == 2


def test_zero_variance_steps_zero_never_warns():
    monitor = RolloutMonitor(mismatch_every=0, zero_variance_steps=0)
    for _ in range(5):
        monitor.observe(group([0.0, 0.0], 0))
    assert kinds(monitor) == []


def test_grpo_on_the_untrained_model_warns_that_its_groups_carry_no_signal(tmp_path, caplog):
    config = AgentGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, max_steps=2,
                             use_cpu=True, report_to=[], logging_steps=1, save_strategy="no", max_turns=1,
                             max_tokens_per_turn=8, envs=[SEARCH], disable_tqdm=True, mismatch_every=0,
                             zero_variance_warn_steps=2)
    model, tokenizer = load_or_build_tiny_model()  # never warm-started: it never answers, every reward is equal
    trainer = build_trainer(config, model, tokenizer, tasks={SEARCH: load_split("Search", "train")[:4]},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    try:
        with caplog.at_level(logging.WARNING, logger="trainers.monitoring"):
            trainer.train()  # a warning, not a stop
    finally:
        trainer.rollouts.close()
    assert trainer.state.global_step == 2
    assert any("zero_variance_streak" in record.getMessage() and "trainers.sft" in record.getMessage()
               for record in caplog.records)
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [alert["kind"] for record in records for alert in record["alerts"]].count("zero_variance_streak") == 1
