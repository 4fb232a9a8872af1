"""Structured actions: tool calls, lists of them and OpenAI assistant messages, in the parser and in every env."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.actions import ANSWER_TOOL, action_text, format_error_observation, parse_action
from agentgym_envs.registration import env_spec, sandbox_kwargs
from tasks import load_split
from tests.conftest import require_backend

SEARCH = {"name": "search", "arguments": {"query": "Maemton"}}

WELL_FORMED = [
    # one call, arguments as an object
    (SEARCH, [("search", {"query": "Maemton"})], None),
    # OpenAI's shape, arguments as a JSON string, with an id
    ({"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}},
     [("search", {"query": "x"})], None),
    # a list of calls keeps its order
    ([SEARCH, {"name": "open", "arguments": {"doc_id": "d1"}}],
     [("search", {"query": "Maemton"}), ("open", {"doc_id": "d1"})], None),
    # an assistant message with tool_calls (its content is free text)
    ({"role": "assistant", "content": "Let me look.", "tool_calls": [SEARCH]}, [("search", {"query": "Maemton"})],
     None),
    # an assistant message without tool_calls: its content is the text action
    ({"role": "assistant", "content": "<think>easy</think><answer> Paris </answer>"}, [], "Paris"),
    # the answer as a tool call
    ({"name": ANSWER_TOOL, "arguments": {"answer": " 42 "}}, [], "42"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "answer", "arguments": '{"answer": "7"}'}}]}, [], "7"),
]


@pytest.mark.parametrize(("action", "calls", "answer"), WELL_FORMED)
def test_structured_actions_parse(action, calls, answer):
    parsed = parse_action(action)
    assert parsed.well_formed, parsed.errors
    assert [(call.name, call.arguments) for call in parsed.tool_calls] == calls
    assert parsed.answer == answer


def test_a_tool_call_id_is_kept_and_the_text_is_the_hermes_form():
    action = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}]}
    parsed = parse_action(action)
    assert parsed.tool_calls[0].id == "call_9"
    assert action_text(action, parsed) == '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
    answer = {"name": "answer", "arguments": {"answer": "x"}}
    assert action_text(answer, parse_action(answer)) == "<answer>x</answer>"


MALFORMED = [
    # not an assistant message
    ({"role": "user", "content": "hi"}, 'expected a message of role "assistant"'),
    # tool_calls that are not a list
    ({"role": "assistant", "tool_calls": "search"}, 'expected "tool_calls" to be a list, got a string'),
    # content of the wrong type
    ({"role": "assistant", "content": 3}, 'expected the message\'s "content" to be a string or null'),
    # an unknown message key
    ({"role": "assistant", "content": "x", "tools": []}, "unexpected message keys ['tools']"),
    # a call without a name
    ({"arguments": {}}, 'expected "name" to be a non-empty string, got null'),
    # arguments that are not an object
    ({"name": "search", "arguments": [1]}, 'expected "arguments" to be a JSON object, got an array'),
    # arguments as a string that is not JSON
    ({"name": "search", "arguments": "{oops"}, '"arguments" is a string that is not valid JSON'),
    # an OpenAI call of another type
    ({"id": "x", "type": "code", "function": {"name": "search"}}, 'expected {"id": ..., "type": "function"'),
    # a list item that is not an object
    ([SEARCH, 3], "tool call #2: expected an object"),
    # the answer tool with the wrong arguments
    ({"name": "answer", "arguments": {"text": "x"}}, 'the answer tool call: expected arguments {"answer": "<text>"}'),
    # the answer next to a tool call
    ([SEARCH, {"name": "answer", "arguments": {"answer": "x"}}], "expected tool calls or an answer, not both"),
    # two answers
    ([{"name": "answer", "arguments": {"answer": "x"}}] * 2, "found 2 answer call blocks"),
    # no call at all
    ([], "found no tool call and no answer call"),
    # too many calls
    ([SEARCH] * 5, "found 5 tool calls; expected at most 4"),
    # something that is no action at all
    (3.5, "expected the action as a string or a structured action, got float"),
    # too long
    ({"name": "search", "arguments": {"query": "x" * 40_000}}, "characters long as JSON; expected at most 32768"),
]


@pytest.mark.parametrize(("action", "message"), MALFORMED)
def test_malformed_structured_actions_are_explained(action, message):
    parsed = parse_action(action)
    assert not parsed.well_formed
    assert any(message in error for error in parsed.errors), parsed.errors
    assert message in format_error_observation(parsed.errors)


def as_message(text: str, turn: int) -> dict[str, Any]:
    """The OpenAI assistant message of a text action (its calls with ids, the answer as a tool call); a malformed
    action stays its text as ``content``."""
    parsed = parse_action(text)
    if not parsed.well_formed:
        return {"role": "assistant", "content": text}
    calls = ([(ANSWER_TOOL, {"answer": parsed.answer})] if parsed.answer is not None
             else [(call.name, call.arguments) for call in parsed.tool_calls])
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"t{turn}_{index}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for index, (name, arguments) in enumerate(calls)]}


def play(env: gym.Env, policy, task, structured: bool) -> list[tuple[str, float, bool, bool, list[dict[str, str]]]]:
    """Play ``policy`` on ``task``; each action sent as text or as the message of the same text."""
    observation, info = env.reset(seed=0, options={"task": task})
    policy.begin(task, observation, info)
    steps = []
    for turn in range(50):
        text = policy.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(as_message(text, turn) if structured else text)
        steps.append((observation, reward, terminated, truncated, info["tool_messages"]))
        if terminated or truncated:
            return steps
    raise AssertionError("the episode did not end in 50 turns")


def check_text_and_messages_agree(env_id: str, tasks, **kwargs: Any) -> None:
    spec = env_spec(env_id)
    env = gym.make(env_id, **kwargs)
    rewards = {"oracle": 0.0, "random": 0.0}
    try:
        for name in ("oracle", "random"):
            for task in tasks:
                text = play(env, spec.policy(name, seed=1), task, structured=False)
                messages = play(env, spec.policy(name, seed=1), task, structured=True)
                assert [step[:4] for step in messages] == [step[:4] for step in text], (name, task.id)
                for turn, (*_, tool_messages) in enumerate(messages):
                    assert all(message["role"] == "tool" and message["tool_call_id"].startswith(f"t{turn}_")
                               for message in tool_messages)
                rewards[name] += text[-1][1]
        assert rewards["oracle"] > 0  # the oracle scores, so equal rewards compare real verdicts
    finally:
        env.close()


def test_search_episodes_score_alike_in_text_and_in_messages():
    check_text_and_messages_agree("agentrl/Search-v0", load_split("Search", "test")[:3])


@pytest.mark.bwrap
def test_python_sandbox_episodes_score_alike_in_text_and_in_messages(backend_problems):
    require_backend("bwrap", backend_problems)
    env_id = "agentrl/PythonSandbox-v0"
    check_text_and_messages_agree(env_id, load_split("PythonSandbox", "test")[:2], **sandbox_kwargs(env_id, "bwrap"))


def test_tool_messages_of_a_text_action_get_generated_ids():
    env = gym.make("agentrl/Search-v0")
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step('<tool_call>{"name": "search", "arguments": {"query": "river"}}</tool_call>')
        (message,) = info["tool_messages"]
        assert message["tool_call_id"] == "call_1_0" and message["name"] == "search"
        assert message["content"].startswith("[search result (ok)]")
    finally:
        env.close()
