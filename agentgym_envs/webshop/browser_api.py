"""The shop's own browser behind its JSON API: what ``python -m agentgym_envs.webshop.server --browser`` adds.

A shop that nothing else can reach (a container with no network, served on a Unix socket:
:class:`~agentgym_envs.webshop.container.ShopContainer`) also owns the browser that visits its pages: a
:class:`~agentgym_envs.webshop.browser.BrowserPool` in the server's process, which opens the shop on its own
loopback port (``Shop.origin``). The env drives it with :class:`~agentgym_envs.webshop.drivers.RemoteBrowserDriver`,
one browser context per driver:

    GET    /api/browsers                                  -> {"contexts": n}: open in the browser
    POST   /api/browsers                                  -> 201 {"browser": bid, "timeout_s": s}
    POST   /api/browsers/{bid}/open    {"path": "/s/<sid>"}  -> {"html": str, "path": str}
    POST   /api/browsers/{bid}/search  {"query": str}        -> {"html": str, "path": str}
    POST   /api/browsers/{bid}/click   {"index": int}        -> {"html": str, "path": str}
    GET    /api/browsers/{bid}/aria                          -> {"aria": str}
    DELETE /api/browsers/{bid}                               -> 204: the context is closed

``html`` is the page reached, ``path`` its path and query; ``timeout_s`` is the longest one call may take.
Errors are ``{"error": message}`` with the status saying what the driver raised:

* 502: :class:`~agentgym_envs.webshop.errors.BrowserUnavailableError` (the browser crashed or timed out, or a
  navigation failed); the context stays broken, as a :class:`~agentgym_envs.webshop.browser.BrowserDriver` does;
* 404: no such context (never made, or closed);
* 400: a malformed body, or :class:`ValueError` (a search on a page without a search box);
* 422: :class:`IndexError` (no clickable with that index).

The browser is launched when the server starts (so that a missing or broken Chromium stops it at once) and
closed, with every context, when it stops.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from aiohttp import web

from agentgym_envs.webshop.browser import GRACE_S, LAUNCH_TIMEOUT_S, BrowserDriver, BrowserPool
from agentgym_envs.webshop.errors import BrowserUnavailableError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ShopOrigin(Protocol):
    """What the browser API needs of the shop it serves: where it listens (the server's ``Shop`` is one).

    The server imports this module, never the other way round (it may run as ``__main__``).
    """

    origin: str | None
    """``http://host:port`` the shop listens on, once it does."""


class ApiError(Exception):
    """A request the browser API cannot serve: ``{"error": message}`` with a 4xx or 502 status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BrowserContexts:
    """The contexts of the shop's own browser, by id, and the handlers of ``/api/browsers``.

    Args:
        shop: The shop whose pages the browser opens (at its ``origin``).
        pool: The browser; closed by the app's cleanup.
    """

    def __init__(self, shop: ShopOrigin, pool: BrowserPool) -> None:
        self.shop = shop
        self.pool = pool
        self._drivers: dict[str, BrowserDriver] = {}

    @property
    def call_timeout_s(self) -> float:
        """The longest one call may take, as the pool waits for it: a launch of the browser (only a new context
        after a crash launches one), two browser operations and a grace period."""
        return LAUNCH_TIMEOUT_S + 2 * self.pool.timeout_s + GRACE_S

    async def count(self, request: web.Request) -> web.Response:
        """``GET /api/browsers``: how many contexts are open in the browser (what a closed env must leave: 0)."""
        return web.json_response({"contexts": await _call(lambda: self.pool.open_contexts)})

    async def create(self, request: web.Request) -> web.Response:
        """``POST /api/browsers``: a fresh context with one blank page."""
        driver = await _call(self.pool.new_driver)
        bid = secrets.token_urlsafe(12)
        self._drivers[bid] = driver
        return web.json_response({"browser": bid, "timeout_s": self.call_timeout_s}, status=201)

    async def open(self, request: web.Request) -> web.Response:
        """``POST /api/browsers/{bid}/open`` with ``{"path": "/s/<sid>"}``: go to that page of the shop."""
        driver = self._driver(request)
        path = _field(await _body(request), "path", str)
        if not path.startswith("/"):
            raise ApiError(400, f"expected a path that starts with '/', got {path!r}")
        assert self.shop.origin is not None, "the shop takes requests only once it listens"
        return await _visit(driver, driver.open, self.shop.origin + path)

    async def search(self, request: web.Request) -> web.Response:
        """``POST /api/browsers/{bid}/search`` with ``{"query": str}``: type it into the search box, submit."""
        driver = self._driver(request)
        return await _visit(driver, driver.search, _field(await _body(request), "query", str))

    async def click(self, request: web.Request) -> web.Response:
        """``POST /api/browsers/{bid}/click`` with ``{"index": int}``: click that clickable element."""
        driver = self._driver(request)
        return await _visit(driver, driver.click, _field(await _body(request), "index", int))

    async def aria(self, request: web.Request) -> web.Response:
        """``GET /api/browsers/{bid}/aria``: the current page's accessibility tree."""
        driver = self._driver(request)
        return web.json_response({"aria": await _call(driver.aria_snapshot)})

    async def delete(self, request: web.Request) -> web.Response:
        """``DELETE /api/browsers/{bid}``: close the context."""
        bid = request.match_info["bid"]
        driver = self._drivers.pop(bid, None)
        if driver is None:
            raise ApiError(404, f"expected the id of an open browser context, got {bid!r}")
        await _call(driver.close)
        return web.Response(status=204)

    def _driver(self, request: web.Request) -> BrowserDriver:
        bid = request.match_info["bid"]
        driver = self._drivers.get(bid)
        if driver is None:
            raise ApiError(404, f"expected the id of an open browser context, got {bid!r}; "
                                    "contexts are made by POST /api/browsers")
        return driver


def add_browser_api(app: web.Application, shop: ShopOrigin, *, timeout_s: float = 30.0) -> BrowserContexts:
    """Give the shop ``app`` a browser of its own and the ``/api/browsers`` routes that drive it.

    The browser is launched on the app's startup and closed on its cleanup.

    Args:
        app: The shop's application, from :func:`~agentgym_envs.webshop.server.make_app`, not yet started.
        shop: Its :class:`~agentgym_envs.webshop.server.Shop` (``app[SHOP]``).
        timeout_s: The limit of every browser operation.

    Raises:
        EnvConfigError: No Chromium executable, or no Playwright.
    """
    contexts = BrowserContexts(shop, BrowserPool(timeout_s=timeout_s))
    app.router.add_get("/api/browsers", _json_errors(contexts.count))
    app.router.add_post("/api/browsers", _json_errors(contexts.create))
    app.router.add_post("/api/browsers/{bid}/open", _json_errors(contexts.open))
    app.router.add_post("/api/browsers/{bid}/search", _json_errors(contexts.search))
    app.router.add_post("/api/browsers/{bid}/click", _json_errors(contexts.click))
    app.router.add_get("/api/browsers/{bid}/aria", _json_errors(contexts.aria))
    app.router.add_delete("/api/browsers/{bid}", _json_errors(contexts.delete))

    async def launch(_: web.Application) -> None:
        await asyncio.to_thread(lambda: contexts.pool.version)

    async def close(_: web.Application) -> None:
        await asyncio.to_thread(contexts.pool.close)

    app.on_startup.append(launch)
    app.on_cleanup.append(close)
    return contexts


def _json_errors(handler: Handler) -> Handler:
    """``handler``, with an :class:`ApiError` it raises answered as ``{"error": message}`` and its status."""
    @functools.wraps(handler)
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return web.json_response({"error": exc.message}, status=exc.status)

    return handle


async def _visit(driver: BrowserDriver, operation: Callable[..., str], *args: Any) -> web.Response:
    """Run a page operation of ``driver``; the reply carries the HTML and the path of the page reached."""
    def visit() -> tuple[str, str]:
        html = operation(*args)
        return html, driver.url

    html, url = await _call(visit)
    parts = urlsplit(url)
    return web.json_response({"html": html, "path": parts.path + (f"?{parts.query}" if parts.query else "")})


async def _call(operation: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking driver call on a worker thread; what it raises becomes the status the API promises."""
    try:
        return await asyncio.to_thread(operation, *args)
    except BrowserUnavailableError as exc:
        raise ApiError(502, str(exc)) from exc
    except IndexError as exc:
        raise ApiError(422, str(exc)) from exc
    except ValueError as exc:
        raise ApiError(400, str(exc)) from exc


async def _body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object.

    Raises:
        ApiError: 400 for a body that is not a JSON object.
    """
    try:
        payload = await request.json()
    except ValueError as exc:
        raise ApiError(400, f"expected a JSON body, got invalid JSON ({exc})") from exc
    if not isinstance(payload, dict):
        raise ApiError(400, f"expected a JSON object, got {type(payload).__name__}")
    return payload


def _field(payload: dict[str, Any], name: str, kind: type) -> Any:
    """``payload[name]``, checked to be of ``kind``.

    Raises:
        ApiError: 400 when it is missing or of another type.
    """
    value = payload.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ApiError(400, f"expected {{{name!r}: {kind.__name__}}}, got {str(payload)[:200]}")
    return value


__all__ = ["ApiError", "BrowserContexts", "add_browser_api"]
