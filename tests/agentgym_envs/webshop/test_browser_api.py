"""The shop's own browser (``--browser``) behind its JSON API, on a Unix socket (``--unix``), without Docker.

What ShopContainer relies on, tested on a server process of this machine: the env over a Unix socket in text
mode, and in browser mode through RemoteBrowserDriver, shows what it shows on TCP with a host browser; the
driver raises what a BrowserDriver raises; closing leaves no context; the env refuses modes the shop cannot serve.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from agentgym_envs import EnvConfigError
from agentgym_envs.policies import run_episode
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy
from agentgym_envs.webshop import ShopClient, ShopServer, WebShopEnv
from agentgym_envs.webshop.drivers import RemoteBrowserDriver
from agentgym_envs.webshop.errors import BrowserUnavailableError, ShopUnavailableError
from agentgym_envs.webshop.pages import parse_page
from agentgym_envs.webshop.service import READY_PREFIX, SOURCE_ROOT, BrowserLocation, ShopService
from agentgym_envs.webshop.speed import chromium_processes
from tasks import load_split

TASKS = load_split("WebShop", "test")[:3]


class UnixShop(ShopService):
    """A shop on a Unix socket, as ShopContainer presents one."""

    def __init__(self, socket: Path, browser_location: BrowserLocation | None) -> None:
        self.socket = socket
        self._browser_location = browser_location

    @property
    def url(self) -> str:
        return "http://shop"

    @property
    def browser_location(self) -> BrowserLocation | None:
        return self._browser_location

    def transport(self) -> httpx.HTTPTransport:
        return httpx.HTTPTransport(uds=str(self.socket))


@pytest.fixture(scope="module")
def started() -> Iterator[list[tuple[subprocess.Popen[str], Path]]]:
    """Holds the module's server once a test has started it; stops it at the end (it must exit cleanly)."""
    holder: list[tuple[subprocess.Popen[str], Path]] = []
    yield holder
    for process, _ in holder:
        process.terminate()
        assert process.wait(timeout=30) == 0
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture
def socket(browser_backend, started, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Unix socket of the module's shop server with its own browser, started by the first test that needs it."""
    if not started:
        path = tmp_path_factory.mktemp("shop") / "shop.sock"
        process = subprocess.Popen(
            [sys.executable, "-m", "agentgym_envs.webshop.server", "--catalogue", "generated-v1", "--port", "0",
             "--unix", str(path), "--browser", "--exit-with-parent"],
            cwd=SOURCE_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        started.append((process, path))
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(READY_PREFIX) and line.split()[4] == str(path), line
    return started[0][1]


@pytest.fixture
def http(socket: Path) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), timeout=30.0) as client:
        yield client


@pytest.fixture
def start_url(socket: Path) -> Iterator[str]:
    """The search page of a fresh session."""
    with ShopClient("http://shop", transport=httpx.HTTPTransport(uds=str(socket))) as client:
        sid = client.create_session("i need a red mug, and price lower than 50.00 dollars")
        yield client.start_url(sid)
        client.delete_session(sid)


def contexts(http: httpx.Client) -> int:
    return http.get("http://shop/api/browsers").json()["contexts"]


def play(env: WebShopEnv) -> list[tuple[list[str], float]]:
    played = []
    for i, task in enumerate(TASKS):
        episode = run_episode(env, WebShopOraclePolicy(), task, seed=i, shown_task=prompt_only(task))
        assert episode.success, task.id
        played.append(([env._prompt, *(turn.observation for turn in episode.turns)], episode.reward))
    return played


@pytest.mark.browser
def test_over_the_socket_text_mode_and_the_shops_browser_show_what_tcp_shows(socket, http):
    envs = [WebShopEnv(split="test"), WebShopEnv(split="test", server=UnixShop(socket, None)),
            WebShopEnv(split="test", server=UnixShop(socket, "shop"), mode="browser")]
    try:
        on_tcp, text, browser = (play(env) for env in envs)
    finally:
        for env in envs:
            env.close()
    assert text == on_tcp
    assert browser == on_tcp
    assert contexts(http) == 0


@pytest.mark.browser
def test_the_remote_driver_raises_what_a_browser_driver_raises(http, start_url):
    driver = RemoteBrowserDriver(http, "http://shop")
    try:
        assert driver.url == "about:blank"
        driver.open(start_url)
        assert driver.url == start_url
        assert contexts(http) == 1
        with pytest.raises(ValueError, match="expected a URL under http://shop/"):
            driver.open("http://elsewhere.example/s/x")
        driver.search("red mug")
        with pytest.raises(IndexError, match="expected a clickable index"):
            driver.click(999)
        driver.click(2)  # a product
        with pytest.raises(ValueError, match="search box"):
            driver.search("mug")
        assert '- button "Buy Now"' in driver.aria_snapshot()
    finally:
        driver.close()
    driver.close()  # idempotent
    assert contexts(http) == 0
    with pytest.raises(RuntimeError, match="closed"):
        driver.click(0)


@pytest.mark.browser
def test_a_context_the_shop_no_longer_has_is_a_browser_fault_and_a_silent_shop_a_shop_fault(http, tmp_path):
    driver = RemoteBrowserDriver(http, "http://shop")
    assert http.delete(f"http://shop/api/browsers/{driver.context_id}").status_code == 204
    with pytest.raises(BrowserUnavailableError, match="expected the id of an open browser context"):
        driver.search("mug")
    driver.close()
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(tmp_path / "none.sock"))) as silent, \
            pytest.raises(ShopUnavailableError, match="did not answer POST /api/browsers"):
        RemoteBrowserDriver(silent, "http://shop")


@pytest.mark.browser
def test_a_crashed_browser_is_a_browser_fault_and_the_next_context_relaunches_it(http, start_url, started):
    driver = RemoteBrowserDriver(http, "http://shop")
    driver.open(start_url)
    chromium = chromium_processes(psutil.Process(started[0][0].pid))
    for process in chromium:
        process.kill()
    psutil.wait_procs(chromium, timeout=10)
    with pytest.raises(BrowserUnavailableError, match="the shop's browser failed"):
        driver.search("mug")
    driver.close()
    again = RemoteBrowserDriver(http, "http://shop")
    try:
        assert parse_page(again.open(start_url)).kind == "search"
    finally:
        again.close()


@pytest.mark.browser
@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/api/browsers/nope/click", {"index": 0}, 404, "expected the id of an open browser context"),
    ("/api/browsers/{bid}/click", {"index": "0"}, 400, "expected {'index': int}"),
    ("/api/browsers/{bid}/click", {"index": True}, 400, "expected {'index': int}"),
    ("/api/browsers/{bid}/open", {"path": "http://elsewhere.example/"}, 400, "expected a path that starts with '/'"),
    ("/api/browsers/{bid}/search", [1], 400, "expected a JSON object"),
])
def test_the_api_answers_a_bad_request_with_its_status_and_why(http, path, body, status, message):
    bid = http.post("http://shop/api/browsers").json()["browser"]
    try:
        response = http.post(f"http://shop{path.format(bid=bid)}", json=body)
    finally:
        http.delete(f"http://shop/api/browsers/{bid}")
    assert response.status_code == status
    assert message in response.json()["error"]


def test_browser_mode_needs_a_shop_a_browser_can_visit(tmp_path):
    with pytest.raises(EnvConfigError, match="a ShopContainer needs browser=True"):
        WebShopEnv(split="test", server=UnixShop(tmp_path / "s.sock", None), mode="browser")
    assert ShopServer("generated-v1").browser_location == "host"


@pytest.mark.browser
def test_a_browser_pool_is_refused_for_a_shop_with_its_own_browser(browser_backend, tmp_path):
    from agentgym_envs.webshop.browser import BrowserPool

    with BrowserPool() as pool, pytest.raises(EnvConfigError, match="brings its own browser"):
        WebShopEnv(split="test", server=UnixShop(tmp_path / "s.sock", "shop"), mode="browser", browser=pool)
