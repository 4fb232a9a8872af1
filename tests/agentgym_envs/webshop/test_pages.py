"""The page parser: the text an agent sees and the elements it can click, from the shop's HTML conventions."""

from __future__ import annotations

from agentgym_envs.webshop.pages import parse_page

ITEM = """<!doctype html><html><head><title>WebShop</title><style>p {color: red}</style></head>
<body data-page="item">
  <div id="instruction"><h4>Instruction:</h4><p>i need a   navy henley,
     and price lower than 40.00 dollars</p></div>
  <a class="clickable" href="/s/abc">Back to Search</a>
  <a class="clickable" href="/s/abc/search?query=henley&amp;page=1">&lt; Prev</a>
  <div class="option-group"><h5>color</h5>
    <a class="clickable option" data-group="color" aria-pressed="true" href="?o.color=navy">navy</a>
    <a class="clickable option" data-group="color" aria-pressed="false" href="?o.color=red">red</a>
  </div>
  <h2>Kelvaro <b>Classic</b> Henley</h2>
  <p>Price: $35.99</p>
  <div hidden>not shown</div>
  <form method="post" action="/s/abc/buy/B1">
    <input type="hidden" name="o.color" value="navy"><input type="hidden" name="query" value="henley">
    <button class="clickable" type="submit">Buy <span>Now</span></button>
  </form>
</body></html>"""


def test_item_page_segments_and_clickables():
    page = parse_page(ITEM)
    assert page.kind == "item"
    assert page.labels == ["Back to Search", "< Prev", "navy", "red", "Buy Now"]
    # head, style and hidden text are not shown; whitespace is collapsed; nested tags split plain text only
    assert page.text() == ("Instruction: [SEP] i need a navy henley, and price lower than 40.00 dollars [SEP] "
                           "Back to Search [SEP] < Prev [SEP] color [SEP] navy [SEP] red [SEP] Kelvaro [SEP] "
                           "Classic [SEP] Henley [SEP] Price: $35.99 [SEP] Buy Now")


def test_text_rich_marks_buttons_and_the_chosen_option():
    lines = parse_page(ITEM).text_rich().splitlines()
    assert "[clicked button] navy [clicked button_]" in lines  # aria-pressed="true"
    assert "[button] red [button_]" in lines
    assert "[button] Buy Now [button_]" in lines
    assert "Price: $35.99" in lines


def test_links_and_forms_are_recorded():
    page = parse_page(ITEM)
    prev, buy = page.find("< prev"), page.find("  BUY now ")  # case and whitespace ignored
    assert prev is not None and prev.href == "/s/abc/search?query=henley&page=1" and prev.form is None
    assert buy is not None and buy.href is None
    assert buy.form is not None and buy.form.method == "post" and buy.form.action == "/s/abc/buy/B1"
    assert buy.form.fields == (("o.color", "navy"), ("query", "henley"))
    assert not buy.form.is_search  # a hidden query field is no search box
    navy = page.find("navy")
    assert navy is not None and navy.group == "color" and navy.selected
    assert page.find("Add to cart") is None
    assert page.search_form is None


def test_search_form_is_found():
    page = parse_page('<body data-page="search"><form id="search-form" method="get" action="/s/x/search">'
                      '<input id="search-input" type="text" name="query" aria-label="Search">'
                      '<button class="clickable" type="submit">Search</button></form></body>')
    assert page.search_form is not None and page.search_form.is_search
    assert page.search_form.action == "/s/x/search" and page.search_form.method == "get"
    assert page.labels == ["Search"] and page.clickables[0].form == page.search_form


def test_browser_serialisation_gives_the_same_page():
    """Chromium's page.content() adds a head, quotes attributes and re-escapes text: the page must not change."""
    served = '<body data-page="results"><p>Page 1 (Total results: 2)</p><a class=clickable href="/a?x=1&amp;y=2">B1</a>'
    serialised = ('<html><head></head><body data-page="results"><p>Page 1 (Total results: 2)</p>'
                  '<a class="clickable" href="/a?x=1&amp;y=2">B1</a></body></html>')
    assert parse_page(served) == parse_page(serialised)


def test_unclosed_tags_do_not_swallow_the_rest():
    page = parse_page('<body data-page="done"><p>Thank you<p>You bought: <b>X</body>')
    assert page.text() == "Thank you [SEP] You bought: [SEP] X"
