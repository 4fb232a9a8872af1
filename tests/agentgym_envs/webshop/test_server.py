"""The WebShop server: each page kind as the spec draws it, the purchase flow, sessions, errors, the launcher.

Most tests talk to the aiohttp app served from a thread on a loopback port; the launcher tests run the
real ``python -m agentgym_envs.webshop.server`` child process through :class:`ShopServer`.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import psutil
import pytest
from aiohttp import web

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.webshop.errors import ShopUnavailableError
from agentgym_envs.webshop.pages import SESSION_GONE_PAGE
from agentgym_envs.webshop.server import (
    MAX_RESULTS,
    RESULTS_PER_PAGE,
    SHOP,
    main,
    make_app,
)
from agentgym_envs.webshop.service import ShopClient, ShopServer, new_session_id
from agentgym_envs.webshop.store import product_document
from tasks.errors import InfrastructureError
from tasks.webshop import Product, Purchase, generate_catalogue

REPO_ROOT = Path(__file__).resolve().parents[3]
BARE = Product(asin="B999999999", title="Plain Test Mug", category=("Home & Kitchen", "Mugs"), product_type="mug",
               query="mug", price=5.0)
"""A product with no rating, options, description, features or reviews."""

CATALOGUE = [*generate_catalogue(0), BARE]
CATALOGUE_BY_ASIN = {product.asin: product for product in CATALOGUE}
WIDE_QUERY = "home kitchen"  # matches more than MAX_RESULTS products of CATALOGUE
NARROW_QUERY = "navy"  # matches between 11 and 20


# -- a small page reader (independent of agentgym_envs.webshop.pages) -------------------------------
@dataclass
class Link:
    label: str
    href: str
    attrs: dict[str, str]


@dataclass
class Form:
    method: str
    action: str
    inputs: list[tuple[str, str]] = field(default_factory=list)
    buttons: list[str] = field(default_factory=list)


class Reader(HTMLParser):
    """Collects the page kind, clickable links, forms, every input and the body's text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.kind = ""
        self.links: list[Link] = []
        self.forms: list[Form] = []
        self.inputs: list[dict[str, str]] = []
        self.texts: list[str] = []
        self._link: Link | None = None
        self._button: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "body":
            self.kind = attributes["data-page"]
        elif tag == "a" and "clickable" in attributes.get("class", "").split():
            self._link = Link("", attributes["href"], attributes)
        elif tag == "form":
            self.forms.append(Form(attributes["method"], attributes["action"]))
        elif tag == "input":
            self.inputs.append(attributes)
            if self.forms and attributes.get("type") == "hidden":
                self.forms[-1].inputs.append((attributes["name"], attributes["value"]))
        elif tag == "button":
            self._button = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            self._link.label = " ".join(self._link.label.split())
            self.links.append(self._link)
            self._link = None
        elif tag == "button" and self._button is not None:
            self.forms[-1].buttons.append(" ".join("".join(self._button).split()))
            self._button = None

    def handle_data(self, data: str) -> None:
        if not self.kind:  # before <body>: the head
            return
        if self._link is not None:
            self._link.label += data
        elif self._button is not None:
            self._button.append(data)
        if data.strip():
            self.texts.append(" ".join(data.split()))

    @property
    def labels(self) -> list[str]:
        return [link.label for link in self.links]

    def link(self, label: str) -> Link:
        return next(link for link in self.links if link.label == label)


# -- fixtures ---------------------------------------------------------------------------------------
@contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on an ephemeral loopback port from a thread with its own event loop; yields the URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, name="shop-test-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(runner.cleanup())
        loop.close()


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the test catalogue's index lives (never the user's ~/.cache)."""
    return tmp_path_factory.mktemp("shop-index") / "index"


@pytest.fixture(scope="module")
def catalogue_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test catalogue as a JSONL file of products (what the command line reads)."""
    path = tmp_path_factory.mktemp("catalogue") / "products.jsonl"
    path.write_text("".join(json.dumps(product.to_dict()) + "\n" for product in CATALOGUE))
    return path


@pytest.fixture(scope="module")
def app(index_dir: Path) -> web.Application:
    """The shop application over the test catalogue."""
    return make_app(CATALOGUE, catalogue_name="test-catalogue", index_dir=index_dir)


@pytest.fixture(scope="module")
def url(app: web.Application) -> Iterator[str]:
    """The in-process shop's URL."""
    with serving(app) as address:
        yield address


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    """A plain HTTP client of the shop (the pages), as the env's text mode uses one."""
    with httpx.Client(base_url=url, trust_env=False) as client:
        yield client


@pytest.fixture
def client(url: str) -> Iterator[ShopClient]:
    """The JSON API client."""
    with ShopClient(url) as instance:
        yield instance


@pytest.fixture
def sid(client: ShopClient) -> str:
    """A fresh session."""
    return client.create_session("I need navy henley shirts, size large, and price lower than 60.00 dollars")


def page(http: httpx.Client, path: str, status: int = 200, **params: str | int) -> Reader:
    response = http.get(path, params=params or None)  # httpx: params={} would drop the path's own query
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    return Reader(response.text)


def query_of(href: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(href).query))


def product_with_options() -> Product:
    return next(p for p in CATALOGUE if len(p.options) >= 2 and all(len(v) >= 2 for v in p.options.values()))


# -- pages ------------------------------------------------------------------------------------------
def test_search_page_has_the_instruction_and_the_search_form(http, sid, client):
    response = http.get(f"/s/{sid}")
    reader = Reader(response.text)
    assert reader.kind == "search"
    assert reader.texts[:2] == ["Instruction:", client.session(sid)["instruction"]]
    assert '<div id="instruction"><h4>Instruction:</h4><p>' in response.text
    assert [(form.method, form.action, form.buttons) for form in reader.forms] == [("get", f"/s/{sid}/search",
                                                                                    ["Search"])]
    assert reader.inputs == [{"id": "search-input", "type": "text", "name": "query", "aria-label": "Search"}]
    assert reader.links == []  # the Search button is the only clickable


def test_results_show_ten_of_at_most_fifty_hits_with_prev_and_next(http, sid, app):
    expected_total = min(MAX_RESULTS, len(app[SHOP].store.search(WIDE_QUERY, len(CATALOGUE))))
    assert expected_total == MAX_RESULTS  # the query matches more than the cap
    last = MAX_RESULTS // RESULTS_PER_PAGE
    seen: list[str] = []
    for number in range(1, last + 1):
        reader = page(http, f"/s/{sid}/search", query=WIDE_QUERY, page=number)
        assert reader.kind == "results"
        assert f"Page {number} (Total results: {MAX_RESULTS})" in reader.texts
        assert reader.labels[0] == "Back to Search" and reader.link("Back to Search").href == f"/s/{sid}"
        assert ("< Prev" in reader.labels) == (number > 1)
        assert ("Next >" in reader.labels) == (number < last)
        results = [link for link in reader.links if "/item/" in link.href]
        assert len(results) == RESULTS_PER_PAGE
        for link in results:
            product = CATALOGUE_BY_ASIN[link.label]
            assert query_of(link.href) == {"query": WIDE_QUERY, "page": str(number)}
            assert f"${product.price:.2f}" in reader.texts and product.title in reader.texts
        seen += [link.label for link in results]
    assert len(set(seen)) == MAX_RESULTS  # pages do not overlap
    page(http, f"/s/{sid}/search", 404, query=WIDE_QUERY, page=last + 1)


def test_a_result_is_a_link_then_title_then_price(http, sid, app):
    response = http.get(f"/s/{sid}/search", params={"query": NARROW_QUERY})
    asin = app[SHOP].search(NARROW_QUERY)[0]
    product = CATALOGUE_BY_ASIN[asin]
    href = f"/s/{sid}/item/{asin}?query={NARROW_QUERY}&amp;page=1"
    assert (f'<div class="result"><a class="clickable" href="{href}">{asin}</a><h4>{product.title}</h4>'
            f"<p>${product.price:.2f}</p></div>") in response.text


def test_prev_and_next_walk_the_pages(http, sid):
    first = page(http, f"/s/{sid}/search", query=NARROW_QUERY)
    assert query_of(first.link("Next >").href) == {"query": NARROW_QUERY, "page": "2"}
    second = page(http, first.link("Next >").href)
    assert "Next >" not in second.labels  # 11 to 20 hits: two pages
    assert query_of(second.link("< Prev").href) == {"query": NARROW_QUERY, "page": "1"}


def test_a_search_without_hits_says_so(http, sid):
    reader = page(http, f"/s/{sid}/search", query="zzzz qqqq")
    assert reader.kind == "results"
    assert "No results for zzzz qqqq." in reader.texts
    assert reader.labels == ["Back to Search"]
    assert not any(text.startswith("Page ") for text in reader.texts)


def test_item_page_shows_options_title_price_rating_sections_and_buy_form(http, sid):
    product = product_with_options()
    first_group, second_group = list(product.options)[:2]
    chosen = product.options[first_group][1]
    path = f"/s/{sid}/item/{product.asin}"
    reader = page(http, path, query=NARROW_QUERY, page=2, **{f"o.{first_group}": chosen})
    assert reader.kind == "item"
    assert reader.labels[:2] == ["Back to Search", "< Prev"]
    assert query_of(reader.link("< Prev").href) == {"query": NARROW_QUERY, "page": "2"}
    options = [link for link in reader.links if "option" in link.attrs["class"].split()]
    assert [(o.attrs["data-group"], o.label) for o in options] == [(g, v) for g, vs in product.options.items()
                                                                    for v in vs]
    pressed = [(o.attrs["data-group"], o.label) for o in options if o.attrs["aria-pressed"] == "true"]
    assert pressed == [(first_group, chosen)]
    other = next(o for o in options if o.attrs["data-group"] == second_group)
    assert query_of(other.href) == {"query": NARROW_QUERY, "page": "2", f"o.{first_group}": chosen,
                                    f"o.{second_group}": other.label}  # other choices are kept
    assert {product.title, f"Price: ${product.price:.2f}", f"Rating: {product.rating:.1f}"} <= set(reader.texts)
    assert [label for label in reader.labels if label in ("Description", "Features", "Reviews")] == \
        ["Description", "Features", "Reviews"]
    assert urlsplit(reader.link("Reviews").href).path == f"{path}/reviews"
    assert query_of(reader.link("Reviews").href) == {"query": NARROW_QUERY, "page": "2", f"o.{first_group}": chosen}
    (form,) = reader.forms
    assert (form.method, form.action, form.buttons) == ("post", f"/s/{sid}/buy/{product.asin}", ["Buy Now"])
    assert form.inputs == [("query", NARROW_QUERY), ("page", "2"), (f"o.{first_group}", chosen)]
    assert '<div class="option-group"><h5>' in http.get(path).text


def test_a_bare_item_says_rating_na_and_its_sections_say_they_are_empty(http, sid):
    reader = page(http, f"/s/{sid}/item/{BARE.asin}")
    assert "Rating: N.A." in reader.texts and not [a for a in reader.links if "option" in a.attrs["class"]]
    for section, text in (("description", "No description."), ("features", "No features."),
                          ("reviews", "No reviews.")):
        assert text in page(http, f"/s/{sid}/item/{BARE.asin}/{section}").texts


def test_sub_pages_show_their_section_and_lead_back_to_the_item(http, sid):
    product = next(p for p in CATALOGUE if p.features and p.reviews and p.description)
    path = f"/s/{sid}/item/{product.asin}"
    description = page(http, f"{path}/description", query="q", page=3)
    assert description.kind == "subpage" and product.description in description.texts
    assert description.labels == ["Back to Search", "< Prev"]
    assert description.link("< Prev").href.startswith(path + "?")
    assert query_of(description.link("< Prev").href) == {"query": "q", "page": "3"}
    features = http.get(f"{path}/features").text
    assert all(f"<li>{feature}</li>" in features for feature in product.features)
    reviews = page(http, f"{path}/reviews")
    for review in product.reviews:
        assert {f"Rating: {review.rating:.1f}", review.title, review.text} <= set(reviews.texts)
    error = page(http, f"{path}/specs", 404)
    assert error.kind == "error" and error.labels == ["Back to Search"]


def test_search_buy_flow_records_the_purchase(http, client, sid):
    results = page(http, page(http, f"/s/{sid}").forms[0].action, query=NARROW_QUERY)
    item = page(http, next(link for link in results.links if "/item/" in link.href).href)
    asin = urlsplit(item.forms[0].action).path.rsplit("/", 1)[1]
    product = CATALOGUE_BY_ASIN[asin]
    wanted = {group: values[-1] for group, values in product.options.items()}
    for group, value in wanted.items():  # click each option in turn, as an agent would
        option = next(a for a in item.links if a.attrs.get("data-group") == group and a.label == value)
        item = page(http, option.href)
    (form,) = item.forms
    assert dict(form.inputs) == {"query": NARROW_QUERY, "page": "1", **{f"o.{g}": v for g, v in wanted.items()}}
    response = http.post(form.action, data=dict(form.inputs))
    done = Reader(response.text)
    assert response.status_code == 200 and done.kind == "done"
    options = ", ".join(f"{group}: {value}" for group, value in wanted.items())
    assert done.texts[2:] == ["Thank you for shopping with us!", f"You bought: {product.title}",
                              f"Options: {options}", f"Price: ${product.price:.2f}"]
    assert done.links == [] and done.forms == []  # no clickables, no score
    assert client.purchase(sid) == Purchase(asin=asin, options=wanted, price=product.price)


def test_buying_without_options_says_options_none(http, client, sid):
    done = Reader(http.post(f"/s/{sid}/buy/{BARE.asin}", data={"query": "", "page": "1"}).text)
    assert "Options: none" in done.texts
    assert client.purchase(sid) == Purchase(asin=BARE.asin, options={}, price=BARE.price)


def test_a_second_buy_is_refused_with_409_and_the_first_purchase_stays(http, client, sid):
    product = product_with_options()
    assert http.post(f"/s/{sid}/buy/{BARE.asin}").status_code == 200
    second = http.post(f"/s/{sid}/buy/{product.asin}")
    assert second.status_code == 409
    reader = Reader(second.text)
    assert reader.kind == "error" and "already bought" in reader.texts[0] and reader.labels == ["Back to Search"]
    assert client.purchase(sid).asin == BARE.asin


def test_sessions_are_isolated(http, client):
    buyer = client.create_session("buyer's instruction")
    browser = client.create_session("browser's instruction")
    assert http.post(f"/s/{buyer}/buy/{BARE.asin}").status_code == 200
    assert client.purchase(buyer) is not None and client.purchase(browser) is None
    page_text = http.get(f"/s/{browser}").text
    assert "browser&#39;s instruction" in page_text and "buyer" not in page_text


@pytest.mark.parametrize(("path", "params", "status", "message"), [
    ("/s/{sid}/item/B_NOPE", {}, 404, "expected the ASIN of a product in the catalogue, got 'B_NOPE'"),
    ("/s/{sid}/item/{asin}", {"o.{group}": "not-a-value"}, 400, "got 'not-a-value'"),
    ("/s/{sid}/item/{asin}", {"o.flavour": "x"}, 400, "expected an option group of"),
    ("/s/{sid}/item/{asin}", {"colour": "x"}, 400, "got 'colour'"),
    ("/s/{sid}/item/{asin}", {"page": "0"}, 404, "expected a page from 1 to 5, got 0"),
    ("/s/{sid}/item/{asin}", {"page": "two"}, 400, "expected page to be a whole number, got 'two'"),
    ("/s/{sid}/search", {}, 400, "expected a query parameter"),
    ("/s/{sid}/search", {"query": "navy", "page": "3"}, 404, "expected a page from 1 to 2, got 3"),
    ("/s/{sid}/search", {"query": "x" * 501}, 400, "at most 500 characters"),
    ("/s/{sid}/nowhere", {}, 404, "Not Found"),
])
def test_bad_requests_get_an_error_page_with_back_to_search(http, sid, path, params, status, message):
    product = product_with_options()
    group = next(iter(product.options))
    params = {name.format(group=group): value for name, value in params.items()}
    reader = page(http, path.format(sid=sid, asin=product.asin), status, **params)
    assert reader.kind == "error" and message in reader.texts[0], reader.texts
    assert "Instruction:" not in reader.texts
    if path != "/s/{sid}/nowhere":  # the router's own 404 does not name a session
        assert reader.link("Back to Search").href == f"/s/{sid}"


def test_a_repeated_parameter_is_refused(http, sid):
    product = product_with_options()
    group, values = next(iter(product.options.items()))
    pairs = [(f"o.{group}", values[0]), (f"o.{group}", values[1])]
    response = http.get(f"/s/{sid}/item/{product.asin}", params=pairs)
    assert response.status_code == 400 and "once, got it 2 times" in response.text


def test_an_unknown_session_is_404_without_back_to_search(http, client):
    for path in ("/s/nosuchsession", f"/s/nosuchsession/item/{BARE.asin}", "/s/nosuchsession/search?query=x"):
        reader = page(http, path, 404)
        assert reader.kind == SESSION_GONE_PAGE and reader.links == [] and "got 'nosuchsession'" in reader.texts[0]
        assert "/api/" not in reader.texts[0]  # the agent's page says nothing of the API
    assert http.post(f"/s/nosuchsession/buy/{BARE.asin}").status_code == 404
    with pytest.raises(ShopUnavailableError, match="HTTP 404"):
        client.session("nosuchsession")


def test_html_is_escaped_everywhere(http, client):
    evil = "<script>alert('x')</script> & <b>bold</b>"
    sid = client.create_session(evil)
    pages = [http.get(f"/s/{sid}").text, http.get(f"/s/{sid}/search", params={"query": evil}).text,
             http.get(f"/s/{sid}/item/{BARE.asin}", params={"query": evil}).text]
    for html in pages:
        assert "<script" not in html.lower() and "<b>" not in html
        assert "&lt;script&gt;" in html
    assert "No results for <script>alert('x')</script> & <b>bold</b>." in Reader(pages[1]).texts  # shown, as text
    assert Reader(pages[2]).forms[0].inputs[0] == ("query", " ".join(evil.split()))


def test_pages_carry_nothing_but_what_the_session_was_given(http, client):
    sid = client.create_session("find a mug")
    product = product_with_options()
    choice = {f"o.{group}": values[0] for group, values in product.options.items()}
    htmls = [http.get(f"/s/{sid}").text, http.get(f"/s/{sid}/search", params={"query": "mug"}).text,
             http.get(f"/s/{sid}/item/{product.asin}", params={"query": "mug", **choice}).text,
             *(http.get(f"/s/{sid}/item/{product.asin}/{s}").text for s in ("description", "features", "reviews")),
             http.get(f"/s/{sid}/item/B_NOPE").text]
    allowed_inputs = {"query", "page", *choice}
    for html in htmls:
        reader = Reader(html)
        assert {attrs["name"] for attrs in reader.inputs} <= allowed_inputs
        assert all(attrs["type"] in ("hidden", "text") for attrs in reader.inputs)
        lowered = html.lower()
        assert "<script" not in lowered and "<!--" not in lowered and "<table" not in lowered
        assert "price_upper" not in lowered and "goal" not in lowered and "attributes" not in lowered
    assert [attrs["name"] for attrs in Reader(htmls[0]).inputs] == ["query"]  # only the search page has the box


# -- JSON API ---------------------------------------------------------------------------------------
def test_api_health_session_product_and_delete(client, url):
    health = client.health()
    assert health == {"status": "ok", "products": len(CATALOGUE), "catalogue": "test-catalogue",
                      "sessions": health["sessions"]}
    sid = client.create_session("buy a mug")
    assert client.health()["sessions"] == health["sessions"] + 1
    assert client.start_url(sid) == f"{url}/s/{sid}"
    assert client.session(sid) == {"session": sid, "instruction": "buy a mug", "purchase": None}
    assert client.product(BARE.asin) == BARE
    assert client.product(CATALOGUE[3].asin) == CATALOGUE[3]
    with pytest.raises(KeyError, match="B_NOPE"):
        client.product("B_NOPE")
    client.delete_session(sid)
    client.delete_session(sid)  # already gone: fine
    with pytest.raises(ShopUnavailableError, match="live session"):
        client.session(sid)


@pytest.mark.parametrize("body", [b"{not json", b'{"instruction": 3}', b"[1]", b'{"task": "x"}'])
def test_api_refuses_a_malformed_session_request(http, body):
    response = http.post("/api/sessions", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"].startswith("expected")


def test_api_unknown_routes_answer_json(http):
    response = http.get("/api/nothing")
    assert response.status_code == 404 and "Not Found" in response.json()["error"]


def test_one_client_serves_many_threads(client, url):
    def episode(number: int) -> Purchase | None:
        sid = client.create_session(f"episode {number}")
        with httpx.Client(base_url=url, trust_env=False) as http:
            http.get(f"/s/{sid}/search", params={"query": NARROW_QUERY}).raise_for_status()
            if number % 2:
                http.post(f"/s/{sid}/buy/{BARE.asin}").raise_for_status()
        assert client.session(sid)["instruction"] == f"episode {number}"
        return client.purchase(sid)

    with ThreadPoolExecutor(max_workers=8) as pool:
        purchases = list(pool.map(episode, range(32)))
    assert [purchase is not None for purchase in purchases] == [bool(n % 2) for n in range(32)]


def test_the_least_recently_used_session_is_evicted_past_the_cap(index_dir):
    small = make_app(CATALOGUE, catalogue_name="small", index_dir=index_dir, max_sessions=2)
    with serving(small) as address, ShopClient(address) as client:
        first, second = client.create_session("1"), client.create_session("2")
        client.session(first)  # first is now the most recently used
        third = client.create_session("3")
        assert client.session(first)["instruction"] == "1" and client.session(third)["instruction"] == "3"
        with pytest.raises(ShopUnavailableError):
            client.session(second)
        assert client.health()["sessions"] == 2


def test_product_documents_hold_what_search_should_find():
    product = product_with_options()
    document = product_document(product)
    assert document.id == product.asin and document.title == product.title
    for part in (product.category_text, product.product_type, product.description, *product.features,
                 *(value for values in product.options.values() for value in values)):
        assert part in document.text


def test_item_pages_answer_in_about_a_millisecond(http, sid):
    product = product_with_options()
    path = f"/s/{sid}/item/{product.asin}"
    http.get(path)
    latencies = []
    for _ in range(50):
        started = time.perf_counter()
        http.get(path, params={"query": "navy", "page": 1})
        latencies.append(time.perf_counter() - started)
    assert statistics.median(latencies) < 0.02  # ~1 ms measured; generous for a loaded CI machine


# -- the command line and the launcher ----------------------------------------------------------------
def test_the_command_line_refuses_a_non_loopback_host(catalogue_file, capsys):
    assert main(["--catalogue", str(catalogue_file), "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "allow-remote" in capsys.readouterr().err


@pytest.fixture(scope="module")
def launched(catalogue_file: Path, index_dir: Path) -> Iterator[ShopServer]:
    """The real server in a child process, started by :class:`ShopServer`."""
    with ShopServer(str(catalogue_file), index_dir=index_dir) as server:
        yield server


def test_shop_server_serves_the_catalogue_in_a_child_process(launched):
    assert launched.alive() and re.fullmatch(r"http://127\.0\.0\.1:\d+", launched.url)
    with ShopClient(launched.url) as client, httpx.Client(trust_env=False) as http:
        assert client.health()["products"] == len(CATALOGUE)
        sid = client.create_session("a mug please")
        assert Reader(http.get(client.start_url(sid)).text).kind == "search"
        assert http.post(f"{launched.url}/s/{sid}/buy/{BARE.asin}").status_code == 200
        assert client.purchase(sid) == Purchase(asin=BARE.asin, options={}, price=BARE.price)
    assert launched.start() == launched.url  # a running server is left as it is


def test_stop_leaves_no_process_and_a_dead_shop_is_an_infrastructure_error(catalogue_file, index_dir):
    server = ShopServer(str(catalogue_file), index_dir=index_dir)
    url = server.start()
    pid = server.pid
    client = ShopClient(url, timeout_s=1.0, attempts=2, backoff_s=0.01)
    try:
        assert client.health()["status"] == "ok"
        server.stop()
        server.stop()  # idempotent
        assert not psutil.pid_exists(pid) and not server.alive()
        with pytest.raises(ShopUnavailableError, match="after 2 attempts") as error:
            client.create_session("anything")
        assert isinstance(error.value, InfrastructureError)
        with pytest.raises(ShopUnavailableError, match="not running"):
            server.url  # noqa: B018
    finally:
        client.close()
        server.stop()


def test_a_server_that_cannot_start_raises_with_its_stderr(tmp_path):
    server = ShopServer(str(tmp_path / "missing.jsonl"), startup_timeout_s=30)
    with pytest.raises(ShopUnavailableError, match=r"exited with status 2.*does not exist"):
        server.start()
    assert not server.alive()


def test_a_start_waits_while_the_server_reports_progress_and_not_when_it_is_silent():
    # A first store build at WebShop's scale takes minutes and writes a progress line every 20 s; the start's
    # timeout counts silence. Here the server's two streams are played by a thread.
    server = ShopServer("generated-v1", startup_timeout_s=0.5)
    lines: queue.Queue[str | None] = queue.Queue()

    def building() -> None:
        for _ in range(8):  # 1.6 s of progress lines, 0.2 s apart
            server._on_stderr("building the shop's product store ...: still running\n")
            time.sleep(0.2)
        lines.put("listening on http://127.0.0.1:9 (3 products)\n")

    feeder = threading.Thread(target=building)
    started = time.monotonic()
    feeder.start()
    assert server._wait_until_listening(None, lines) == "http://127.0.0.1:9"  # type: ignore[arg-type]
    assert time.monotonic() - started > 1.5
    feeder.join()
    started = time.monotonic()
    with pytest.raises(ShopUnavailableError, match=r"did not listen and wrote nothing for 0\.5 s"):
        server._wait_until_listening(None, queue.Queue())  # type: ignore[arg-type]
    assert 0.5 <= time.monotonic() - started < 3


def test_a_dead_url_is_an_infrastructure_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (ShopClient(f"http://127.0.0.1:{port}", timeout_s=1.0, attempts=2, backoff_s=0.01) as client,
          pytest.raises(ShopUnavailableError, match="after 2 attempts")):
        client.health()
    with pytest.raises(EnvConfigError, match="expected http://host:port"):
        ShopClient("127.0.0.1:8100")


def test_the_server_exits_on_sigint_and_when_its_starter_dies(catalogue_file, index_dir):
    starter = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from agentgym_envs.webshop.service import ShopServer; "
         "server = ShopServer(sys.argv[1], index_dir=sys.argv[2]); server.start(); "
         "print(server.pid, flush=True); time.sleep(120)", str(catalogue_file), str(index_dir)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        shop = psutil.Process(int(starter.stdout.readline()))
        starter.kill()  # no stop(): the shop must notice on its own
        starter.wait()
        shop.wait(timeout=10)  # psutil.TimeoutExpired if it lingers
    finally:
        starter.stdout.close()
    with ShopServer(str(catalogue_file), index_dir=index_dir) as server:
        process = psutil.Process(server.pid)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0


def test_a_session_request_sent_twice_makes_one_session(url, client):
    """A retried POST whose first attempt arrived finds its session (the client chose the id), not a second one."""
    before = client.health()["sessions"]
    sid = new_session_id()
    assert client.create_session("buy a mug", sid) == sid
    assert client.create_session("buy a mug", sid) == sid  # the repeat
    assert client.health()["sessions"] == before + 1
    with httpx.Client(base_url=url) as raw:
        clash = raw.post("/api/sessions", json={"instruction": "buy a lamp", "session": sid})
        assert clash.status_code == 409 and "live with another instruction" in clash.json()["error"]
        bad = raw.post("/api/sessions", json={"instruction": "x", "session": "../../etc"})
        assert bad.status_code == 400 and "16 to 64 characters" in bad.json()["error"]
    client.delete_session(sid)


def test_a_timed_out_session_request_is_retried_with_the_same_id():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(201, json={"session": bodies[-1]["session"], "url": "/s/x"})

    client = ShopClient("http://shop", transport=httpx.MockTransport(handler), attempts=3, backoff_s=0.0)
    sid = client.create_session("buy a mug")
    client.close()
    assert len(bodies) == 2 and bodies[0] == bodies[1] == {"instruction": "buy a mug", "session": sid}
