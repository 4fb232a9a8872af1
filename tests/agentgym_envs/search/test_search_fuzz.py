"""Property: any action to Search-v0 (through ``gym.make``) gives a valid step and never raises."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym_envs  # noqa: F401  (registers the agentrl ids)

STEP_INFO_KEYS = {"turn", "tool", "tool_calls", "ok", "latency_s", "infra_error", "format_errors", "task_id"}
FINAL_INFO_KEYS = {"reward_components", "answer"}
TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
DOC_IDS = st.one_of(st.sampled_from(["doc-000001", "doc-999999", "doc-1", "", " ", "../etc/passwd"]),
                    st.text(max_size=15))
NUMBERS = st.one_of(st.integers(), st.sampled_from([0, -1, 21, 10**9, 2**63, 10**100]), st.floats(),
                    st.text(max_size=4))


def tool_calls() -> st.SearchStrategy[str]:
    """Near-miss tool calls: random names, argument names, types, huge k, unknown doc ids."""
    search = st.fixed_dictionaries({"query": st.one_of(st.text(max_size=40), JSON_VALUES)},
                                   optional={"k": NUMBERS, "extra": JSON_VALUES})
    open_ = st.fixed_dictionaries({"doc_id": st.one_of(DOC_IDS, JSON_VALUES)}, optional={"page": NUMBERS})
    named = st.one_of(
        st.tuples(st.just("search"), search),
        st.tuples(st.just("open"), open_),
        st.tuples(st.one_of(st.sampled_from(["serch", "Search", "python", ""]), st.text(max_size=8)),
                  st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=3)),
    )
    payload = named.map(lambda pair: {"name": pair[0], "arguments": pair[1]})
    encoded = st.one_of(
        payload.map(json.dumps),
        payload.map(lambda p: json.dumps({**p, "arguments": json.dumps(p["arguments"])})),  # arguments as a string
        JSON_VALUES.map(json.dumps),  # not an object
        st.text(max_size=30),  # not JSON
    )
    return encoded.map(lambda body: f"<tool_call>{body}</tool_call>")


ACTIONS = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=100),  # any unicode, surrogates excluded
    tool_calls(),
    st.lists(st.one_of(tool_calls(), st.sampled_from(TAGS), st.text(max_size=20)), max_size=8).map("".join),
    st.lists(tool_calls(), min_size=2, max_size=6).map("\n".join),  # more calls than allowed
    st.text(max_size=40).map(lambda text: f"<answer>{text}</answer>"),
    st.integers(1, 40).map(lambda n: "<answer>" * n + "x" + "</answer>" * n),  # nested tags
    st.sampled_from(["<answer>" + "y" * 40_000 + "</answer>", "\x00" * 100, "\ud800".encode("utf-8", "surrogatepass")
                     .decode("utf-8", "replace")]),
)


@pytest.fixture(scope="module")
def env(tasks, corpus, retriever):
    """Search-v0 over the test world (the module shares one env; each example resets it)."""
    instance = gym.make("agentrl/Search-v0", tasks=tasks, corpus=corpus, retriever=retriever)
    yield instance
    instance.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(ACTIONS, min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_any_action_gives_a_valid_step(env, actions, seed):
    observation, info = env.reset(seed=seed)
    assert env.observation_space.contains(observation)
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(observation)
        assert type(reward) is float
        assert info.keys() >= STEP_INFO_KEYS
        assert not info["infra_error"]
        assert info["ok"] == (not info["format_errors"] and all(call["ok"] for call in info["tool_calls"]))
        if terminated:
            assert info.keys() >= FINAL_INFO_KEYS
            assert 0.0 <= reward <= 1.0
        if terminated or truncated:
            break
