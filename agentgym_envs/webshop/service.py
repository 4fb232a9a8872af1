"""The shop server as a process (:class:`ShopServer`) and a client of its JSON API (:class:`ShopClient`).

A :class:`ShopService` is what an env needs of a running shop: its URL, how an HTTP client reaches it, and
where a browser can visit its pages. :class:`ShopServer` is one, on a loopback port; :class:`ShopAddress`
names a shop someone else runs; :class:`~agentgym_envs.webshop.container.ShopContainer` runs one in a
container, reached over a Unix socket, with its own browser.

:class:`ShopServer` runs ``python -m agentgym_envs.webshop.server`` in a child process, waits for its
``listening on`` line and stops it (SIGTERM, then SIGKILL after a grace period); the child also stops
by itself when the process that started it dies. :class:`ShopClient` speaks the server's ``/api/``
routes over one keep-alive ``httpx.Client``, retrying refused or dropped connections, timeouts and
5xx replies with exponential backoff; when every attempt fails it raises
:class:`~agentgym_envs.webshop.errors.ShopUnavailableError`, which the env reports as an
infrastructure fault, never as the agent's failure.

Example:
    >>> with ShopServer("generated-v1") as server, ShopClient(server.url) as client:  # doctest: +SKIP
    ...     sid = client.create_session("I need a navy henley shirt, price lower than 40.00 dollars")
    ...     client.start_url(sid)                         # the page an episode starts on
    ...     client.purchase(sid)                          # None until the agent buys
"""

from __future__ import annotations

import abc
import collections
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal
from urllib.parse import quote, urlsplit

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.webshop.errors import ShopUnavailableError
from tasks.progress import write_stderr
from tasks.webshop.records import Product, Purchase

READY_PREFIX = "listening on "
"""How the server's one line on stdout starts, once its socket accepts connections."""

STARTUP_POLL_S = 1.0
"""How often a start checks whether the server wrote to stderr meanwhile."""

STDERR_TAIL_LINES = 40
"""Lines of the server's stderr kept, to explain a server that failed to start."""

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding ``agentgym_envs``, put on the server's ``PYTHONPATH`` so it imports this very copy."""

BrowserLocation = Literal["host", "shop"]
"""Where a browser that shows a shop's pages runs: in this process (``"host"``: a
:class:`~agentgym_envs.webshop.browser.BrowserPool`) or in the shop's own process (``"shop"``: through
:class:`~agentgym_envs.webshop.drivers.RemoteBrowserDriver`)."""


class ShopService(abc.ABC):
    """A running shop, as an env uses it: its URL, how a client reaches it, where a browser can visit it.

    The defaults describe a shop on a TCP port that this process can reach and open in its own browser.
    """

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The shop's base URL, e.g. ``http://127.0.0.1:8100``."""

    @property
    def browser_location(self) -> BrowserLocation | None:
        """Where a browser can show the shop's pages; None when nowhere (text mode only)."""
        return "host"

    def transport(self) -> httpx.BaseTransport | None:
        """A new transport for one ``httpx.Client`` to reach :attr:`url` over; None for plain TCP."""
        return None


class ShopAddress(ShopService):
    """A shop someone else runs (``python -m agentgym_envs.webshop.server``), at ``url``.

    Args:
        url: Its base URL, e.g. ``"http://127.0.0.1:3000"``.
    """

    def __init__(self, url: str) -> None:
        self._url = url

    @property
    def url(self) -> str:
        """The shop's base URL."""
        return self._url


class ShopServer(ShopService):
    """The WebShop server in a child process, on a loopback port.

    Args:
        catalogue: A bundled catalogue name (``"generated-v1"``) or a JSONL file of products.
        host: Address to bind (loopback).
        port: Port to bind; 0 picks a free one (read :attr:`url` after :meth:`start`).
        index_dir: The folder of the catalogue's store (:mod:`~agentgym_envs.webshop.store`: built there when
            absent); default: under the retriever's cache.
        startup_timeout_s: How long the server may stay silent before it listens. A first build of its store
            writes a progress line to stderr every
            :data:`~agentgym_envs.webshop.store.BUILD_PROGRESS_EVERY_S` seconds, so a build of minutes (WebShop's
            1.18M products) is waited for, and a server that hangs is not.
        stop_grace_s: How long :meth:`stop` waits after SIGTERM before it sends SIGKILL.

    Example:
        >>> server = ShopServer("products.jsonl", index_dir="/tmp/shop-index")   # doctest: +SKIP
        >>> server.start()                                                       # doctest: +SKIP
        'http://127.0.0.1:40321'
        >>> server.stop()                                                        # doctest: +SKIP
    """

    def __init__(self, catalogue: str, *, host: str = "127.0.0.1", port: int = 0,
                 index_dir: str | os.PathLike[str] | None = None, startup_timeout_s: float = 60.0,
                 stop_grace_s: float = 5.0) -> None:
        if startup_timeout_s <= 0 or stop_grace_s <= 0:
            raise EnvConfigError(f"expected startup_timeout_s > 0 and stop_grace_s > 0, "
                                 f"got {startup_timeout_s} and {stop_grace_s}")
        self.catalogue = catalogue
        self.host = host
        self.port = port
        self.index_dir = index_dir
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self._process: subprocess.Popen[str] | None = None
        self._readers: list[threading.Thread] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._url: str | None = None
        self._last_output = time.monotonic()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server.

        Raises:
            ShopUnavailableError: The server was not started, or was stopped.
        """
        if self._url is None:
            raise ShopUnavailableError("the shop server is not running: call start() first")
        return self._url

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs, else None."""
        return self._process.pid if self.alive() and self._process is not None else None

    def alive(self) -> bool:
        """True while the server process runs."""
        process = self._process
        return process is not None and process.poll() is None

    def start(self) -> str:
        """Start the server and wait until it listens; a running server is left as it is.

        Returns:
            The server's URL, ``http://host:port``.

        Raises:
            ShopUnavailableError: The process exited or stayed silent past ``startup_timeout_s`` (the
                message carries the end of its stderr); nothing is left running.
        """
        with self._lock:
            if self.alive() and self._url is not None:
                return self._url
            self._stop_locked()
            process, lines = self._spawn()
            try:
                self._url = self._wait_until_listening(process, lines)
            except ShopUnavailableError:
                self._stop_locked()
                raise
            return self._url

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``stop_grace_s``; idempotent, leaves no process."""
        with self._lock:
            self._stop_locked()

    def __enter__(self) -> ShopServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- process ---------------------------------------------------------------------------------
    def _argv(self) -> list[str]:
        argv = [sys.executable, "-m", "agentgym_envs.webshop.server", "--catalogue", self.catalogue,
                "--host", self.host, "--port", str(self.port), "--exit-with-parent"]
        return argv if self.index_dir is None else [*argv, "--index-dir", os.fspath(self.index_dir)]

    def _spawn(self) -> tuple[subprocess.Popen[str], queue.Queue[str | None]]:
        """Start the process and its output readers; the queue gets its stdout lines, then None at EOF."""
        python_path = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
        self._stderr.clear()
        process = self._process = subprocess.Popen(
            self._argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8", errors="replace", env={**os.environ, "PYTHONPATH": python_path})
        lines: queue.Queue[str | None] = queue.Queue()
        assert process.stdout is not None and process.stderr is not None  # PIPE gives both
        self._readers = [
            threading.Thread(target=_drain, args=(process.stdout, lines.put, lambda: lines.put(None)),
                             name="shop-stdout", daemon=True),
            threading.Thread(target=_drain, args=(process.stderr, self._on_stderr), name="shop-stderr",
                             daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        return process, lines

    def _on_stderr(self, line: str) -> None:
        """Keep the line; until the server listens, also pass it on to this process's stderr (the progress lines
        of a first-time store build, which may take minutes at WebShop's scale)."""
        self._stderr.append(line)
        if self._url is None:
            self._last_output = time.monotonic()
            write_stderr(line.rstrip("\n"))

    def _wait_until_listening(self, process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> str:
        """The URL of the ``listening on`` line; the wait ends when the server stays silent (no line on stdout or
        stderr) for ``startup_timeout_s``.

        Raises:
            ShopUnavailableError: The server was silent that long, or exited, before it listened.
        """
        self._last_output = time.monotonic()
        while True:
            try:
                line = lines.get(timeout=max(0.0, min(self._last_output + self.startup_timeout_s - time.monotonic(),
                                                      STARTUP_POLL_S)))
            except queue.Empty:
                if time.monotonic() < self._last_output + self.startup_timeout_s:
                    continue  # it wrote to stderr meanwhile (a store build's progress)
                raise ShopUnavailableError(f"the shop server ({self.catalogue}) did not listen and wrote nothing for "
                                           f"{self.startup_timeout_s} s; stderr: {self._stderr_tail()}") from None
            if line is None:  # stdout closed: the process is exiting
                raise ShopUnavailableError(f"the shop server ({self.catalogue}) exited with status "
                                           f"{self._exit_status(process)} before listening; "
                                           f"stderr: {self._stderr_tail()}")
            if line.startswith(READY_PREFIX):
                return line.removeprefix(READY_PREFIX).split()[0]
            self._last_output = time.monotonic()

    def _exit_status(self, process: subprocess.Popen[str]) -> int | None:
        """The exit status once ``process`` ended and its stderr was read to the end; None if it runs on."""
        try:
            code = process.wait(timeout=self.stop_grace_s)
        except subprocess.TimeoutExpired:
            return None
        self._readers[1].join()
        return code

    def _stderr_tail(self) -> str:
        return "".join(self._stderr).strip()[-2000:] or "(empty)"

    def _stop_locked(self) -> None:
        process, self._process, self._url = self._process, None, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for reader in self._readers:
            reader.join()
        self._readers = []
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _drain(stream: IO[str], on_line: Callable[[str], None], on_end: Callable[[], None] | None = None) -> None:
    """Hand each line of ``stream`` to ``on_line`` until EOF, then call ``on_end``."""
    for line in stream:
        on_line(line)
    if on_end is not None:
        on_end()


class _TransientError(Exception):
    """A failure worth retrying: connection refused or dropped, timeout, 5xx."""


def new_session_id() -> str:
    """A fresh, unguessable session id, as a client chooses it (``secrets.token_urlsafe(16)``)."""
    return secrets.token_urlsafe(16)


class ShopClient:
    """A thread-safe client of the shop's JSON API (one keep-alive ``httpx.Client`` shared by all threads).

    Args:
        url: Base URL of the shop, e.g. ``"http://127.0.0.1:8100"``.
        transport: How to reach it (:meth:`ShopService.transport`, e.g. a Unix socket); None: TCP to ``url``.
        timeout_s: Connect and read timeout of each attempt.
        attempts: Attempts per request (the first included).
        backoff_s: First wait between attempts; doubles each time (at most 2 s).

    Raises:
        EnvConfigError: A URL that is not ``http(s)://host[:port]``, or a bad timeout or attempt count.

    Example:
        >>> client = ShopClient("http://127.0.0.1:8100")          # doctest: +SKIP
        >>> sid = client.create_session("I need a red mug")       # doctest: +SKIP
        >>> client.purchase(sid) is None                          # doctest: +SKIP
        True
    """

    def __init__(self, url: str, *, transport: httpx.BaseTransport | None = None, timeout_s: float = 10.0,
                 attempts: int = 3, backoff_s: float = 0.05) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EnvConfigError(f"shop url: expected http://host:port, got {url!r}")
        if attempts < 1 or timeout_s <= 0:
            raise EnvConfigError(f"expected attempts >= 1 and timeout_s > 0, got {attempts} and {timeout_s}")
        self.url = url.rstrip("/")
        self.attempts = attempts
        self.backoff_s = backoff_s
        self._client = httpx.Client(base_url=self.url, timeout=timeout_s, trust_env=False, transport=transport)

    def health(self) -> dict[str, Any]:
        """``{"status": "ok", "products": n, "catalogue": name, "sessions": n}``."""
        return self._json("GET", "/api/health")

    def create_session(self, instruction: str, session_id: str | None = None) -> str:
        """Start a session that shows ``instruction`` on every page; returns its id.

        The id is chosen here (``session_id``, or :func:`new_session_id`) and sent with the request, so that a
        retry of a request that did arrive finds the same session instead of making a second one, and so that a
        caller who keeps the id can delete the session even when the reply was lost.
        """
        if not isinstance(instruction, str):
            raise TypeError(f"instruction: expected a string, got {type(instruction).__name__}")
        sid = session_id or new_session_id()
        reply = self._json("POST", "/api/sessions", {"instruction": instruction, "session": sid}, expected=201)
        if reply.get("session") != sid:
            raise ShopUnavailableError(f"the shop at {self.url} answered session {sid!r} with: {str(reply)[:200]}")
        return sid

    def session(self, sid: str) -> dict[str, Any]:
        """``{"session": sid, "instruction": str, "purchase": dict | None}``.

        Raises:
            ShopUnavailableError: The shop does not answer, or no longer has the session (evicted, or the
                server restarted: the episode's state is lost).
        """
        return self._json("GET", f"/api/sessions/{quote(sid, safe='')}")

    def purchase(self, sid: str) -> Purchase | None:
        """What session ``sid`` bought, or None before it buys."""
        record = self.session(sid).get("purchase")
        if record is None:
            return None
        try:
            return Purchase.from_dict(record)
        except ValueError as exc:
            raise ShopUnavailableError(f"the shop at {self.url} sent a malformed purchase: {exc}") from exc

    def product(self, asin: str) -> Product:
        """The catalogue's product ``asin``.

        Raises:
            KeyError: The catalogue has no such product.
        """
        path = f"/api/products/{quote(asin, safe='')}"
        response = self._request("GET", path)
        if response.status_code == 404:
            raise KeyError(f"expected an ASIN of the shop's catalogue, got {asin!r}")
        try:
            return Product.from_dict(self._decode(response, "GET", path, expected=200))
        except ValueError as exc:
            raise ShopUnavailableError(f"the shop at {self.url} sent a malformed product {asin!r}: {exc}") from exc

    def delete_session(self, sid: str) -> None:
        """Forget session ``sid``; a session already gone is fine."""
        response = self._request("DELETE", f"/api/sessions/{quote(sid, safe='')}")
        if response.status_code not in (204, 404):
            raise ShopUnavailableError(f"the shop at {self.url} refused to delete session {sid!r}: "
                                       f"HTTP {response.status_code} {response.text[:200]}")

    def start_url(self, sid: str) -> str:
        """The absolute URL of session ``sid``'s search page, where an episode starts."""
        return f"{self.url}/s/{quote(sid, safe='')}"

    def close(self) -> None:
        """Close the connections; idempotent."""
        self._client.close()

    def __enter__(self) -> ShopClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- HTTP -------------------------------------------------------------------------------------
    def _json(self, method: str, path: str, payload: Any = None, *, expected: int = 200) -> dict[str, Any]:
        return self._decode(self._request(method, path, payload), method, path, expected=expected)

    def _decode(self, response: httpx.Response, method: str, path: str, *, expected: int) -> dict[str, Any]:
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if response.status_code != expected or not isinstance(reply, dict):
            detail = reply.get("error") if isinstance(reply, dict) else response.text[:200]
            raise ShopUnavailableError(f"the shop at {self.url} answered {method} {path} with HTTP "
                                       f"{response.status_code} (expected {expected}): {detail}")
        return reply

    def _request(self, method: str, path: str, payload: Any = None) -> httpx.Response:
        retrying = Retrying(stop=stop_after_attempt(self.attempts),
                            wait=wait_exponential(multiplier=self.backoff_s, max=2.0),
                            retry=retry_if_exception_type(_TransientError), reraise=True)
        try:
            return retrying(self._request_once, method, path, payload)
        except _TransientError as exc:
            raise ShopUnavailableError(f"the shop at {self.url} did not answer {method} {path} after "
                                       f"{self.attempts} attempts: {exc}") from exc

    def _request_once(self, method: str, path: str, payload: Any) -> httpx.Response:
        try:
            response = self._client.request(method, path, json=payload)
        except httpx.TransportError as exc:
            raise _TransientError(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise _TransientError(f"HTTP {response.status_code}: {response.text[:200]}")
        return response


__all__ = ["READY_PREFIX", "SOURCE_ROOT", "BrowserLocation", "ShopAddress", "ShopClient", "ShopServer", "ShopService",
           "new_session_id"]
