"""WebShop-v0: buy what a shopper asks for in a real web shop, through its pages (Yao et al. 2022).

Each episode has its own session on the shop server (:mod:`agentgym_envs.webshop.server`). The agent
sees the current page as text and has two tools: ``search`` (type a query into the search page's box)
and ``click`` (an element of the page, named by its visible text: a product id, an option value,
``Next >``, ``Description``, ``Buy Now``, ...). Clicking ``Buy Now`` ends the episode; the purchase is
then read from the server and scored by WebShop's formula (:func:`rewards.webshop.webshop_reward`)
against the goal, which the server never sees. The turn limit (15, as WebShop's agents use) truncates.

Two modes drive the same server:

* ``mode="text"``: pages are fetched over HTTP and parsed, no browser (fast, for training);
* ``mode="browser"``: a real Chromium (Playwright) clicks the pages, one browser context per
  episode; ``observation="aria"`` then shows the accessibility tree instead of WebShop's text.

The shop is a :class:`~agentgym_envs.webshop.service.ShopService`: a server this env starts, one shared by
many envs (:class:`~agentgym_envs.webshop.service.ShopServer`, or a URL), or one in a container with no
network (:class:`~agentgym_envs.webshop.container.ShopContainer`), reached over a Unix socket, whose browser
runs in the container too (:class:`~agentgym_envs.webshop.drivers.RemoteBrowserDriver`).

Both render WebShop's ``text`` / ``text_rich`` observations from the page's HTML, so the same actions
give the same observations and rewards in both modes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from difflib import get_close_matches
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

import httpx

from agentgym_envs.core import TextEnv, TextEnvOptions
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.tools import Tool, ToolResult
from agentgym_envs.webshop.drivers import HttpDriver, PageDriver, RemoteBrowserDriver
from agentgym_envs.webshop.errors import ShopUnavailableError
from agentgym_envs.webshop.pages import SESSION_GONE_PAGE, Page, parse_page
from agentgym_envs.webshop.service import ShopAddress, ShopClient, ShopServer, ShopService, new_session_id
from rewards import CompositeReward, RewardFn, Term, make_tool_shaping_reward, webshop_reward
from rewards.webshop import GRADER_KEY, GRADERS
from tasks import Task, Trajectory
from tasks.errors import did_you_mean
from tasks.webshop.bundled import DEFAULT_CATALOGUE, available_catalogues

if TYPE_CHECKING:  # Playwright (the ``web`` extra) is imported only in browser mode
    from agentgym_envs.webshop.browser import BrowserPool

logger = logging.getLogger(__name__)

FAMILY = "shop"
REQUIRED_TOOLS = {FAMILY: ("search", "click")}
MODES = ("text", "browser")
SHOP_TIMEOUT_S = 10.0
"""Default time limit of one request to the shop (``shop_timeout_s``)."""
OBSERVATIONS = ("text_rich", "text", "webshop", "aria")

SEARCH_TOOL_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500,
                             "description": "Words to search the shop for (on the search page)."}},
    "required": ["query"],
    "additionalProperties": False,
}
CLICK_TOOL_SCHEMA = {
    "type": "object",
    "properties": {"element": {"type": "string", "minLength": 1, "maxLength": 500,
                               "description": "The visible text of a clickable element of the current page."}},
    "required": ["element"],
    "additionalProperties": False,
}
INSTRUCTIONS = (
    "You are shopping in a web shop for the item an instruction describes. You see the current page as text; "
    "the actions it offers are listed under it. Use `search` on the search page to find products, and `click` "
    "to press an element of the page, named by its text: a product id in the results, `Next >` or `< Prev`, "
    "an option value (a colour, a size), `Description`, `Features` or `Reviews`, `Back to Search`, `Buy Now`. "
    "On the item page, choose every option the instruction asks for, then click `Buy Now`: that ends the "
    "episode, and the purchase is scored against the instruction (product type, attributes, options, price)."
)


def default_reward() -> CompositeReward:
    """WebShop's score of the purchase; tool use (``search`` and ``click`` required) logged at weight 0."""
    return CompositeReward([
        Term("outcome", webshop_reward, weight=1.0),
        Term("tool_use", make_tool_shaping_reward(required_tools=REQUIRED_TOOLS[FAMILY]), weight=0.0),
    ])


class WebShopEnv(TextEnv):
    """Web shopping on a real shop server, over HTTP or in a real browser.

    Args:
        mode: ``"text"`` (HTTP, no browser) or ``"browser"`` (Chromium through Playwright).
        observation: ``"text_rich"`` (default: a segment a line, clickables marked ``[button]``),
            ``"text"`` (segments joined by ``[SEP]``), ``"webshop"`` (as WebShop's own text environment writes
            the page: options indented, ``You have clicked ...`` lines, price ranges and numbers as WebShop
            writes them, rating ``N.A.``; :meth:`~agentgym_envs.webshop.pages.Page.webshop_text`) or ``"aria"``
            (the accessibility tree; browser mode only).
        server: None to start a shop server for this env (stopped by ``close``); the URL of one already
            running (``"http://127.0.0.1:3000"``, from ``python -m agentgym_envs.webshop.server``); or a
            started :class:`~agentgym_envs.webshop.service.ShopService` shared by many envs (not stopped here):
            a :class:`~agentgym_envs.webshop.service.ShopServer`, or a
            :class:`~agentgym_envs.webshop.container.ShopContainer`, whose own browser serves browser mode.
        catalogue: The catalogue the server this env starts loads: a bundled name or a JSONL file of products
            (e.g. from ``python -m tasks.webshop.original``, for WebShop's own data). Default: the bundled one the
            tasks name (``metadata["catalogue"]``), else ``"generated-v1"``.
        browser: In browser mode, a :class:`~agentgym_envs.webshop.browser.BrowserPool` shared by many envs
            (not closed here); None starts one for this env, unless the shop brings its own browser.
        shop_timeout_s: How long a request to the shop may take (over HTTP) before the step is an infrastructure
            error.
        grader: How the purchase is graded (:mod:`rewards.webshop`): ``"strict"`` (default: an option counts only
            when the value chosen in its group is the wanted one, so no wrong variant of the right product
            succeeds) or ``"webshop"`` (WebShop's own ``get_reward``, for numbers beside published ones). Told to
            the reward as ``evidence["grader"]`` and shown in the card's settings.
        **options: Every env's options (:class:`~agentgym_envs.core.TextEnvOptions`: ``split``, ``splits_dir``,
            ``families``, ``tasks``, ``reward``, the limits, ``render_mode``, ``prompt_style``); see
            :class:`~agentgym_envs.core.TextEnv`. One family: ``"shop"``.

    Raises:
        EnvConfigError: An unknown mode or observation, ``"aria"`` in text mode, a browser in text mode, browser
            mode on a shop no browser can visit, a ``BrowserPool`` for a shop that brings its own browser, or
            tasks written for another bundled catalogue than ``catalogue``, or tasks of a catalogue that is not
            bundled with neither ``catalogue`` nor ``server``.

    Example:
        >>> import gymnasium as gym, agentgym_envs                          # doctest: +SKIP
        >>> env = gym.make("agentrl/WebShop-v0", mode="text")               # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)                                  # doctest: +SKIP
        >>> from agentgym_envs.policies import tool_call_action                  # doctest: +SKIP
        >>> env.step(tool_call_action("search", query="navy henley"))             # doctest: +SKIP
    """

    env_name: ClassVar[str] = "WebShop"
    task_families: ClassVar[tuple[str, ...]] = (FAMILY,)
    required_tools: ClassVar[dict[str, tuple[str, ...]]] = REQUIRED_TOOLS

    def __init__(self, *, mode: str = "text", observation: str = "text_rich", server: ShopService | str | None = None,
                 catalogue: str | None = None, browser: BrowserPool | None = None,
                 shop_timeout_s: float = SHOP_TIMEOUT_S, grader: str = "strict",
                 **options: Unpack[TextEnvOptions]) -> None:
        if server is not None and not isinstance(server, str | ShopService):
            raise EnvConfigError(f"server: expected None, a URL, a ShopServer or a ShopContainer, got "
                                 f"{type(server).__name__}")
        service = ShopAddress(server) if isinstance(server, str) else server
        _check_mode(mode, observation, browser, service)
        if grader not in GRADERS:
            raise EnvConfigError(f"grader: expected one of {list(GRADERS)}, got {grader!r}"
                                 f"{did_you_mean(grader, GRADERS)}")
        super().__init__(**options)
        self.grader = grader
        if shop_timeout_s <= 0:
            raise EnvConfigError(f"shop_timeout_s: expected a positive number of seconds, got {shop_timeout_s}")
        self.mode, self.observation, self.shop_timeout_s = mode, observation, shop_timeout_s
        self.catalogue, self._served_catalogue = _task_catalogue(self.tasks, catalogue, server)
        self._server_spec = server
        self._service = service
        self._server: ShopServer | None = None
        self._shop: ShopClient | None = None
        self._http: httpx.Client | None = None
        self._browser = browser
        self._owns_browser = browser is None
        self._driver: PageDriver | None = None
        self._session: str | None = None
        self._page: Page | None = None
        self._tools = (
            Tool("search", "Search the shop from the search page; shows the first page of results.",
                 SEARCH_TOOL_SCHEMA, self._search),
            Tool("click", "Click an element of the current page, named by its visible text.",
                 CLICK_TOOL_SCHEMA, self._click),
        )

    @property
    def tools(self) -> Sequence[Tool]:
        """``search`` and ``click``."""
        return self._tools

    def default_reward(self, family: str) -> RewardFn:
        """:func:`default_reward`."""
        return default_reward()

    def _instructions(self, task: Task) -> str:
        return INSTRUCTIONS

    def _settings(self) -> dict[str, Any]:
        spec = self._server_spec
        server = "own" if spec is None else spec if isinstance(spec, str) else "shared"
        return {"mode": self.mode, "observation": self.observation, "catalogue": self.catalogue, "server": server,
                "shop_timeout_s": self.shop_timeout_s, "grader": self.grader}

    @property
    def page(self) -> Page | None:
        """The current page of the episode (None before the first ``reset``)."""
        return self._page

    @property
    def shop(self) -> ShopClient:
        """The client of the shop's JSON API (connecting, or starting this env's server, on first use)."""
        return self._connect()

    @property
    def session_id(self) -> str | None:
        """The shop session of the current episode (None before the first ``reset``)."""
        return self._session

    # -- the shop and the driver ----------------------------------------------------------------
    def _connect(self) -> ShopClient:
        """The shop's API client, starting this env's own server on first use."""
        if self._shop is None:
            if self._service is None:
                server = ShopServer(self.catalogue)
                server.start()
                self._server = self._service = server
            self._shop = ShopClient(self._service.url, transport=self._service.transport(),
                                    timeout_s=self.shop_timeout_s)
            self._check_catalogue(self._shop)
        return self._shop

    def _check_catalogue(self, shop: ShopClient) -> None:
        """A server of another catalogue than the bundled one the tasks were written for is refused."""
        served = shop.health().get("catalogue")
        if self._served_catalogue is not None and served != self._served_catalogue:
            raise EnvConfigError(f"server: the tasks need catalogue {self._served_catalogue!r}, got a server of "
                                 f"catalogue {served!r}; start it with --catalogue {self._served_catalogue}")

    def _new_driver(self) -> PageDriver:
        """A driver for the next episode: HTTP in text mode, else a context of the shop's or this env's browser."""
        service = self._service
        assert service is not None, "_connect() comes first"
        if self.mode == "text":
            return HttpDriver(self._http_client(service))
        if service.browser_location == "shop":
            return RemoteBrowserDriver(self._http_client(service), service.url)
        if self._browser is None:
            from agentgym_envs.webshop.browser import BrowserPool

            self._browser = BrowserPool()
        return self._browser.new_driver()

    def _http_client(self, service: ShopService) -> httpx.Client:
        """The env's HTTP client of the shop's pages (and of its browser's API), made on first use."""
        if self._http is None:
            self._http = httpx.Client(timeout=self.shop_timeout_s, transport=service.transport())
        return self._http

    # -- episodes -------------------------------------------------------------------------------
    def _begin_episode(self, task: Task) -> None:
        self._end_session()
        shop = self._connect()
        self._session = new_session_id()  # kept before asking, so that a lost reply's session is still deleted
        shop.create_session(task.prompt, self._session)
        if self._driver is None or self.mode == "browser":  # a fresh browser context per episode
            self._close_driver()
            self._driver = self._new_driver()
        self._page = self._arrive(self._driver.open(shop.start_url(self._session)))

    def _task_text(self, task: Task) -> str:
        return self._observe()

    def _task_over(self) -> bool:
        return self._page is not None and self._page.kind == "done"

    def _observe(self) -> str:
        """The current page in the chosen rendering, with the actions it offers."""
        assert self._page is not None and self._driver is not None
        if self.observation == "aria":
            body = self._driver.aria_snapshot()  # type: ignore[attr-defined]  # browser mode only
        else:
            body = {"text": self._page.text, "webshop": self._page.webshop_text}.get(self.observation,
                                                                                     self._page.text_rich)()
        return f"{body}\n\n{available_actions(self._page)}"

    # -- tools ----------------------------------------------------------------------------------
    def _search(self, query: str) -> ToolResult:
        page, driver = self._require_page()
        if not query.strip():
            return ToolResult("search: expected a query with at least one word, got only whitespace.", ok=False)
        if page.search_form is None:
            return ToolResult(f"search: this {page.kind} page has no search box; click 'Back to Search' first.\n\n"
                              f"{available_actions(page)}", ok=False)
        self._page = self._arrive(driver.search(query))
        return ToolResult(self._observe())

    def _click(self, element: str) -> ToolResult:
        page, driver = self._require_page()
        clickable = page.find(element)
        if clickable is None:
            close = get_close_matches(element, page.labels, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            return ToolResult(f"click: no clickable element {element!r} on this page.{hint}\n\n"
                              f"{available_actions(page)}", ok=False)
        self._page = self._arrive(driver.click(clickable.index))
        return ToolResult(self._observe())

    def _arrive(self, html: str) -> Page:
        """The page reached; the shop's page for a session it no longer has is an infrastructure fault.

        Raises:
            ShopUnavailableError: The shop lost this episode's session (it restarted, or evicted the session).
        """
        page = parse_page(html)
        if page.kind == SESSION_GONE_PAGE:
            raise ShopUnavailableError(f"the shop lost this episode's session {self._session!r} (it restarted, or "
                                       "evicted the session)")
        return page

    def _require_page(self) -> tuple[Page, PageDriver]:
        assert self._page is not None and self._driver is not None, "reset() opens the first page"
        return self._page, self._driver

    # -- scoring --------------------------------------------------------------------------------
    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        """The purchase the server recorded for this episode's session, the product bought, and the grader."""
        assert self._session is not None
        shop = self._connect()
        purchase = shop.purchase(self._session)
        product = shop.product(purchase.asin) if purchase is not None else None
        return {"purchase": purchase, "product": product, GRADER_KEY: self.grader}

    # -- clean-up -------------------------------------------------------------------------------
    def _end_session(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._shop is not None:
            self._shop.delete_session(session)

    def _close_driver(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()

    def close(self) -> None:
        """End the session; close the driver, and the browser and server this env started; idempotent."""
        try:
            self._end_session()
        except ShopUnavailableError as exc:  # a dead shop holds no session any more
            logger.warning("WebShop: could not end the session on close: %s", exc)
        finally:
            self._close_driver()
            http, self._http = self._http, None
            shop, self._shop = self._shop, None
            browser, self._browser = self._browser, None
            server, self._server = self._server, None
            for resource in (http, shop):
                if resource is not None:
                    resource.close()
            if browser is not None and self._owns_browser:
                browser.close()
            if server is not None:
                server.stop()
                self._service = None
            super().close()


def available_actions(page: Page) -> str:
    """The actions a page offers, as the agent reads them under every page."""
    lines = ["Available actions:"]
    if page.search_form is not None:
        lines.append("- search(query): search the shop")
    if page.clickables:
        lines.append(f"- click(element), element one of: {json.dumps(page.labels, ensure_ascii=False)}")
    if len(lines) == 1:
        lines.append("- none (the episode is over)")
    return "\n".join(lines)


def _check_mode(mode: str, observation: str, browser: BrowserPool | None, service: ShopService | None) -> None:
    if mode not in MODES:
        raise EnvConfigError(f"mode: expected one of {MODES}, got {mode!r}")
    if observation not in OBSERVATIONS:
        raise EnvConfigError(f"observation: expected one of {OBSERVATIONS}, got {observation!r}")
    if observation == "aria" and mode != "browser":
        raise EnvConfigError("observation: 'aria' (the accessibility tree) needs mode='browser', got mode='text'")
    if browser is not None and mode != "browser":
        raise EnvConfigError("browser: a BrowserPool is used only with mode='browser', got mode='text'")
    location = "host" if service is None else service.browser_location
    if mode == "browser" and location is None:
        raise EnvConfigError(f"mode: 'browser' needs a shop a browser can visit, got a {type(service).__name__} "
                             "without one (a ShopContainer needs browser=True)")
    if browser is not None and location == "shop":
        raise EnvConfigError(f"browser: expected None for a {type(service).__name__} that brings its own "
                             "browser (no browser outside it can reach its pages), got a BrowserPool")


def _task_catalogue(tasks: Sequence[Task], catalogue: str | None, server: object) -> tuple[str, str | None]:
    """The catalogue spec this env's own server would load, and the bundled catalogue the server must serve.

    Tasks name their catalogue (``metadata["catalogue"]``). A bundled name is checked against what the server
    serves; another name (``"original"`` for WebShop's own data) cannot be, so the caller says where the products
    are: ``catalogue=`` (a JSONL file) or ``server=``.
    """
    named = sorted({str(task.metadata["catalogue"]) for task in tasks if task.metadata.get("catalogue")})
    if len(named) > 1:
        raise EnvConfigError(f"tasks: expected tasks of one catalogue, got tasks of {named}")
    bundled = named[0] if named and named[0] in available_catalogues() else None
    if bundled is not None and catalogue not in (None, bundled):
        raise EnvConfigError(f"catalogue: the tasks were written for catalogue {bundled!r}, got "
                             f"catalogue={catalogue!r}; pass the matching catalogue")
    if named and bundled is None and catalogue is None and server is None:
        raise EnvConfigError(f"catalogue: the tasks were written for catalogue {named[0]!r}, which is not bundled; "
                             "pass catalogue= (its JSONL file of products) or server= (a shop serving it)")
    return catalogue or bundled or DEFAULT_CATALOGUE, bundled
