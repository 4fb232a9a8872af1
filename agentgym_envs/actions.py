"""Parsing of action text in the Qwen/Hermes convention.

    <think>optional reasoning</think>
    <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>
    <answer>final answer</answer>

An action holds either one or more tool calls or one answer. Text outside the tags is allowed
(many models think aloud before calling a tool) and ignored. Everything that deviates from the
convention is collected as a format error with a message that says what was wrong and what is
expected; parsing never raises.

A structured action is taken as well (:data:`StructuredAction`): one tool call ``{"name", "arguments"}``, an
OpenAI tool call ``{"id", "type": "function", "function": {"name", "arguments"}}``, a list of either, or an OpenAI
assistant message ``{"role": "assistant", "content": ..., "tool_calls": [...]}`` (its ``content`` is parsed as
text when it has no ``tool_calls``). Over structured actions the final answer is a tool call too:
``{"name": "answer", "arguments": {"answer": "..."}}`` (:data:`ANSWER_TOOL`). :func:`action_text` renders a
structured action as the text above, which is what a trajectory records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TAGS = ("think", "tool_call", "answer")
TAG_PATTERN = re.compile(r"</?(think|tool_call|answer)>")
EXPECTED_FORMAT = (
    'Expected either one or more <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> blocks, '
    "or one <answer>...</answer>; an optional <think>...</think> may come first."
)
EXPECTED_STRUCTURED = (
    'Expected the action as text, a tool call {"name": ..., "arguments": {...}} (or OpenAI\'s {"type": "function", '
    '"function": {...}}), a list of tool calls, or an assistant message {"role": "assistant", "content": ..., '
    '"tool_calls": [...]}.'
)
ANSWER_TOOL = "answer"
"""The tool call that gives the final answer in a structured action (and over the tool protocols)."""
ANSWER_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ANSWER_TOOL,
        "description": "Give your final answer. This ends the episode; call it once you are sure.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string", "description": "The answer."}},
                       "required": ["answer"], "additionalProperties": False},
    },
}
"""The OpenAI function schema of :data:`ANSWER_TOOL`."""
StructuredAction = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""A tool call, a list of tool calls, or an OpenAI assistant message (see the module docstring)."""


@dataclass(frozen=True)
class ParsedToolCall:
    """A syntactically valid tool call: a name and a JSON object of arguments."""

    name: str
    arguments: dict[str, Any]
    id: str | None = field(default=None, repr=False, compare=False)
    """The call's id in a structured action (an OpenAI ``tool_call_id``), None in text."""


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


def parse_action(text: str | StructuredAction, *, max_chars: int = 32_768, max_tool_calls: int = 4) -> ParsedAction:
    """Split an action into think, tool calls and answer, collecting every format error.

    Args:
        text: The action as generated, or a structured action (:data:`StructuredAction`).
        max_chars: Longer actions are rejected without being parsed.
        max_tool_calls: Most tool calls accepted in one action.

    Returns:
        The parsed action. When ``errors`` is non-empty the env must not act on it.

    Example:
        >>> parse_action('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>').tool_calls
        (ParsedToolCall(name='python', arguments={'code': '1'}),)
    """
    if isinstance(text, Mapping | list | tuple):
        return _parse_structured(text, max_chars=max_chars, max_tool_calls=max_tool_calls)
    if not isinstance(text, str):
        return ParsedAction(errors=(f"expected the action as a string or a structured action, got "
                                    f"{type(text).__name__}. {EXPECTED_STRUCTURED}",))
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


def _parse_structured(action: StructuredAction, *, max_chars: int, max_tool_calls: int) -> ParsedAction:
    """Parse a tool call, a list of tool calls or an assistant message (never raises)."""
    size = len(json.dumps(action, default=repr))
    if size > max_chars:
        return ParsedAction(errors=(f"the action is {size} characters long as JSON; expected at most {max_chars}.",))
    if isinstance(action, Mapping) and "role" in action:
        return _parse_message(action, max_chars=max_chars, max_tool_calls=max_tool_calls)
    return _parse_call_list([action] if isinstance(action, Mapping) else list(action), max_tool_calls)


def _parse_message(message: Mapping[str, Any], *, max_chars: int, max_tool_calls: int) -> ParsedAction:
    """An OpenAI assistant message: its ``tool_calls``, or its ``content`` as text when it has none."""
    if message.get("role") != "assistant":
        return ParsedAction(errors=(f'expected a message of role "assistant", got {message.get("role")!r}. '
                                    f"{EXPECTED_STRUCTURED}",))
    extra = sorted(set(message) - {"role", "content", "tool_calls", "reasoning_content", "name"})
    if extra:
        return ParsedAction(errors=(f"unexpected message keys {extra}; expected role, content and tool_calls.",))
    content, calls = message.get("content"), message.get("tool_calls")
    if content is not None and not isinstance(content, str):
        return ParsedAction(errors=(f'expected the message\'s "content" to be a string or null, got '
                                    f"{_json_type(content)}.",))
    if not calls:
        return parse_action(content or "", max_chars=max_chars, max_tool_calls=max_tool_calls)
    if not isinstance(calls, list):
        return ParsedAction(errors=(f'expected "tool_calls" to be a list, got {_json_type(calls)}.',))
    return _parse_call_list(calls, max_tool_calls)


def _parse_call_list(items: list[Any], max_tool_calls: int) -> ParsedAction:
    """Tool calls in either shape; a call of :data:`ANSWER_TOOL` is the answer."""
    calls, errors = [], []
    for index, item in enumerate(items):
        call, error = _structured_call(item, index)
        if error:
            errors.append(error)
        else:
            calls.append(call)
    answers = [call for call in calls if call.name == ANSWER_TOOL]
    for call in answers:
        if set(call.arguments) != {"answer"} or not isinstance(call.arguments["answer"], str):
            errors.append(f'the {ANSWER_TOOL} tool call: expected arguments {{"answer": "<text>"}}, got '
                          f"{json.dumps(call.arguments, default=repr)[:200]}.")
    tool_calls = [call for call in calls if call.name != ANSWER_TOOL]
    errors += _structure_errors(0, len(answers), len(items) - len(answers), max_tool_calls)
    answer = answers[0].arguments.get("answer") if len(answers) == 1 and not errors else None
    worded = tuple(error.replace("<tool_call>", "tool call").replace("<answer>", f"{ANSWER_TOOL} call")
                   for error in errors)  # the structure errors name the text's tags
    return ParsedAction(tool_calls=tuple(tool_calls), answer=answer.strip() if answer is not None else None,
                        errors=worded)


def _structured_call(item: Any, index: int) -> tuple[ParsedToolCall | None, str | None]:
    """One tool call given as ``{"name", "arguments"}`` or as OpenAI's ``{"id", "type", "function"}``."""
    where = f"tool call #{index + 1}"
    if not isinstance(item, Mapping):
        return None, f'{where}: expected an object {{"name": ..., "arguments": {{...}}}}, got {_json_type(item)}.'
    call_id = item.get("id")
    if "function" in item:
        extra = sorted(set(item) - {"id", "type", "function"})
        if extra or item.get("type", "function") != "function" or not isinstance(item["function"], Mapping):
            return None, (f'{where}: expected {{"id": ..., "type": "function", "function": {{"name": ..., '
                          f'"arguments": ...}}}}, got keys {sorted(item)}.')
        item = item["function"]
    elif "id" in item:
        item = {key: value for key, value in item.items() if key != "id"}
    call, error = _parse_tool_call(json.dumps(dict(item), default=repr), index)
    if call is None:
        return None, error
    return ParsedToolCall(name=call.name, arguments=call.arguments,
                          id=call_id if isinstance(call_id, str) else None), None


def action_text(action: str | StructuredAction, parsed: ParsedAction) -> str:
    """The text a trajectory records for ``action``: itself when it is text, else the text of what it holds
    (its tool calls as ``<tool_call>`` blocks, its answer as ``<answer>``), or its JSON when it is malformed."""
    if isinstance(action, str):
        return action
    if not parsed.well_formed:
        return json.dumps(action, default=repr)
    if parsed.answer is not None:
        return answer_action(parsed.answer)
    return "\n".join(tool_call_action(call.name, **call.arguments) for call in parsed.tool_calls)


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def format_error_observation(errors: tuple[str, ...] | list[str]) -> str:
    """The observation that answers a malformed action."""
    lines = "\n".join(f"- {error}" for error in errors)
    return f"Your action could not be used:\n{lines}\n{EXPECTED_FORMAT}"
