"""Load the original WebShop benchmark's data files (Yao et al. 2022) as our products and tasks.

WebShop (github.com/princeton-nlp/WebShop, ``setup.sh``) ships its data as JSON files:

* ``items_shuffle*.json``: a list of scraped Amazon products with ``asin``, ``name``,
  ``full_description``, ``small_description`` (bullet points), ``pricing`` (text such as
  ``"$12.99"`` or ``"$12.99 - $24.99"``), ``product_category`` (``"A › B › C"``), ``query`` (the
  search term it was scraped under), ``customization_options`` (``{group: [{"value", "image"}]}``)
  and more.
* ``items_ins_v2*.json``: asin -> ``{"attributes", "instruction", "instruction_attributes", ...}``;
  ``attributes`` are the product's own, the rest make one synthetic goal per option combination.
* ``items_human_ins.json``: asin -> a list of crowd-written goals, each with ``instruction``,
  ``instruction_attributes`` and ``instruction_options`` (a list of option values).

:func:`load_original_products` and :func:`load_original_goals` follow WebShop's own loaders
(``web_agent_site/engine/engine.py``: ``load_products``, ``generate_product_prices``;
``web_agent_site/engine/goal.py``: ``get_human_goals``, ``get_synthetic_goals``;
``web_agent_site/envs/web_agent_text_env.py``: the goal shuffle) so that the same files give the same
catalogue and the same goals in the same order. Where we differ, and why:

* Random draws (a price within a range, a goal's price limit) come from ``numpy.random.default_rng(seed)``,
  not Python's unseeded global generator, so they are reproducible but not WebShop's own numbers.
* Prices drawn from a range are rounded to cents, as a shop shows them.
* A product with no ``attributes`` in the attributes file gets none (WebShop gives it ``"DUMMY_ATTR"``).
* WebShop has no product type: its type reward compares the nouns of the two product names. Here a
  product's :attr:`~tasks.webshop.records.Product.product_type` is its name, so the grader's type words
  are the names' words, and ``matching_products`` counts products of the goal's very name.
* An item WebShop's loader would crash on (a price that is not dollars, options that are not
  ``{group: [{"value": ...}]}``, a missing ``name`` or ``query``) is skipped and counted; a file that is
  not WebShop's format raises :class:`~tasks.webshop.records.RecordFormatError`.

Example::

    products = load_original_products("data/items_shuffle.json", "data/items_ins_v2.json")
    test = load_original_goals(products, instructions_path="data/items_human_ins.json", human=True, limit=500)

or, to write files the shop's server and the environment load, in memory that does not grow with the
items file (:func:`convert_original`: the files are parsed as they are read, with ijson, and only the
products the goals need are kept)::

    python -m tasks.webshop.original --items data/items_shuffle.json --attributes data/items_ins_v2.json \\
        --instructions data/items_human_ins.json --human --out webshop-original
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import itertools
import json
import logging
import math
import random
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import numpy as np

from tasks.records import Task
from tasks.webshop.goals import DIFFICULTY_LEVELS, ENV, FAMILY, product_meets_goal
from tasks.webshop.records import Goal, Product, RecordFormatError, Review, parse_category

logger = logging.getLogger(__name__)

CATALOGUE_NAME = "original"
"""``Task.metadata["catalogue"]`` of the tasks made here."""

DEFAULT_PRICE = 100.0
"""The price of a product whose ``pricing`` is missing or empty, as in WebShop."""

PRICE_STEPS = tuple(10.0 * step for step in range(1, 100))
"""The price limits a goal may get: 10, 20, ..., 990 dollars (WebShop's ``PRICE_RANGE``)."""

NO_PRICE_LIMIT = 1_000_000.0
"""A goal's price limit when fewer than two steps lie above its product's price; its instruction names none."""

SHUFFLE_SEED = 233
"""The seed of Python's ``random`` that WebShop's server shuffles its goals with."""

SPLIT_ENDS = (("test", 500), ("eval", 1500))
"""Goal index bounds of WebShop's splits (``baseline_models/env.py``); later goals are ``"train"``."""

_MAX_ASIN_LENGTH = 10
_NOT_DIGITS = re.compile(r"[^\d.]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SHOWN_SKIPS = 3
_HEAD_BYTES = 64 * 1024


def load_original_products(
    items_path: str | Path,
    attributes_path: str | Path | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
) -> list[Product]:
    """Load WebShop's ``items_shuffle*.json`` (and its ``items_ins_v2*.json``) as catalogue products.

    The list of :func:`iter_original_products`; for WebShop's whole catalogue (1.18M items) use that
    iterator or ``python -m tasks.webshop.original``, which never hold it in memory.

    Example::

        products = load_original_products("data/items_shuffle_1000.json", "data/items_ins_v2_1000.json")
    """
    return list(iter_original_products(items_path, attributes_path, limit=limit, seed=seed))


def iter_original_products(
    items_path: str | Path,
    attributes_path: str | Path | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
) -> Iterator[Product]:
    """Stream WebShop's ``items_shuffle*.json`` (and its ``items_ins_v2*.json``) as catalogue products.

    The items file is parsed item by item (ijson), so memory does not grow with it; the attributes
    file is read first, keeping only each asin's attributes. Each item is cleaned as WebShop's
    ``load_products`` does:

    * items whose asin is ``"nan"`` or longer than 10 characters, and repeated asins, are skipped;
    * ``pricing`` is split at ``$`` and each piece stripped to digits and dots; one value is the price,
      a range (two or more values) gives a price drawn uniformly between the first two (rounded to
      cents), and the two are kept as the product's ``price_range`` (the shop shows the range, as
      WebShop does); a missing or empty ``pricing`` gives :data:`DEFAULT_PRICE` (the product is kept);
    * option groups are lower-cased and each value stripped, lower-cased and ``/`` written ``" | "``;
      a group whose values are ``null`` is left out;
    * ``query`` is lower-cased and stripped; ``small_description`` is the bullet points (a string is
      one bullet).

    Beyond WebShop's fields: ``average_rating`` (or ``Rating``) becomes the rating and ``Reviews`` (or
    ``reviews``, each with ``title``, ``score`` or ``stars``, ``review`` or ``body``) the reviews. A
    rating is the first number in the value (``"4.5 out of 5 stars"`` -> 4.5), clamped to 1..5; 0, or
    no number, means no rating, and a review without a rating is left out.

    An item that cannot be read is skipped; the skips are logged as one warning with their count once
    the file is read.

    Args:
        items_path: The ``items_shuffle*.json`` file.
        attributes_path: The ``items_ins_v2*.json`` file; its ``attributes`` become the products'
            attributes. Without it products have none.
        limit: Read only the first ``limit`` items of the file (WebShop's ``num_products``).
        seed: Seed of the numpy generator that prices within a range are drawn from.

    Yields:
        The products, in file order.

    Raises:
        RecordFormatError: A file is not in WebShop's format (not JSON, not a list of products, not an
            asin -> attributes object), or no item at all could be read (raised when the file ends).
    """
    attributes = {} if attributes_path is None else read_original_attributes(attributes_path)
    rng = np.random.default_rng(seed)
    skipped = _Skips()
    seen: set[str] = set()
    count = 0
    for index, item in enumerate(_stream_items(items_path, limit)):
        count = index + 1
        try:
            product = _item_product(item, seen, attributes, rng)
        except RecordFormatError as error:
            skipped.add(f"item {index}: {error}")
            continue
        seen.add(product.asin)
        yield product
    if not seen:
        first = f"; first: {skipped.shown[0]}" if skipped.shown else ""
        raise RecordFormatError(f"{items_path}: expected WebShop products (objects with asin, name, query, pricing, "
                                f"...), got none readable among {count} items{first}")
    skipped.log(count, "WebShop items")


def read_original_attributes(path: str | Path) -> dict[str, tuple[str, ...]]:
    """Each product's own attributes from WebShop's ``items_ins_v2*.json`` (asin -> its ``attributes``), streamed.

    Only the attributes are kept (each text once in memory), not the instructions.

    Raises:
        RecordFormatError: The file is not an ``items_ins_v2*.json`` (not JSON, not an object, an entry
            that is not an object or whose ``attributes`` is not a list of strings).
    """
    texts: dict[str, str] = {}
    attributes = {}
    for asin, entry in _stream_instructions(path, human=False):
        try:
            own = _own_attributes(entry)
        except RecordFormatError as error:
            raise RecordFormatError(f"{path}: asin {asin!r}: {error}") from None
        attributes[asin] = tuple(texts.setdefault(text, text) for text in own)
    return attributes


def _item_product(item: Any, seen: set[str], attributes: Mapping[str, tuple[str, ...]],
                  rng: np.random.Generator) -> Product:
    if not isinstance(item, Mapping):
        raise RecordFormatError(f"expected a product object, got {type(item).__name__}")
    asin = item.get("asin")
    if not isinstance(asin, str):
        raise RecordFormatError(f"expected 'asin' to be a string, got {asin!r}")
    if asin == "nan" or len(asin) > _MAX_ASIN_LENGTH:
        raise RecordFormatError(f"asin {asin!r}: WebShop skips 'nan' and asins over {_MAX_ASIN_LENGTH} characters")
    if asin in seen:
        raise RecordFormatError(f"asin {asin!r} repeats an earlier item (WebShop keeps the first)")
    title = _text(item, "name", required=True)
    price, price_range = _price(item.get("pricing"), rng)
    return Product(
        asin=asin,
        title=title,
        category=parse_category(_text(item, "product_category", required=True)),
        product_type=title,
        query=_text(item, "query", required=True).lower().strip(),
        price=price,
        price_range=price_range,
        rating=_rating(item.get("average_rating", item.get("Rating"))),
        attributes=attributes.get(asin, ()),
        options=_options(item.get("customization_options")),
        description=_text(item, "full_description"),
        features=_features(item.get("small_description")),
        reviews=_reviews(item.get("Reviews", item.get("reviews"))),
    )


def _text(item: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    if required and key not in item:
        raise RecordFormatError(f"expected key {key!r} in the product")
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordFormatError(f"expected {key!r} to be a string, got {value!r}")
    return value


def _price(pricing: Any, rng: np.random.Generator) -> tuple[float, tuple[float, float] | None]:
    """The price a buyer pays and, for a range, the range's lowest and highest price."""
    if not pricing:
        return DEFAULT_PRICE, None
    if not isinstance(pricing, str):
        raise RecordFormatError(f"expected 'pricing' to be text such as '$12.99 - $24.99', got {pricing!r}")
    values = [_dollars(piece, pricing) for piece in pricing.split("$")[1:]]
    if not values:
        raise RecordFormatError(f"expected 'pricing' in dollars such as '$12.99', got {pricing!r}")
    if len(values) == 1:
        return values[0], None
    price = round(float(rng.uniform(values[0], values[1])), 2)
    return price, (min(values[:2]), max(values[:2]))


def _dollars(piece: str, pricing: str) -> float:
    try:
        return float(_NOT_DIGITS.sub("", piece))
    except ValueError:
        raise RecordFormatError(f"expected 'pricing' in dollars such as '$12.99', got {pricing!r}") from None


def _rating(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    match = _NUMBER.search(str(value))
    if match is None or float(match.group()) <= 0:
        return None
    return min(max(float(match.group()), 1.0), 5.0)


def _own_attributes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    attributes = entry.get("attributes", []) if isinstance(entry, Mapping) else None
    if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
        raise RecordFormatError(f"expected the attributes file's 'attributes' to be a list of strings, got {entry!r}")
    return tuple(attributes)


def _options(raw: Any) -> dict[str, tuple[str, ...]]:
    if not raw:
        return {}
    if not isinstance(raw, Mapping):
        raise RecordFormatError(f"expected 'customization_options' to be {{group: [{{'value': ...}}]}}, got {raw!r}")
    options: dict[str, tuple[str, ...]] = {}
    for group, contents in raw.items():
        if contents is None:
            continue
        if not isinstance(contents, list) or not all(_is_option(content) for content in contents):
            raise RecordFormatError(f"expected option group {group!r} to be a list of {{'value': ...}}, "
                                    f"got {contents!r}")
        options[str(group).lower()] = tuple(normalize_option(content["value"]) for content in contents)
    return options


def _is_option(content: Any) -> bool:
    return isinstance(content, Mapping) and isinstance(content.get("value"), str)


def normalize_option(value: str) -> str:
    """Write an option value as WebShop's loader does: stripped, lower-cased, ``/`` as ``" | "``.

    Example:
        >>> normalize_option(" Navy/White ")
        'navy | white'
    """
    return value.strip().replace("/", " | ").lower()


def _features(raw: Any) -> tuple[str, ...]:
    bullets = [raw] if isinstance(raw, str) else raw or []
    if not isinstance(bullets, list) or not all(isinstance(b, str) or b is None for b in bullets):
        raise RecordFormatError(f"expected 'small_description' to be text or a list of texts, got {raw!r}")
    return tuple(bullet for bullet in bullets if bullet and bullet.strip())


def _reviews(raw: Any) -> tuple[Review, ...]:
    if not isinstance(raw, list):
        return ()
    reviews = []
    for review in raw:
        if not isinstance(review, Mapping):
            continue
        rating = _rating(review.get("score", review.get("stars")))
        title, text = review.get("title") or "", review.get("review", review.get("body")) or ""
        if rating is not None and isinstance(title, str) and isinstance(text, str):
            reviews.append(Review(rating=rating, title=title, text=text))
    return tuple(reviews)


@dataclass(frozen=True)
class _Instruction:
    """One instruction of an instructions file and the goals it makes, in WebShop's order.

    A human instruction makes one goal with its own options; a synthetic one (``options`` None)
    makes one goal per combination of its product's option values.
    """

    product: Product
    text: str
    attributes: tuple[str, ...]
    price_upper: float
    options: Mapping[str, str] | None = None
    unmatched: tuple[str, ...] = ()
    written_options: tuple[str, ...] | None = None

    @property
    def count(self) -> int:
        if self.options is not None:
            return 1
        return math.prod(len(values) for values in self.product.options.values())


def load_original_goals(
    products: Sequence[Product],
    *,
    instructions_path: str | Path,
    human: bool = False,
    seed: int = 0,
    limit: int | None = None,
) -> list[Task]:
    """Make WebShop's goals for a catalogue loaded by :func:`load_original_products`, as tasks.

    As WebShop's ``get_synthetic_goals`` / ``get_human_goals``:

    * synthetic (``items_ins_v2*.json``): each product with an ``instruction`` makes one goal per
      combination of its option values (groups in name order), worded
      ``"<instruction> with <group>: <value>, and ..."``;
    * human (``items_human_ins.json``): each instruction of a product makes one goal, worded as
      written without its end dots; instructions without ``instruction_attributes`` are skipped, as in
      WebShop. Each wanted option value is given the product's group that offers it; a value the
      product does not offer is kept under a group ``"unmatched <n>"`` (the grader ignores group
      names) and listed in ``metadata["unmatched_options"]``;
    * the price limit: of the first four of 10, 20, ..., 990 dollars above the product's price, two
      are drawn and the larger is the limit, appended as ``", and price lower than X.00 dollars"``;
      with fewer than two such steps the limit is :data:`NO_PRICE_LIMIT` and not written. One draw per
      synthetic product (shared by its combinations), one per human instruction;
    * the goals are put in the order WebShop's server shuffles them into (``random.Random(233)``), so
      goal ``i`` here is WebShop's goal ``i`` and ``limit=500`` gives its human test split.

    Args:
        products: The catalogue, in the order of the items file.
        instructions_path: ``items_ins_v2*.json`` (synthetic) or ``items_human_ins.json`` (human).
        human: Whether the file holds human instructions.
        seed: Seed of the numpy generator the price limits are drawn from.
        limit: Keep the first ``limit`` goals (after the shuffle); all when None.

    Returns:
        Tasks with id ``"webshop-original/<human|synthetic>/<index>"``, env ``"WebShop"``, family
        ``"shop"``, the instruction as prompt and the product's asin as answer. ``difficulty`` is the
        highest level of :data:`~tasks.webshop.goals.DIFFICULTY_LEVELS` asking for no more attributes
        plus options than the goal (1 to 3). ``metadata`` holds ``goal`` (the
        :class:`~tasks.webshop.records.Goal` as a dict), ``matching_products`` and ``matching_asins``
        (products that meet it, :func:`~tasks.webshop.goals.product_meets_goal`), ``catalogue``
        (``"original"``), ``source`` (``"human"`` or ``"synthetic"``), ``original_split`` (WebShop's
        split by goal index: ``"test"`` below 500, ``"eval"`` below 1500, else ``"train"``; the published
        split only for the whole ``items_shuffle.json``), ``weight`` (WebShop's sampling weight),
        ``unmatched_options``, ``written_options`` (a human goal's option values as its file writes
        them, which WebShop's own grader compares; None for a synthetic goal) and ``seed``.

    Raises:
        RecordFormatError: The file is not an instructions file of the kind ``human`` says.

    Example::

        test = load_original_goals(products, instructions_path="data/items_human_ins.json", human=True, limit=500)
    """
    source = "human" if human else "synthetic"
    entries = _read_instructions(instructions_path, human=human, asins={product.asin for product in products})
    rng = np.random.default_rng(seed)
    instructions, skipped = (_human_instructions if human else _synthetic_instructions)(products, entries, rng)
    _log_skipped(skipped, len(instructions) + len(skipped), f"{source} instructions")
    instructions = [instruction for instruction in instructions if instruction.count]  # an empty option group
    weights = _weights(instructions, human)
    starts = list(itertools.accumulate((ins.count for ins in instructions), initial=0))
    order = list(range(starts[-1]))
    random.Random(SHUFFLE_SEED).shuffle(order)
    by_type = _by_type(products)
    tasks = []
    for index, position in enumerate(order[:limit]):
        number = bisect.bisect_right(starts, position) - 1
        instruction = instructions[number]
        goal = _goal(instruction, position - starts[number])
        tasks.append(_task(goal, instruction, by_type, source, index, weights[number], seed))
    return tasks


def _read_instructions(path: str | Path, *, human: bool, asins: Collection[str]) -> dict[str, Any]:
    """The entries of an instructions file for ``asins`` (the file streamed; other entries are not kept)."""
    return {asin: entry for asin, entry in _stream_instructions(path, human=human) if asin in asins}


def _stream_instructions(path: str | Path, *, human: bool) -> Iterator[tuple[str, Any]]:
    """(asin, entry) of an instructions file, streamed; an entry of the other kind of file is refused."""
    kind = "items_human_ins.json: asin -> [{instruction, ...}]" if human else "items_ins_v2*.json: asin -> {...}"
    for asin, entry in _stream_json(path, "{", f"a JSON object of WebShop instructions ({kind})"):
        if isinstance(entry, list) != human:
            other = "items_ins_v2*.json" if human else "items_human_ins.json"
            raise RecordFormatError(f"{path}: expected {kind}, got {type(entry).__name__} for asin {asin!r} "
                                    f"(is it {other}?)")
        yield asin, entry


def instruction_asins(path: str | Path, *, human: bool) -> set[str]:
    """The asins an instructions file makes goals for (streamed): a human file's asins with instructions, a
    synthetic file's asins with an ``instruction``."""
    if human:
        return {asin for asin, entry in _stream_instructions(path, human=True) if entry}
    return {asin for asin, entry in _stream_instructions(path, human=False)
            if isinstance(entry, Mapping) and entry.get("instruction") is not None}


def _synthetic_instructions(
    products: Sequence[Product], entries: Mapping[str, Any], rng: np.random.Generator
) -> tuple[list[_Instruction], list[str]]:
    instructions, skipped = [], []
    for product in products:
        entry = entries.get(product.asin)
        if not isinstance(entry, Mapping) or entry.get("instruction") is None:
            continue
        try:
            text = _string(entry, "instruction")
            attributes = _wanted_attributes(entry)
        except RecordFormatError as error:
            skipped.append(f"{product.asin}: {error}")
            continue
        instructions.append(_Instruction(product, text, attributes, _price_upper(product.price, rng)))
    return instructions, skipped


def _human_instructions(
    products: Sequence[Product], entries: Mapping[str, Any], rng: np.random.Generator
) -> tuple[list[_Instruction], list[str]]:
    instructions, skipped = [], []
    for product in products:
        for number, entry in enumerate(entries.get(product.asin, [])):
            try:
                instructions.append(_human_instruction(product, entry, rng))
            except RecordFormatError as error:
                skipped.append(f"{product.asin}#{number}: {error}")
    return instructions, skipped


def _human_instruction(product: Product, entry: Any, rng: np.random.Generator) -> _Instruction:
    if not isinstance(entry, Mapping):
        raise RecordFormatError(f"expected an instruction object, got {type(entry).__name__}")
    text = _string(entry, "instruction").strip(".")
    attributes = _wanted_attributes(entry)
    values = entry.get("instruction_options") or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise RecordFormatError(f"expected 'instruction_options' to be a list of strings, got {values!r}")
    options, unmatched = _assign_groups([normalize_option(value) for value in values], product.options)
    return _Instruction(product, text, attributes, _price_upper(product.price, rng), options, tuple(unmatched),
                        tuple(values))


def _string(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str):
        raise RecordFormatError(f"expected {key!r} to be a string, got {value!r}")
    return value


def _wanted_attributes(entry: Mapping[str, Any]) -> tuple[str, ...]:
    attributes = entry.get("instruction_attributes")
    if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
        raise RecordFormatError(f"expected 'instruction_attributes' to be a list of strings, got {attributes!r}")
    if not attributes:
        raise RecordFormatError("no 'instruction_attributes' (WebShop skips such goals)")
    return tuple(attributes)


def _assign_groups(values: Sequence[str], offered: Mapping[str, tuple[str, ...]]) -> tuple[dict[str, str], list[str]]:
    chosen: dict[str, str] = {}
    unmatched: list[str] = []
    for value in values:
        group = next((g for g, offers in offered.items() if value in offers and g not in chosen), None)
        if group is None:
            unmatched.append(value)
            group = f"unmatched {len(unmatched)}"
        chosen[group] = value
    return chosen, unmatched


def _price_upper(price: float, rng: np.random.Generator) -> float:
    steps = [step for step in PRICE_STEPS if step > price][:4]
    if len(steps) < 2:
        return NO_PRICE_LIMIT
    return steps[int(max(rng.choice(len(steps), size=2, replace=False)))]


def _weights(instructions: Sequence[_Instruction], human: bool) -> list[float]:
    if human:
        return [1.0] * len(instructions)
    goals_per_attribute: Counter[str] = Counter()
    for instruction in instructions:
        for attribute in instruction.attributes:
            goals_per_attribute[attribute] += instruction.count
    return [
        sum(1.0 / goals_per_attribute[a] for a in instruction.attributes) / len(instruction.attributes)
        for instruction in instructions
    ]


def _goal(instruction: _Instruction, combination: int) -> Goal:
    options = instruction.options
    text = instruction.text
    if options is None:
        options = _combination(instruction.product.options, combination)
        if options:
            text += " with " + ", and ".join(f"{group}: {value}" for group, value in options.items())
    if instruction.price_upper != NO_PRICE_LIMIT:
        text += f", and price lower than {instruction.price_upper:.2f} dollars"
    product = instruction.product
    return Goal(
        asin=product.asin,
        instruction=text,
        product_type=product.product_type,
        category=product.category,
        query=product.query,
        attributes=instruction.attributes,
        options=options,
        price_upper=instruction.price_upper,
    )


def _combination(options: Mapping[str, tuple[str, ...]], index: int) -> dict[str, str]:
    """The ``index``-th item of ``itertools.product`` over the groups' values, groups in name order."""
    chosen = {}
    for group in sorted(options, reverse=True):
        index, position = divmod(index, len(options[group]))
        chosen[group] = options[group][position]
    return {group: chosen[group] for group in sorted(options)}


def _by_type(products: Sequence[Product]) -> dict[str, list[Product]]:
    by_type: dict[str, list[Product]] = {}
    for product in products:
        by_type.setdefault(product.product_type, []).append(product)
    return by_type


def _task(
    goal: Goal,
    instruction: _Instruction,
    by_type: Mapping[str, Sequence[Product]],
    source: str,
    index: int,
    weight: float,
    seed: int,
) -> Task:
    matching = [p.asin for p in by_type.get(goal.product_type, ()) if product_meets_goal(goal, p)]
    return Task(
        id=f"webshop-original/{source}/{index}",
        env=ENV,
        family=FAMILY,
        prompt=goal.instruction,
        answer=goal.asin,
        difficulty=_difficulty(goal),
        metadata={
            "goal": goal.to_dict(),
            "matching_products": len(matching),
            "matching_asins": matching,
            "catalogue": CATALOGUE_NAME,
            "source": source,
            "original_split": _split(index),
            "weight": weight,
            "unmatched_options": list(instruction.unmatched),
            "written_options": None if instruction.written_options is None else list(instruction.written_options),
            "seed": seed,
        },
    )


def _difficulty(goal: Goal) -> int:
    wishes = len(goal.attributes) + len(goal.options)
    reached = [level for level, spec in DIFFICULTY_LEVELS.items() if spec.attributes + spec.options <= wishes]
    return max(reached, default=min(DIFFICULTY_LEVELS))


def _split(index: int) -> str:
    return next((name for name, end in SPLIT_ENDS if index < end), "train")


def _stream_items(path: str | Path, limit: int | None) -> Iterator[Any]:
    """The items of an items file, streamed (the first ``limit`` when given)."""
    items = _stream_json(path, "[", "a JSON list of WebShop products (items_shuffle*.json)")
    return itertools.islice(items, limit)


def _stream_json(path: str | Path, opening: str, expected: str) -> Iterator[Any]:
    """A JSON list's items (``opening`` ``"["``) or an object's (key, value) pairs (``"{"``), parsed as read.

    Raises:
        RecordFormatError: The file holds another kind of JSON value, or is not JSON (found where it
            breaks, after the values before it were yielded).
    """
    with open(path, "rb") as file:
        first = _first_character(file)
        if first != opening:
            what = {"[": "a JSON list", "{": "a JSON dict", "": "an empty file"}.get(first, "invalid JSON")
            raise RecordFormatError(f"{path}: expected {expected}, got {what}")
        if opening == "[":
            values = ijson.items(file, "item", use_float=True)
        else:
            values = ijson.kvitems(file, "", use_float=True)
        try:
            yield from values
        except ijson.JSONError as error:
            raise RecordFormatError(f"{path}: expected {expected}, got invalid JSON ({error})") from error


def _first_character(file: BinaryIO) -> str:
    """The first character of a file that is not white space or a byte-order mark; the file is left at its start."""
    head = file.read(_HEAD_BYTES).lstrip(b"\xef\xbb\xbf \t\r\n")
    file.seek(0)
    return head[:1].decode("ascii", "replace")


class _Skips:
    """Skipped records: their count and the first few reasons (memory does not grow with the file)."""

    def __init__(self) -> None:
        self.count = 0
        self.shown: list[str] = []

    def add(self, reason: str) -> None:
        self.count += 1
        if len(self.shown) < _SHOWN_SKIPS:
            self.shown.append(reason)

    def log(self, total: int, what: str) -> None:
        if self.count:
            more = " ..." if self.count > _SHOWN_SKIPS else ""
            logger.warning("skipped %d of %d %s: %s%s", self.count, total, what, "; ".join(self.shown), more)


def _log_skipped(skipped: Sequence[str], total: int, what: str) -> None:
    if skipped:
        more = " ..." if len(skipped) > _SHOWN_SKIPS else ""
        logger.warning("skipped %d of %d %s: %s%s", len(skipped), total, what, "; ".join(skipped[:_SHOWN_SKIPS]), more)


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``catalogue.jsonl`` (and ``tasks.jsonl``) from WebShop's files; see the module's docstring.

    Args:
        argv: The command-line arguments; ``sys.argv[1:]`` when None.

    Returns:
        The exit status, 0.

    Raises:
        SystemExit: With status 2 and the message, when an argument or a file is wrong.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        _convert(args)
    except (RecordFormatError, OSError) as error:
        parser.error(str(error))
    return 0


def _convert(args: argparse.Namespace) -> None:
    products, tasks = convert_original(args.out, args.items, args.attributes, args.instructions, human=args.human,
                                       seed=args.seed, limit_products=args.limit_products,
                                       limit_goals=args.limit_goals)
    logger.info("wrote %d products to %s", products, args.out / "catalogue.jsonl")
    if args.instructions is not None:
        logger.info("wrote %d tasks to %s", tasks, args.out / "tasks.jsonl")


def convert_original(
    out: Path,
    items_path: str | Path,
    attributes_path: str | Path | None = None,
    instructions_path: str | Path | None = None,
    *,
    human: bool = False,
    seed: int = 0,
    limit_products: int | None = None,
    limit_goals: int | None = None,
) -> tuple[int, int]:
    """Write ``out/catalogue.jsonl`` (and ``out/tasks.jsonl``) from WebShop's files, in memory bounded by the goals.

    The items file is streamed twice: once for the names of the products the instructions are about, once
    to write every product as it is read, keeping only the products that share a name with one of them
    (the goals and their ``matching_products`` need no other), without their description, bullet points
    and reviews (no goal reads them). The attributes file is held as each asin's
    attributes only. The result is what :func:`load_original_products` and :func:`load_original_goals`
    make of the same files.

    Args:
        out: The folder to write to (made if missing).
        items_path: ``items_shuffle*.json``.
        attributes_path: ``items_ins_v2*.json`` (the products' attributes), or None.
        instructions_path: ``items_ins_v2*.json`` or (``human``) ``items_human_ins.json``; None writes no tasks.
        human: Whether ``instructions_path`` holds human instructions.
        seed: Seed of the price and price-limit draws.
        limit_products: Read only the first N items.
        limit_goals: Keep only the first N goals.

    Returns:
        The number of products and of tasks written.

    Raises:
        RecordFormatError: A file is not in WebShop's format.
    """
    out.mkdir(parents=True, exist_ok=True)
    targets = set() if instructions_path is None else instruction_asins(instructions_path, human=human)
    names = _names_of(items_path, targets, limit_products) if targets else set()
    kept: list[Product] = []
    written = 0
    with (out / "catalogue.jsonl").open("w", encoding="utf-8") as catalogue:
        for product in iter_original_products(items_path, attributes_path, limit=limit_products, seed=seed):
            catalogue.write(json.dumps(product.to_dict(), ensure_ascii=False) + "\n")
            written += 1
            if product.title in names:
                kept.append(_for_goals(product))
    if instructions_path is None:
        return written, 0
    tasks = load_original_goals(kept, instructions_path=instructions_path, human=human, seed=seed, limit=limit_goals)
    _write_lines(out / "tasks.jsonl", (task.to_json() for task in tasks))
    return written, len(tasks)


def _for_goals(product: Product) -> Product:
    """The product without what no goal reads (description, bullet points, reviews), to keep less in memory."""
    return dataclasses.replace(product, description="", features=(), reviews=())


def _names_of(items_path: str | Path, asins: Collection[str], limit: int | None) -> set[str]:
    """The names of the items of ``asins`` (streamed)."""
    return {item["name"] for item in _stream_items(items_path, limit)
            if isinstance(item, Mapping) and item.get("asin") in asins and isinstance(item.get("name"), str)}


def write_original_format(folder: Path, products: Sequence[Product], count: int, *,
                          instructions_every: int = 100) -> dict[str, Path]:
    """Write ``count`` products in WebShop's file formats, for tests and scale benchmarks of the converter.

    The products are cycled, each copy under its own asin (``B`` and 9 digits) and, after the first round,
    its own name (the round's number appended: scraped names are nearly all distinct); every
    ``instructions_every``-th item gets a synthetic instruction (in ``items_ins_v2.json``) and a human
    one (in ``items_human_ins.json``) asking for its attributes and first option values. Each file is
    written as it is made, so memory does not grow with ``count``.

    Args:
        folder: Where to write ``items_shuffle.json``, ``items_ins_v2.json`` and ``items_human_ins.json``.
        products: The products to copy (e.g. the bundled catalogue).
        count: How many items to write.
        instructions_every: One item in this many gets instructions.

    Returns:
        ``{"items", "attributes", "human"}`` -> the files' paths.
    """
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"items": folder / "items_shuffle.json", "attributes": folder / "items_ins_v2.json",
             "human": folder / "items_human_ins.json"}
    with (paths["items"].open("w", encoding="utf-8") as items, paths["attributes"].open("w", encoding="utf-8") as ins,
          paths["human"].open("w", encoding="utf-8") as human):
        for file, opening in ((items, "["), (ins, "{"), (human, "{")):
            file.write(opening)
        humans = 0
        for index in range(count):
            product = products[index % len(products)]
            asin, comma = f"B{index:09d}", "," if index else ""
            copy = index // len(products)
            item = _as_item(product, asin) | ({"name": f"{product.title} {copy}"} if copy else {})
            items.write(comma + "\n" + json.dumps(item, ensure_ascii=False))
            entry: dict[str, Any] = {"attributes": list(product.attributes)}
            if index % instructions_every == 0:
                wanted = list(product.attributes[:2])
                values = [values[0] for values in product.options.values()]
                entry |= {"instruction": f"i need {product.product_type}", "instruction_attributes": wanted}
                human_entry = {"instruction": f"I am looking for {product.product_type}, {', '.join(values)}.",
                               "instruction_attributes": wanted, "instruction_options": values}
                human.write(("," if humans else "") + "\n" + json.dumps(asin) + ": " + json.dumps([human_entry]))
                humans += 1
            ins.write(comma + "\n" + json.dumps(asin) + ": " + json.dumps(entry, ensure_ascii=False))
        for file, closing in ((items, "]"), (ins, "}"), (human, "}")):
            file.write("\n" + closing + "\n")
    return paths


def _as_item(product: Product, asin: str) -> dict[str, Any]:
    """A product as WebShop's ``items_shuffle*.json`` holds one."""
    return {
        "asin": asin,
        "name": product.title,
        "full_description": product.description,
        "small_description": list(product.features),
        "pricing": f"${product.price:.2f}",
        "product_category": product.category_text,
        "query": product.query,
        "customization_options": {group: [{"value": value, "image": None} for value in values]
                                  for group, values in product.options.items()},
        "average_rating": product.rating,
        "Reviews": [{"title": r.title, "stars": r.rating, "review": r.text} for r in product.reviews],
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasks.webshop.original",
                                     description="Convert WebShop's original data files to a catalogue and tasks.")
    parser.add_argument("--items", type=Path, required=True, help="items_shuffle*.json")
    parser.add_argument("--attributes", type=Path, help="items_ins_v2*.json: the products' attributes")
    parser.add_argument("--instructions", type=Path, help="items_ins_v2*.json or (with --human) items_human_ins.json")
    parser.add_argument("--human", action="store_true", help="--instructions holds human instructions")
    parser.add_argument("--seed", type=int, default=0, help="seed of the price and price-limit draws")
    parser.add_argument("--limit-products", type=int, help="read only the first N items")
    parser.add_argument("--limit-goals", type=int, help="keep only the first N goals (500: the human test split)")
    parser.add_argument("--out", type=Path, required=True, help="folder for catalogue.jsonl and tasks.jsonl")
    return parser


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with path.open("w", encoding="utf-8") as file:
        for line in lines:
            file.write(line + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
