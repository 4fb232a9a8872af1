"""The browser driver on a tiny local site: pages reached by open/search/click, forms submitted with their hidden
inputs, many drivers on many threads, nothing left behind on close, and crashes, timeouts and dead servers
reported as infrastructure errors. Skipped without Playwright and Chromium unless AGENTRL_REQUIRE_BACKENDS names
``browser`` (the ``browser_backend`` fixture of tests/conftest.py)."""

from __future__ import annotations

import html
import re
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import psutil
import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.webshop.errors import BrowserUnavailableError
from agentgym_envs.webshop.speed import chromium_processes
from tasks.errors import InfrastructureError

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("browser_backend")]  # skips, or fails when required

if TYPE_CHECKING:
    from agentgym_envs.webshop.browser import BrowserPool


# -- a tiny shop that follows the WebShop HTML conventions -------------------------------------------------------

SID = "abc"


def page(kind: str, body: str) -> bytes:
    return (f'<!DOCTYPE html><html><head><title>{kind}</title></head><body data-page="{kind}">'
            f'<div id="instruction"><h4>Instruction:</h4><p>Buy red shoes</p></div>{body}</body></html>').encode()


def search_page() -> bytes:
    return page("search", f'<form id="search-form" method="get" action="/s/{SID}/search">'
                          '<input id="search-input" type="text" name="query" aria-label="Search">'
                          '<button class="clickable" type="submit">Search</button></form>')


def results_page(query: str) -> bytes:
    links = "".join(f'<div class="result"><a class="clickable" href="/s/{SID}/item/B0{n}?query={html.escape(query)}'
                    f'&amp;page=1">B0{n}</a><h4>Shoe {n}</h4><p>$1{n}.00</p></div>' for n in range(3))
    return page("results", f'<a class="clickable" href="/s/{SID}">Back to Search</a>'
                           f'<p id="query">{html.escape(query)}</p>{links}')


def item_page(asin: str, query: str) -> bytes:
    return page("item", f'<a class="clickable" href="/s/{SID}">Back to Search</a>'
                        f'<a class="clickable option" data-group="color" aria-pressed="true" '
                        f'href="/s/{SID}/item/{asin}?o.color=red">red</a><h2>Shoe {asin}</h2>'
                        f'<form method="post" action="/s/{SID}/buy/{asin}">'
                        '<input type="hidden" name="o.color" value="red">'
                        f'<input type="hidden" name="query" value="{html.escape(query)}">'
                        '<input type="hidden" name="page" value="1">'
                        '<button class="clickable" type="submit">Buy Now</button></form>')


def done_page(asin: str, form: list[tuple[str, str]]) -> bytes:
    fields = "&".join(f"{name}={value}" for name, value in form)
    return page("done", f"<p>You bought: {asin}</p><p id=\"form\">{html.escape(fields)}</p>")


class ShopServer(ThreadingHTTPServer):
    """The tiny shop's server; ``/slow`` answers once :attr:`release` is set."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ShopHandler)
        self.release = threading.Event()


class ShopHandler(BaseHTTPRequestHandler):
    """GET /s/abc, /s/abc/search, /s/abc/item/A; POST /s/abc/buy/A; 500 for /boom; /slow waits for the test;
    404 for anything else."""

    server: ShopServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query)).get("query", "")
        if url.path == f"/s/{SID}":
            self.reply(200, search_page())
        elif url.path == f"/s/{SID}/search":
            self.reply(200, results_page(query))
        elif match := re.fullmatch(rf"/s/{SID}/item/(\w+)", url.path):
            self.reply(200, item_page(match[1], query))
        elif url.path == "/boom":
            self.reply(500, page("error", "<p>Internal Server Error</p>"))
        elif url.path == "/slow":
            self.server.release.wait(timeout=10)
            self.reply(200, search_page())
        else:
            back = f'<a class="clickable" href="/s/{SID}">Back to Search</a>'
            self.reply(404, page("error", f"<p>No such page</p>{back}"))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        match = re.fullmatch(rf"/s/{SID}/buy/(\w+)", urlsplit(self.path).path)
        assert match is not None, self.path
        self.reply(200, done_page(match[1], parse_qsl(body)))

    def reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return


class Shop:
    """The tiny shop served on 127.0.0.1 (a free port) from a thread; :meth:`stop` makes it a dead server."""

    def __init__(self) -> None:
        self.server = ShopServer()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.stopped = False

    def url(self, path: str = f"/s/{SID}") -> str:
        return self.base + path

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.server.release.set()
            self.server.shutdown()
            self.server.server_close()
            self.thread.join()


@pytest.fixture
def shop() -> Iterator[Shop]:
    served = Shop()
    yield served
    served.stop()


@pytest.fixture
def make_pool() -> Iterator[Callable[..., BrowserPool]]:
    """``BrowserPool(**kwargs)``; every pool made is closed after the test."""
    from agentgym_envs.webshop.browser import BrowserPool  # needs Playwright: imported once the backend is there

    pools: list[BrowserPool] = []

    def make(**kwargs: Any) -> BrowserPool:
        pools.append(BrowserPool(**kwargs))
        return pools[-1]

    yield make
    for made in pools:
        made.close()


@pytest.fixture
def pool(make_pool: Callable[..., BrowserPool]) -> BrowserPool:
    return make_pool(timeout_s=10.0)


def data_page(document: str) -> str:
    match = re.search(r'<body data-page="(\w+)"', document)
    assert match is not None, document[:200]
    return match[1]


def browser_process() -> psutil.Process:
    """The browser's main process: the Chromium descendant whose parent is not Chromium."""
    mains = [process for process in chromium_processes() if "chrom" not in process.parent().name()]
    assert len(mains) == 1, mains
    return mains[0]


# -- tests -------------------------------------------------------------------------------------------------------


def test_open_search_and_click_return_the_page_reached(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    assert data_page(driver.open(shop.url())) == "search"
    assert driver.url == shop.url()

    results = driver.search("red shoes")
    assert data_page(results) == "results" and '<p id="query">red shoes</p>' in results
    assert driver.url == shop.url(f"/s/{SID}/search?query=red+shoes")

    item = driver.click(2)  # Back to Search, B00, B01, B02
    assert data_page(item) == "item" and "<h2>Shoe B01</h2>" in item
    assert driver.url == shop.url(f"/s/{SID}/item/B01?query=red%20shoes&page=1")

    assert data_page(driver.click(0)) == "search"  # Back to Search
    driver.close()
    driver.close()  # idempotent
    assert pool.open_contexts == 0


def test_a_post_form_submits_its_hidden_inputs(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    driver.open(shop.url(f"/s/{SID}/item/B02?query=red+shoes&page=1"))
    done = driver.click(2)  # Back to Search, red, Buy Now
    assert data_page(done) == "done" and "You bought: B02" in done
    assert '<p id="form">o.color=red&amp;query=red shoes&amp;page=1</p>' in done
    assert driver.url == shop.url(f"/s/{SID}/buy/B02")
    driver.close()


def test_a_4xx_page_is_a_page_and_a_5xx_is_an_infrastructure_fault(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    assert data_page(driver.open(shop.url("/s/nope"))) == "error"  # 404: the shop's error page
    assert data_page(driver.click(0)) == "search"  # its Back to Search works
    with pytest.raises(BrowserUnavailableError, match="expected a page from the shop, got HTTP 500") as caught:
        driver.open(shop.url("/boom"))
    assert isinstance(caught.value, InfrastructureError)
    driver.close()


def test_programming_errors_are_not_infrastructure_faults(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    driver.open(shop.url(f"/s/{SID}/search?query=x"))
    with pytest.raises(IndexError, match=r"expected a clickable index in 0\.\.3, got 4"):
        driver.click(4)
    with pytest.raises(IndexError, match="got -1"):
        driver.click(-1)  # not Playwright's "last one"
    with pytest.raises(ValueError, match="expected a page with a search box '#search-input', got none"):
        driver.search("shoes")  # a results page
    with pytest.raises(ValueError, match="expected an absolute http"):
        driver.open("/s/abc")
    assert data_page(driver.click(3)) == "item"  # the driver still works
    driver.close()
    with pytest.raises(RuntimeError, match="expected an open BrowserDriver, got a closed one"):
        driver.click(0)


def test_aria_snapshot_is_the_accessibility_tree_of_the_body(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    driver.open(shop.url())
    snapshot = driver.aria_snapshot()
    assert 'textbox "Search"' in snapshot and 'button "Search"' in snapshot and "Buy red shoes" in snapshot
    driver.close()


def test_version_and_a_missing_chromium(pool: BrowserPool, make_pool: Callable[..., BrowserPool]) -> None:
    assert re.fullmatch(r"\d+(\.\d+)+", pool.version)
    with pytest.raises(EnvConfigError, match="apt-get install chromium"):
        make_pool(executable="/nonexistent/chromium")
    with pytest.raises(EnvConfigError, match="expected timeout_s > 0, got 0"):
        make_pool(timeout_s=0)


def drive_four(pool: BrowserPool, shop: Shop, worker: int, all_open: threading.Barrier) -> list[list[str]]:
    """Open four drivers, wait until every worker has its four open, then search, open an item and buy it in each,
    turn by turn; the kinds of the pages reached by each driver."""
    drivers = [pool.new_driver() for _ in range(4)]
    try:
        kinds = [[data_page(driver.open(shop.url()))] for driver in drivers]
        all_open.wait(timeout=120)
        for n, driver in enumerate(drivers):
            kinds[n].append(data_page(driver.search(f"query {worker}.{n}")))
        for n, driver in enumerate(drivers):
            kinds[n].append(data_page(driver.click(1 + n % 3)))
        for n, driver in enumerate(drivers):
            done = driver.click(2)  # Buy Now
            assert f"You bought: B0{n % 3}" in done and f"query=query {worker}.{n}" in done
            kinds[n].append(data_page(done))
        return kinds
    finally:
        for driver in drivers:
            driver.close()


def test_32_drivers_open_at_once_on_8_threads(pool: BrowserPool, shop: Shop) -> None:
    open_counts: list[int] = []
    all_open = threading.Barrier(8, action=lambda: open_counts.append(pool.open_contexts))
    with ThreadPoolExecutor(max_workers=8) as workers:
        kinds = [kind for four in workers.map(lambda worker: drive_four(pool, shop, worker, all_open), range(8))
                 for kind in four]
    assert kinds == [["search", "results", "item", "done"]] * 32
    assert open_counts == [32] and pool.open_contexts == 0


def test_close_leaves_no_context_and_no_chromium_process(pool: BrowserPool, shop: Shop) -> None:
    drivers = [pool.new_driver() for _ in range(3)]
    for driver in drivers:
        driver.open(shop.url())
    drivers[0].close()
    assert pool.open_contexts == 2
    processes = chromium_processes()
    assert processes

    pool.close()
    pool.close()  # idempotent
    assert pool.open_contexts == 0
    _, alive = psutil.wait_procs(processes, timeout=10)
    assert alive == [] and chromium_processes() == []
    drivers[1].close()  # the pool closed it already: a no-op
    with pytest.raises(RuntimeError, match="expected an open BrowserPool, got a closed one"):
        drivers[2].click(0)
    with pytest.raises(RuntimeError, match="expected an open BrowserPool, got a closed one"):
        pool.new_driver()


def test_a_killed_browser_is_an_infrastructure_fault_and_is_relaunched(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    driver.open(shop.url())
    processes, main = chromium_processes(), browser_process()
    main.send_signal(signal.SIGKILL)
    _, alive = psutil.wait_procs(processes, timeout=10)
    assert alive == []  # its zygotes and renderers went with it

    with pytest.raises(BrowserUnavailableError, match="the browser failed"):
        driver.search("shoes")
    driver.close()  # its context died with the browser: nothing to close, no error
    assert pool.open_contexts == 0

    fresh = pool.new_driver()
    assert data_page(fresh.open(shop.url())) == "search" and data_page(fresh.search("shoes")) == "results"
    assert browser_process().pid != main.pid and pool.open_contexts == 1
    fresh.close()


def test_a_dead_server_is_an_infrastructure_fault(pool: BrowserPool, shop: Shop) -> None:
    driver = pool.new_driver()
    driver.open(shop.url())
    shop.stop()
    failed = "expected a page from the shop, got a failed navigation: .*net::ERR_CONNECTION_REFUSED"
    with pytest.raises(BrowserUnavailableError, match=failed):
        driver.search("shoes")
    with pytest.raises(BrowserUnavailableError, match=failed):
        driver.open(shop.url())
    driver.close()


def test_a_navigation_that_times_out_is_an_infrastructure_fault(make_pool: Callable[..., BrowserPool],
                                                                shop: Shop) -> None:
    pool = make_pool(timeout_s=0.5)
    driver = pool.new_driver()
    with pytest.raises(BrowserUnavailableError, match=r"finish within 0\.5s, got a timeout"):
        driver.open(shop.url("/slow"))
    with pytest.raises(BrowserUnavailableError, match=r"expected a working driver, got one broken by: .*0\.5s"):
        driver.open(shop.url())  # the slow page may still land: the driver is done
    shop.server.release.set()
    driver.close()
    fresh = pool.new_driver()
    assert data_page(fresh.open(shop.url())) == "search"
    fresh.close()


def test_no_request_leaves_loopback(make_pool: Callable[..., BrowserPool], shop: Shop) -> None:
    from agentgym_envs.webshop.browser import DEFAULT_ARGS

    # shop.test resolves to 127.0.0.1, but it is not a loopback *name*: Chromium sends it to the dead proxy
    port = urlsplit(shop.base).port
    pool = make_pool(timeout_s=10.0, launch_args=[*DEFAULT_ARGS, "--host-resolver-rules=MAP shop.test 127.0.0.1"])
    driver = pool.new_driver()
    assert data_page(driver.open(f"http://localhost:{port}/s/{SID}")) == "search"
    with pytest.raises(BrowserUnavailableError, match="ERR_PROXY_CONNECTION_FAILED"):
        driver.open(f"http://shop.test:{port}/s/{SID}")
    driver.close()
