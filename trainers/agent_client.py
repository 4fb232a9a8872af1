"""An agent program in its own process: its session over HTTP, and the command that runs a program function.

A program that is a command (:class:`~trainers.agent_program.CommandProgram`) is started once per episode with
the episode's addresses in its environment: ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (so the ``openai`` SDK and
most frameworks reach the policy with no code at all) and ``AGENTRL_SESSION_URL`` (the env's side).
:class:`RemoteSession` is the in-process :class:`~trainers.agent_program.AgentSession`'s twin over that URL, so the
same program function runs either way::

    python -m trainers.agent_client trainers.agents.openai_sdk:tool_loop

A worker process (:class:`~trainers.agent_program.WorkerPrograms` starts them) plays episode after episode
instead: it asks the endpoint for the next episode waiting for a program, plays it, reports how the program ended,
and asks again, so the program is imported once per process, not once per episode::

    python -m trainers.agent_client --worker http://127.0.0.1:PORT trainers.agents.openai_sdk:tool_loop

This module imports nothing heavy (no torch, no environments): a process per episode starts in well under a second.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint
from typing import Any

import httpx

SESSION_URL_ENV = "AGENTRL_SESSION_URL"
"""The environment variable holding the episode's session URL."""
NEXT_EPISODE_ROUTE = "/agents/next"
"""``GET`` on the endpoint: the next episode waiting for a worker (204 when none came within ``wait_s``)."""
CLAIM_WAIT_S = 30.0
"""How long a worker's request for the next episode waits on the endpoint before it asks again."""
ERROR_CHARS = 2000
"""Most characters of a crashed program's traceback reported (and kept in the episode's error)."""


class EpisodeEnded(RuntimeError):
    """The episode is over (answered, at its turn limit, or abandoned): the env takes no more calls."""


class RemoteSession:
    """An episode's session from the agent program's own process.

    Args:
        session_url: The episode's session routes on the policy endpoint.
        base_url: The episode's OpenAI ``base_url``.
        api_key: The key to send (any works).
        timeout_s: Most seconds an env step may take (None: no limit).
        http: The HTTP client to use (a worker's, kept over its episodes; None: one of the session's own, closed
            with it).
        described: What ``GET session_url`` answers, when the caller has it already (a worker's claimed episode);
            None: asked for.

    Attributes:
        model: The model name to request.
        prompt: The env's first observation.
        tools: The env's tools and the ``answer`` tool, as OpenAI function schemas.
    """

    def __init__(self, session_url: str, base_url: str, api_key: str = "-", *, timeout_s: float | None = None,
                 http: httpx.Client | None = None, described: Mapping[str, Any] | None = None) -> None:
        self.session_url = session_url
        self.base_url = base_url
        self.api_key = api_key
        self._owns_http = http is None
        self._http = httpx.Client(timeout=timeout_s) if http is None else http
        body = self._describe() if described is None else described
        self.model: str = body["model"]
        self.prompt: str = body["prompt"]
        self.tools: list[dict[str, Any]] = body["tools"]
        self._done: bool = body["done"]

    def _describe(self) -> Mapping[str, Any]:
        response = self._http.get(self.session_url)
        if response.status_code != 200:
            raise EpisodeEnded(_error_message(response))
        return response.json()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RemoteSession:
        """The session the runner started this process for.

        Raises:
            ValueError: ``AGENTRL_SESSION_URL`` or ``OPENAI_BASE_URL`` is not set (the process was not started by
                an agent runner).
        """
        environ = os.environ if environ is None else environ
        missing = [name for name in (SESSION_URL_ENV, "OPENAI_BASE_URL") if not environ.get(name)]
        if missing:
            raise ValueError(f"expected {' and '.join(missing)} in the environment: this process runs one episode of "
                             "an agent program and is started by agentrl's runner (trainers.agent_program)")
        return cls(environ[SESSION_URL_ENV], environ["OPENAI_BASE_URL"], environ.get("OPENAI_API_KEY", "-"))

    @property
    def done(self) -> bool:
        """The episode has ended: further calls raise :class:`EpisodeEnded`."""
        return self._done

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Call one of the env's tools; see :meth:`trainers.agent_program.AgentSession.call`."""
        return self._post("/call", {"name": name, "arguments": arguments})

    def answer(self, text: str) -> str:
        """Give the final answer (ends the episode); returns the env's last observation."""
        return self.call("answer", {"answer": text})

    def step(self, action: str) -> str:
        """Hand the env an action in its own text format; returns the observation."""
        return self._post("/step", {"action": action})

    def _post(self, route: str, body: Mapping[str, Any]) -> str:
        if self._done:
            raise EpisodeEnded("the episode is over; the env takes no more calls")
        response = self._http.post(self.session_url + route, json=dict(body))
        if response.status_code == 409:
            self._done = True
            raise EpisodeEnded(_error_message(response))
        response.raise_for_status()
        answered = response.json()
        self._done = answered["done"]
        return answered["observation"]

    def close(self) -> None:
        """Close the HTTP client (unless it was given)."""
        if self._owns_http:
            self._http.close()


def _error_message(response: httpx.Response) -> str:
    try:
        return response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"


def load_agent_program(reference: str) -> Callable[[Any], None]:
    """The agent program ``reference`` names, as ``"package.module:function"``.

    Raises:
        ValueError: The reference is not of that form, or does not name a callable that can be imported.
    """
    module, _, attribute = reference.partition(":")
    if not module or not attribute:
        raise ValueError(f"agent_program: expected 'package.module:function', got {reference!r}")
    try:
        program = EntryPoint(name="agent_program", value=reference, group="agentrl.agent_programs").load()
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent_program {reference!r}: cannot import it ({type(exc).__name__}: {exc})") from exc
    if not callable(program):
        raise ValueError(f"agent_program {reference!r}: expected a function of an AgentSession, got "
                         f"{type(program).__name__}")
    return program


def play(program: Callable[[Any], None], session: RemoteSession) -> str | None:
    """Run ``program`` on ``session``; None when it returned (or the runner ended the episode first: nothing is
    lost), else the end of its traceback."""
    try:
        program(session)
    except EpisodeEnded:
        pass
    except Exception:  # the program's own fault: reported, the runner ends the episode unscored
        return traceback.format_exc()[-ERROR_CHARS:]
    return None


def work(endpoint_url: str, program: Callable[[Any], None]) -> None:
    """Play the endpoint's episodes with ``program``, one after another, until the endpoint is gone (the trainer
    ended) or says it is closing (410)."""
    with httpx.Client(timeout=None) as http:
        while True:
            try:
                claimed = http.get(endpoint_url + NEXT_EPISODE_ROUTE, params={"wait_s": CLAIM_WAIT_S})
            except httpx.TransportError:
                return
            if claimed.status_code == 410:
                return
            if claimed.status_code == 204:
                continue
            claimed.raise_for_status()
            episode = claimed.json()
            if episode["session"]["done"]:
                continue  # it ended before this worker got to it
            error = play(program, RemoteSession(episode["session_url"], episode["base_url"], episode["api_key"],
                                                http=http, described=episode["session"]))
            try:
                http.post(episode["session_url"] + "/end", json={"error": error})
            except httpx.TransportError:
                return


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.agent_client [--worker ENDPOINT_URL] package.module:function``: play this process's
    episode with it, or, as a worker, the endpoint's episodes one after another."""
    parser = argparse.ArgumentParser(prog="python -m trainers.agent_client", description=main.__doc__)
    parser.add_argument("program", help="the agent program, as package.module:function")
    parser.add_argument("--worker", metavar="ENDPOINT_URL", help="play the episodes of this policy endpoint "
                        "(http://host:port) one after another instead of the one in the environment")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    program = load_agent_program(args.program)
    if args.worker is not None:
        work(args.worker.rstrip("/"), program)
        return 0
    session = RemoteSession.from_environment()
    try:
        error = play(program, session)
    finally:
        session.close()
    if error is not None:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
