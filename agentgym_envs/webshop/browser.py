"""WebShop's browser mode: real clicks in Chromium, driven by Playwright, behind the :class:`PageDriver` protocol.

A :class:`BrowserPool` owns one browser for many episodes; :meth:`BrowserPool.new_driver` gives each episode
its own browser context (cookies, history and cache of its own) holding one page, wrapped in a
:class:`BrowserDriver`. The pool drives Playwright's *async* API on one dedicated thread that runs an asyncio
event loop, and every public method hands that loop a coroutine and waits for its result, so that episodes
played on many threads can share the pool (Playwright's sync API is bound to the thread that started it).

The browser is Debian's ``chromium`` (``apt-get install chromium``), not a Playwright download. It sends no
traffic beyond loopback: every request to another host goes to a proxy address where nothing listens and fails
(:data:`LOOPBACK_ONLY_ARGS`), and the launch arguments turn off Chromium's background networking.

Errors:

* no ``chromium`` executable: :class:`~agentgym_envs.errors.EnvConfigError`, saying how to install it;
* a browser that crashed or disconnected, an operation that timed out, a navigation that failed (a dead shop
  server: ``net::ERR_CONNECTION_REFUSED``, Chromium's ``chrome-error://`` page) or that got an HTTP status of 500
  or more: :class:`~agentgym_envs.webshop.errors.BrowserUnavailableError`, an infrastructure fault the agent
  cannot cause.
  A driver that raised it is broken for good: close it and take a new one (after a crash, the pool launches a
  fresh browser on the next :meth:`~BrowserPool.new_driver`);
* a clickable index out of range: :class:`IndexError`; a search on a page without a search box:
  :class:`ValueError` (the env checks both first, so these are programming errors).

HTTP 4xx pages (the shop's error pages) are ordinary pages: their HTML is returned.

Example:
    >>> with BrowserPool() as pool:  # doctest: +SKIP
    ...     driver = pool.new_driver()
    ...     html = driver.open("http://127.0.0.1:8000/s/abc")
    ...     html = driver.search("red shoes")
    ...     html = driver.click(1)
    ...     driver.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import threading
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TypeVar
from urllib.parse import urlsplit

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.webshop.errors import BrowserUnavailableError

try:
    from playwright.async_api import Browser, BrowserContext, Locator, Page, Playwright, Response, async_playwright
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeoutError
except ImportError as exc:  # the ``web`` extra
    raise EnvConfigError("WebShop's browser mode needs Playwright: pip install 'agentrl[web]' "
                         "(the browser itself is Debian's chromium: apt-get install chromium)") from exc

T = TypeVar("T")

DEFAULT_ARGS: tuple[str, ...] = ("--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                 "--disable-component-update", "--disable-sync", "--no-first-run")
"""Chromium's launch arguments: no setuid sandbox (containers), no GPU, no background traffic, no first-run UI."""

LOOPBACK_ONLY_ARGS: tuple[str, ...] = ("--proxy-server=http://127.0.0.1:9",)
"""Always added to the launch arguments: requests to any host but loopback (which Chromium never proxies) go to
a proxy on the discard port, where nothing listens, and fail with ``net::ERR_PROXY_CONNECTION_FAILED``."""

SEARCH_INPUT = "#search-input"
"""The search page's text box."""

SEARCH_BUTTON = f"form:has({SEARCH_INPUT}) button.clickable"
"""The search form's submit button."""

CLICKABLE = ".clickable"
"""Every element the agent can click, in document order."""

CHROME_ERROR_SCHEME = "chrome-error:"
"""The scheme of the page Chromium shows when a navigation fails (connection refused, reset, ...)."""

NET_ERROR = "net::ERR_"
"""How Playwright's error messages name Chromium's network errors (``net::ERR_CONNECTION_REFUSED``)."""

GRACE_S = 5.0
"""How much longer than two Playwright timeouts a caller waits for the event loop before giving up on it."""

LAUNCH_TIMEOUT_S = 60.0
"""How long Chromium may take to start (seconds on a loaded small machine); page timeouts do not apply to it."""


def find_chromium(executable: str | None = None) -> str:
    """The path of the Chromium executable to launch.

    Args:
        executable: A path or a command name; ``None`` looks up ``chromium`` on ``PATH``.

    Raises:
        EnvConfigError: No such executable.
    """
    path = shutil.which(executable or "chromium")
    if path is None or not os.access(path, os.X_OK):
        raise EnvConfigError(f"expected a Chromium executable, got none at {executable or 'chromium'!r} "
                             f"(install it with `apt-get install chromium`)")
    return path


class BrowserPool:
    """One Chromium for many episodes, each in a browser context of its own; safe to share between threads.

    Nothing starts until the first :meth:`new_driver` (or :attr:`version`): then a thread with an asyncio event
    loop, Playwright, and the browser. A browser that crashed is launched again by the next :meth:`new_driver`.

    Args:
        executable: The Chromium to launch (a path or command name); ``None`` is ``chromium`` on ``PATH``.
        headless: Run without a display.
        timeout_s: The limit of every browser operation (launch, navigation, click); a driver call waits at most
            twice this (plus a few seconds) for an answer.
        launch_args: Chromium's command-line arguments; :data:`LOOPBACK_ONLY_ARGS` is always added.

    Raises:
        EnvConfigError: No Chromium executable, or a timeout that is not positive.

    Example:
        >>> pool = BrowserPool(timeout_s=10.0)  # doctest: +SKIP
        >>> driver = pool.new_driver()  # doctest: +SKIP
        >>> pool.close()  # closes every context, the browser and the thread  # doctest: +SKIP
    """

    def __init__(self, *, executable: str | None = None, headless: bool = True, timeout_s: float = 30.0,
                 launch_args: Sequence[str] = DEFAULT_ARGS) -> None:
        if not timeout_s > 0:
            raise EnvConfigError(f"expected timeout_s > 0, got {timeout_s}")
        self._executable = find_chromium(executable)
        self._headless = headless
        self._timeout_s = timeout_s
        self._launch_args = [*launch_args, *LOOPBACK_ONLY_ARGS]
        self._state_lock = threading.Lock()  # guards _loop, _thread, _closed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._launch_lock = asyncio.Lock()  # used on the loop only: one launch at a time
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    @property
    def timeout_s(self) -> float:
        """The limit of every browser operation, in seconds."""
        return self._timeout_s

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def version(self) -> str:
        """The browser's version, e.g. ``"156.0.8078.79"`` (launches the browser if it is not running)."""
        return self._result(self._schedule(self._browser_version), self._launch_wait_s)

    @property
    def open_contexts(self) -> int:
        """How many browser contexts are open in the running browser (0 before the start and after a crash)."""
        with self._state_lock:
            if self._loop is None or self._closed:
                return 0
        return self.submit(self._count_contexts)

    def new_driver(self) -> BrowserDriver:
        """A fresh browser context with one blank page, for one episode.

        Raises:
            BrowserUnavailableError: The browser could not be launched, or did not open a context.
            RuntimeError: The pool is closed.
        """
        context, page = self._result(self._schedule(self._new_page), self._launch_wait_s)
        return BrowserDriver(self, context, page)

    def close(self) -> None:
        """Close every context, the browser, Playwright, and the event loop's thread; idempotent."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._result(asyncio.run_coroutine_threadsafe(self._shutdown(), loop), self._call_timeout_s)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()

    def submit(self, operation: Callable[..., Awaitable[T]], *args: object) -> T:
        """Run ``operation(*args)`` on the pool's event loop and wait for its result (for :class:`BrowserDriver`).

        Playwright's errors come back as :class:`BrowserUnavailableError`; every other exception as raised.

        Raises:
            BrowserUnavailableError: A Playwright error, or no answer within the call timeout.
            RuntimeError: The pool is closed.
        """
        return self._result(self._schedule(operation, *args), self._call_timeout_s)

    def _schedule(self, operation: Callable[..., Awaitable[T]], *args: object) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(operation(*args), self._running_loop())

    def __enter__(self) -> BrowserPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def _call_timeout_s(self) -> float:
        return 2 * self._timeout_s + GRACE_S

    @property
    def _launch_wait_s(self) -> float:
        """How long a call that may launch the browser first waits."""
        return LAUNCH_TIMEOUT_S + self._call_timeout_s

    def _result(self, future: concurrent.futures.Future[T], wait_s: float) -> T:
        try:
            return future.result(wait_s)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise BrowserUnavailableError(f"expected the browser to answer within {wait_s:g}s, "
                                          f"got no answer") from exc
        except PlaywrightTimeoutError as exc:
            raise BrowserUnavailableError(f"expected the browser to finish within {self._timeout_s:g}s, "
                                          f"got a timeout: {_first_line(exc)}") from exc
        except PlaywrightError as exc:
            if NET_ERROR in str(exc):  # Chromium could not load the page: the shop did not answer
                raise BrowserUnavailableError(f"expected a page from the shop, got a failed navigation: "
                                              f"{_first_line(exc)}") from exc
            raise BrowserUnavailableError(f"the browser failed: {_first_line(exc)}") from exc

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._state_lock:
            if self._closed:
                raise RuntimeError("expected an open BrowserPool, got a closed one")
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=_run_loop, args=(self._loop,), name="agentrl-browser",
                                                daemon=True)
                self._thread.start()
            return self._loop

    # -- coroutines, run on the pool's loop ------------------------------------------------------------------------

    async def _connected_browser(self) -> Browser:
        async with self._launch_lock:
            if self._browser is None or not self._browser.is_connected():
                self._browser = await self._launch()
            return self._browser

    async def _launch(self) -> Browser:
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        return await self._playwright.chromium.launch(executable_path=self._executable, headless=self._headless,
                                                      args=self._launch_args, timeout=LAUNCH_TIMEOUT_S * 1000)

    async def _new_page(self) -> tuple[BrowserContext, Page]:
        browser = await self._connected_browser()
        try:
            context = await browser.new_context()
        except PlaywrightError:
            if browser.is_connected():
                raise
            context = await (await self._connected_browser()).new_context()  # it died just now: launch once more
        context.set_default_timeout(self._timeout_s * 1000)
        try:
            return context, await context.new_page()
        except BaseException:
            await _close_context(context)
            raise

    async def _browser_version(self) -> str:
        return (await self._connected_browser()).version

    async def _count_contexts(self) -> int:
        browser = self._browser
        return len(browser.contexts) if browser is not None and browser.is_connected() else 0

    async def _shutdown(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        try:
            if browser is not None:
                await browser.close()  # and every context in it
        finally:
            if playwright is not None:
                await playwright.stop()


class BrowserDriver:
    """One episode's browser context and page (a :class:`~agentgym_envs.webshop.drivers.PageDriver`).

    Made by :meth:`BrowserPool.new_driver`. Every method returns the HTML of the page reached (``page.content()``,
    after the ``load`` event). One driver is meant for one episode at a time; calls from several threads are
    serialised. A driver that raised :class:`BrowserUnavailableError` is broken (a timed-out navigation may still
    land later): every later call raises it again; close it and take a new one.

    Raises (every page method):
        BrowserUnavailableError: The browser crashed or timed out, the shop did not answer (a failed navigation),
            or it answered with an HTTP status of 500 or more; or the driver broke on one of these before.
        RuntimeError: The driver or its pool is closed.
    """

    def __init__(self, pool: BrowserPool, context: BrowserContext, page: Page) -> None:
        self._pool = pool
        self._context = context
        self._page = page
        self._lock = threading.Lock()
        self._closed = False
        self._fault: BrowserUnavailableError | None = None

    @property
    def url(self) -> str:
        """The URL of the current page (``about:blank`` before :meth:`open`)."""
        return self._run(_current_url, self._page)

    def open(self, url: str) -> str:
        """Go to ``url`` and return its HTML.

        Raises:
            ValueError: ``url`` is not an absolute http(s) URL.
        """
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"expected an absolute http(s) URL, got {url!r}")
        return self._run(_open_url, self._page, url)

    def search(self, query: str) -> str:
        """Type ``query`` into the search box (``#search-input``), press the form's Search button, return the HTML.

        Raises:
            ValueError: The current page has no search box.
        """
        return self._run(_search, self._page, query)

    def click(self, index: int) -> str:
        """Click the ``index``-th element of class ``clickable`` (document order) and return the HTML reached.

        Raises:
            IndexError: The page has no clickable with that index.
        """
        return self._run(_click, self._page, index)

    def aria_snapshot(self) -> str:
        """The current page's accessibility tree, as Playwright's YAML ARIA snapshot of ``<body>``."""
        return self._run(_aria_snapshot, self._page)

    def close(self) -> None:
        """Close the browser context; idempotent (and a no-op once the pool is closed, which closed it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._pool.closed:
                self._pool.submit(_close_context, self._context)

    def _run(self, operation: Callable[..., Awaitable[T]], *args: object) -> T:
        with self._lock:
            if self._closed:
                raise RuntimeError("expected an open BrowserDriver, got a closed one")
            if self._fault is not None:
                raise BrowserUnavailableError(f"expected a working driver, got one broken by: {self._fault}")
            try:
                return self._pool.submit(operation, *args)
            except BrowserUnavailableError as exc:
                self._fault = exc
                raise


# -- page operations, run on the pool's loop ---------------------------------------------------------------------


async def _open_url(page: Page, url: str) -> str:
    """Navigate to ``url``, wait for ``load``, and return the page's HTML."""
    response = await page.goto(url, wait_until="load")
    _check_arrival(page, response)
    return await page.content()


async def _search(page: Page, query: str) -> str:
    """Fill the search box with ``query``, submit its form, and return the HTML of the page reached."""
    box = page.locator(SEARCH_INPUT)
    if await box.count() == 0:
        raise ValueError(f"expected a page with a search box {SEARCH_INPUT!r}, got none at {page.url}")
    await box.fill(query)
    return await _click_and_wait(page, page.locator(SEARCH_BUTTON).first)


async def _click(page: Page, index: int) -> str:
    """Click the ``index``-th clickable and return the HTML of the page reached."""
    clickables = page.locator(CLICKABLE)
    count = await clickables.count()
    if not 0 <= index < count:
        raise IndexError(f"expected a clickable index in 0..{count - 1}, got {index} (page {page.url})")
    return await _click_and_wait(page, clickables.nth(index))


async def _click_and_wait(page: Page, target: Locator) -> str:
    """Click ``target``, wait for the navigation it starts to ``load``, and return the new page's HTML."""
    async with page.expect_navigation(wait_until="load") as navigation:
        await target.click()
    _check_arrival(page, await navigation.value)
    return await page.content()


def _check_arrival(page: Page, response: Response | None) -> None:
    """Raise if the navigation that just ended did not reach a working shop page.

    Raises:
        BrowserUnavailableError: Chromium shows its error page (the server did not answer), or the server
            answered with an HTTP status of 500 or more.
    """
    if page.url.startswith(CHROME_ERROR_SCHEME):  # Playwright usually raises the net::ERR_... first
        raise BrowserUnavailableError(f"expected a page from the shop, got Chromium's error page ({page.url})")
    if response is not None and response.status >= 500:
        raise BrowserUnavailableError(f"expected a page from the shop, got HTTP {response.status} from "
                                      f"{response.url}")


async def _current_url(page: Page) -> str:
    """The page's URL."""
    return page.url


async def _aria_snapshot(page: Page) -> str:
    """The ARIA snapshot of the page's ``<body>``."""
    return await page.locator("body").aria_snapshot()


async def _close_context(context: BrowserContext) -> None:
    """Close ``context`` unless its browser is gone (a crashed browser took its contexts with it)."""
    browser = context.browser
    if browser is not None and not browser.is_connected():
        return
    try:
        await context.close()
    except PlaywrightError:
        if browser is None or browser.is_connected():
            raise
        # else the browser died while the context was closing, and took the context with it


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` until it is stopped, then cancel what is left on it and close it (the pool's thread)."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _first_line(error: BaseException) -> str:
    """The first line of an error's message (Playwright appends a multi-line call log)."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


__all__ = ["DEFAULT_ARGS", "LOOPBACK_ONLY_ARGS", "BrowserDriver", "BrowserPool", "find_chromium"]
