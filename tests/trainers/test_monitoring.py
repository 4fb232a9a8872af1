"""Rollout monitoring: metrics from episodes, tool under-use and reward-spike alerts, mismatch statistics."""

from __future__ import annotations

import json

import torch

from trainers.monitoring import RolloutMonitor, mismatch_statistics, sequence_logprobs, turn_metrics
from trainers.rollout import Episode, TurnRecord
from trainers.tiny_model import load_or_build_tiny_model


def episode(reward: float, tools: tuple[str, ...] = ("search",), group: int = 0) -> Episode:
    made = Episode(env_id="agentrl/Search-v0", task_id="t", group=group, prompt_ids=[1, 2, 3],
                   completion_ids=[4, 5, 6, 7], logprobs=[-1.0, -1.0, 0.0, -2.0], env_mask=[1, 1, 0, 1],
                   reward=reward, stop_reason="answered")
    made.turns = [TurnRecord(start=0, length=2, action="a", tools=tools, after_tool_result=False, ok=True),
                  TurnRecord(start=3, length=1, action="b", tools=(), after_tool_result=bool(tools), ok=False)]
    made.tool_calls = [{"name": name, "ok": name == "search", "infra_error": False, "latency_s": 0.001}
                       for name in tools]
    return made


def test_tool_metrics_and_the_under_use_alert(tmp_path):
    monitor = RolloutMonitor(log_path=tmp_path / "log.jsonl", required_tools={"agentrl/Search-v0": ("search",)})
    monitor.observe([episode(0.0, tools=("open",)) for _ in range(10)])
    metrics = monitor.flush(step=1)
    assert metrics["tools/Search-v0/open/calls"] == 1.0
    assert metrics["tools/Search-v0/open/failure_rate"] == 1.0
    record = json.loads((tmp_path / "log.jsonl").read_text())
    assert record["step"] == 1 and record["alerts"][0]["kind"] == "tool_under_use"
    monitor.observe([episode(0.0) for _ in range(10)])
    assert monitor.flush(step=2)["tools/Search-v0/search/calls"] == 1.0
    assert json.loads((tmp_path / "log.jsonl").read_text().splitlines()[1])["alerts"] == []


def test_a_sudden_reward_jump_raises_a_spike_alert_and_a_steady_one_does_not():
    monitor = RolloutMonitor()
    for _ in range(6):
        monitor.observe([episode(0.1), episode(0.0)])
    assert monitor.alerts == []
    monitor.observe([episode(1.0), episode(1.0)])
    assert [alert["kind"] for alert in monitor.alerts] == ["reward_spike"]


def test_turn_metrics_split_turns_after_a_tool_result_from_first_turns():
    metrics = turn_metrics([episode(1.0), episode(0.0)])
    assert metrics["turns/first/count"] == 2 and metrics["turns/after_tool/count"] == 2
    assert metrics["turns/first/ok_rate"] == 1.0 and metrics["turns/after_tool/ok_rate"] == 0.0
    assert metrics["turns/after_tool/logprob_mean"] == -2.0


def test_mismatch_is_none_when_the_sampler_is_the_trainer_and_visible_when_it_is_not():
    model, _ = load_or_build_tiny_model()
    episodes = [episode(1.0), episode(0.0)]
    for made, logps in zip(episodes, sequence_logprobs(model, episodes), strict=True):
        made.logprobs = logps.tolist()  # as if sampled by this very model
    same = mismatch_statistics(model, episodes)
    assert abs(same["mismatch/ess"] - 1.0) < 1e-6 and same["mismatch/k3_kl_max"] < 1e-6
    for made in episodes:
        made.logprobs = [value - 0.5 * (i % 2) for i, value in enumerate(made.logprobs)]  # a different sampler
    shifted = mismatch_statistics(model, episodes)
    assert shifted["mismatch/ess"] < 0.99 and shifted["mismatch/ratio_p99"] > 1.5
    assert torch.isfinite(torch.tensor(list(shifted.values()))).all()


def test_a_trainers_batch_metrics_are_logged_averaged_or_at_their_largest(tmp_path):
    monitor = RolloutMonitor(log_path=tmp_path / "log.jsonl", mismatch_every=0)
    monitor.observe([episode(1.0)], batch_metrics={"rollout/max_turns": 2.0, "rollout/staleness": 1.0})
    monitor.observe([episode(0.0)], batch_metrics={"rollout/max_turns": 3.0, "rollout/staleness": 0.0})
    metrics = monitor.flush(step=4)
    assert metrics["rollout/max_turns"] == 3.0  # a name holding "max": the largest of the log step's batches
    assert metrics["rollout/staleness"] == 0.5  # others: their mean
    record = json.loads((tmp_path / "log.jsonl").read_text())
    assert record["rollout/max_turns"] == 3.0 and record["rollout/staleness"] == 0.5  # in the episode log too
    monitor.observe([episode(1.0)])
    assert "rollout/max_turns" not in monitor.flush(step=5)  # nothing carried over from the last log step


def test_episodes_cut_at_the_context_budget_raise_an_alert_that_counts_them_per_env():
    monitor = RolloutMonitor(max_context_tokens=1024)
    cut = [episode(0.0) for _ in range(3)]
    for made in cut:
        made.stop_reason = "context"
    monitor.observe(cut + [episode(1.0) for _ in range(5)])
    (alert,) = monitor.alerts
    assert alert["kind"] == "context_budget"
    assert "max_context_tokens=1024: Search-v0 3 of 8" in alert["message"]
    monitor.flush()
    few = [episode(0.0) for _ in range(20)]
    few[0].stop_reason = "context"  # 1 of 20: under the 10% share
    monitor.observe(few)
    assert monitor.alerts == []
