"""How an episode moves through the shop's pages: over plain HTTP (text mode) or in Chromium (browser mode).

A :class:`PageDriver` opens a URL, types a query into the search box, or clicks the n-th clickable
element of the current page, and returns the HTML of the page it lands on. :class:`HttpDriver` does it
with HTTP requests (following the link, or submitting the button's form, as a browser would);
:class:`~agentgym_envs.webshop.browser.BrowserDriver` does it with real clicks in a browser context of this
process; :class:`RemoteBrowserDriver` asks the shop's own browser to do it (a shop in a container, which no
browser outside can reach: :mod:`~agentgym_envs.webshop.browser_api`).
All hand back HTML that :func:`~agentgym_envs.webshop.pages.parse_page` turns into the observation, so
the modes show the same text for the same pages.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote, urlencode, urljoin

import httpx

from agentgym_envs.webshop.errors import BrowserUnavailableError, ShopUnavailableError
from agentgym_envs.webshop.pages import SEARCH_FIELD, Form, Page, parse_page

logger = logging.getLogger(__name__)


@runtime_checkable
class PageDriver(Protocol):
    """Moves one episode through the shop's pages; every method returns the HTML of the page reached.

    Raises (every method): :class:`~tasks.errors.InfrastructureError` when the shop or the browser fails.
    """

    @property
    def url(self) -> str:
        """The URL of the current page."""

    def open(self, url: str) -> str:
        """Go to ``url``."""

    def search(self, query: str) -> str:
        """Type ``query`` into the current page's search box and submit it."""

    def click(self, index: int) -> str:
        """Click the ``index``-th element of class ``clickable`` of the current page (document order)."""

    def close(self) -> None:
        """Release what the driver holds; idempotent."""


class HttpDriver:
    """A :class:`PageDriver` over plain HTTP: links are followed, forms submitted, no browser involved.

    Args:
        client: A shared ``httpx.Client`` (connection pooling across episodes); the driver does not close it.

    Raises:
        ShopUnavailableError: The server did not answer, or answered with a 5xx status.
    """

    def __init__(self, client: httpx.Client) -> None:
        self._client = client
        self._url = ""
        self._page: Page | None = None

    @property
    def url(self) -> str:
        """The URL of the current page."""
        return self._url

    def open(self, url: str) -> str:
        """GET ``url``."""
        return self._request("GET", url)

    def search(self, query: str) -> str:
        """Submit the search form with ``query`` in its search box.

        Raises:
            ValueError: The current page has no search box (the env checks this first).
        """
        form = self._current().search_form
        if form is None:
            raise ValueError(f"expected a page with a search box, got the {self._current().kind!r} page at {self._url}")
        fields = [(name, query if name == SEARCH_FIELD else value) for name, value in form.fields]
        return self._submit(form, fields)

    def click(self, index: int) -> str:
        """Follow the ``index``-th clickable's link, or submit its form.

        Raises:
            IndexError: The page has no such clickable (the env checks labels first).
        """
        clickables = self._current().clickables
        if not 0 <= index < len(clickables):
            raise IndexError(f"expected a clickable index in 0..{len(clickables) - 1}, got {index}")
        clickable = clickables[index]
        if clickable.form is not None:
            return self._submit(clickable.form, list(clickable.form.fields))
        return self._request("GET", urljoin(self._url, clickable.href or ""))

    def close(self) -> None:
        """Forget the current page (the shared client stays open)."""
        self._page, self._url = None, ""

    def _current(self) -> Page:
        if self._page is None:
            raise ValueError("expected an open page: call open() first")
        return self._page

    def _submit(self, form: Form, fields: list[tuple[str, str]]) -> str:
        action = urljoin(self._url, form.action)
        if form.method == "post":
            return self._request("POST", action, data=fields)
        return self._request("GET", f"{action}?{urlencode(fields)}" if fields else action)

    def _request(self, method: str, url: str, data: list[tuple[str, str]] | None = None) -> str:
        try:
            response = self._client.request(method, url, data=dict(data) if data is not None else None)
        except httpx.HTTPError as exc:
            raise ShopUnavailableError(f"the shop at {url} did not answer {method}: {type(exc).__name__}: {exc}") \
                from exc
        if response.status_code >= 500:
            raise ShopUnavailableError(f"the shop answered {method} {url} with HTTP {response.status_code}")
        self._url = str(response.url)
        html = response.text
        self._page = parse_page(html)
        return html


class RemoteBrowserDriver:
    """A :class:`PageDriver` whose browser context lives in the shop's own browser, driven over its JSON API.

    For a shop started with ``--browser`` (:class:`~agentgym_envs.webshop.container.ShopContainer` with
    ``browser=True``); the routes are :mod:`~agentgym_envs.webshop.browser_api`'s. Making the driver opens the
    context; :meth:`close` closes it. Calls are not retried: a click is not idempotent.

    Args:
        client: An ``httpx.Client`` that reaches the shop (a shared one; the driver does not close it).
        shop_url: The shop's base URL as ``client`` reaches it, e.g. ``"http://shop"``; :meth:`open` takes URLs
            under it.

    Raises (every page method):
        BrowserUnavailableError: The shop's browser crashed, timed out or failed a navigation (the context is
            then broken for good: close the driver and make another), or no longer has this context.
        ShopUnavailableError: The shop did not answer, or answered what its API does not promise.
        RuntimeError: The driver is closed.

    Example:
        >>> with httpx.Client(transport=container.transport()) as client:  # doctest: +SKIP
        ...     driver = RemoteBrowserDriver(client, container.url)
        ...     html = driver.open(shop.start_url(sid))
        ...     driver.close()
    """

    TIMEOUT_MARGIN_S = 5.0
    """Waited for an answer beyond the longest a call may take in the shop (its ``timeout_s``)."""

    OPEN_TIMEOUT_S = 150.0
    """Waited for the shop to open a context, before it said how long its calls may take: it may launch its
    browser first (after a crash), which may take a minute on a loaded machine."""

    def __init__(self, client: httpx.Client, shop_url: str) -> None:
        self._client = client
        self._shop_url = shop_url.rstrip("/")
        self._url = "about:blank"
        self._closed = False
        self._timeout_s = self.OPEN_TIMEOUT_S
        reply = self._call("POST", "/api/browsers", expected=201)
        browser, timeout_s = reply.get("browser"), reply.get("timeout_s")
        if not isinstance(browser, str) or not isinstance(timeout_s, int | float):
            raise ShopUnavailableError(f"the shop at {self._shop_url} sent no browser context: {str(reply)[:200]}")
        self._context_id = browser
        self._base = f"/api/browsers/{quote(browser, safe='')}"
        self._timeout_s = timeout_s + self.TIMEOUT_MARGIN_S

    @property
    def context_id(self) -> str:
        """The id of the driver's context in the shop's browser (``bid`` of the routes)."""
        return self._context_id

    @property
    def url(self) -> str:
        """The URL of the current page, under the shop's URL (``about:blank`` before :meth:`open`)."""
        return self._url

    def open(self, url: str) -> str:
        """Go to ``url``, a page of the shop.

        Raises:
            ValueError: ``url`` is not under the shop's URL.
        """
        if not url.startswith(self._shop_url + "/"):
            raise ValueError(f"expected a URL under {self._shop_url}/, got {url!r}")
        return self._visit("open", {"path": url.removeprefix(self._shop_url)})

    def search(self, query: str) -> str:
        """Type ``query`` into the search box and submit it.

        Raises:
            ValueError: The current page has no search box.
        """
        return self._visit("search", {"query": query})

    def click(self, index: int) -> str:
        """Click the ``index``-th clickable element of the current page.

        Raises:
            IndexError: The page has no clickable with that index.
        """
        return self._visit("click", {"index": index})

    def aria_snapshot(self) -> str:
        """The current page's accessibility tree (Playwright's YAML ARIA snapshot of ``<body>``)."""
        return self._text(self._call("GET", f"{self._base}/aria"), "aria")

    def close(self) -> None:
        """Close the context in the shop's browser; idempotent. A shop that does not answer any more held it in
        a browser that is gone with it: that is logged, not raised."""
        if self._closed:
            return
        self._closed = True
        try:
            response = self._client.delete(self._shop_url + self._base, timeout=self._timeout_s)
        except httpx.TransportError as exc:
            logger.warning("WebShop: could not close browser context %s of %s: %s", self._base, self._shop_url, exc)
            return
        if response.status_code not in (204, 404):
            raise ShopUnavailableError(f"the shop at {self._shop_url} refused to close browser context "
                                       f"{self._base}: HTTP {response.status_code} {response.text[:200]}")

    def _visit(self, operation: str, payload: dict[str, Any]) -> str:
        reply = self._call("POST", f"{self._base}/{operation}", payload)
        html, path = self._text(reply, "html"), self._text(reply, "path")
        self._url = self._shop_url + path
        return html

    def _text(self, reply: dict[str, Any], name: str) -> str:
        value = reply.get(name)
        if not isinstance(value, str):
            raise ShopUnavailableError(f"the shop at {self._shop_url} sent no {name!r} text: {str(reply)[:200]}")
        return value

    def _call(self, method: str, path: str, payload: Any = None, *, expected: int = 200) -> dict[str, Any]:
        """One API call; its error statuses raised as what the shop's driver raised."""
        if self._closed:
            raise RuntimeError("expected an open RemoteBrowserDriver, got a closed one")
        try:
            response = self._client.request(method, self._shop_url + path, json=payload, timeout=self._timeout_s)
        except httpx.TransportError as exc:
            raise ShopUnavailableError(f"the shop at {self._shop_url} did not answer {method} {path}: "
                                       f"{type(exc).__name__}: {exc}") from exc
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if response.status_code == expected and isinstance(reply, dict):
            return reply
        raise _api_error(response.status_code, reply, f"{method} {self._shop_url}{path}")


def _api_error(status: int, reply: Any, request: str) -> Exception:
    """The exception a browser API error status stands for (:mod:`~agentgym_envs.webshop.browser_api`)."""
    detail = reply.get("error") if isinstance(reply, dict) else None
    if not isinstance(detail, str):
        return ShopUnavailableError(f"the shop answered {request} with HTTP {status} and no error message")
    if status in (404, 502):
        return BrowserUnavailableError(f"the shop's browser failed ({request}): {detail}")
    if status == 422:
        return IndexError(detail)
    if status == 400:
        return ValueError(detail)
    return ShopUnavailableError(f"the shop answered {request} with HTTP {status}: {detail}")


__all__ = ["HttpDriver", "PageDriver", "RemoteBrowserDriver"]
