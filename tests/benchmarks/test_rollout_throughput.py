"""Rollout-throughput benchmark: a small run of every row, the latency models, and what TRL's tool loop needs."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

from benchmarks.rollout_throughput import (
    RATIOS,
    ROWS,
    TRL_ROW,
    Row,
    Settings,
    ToolLatency,
    ToolLatencyModel,
    check_targets,
    parse_latencies,
    ratios,
    run_benchmark,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module", autouse=True)
def quiet_trl_experimental() -> Iterator[None]:
    """TRL warns that ``environment_factory`` is experimental; warnings are errors in this suite."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.mark.timeout(600)
def test_every_row_plays_every_episode_with_real_tool_calls():
    # Builds and caches the warm-started model the first time (minutes); ~10 s afterwards.
    settings = Settings(tasks=2, group=2, max_turns=2)
    latencies = parse_latencies("0,20,lognormal:20")
    report = run_benchmark(settings, latencies, repeats=1)

    assert [(row.tool_latency, row.name) for row in report.rows] == [(ms, name) for ms in ("0", "20", "lognormal:20")
                                                                     for name in ROWS]
    for row in report.rows:
        assert row.episodes == 4, row  # every episode came back, finished
        assert row.answered > 0 and row.tool_calls > 0 and row.generated_tokens > 0, row  # real tool use
        assert row.episodes <= row.turns <= row.episodes * settings.max_turns, row
        assert row.wall_s > 0 and row.episodes_per_s > 0 and row.tokens_per_s > 0 and row.tool_calls_per_s > 0
        assert row.cpu_s > 0, row
        assert row.generation_calls > 0 and row.contexts_per_call > 0 and 0 < row.generation_s <= row.wall_s, row
        if row.name != TRL_ROW:
            assert row.generation_contexts == row.turns, row  # one context per model turn
            assert row.fed_tokens > 0, row
    reused = {row.name: row.reused_tokens for row in report.rows if row.tool_latency == "0"}
    assert reused["engine-async"] > 0 and reused["engine-async-nocache"] == reused["engine-rounds"] == 0
    assert set(report.ratios) == {"0", "20", "lognormal:20"}
    for values in report.ratios.values():
        assert set(values) == set(RATIOS)
        assert all(value["episodes"] > 0 and value["tokens"] > 0 for value in values.values())
    assert [(target["tool_latency"], target["at_least"]) for target in report.targets] == [("0", 1.5),
                                                                                           ("lognormal:20", 2.0)]
    assert report.wall_s > sum(row.wall_s for row in report.rows)


def test_ratios_are_of_episodes_and_tokens_per_second_per_latency():
    walls = {"engine-async": 1.0, "engine-async-nocache": 2.0, "engine-rounds": 4.0, TRL_ROW: 3.0}
    rows = [Row.measured(name, "0", 6, 4, 8, 4, 120, wall_s) for name, wall_s in walls.items()]
    rows.append(Row.measured("engine-async", "lognormal:50", 6, 4, 8, 4, 60, 1.0))
    rows.append(Row.measured(TRL_ROW, "lognormal:50", 6, 2, 6, 2, 120, 4.0))  # more tokens per episode
    measured = ratios(rows)

    assert measured["0"] == {"async/rounds": {"episodes": 4.0, "tokens": 4.0},
                             "async/trl": {"episodes": 3.0, "tokens": 3.0},
                             "rounds/trl": {"episodes": 0.75, "tokens": 0.75},
                             "async/nocache": {"episodes": 2.0, "tokens": 2.0},
                             "nocache/rounds": {"episodes": 2.0, "tokens": 2.0}}
    assert measured["lognormal:50"] == {"async/trl": {"episodes": 4.0, "tokens": 2.0}}  # only the pair measured


def test_targets_are_async_over_trl_at_zero_and_under_heavy_tailed_latency():
    latencies = parse_latencies("0,50,lognormal:50")
    measured = {"0": {"async/trl": {"episodes": 1.49, "tokens": 2.0}},
                "50": {"async/trl": {"episodes": 9.0, "tokens": 9.0}},  # no target at a fixed latency
                "lognormal:50": {"async/trl": {"episodes": 2.0, "tokens": 1.0}}}
    assert check_targets(measured, latencies) == [
        {"ratio": "async/trl", "tool_latency": "0", "at_least": 1.5, "measured": 1.49, "passed": False},
        {"ratio": "async/trl", "tool_latency": "lognormal:50", "at_least": 2.0, "measured": 2.0, "passed": True}]
    assert check_targets({"0": {}}, latencies) == []  # TRL's row not measured: nothing to check


@pytest.mark.parametrize(("text", "expected"), [
    ("0", [ToolLatencyModel(0.0)]),
    ("0,50", [ToolLatencyModel(0.0), ToolLatencyModel(50.0)]),
    (" 0, 50 ,lognormal:50", [ToolLatencyModel(0.0), ToolLatencyModel(50.0), ToolLatencyModel(50.0, lognormal=True)]),
])
def test_parse_latencies(text: str, expected: list[ToolLatencyModel]):
    assert parse_latencies(text) == expected
    assert parse_latencies(",".join(model.label for model in expected)) == expected  # labels read back


@pytest.mark.parametrize("text", ["", "-5", "fast", "lognormal:", "lognormal:0", "pareto:50", "50ms"])
def test_parse_latencies_rejects(text: str):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="expected"):
        parse_latencies(text)


def test_lognormal_latency_has_the_median_and_tenfold_p99_it_claims():
    draw = ToolLatencyModel(50.0, lognormal=True).sampler("0:0")
    draws = sorted(draw() for _ in range(40_000))
    median, p99 = statistics.median(draws), draws[int(0.99 * len(draws))]
    assert median == pytest.approx(0.050, rel=0.03)
    assert p99 / median == pytest.approx(10.0, rel=0.08)
    assert statistics.fmean(draws) == pytest.approx(0.050 * 1.63, rel=0.05)  # the tail lifts the mean


def test_latency_draws_are_reproducible_per_env_seed_and_fixed_latency_is_fixed():
    model = ToolLatencyModel(50.0, lognormal=True)
    first, again, other = model.sampler("0:3"), model.sampler("0:3"), model.sampler("0:4")
    draws = [first() for _ in range(5)]
    assert draws == [again() for _ in range(5)]
    assert draws != [other() for _ in range(5)]
    assert len(set(draws)) == 5
    fixed = ToolLatencyModel(50.0).sampler("0:3")
    assert {fixed() for _ in range(10)} == {0.05}


def test_latency_sampler_is_thread_safe():
    from concurrent.futures import ThreadPoolExecutor

    model = ToolLatencyModel(50.0, lognormal=True)
    shared, alone = model.sampler("7:0"), model.sampler("7:0")
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda _: shared(), range(4000)))
    assert sorted(threaded) == sorted(alone() for _ in range(4000))  # the same draws, none lost or repeated


class CountingEnv(gym.Env):
    """Reports ``calls`` tool calls on every step."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "obs", 0.0, False, False, {"tool_calls": [{"name": "search"}] * self.calls}


@pytest.mark.parametrize("calls", [0, 2])
def test_tool_latency_sleeps_one_draw_per_tool_call(calls: int, monkeypatch: pytest.MonkeyPatch):
    slept: list[float] = []
    monkeypatch.setattr("benchmarks.rollout_throughput.time.sleep", slept.append)
    draws = iter([0.01, 0.2])
    ToolLatency(CountingEnv(calls), lambda: next(draws)).step("<tool_call>...</tool_call>")
    assert slept == [pytest.approx([0.0, 0.0, 0.21][calls])]
