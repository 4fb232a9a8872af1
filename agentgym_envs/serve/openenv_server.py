"""OpenEnv's protocol, through openenv-core's own server: one agentrl env per session, its tools on the MCP surface.

openenv-core's ``HTTPEnvServer`` gives every WebSocket session (``/ws``) and every HTTP MCP session
(``openenv/session/create`` on ``/mcp``) an :class:`AgentrlEnvironment` of its own, closes it when the socket
closes or the session idles out, and bounds how many live at once. An :class:`AgentrlEnvironment` is an
openenv-core ``MCPEnvironment`` whose FastMCP server holds one :class:`EpisodeTool` per tool of the env (and
``answer``): ``tools/list`` lists them with the env's own schemas, ``tools/call`` steps the env with that one tool
call and returns the observation as text and the whole step (reward, terminated, truncated, info) as structured
content. ``reset`` takes ``seed``, ``task`` (a task id) and ``difficulty``; a ``step`` takes an
:class:`AgentrlAction`: an assistant turn (text in ``content``, or OpenAI ``tool_calls``) or an MCP tool call.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from fastapi import FastAPI
from fastmcp import FastMCP
from fastmcp.tools import Tool as FastMCPTool
from fastmcp.tools import ToolResult
from mcp.types import TextContent
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ListToolsAction
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import Field, PrivateAttr

from agentgym_envs.serve.session import EpisodeSession, ServedEnv, SessionSlots, StepOutcome

TOOL_CALL_TIMEOUT_S = 3600.0
"""How long a tool call through ``step`` may run (openenv-core's default, 30 s, is shorter than a test run)."""


class AgentrlAction(Action):
    """One action over OpenEnv.

    ``type="message"`` (the default): an assistant turn, as text in ``content`` (the Hermes convention:
    ``<tool_call>`` blocks or ``<answer>``) or as OpenAI ``tool_calls`` (with ``content`` as free text).
    ``type="call_tool"``: one MCP tool call, ``tool_name`` and ``arguments``. ``type="list_tools"``: the tools.
    """

    type: Literal["message", "call_tool", "list_tools"] = Field(default="message", description="What the action is")
    content: str | None = Field(default=None, description="The assistant turn's text")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, description="OpenAI tool calls of the turn")
    tool_name: str | None = Field(default=None, description="The tool of a call_tool action")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The arguments of a call_tool action")

    def env_action(self) -> str | dict[str, Any]:
        """What the env's ``step`` is given: the text, or the OpenAI assistant message."""
        if self.tool_calls:
            return {"role": "assistant", "content": self.content, "tool_calls": self.tool_calls}
        return self.content or ""


class AgentrlObservation(Observation):
    """One observation over OpenEnv: the Gymnasium step (``reward`` and ``done`` are openenv-core's own fields)."""

    text: str = Field(default="", description="The observation (the prompt after reset)")
    terminated: bool = Field(default=False, description="The task ended (an answer, a purchase, a submission)")
    truncated: bool = Field(default=False, description="The turn limit, or an infrastructure fault (info)")
    info: dict[str, Any] = Field(default_factory=dict, description="Gymnasium's info: tools, tool_calls, "
                                 "reward_components, infra_error, tool_messages, ...")

    @classmethod
    def of(cls, outcome: StepOutcome) -> AgentrlObservation:
        """The observation of one step."""
        return cls(text=outcome.observation, reward=outcome.reward, done=outcome.done,
                   terminated=outcome.terminated, truncated=outcome.truncated, info=outcome.info)


class EpisodeTool(FastMCPTool):
    """One tool of the env on the MCP surface: a call steps the session's env with that tool call alone."""

    _session: EpisodeSession = PrivateAttr()

    @classmethod
    def of(cls, schema: dict[str, Any], session: EpisodeSession) -> EpisodeTool:
        """The tool of an OpenAI function ``schema``, stepping ``session``."""
        function = schema["function"]
        tool = cls(name=function["name"], description=function.get("description", ""),
                   parameters=dict(function["parameters"]))
        tool._session = session
        return tool

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Step the env; the observation as text, the whole step as structured content."""
        outcome = await self._session.acall_tool(self.name, arguments)
        return ToolResult(content=[TextContent(type="text", text=outcome.observation)],
                          structured_content=outcome.as_dict())


class AgentrlEnvironment(MCPEnvironment):
    """One session's agentrl env as an openenv-core environment (made by the server, one per session).

    Args:
        served: The served env.
        slots: The server's session count (shared with the other protocols).

    Raises:
        SessionLimitError: The server holds its most sessions.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: ServedEnv, slots: SessionSlots) -> None:
        self.session = EpisodeSession(served, slots)
        server = FastMCP(name=served.config.env_id)
        for schema in served.tools:
            server.add_tool(EpisodeTool.of(schema, self.session))
        super().__init__(server)
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: str | None = None,
              difficulty: int | None = None) -> AgentrlObservation:
        """Start an episode; ``task`` is a task id, ``difficulty`` a level to draw among."""
        prompt, info = self.session.reset(seed=seed, task=task, difficulty=difficulty)
        self._episode_id = episode_id or info.get("task_id")
        return AgentrlObservation(text=prompt, info=info, reward=None, done=False)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """An assistant turn, or an MCP action (an :class:`AgentrlAction` of that type, or openenv-core's own)."""
        return super().step(self._mcp_action(action), timeout_s=timeout_s or TOOL_CALL_TIMEOUT_S, **kwargs)

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """:meth:`step` on the server's event loop (MCP calls) or a worker thread (turns)."""
        return await super().step_async(self._mcp_action(action), timeout_s=timeout_s or TOOL_CALL_TIMEOUT_S,
                                        **kwargs)

    @staticmethod
    def _mcp_action(action: Action) -> Action:
        if isinstance(action, AgentrlAction) and action.type == "call_tool":
            return CallToolAction(tool_name=action.tool_name or "", arguments=action.arguments)
        if isinstance(action, AgentrlAction) and action.type == "list_tools":
            return ListToolsAction()
        return action

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> AgentrlObservation:
        if not isinstance(action, AgentrlAction):
            raise TypeError(f"expected an AgentrlAction, got {type(action).__name__}")
        return AgentrlObservation.of(self.session.step(action.env_action()))

    async def _async_handle_call_tool(self, action: CallToolAction,
                                      timeout_s: float | None = None) -> CallToolObservation:
        """The MCP call, with the step's reward and done on the observation (openenv-core leaves them unset)."""
        steps_before = self.session.steps
        observation = await super()._async_handle_call_tool(action, timeout_s=timeout_s)
        if observation.error is None and self.session.last is not None and self.session.steps > steps_before:
            observation.reward, observation.done = self.session.last.reward, self.session.last.done
        return observation

    @property
    def state(self) -> State:
        """The episode id, the steps taken and the task."""
        return State(episode_id=self._episode_id, step_count=self.session.steps,
                     task_id=self.session.reset_info.get("task_id"))

    def get_metadata(self) -> EnvironmentMetadata:
        """The env id, its tools and families, from its card."""
        card = self.session.served.card
        families = ", ".join(card.families)
        return EnvironmentMetadata(name=self.session.served.config.env_id, version="0",
                                   description=f"agentrl {card.env_name} environment (families: {families}; "
                                               f"tools: {', '.join(self.session.served.tool_names)})")

    def close(self) -> None:
        """Close the session's env, then the MCP server."""
        try:
            self.session.close()
        finally:
            super().close()


def openenv_app(served: ServedEnv, slots: SessionSlots) -> FastAPI:
    """openenv-core's FastAPI app serving ``served``: ``/ws``, ``/mcp`` (HTTP and WebSocket), ``/reset``, ``/step``,
    ``/state``, ``/schema``, ``/metadata``, ``/health``."""
    config = ConcurrencyConfig(max_concurrent_envs=served.config.max_sessions,
                               session_timeout=served.config.idle_timeout_s)
    return create_fastapi_app(functools.partial(AgentrlEnvironment, served, slots), AgentrlAction,
                              AgentrlObservation, concurrency_config=config)
