"""ORS (OpenReward Standard), through the ``openreward`` SDK's own server: the reward comes with each tool call.

:func:`ors_environment_class` builds an ``openreward.environments.Environment`` subclass for the served env: its
split is the env's own (the tasks ``ServedEnv.tasks`` lists, by index), a session's ``setup`` makes the env and
resets it on the task, ``get_prompt`` is the reset observation, and each tool of the env (and ``answer``) is an ORS
tool whose ``ToolOutput`` carries the observation, the reward, ``finished`` (terminated or truncated) and the step
as metadata. An episode that an infrastructure fault ended gives ``reward=None``, which trainers read as unscored
(TRL's ``OpenRewardSpec`` does), never as a scored 0. ``teardown`` (the client's ``/delete``, or the SDK server's
reaper after 15 minutes without a ping) closes the env.
"""

from __future__ import annotations

from typing import Any, ClassVar

from openreward.environments import Environment, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel, ConfigDict

from agentgym_envs.serve.session import EpisodeSession, ServedEnv, SessionSlots, StepOutcome

SPLIT_TYPES = {"train": "train", "test": "test"}
"""ORS split types of the env's split names; any other split is a ``validation`` split."""


class ToolArguments(BaseModel):
    """The arguments of one tool call, as sent (the env checks them against its schema and explains what is
    wrong in the observation, as it does for any action)."""

    model_config = ConfigDict(extra="allow")
    schema_of_tool: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The tool's own JSON schema, which ORS lists."""
        return dict(cls.schema_of_tool)


def tool_output(outcome: StepOutcome) -> ToolOutput:
    """One step as ORS sends it; an infrastructure fault is unscored (``reward=None``)."""
    reward = None if outcome.info.get("infra_error") else outcome.reward
    return ToolOutput(blocks=[TextBlock(text=outcome.observation)], reward=reward, finished=outcome.done,
                      metadata={"terminated": outcome.terminated, "truncated": outcome.truncated,
                                "info": outcome.info})


def ors_environment_class(served: ServedEnv, slots: SessionSlots) -> type[Environment]:
    """An ORS environment class serving ``served``, each session an :class:`EpisodeSession` counted in ``slots``."""
    tools = {schema["function"]["name"]: _ors_tool(schema) for schema in served.tools}
    return type("AgentrlEnvironment", (_AgentrlORSEnvironment,), {"served": served, "slots": slots, **tools})


def _ors_tool(schema: dict[str, Any]) -> Any:
    """The ORS tool method of one OpenAI function ``schema``."""
    function = schema["function"]
    name = function["name"]
    arguments = type(f"{name}_arguments", (ToolArguments,), {"schema_of_tool": dict(function["parameters"])})

    async def call(self: _AgentrlORSEnvironment, args: ToolArguments) -> ToolOutput:
        return tool_output(await self.session.acall_tool(name, args.model_dump()))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = function.get("description", "")
    call.__annotations__ = {"args": arguments, "return": ToolOutput}  # the SDK reads the model from the hints
    return tool(call)


class _AgentrlORSEnvironment(Environment):
    """The ORS environment of one served env (subclassed per server by :func:`ors_environment_class`)."""

    served: ClassVar[ServedEnv]
    slots: ClassVar[SessionSlots]

    def __init__(self, task_spec: dict[str, Any] | None = None, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec or {}, secrets or {})
        self.session = EpisodeSession(self.served, self.slots)

    @classmethod
    def list_splits(cls) -> list[Split]:
        """The env's split."""
        return [Split(name=cls.served.split, type=SPLIT_TYPES.get(cls.served.split, "validation"))]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        """The env's tasks, ``{"task_id", "family", "difficulty"}`` each."""
        if split != cls.served.split:
            return []
        return [{"task_id": task.id, "family": task.family, "difficulty": task.difficulty} for task in cls.served.tasks]

    async def setup(self) -> None:
        """Make the env and start the episode on the session's task."""
        await self.session.areset(task=self.task_spec.get("task_id"))

    async def get_prompt(self) -> list[TextBlock]:
        """The reset observation."""
        return [TextBlock(text=self.session.prompt)]

    def teardown(self) -> None:
        """Close the env."""
        self.session.close()
