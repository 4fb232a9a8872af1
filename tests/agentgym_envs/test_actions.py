"""Action parsing: well-formed actions, and a table of malformed ones with the message each gets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym_envs.actions import EXPECTED_FORMAT, format_error_observation, parse_action

CALL = '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'


def test_tool_call_with_think_and_free_text():
    parsed = parse_action(f"<think>compute it</think>Let me run code.\n{CALL}")
    assert parsed.well_formed
    assert parsed.think == "compute it"
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("python", {"code": "print(1)"})]
    assert parsed.answer is None


def test_answer_is_stripped():
    parsed = parse_action("<answer>  \\frac{1}{2} </answer>")
    assert parsed.well_formed and parsed.answer == "\\frac{1}{2}"


def test_several_tool_calls_keep_order():
    second = CALL.replace("print(1)", "print(2)")
    parsed = parse_action(CALL + "\n" + second)
    assert [c.arguments["code"] for c in parsed.tool_calls] == ["print(1)", "print(2)"]


def test_arguments_given_as_json_string_are_accepted():
    parsed = parse_action('<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"1\\"}"}</tool_call>')
    assert parsed.well_formed and parsed.tool_calls[0].arguments == {"code": "1"}


def test_tags_inside_a_block_are_content():
    # an <answer> inside the JSON string is code, not an answer
    parsed = parse_action('<tool_call>{"name": "python", "arguments": {"code": "s = \'<answer>\'"}}</tool_call>')
    assert parsed.well_formed and parsed.answer is None


MALFORMED = [
    # empty action
    ("", "found no <tool_call> and no <answer>"),
    # plain prose
    ("I think the answer is 4.", "found no <tool_call> and no <answer>"),
    # bad JSON
    ('<tool_call>{"name": "python", "arguments": {code: 1}}</tool_call>', "is not valid JSON"),
    # JSON that is not an object
    ("<tool_call>[1, 2]</tool_call>", "expected a JSON object"),
    # missing name
    ('<tool_call>{"arguments": {}}</tool_call>', 'expected "name" to be a non-empty string, got null'),
    # name of the wrong type
    ('<tool_call>{"name": 3, "arguments": {}}</tool_call>', 'expected "name" to be a non-empty string, got a number'),
    # arguments of the wrong type
    ('<tool_call>{"name": "python", "arguments": [1]}</tool_call>',
     'expected "arguments" to be a JSON object, got an array'),
    # arguments as a string that is not JSON
    ('<tool_call>{"name": "python", "arguments": "code=1"}</tool_call>',
     '"arguments" is a string that is not valid JSON'),
    # extra keys
    ('<tool_call>{"name": "python", "arguments": {}, "id": 1}</tool_call>', "unexpected keys ['id']"),
    # unclosed tool call
    ('<tool_call>{"name": "python"}', "<tool_call> is never closed"),
    # unclosed answer
    ("<answer>42", "<answer> is never closed"),
    # stray closing tag
    ("</answer>", "found </answer> without a matching <answer>"),
    # two answers
    ("<answer>3</answer><answer>4</answer>", "found 2 <answer> blocks"),
    # two thinks
    ("<think>a</think><think>b</think><answer>1</answer>", "found 2 <think> blocks"),
    # both a tool call and an answer
    (CALL + "<answer>1</answer>", "found both <tool_call> and <answer>"),
    # too many tool calls
    (CALL * 5, "found 5 tool calls; expected at most 4"),
    # one megabyte of text
    ("x" * (1 << 20), "characters long; expected at most 32768"),
]


@pytest.mark.parametrize(("action", "message"), MALFORMED)
def test_malformed_action_is_explained(action, message):
    parsed = parse_action(action)
    assert not parsed.well_formed
    assert parsed.tool_calls == () or parsed.errors  # never acted on
    assert any(message in error for error in parsed.errors), parsed.errors
    observation = format_error_observation(parsed.errors)
    assert message in observation and EXPECTED_FORMAT in observation


def test_non_string_action_is_an_error_not_a_crash():
    parsed = parse_action(b"<answer>1</answer>")  # type: ignore[arg-type]
    (error,) = parsed.errors
    assert error.startswith("expected the action as a string or a structured action, got bytes.")


PIECES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>", "{", "}",
          '"name"', '"arguments"', ":", ",", '"python"', "[", "]", "null", "\\", '"']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=30).map("".join))
def test_any_text_parses_without_raising(text):
    parsed = parse_action(text)
    # either something to act on, or a reason why not: never both silent and empty
    assert parsed.errors or parsed.tool_calls or parsed.answer is not None
    assert not (parsed.tool_calls and parsed.answer is not None and not parsed.errors)
