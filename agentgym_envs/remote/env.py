"""A Gymnasium env backed by an OpenEnv server: ``gym.make("agentrl/Remote-v0", url="http://127.0.0.1:8000")``.

One WebSocket session (openenv-core's own client) per env: ``reset`` opens it on first use, ``close`` ends it (and
the server closes the session's env). Two kinds of server are understood, told apart by the action schema the
server publishes (``GET /schema``):

- an agentrl server (``python -m agentgym_envs.serve``): actions go as they are (text, or a structured action),
  and the observation, reward, terminated, truncated and info come back as the served env gave them. The env also
  reads the server's description (``GET /agentrl/env``): :attr:`RemoteEnv.card` is the served env's card (so
  ``agentgym_envs.describe`` gives it, with the served id and turn limit), :attr:`RemoteEnv.tasks` its tasks as the
  agent is shown them (no answers, no metadata) and :attr:`RemoteEnv.split` their split: agentrl's tooling plays a
  served env as it plays one in process (``python -m benchmarks.evaluate --remote URL``);
- any other OpenEnv server with MCP tools: the action text is parsed as agentrl's envs parse it (Hermes
  ``<tool_call>`` blocks, or a structured action), each tool call is an MCP ``call_tool`` step, and the
  observation is the tool results in the layout of agentrl's envs; a malformed action gets the same format-error
  observation, without a request. ``<answer>`` calls the server's ``answer`` tool when it has one; otherwise it
  is a format error. ``terminated`` is the server's ``done``, ``truncated`` is False (the server keeps its limits).

A server that stops answering (the connection drops, a reply times out, the server holds its most sessions, or it
closed the session after it idled past ``--idle-timeout``) is an infrastructure fault:
:class:`~tasks.errors.InfrastructureError`, which agentrl's episode runner counts as one; the next ``reset`` opens a
new session.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import httpx

from agentgym_envs.actions import (
    ANSWER_TOOL,
    ParsedAction,
    StructuredAction,
    format_error_observation,
    parse_action,
)
from agentgym_envs.card import EnvCard
from agentgym_envs.core import MAX_ACTION_SPACE_CHARS
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.serve.session import SESSION_CLOSED
from agentgym_envs.spaces import UnicodeText
from tasks import InfrastructureError, Task

MAX_OBSERVATION_CHARS = 1 << 20
RESET_OPTIONS = frozenset({"task", "difficulty"})
DESCRIPTION_PATH = "/agentrl/env"
"""Where an agentrl server describes the env it serves (``agentgym_envs.serve.app.DESCRIPTION_ROUTE``)."""


@dataclass(frozen=True)
class ServedDescription:
    """What an agentrl server says about the env it serves.

    Attributes:
        env_id: The served id (``agentrl/Search-v0``, or a third-party package's).
        split: The split its tasks come from (``"tasks"`` for tasks given explicitly).
        card: Its card, with the served id and turn limit.
        tasks: Its tasks in order, as the agent is shown them: id, family, prompt, difficulty.
    """

    env_id: str
    split: str
    card: EnvCard
    tasks: tuple[Task, ...]


def served_description(url: str, timeout_s: float = 30.0) -> ServedDescription:
    """The description of the env an agentrl server at ``url`` serves.

    Raises:
        EnvConfigError: No agentrl server answers at ``url`` (nothing answers, or another OpenEnv server).
    """
    try:
        response = httpx.get(f"{url.rstrip('/')}{DESCRIPTION_PATH}", timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise EnvConfigError(f"url: expected an agentrl server (python -m agentgym_envs.serve) answering GET "
                             f"{url.rstrip('/')}{DESCRIPTION_PATH}, got {exc}") from exc
    data = response.json()
    return ServedDescription(env_id=data["env_id"], split=data["split"], card=EnvCard.from_dict(data["card"]),
                             tasks=tuple(Task.from_dict(task) for task in data["tasks"]))


class RemoteEnv(gym.Env[str, str]):
    """An env played on an OpenEnv server (see the module docstring).

    Args:
        url: The server's base URL (``http://host:port``, or ``http://host:port/auth/<token>`` for a server that
            needs a token).
        connect_timeout_s: Most seconds to open the WebSocket.
        message_timeout_s: Most seconds a reset or step may take on the server.

    Raises:
        EnvConfigError: No OpenEnv server answers at ``url``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0, message_timeout_s: float = 600.0) -> None:
        self.url = url.rstrip("/")
        self.action_space = UnicodeText(max_length=MAX_ACTION_SPACE_CHARS)
        self.observation_space = UnicodeText(max_length=MAX_OBSERVATION_CHARS)
        self.served_by_agentrl = self._served_by_agentrl()
        self.description = served_description(self.url) if self.served_by_agentrl else None
        self._timeouts = (connect_timeout_s, message_timeout_s)
        self._client: Any = None
        self._tools: list[str] | None = None

    def _served_by_agentrl(self) -> bool:
        """True when the server's action schema is agentrl's (an assistant turn: ``content`` and ``tool_calls``)."""
        try:
            response = httpx.get(f"{self.url}/schema", timeout=30)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise EnvConfigError(f"url: expected an OpenEnv server answering GET {self.url}/schema, got {exc}") \
                from exc
        properties = response.json().get("action", {}).get("properties", {})
        return {"content", "tool_calls"} <= set(properties)

    @property
    def card(self) -> EnvCard | None:
        """The served env's card (an agentrl server's; None for another server)."""
        return self.description.card if self.description else None

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The served env's tasks as the agent is shown them (an agentrl server's; none for another server)."""
        return self.description.tasks if self.description else ()

    @property
    def split(self) -> str | None:
        """The split of :attr:`tasks` (None for another server)."""
        return self.description.split if self.description else None

    @property
    def trajectory(self) -> None:
        """The episode's record stays on the server; the runner keeps None for it."""
        return None

    def _session(self) -> Any:
        if self._client is None:
            from openenv.core.generic_client import GenericEnvClient

            connect, message = self._timeouts
            self._client = GenericEnvClient(base_url=self.url, connect_timeout_s=connect,
                                            message_timeout_s=message).sync()
            self._client.connect()
        return self._client

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on the server; ``options`` may name a ``task`` (its id) or a ``difficulty``."""
        super().reset(seed=seed)
        unknown = set(options or {}) - RESET_OPTIONS
        if unknown:
            raise EnvConfigError(f"reset options: expected keys among {sorted(RESET_OPTIONS)}, got {sorted(unknown)}")
        options = dict(options or {})
        if isinstance(options.get("task"), Task):
            options["task"] = options["task"].id
        data = {key: value for key, value in {"seed": seed, **options}.items() if value is not None}
        result = self._call("reset", reopen=True, **data)
        observation = result.observation
        if self.served_by_agentrl:
            return observation["text"], observation["info"]
        return _text_of(observation), {"observation": observation}

    def step(self, action: str | StructuredAction) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play one action on the server."""
        if self.served_by_agentrl and isinstance(action, str | dict | list | tuple):
            result = self._call("step", _agentrl_payload(action))
            observation = result.observation
            return (observation["text"], float(result.reward or 0.0), observation["terminated"],
                    observation["truncated"], observation["info"])
        return self._step_tools(parse_action(action))

    def _step_tools(self, parsed: ParsedAction) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """An action on a server with MCP tools: each tool call (or the answer) one ``call_tool`` step."""
        calls = [(call.name, call.arguments) for call in parsed.tool_calls]
        if parsed.answer is not None:
            if ANSWER_TOOL not in self._tool_names():
                parsed = ParsedAction(errors=(f"this server has no {ANSWER_TOOL!r} tool to answer with; its tools "
                                              f"are {self._tool_names()}.",))
            calls = [(ANSWER_TOOL, {"answer": parsed.answer})]
        if not parsed.well_formed:
            return format_error_observation(parsed.errors), 0.0, False, False, {"format_errors": list(parsed.errors)}
        blocks, reward, done = [], 0.0, False
        for name, arguments in calls:
            result = self._call("step", {"type": "call_tool", "tool_name": name, "arguments": arguments})
            blocks.append(f"[{name} result]\n{_text_of(result.observation)}")
            reward, done = float(result.reward or 0.0), bool(result.done)
            if done:
                break
        return "\n\n".join(blocks), reward, done, False, {"tool_calls": [name for name, _ in calls]}

    def _tool_names(self) -> list[str]:
        if self._tools is None:
            result = self._call("step", {"type": "list_tools"})
            self._tools = [tool["name"] for tool in result.observation.get("tools", [])]
        return self._tools

    def _call(self, method: str, *args: Any, reopen: bool = False, **kwargs: Any) -> Any:
        """``method`` (``reset`` or ``step``) of the session's client; a server that does not answer, holds its most
        sessions or closed this session (idle past its ``--idle-timeout``) is an infrastructure fault, and the
        session is dropped (the next request opens another). ``reopen``: a session found closed is replaced and
        the request sent again, once (a reset: the episode starts anew anyway)."""
        from websockets.exceptions import WebSocketException

        try:
            return getattr(self._session(), method)(*args, **kwargs)
        except (ConnectionError, TimeoutError, OSError, WebSocketException) as exc:
            self._drop_session()
            raise InfrastructureError(f"the server at {self.url} did not answer: {exc}") from exc
        except RuntimeError as exc:
            if SESSION_CLOSED in str(exc) and reopen:
                self._drop_session()
                return self._call(method, *args, **kwargs)
            reason = _server_fault(str(exc))
            if reason is None:
                raise
            self._drop_session()
            raise InfrastructureError(f"the server at {self.url} {reason}: {exc}") from exc

    def _drop_session(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with suppress(ConnectionError, OSError, RuntimeError):  # the connection is gone already
                client.close()

    def close(self) -> None:
        """End the session (the server closes its env)."""
        if self._client is not None:
            self._client.close()
            self._client = None


def _server_fault(error: str) -> str | None:
    """What an error message of the server says went wrong outside the agent's doing; None for anything else."""
    if "CAPACITY_REACHED" in error:
        return "holds its most sessions"
    if SESSION_CLOSED in error:
        return "closed this session (idle longer than its --idle-timeout, or stopping)"
    return None


def _agentrl_payload(action: str | StructuredAction) -> dict[str, Any]:
    """An agentrl server's step data: text as ``content``, a message as itself, tool calls as ``tool_calls``."""
    if isinstance(action, str):
        return {"content": action}
    if isinstance(action, dict) and action.get("role") == "assistant":
        return {"content": action.get("content"), "tool_calls": action.get("tool_calls")}
    return {"tool_calls": [action] if isinstance(action, dict) else list(action)}


def _text_of(observation: dict[str, Any]) -> str:
    """The text of an OpenEnv observation: an MCP result's text blocks, its error, or the observation as JSON."""
    result, error = observation.get("result"), observation.get("error")
    if error:
        return f"Error ({error.get('error_type')}): {error.get('message')}"
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        return "\n".join(block.get("text", "") for block in result["content"] if block.get("type") == "text")
    return json.dumps(observation, default=str)
