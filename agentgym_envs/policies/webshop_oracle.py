"""Scripted agents for WebShop-v0: a tools-only oracle and WebShop's random baseline.

:class:`WebShopOraclePolicy` reads the instruction (it is given nothing else: not the goal record,
not the target) and shops as a careful person would. An instruction in the form of the generated
goals (:func:`tasks.webshop.format_instruction`, with at least one ``group: value``) it reads field
by field: it searches for the
product type and the wanted attributes, keeps the results whose title names the type and whose
price is under the limit, and inspects them one by one: the item page (are the wanted option values
offered?) and its Features page (are the wanted attributes listed?). It buys the first that passes,
with the wanted options chosen. A rejected candidate costs one turn (back twice, open the next, read
its features, as four calls of one action).

Any other instruction (WebShop's human ones: "i am looking for a sulfate free shampoo, 16 fl oz ...")
it reads as free text (:class:`FreeTextWish`): it searches the instruction (without its price
clause), opens the result under the price limit whose title shares the most words with the
instruction (the next results pages when none is under the limit), and on its item page chooses, in
each option group, the offered value the instruction names (the longest one, compared by
:func:`rewards.webshop.option_key`), then buys. It declines, with an answer that says why, when the
search finds nothing under the limit in :data:`MAX_RESULT_PAGES` pages. It never raises on an
instruction.

It reads the ``text_rich`` observation (the default); each action carries a one-line ``<think>``, so
its episodes double as demonstrations.

:class:`WebShopRandomPolicy` is WebShop's random baseline: on the search page it searches a few words
of the instruction, elsewhere it clicks one of the listed elements at random.

Example:
    >>> parse_instruction("i need a henley that is slim fit and machine wash, with color: navy, "
    ...                   "and size: large, and price lower than 46.00 dollars")
    Wish(product_type='henley', attributes=('slim fit', 'machine wash'), options=(('color', 'navy'), ('size', 'large')), price_upper=46.0)
"""  # noqa: E501

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym_envs.policies.base import answer_action, tool_call_action
from rewards.webshop import option_key, type_words
from tasks import Task

_INSTRUCTION = re.compile(
    r"^i need (?:an? )?(?P<type>.+?)(?: that is (?P<attributes>.+?))?(?:, with (?P<options>.+?))?"
    r", and price lower than (?P<price>[0-9.]+) dollars$")
_BUTTON = re.compile(r"^\[(?:clicked )?button\] (?P<label>.*) \[(?:clicked )?button_\]$")
_PRICE = re.compile(r"^\$(?P<price>[0-9]+(?:\.[0-9]+)?)(?: to \$[0-9]+(?:\.[0-9]+)?)?$")  # a range: its lowest
_ACTIONS = re.compile(r"click\(element\), element one of: (?P<labels>\[.*\])$", re.MULTILINE)
_PRICE_CLAUSE = re.compile(r",?\s*and price lower than (?P<price>[0-9]+(?:\.[0-9]+)?) dollars\s*$")
MAX_RESULT_PAGES = 5


@dataclass(frozen=True)
class Wish:
    """What an instruction asks for."""

    product_type: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_upper: float


def parse_instruction(instruction: str) -> Wish:
    """Read a generated instruction ("i need a ... that is ..., with group: value, and price lower than ...").

    Raises:
        ValueError: The instruction is not in that form.
    """
    match = _INSTRUCTION.match(instruction.strip())
    if match is None:
        raise ValueError(f"expected an instruction in the generated goals' form, got {instruction!r}")
    attributes = tuple(match["attributes"].split(" and ")) if match["attributes"] else ()
    options = tuple(tuple(part.split(": ", 1)) for part in match["options"].split(", and ")) if match["options"] else ()
    return Wish(match["type"], attributes, options, float(match["price"]))  # type: ignore[arg-type]


@dataclass(frozen=True)
class FreeTextWish:
    """An instruction in free text (WebShop's human goals): what to search, and the price limit if it names one.

    Attributes:
        text: The instruction without its price clause.
        price_upper: The limit of ``", and price lower than X dollars"``; infinite when it names none.
    """

    text: str
    price_upper: float


def read_free_text(instruction: str) -> FreeTextWish:
    """Split a free-text instruction into its text and its price limit.

    Example:
        >>> read_free_text("I want a velvet sofa, and price lower than 50.00 dollars")
        FreeTextWish(text='I want a velvet sofa', price_upper=50.0)
    """
    match = _PRICE_CLAUSE.search(instruction)
    if match is None:
        return FreeTextWish(instruction.strip(), float("inf"))
    return FreeTextWish(instruction[: match.start()].strip(), float(match["price"]))


def named_options(instruction: str, offered: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """In each option group, the offered value an instruction names (the longest, by :func:`option_key`).

    Example:
        >>> named_options("a hoodie in heather grey, size x-large", {"color": ["navy", "heather grey"],
        ...               "size": ["large", "x-large"]})
        {'color': 'heather grey', 'size': 'x-large'}
    """
    said = f" {option_key(instruction)} "
    chosen = {}
    for group, values in offered.items():
        named = [value for value in values if option_key(value) and f" {option_key(value)} " in said]
        if named:
            chosen[group] = max(named, key=lambda value: len(option_key(value)))
    return chosen


@dataclass(frozen=True)
class Result:
    """One product of a results page."""

    label: str
    title: str
    price: float


def page_lines(observation: str) -> list[str]:
    """The lines of the last page in an observation (the page after the action's last tool call)."""
    last = observation.rsplit("result (ok)]\n", 1)[-1]
    return last.split("\n\nAvailable actions:", 1)[0].splitlines()


def parse_results(lines: Sequence[str]) -> list[Result]:
    """The products of a results page in ``text_rich``: a button, then the title, then ``$price`` (or a range,
    ``$low to $high``, read as its lowest price)."""
    results = []
    for i in range(len(lines) - 2):
        button, price = _BUTTON.match(lines[i]), _PRICE.match(lines[i + 2])
        if button and price and not _BUTTON.match(lines[i + 1]):
            results.append(Result(button["label"], lines[i + 1], float(price["price"])))
    return results


def offered_options(lines: Sequence[str]) -> dict[str, list[str]]:
    """Option group -> values offered, from an item page in ``text_rich`` (a group name, then its buttons)."""
    offered: dict[str, list[str]] = {}
    group = None
    for line in lines:
        button = _BUTTON.match(line)
        if button is None:
            group = line.strip().casefold()
        elif group is not None:
            offered.setdefault(group, []).append(button["label"].casefold())
    return offered


@dataclass
class _Shopping:
    wish: Wish
    queue: list[Result] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    pages: int = 0
    has_next: bool = False
    candidate: Result | None = None


@dataclass
class _FreeTextShopping:
    wish: FreeTextWish
    pages: int = 0
    opened: Result | None = None


class WebShopOraclePolicy:
    """Searches, inspects candidates on their item and Features pages, buys the first that fits (tools only).

    Instructions in free text (WebShop's human goals) are searched as they are written; see the module.
    """

    name = "oracle"

    def __init__(self) -> None:
        self._state: _Shopping | None = None
        self._free: _FreeTextShopping | None = None
        self._searched = False

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Read the instruction (``task.prompt``); nothing else of the task is used."""
        try:
            wish = parse_instruction(task.prompt)
        except ValueError:
            wish = None
        if wish is not None and wish.options:  # the generated form: every generated goal names an option
            self._state, self._free = _Shopping(wish), None
        else:
            self._state, self._free = None, _FreeTextShopping(read_free_text(task.prompt))
        self._searched = False

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """The next action: search, inspect the next candidate, or buy."""
        if self._free is not None:
            return self._act_on_free_text(self._free, observation)
        state = self._state
        assert state is not None, "begin() first"
        if not self._searched:
            self._searched = True
            query = " ".join((state.wish.product_type, *state.wish.attributes))
            return _action(f"Search for {query}.", [("search", {"query": query})])
        if state.candidate is None:
            return self._from_results(state, page_lines(observation), back=[])
        return self._judge(state, observation)

    def _from_results(self, state: _Shopping, lines: Sequence[str], back: list[tuple[str, dict[str, Any]]]) -> str:
        """On a results page (or about to return to one): queue its fitting products, open the next one."""
        if not back:
            state.pages += 1
            state.has_next = "[button] Next > [button_]" in lines
            state.queue += [r for r in parse_results(lines) if self._fits(state.wish, r) and r.label not in state.seen]
        if state.queue:
            state.candidate = state.queue.pop(0)
            state.seen.add(state.candidate.label)
            calls = [*back, ("click", {"element": state.candidate.label}), ("click", {"element": "Features"})]
            return _action(f"Inspect {state.candidate.label}: {state.candidate.title}.", calls)
        state.candidate = None
        if state.has_next and state.pages < MAX_RESULT_PAGES:
            return _action("No fitting product here: next page of results.", [*back, ("click", {"element": "Next >"})])
        return answer_action("no product fits")

    def _judge(self, state: _Shopping, observation: str) -> str:
        """The candidate's item and Features pages are in the observation: buy it, or go back to the results."""
        item, features = _pages(observation)
        offered = offered_options(item)
        listed = {line.strip().casefold() for line in features}
        has_options = all(value.casefold() in offered.get(group.casefold(), []) for group, value in state.wish.options)
        has_attributes = all(attribute.casefold() in listed for attribute in state.wish.attributes)
        if has_options and has_attributes:
            calls = [("click", {"element": "< Prev"})]
            calls += [("click", {"element": value}) for _, value in state.wish.options]
            return _action("It fits: choose the options and buy.", [*calls, ("click", {"element": "Buy Now"})])
        back = [("click", {"element": "< Prev"}), ("click", {"element": "< Prev"})]
        return self._from_results(state, [], back=back)

    @staticmethod
    def _fits(wish: Wish, result: Result) -> bool:
        return result.price <= wish.price_upper and wish.product_type.casefold() in result.title.casefold()

    def _act_on_free_text(self, state: _FreeTextShopping, observation: str) -> str:
        """Search the instruction, open the best result under the limit, choose the options it names, buy."""
        if not self._searched:
            self._searched = True
            return _action(f"Search for the instruction: {state.wish.text}.", [("search", {"query": state.wish.text})])
        lines = page_lines(observation)
        if state.opened is not None:
            options = named_options(state.wish.text, offered_options(lines))
            calls = [("click", {"element": value}) for value in options.values()]
            named = ", ".join(options.values()) or "no option"
            return _action(f"Choose {named} and buy.", [*calls, ("click", {"element": "Buy Now"})])
        state.pages += 1
        wanted = type_words(state.wish.text)
        fitting = [r for r in parse_results(lines) if r.price <= state.wish.price_upper]
        if fitting:
            state.opened = max(fitting, key=lambda r: len(wanted & type_words(r.title)))  # the first of the best
            return _action(f"Open {state.opened.label}: {state.opened.title}.",
                           [("click", {"element": state.opened.label})])
        if "[button] Next > [button_]" in lines and state.pages < MAX_RESULT_PAGES:
            return _action("Nothing under the price limit here: next page of results.",
                           [("click", {"element": "Next >"})])
        return answer_action(f"I decline: no result of {state.pages} page(s) for {state.wish.text!r} is under "
                             f"{state.wish.price_upper:.2f} dollars.")


def _pages(observation: str) -> tuple[list[str], list[str]]:
    """The item page and the Features page of an inspection turn (its last two tool results)."""
    blocks = [block.split("\n\nAvailable actions:", 1)[0].splitlines()
              for block in observation.split("result (ok)]\n")[1:]]
    return (blocks[-2], blocks[-1]) if len(blocks) >= 2 else ([], blocks[-1] if blocks else [])


def _action(thought: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return f"<think>{thought}</think>\n" + "\n".join(tool_call_action(name, **arguments) for name, arguments in calls)


class WebShopRandomPolicy:
    """WebShop's random baseline: search some instruction words, then click listed elements at random.

    Args:
        seed: Seed of the policy's own generator.
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self._words: list[str] = []

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Remember the instruction's words (for searches)."""
        self._words = re.findall(r"[a-z]+", task.prompt.casefold()) or ["item"]

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """Search on a page with a search box, else click a random listed element."""
        actions = observation.rsplit("Available actions:", 1)[-1]
        if "- search(query)" in actions:
            words = self.rng.choice(self._words, size=min(3, len(self._words)), replace=False)
            return tool_call_action("search", query=" ".join(str(word) for word in words))
        match = _ACTIONS.search(actions)
        labels = json.loads(match["labels"]) if match else []
        if not labels:
            return answer_action("done")
        return tool_call_action("click", element=str(labels[int(self.rng.integers(len(labels)))]))


__all__ = ["FreeTextWish", "WebShopOraclePolicy", "WebShopRandomPolicy", "Wish", "named_options", "parse_instruction",
           "read_free_text"]
