"""OpenAI's Chat Completions wire format: requests checked and normalised, replies and stream chunks built.

A request is checked before anything is generated, and everything the endpoint cannot honour is refused with
OpenAI's error body (``{"error": {"message", "type", "param", "code"}}``) naming what was expected: ``n`` other
than 1, ``stop`` sequences, non-text content parts. Sampling parameters the client sends (``temperature``,
``top_p``, ``seed``, penalties) are accepted and not used: the trainer samples at its own temperature, since the
logprobs it trains on must be those of the distribution the tokens were drawn from.

A reply's tool calls are parsed from the model's text with the parser the envs use
(:func:`agentgym_envs.actions.parse_action`): each well-formed ``<tool_call>`` block becomes an OpenAI
``tool_calls`` entry and leaves the message's ``content``, and an ``<answer>`` becomes a call of the ``answer``
tool when the request offers it (the tool protocols' final answer). A request without ``tools`` gets the text
as it was generated.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_envs.actions import ANSWER_TOOL, action_text, parse_action

ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.DOTALL)


class RequestError(Exception):
    """A request the endpoint refuses, as OpenAI's error body.

    Args:
        status: The HTTP status (400 bad request, 404 unknown episode, 409 finished or busy episode).
        message: What was wrong and what is expected.
        param: The request field at fault, if one is.
        code: A machine-readable code (``"context_length_exceeded"``, ``"episode_not_found"``, ...).
    """

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """OpenAI's error body."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class ChatRequest:
    """A checked Chat Completions request.

    Attributes:
        messages: The conversation, each message normalised (:func:`normalise_message`).
        tools: The offered tools' OpenAI function schemas (empty: none).
        stream: Reply as server-sent events.
        include_usage: Streaming: end with a usage chunk (``stream_options.include_usage``).
        max_tokens: The client's limit on generated tokens (None: the trainer's alone).
        logprobs: Return each generated token's logprob.
    """

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    logprobs: bool = False

    @property
    def tool_names(self) -> frozenset[str]:
        """Names of the offered tools."""
        return frozenset(tool["function"]["name"] for tool in self.tools)


def parse_request(body: Any) -> ChatRequest:
    """Check a decoded request body.

    Raises:
        RequestError: (400) The body is not a Chat Completions request this endpoint can serve.
    """
    if not isinstance(body, Mapping):
        raise RequestError(400, f"expected a JSON object as the request body, got {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "expected 'messages': a non-empty array of messages", param="messages")
    if body.get("n", 1) != 1:
        raise RequestError(400, f"expected 'n' to be 1 (one completion per request), got {body.get('n')!r}",
                           param="n")
    if body.get("stop"):
        raise RequestError(400, "'stop' sequences are not supported: a turn ends at the model's end of turn, "
                           "</tool_call> or </answer>", param="stop")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(_is_function_tool(tool) for tool in tools):
        raise RequestError(400, "expected 'tools': an array of {\"type\": \"function\", \"function\": {\"name\": ..., "
                           "\"parameters\": {...}}}", param="tools")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise RequestError(400, f"expected 'max_completion_tokens' / 'max_tokens' to be a positive integer, got "
                           f"{limit!r}", param="max_completion_tokens")
    options = body.get("stream_options") or {}
    return ChatRequest(messages=tuple(normalise_message(message, index) for index, message in enumerate(messages)),
                       tools=tuple(tools), stream=bool(body.get("stream")),
                       include_usage=bool(isinstance(options, Mapping) and options.get("include_usage")),
                       max_tokens=limit, logprobs=bool(body.get("logprobs")))


def _is_function_tool(tool: Any) -> bool:
    return (isinstance(tool, Mapping) and tool.get("type", "function") == "function"
            and isinstance(tool.get("function"), Mapping) and isinstance(tool["function"].get("name"), str))


def normalise_message(message: Any, index: int = 0) -> dict[str, Any]:
    """A message as the endpoint keeps and compares it: ``role`` (``developer`` as ``system``), ``content`` as a
    string (text parts joined; an assistant's may be None), an assistant's ``tool_calls`` as
    ``{"id", "name", "arguments"}`` with the arguments decoded, a tool result's ``tool_call_id``.

    Raises:
        RequestError: (400) The message is not one of OpenAI's text messages.
    """
    where = f"messages[{index}]"
    if not isinstance(message, Mapping) or message.get("role") not in ROLES:
        raise RequestError(400, f"{where}: expected an object with 'role' one of {ROLES}", param=where)
    role = "system" if message["role"] == "developer" else message["role"]
    content = _text_content(message.get("content"), where, optional=role == "assistant")
    normal: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        normal["tool_calls"] = [_normal_call(call, f"{where}.tool_calls[{i}]")
                                for i, call in enumerate(message.get("tool_calls") or [])]
        if content is None and not normal["tool_calls"]:
            raise RequestError(400, f"{where}: an assistant message needs 'content' or 'tool_calls'", param=where)
    if role == "tool":
        normal["tool_call_id"] = message.get("tool_call_id")
    return normal


def _text_content(content: Any, where: str, *, optional: bool) -> str | None:
    if content is None and optional:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, Mapping) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str) for part in content):
        return "".join(part["text"] for part in content)
    raise RequestError(400, f"{where}.content: expected a string or an array of text parts "
                       "({\"type\": \"text\", \"text\": ...}); images, audio and files are not supported",
                       param=f"{where}.content")


def _normal_call(call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise RequestError(400, f"{where}: expected {{\"id\": ..., \"type\": \"function\", \"function\": "
                           "{\"name\": ..., \"arguments\": \"<JSON>\"}}", param=where)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: compared as the text it is
            arguments = json.loads(arguments) if arguments.strip() else {}
    return {"id": call.get("id"), "name": function["name"], "arguments": arguments}


@dataclass(frozen=True)
class Reply:
    """What the model said in one turn, in OpenAI's terms.

    Attributes:
        text: The decoded turn as generated (without the end-of-turn token).
        content: The message's content: the text less its tool calls (None when nothing is left).
        tool_calls: ``{"id", "name", "arguments"}`` per parsed call (arguments decoded).
        finish_reason: ``"tool_calls"``, ``"stop"`` or ``"length"``.
        token_ids: The generated ids.
        logprobs: Their sampling logprobs.
        prompt_tokens: Tokens of the context the turn continued.
    """

    text: str
    content: str | None
    tool_calls: tuple[dict[str, Any], ...]
    finish_reason: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    prompt_tokens: int = 0
    tokens: tuple[str, ...] = field(default=(), repr=False)

    def message(self) -> dict[str, Any]:
        """The reply as the normalised assistant message the endpoint expects to see again in the history."""
        return {"role": "assistant", "content": self.content, "tool_calls": [dict(call) for call in self.tool_calls]}


def make_reply(text: str, *, tool_names: frozenset[str], call_id_prefix: str, hit_limit: bool) -> Reply:
    """Split a generated turn into content and tool calls (only when the request offered tools)."""
    if not tool_names:
        return Reply(text=text, content=text, tool_calls=(), finish_reason="length" if hit_limit else "stop")
    calls, content = [], text
    for block in TOOL_CALL_BLOCK.finditer(text):
        parsed = parse_action(block.group(0)).tool_calls
        if parsed:
            calls.append({"name": parsed[0].name, "arguments": parsed[0].arguments})
            content = content.replace(block.group(0), "", 1)
    answer = parse_action(text).answer
    if answer is not None and ANSWER_TOOL in tool_names:
        calls.append({"name": ANSWER_TOOL, "arguments": {"answer": answer}})
        content = ANSWER_BLOCK.sub("", content, count=1)
    calls = [{"id": f"{call_id_prefix}_{i}", **call} for i, call in enumerate(calls)]
    finish = "tool_calls" if calls else "length" if hit_limit else "stop"
    return Reply(text=text, content=content.strip() or None if calls else text, tool_calls=tuple(calls),
                 finish_reason=finish)


def template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A normalised message as chat templates take it: an assistant's tool calls in transformers' form (arguments
    as an object), its content a string."""
    if message["role"] != "assistant":
        return {key: value for key, value in message.items() if value is not None}
    rendered: dict[str, Any] = {"role": "assistant", "content": message["content"] or ""}
    if message["tool_calls"]:
        rendered["tool_calls"] = [{"id": call["id"], "type": "function",
                                   "function": {"name": call["name"], "arguments": call["arguments"]}}
                                  for call in message["tool_calls"]]
    return rendered


def _wire_calls(reply: Reply) -> list[dict[str, Any]]:
    return [{"id": call["id"], "type": "function",
             "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
            for call in reply.tool_calls]


def _wire_logprobs(reply: Reply) -> dict[str, Any]:
    return {"content": [{"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}
                        for token, logprob in zip(reply.tokens, reply.logprobs, strict=True)], "refusal": None}


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": len(reply.token_ids),
            "total_tokens": reply.prompt_tokens + len(reply.token_ids)}


def completion_body(reply: Reply, *, completion_id: str, model: str, logprobs: bool) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = _wire_calls(reply)
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason,
                         "logprobs": _wire_logprobs(reply) if logprobs else None}],
            "usage": _usage(reply)}


def completion_chunks(reply: Reply, *, completion_id: str, model: str, logprobs: bool,
                      include_usage: bool) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed reply: the role, the content, each tool call, the
    finish reason, and the usage when asked for."""
    created = int(time.time())

    def chunk(delta: Mapping[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": dict(delta), "finish_reason": finish, "logprobs": None, **extra}
        return {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    if reply.content:
        yield chunk({"content": reply.content}, logprobs=_wire_logprobs(reply) if logprobs else None)
    for index, call in enumerate(_wire_calls(reply)):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [], "usage": _usage(reply)}


def call_action(name: str, arguments: Mapping[str, Any] | str) -> str:
    """The env action of one tool call of an agent program (``arguments`` as a mapping or OpenAI's JSON string): a
    ``<tool_call>`` block, or the ``<answer>`` of an ``answer`` call; a call that is not well formed goes to the env
    as its JSON, for the env to say what is wrong with it."""
    if isinstance(arguments, str) and not arguments.strip():
        arguments = {}
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return action_text(call, parse_action(call))


def models_body(model: str) -> dict[str, Any]:
    """The ``/v1/models`` list: the one policy."""
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "agentrl"}]}


def same_history(sent: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]]) -> bool:
    """The normalised messages ``sent`` begin with ``kept`` (what the endpoint recorded), message for message:
    an assistant's content compares stripped and tool calls by name and arguments (ids are the client's to keep)."""
    if len(sent) < len(kept):
        return False
    return all(message_key(a) == message_key(b) for a, b in zip(sent, kept, strict=False))


def message_key(message: Mapping[str, Any]) -> tuple:
    """What identifies a normalised message when histories are compared (:func:`same_history`)."""
    if message["role"] == "assistant":
        return ("assistant", (message["content"] or "").strip(),
                tuple((call["name"], json.dumps(call["arguments"], sort_keys=True)) for call in message["tool_calls"]))
    return (message["role"], message["content"], message.get("tool_call_id"))
