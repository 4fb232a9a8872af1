"""Train an agent program you already have: it talks to the policy endpoint, agentrl plays and scores the env.

An agent program is any function of an :class:`AgentSession`: it sends chat completions to
``session.base_url`` with the ``openai`` SDK (or any framework that speaks OpenAI's API) and calls the env's
tools with :meth:`AgentSession.call` (the final answer is the ``answer`` tool, as over the tool protocols).
It needs no agentrl types beyond the session: :func:`trainers.agents.openai_sdk.tool_loop` is such a program, a
plain ``openai``-SDK loop (docs/agent-programs.md).

:class:`ProgramAgent` is an :class:`~agentgym_envs.runner.Agent` of the one episode runner: each env call the
program makes is the runner's next turn, so resets, concurrent steps, stop reasons, infrastructure faults and the
reward are exactly those of the in-process rollout. The episode's token record is the endpoint's
(:mod:`trainers.endpoint.episodes`): the ids the model generated, masked 1, everything else 0. A program that
returns without answering ends its episode unanswered (``"agent_ended"``, scored); one that raises, or does not
make its next env call within ``timeout_s``, ends it unscored (``"agent_error"``, ``"agent_timeout"``), with what
it raised in :attr:`~agentgym_envs.runner.Episode.error`. :class:`AgentProgramRollout` puts the endpoint, the agent
and the runner together, with the interface of :class:`~trainers.rollout.RolloutEngine`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch

from agentgym_envs.actions import ANSWER_TOOL_SCHEMA, answer_action
from agentgym_envs.runner import AGENT_STOPS, AgentStop, AgentTurn, EnvPool, Episode, EpisodeRequest, EpisodeRunner
from tasks import Task
from trainers.agent_client import ERROR_CHARS, SESSION_URL_ENV, EpisodeEnded, load_agent_program
from trainers.endpoint.episodes import EndpointEpisode
from trainers.endpoint.openai_format import call_action
from trainers.endpoint.server import PolicyEndpoint
from trainers.generation import Generator
from trainers.rollout import RolloutConfig, turn_seed

AGENT_EVENTS = ("history_edits", "segments_dropped", "no_generation", "agent_error", "agent_timeout")
"""What :attr:`ProgramAgent.stats` counts per batch."""


class AgentSession:
    """What an agent program gets for one episode: the policy's address, the task, and the env's tools.

    Attributes:
        base_url: The episode's OpenAI ``base_url`` on the policy endpoint.
        api_key: Any key works (the route names the episode); also the episode id, for clients that need ``/v1``.
        model: The model name to request.
        prompt: The env's first observation (the task, with its tools listed).
        tools: The env's tools and the ``answer`` tool, as OpenAI function schemas.
        task: The task (for a program that wants its id or family).
        session_url: Where a program in its own process reaches this session (:class:`RemoteSession`).
        endpoint_url: The policy endpoint's root URL (where worker processes ask for episodes).
        offer: Offers the episode to the endpoint's worker processes (:meth:`hand_off`).
    """

    def __init__(self, base_url: str, api_key: str, model: str, prompt: str, tools: Sequence[Mapping[str, Any]],
                 task: Task, session_url: str = "", *, endpoint_url: str = "",
                 offer: Callable[[], None] | None = None) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.prompt = prompt
        self.tools = [dict(tool) for tool in tools]
        self.task = task
        self.session_url = session_url
        self.endpoint_url = endpoint_url
        self.thinking = True
        self._offer = offer
        self._program_end: Future | None = None
        self._done = False
        self._events: queue.Queue = queue.Queue()
        self._pending: Future | None = None
        self._on_end: list[Callable[[], None]] = []

    @property
    def done(self) -> bool:
        """The episode has ended: further calls raise :class:`EpisodeEnded`."""
        return self._done

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Call one of the env's tools (``arguments`` as a mapping or OpenAI's JSON string); returns what the env
        answered, its complaint about the call included. Calling ``answer`` ends the episode.

        Raises:
            EpisodeEnded: The episode is over.
        """
        return self.step(call_action(name, arguments))

    def answer(self, text: str) -> str:
        """Give the final answer (ends the episode); returns the env's last observation."""
        return self.step(answer_action(text))

    def step(self, action: str) -> str:
        """Hand the env an action in its own text format (``<tool_call>`` blocks or an ``<answer>``); returns the
        observation once the env has stepped.

        Raises:
            EpisodeEnded: The episode is over.
        """
        return self.submit(action).result()

    def submit(self, action: str) -> Future:
        """:meth:`step` without waiting: a future of the observation (of :class:`EpisodeEnded`, if the runner ends
        the episode first)."""
        if self._done:
            raise EpisodeEnded("the episode is over; the env takes no more calls")
        self._pending = Future()
        self.thinking = False
        self.report("action", action)
        return self._pending

    def hand_off(self) -> Future:
        """Offer the episode to a worker process (:class:`WorkerPrograms`): a future of how its program ended
        (None, or the end of its traceback), set by :meth:`program_ended`."""
        if self._offer is None:
            raise RuntimeError("AgentSession.hand_off: this session was made without a policy endpoint to offer it to")
        self._program_end = Future()
        self._offer()
        return self._program_end

    def program_ended(self, error: str | None) -> None:
        """A worker process's program returned (``error`` None) or raised (its traceback)."""
        if self._program_end is not None and not self._program_end.done():
            self._program_end.set_result(error)

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the runner ends the episode (e.g. to stop the program's process)."""
        self._on_end.append(callback)

    # the runner's side (ProgramAgent)

    def report(self, kind: str, value: str | None = None) -> None:
        """The program made an env call (``"action"``), returned (``"ended"``) or raised (``"crashed"``)."""
        self._events.put((kind, value))

    def next_event(self, timeout_s: float) -> tuple[str, str | None]:
        """The program's next :meth:`report`, waiting at most ``timeout_s``.

        Raises:
            queue.Empty: None came in time.
        """
        return self._events.get(timeout=timeout_s)

    def deliver(self, observation: str) -> None:
        """The observation of the program's pending env call."""
        self.thinking = True
        self._pending.set_result(observation)

    def end(self, observation: str | None) -> None:
        """The episode is over: the pending env call returns ``observation`` (raises :class:`EpisodeEnded` when it is
        None), later ones raise; the :meth:`on_end` callbacks run."""
        self._done = True
        self.thinking = False
        if self._pending is not None and not self._pending.done():
            if observation is None:
                self._pending.set_exception(EpisodeEnded("the episode was ended by the runner (timeout)"))
            else:
                self._pending.set_result(observation)
        self.program_ended(None)  # a worker's program learns of the end at its next call; no one waits for it
        for callback in self._on_end:
            callback()


AgentProgramFn = Callable[[AgentSession], None]
"""An agent program: plays one episode through its session; what it returns is ignored."""


class CommandProgram:
    """An agent program that is a command, run once per episode in its own process.

    The process gets the episode's addresses in its environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
    ``AGENTRL_SESSION_URL``: :mod:`trainers.agent_client`); it is killed (its whole process group) when the
    runner ends the episode, and a process that exits with an error before the episode ended ends it unscored
    (``agent_error``), with the end of its stderr.

    Args:
        argv: The command, e.g. ``["python", "-m", "trainers.agent_client", "trainers.agents.openai_sdk:tool_loop"]``.
        env: More environment variables for it.
        cwd: Its working folder (None: this process's).
    """

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> None:
        if not argv:
            raise ValueError("CommandProgram: expected a command, got an empty one")
        self.argv = list(argv)
        self.env = dict(env or {})
        self.cwd = cwd

    def __call__(self, session: AgentSession) -> None:
        environ = {**os.environ, **self.env, "OPENAI_BASE_URL": session.base_url, "OPENAI_API_KEY": session.api_key,
                   SESSION_URL_ENV: session.session_url}
        process = subprocess.Popen(self.argv, env=environ, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        session.on_end(lambda: _kill_group(process))
        _, stderr = process.communicate()
        if process.returncode and not session.done:
            raise RuntimeError(f"{self.argv[0]} exited with status {process.returncode}; its stderr ended:\n"
                               f"{stderr.decode(errors='replace')[-ERROR_CHARS:]}")


class WorkerPrograms:
    """An agent program run by long-lived worker processes, episode after episode.

    Each worker is ``python -m trainers.agent_client --worker ENDPOINT program``: it imports the program once, asks
    the endpoint for the next episode waiting for a program, plays it, reports how the program ended, and asks
    again. Programs run beside the trainer rather than inside it (no interpreter lock shared with generation, no
    process started per episode). A program that raises ends its episode unscored (``agent_error``, with the
    worker's traceback); a worker that dies mid-episode leaves it to the runner's timeout (``agent_timeout``) and
    is started again for the next episode (one whose program hangs stays busy: a hung program's process is yours to
    stop).

    Args:
        program: The agent program, as ``"package.module:function"`` (a function of a session).
        workers: Worker processes (at least the episodes played at once, for no episode to wait for one).
        env: More environment variables for them.
        cwd: Their working folder (None: this process's).
    """

    def __init__(self, program: str, workers: int = 16, *, env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> None:
        if workers < 1:
            raise ValueError(f"WorkerPrograms.workers: expected >= 1, got {workers}")
        load_agent_program(program)  # a wrong reference fails here, not in every worker
        self.program = program
        self.workers = workers
        self.env = dict(env or {})
        self.cwd = cwd
        self._processes: list[subprocess.Popen] = []
        self._endpoint_url = ""
        self._lock = threading.Lock()

    def __call__(self, session: AgentSession) -> None:
        ended = session.hand_off()  # (a session without an endpoint is refused here, before any worker starts)
        self._keep_running(session.endpoint_url)
        error = ended.result()
        if error is not None:
            raise RuntimeError(f"the agent program raised in its worker process:\n{error}")

    def _keep_running(self, endpoint_url: str) -> None:
        """Start the workers for ``endpoint_url`` (again where one has exited)."""
        with self._lock:
            if endpoint_url != self._endpoint_url:
                self.close()
                self._endpoint_url = endpoint_url
            self._processes = [process for process in self._processes if process.poll() is None]
            argv = [sys.executable, "-m", "trainers.agent_client", "--worker", endpoint_url, self.program]
            while len(self._processes) < self.workers:
                self._processes.append(subprocess.Popen(argv, env={**os.environ, **self.env}, cwd=self.cwd,
                                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                        start_new_session=True))

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers started (for the next episode) and not yet stopped."""
        return [process.pid for process in self._processes]

    def close(self) -> None:
        """Stop the workers."""
        for process in self._processes:
            _kill_group(process)
            process.wait()
        self._processes = []


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass
class _Playing:
    """One running episode's program: its session, its endpoint route, and where its turns were generated."""

    session: AgentSession
    route: EndpointEpisode
    generations_seen: int = 0
    turn_segments: list[int] = field(default_factory=list)


class ProgramAgent:
    """Agent programs as an :class:`~agentgym_envs.runner.Agent`: one program thread per episode.

    Args:
        endpoint: The policy endpoint the programs talk to.
        program: The agent program.
        timeout_s: Most seconds a program may take between two env calls (and from its start to its first).
    """

    def __init__(self, endpoint: PolicyEndpoint, program: AgentProgramFn, *, timeout_s: float = 300.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"ProgramAgent.timeout_s: expected > 0, got {timeout_s}")
        self.endpoint = endpoint
        self.program = program
        self.timeout_s = timeout_s
        self.run_seed = 0
        self.stats: Counter[str] = Counter(dict.fromkeys(AGENT_EVENTS, 0))
        """The last batch's events: ``history_edits``, ``segments_dropped``, ``no_generation``, ``agent_error``,
        ``agent_timeout``."""
        self._run = ""
        self._playing: dict[int, _Playing] = {}

    def begin_run(self) -> None:
        """Draw the batch's sampling seed from torch's global RNG, as :class:`~trainers.rollout.ModelAgent` does;
        the batch's :attr:`stats` start from zero."""
        self.run_seed = int(torch.randint(0, 2**62, ()).item())
        self._run = uuid.uuid4().hex[:8]
        self.stats = Counter(dict.fromkeys(AGENT_EVENTS, 0))

    def route(self, episode: Episode) -> EndpointEpisode:
        """The endpoint route of a running episode."""
        return self._playing[episode.index].route

    def thinking(self) -> int:
        """How many programs are running between env calls (each may be about to request a turn)."""
        return sum(playing.session.thinking for playing in list(self._playing.values()))

    def start(self, episode: Episode, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Open the episode's route and session (its program starts on its first turn)."""
        route = self.endpoint.open_episode(lambda n, index=episode.index: turn_seed(self.run_seed, index, n),
                                           episode_id=f"{self._run}-{episode.index}", position=episode.index)
        tools = [*info.get("tools", []), ANSWER_TOOL_SCHEMA]
        session = AgentSession(self.endpoint.base_url(route.id), route.id, self.endpoint.model_name, prompt, tools,
                               task, self.endpoint.session_url(route.id), endpoint_url=self.endpoint.url,
                               offer=lambda: self.endpoint.offer_episode(route.id))
        self.endpoint.sessions[route.id] = session
        self._playing[episode.index] = _Playing(session, route)

    def act(self, episodes: Sequence[Episode], observations: Sequence[str],
            infos: Sequence[Mapping[str, Any]]) -> list[AgentTurn | AgentStop]:
        """Hand each program its last env call's observation (start it, on the first turn), then wait for its next
        env call, its return, its crash or its timeout."""
        for episode, observation in zip(episodes, observations, strict=True):
            session = self._playing[episode.index].session
            if episode.turns:
                session.deliver(observation)
            else:
                threading.Thread(target=self._play, args=(session,), name=f"agent-program-{episode.index}",
                                 daemon=True).start()
        deadline = time.monotonic() + self.timeout_s
        return [self._next(episode, deadline) for episode in episodes]

    def _play(self, session: AgentSession) -> None:
        try:
            self.program(session)
        except EpisodeEnded:
            session.report("ended")
        except BaseException:  # the program's own fault, whatever it is: the episode ends unscored
            session.report("crashed", traceback.format_exc()[-ERROR_CHARS:])
        else:
            session.report("ended")
        finally:
            session.thinking = False

    def _next(self, episode: Episode, deadline: float) -> AgentTurn | AgentStop:
        playing = self._playing[episode.index]
        try:
            kind, value = playing.session.next_event(max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.stats["agent_timeout"] += 1
            return AgentStop("agent_timeout", f"the agent program made no env call and did not return within "
                                              f"{self.timeout_s:g} s")
        if kind == "action":
            return self._turn(playing, value)
        if playing.route.context_exhausted:  # it stopped because the endpoint refused a turn for the context budget
            return AgentStop("context")
        if kind == "crashed":
            self.stats["agent_error"] += 1
            return AgentStop("agent_error", f"the agent program raised:\n{value}")
        return AgentStop("agent_ended")

    @staticmethod
    def _turn(playing: _Playing, action: str) -> AgentTurn:
        """The runner's turn for an env call: the span of the last generated turn, if it is new since the previous
        env call."""
        route = playing.route
        playing.turn_segments.append(len(route.segments))
        seen, playing.generations_seen = playing.generations_seen, route.generations
        if route.record is None or route.generations == seen:
            return AgentTurn(action=action)
        start, length = route.record.turns[-1]
        return AgentTurn(action=action, start=start, length=length)

    def finish(self, episode: Episode) -> None:
        """End the program's episode (its pending env call returns the last observation, later ones raise), and
        give the episode the endpoint's token record (its last segment)."""
        playing = self._playing.pop(episode.index)
        route = playing.route
        stepped = episode.turns and episode.stop_reason not in AGENT_STOPS  # the program waits for this observation
        playing.session.end(episode.turns[-1].observation if stepped else None)
        self.endpoint.finish_episode(route.id)
        self.endpoint.forget_episode(route.id)
        self.stats["history_edits"] += route.history_edits
        self.stats["segments_dropped"] += max(0, len(route.segments) - 1)
        record = route.record
        if record is None:  # nothing to train on: a program that talks to some other model must not pass quietly
            self.stats["no_generation"] += 1
            if not episode.infra_error and episode.stop_reason != "context":  # (a prompt over the budget is)
                episode.stop_reason, episode.infra_error = "agent_error", True
                episode.error = ("the agent program never asked the policy endpoint for a turn (at session.base_url): "
                                 "it talks to another model, or to none, so the episode has no tokens to train on")
            return
        episode.prompt_ids = list(record.prompt_ids)
        episode.completion_ids = list(record.completion_ids)
        episode.logprobs = list(record.logprobs)
        episode.env_mask = list(record.env_mask)
        for turn, segment in zip(episode.turns, playing.turn_segments, strict=False):
            if segment != len(route.segments):  # generated in a segment that is not trained on
                turn.start, turn.length = 0, 0


class AgentProgramRollout:
    """Rolls out batches of episodes of an agent program against the policy: the endpoint, :class:`ProgramAgent`
    and the one episode runner, with :class:`~trainers.rollout.RolloutEngine`'s interface.

    Args:
        generator: Continues token contexts (transformers or vLLM).
        tokenizer: The model's tokenizer.
        envs: Where the episodes' environments come from.
        program: The agent program.
        config: Limits and sampling (the endpoint enforces the token limits; the runner the turn limit).
        timeout_s: Most seconds a program may take between two env calls.
    """

    def __init__(self, generator: Generator, tokenizer, envs: EnvPool, program: AgentProgramFn,
                 config: RolloutConfig | None = None, *, timeout_s: float = 300.0) -> None:
        self.config = config or RolloutConfig()
        self.envs = envs
        self.endpoint = PolicyEndpoint(generator, tokenizer, self.config, batch_window_s=self.config.batch_window_s,
                                       expected_requests=lambda: self.agent.thinking())
        self.agent = ProgramAgent(self.endpoint, program, timeout_s=timeout_s)
        self.runner = EpisodeRunner(envs, max_turns=self.config.max_turns, workers=self.config.tool_workers,
                                    schedule=self.config.schedule, batch_window_s=self.config.batch_window_s)

    def run(self, requests: Sequence[EpisodeRequest], *, max_turns: int | None = None) -> list[Episode]:
        """Play one episode per request, all in flight together; returns them in request order."""
        self.agent.begin_run()
        return self.runner.run(self.agent, requests, max_turns=max_turns)

    def close(self) -> None:
        """Stop the endpoint, and the program's worker processes if it has them (the envs are the caller's)."""
        self.endpoint.close()
        if isinstance(self.agent.program, WorkerPrograms):
            self.agent.program.close()

    def __enter__(self) -> AgentProgramRollout:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
