"""Timing env calls for the speed benchmarks: one sample per call, its percentiles and a narrow column.

The speed benchmark of each env (``agentgym_envs/<env>/speed.py``, run by ``python -m benchmarks.speed``) times
resets and tool calls through ``env.step`` with these helpers, so every env's table means the same thing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym

from agentgym_envs.actions import tool_call_action
from tasks import Task

WARMUP_CALLS = 3
"""Calls made and dropped before timing, so one-off start-up costs do not count."""


@dataclass(frozen=True)
class Sample:
    """One timed call: its latency and how it ended."""

    ms: float
    ok: bool = True
    infra_error: bool = False


def percentiles(samples: Sequence[Sample]) -> tuple[float, float]:
    """Median and 99th percentile of the samples' latencies."""
    ordered = sorted(sample.ms for sample in samples)
    p99 = ordered[-1] if len(ordered) < 2 else statistics.quantiles(ordered, n=100, method="inclusive")[98]
    return statistics.median(ordered), p99


def time_calls(call: Callable[[], Sample], calls: int, warmup: int = WARMUP_CALLS) -> list[Sample]:
    """Run ``call`` ``warmup + calls`` times; the last ``calls`` samples."""
    for _ in range(warmup):
        call()
    return [call() for _ in range(calls)]


def timed_reset(env: gym.Env, task: Task) -> Sample:
    """One ``env.reset`` on ``task``, timed."""
    started = time.perf_counter()
    env.reset(options={"task": task})
    return Sample((time.perf_counter() - started) * 1000.0)


def tool_call(env: gym.Env, tool: str, **arguments: str) -> Callable[[], Sample]:
    """One tool call through ``env.step``, its latency as the env measured it."""
    action = tool_call_action(tool, **arguments)

    def call() -> Sample:
        _, _, _, _, info = env.step(action)
        (record,) = info["tool_calls"]
        return Sample(record["latency_s"] * 1000.0, ok=record["ok"], infra_error=record["infra_error"])
    return call


def milliseconds(value: float | None, signed: bool = False) -> str:
    """``value`` in a narrow column (two decimals under 100 ms), or ``-`` when it was not measured."""
    if value is None:
        return "-"
    return format(value, ("+" if signed else "") + (".2f" if abs(value) < 100 else ".0f"))
