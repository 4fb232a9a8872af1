"""One ASGI app, both protocols: OpenEnv's routes go to openenv-core's app, every other route to the ORS app.

The ORS SDK addresses its routes from the root of the URL it is given (``/create``, ``/{env}/call``, ...), and
OpenEnv's clients address theirs from the root too (``/ws``, ``/mcp``, ``/reset``), so the two apps share the root:
a request whose first path segment is one of :data:`OPENENV_ROUTES` (or any WebSocket) goes to OpenEnv, anything
else to ORS. Both apps' start-up and shut-down run (their session reapers; at shut-down every session's env is
closed). The session count is shared: ``max_sessions`` bounds OpenEnv's and ORS's sessions together.

One more route is agentrl's own: ``GET /agentrl/env`` (:data:`DESCRIPTION_ROUTE`) answers the served env's id, split,
card and tasks as the agent is shown them (:meth:`ServedEnv.description`), so that ``agentrl/Remote-v0`` plays the
env as agentrl's tooling plays one in process (``benchmarks.evaluate --remote``).

With a token, every request must carry it: as ``Authorization: Bearer <token>`` or ``X-API-Key: <token>`` (the ORS
SDK sends its ``api_key`` so), or as a first path segment ``/auth/<token>`` that is stripped (for OpenEnv's clients,
which send no headers: give them ``http://host:port/auth/<token>`` as their URL).
"""

from __future__ import annotations

import hmac
from contextlib import AsyncExitStack, suppress
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from agentgym_envs.serve.openenv_server import openenv_app
from agentgym_envs.serve.ors_server import ors_environment_class
from agentgym_envs.serve.session import ServedEnv, SessionSlots

OPENENV_ROUTES = frozenset({"ws", "mcp", "reset", "step", "state", "schema", "metadata", "health", "openapi.json",
                            "docs", "redoc"})
"""First path segments served by openenv-core's app."""
AUTH_PREFIX = "auth"
"""``/auth/<token>/...``: the token in the path, for clients that send no headers."""
AGENTRL_ROUTES = "agentrl"
"""The first path segment of agentrl's own routes."""
DESCRIPTION_ROUTE = f"/{AGENTRL_ROUTES}/env"
"""``GET``: the served env's description (:meth:`ServedEnv.description`)."""

class ProtocolRouter:
    """The server's ASGI app (see the module docstring).

    Args:
        openenv: openenv-core's app.
        ors: The ORS SDK's app.
        slots: The sessions alive, across both.
        token: The token every request must carry; None for none (loopback only).
    """

    def __init__(self, openenv: Any, ors: Any, agentrl: ASGIApp, slots: SessionSlots,
                 token: str | None = None) -> None:
        self.openenv, self.ors, self.agentrl, self.slots, self.token = openenv, ors, agentrl, slots, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        scope = dict(scope)
        if self.token is not None and not self._authorized(scope):
            await _refuse(scope, receive, send)
            return
        segment = scope["path"].lstrip("/").split("/", 1)[0]
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        app: ASGIApp = self.openenv if segment in OPENENV_ROUTES else \
            self.agentrl if segment == AGENTRL_ROUTES else self.ors
        await app(scope, receive, send)

    async def _websocket(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """An OpenEnv WebSocket session. openenv-core (0.3.0) closes the socket again after a client's ``close``
        message and raises when the client has already gone; the session is closed before that, so it is dropped."""
        with suppress(WebSocketDisconnect):
            await self.openenv(scope, receive, send)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        """True when the request carries the token; a token in the path is stripped from it."""
        assert self.token is not None
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        offered = [headers.get("x-api-key", ""), headers.get("authorization", "").removeprefix("Bearer ")]
        prefix = f"/{AUTH_PREFIX}/"
        if scope["path"].startswith(prefix):
            token, _, rest = scope["path"][len(prefix):].partition("/")
            offered.append(token)
            scope["path"], scope["raw_path"] = f"/{rest}", f"/{rest}".encode()
        return any(hmac.compare_digest(candidate.encode(), self.token.encode()) for candidate in offered)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Run both apps' lifespans inside the server's."""
        await receive()  # lifespan.startup
        async with AsyncExitStack() as stack:
            try:
                for app in (self.openenv, self.ors):
                    await stack.enter_async_context(app.router.lifespan_context(app))
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


async def _refuse(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answer a request without the token: 401 (HTTP) or a closed handshake (WebSocket)."""
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008, "reason": "token required"})
        return
    body = b'{"detail": "this server needs a token: Authorization: Bearer <token>, X-API-Key, or /auth/<token>/"}'
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def build_app(served: ServedEnv, token: str | None = None) -> ProtocolRouter:
    """The ASGI app serving ``served`` over OpenEnv and ORS, its sessions bounded by ``served.config.max_sessions``.

    Example:
        >>> import uvicorn                                                                # doctest: +SKIP
        >>> served = ServedEnv.probe(ServeConfig("agentrl/Search-v0"))                      # doctest: +SKIP
        >>> uvicorn.run(build_app(served), host="127.0.0.1", port=8000)                     # doctest: +SKIP
    """
    from openreward.environments import Server

    slots = SessionSlots(served.config.max_sessions)
    ors = Server([ors_environment_class(served, slots)], return_errors="exception").app
    return ProtocolRouter(openenv_app(served, slots), ors, agentrl_app(served), slots, token)


def agentrl_app(served: ServedEnv) -> Starlette:
    """agentrl's own routes: :data:`DESCRIPTION_ROUTE`."""
    description = served.description()

    async def describe(_: Request) -> JSONResponse:
        return JSONResponse(description)

    return Starlette(routes=[Route(DESCRIPTION_ROUTE, describe, methods=["GET"])])

