"""Property, for every registered id: any action text gives a valid step and never raises.

Parametrized over :data:`agentgym_envs.registration.SPECS`, so a newly registered environment is
fuzzed automatically. Every env that runs agent code is made with ``sandbox=<backend>``, once per real
backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym_envs.registration import registered_ids, sandbox_kwargs

INFO_KEYS = {"turn", "tool", "tool_calls", "ok", "latency_s", "infra_error", "format_errors", "task_id"}
TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>"]
VALUES = st.one_of(st.text(max_size=30), st.integers(), st.none(), st.lists(st.integers(), max_size=2))
ARGUMENTS = st.dictionaries(st.sampled_from(["code", "query", "doc_id", "k", "page", "x"]), VALUES, max_size=3)


def tool_calls(names: list[str]) -> st.SearchStrategy[str]:
    """Calls to the env's own tools and to unknown ones, with arbitrary arguments."""
    name = st.one_of(st.sampled_from(names), st.text(max_size=8))
    payload = st.fixed_dictionaries({"name": name, "arguments": ARGUMENTS})
    return payload.map(lambda p: f"<tool_call>{json.dumps(p)}</tool_call>")


def actions(names: list[str]) -> st.SearchStrategy[str]:
    """Arbitrary text, tool calls and tag soup."""
    return st.one_of(
        st.text(max_size=200),
        tool_calls(names),
        st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=20), tool_calls(names)), max_size=8).map("".join),
        st.text(max_size=30).map(lambda text: f"<answer>{text}</answer>"),
    )


@pytest.fixture(scope="module")
def made() -> Iterator[dict[tuple[str, str], gym.Env]]:
    """One env per (id, backend), made on first use and closed with the module."""
    envs: dict[tuple[str, str], gym.Env] = {}
    yield envs
    for env in envs.values():
        env.close()


@pytest.mark.parametrize("env_id", registered_ids())
def test_any_action_gives_a_valid_step(env_id: str, backend: str, made: dict[tuple[str, str], gym.Env]) -> None:
    env = made.get((env_id, backend)) or made.setdefault((env_id, backend),
                                                       gym.make(env_id, **sandbox_kwargs(env_id, backend)))
    _, info = env.reset(seed=0)
    names = [tool["function"]["name"] for tool in info["tools"]]

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(steps=st.lists(actions(names), min_size=1, max_size=3), seed=st.integers(0, 2**16))
    def fuzz(steps: list[str], seed: int) -> None:
        observation, _ = env.reset(seed=seed)
        assert env.observation_space.contains(observation)
        for action in steps:
            observation, reward, terminated, truncated, info = env.step(action)
            assert env.observation_space.contains(observation)
            assert type(reward) is float
            assert info.keys() >= INFO_KEYS
            assert not info["infra_error"]
            if terminated or truncated:
                break

    fuzz()
