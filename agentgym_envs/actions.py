"""Parsing of action text in the Qwen/Hermes convention.

    <think>optional reasoning</think>
    <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>
    <answer>final answer</answer>

An action holds either one or more tool calls or one answer. Text outside the tags is allowed
(many models think aloud before calling a tool) and ignored. Everything that deviates from the
convention is collected as a format error with a message that says what was wrong and what is
expected; parsing never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TAGS = ("think", "tool_call", "answer")
TAG_PATTERN = re.compile(r"</?(think|tool_call|answer)>")
EXPECTED_FORMAT = (
    'Expected either one or more <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> blocks, '
    "or one <answer>...</answer>; an optional <think>...</think> may come first."
)


@dataclass(frozen=True)
class ParsedToolCall:
    """A syntactically valid tool call: a name and a JSON object of arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParsedAction:
    """What an action contained.

    Attributes:
        think: Content of ``<think>``, if any.
        tool_calls: Well-formed tool calls, in order.
        answer: Content of ``<answer>``, stripped, if exactly one was given.
        errors: One message per format error; empty when the action is well formed.
    """

    think: str | None = None
    tool_calls: tuple[ParsedToolCall, ...] = ()
    answer: str | None = None
    errors: tuple[str, ...] = field(default=())

    @property
    def well_formed(self) -> bool:
        """True when the action has no format error."""
        return not self.errors


def tool_call_action(name: str, **arguments: Any) -> str:
    """The action text of one tool call, e.g. ``tool_call_action("search", query="Maemton")``."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def answer_action(answer: str) -> str:
    """The action text of a final answer."""
    return f"<answer>{answer}</answer>"


def parse_action(text: str, *, max_chars: int = 32_768, max_tool_calls: int = 4) -> ParsedAction:
    """Split an action into think, tool calls and answer, collecting every format error.

    Args:
        text: The action as generated.
        max_chars: Longer actions are rejected without being parsed.
        max_tool_calls: Most tool calls accepted in one action.

    Returns:
        The parsed action. When ``errors`` is non-empty the env must not act on it.

    Example:
        >>> parse_action('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>').tool_calls
        (ParsedToolCall(name='python', arguments={'code': '1'}),)
    """
    if not isinstance(text, str):
        return ParsedAction(errors=(f"expected the action as a string, got {type(text).__name__}.",))
    if len(text) > max_chars:
        return ParsedAction(errors=(f"the action is {len(text)} characters long; expected at most {max_chars}.",))
    blocks, errors = _split_blocks(text)
    thinks = [body for tag, body in blocks if tag == "think"]
    answers = [body.strip() for tag, body in blocks if tag == "answer"]
    calls = []
    for index, body in enumerate(body for tag, body in blocks if tag == "tool_call"):
        call, error = _parse_tool_call(body, index)
        if error:
            errors.append(error)
        else:
            calls.append(call)
    errors += _structure_errors(len(thinks), len(answers), len([b for b in blocks if b[0] == "tool_call"]),
                                max_tool_calls)
    return ParsedAction(
        think=thinks[0] if thinks else None,
        tool_calls=tuple(calls),
        answer=answers[0] if len(answers) == 1 else None,
        errors=tuple(errors),
    )


def _split_blocks(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Find ``<tag>...</tag>`` blocks; the content of a block is opaque until its closing tag."""
    blocks: list[tuple[str, str]] = []
    errors: list[str] = []
    position = 0
    while (match := TAG_PATTERN.search(text, position)) is not None:
        tag = match.group(1)
        if match.group(0).startswith("</"):
            errors.append(f"found </{tag}> without a matching <{tag}> before it.")
            position = match.end()
            continue
        close = text.find(f"</{tag}>", match.end())
        if close < 0:
            errors.append(f"<{tag}> is never closed; expected </{tag}> after its content.")
            break
        blocks.append((tag, text[match.end():close]))
        position = close + len(tag) + 3
    return blocks, errors


def _structure_errors(thinks: int, answers: int, calls: int, max_tool_calls: int) -> list[str]:
    errors = []
    if thinks > 1:
        errors.append(f"found {thinks} <think> blocks; expected at most one.")
    if answers > 1:
        errors.append(f"found {answers} <answer> blocks; expected exactly one final answer.")
    if answers and calls:
        errors.append("found both <tool_call> and <answer>; expected tool calls or an answer, not both "
                      "(answer after you have seen the tool results).")
    if calls > max_tool_calls:
        errors.append(f"found {calls} tool calls; expected at most {max_tool_calls} per action.")
    if not answers and not calls:
        errors.append("found no <tool_call> and no <answer>.")
    return errors


def _parse_tool_call(body: str, index: int) -> tuple[ParsedToolCall | None, str | None]:
    """Parse the JSON of one ``<tool_call>`` block."""
    where = f"tool call #{index + 1}"
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, (f"{where} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                      'expected {"name": "<tool>", "arguments": {...}}.')
    if not isinstance(payload, dict):
        got = _json_type(payload)
        return None, f'{where}: expected a JSON object {{"name": ..., "arguments": {{...}}}}, got {got}.'
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        return None, f'{where}: expected "name" to be a non-empty string, got {_json_type(name)}.'
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):  # some templates emit the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, f'{where}: "arguments" is a string that is not valid JSON; expected an object.'
    if not isinstance(arguments, dict):
        return None, f'{where}: expected "arguments" to be a JSON object, got {_json_type(arguments)}.'
    extra = sorted(set(payload) - {"name", "arguments"})
    if extra:
        return None, f'{where}: unexpected keys {extra}; expected only "name" and "arguments".'
    return ParsedToolCall(name=name, arguments=arguments), None


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def format_error_observation(errors: tuple[str, ...] | list[str]) -> str:
    """The observation that answers a malformed action."""
    lines = "\n".join(f"- {error}" for error in errors)
    return f"Your action could not be used:\n{lines}\n{EXPECTED_FORMAT}"
