"""What every protocol of the server shares: the served env's description, and one client's episode.

:class:`ServedEnv` is read once, when the server starts, from one env made and closed at once: its tools (plus
:data:`~agentgym_envs.actions.ANSWER_TOOL`, so that a client that only calls tools can finish an episode), its tasks
and its card. :class:`EpisodeSession` is one client's env: made on its first reset, run on a thread of its own (so
that an env whose library is bound to a thread, such as a browser, keeps it), closed once; the number of live
sessions is bounded by :class:`SessionSlots`, across protocols.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentgym_envs.actions import ANSWER_TOOL, ANSWER_TOOL_SCHEMA, StructuredAction
from agentgym_envs.card import EnvCard, describe
from agentgym_envs.errors import AgentgymError
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.registration import make
from tasks import Task

T = TypeVar("T")
SESSION_CLOSED = "this session is closed"
"""How the error of a request on a closed session begins (clients such as ``agentrl/Remote-v0`` read it)."""


class SessionLimitError(AgentgymError):
    """The server already holds its most sessions (``--max-sessions``)."""


class SessionClosedError(AgentgymError):
    """A session was used after it was closed (by its client, by the idle reaper or by the server stopping)."""


@dataclass(frozen=True)
class ServeConfig:
    """What the server serves and how.

    Attributes:
        env_id: A registered id (``agentrl/Search-v0``, or a third-party package's).
        env_kwargs: Keyword arguments of ``gym.make`` for every session's env (``{"sandbox": "bwrap"}``).
        max_sessions: Most sessions alive at once, over every protocol together.
        idle_timeout_s: A session without a request for this long is closed (its env with it).
    """

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_sessions: int = 64
    idle_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions: expected >= 1, got {self.max_sessions}")
        if not self.idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s: expected > 0 seconds, got {self.idle_timeout_s}")


@dataclass(frozen=True)
class ServedEnv:
    """The served env as every session sees it, read once from a probe env.

    Attributes:
        config: What is served.
        tools: The env's tool schemas (OpenAI function format), then :data:`ANSWER_TOOL`'s unless the env has a
            tool of that name.
        tasks: The env's tasks in its order, as the agent is shown them
            (:func:`~agentgym_envs.policies.base.prompt_only`: id, family, prompt, difficulty; never the answer or
            the metadata).
        split: The split the tasks come from (``"tasks"`` for tasks given explicitly).
        card: The env's card.
    """

    config: ServeConfig
    tools: tuple[dict[str, Any], ...]
    tasks: tuple[Task, ...]
    split: str
    card: EnvCard

    @classmethod
    def probe(cls, config: ServeConfig) -> ServedEnv:
        """Make the env once, read what the protocols publish, close it.

        Raises:
            UnknownEnvError: ``config.env_id`` is not registered.
            EnvConfigError: The env refuses ``config.env_kwargs``.
        """
        env = make(config.env_id, **config.env_kwargs)
        try:
            unwrapped = env.unwrapped
            tools = [tool.schema() for tool in unwrapped.tools]
            if ANSWER_TOOL not in {schema["function"]["name"] for schema in tools}:
                tools.append(ANSWER_TOOL_SCHEMA)
            tasks = tuple(prompt_only(task) for task in unwrapped.tasks)
            return cls(config=config, tools=tuple(tools), tasks=tasks, split=unwrapped.split or "tasks",
                       card=describe(env))
        finally:
            env.close()

    @property
    def tool_names(self) -> list[str]:
        """The names of :attr:`tools`."""
        return [schema["function"]["name"] for schema in self.tools]

    def description(self) -> dict[str, Any]:
        """What ``GET /agentrl/env`` answers (:data:`~agentgym_envs.serve.app.DESCRIPTION_ROUTE`), for clients
        that play the env as agentrl's own (``agentrl/Remote-v0``): the served id, the split, the card and the
        tasks as the agent is shown them."""
        return {"env_id": self.config.env_id, "split": self.split, "card": self.card.to_dict(),
                "tasks": [task.to_dict() for task in self.tasks]}


class SessionSlots:
    """A count of live sessions bounded by ``limit`` (thread-safe), shared by every protocol of one server."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._taken = 0
        self._lock = threading.Lock()

    @property
    def taken(self) -> int:
        """Sessions alive now."""
        return self._taken

    def acquire(self) -> None:
        """Take a slot.

        Raises:
            SessionLimitError: Every slot is taken; the message says how many and what to do.
        """
        with self._lock:
            if self._taken >= self.limit:
                raise SessionLimitError(f"the server holds its most sessions ({self.limit}); close a session or "
                                        "start the server with a larger --max-sessions")
            self._taken += 1

    def release(self) -> None:
        """Give a slot back."""
        with self._lock:
            self._taken -= 1


@dataclass(frozen=True)
class StepOutcome:
    """One step as the protocols send it: the Gymnasium 5-tuple with a JSON-safe ``info``."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        """The episode is over (terminated or truncated)."""
        return self.terminated or self.truncated

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-safe dict."""
        return dataclasses.asdict(self)


class EpisodeSession:
    """One client's env, made on the first :meth:`reset`, each call run on the session's own thread.

    Args:
        served: The served env.
        slots: The server's session count; a slot is taken here and given back by :meth:`close`.

    Raises:
        SessionLimitError: No slot is free.
    """

    def __init__(self, served: ServedEnv, slots: SessionSlots) -> None:
        slots.acquire()
        self.served = served
        self._slots = slots
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrl-session")
        self._env: Any = None
        self._closed = False
        self.prompt = ""
        self.reset_info: dict[str, Any] = {}
        self.steps = 0
        self.last: StepOutcome | None = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def reset(self, *, seed: int | None = None, task: str | None = None,
              difficulty: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (on ``task``, a task id, or one drawn with ``seed`` among ``difficulty``'s)."""
        return self._run(lambda: self._reset(seed, task, difficulty))

    def step(self, action: str | StructuredAction) -> StepOutcome:
        """Step with text or a structured action."""
        return self._run(lambda: self._step(action))

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> StepOutcome:
        """Step with one tool call (:data:`ANSWER_TOOL` gives the final answer)."""
        return self.step({"name": name, "arguments": dict(arguments)})

    async def acall_tool(self, name: str, arguments: Mapping[str, Any]) -> StepOutcome:
        """:meth:`call_tool` without blocking the event loop."""
        return await self._arun(lambda: self._step({"name": name, "arguments": dict(arguments)}))

    async def areset(self, **options: Any) -> tuple[str, dict[str, Any]]:
        """:meth:`reset` without blocking the event loop."""
        return await self._arun(lambda: self._reset(options.get("seed"), options.get("task"),
                                                    options.get("difficulty")))

    def close(self) -> None:
        """Close the env (its containers, processes, browsers) and give the slot back; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._env is not None:
                self._executor.submit(self._env.close).result()
        finally:
            self._executor.shutdown(wait=False)
            self._slots.release()

    def _run(self, work: Callable[[], T]) -> T:
        if self._closed:
            raise SessionClosedError(f"{SESSION_CLOSED} (by its client, after being idle, or by a server stop); "
                                     "open a new one")
        return self._executor.submit(work).result()

    async def _arun(self, work: Callable[[], T]) -> T:
        if self._closed:
            raise SessionClosedError(f"{SESSION_CLOSED}; open a new one")
        return await asyncio.wrap_future(self._executor.submit(work))

    def _reset(self, seed: int | None, task: str | None, difficulty: int | None) -> tuple[str, dict[str, Any]]:
        if self._env is None:
            self._env = make(self.served.config.env_id, **self.served.config.env_kwargs)
        options = {key: value for key, value in (("task", task), ("difficulty", difficulty)) if value is not None}
        try:
            observation, info = self._env.reset(seed=seed, options=options or None)
        except Exception:
            # Gymnasium's env checker keeps the failed reset's state (its next step raises), so a failed reset
            # costs the env: the next reset makes a fresh one.
            self._env, env = None, self._env
            env.close()
            raise
        self.prompt, self.reset_info = observation, jsonable(info)
        self.steps, self.last = 0, None
        return self.prompt, self.reset_info

    def _step(self, action: str | StructuredAction) -> StepOutcome:
        if self._env is None:
            raise SessionClosedError("call reset before step: this session has no episode yet")
        observation, reward, terminated, truncated, info = self._env.step(action)
        self.steps += 1
        self.last = StepOutcome(observation, float(reward), bool(terminated), bool(truncated), jsonable(info))
        return self.last


def jsonable(value: Any) -> Any:
    """``value`` with everything JSON cannot hold made plain: numpy scalars and arrays, dataclasses, tuples, sets;
    non-finite floats as the strings ``"NaN"``, ``"Infinity"``; anything else as its ``str``."""
    return json.loads(json.dumps(value, default=_plain, allow_nan=True), parse_constant=str)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)
