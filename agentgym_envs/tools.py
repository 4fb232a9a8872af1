"""Tools an agent can call: a JSON schema (OpenAI function format) and a Python callable.

A tool's arguments are validated against its schema before it runs; a call that fails
validation, names an unknown tool or raises an agent-caused error comes back as a failed
:class:`ToolResult` whose text says what was expected. Infrastructure faults
(any :class:`~tasks.errors.InfrastructureError`: a sandbox, a service) come back flagged ``infra_error``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

import jsonschema

from agentgym_envs.actions import ParsedToolCall
from agentgym_envs.errors import EnvConfigError
from tasks import InfrastructureError


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned.

    Attributes:
        output: Text shown to the agent.
        ok: False when the call failed (bad arguments, an exception, a limit).
        infra_error: True when the failure was the infrastructure's fault, not the agent's.
        latency_s: Wall-clock time of the call, filled in by :func:`call_tool`.
    """

    output: str
    ok: bool = True
    infra_error: bool = False
    latency_s: float = 0.0


@dataclass(frozen=True)
class Tool:
    """A callable tool with a JSON schema for its arguments.

    Attributes:
        name: Name the agent uses in ``{"name": ...}``.
        description: One or two sentences for the prompt.
        parameters: JSON schema of the arguments object (``"type": "object"``).
        fn: Called with the validated arguments as keyword arguments.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., ToolResult]

    def __post_init__(self) -> None:
        if self.parameters.get("type") != "object":
            raise EnvConfigError(f"tool {self.name!r}: expected a parameters schema of type 'object', "
                                 f"got {self.parameters.get('type')!r}")
        jsonschema.Draft202012Validator.check_schema(self.parameters)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-format schema, as chat templates expect in ``tools=``."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": dict(self.parameters)}}


def argument_errors(tool: Tool, arguments: Mapping[str, Any]) -> list[str]:
    """Schema violations of ``arguments``, each saying what was expected."""
    validator = jsonschema.Draft202012Validator(tool.parameters)
    errors = []
    for error in sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.path) or "arguments"
        errors.append(f"{where}: {error.message}")
    return errors


def call_tool(tools: Mapping[str, Tool], call: ParsedToolCall) -> ToolResult:
    """Validate and run one tool call; never raises for anything the agent did.

    Raises nothing for agent errors; an :class:`~tasks.errors.InfrastructureError` becomes an ``infra_error`` result.
    """
    started = time.perf_counter()
    result = _dispatch(tools, call)
    return ToolResult(result.output, result.ok, result.infra_error, time.perf_counter() - started)


def _dispatch(tools: Mapping[str, Tool], call: ParsedToolCall) -> ToolResult:
    tool = tools.get(call.name)
    if tool is None:
        close = get_close_matches(call.name, list(tools), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return ToolResult(f"Unknown tool {call.name!r}; expected one of: {', '.join(tools)}.{hint}", ok=False)
    errors = argument_errors(tool, call.arguments)
    if errors:
        schema = json.dumps(tool.parameters, sort_keys=True)
        return ToolResult(f"Invalid arguments for {tool.name}: " + "; ".join(errors)
                          + f". Expected arguments matching {schema}.", ok=False)
    try:
        return tool.fn(**call.arguments)
    except InfrastructureError as exc:
        return ToolResult(f"Infrastructure error while running {tool.name} (not your fault): {exc}",
                          ok=False, infra_error=True)


def render_tools(tools: Sequence[Tool]) -> str:
    """A plain-text listing of tools for prompts of models without a tool-aware template."""
    lines = ["You can call these tools (JSON schemas in OpenAI function format):"]
    lines += [json.dumps(tool.schema(), sort_keys=True) for tool in tools]
    lines.append('Call a tool with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>. '
                 "Give the final answer with <answer>...</answer>. You may think first inside "
                 "<think>...</think>.")
    return "\n".join(lines)
