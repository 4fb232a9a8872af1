"""The policy endpoint: an OpenAI-compatible server in front of the model being trained.

Each episode has its own route, ``http://127.0.0.1:<port>/episodes/<id>/v1`` (or the plain ``/v1`` with the
episode id as the API key), so an agent program needs nothing but a ``base_url``:

* ``POST .../chat/completions``: Chat Completions with ``tools`` and ``tool_calls``, streamed or not
  (:mod:`~trainers.endpoint.openai_format`); every turn is recorded token for token
  (:mod:`~trainers.endpoint.episodes`).
* ``GET .../models``: the one policy.

An agent program that runs as its own process reaches the env's tools on the same server, at
``/episodes/<id>/session`` (:class:`~trainers.agent_program.RemoteSession` is its client): ``GET`` gives the
prompt, the tool schemas and the model name; ``POST .../session/call`` with ``{"name": ..., "arguments": ...}`` calls
a tool (``POST .../session/step`` with ``{"action": ...}`` hands the env an action in its own text format), answered
with ``{"observation": ..., "done": ...}`` once the env has stepped (409 when the episode is over).

Long-lived worker processes (:class:`~trainers.agent_program.WorkerPrograms`) take their episodes from
``GET /agents/next?wait_s=S``: the next episode offered to a worker (:meth:`PolicyEndpoint.offer_episode`), as
``{"episode", "session_url", "base_url", "api_key", "session"}`` (``session``: what ``GET .../session`` answers, so
the worker starts without asking), or 204 when none was offered within ``S`` seconds (410 once
the server is closing). A worker reports how its program ended with ``POST .../session/end`` and
``{"error": null}`` or ``{"error": "<traceback>"}``.

Requests of all episodes that arrive together are generated in one batch by the trainer's
:class:`~trainers.generation.Generator` (transformers on CPU, vLLM on GPU), on one thread that owns it. Each turn
is sampled with the seed its episode gives it, so an episode's tokens do not depend on what else shared its batch,
and each episode's KV cache is kept between its turns. The server binds loopback unless told otherwise; every
refusal is OpenAI's error body, and the server stays up through any of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch
from aiohttp import web

from agentgym_envs.search.server import is_loopback
from trainers.agent_client import CLAIM_WAIT_S, NEXT_EPISODE_ROUTE
from trainers.chat import ChatTokens
from trainers.endpoint.episodes import EndpointEpisode
from trainers.endpoint.openai_format import (
    ChatRequest,
    Reply,
    RequestError,
    call_action,
    completion_body,
    completion_chunks,
    make_reply,
    models_body,
    parse_request,
)
from trainers.generation import GeneratedTurn, Generator
from trainers.rollout import RolloutConfig, stop_token_ids, strip_turn_end

MAX_BODY_BYTES = 32 << 20
"""Largest request body accepted (a long conversation is a few MB of JSON)."""
DEFAULT_MODEL_NAME = "agentrl-policy"
EXPECTED_WAIT_S = 0.25
"""Longest a batch waits for requests an agent runner says are coming."""


class EnvSession(Protocol):
    """The env side of an episode, as the session routes serve it (:class:`~trainers.agent_program.AgentSession`)."""

    prompt: str
    tools: list[dict[str, Any]]
    model: str

    @property
    def done(self) -> bool:
        """The episode is over."""

    def submit(self, action: str) -> Future:
        """Hand the env an action; a future of its observation (of ``EpisodeEnded`` once the episode is over)."""

    def program_ended(self, error: str | None) -> None:
        """The program a worker process ran on this episode returned (``error`` None) or raised (its traceback)."""


@dataclass
class _Pending:
    position: int
    context: list[int]
    limit: int
    key: tuple[str, int]
    seed: int
    future: Future


class _Batcher:
    """Runs every generation on one thread, batching the requests that arrive together.

    A batch starts with the first waiting request and takes every request that arrives within ``window_s`` of the
    one before. When ``expected()`` (how many requests are coming now: an agent runner knows) says more are coming,
    it waits for them however far apart they arrive, up to ``EXPECTED_WAIT_S`` (programs building their requests
    side by side can take longer than a window between two), and is generated as soon as they are all there.
    """

    def __init__(self, generator: Generator, config: RolloutConfig, stop_ids: Sequence[int], window_s: float,
                 expected: Callable[[], int] | None) -> None:
        self.generator = generator
        self.config = config
        self.stop_ids = list(stop_ids)
        self.window_s = window_s
        self.expected = expected
        self.batch_sizes: list[int] = []
        self._pending: list[_Pending] = []
        self._released: list[tuple[str, int]] = []
        self._wake = threading.Condition()
        self._closed = False
        self._threads = torch.get_num_threads()
        self._thread = threading.Thread(target=self._loop, name="policy-endpoint-generator", daemon=True)
        self._thread.start()

    def submit(self, position: int, context: list[int], limit: int, key: tuple[str, int], seed: int) -> Future:
        """Queue a turn; a batch's rows are ordered by ``position`` (the episodes' places in their batch), so the
        same requests make the same batch however they arrived."""
        future: Future = Future()
        with self._wake:
            if self._closed:
                raise RequestError(503, "the policy endpoint is shutting down", code="server_closed")
            self._pending.append(_Pending(position, context, limit, key, seed, future))
            self._wake.notify()
        return future

    def release(self, keys: Sequence[tuple[str, int]]) -> None:
        """Drop these prefix caches (on the generator's thread, before its next batch)."""
        with self._wake:
            self._released.extend(keys)

    @property
    def closed(self) -> bool:
        """:meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        torch.set_num_threads(self._threads)  # OpenMP's setting is per thread: generate as the creating thread would
        while True:
            batch, released = self._next_batch()
            if batch is None:
                return
            if released:
                self.generator.release(released)
            if batch:
                self._generate(batch)

    def _next_batch(self) -> tuple[list[_Pending] | None, list[tuple[str, int]]]:
        with self._wake:
            while not self._pending and not self._closed:
                self._wake.wait()
            if self._closed:
                for pending in self._pending:
                    pending.future.set_exception(RequestError(503, "the policy endpoint is shutting down",
                                                              code="server_closed"))
                return None, []
            give_up = time.monotonic() + EXPECTED_WAIT_S
            while self.expected is None or len(self._pending) < self.expected():
                seen = len(self._pending)
                self._wake.wait(self.window_s)
                if len(self._pending) == seen and (self.expected is None or time.monotonic() >= give_up):
                    break
            batch, self._pending = sorted(self._pending, key=lambda pending: pending.position), []
            released, self._released = self._released, []
            return batch, released

    def _generate(self, batch: list[_Pending]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            turns = self.generator.generate([p.context for p in batch], [p.limit for p in batch],
                                            stop_token_ids=self.stop_ids, temperature=self.config.temperature,
                                            top_p=self.config.top_p, keys=[p.key for p in batch],
                                            seeds=[p.seed for p in batch])
        except Exception as exc:  # the generator failed: every request of the batch is told, the server stays up
            for pending in batch:
                pending.future.set_exception(RequestError(500, f"generation failed: {type(exc).__name__}: {exc}",
                                                          code="generation_failed"))
            return
        for pending, turn in zip(batch, turns, strict=True):
            pending.future.set_result(turn)


class PolicyEndpoint:
    """The OpenAI-compatible server of a policy, one route per episode, run on a background thread.

    Args:
        generator: Continues token contexts (the trainer's; the endpoint's thread is the only one using it while
            it serves).
        tokenizer: The model's tokenizer (its chat template renders the messages).
        config: Token limits and sampling (``max_tokens_per_turn``, ``max_context_tokens``, ``min_turn_tokens``,
            ``temperature``, ``top_p``), as the in-process rollout reads them.
        host: Where to listen; a non-loopback address needs ``allow_remote`` (there is no authentication).
        port: 0 picks a free port (:attr:`port` says which).
        model_name: The model id the server reports.
        batch_window_s: How long a batch waits for the next request before it is generated.
        expected_requests: How many requests are coming now (an agent runner knows); a batch is generated as soon as
            that many wait. None: only ``batch_window_s`` decides.
        allow_remote: Listen on a non-loopback ``host``.

    Example:
        >>> with PolicyEndpoint(generator, tokenizer, RolloutConfig()) as endpoint:  # doctest: +SKIP
        ...     episode = endpoint.open_episode(seed_of=lambda turn: turn)
        ...     openai.OpenAI(base_url=endpoint.base_url(episode.id), api_key="-").chat.completions.create(...)
    """

    def __init__(self, generator: Generator, tokenizer, config: RolloutConfig, *, host: str = "127.0.0.1",
                 port: int = 0, model_name: str = DEFAULT_MODEL_NAME, batch_window_s: float = 0.005,
                 expected_requests: Callable[[], int] | None = None, allow_remote: bool = False) -> None:
        if not allow_remote and not is_loopback(host):
            raise ValueError(f"PolicyEndpoint.host: expected a loopback address, got {host!r}; pass allow_remote=True "
                             "to expose the policy (the endpoint has no authentication)")
        self.tokenizer = tokenizer
        self.chat = ChatTokens(tokenizer)
        self.config = config
        self.host = host
        self.model_name = model_name
        self.episodes: dict[str, EndpointEpisode] = {}
        self.sessions: dict[str, EnvSession] = {}
        self.errors: Counter[str] = Counter()
        self.requests = 0
        self._offered: asyncio.Queue[str | None] | None = None  # made on the server's loop; None: closing
        self._workers_waiting = 0
        self._batcher = _Batcher(generator, config, stop_token_ids(tokenizer), batch_window_s, expected_requests)
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False)
        self._thread = threading.Thread(target=self._loop.run_forever, name="policy-endpoint", daemon=True)
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(host, port), self._loop).result(timeout=30)

    # ---------------------------------------------------------------- lifecycle

    async def _start(self, host: str, port: int) -> int:
        self._offered = asyncio.Queue()
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        return self._runner.addresses[0][1]

    def close(self) -> None:
        """Stop serving: waiting requests get a 503 (a worker's request for an episode a 410), the generator's thread
        ends. Closing again does nothing."""
        if self._loop.is_closed():
            return
        self._batcher.close()
        self._loop.call_soon_threadsafe(self._release_workers)
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def __enter__(self) -> PolicyEndpoint:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def batch_sizes(self) -> list[int]:
        """The size of every batch generated so far."""
        return self._batcher.batch_sizes

    # ---------------------------------------------------------------- episodes

    def open_episode(self, seed_of: Callable[[int], int], episode_id: str | None = None,
                     position: int = 0) -> EndpointEpisode:
        """A new episode route; ``seed_of(n)`` seeds its ``n``-th generation; ``position`` orders its rows in a
        batch (the episode's place in its rollout batch)."""
        episode_id = episode_id or uuid.uuid4().hex[:16]
        if episode_id in self.episodes:
            raise ValueError(f"open_episode: episode {episode_id!r} is already open")
        episode = EndpointEpisode(episode_id, self.chat, seed_of, position)
        self.episodes[episode_id] = episode
        return episode

    def finish_episode(self, episode_id: str) -> EndpointEpisode:
        """End an episode: later requests on its route get a 409; its prefix caches are dropped."""
        episode = self.episodes[episode_id]
        episode.finished = True
        self._batcher.release([(episode_id, n) for n in range(1, len(episode.segments) + 1)])
        return episode

    def offer_episode(self, episode_id: str) -> None:
        """Hand an open episode (its session registered in :attr:`sessions`) to the next worker process that asks
        (``GET /agents/next``)."""
        self._loop.call_soon_threadsafe(self._offered.put_nowait, episode_id)

    def forget_episode(self, episode_id: str) -> None:
        """Drop a finished episode's record and session (its routes then answer 404)."""
        self.episodes.pop(episode_id, None)
        self.sessions.pop(episode_id, None)

    def session_url(self, episode_id: str) -> str:
        """Where an agent program in its own process finds the episode's env (the session routes)."""
        return f"http://{self.host}:{self.port}/episodes/{episode_id}/session"

    def base_url(self, episode_id: str) -> str:
        """The ``base_url`` an OpenAI client of this episode uses."""
        return f"http://{self.host}:{self.port}/episodes/{episode_id}/v1"

    @property
    def url(self) -> str:
        """The server's root URL (what worker processes are given)."""
        return f"http://{self.host}:{self.port}"

    @property
    def shared_base_url(self) -> str:
        """The ``base_url`` of clients that name their episode by API key instead."""
        return f"http://{self.host}:{self.port}/v1"

    # ---------------------------------------------------------------- HTTP

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        for prefix in ("/episodes/{episode}/v1", "/v1"):
            app.router.add_post(prefix + "/chat/completions", self._chat_completions)
            app.router.add_get(prefix + "/models", self._models)
        app.router.add_get("/episodes/{episode}/session", self._session)
        app.router.add_post("/episodes/{episode}/session/step", self._session_step)
        app.router.add_post("/episodes/{episode}/session/call", self._session_step)
        app.router.add_post("/episodes/{episode}/session/end", self._session_end)
        app.router.add_get(NEXT_EPISODE_ROUTE, self._next_episode)
        return app

    def _env_session(self, request: web.Request) -> EnvSession:
        session = self.sessions.get(request.match_info["episode"])
        if session is None:
            raise RequestError(404, f"no env session for episode {request.match_info['episode']!r}",
                               code="episode_not_found")
        return session

    async def _session(self, request: web.Request) -> web.Response:
        try:
            session = self._env_session(request)
        except RequestError as exc:
            return web.json_response(exc.body(), status=exc.status)
        return web.json_response(_described(session))

    async def _session_step(self, request: web.Request) -> web.Response:
        try:
            session = self._env_session(request)
            action = _session_action(request.path.rsplit("/", 1)[1], await self._json(request))
            if session.done:
                raise RequestError(409, "the episode is over; the env takes no more actions", code="episode_finished")
            observation = await asyncio.wrap_future(session.submit(action))
        except RequestError as exc:
            return web.json_response(exc.body(), status=exc.status)
        except RuntimeError as exc:  # EpisodeEnded: the episode ended before or while the step waited
            return web.json_response(RequestError(409, str(exc), code="episode_finished").body(), status=409)
        return web.json_response({"observation": observation, "done": session.done})

    async def _session_end(self, request: web.Request) -> web.Response:
        try:
            session = self._env_session(request)
            body = await self._json(request)
            if not isinstance(body, dict) or not isinstance(body.get("error"), str | None):
                raise RequestError(400, 'expected {"error": null} or {"error": "<traceback>"}', param="error")
        except RequestError as exc:
            return web.json_response(exc.body(), status=exc.status)
        session.program_ended(body.get("error"))
        return web.json_response({})

    async def _next_episode(self, request: web.Request) -> web.Response:
        """The next offered episode whose session is still open; 204 when none came in ``wait_s``."""
        try:
            wait_s = float(request.query.get("wait_s", CLAIM_WAIT_S))
        except ValueError:
            return web.json_response(RequestError(400, "wait_s: expected seconds", param="wait_s").body(), status=400)
        deadline = self._loop.time() + max(0.0, wait_s)
        while not self._batcher.closed:
            self._workers_waiting += 1
            try:
                episode_id = await asyncio.wait_for(self._offered.get(), max(0.0, deadline - self._loop.time()))
            except TimeoutError:
                return web.Response(status=204)
            finally:
                self._workers_waiting -= 1
            if episode_id is None:  # closing
                break
            if episode_id in self.sessions:
                return web.json_response({"episode": episode_id, "session_url": self.session_url(episode_id),
                                          "base_url": self.base_url(episode_id), "api_key": episode_id,
                                          "session": _described(self.sessions[episode_id])})
        return web.json_response(RequestError(410, "the policy endpoint is shutting down",
                                              code="server_closed").body(), status=410)

    def _release_workers(self) -> None:
        """Answer every worker waiting for an episode (the server is closing)."""
        for _ in range(self._workers_waiting):
            self._offered.put_nowait(None)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(models_body(self.model_name))

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            episode = self._episode(request)
            body = parse_request(await self._json(request))
            if not episode.busy.acquire(blocking=False):
                raise RequestError(409, f"episode {episode.id!r} has a request in flight; an episode's requests must "
                                   "come one after another", code="episode_busy")
            try:
                reply = await self._turn(episode, body)
            finally:
                episode.busy.release()
        except RequestError as exc:
            self.errors[exc.code or str(exc.status)] += 1
            return web.json_response(exc.body(), status=exc.status)
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        if not body.stream:
            return web.json_response(completion_body(reply, completion_id=completion_id, model=self.model_name,
                                                     logprobs=body.logprobs))
        return await self._stream(request, completion_chunks(reply, completion_id=completion_id,
                                                             model=self.model_name, logprobs=body.logprobs,
                                                             include_usage=body.include_usage))

    def _episode(self, request: web.Request) -> EndpointEpisode:
        episode_id = request.match_info.get("episode") or _bearer(request)
        if not episode_id:
            raise RequestError(404, "no episode named: use the base_url /episodes/<id>/v1 an agent runner gave you, "
                               "or pass the episode id as the API key", code="episode_not_found")
        episode = self.episodes.get(episode_id)
        if episode is None:
            raise RequestError(404, f"unknown episode {episode_id!r}", code="episode_not_found")
        if episode.finished:
            raise RequestError(409, f"episode {episode_id!r} has finished; it takes no more requests",
                               code="episode_finished")
        return episode

    @staticmethod
    async def _json(request: web.Request) -> object:
        try:
            return json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge as exc:
            raise RequestError(413, f"the request body is larger than {MAX_BODY_BYTES} bytes") from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(400, f"the request body is not JSON: {exc}") from exc

    async def _turn(self, episode: EndpointEpisode, request: ChatRequest) -> Reply:
        """Generate the episode's next turn in the context ``request`` gives, and record it."""
        turn = episode.context(request)
        context = turn.ids
        budget = self.config.max_context_tokens - len(context)
        if budget < self.config.min_turn_tokens:
            episode.context_exhausted = True
            if not turn.new_segment:  # the messages that filled the context stay on the record
                episode.commit_context(turn)
            raise RequestError(400, f"the conversation is {len(context)} tokens; with at least "
                               f"{self.config.min_turn_tokens} to generate it does not fit the context budget of "
                               f"{self.config.max_context_tokens} tokens", param="messages",
                               code="context_length_exceeded")
        limit = min(self.config.max_tokens_per_turn, budget, request.max_tokens or budget)
        key = episode.cache_key if not turn.new_segment else (episode.id, len(episode.segments) + 1)
        future = self._batcher.submit(episode.position, context, limit, key, episode.seed_of(episode.generations))
        generated: GeneratedTurn = await asyncio.wrap_future(future)
        reply = self._reply(generated, request, call_id_prefix=f"call_{episode.id}_{episode.generations}",
                            prompt_tokens=len(context), limit=limit)
        if episode.finished:  # it ended while the turn was generated: nothing more is recorded
            raise RequestError(409, f"episode {episode.id!r} finished while its turn was generated",
                               code="episode_finished")
        episode.commit(turn, reply)
        return reply

    def _reply(self, generated: GeneratedTurn, request: ChatRequest, *, call_id_prefix: str, prompt_tokens: int,
               limit: int) -> Reply:
        text = strip_turn_end(self.tokenizer.decode(generated.ids, skip_special_tokens=False), self.tokenizer)
        hit_limit = len(generated.ids) >= limit and generated.ids[-1] not in self._batcher.stop_ids
        reply = make_reply(text, tool_names=request.tool_names, call_id_prefix=call_id_prefix, hit_limit=hit_limit)
        tokens = tuple(self.tokenizer.convert_ids_to_tokens(generated.ids)) if request.logprobs else ()
        return replace(reply, token_ids=tuple(generated.ids), logprobs=tuple(generated.logprobs),
                       prompt_tokens=prompt_tokens, tokens=tokens)

    @staticmethod
    async def _stream(request: web.Request, chunks: Iterator[dict]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _described(session: EnvSession) -> dict[str, Any]:
    """A session as ``GET .../session`` answers it."""
    return {"prompt": session.prompt, "tools": session.tools, "model": session.model, "done": session.done}


def _session_action(route: str, body: object) -> str:
    """The env action of a session request: ``{"action": <text>}`` to ``step``, ``{"name", "arguments"}`` to
    ``call``."""
    if route == "step":
        if not isinstance(body, dict) or not isinstance(body.get("action"), str):
            raise RequestError(400, 'expected {"action": "<the action text>"}', param="action")
        return body["action"]
    if not isinstance(body, dict) or not isinstance(body.get("name"), str) or \
            not isinstance(body.get("arguments", {}), dict | str):
        raise RequestError(400, 'expected {"name": "<tool>", "arguments": {...} or "<JSON>"}', param="name")
    return call_action(body["name"], body.get("arguments", {}))


def _bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    return header[len("Bearer "):].strip() if header.startswith("Bearer ") else ""

