"""How an episode moves through the shop's pages: over plain HTTP (text mode) or in Chromium (browser mode).

A :class:`PageDriver` opens a URL, types a query into the search box, or clicks the n-th clickable
element of the current page, and returns the HTML of the page it lands on. :class:`HttpDriver` does it
with HTTP requests (following the link, or submitting the button's form, as a browser would);
:class:`~agentgym_envs.webshop.browser.BrowserDriver` does it with real clicks in a browser context.
Both hand back HTML that :func:`~agentgym_envs.webshop.pages.parse_page` turns into the observation, so
the two modes show the same text for the same pages.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable
from urllib.parse import urlencode, urljoin

import httpx

from agentgym_envs.webshop.errors import ShopUnavailableError
from agentgym_envs.webshop.pages import SEARCH_FIELD, Form, Page, parse_page


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


__all__ = ["HttpDriver", "PageDriver"]
