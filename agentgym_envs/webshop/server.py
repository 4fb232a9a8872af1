"""The WebShop web server: a catalogue behind BM25 search, HTML pages for the agent and a JSON API for the env.

HTML pages (the agent's; ``sid`` is a session made by the API, options are ``o.<group>=<value>``):

    GET  /s/{sid}                                        search page
    GET  /s/{sid}/search?query=Q&page=N                  results: 10 a page of the top 50 BM25 hits
    GET  /s/{sid}/item/{asin}?query=Q&page=N&o.G=V...    item page
    GET  /s/{sid}/item/{asin}/{section}?(same)           description | features | reviews
    POST /s/{sid}/buy/{asin}     form: o.G=V..., query, page   records the session's purchase; done page

JSON API (the env's, tests' and operators'; never linked from a page):

    GET    /api/health           {"status": "ok", "products": n, "catalogue": name, "sessions": n}
    POST   /api/sessions         {"instruction": str, "session": sid?} -> 201 {"session": sid, "url": "/s/<sid>"}
                                 (a client-chosen sid makes the request safe to repeat: the same session)
    GET    /api/sessions/{sid}   {"session": sid, "instruction": str, "purchase": Purchase.to_dict() | null}
    DELETE /api/sessions/{sid}   204
    GET    /api/products/{asin}  Product.to_dict()

Every page is ``<body data-page="search|results|item|subpage|done|error">`` and, except error pages,
starts with the session's instruction; what the agent can click has the class ``clickable``
(:mod:`agentgym_envs.webshop.pages` relies on these conventions). A request the shop cannot serve (an
unknown session, product, option value or section, a page out of range, a second purchase) gets an
error page with a 4xx status, or ``{"error": ...}`` under ``/api/``. The server never sees a goal:
only the instruction text; the env scores the purchase.

The server binds to loopback unless ``--allow-remote`` is given: it has no authentication. ``--unix PATH``
serves the same routes on a Unix socket as well (how a shop in a container with no network is reached:
:class:`~agentgym_envs.webshop.container.ShopContainer`). ``--browser`` gives the shop a Chromium of its own
that opens its pages on the loopback port, driven through ``/api/browsers`` (:mod:`~agentgym_envs.webshop.browser_api`).

Example:
    python -m agentgym_envs.webshop.server --catalogue generated-v1 --port 0
    python -m agentgym_envs.webshop.server --catalogue products.jsonl --index-dir /data/shop-index --port 8100
    python -m agentgym_envs.webshop.server --catalogue generated-v1 --port 0 --unix /run/shop/shop.sock --browser
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import re
import secrets
import signal
import sys
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web
from multidict import MultiMapping

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search.server import is_loopback
from agentgym_envs.webshop.browser_api import add_browser_api
from agentgym_envs.webshop.errors import BrowserUnavailableError
from agentgym_envs.webshop.pages import SESSION_GONE_PAGE
from agentgym_envs.webshop.store import CatalogueSource, Listing, ShopStore
from tasks.webshop.records import Product, Purchase

logger = logging.getLogger(__name__)

RESULTS_PER_PAGE = 10
"""Results shown on one results page."""

MAX_RESULTS = 50
"""Search hits kept per query (WebShop's 50): at most ``MAX_RESULTS // RESULTS_PER_PAGE`` pages."""

MAX_PAGES = math.ceil(MAX_RESULTS / RESULTS_PER_PAGE)

SECTIONS = ("description", "features", "reviews")
"""The item sub-pages, in the order the item page links them."""

DEFAULT_MAX_SESSIONS = 10_000
"""Live sessions kept; a new one past this evicts the least recently used."""

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
"""A session id a client may choose (``secrets.token_urlsafe(16)`` is one)."""

MAX_QUERY_CHARS = 500
MAX_INSTRUCTION_CHARS = 10_000
MAX_BODY_BYTES = 64 * 1024
OPTION_PREFIX = "o."
SEARCH_CACHE_SIZE = 4096
"""Queries whose top hits are remembered (an agent pages through the same query)."""

PARENT_POLL_S = 1.0
TEMPLATES_DIR = Path(__file__).with_name("templates")


@dataclass
class ShopSession:
    """One episode's state on the server.

    Attributes:
        instruction: The text shown at the top of every page.
        purchase: What was bought, once the Buy Now button was pressed.
    """

    instruction: str
    purchase: Purchase | None = None


class SessionStore:
    """Live sessions by id, least recently used first; creating one past ``max_sessions`` evicts the oldest.

    Args:
        max_sessions: Most sessions kept at once (at least 1).
    """

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        if max_sessions < 1:
            raise EnvConfigError(f"max_sessions: expected >= 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, ShopSession] = OrderedDict()

    def create(self, instruction: str, sid: str | None = None) -> str:
        """Start a session showing ``instruction``; returns its id.

        Args:
            instruction: The text at the top of every page.
            sid: The id the client chose (so that a request sent twice makes one session), or None for
                ``secrets.token_urlsafe(12)``. An id already live with the same instruction is the same session
                again.

        Raises:
            RequestError: 409 for a live id with another instruction.
        """
        if sid is not None and sid in self._sessions:
            if self._sessions[sid].instruction != instruction:
                raise RequestError(409, f"expected a new session id, got {sid!r}, which is live with another "
                                        "instruction")
            return sid
        while len(self._sessions) >= self.max_sessions:
            evicted, _ = self._sessions.popitem(last=False)
            logger.info("evicted session %s (more than %d live sessions)", evicted, self.max_sessions)
        sid = sid or secrets.token_urlsafe(12)
        self._sessions[sid] = ShopSession(instruction)
        return sid

    def get(self, sid: str) -> ShopSession | None:
        """The session ``sid`` (now the most recently used), or None."""
        session = self._sessions.get(sid)
        if session is not None:
            self._sessions.move_to_end(sid)
        return session

    def delete(self, sid: str) -> bool:
        """Forget session ``sid``; False when there was none."""
        return self._sessions.pop(sid, None) is not None

    def __contains__(self, sid: object) -> bool:
        return sid in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)


class RequestError(Exception):
    """A request the shop cannot serve: an error page (or JSON error under ``/api/``) with a 4xx status.

    Args:
        status: The HTTP status.
        message: What the page (or the JSON error) says.
        page_kind: The page's ``data-page``: ``"error"``, or :data:`SESSION_GONE_PAGE` for an unknown session.
    """

    def __init__(self, status: int, message: str, *, page_kind: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.page_kind = page_kind


@dataclass(frozen=True)
class ItemParams:
    """The parameters an item page carries: where the agent came from and the options chosen so far.

    Attributes:
        query: The search that led here ("" when none).
        page: The results page that led here.
        options: Option group -> chosen value, in the product's group order.
    """

    query: str = ""
    page: int = 1
    options: Mapping[str, str] = field(default_factory=dict)

    def pairs(self) -> list[tuple[str, str]]:
        """The parameters as ``(name, value)`` pairs, as URLs and the buy form carry them."""
        chosen = [(OPTION_PREFIX + group, value) for group, value in self.options.items()]
        return [("query", self.query), ("page", str(self.page)), *chosen]

    def choose(self, group: str, value: str) -> ItemParams:
        """The same parameters with ``value`` chosen for ``group``."""
        return ItemParams(self.query, self.page, {**self.options, group: value})


# -- parameters -------------------------------------------------------------------------------------
def single_values(params: MultiMapping[Any], allowed: Sequence[str], product: Product | None = None) -> dict[str, str]:
    """The request's parameters as a dict, each given once, named in ``allowed`` or an option of ``product``.

    Raises:
        RequestError: 400 for a repeated, unknown or non-text parameter.
    """
    values: dict[str, str] = {}
    for name, value in params.items():
        if name in values:
            raise RequestError(400, f"expected parameter {name!r} once, got it {len(params.getall(name))} times")
        if not isinstance(value, str):
            raise RequestError(400, f"expected parameter {name!r} to be text, got {type(value).__name__}")
        if name not in allowed and not (product is not None and name.startswith(OPTION_PREFIX)):
            expected = ", ".join([*allowed, *([f"{OPTION_PREFIX}<group>"] if product is not None else [])])
            raise RequestError(400, f"expected parameters among {expected or 'none'}; got {name!r}")
        values[name] = value
    return values


def parse_query(values: Mapping[str, str], *, required: bool) -> str:
    """The ``query`` parameter, whitespace collapsed.

    Raises:
        RequestError: 400 when it is missing (and ``required``) or longer than :data:`MAX_QUERY_CHARS`.
    """
    if "query" not in values and required:
        raise RequestError(400, "expected a query parameter, got none")
    query = " ".join(values.get("query", "").split())
    if len(query) > MAX_QUERY_CHARS:
        raise RequestError(400, f"expected a query of at most {MAX_QUERY_CHARS} characters, got {len(query)}")
    return query


def parse_page(values: Mapping[str, str], last: int = MAX_PAGES) -> int:
    """The ``page`` parameter (1 when absent).

    Raises:
        RequestError: 400 when it is not a whole number, 404 when it is not in ``1..last``.
    """
    text = values.get("page", "1")
    if not text.isascii() or not text.isdigit():
        raise RequestError(400, f"expected page to be a whole number, got {text!r}")
    page = int(text)
    if not 1 <= page <= last:
        raise RequestError(404, f"expected a page from 1 to {last}, got {page}")
    return page


def parse_item_params(product: Product, params: MultiMapping[Any]) -> ItemParams:
    """Where an item request came from and the options it chose, each checked against ``product``.

    Raises:
        RequestError: 400 for an unknown parameter or option group, or a value the product does not offer.
    """
    values = single_values(params, ("query", "page"), product)
    chosen = {name.removeprefix(OPTION_PREFIX): value for name, value in values.items()
              if name.startswith(OPTION_PREFIX)}
    for group, value in chosen.items():
        if group not in product.options:
            groups = ", ".join(product.options) or "none"
            raise RequestError(400, f"expected an option group of {product.asin} ({groups}), got {group!r}")
        if value not in product.options[group]:
            raise RequestError(400, f"expected a {group} of {product.asin} among "
                                    f"{', '.join(product.options[group])}; got {value!r}")
    options = {group: chosen[group] for group in product.options if group in chosen}
    return ItemParams(parse_query(values, required=False), parse_page(values), options)


# -- URLs -------------------------------------------------------------------------------------------
def search_url(sid: str) -> str:
    """The search page of session ``sid``."""
    return f"/s/{sid}"


def results_url(sid: str, query: str, page: int) -> str:
    """Results page ``page`` of ``query``."""
    return f"/s/{sid}/search?{urlencode({'query': query, 'page': page})}"


def item_url(sid: str, asin: str, params: ItemParams, section: str | None = None) -> str:
    """The item page of ``asin`` (or its ``section`` sub-page) carrying ``params``."""
    path = f"/s/{sid}/item/{quote(asin, safe='')}" + (f"/{section}" if section else "")
    return f"{path}?{urlencode(params.pairs())}"


def buy_url(sid: str, asin: str) -> str:
    """Where the Buy Now form of ``asin`` posts."""
    return f"/s/{sid}/buy/{quote(asin, safe='')}"


def format_price(price: float) -> str:
    """``$12.99``."""
    return f"${price:.2f}"


def shown_price(product: Product | Listing) -> str:
    """The price a results or item page shows: the listing's range when it gives one (``$12.99 to $24.99``, as
    WebShop shows it; the buyer pays ``product.price``, drawn within it), else the price."""
    if product.price_range is None:
        return format_price(product.price)
    low, high = product.price_range
    return f"{format_price(low)} to {format_price(high)}"


# -- the shop ---------------------------------------------------------------------------------------
class Shop:
    """The shop's state and pages: the catalogue, its search index, the live sessions and the templates.

    Args:
        products: The catalogue (products, or a JSONL file of them, read as a stream); ASINs must be unique.
        catalogue_name: What ``/api/health`` calls the catalogue.
        index_dir: The folder of its products and BM25 index (:class:`~agentgym_envs.webshop.store.ShopStore`,
            built there when absent); default: under the retriever's cache.
        max_sessions: Most live sessions (the least recently used is evicted past it).

    Raises:
        EnvConfigError: An empty catalogue, a malformed product or duplicate ASINs.
    """

    def __init__(self, products: CatalogueSource, *, catalogue_name: str,
                 index_dir: str | os.PathLike[str] | None = None, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.store = ShopStore.open(products, index_dir=index_dir)
        self.catalogue_name = catalogue_name
        self.sessions = SessionStore(max_sessions)
        self.templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True,
                                            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.search = lru_cache(maxsize=SEARCH_CACHE_SIZE)(self._rank)
        self.origin: str | None = None
        """``http://host:port`` the shop listens on, once it does (set by :func:`serve`)."""

    def _rank(self, query: str) -> tuple[str, ...]:
        """ASINs of the top :data:`MAX_RESULTS` BM25 hits for ``query``, best first."""
        return self.store.search(query, MAX_RESULTS)

    def close(self) -> None:
        """Release the catalogue and its search index."""
        self.store.close()

    # -- lookups -------------------------------------------------------------------------------------
    def session(self, request: web.Request) -> tuple[str, ShopSession]:
        """The request's session id and session.

        Raises:
            RequestError: 404 for an unknown (or evicted) session.
        """
        sid = request.match_info["sid"]
        session = self.sessions.get(sid)
        if session is None:
            raise RequestError(404, f"expected the id of a live session, got {sid!r}: this shopping session "
                                    "ended, or the shop restarted", page_kind=SESSION_GONE_PAGE)
        return sid, session

    def product(self, asin: str) -> Product:
        """The product ``asin``.

        Raises:
            RequestError: 404 for an ASIN not in the catalogue.
        """
        product = self.store.product(asin)
        if product is None:
            raise RequestError(404, f"expected the ASIN of a product in the catalogue, got {asin!r}")
        return product

    # -- rendering -----------------------------------------------------------------------------------
    def render(self, template: str, *, status: int = 200, **context: Any) -> web.Response:
        """An HTML response of ``template`` filled with ``context``."""
        html = self.templates.get_template(template).render(**context)
        return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")

    def error_page(self, request: web.Request, status: int, message: str, page_kind: str = "error") -> web.Response:
        """The error page (``Back to Search`` when the request names a live session), or JSON under ``/api/``."""
        if request.path.startswith("/api/"):
            return web.json_response({"error": message}, status=status)
        sid = request.match_info.get("sid")
        back = search_url(sid) if sid is not None and sid in self.sessions else None
        return self.render("error.html", status=status, page_kind=page_kind, instruction=None, message=message,
                           search_url=back)

    # -- HTML pages ----------------------------------------------------------------------------------
    async def search_page(self, request: web.Request) -> web.Response:
        """``GET /s/{sid}``: the instruction and the search box."""
        sid, session = self.session(request)
        single_values(request.query, ())
        return self.render("search.html", page_kind="search", instruction=session.instruction,
                           results_action=f"/s/{sid}/search")

    async def results_page(self, request: web.Request) -> web.Response:
        """``GET /s/{sid}/search?query=Q&page=N``: 10 of the top 50 hits."""
        sid, session = self.session(request)
        values = single_values(request.query, ("query", "page"))
        query = parse_query(values, required=True)
        hits = self.search(query)
        last = max(1, math.ceil(len(hits) / RESULTS_PER_PAGE))
        page = parse_page(values, last)
        shown = hits[(page - 1) * RESULTS_PER_PAGE:page * RESULTS_PER_PAGE]
        came_from = ItemParams(query, page)
        results = [{"asin": listing.asin, "title": listing.title, "price": shown_price(listing),
                    "url": item_url(sid, listing.asin, came_from)} for listing in self.store.listings(shown)]
        return self.render("results.html", page_kind="results", instruction=session.instruction,
                           search_url=search_url(sid), query=query, page=page, total=len(hits), results=results,
                           prev_url=results_url(sid, query, page - 1) if page > 1 else None,
                           next_url=results_url(sid, query, page + 1) if page < last else None)

    async def item_page(self, request: web.Request) -> web.Response:
        """``GET /s/{sid}/item/{asin}``: options, title, price, rating, sub-page links, Buy Now."""
        sid, session = self.session(request)
        product = self.product(request.match_info["asin"])
        params = parse_item_params(product, request.query)
        groups = [{"name": group, "options": [
            {"value": value, "chosen": params.options.get(group) == value,
             "url": item_url(sid, product.asin, params.choose(group, value))} for value in values]}
            for group, values in product.options.items()]
        rating = "N.A." if product.rating is None else f"{product.rating:.1f}"
        return self.render("item.html", page_kind="item", instruction=session.instruction,
                           search_url=search_url(sid), prev_url=results_url(sid, params.query, params.page),
                           groups=groups, title=product.title, price=shown_price(product), rating=rating,
                           section_links=[(section.title(), item_url(sid, product.asin, params, section))
                                          for section in SECTIONS],
                           buy_url=buy_url(sid, product.asin), hidden_fields=params.pairs())

    async def section_page(self, request: web.Request) -> web.Response:
        """``GET /s/{sid}/item/{asin}/{section}``: the description, the features or the reviews."""
        sid, session = self.session(request)
        product = self.product(request.match_info["asin"])
        section = request.match_info["section"]
        if section not in SECTIONS:
            raise RequestError(404, f"expected a section among {', '.join(SECTIONS)}; got {section!r}")
        params = parse_item_params(product, request.query)
        return self.render("subpage.html", page_kind="subpage", instruction=session.instruction,
                           search_url=search_url(sid), prev_url=item_url(sid, product.asin, params),
                           section=section, product=product)

    async def buy(self, request: web.Request) -> web.Response:
        """``POST /s/{sid}/buy/{asin}``: record the purchase (once a session) and show the done page."""
        _, session = self.session(request)
        if session.purchase is not None:
            bought = self.product(session.purchase.asin).title
            raise RequestError(409, f"You already bought {bought} in this session; a session buys once.")
        product = self.product(request.match_info["asin"])
        params = parse_item_params(product, await request.post())
        session.purchase = Purchase(asin=product.asin, options=dict(params.options), price=product.price)
        chosen = ", ".join(f"{group}: {value}" for group, value in session.purchase.options.items())
        return self.render("done.html", page_kind="done", instruction=session.instruction, title=product.title,
                           options=chosen or "none", price=format_price(product.price))

    # -- JSON API ------------------------------------------------------------------------------------
    async def api_health(self, request: web.Request) -> web.Response:
        """``GET /api/health``."""
        return web.json_response({"status": "ok", "products": len(self.store), "catalogue": self.catalogue_name,
                                  "sessions": len(self.sessions)})

    async def api_create_session(self, request: web.Request) -> web.Response:
        """``POST /api/sessions`` with ``{"instruction": str}``: 201 with the new session's id and URL."""
        try:
            payload = await request.json()
        except ValueError as exc:
            raise RequestError(400, f"expected a JSON body, got invalid JSON ({exc})") from exc
        instruction = payload.get("instruction") if isinstance(payload, dict) else None
        if not isinstance(instruction, str) or len(instruction) > MAX_INSTRUCTION_CHARS:
            raise RequestError(400, f"expected {{\"instruction\": text of at most {MAX_INSTRUCTION_CHARS} "
                                    f"characters}}, got {json.dumps(payload)[:200]}")
        chosen = payload.get("session")
        if chosen is not None and not (isinstance(chosen, str) and SESSION_ID.fullmatch(chosen)):
            raise RequestError(400, f"expected \"session\" to be 16 to 64 characters of A-Z, a-z, 0-9, - and _, "
                                    f"got {json.dumps(chosen)[:100]}")
        sid = self.sessions.create(instruction, chosen)
        return web.json_response({"session": sid, "url": search_url(sid)}, status=201)

    async def api_session(self, request: web.Request) -> web.Response:
        """``GET /api/sessions/{sid}``: the instruction and the purchase (null until one is made)."""
        sid, session = self.session(request)
        purchase = None if session.purchase is None else session.purchase.to_dict()
        return web.json_response({"session": sid, "instruction": session.instruction, "purchase": purchase})

    async def api_delete_session(self, request: web.Request) -> web.Response:
        """``DELETE /api/sessions/{sid}``: 204, or 404 for an unknown session."""
        sid = request.match_info["sid"]
        if not self.sessions.delete(sid):
            raise RequestError(404, f"expected the id of a live session, got {sid!r}")
        return web.Response(status=204)

    async def api_product(self, request: web.Request) -> web.Response:
        """``GET /api/products/{asin}``: the product's :meth:`Product.to_dict`."""
        return web.json_response(self.product(request.match_info["asin"]).to_dict())


SHOP = web.AppKey("shop", Shop)
"""Where :func:`make_app` keeps the :class:`Shop` in the application."""


@web.middleware
async def error_pages(request: web.Request, handler: Any) -> web.StreamResponse:
    """Turn a :class:`RequestError`, or the router's 404/405/413, into an error page (JSON under ``/api/``)."""
    try:
        return await handler(request)
    except RequestError as exc:
        return request.app[SHOP].error_page(request, exc.status, exc.message, exc.page_kind)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return request.app[SHOP].error_page(request, exc.status, f"{exc.reason}: {request.method} {request.path}")


def make_app(products: CatalogueSource, *, catalogue_name: str, index_dir: str | os.PathLike[str] | None = None,
             max_sessions: int = DEFAULT_MAX_SESSIONS) -> web.Application:
    """The shop as an aiohttp application (its :class:`Shop` is ``app[SHOP]``; the index closes on cleanup).

    Args:
        products: The catalogue (products, or a JSONL file of them); ASINs must be unique.
        catalogue_name: What ``/api/health`` calls the catalogue.
        index_dir: The folder of its products and BM25 index (built there when absent).
        max_sessions: Most live sessions.

    Example:
        >>> app = make_app(generate_catalogue(0), catalogue_name="seed-0", index_dir=tmp_path)  # doctest: +SKIP
        >>> web.run_app(app, host="127.0.0.1", port=8100)                                      # doctest: +SKIP
    """
    shop = Shop(products, catalogue_name=catalogue_name, index_dir=index_dir, max_sessions=max_sessions)
    app = web.Application(middlewares=[error_pages], client_max_size=MAX_BODY_BYTES)
    app[SHOP] = shop
    app.router.add_get("/s/{sid}", shop.search_page)
    app.router.add_get("/s/{sid}/search", shop.results_page)
    app.router.add_get("/s/{sid}/item/{asin}", shop.item_page)
    app.router.add_get("/s/{sid}/item/{asin}/{section}", shop.section_page)
    app.router.add_post("/s/{sid}/buy/{asin}", shop.buy)
    app.router.add_get("/api/health", shop.api_health)
    app.router.add_post("/api/sessions", shop.api_create_session)
    app.router.add_get("/api/sessions/{sid}", shop.api_session)
    app.router.add_delete("/api/sessions/{sid}", shop.api_delete_session)
    app.router.add_get("/api/products/{asin}", shop.api_product)

    async def close_shop(_: web.Application) -> None:
        shop.close()

    app.on_cleanup.append(close_shop)
    return app


# -- command line -----------------------------------------------------------------------------------
def resolve_catalogue(spec: str) -> CatalogueSource:
    """The catalogue ``spec`` names: a JSONL file of products (its path: the shop reads it as a stream), or the
    products of a bundled catalogue name (``tasks.webshop.bundled``).

    Raises:
        EnvConfigError: An unknown name, or bundled catalogues that are not installed.
    """
    if spec.endswith(".jsonl") or Path(spec).is_file():
        return Path(spec)
    try:
        from tasks.webshop.bundled import load_catalogue
    except ImportError as exc:
        raise EnvConfigError(f"catalogue: the bundled catalogue {spec!r} needs tasks.webshop.bundled, which is not "
                             f"installed ({exc}); pass a JSONL file of products") from exc
    try:
        return list(load_catalogue(spec))
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise EnvConfigError(f"catalogue: expected a bundled catalogue name or a JSONL file, got {spec!r} "
                             f"({exc})") from exc


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m agentgym_envs.webshop.server",
                                     description="Serve a WebShop catalogue: HTML pages and a JSON API.")
    parser.add_argument("--catalogue", required=True,
                        help="a bundled catalogue name (tasks.webshop.bundled) or a JSONL file of products")
    parser.add_argument("--index-dir", default=None,
                        help="the folder of the catalogue's products and BM25 index (built when absent); "
                             "default under ~/.cache/agentrl/bm25")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only without --allow-remote)")
    parser.add_argument("--port", type=int, default=8100, help="port to bind; 0 picks a free one")
    parser.add_argument("--unix", default=None, metavar="PATH",
                        help="also serve on a Unix socket at PATH (for a shop in a container with no network)")
    parser.add_argument("--browser", action="store_true",
                        help="own a Chromium that opens the shop's pages, driven through /api/browsers")
    parser.add_argument("--browser-timeout", type=float, default=30.0, metavar="S",
                        help="the limit of every browser operation, in seconds (with --browser)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow binding a non-loopback address (the shop has no authentication)")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                        help="most live sessions; a new one past it evicts the least recently used")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="stop when the process that started this one exits (what ShopServer passes)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Load the catalogue, build or load its index, print ``listening on <url> (N products)``, serve until signalled."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    try:
        if not args.allow_remote and not is_loopback(args.host):
            raise EnvConfigError(f"--host: expected a loopback address, got {args.host!r}; "
                                 "pass --allow-remote to expose the shop (it has no authentication)")
        products = resolve_catalogue(args.catalogue)
        app = make_app(products, catalogue_name=args.catalogue, index_dir=args.index_dir,
                       max_sessions=args.max_sessions)
        if args.browser:
            add_browser_api(app, app[SHOP], timeout_s=args.browser_timeout)
    except EnvConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parent = os.getppid() if args.exit_with_parent else None
    try:
        asyncio.run(serve(app, args.host, args.port, parent=parent, unix=args.unix))
    except OSError as exc:  # the port is taken, the address is not ours
        where = f"{args.host}:{args.port}" + (f" and {args.unix}" if args.unix else "")
        print(f"error: cannot listen on {where}: {exc}", file=sys.stderr)
        return 1
    except BrowserUnavailableError as exc:  # --browser: Chromium did not launch
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


async def serve(app: web.Application, host: str, port: int, *, parent: int | None = None,
                unix: str | None = None) -> None:
    """Serve ``app`` until SIGTERM or SIGINT (or until process ``parent`` is no longer this one's parent).

    Prints ``listening on http://host:port (N products)`` to stdout, flushed, once the socket accepts (with
    ``unix``: ``listening on http://host:port and PATH (N products)``, once both do).
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        bound_host = f"[{bound_host}]" if ":" in bound_host else bound_host
        app[SHOP].origin = f"http://{bound_host}:{bound_port}"
        if unix is not None:
            await web.UnixSite(runner, unix).start()
        where = app[SHOP].origin + (f" and {unix}" if unix is not None else "")
        print(f"listening on {where} ({len(app[SHOP].store)} products)", flush=True)
        watcher = asyncio.create_task(_watch_parent(parent, stop)) if parent is not None else None
        await stop.wait()
        if watcher is not None:
            watcher.cancel()
    finally:
        await runner.cleanup()


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    """Set ``stop`` once this process is re-parented (its starter died without stopping it)."""
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL_S)
    logger.warning("the parent process %d exited; stopping the shop", parent)
    stop.set()


if __name__ == "__main__":
    sys.exit(main())
