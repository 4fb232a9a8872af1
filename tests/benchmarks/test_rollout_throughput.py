"""Rollout-throughput benchmark: a small run of every row, and the pieces TRL's tool loop needs from the tiny model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

from benchmarks.rollout_throughput import (
    ROWS,
    Row,
    Settings,
    ToolLatency,
    ratios,
    run_benchmark,
    trl_tokenizer,
)
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module", autouse=True)
def quiet_trl_experimental() -> Iterator[None]:
    """TRL warns that ``environment_factory`` is experimental; warnings are errors in this suite."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.mark.slow
def test_every_row_plays_every_episode_with_real_tool_calls():
    # Builds and caches the warm-started model the first time (minutes); seconds afterwards.
    settings = Settings(tasks=2, group=2, max_turns=2)
    report = run_benchmark(settings, latencies_ms=(0.0, 20.0), repeats=1)

    assert [(row.tool_latency_ms, row.name) for row in report.rows] == [(ms, name) for ms in (0.0, 20.0)
                                                                         for name in ROWS]
    for row in report.rows:
        assert row.episodes == 4, row  # every episode came back, finished
        assert row.answered > 0 and row.tool_calls > 0 and row.generated_tokens > 0, row  # real tool use
        assert row.episodes <= row.turns <= row.episodes * settings.max_turns, row
        assert row.wall_s > 0 and row.episodes_per_s > 0 and row.tokens_per_s > 0 and row.tool_calls_per_s > 0
    assert set(report.ratios) == {"0", "20"}
    assert all(set(values) == {"B/A", "A/C", "B/C"} and min(values.values()) > 0 for values in report.ratios.values())


def test_ratios_are_of_episodes_per_second_per_latency():
    rows = [Row.measured(name, 0, 4, 4, 8, 4, 100, wall_s) for name, wall_s in zip(ROWS, (2.0, 1.0, 4.0), strict=True)]
    rows.append(Row.measured("engine-sequential", 50, 4, 4, 8, 4, 100, 3.0))  # alone at its latency: no ratio
    assert ratios(rows) == {"0": {"B/A": 2.0, "A/C": 2.0, "B/C": 4.0}, "50": {}}


class CountingEnv(gym.Env):
    """Reports ``calls`` tool calls on every step."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "obs", 0.0, False, False, {"tool_calls": [{"name": "search"}] * self.calls}


@pytest.mark.parametrize("calls", [0, 2])
def test_tool_latency_sleeps_once_per_tool_call(calls: int, monkeypatch: pytest.MonkeyPatch):
    slept: list[float] = []
    monkeypatch.setattr("benchmarks.rollout_throughput.time.sleep", slept.append)
    ToolLatency(CountingEnv(calls), 0.05).step("<tool_call>...</tool_call>")
    assert slept == [pytest.approx(0.05 * calls)]


def test_trl_tokenizer_renders_plain_turns_as_the_tiny_template_and_parses_env_actions():
    from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

    _, tokenizer = load_or_build_tiny_model()
    copied = trl_tokenizer(tokenizer)
    assert supports_tool_calling(copied) and is_chat_template_prefix_preserving(copied)
    assert not supports_tool_calling(tokenizer)  # why TRL needs the copy
    messages = [{"role": "user", "content": "How many people live in Maemton?"}]
    prompt = copied.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt == tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    action = '<tool_call>{"name": "search", "arguments": {"query": "Maemton", "k": 1}}</tool_call>'
    prompt_ids = copied.encode(prompt, add_special_tokens=False)
    parsed = parse_response(copied, copied.encode(action, add_special_tokens=False), prefix=prompt_ids)
    assert parsed["tool_calls"] == [{"type": "function",
                                     "function": {"name": "search", "arguments": {"query": "Maemton", "k": 1}}}]
    rendered = copied.apply_chat_template([*messages, {"role": "assistant", "content": "", "tool_calls":
                                                       parsed["tool_calls"]}], tokenize=False)
    assert action in rendered  # the call goes back into the context as the env's own action text
