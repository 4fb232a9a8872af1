"""A shop page as an agent sees it: its text, and the elements it can click.

Both observation modes end here: the text mode parses the HTML the server sent, the browser mode
parses the DOM Chromium serialises (``page.content()``), so the same page gives the same observation
in both. The server's pages follow a few conventions that this parser relies on:

* ``<body data-page="...">`` names the kind of page (``search``, ``results``, ``item``, ``subpage``,
  ``done``, ``error``, and :data:`SESSION_GONE_PAGE` when the server no longer has the session);
* the elements the agent can click carry the class ``clickable``: a link (its ``href`` is followed) or
  a submit button inside a ``<form>`` (the form's inputs are submitted); an option value is a
  clickable with ``data-group`` and ``aria-pressed="true"`` when it is the chosen one;
* the search box is a visible ``<input name="query">`` (not ``type="hidden"``) inside a form.

Every non-empty text node is one segment, a clickable's whole text is one segment, and whitespace is
collapsed. :meth:`Page.text` joins segments with ``[SEP]`` as WebShop's ``text`` observation does;
:meth:`Page.text_rich` writes one segment a line and marks clickables ``[button] ... [button_]``
(``[clicked button] ... [clicked button_]`` for a chosen option), as WebShop's ``text_rich`` does.

Example:
    >>> page = parse_page('<body data-page="search"><p>Hi</p>'
    ...                   '<a class="clickable" href="/x">Back to Search</a></body>')
    >>> page.kind, page.text(), [c.label for c in page.clickables]
    ('search', 'Hi [SEP] Back to Search', ['Back to Search'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser

SEPARATOR = " [SEP] "
SESSION_GONE_PAGE = "session-gone"
"""``data-page`` of the page a request of an unknown session gets: the server lost the episode's session (it
restarted, or evicted it), which the agent cannot cause; the env reports it as an infrastructure error."""
SEARCH_FIELD = "query"
_INVISIBLE = frozenset({"head", "script", "style", "template", "title", "noscript"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})
_SPACE = re.compile(r"\s+")
_DOLLARS = re.compile(r"\$(\d+(?:\.\d+)?)")
_SHOWN_PRICE = re.compile(r"(?:Price: )?\$\d+(?:\.\d+)?(?: to \$\d+(?:\.\d+)?)?")
_RESULTS_NAVIGATION = frozenset({"Back to Search", "< Prev", "Next >"})


def collapse(text: str) -> str:
    """``text`` with runs of whitespace turned into one space and both ends trimmed."""
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class Form:
    """A form of the page: where it goes and what it sends.

    Attributes:
        method: ``"get"`` or ``"post"``.
        action: The URL the form submits to (as written in the page).
        fields: The form's named inputs with their values, in page order.
        is_search: True for the form with the search box (a visible input named ``query``; a hidden
            ``query`` field, as the buy form carries, does not make a search box).
    """

    method: str
    action: str
    fields: tuple[tuple[str, str], ...]
    is_search: bool = False


@dataclass(frozen=True)
class Clickable:
    """One element the agent can click.

    Attributes:
        index: Position among the page's clickables, in document order (what a browser clicks).
        label: The element's visible text, whitespace collapsed: what the agent names in ``click``.
        href: The link's target, for a link.
        form: The form a submit button submits, for a button.
        group: The option group, for an option value.
        selected: True for the option value currently chosen.
    """

    index: int
    label: str
    href: str | None = None
    form: Form | None = None
    group: str | None = None
    selected: bool = False


@dataclass(frozen=True)
class Page:
    """A parsed shop page.

    Attributes:
        kind: The page's ``data-page`` (``"search"``, ``"results"``, ``"item"``, ``"subpage"``,
            ``"done"``, ``"error"``), or ``""`` for a page without one.
        segments: The visible text, one entry per text node or clickable, each with the index of its
            clickable (or None).
        clickables: The elements the agent can click, in document order.
        search_form: The form with the search box, if the page has one.
    """

    kind: str
    segments: tuple[tuple[str, int | None], ...]
    clickables: tuple[Clickable, ...]
    search_form: Form | None

    def text(self) -> str:
        """WebShop's ``text`` observation: the segments joined with ``[SEP]``."""
        return SEPARATOR.join(text for text, _ in self.segments)

    def text_rich(self) -> str:
        """WebShop's ``text_rich`` observation: a segment a line, clickables marked as buttons."""
        return "\n".join(self._rich(text, index) for text, index in self.segments)

    def _rich(self, text: str, index: int | None) -> str:
        if index is None:
            return text
        if self.clickables[index].selected:
            return f"[clicked button] {text} [clicked button_]"
        return f"[button] {text} [button_]"

    def webshop_text(self) -> str:
        """The page as WebShop's own text environment writes it (``text_rich`` of ``web_agent_text_env.py``).

        Every segment ends with a newline; an option value is indented by two spaces, a chosen one is
        ``[clicked button]`` and adds a line ``You have clicked <value>.`` at the top of the page (the last
        chosen first, as WebShop prepends them); a product of a results page starts after a blank line;
        prices are written as WebShop writes its numbers (``$20.0``, ``$12.99 to $24.99``) and an item's
        rating is ``N.A.``, as WebShop's data has none. WebShop also marks the products a session has
        already opened as clicked; this page does not know them.

        Example:
            >>> page = parse_page('<body data-page="item"><a class="clickable option" data-group="size" '
            ...                   'aria-pressed="true" href="/a">large</a><p>Price: $20.00</p>'
            ...                   '<p>Rating: 4.5</p></body>')
            >>> print(page.webshop_text(), end="")
            You have clicked large.
              [clicked button] large [clicked button_]
            Price: $20.0
            Rating: N.A.
        """
        lines, clicked = [], []
        for text, index in self.segments:
            clickable = self.clickables[index] if index is not None else None
            if clickable is None:
                lines.append(self._webshop_plain(text))
            elif clickable.group is not None:
                mark = "clicked button" if clickable.selected else "button"
                lines.append(f"  [{mark}] {text} [{mark}_]")
                if clickable.selected:
                    clicked.append(text)
            elif self.kind == "results" and text not in _RESULTS_NAVIGATION:
                lines.append(f"\n[button] {text} [button_]")
            else:
                lines.append(f"[button] {text} [button_]")
        return "".join(f"You have clicked {text}.\n" for text in reversed(clicked)) + "".join(
            line + "\n" for line in lines)

    def _webshop_plain(self, text: str) -> str:
        if self.kind == "item" and text.startswith("Rating: "):
            return "Rating: N.A."
        if self.kind in ("item", "results") and _SHOWN_PRICE.fullmatch(text):
            return _DOLLARS.sub(lambda match: f"${float(match[1])}", text)
        return text

    def find(self, label: str) -> Clickable | None:
        """The first clickable whose label is ``label`` (case and whitespace ignored), or None."""
        wanted = collapse(label).casefold()
        return next((c for c in self.clickables if c.label.casefold() == wanted), None)

    @property
    def labels(self) -> list[str]:
        """The labels of the clickables, in page order."""
        return [clickable.label for clickable in self.clickables]


@lru_cache(maxsize=256)
def parse_page(html: str) -> Page:
    """Parse a page of the shop (see the module docstring for the conventions it relies on).

    Pages are immutable and the last few are cached: the text-mode driver (to follow a click) and the env (to
    render the observation) both read each page, and parse it once.
    """
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    return parser.page()


@dataclass
class _OpenForm:
    method: str
    action: str
    fields: list[tuple[str, str]]
    is_search: bool = False


@dataclass
class _OpenClickable:
    href: str | None
    group: str | None
    selected: bool
    form: _OpenForm | None
    depth: int
    text: list[str]
    label: str = ""


class _PageParser(HTMLParser):
    """Collects segments, clickables and forms in one pass over the HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.kind = ""
        self.segments: list[tuple[str, int | None]] = []
        self.clickables: list[_OpenClickable] = []
        self.forms: list[_OpenForm] = []
        self._stack: list[str] = []
        self._form: _OpenForm | None = None
        self._open: _OpenClickable | None = None
        self._hidden_depth: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "body":
            self.kind = attributes.get("data-page", "")
        if tag == "form":
            self._form = _OpenForm(attributes.get("method", "get").lower(), attributes.get("action", ""), [])
            self.forms.append(self._form)
        if tag == "input" and self._form is not None and attributes.get("name"):
            self._form.fields.append((attributes["name"], attributes.get("value", "")))
            if attributes["name"] == SEARCH_FIELD and attributes.get("type", "text").lower() != "hidden":
                self._form.is_search = True
        if tag in _VOID:
            return
        self._stack.append(tag)
        if self._hidden_depth is None and (tag in _INVISIBLE or "hidden" in attributes):
            self._hidden_depth = len(self._stack)
        if self._open is None and "clickable" in attributes.get("class", "").split():
            self._start_clickable(tag, attributes)

    def _start_clickable(self, tag: str, attributes: dict[str, str]) -> None:
        form = self._form if tag == "button" else None
        self._open = _OpenClickable(href=attributes.get("href") if tag == "a" else None,
                                    group=attributes.get("data-group"),
                                    selected=attributes.get("aria-pressed") == "true",
                                    form=form, depth=len(self._stack), text=[])

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or tag not in self._stack:
            return
        while self._stack:
            closed = self._stack.pop()
            self._closed(closed)
            if closed == tag:
                break

    def _closed(self, tag: str) -> None:
        depth = len(self._stack) + 1
        if self._hidden_depth == depth:
            self._hidden_depth = None
        if self._open is not None and self._open.depth == depth:
            clickable, self._open = self._open, None
            clickable.label = collapse("".join(clickable.text))
            self.segments.append((clickable.label, len(self.clickables)))
            self.clickables.append(clickable)
        if tag == "form":
            self._form = None

    def handle_data(self, data: str) -> None:
        if self._hidden_depth is not None:
            return
        if self._open is not None:
            self._open.text.append(data)
        elif text := collapse(data):
            self.segments.append((text, None))

    def page(self) -> Page:
        forms = {id(form): _frozen(form) for form in self.forms}
        clickables = tuple(
            Clickable(index=i, label=c.label, href=c.href,
                      form=forms[id(c.form)] if c.form is not None else None, group=c.group, selected=c.selected)
            for i, c in enumerate(self.clickables))
        search = next((form for form in forms.values() if form.is_search), None)
        return Page(kind=self.kind, segments=tuple(self.segments), clickables=clickables, search_form=search)


def _frozen(form: _OpenForm) -> Form:
    return Form(method=form.method, action=form.action, fields=tuple(form.fields), is_search=form.is_search)


__all__ = ["SEARCH_FIELD", "SEPARATOR", "SESSION_GONE_PAGE", "Clickable", "Form", "Page", "collapse", "parse_page"]
