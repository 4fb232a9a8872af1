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

or, to write files the shop's server and the environment load::

    python -m tasks.webshop.original --items data/items_shuffle.json --attributes data/items_ins_v2.json \\
        --instructions data/items_human_ins.json --human --out webshop-original
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import logging
import math
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def load_original_products(
    items_path: str | Path,
    attributes_path: str | Path | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
) -> list[Product]:
    """Load WebShop's ``items_shuffle*.json`` (and its ``items_ins_v2*.json``) as catalogue products.

    Each item is cleaned as WebShop's ``load_products`` does:

    * items whose asin is ``"nan"`` or longer than 10 characters, and repeated asins, are skipped;
    * ``pricing`` is split at ``$`` and each piece stripped to digits and dots; one value is the price,
      a range (two or more values) gives a price drawn uniformly between the first two (rounded to
      cents); a missing or empty ``pricing`` gives :data:`DEFAULT_PRICE` (the product is kept);
    * option groups are lower-cased and each value stripped, lower-cased and ``/`` written ``" | "``;
      a group whose values are ``null`` is left out;
    * ``query`` is lower-cased and stripped; ``small_description`` is the bullet points (a string is
      one bullet).

    Beyond WebShop's fields: ``average_rating`` (or ``Rating``) becomes the rating and ``Reviews`` (or
    ``reviews``, each with ``title``, ``score`` or ``stars``, ``review`` or ``body``) the reviews. A
    rating is the first number in the value (``"4.5 out of 5 stars"`` -> 4.5), clamped to 1..5; 0, or
    no number, means no rating, and a review without a rating is left out.

    An item that cannot be read is skipped; the skips are logged as one warning with their count.

    Args:
        items_path: The ``items_shuffle*.json`` file.
        attributes_path: The ``items_ins_v2*.json`` file; its ``attributes`` become the products'
            attributes. Without it products have none.
        limit: Read only the first ``limit`` items of the file (WebShop's ``num_products``).
        seed: Seed of the numpy generator that prices within a range are drawn from.

    Returns:
        The products, in file order.

    Raises:
        RecordFormatError: A file is not in WebShop's format (not JSON, not a list of products, not an
            asin -> attributes object), or no item at all could be read.

    Example::

        products = load_original_products("data/items_shuffle_1000.json", "data/items_ins_v2_1000.json")
    """
    items = _read_json(items_path, list, "a JSON list of WebShop products (items_shuffle*.json)")[:limit]
    attributes = {} if attributes_path is None else _read_instructions(attributes_path, human=False)
    rng = np.random.default_rng(seed)
    products: list[Product] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        try:
            product = _item_product(item, seen, attributes, rng)
        except RecordFormatError as error:
            skipped.append(f"item {index}: {error}")
            continue
        seen.add(product.asin)
        products.append(product)
    if not products:
        first = f"; first: {skipped[0]}" if skipped else ""
        raise RecordFormatError(f"{items_path}: expected WebShop products (objects with asin, name, query, pricing, "
                                f"...), got none readable among {len(items)} items{first}")
    _log_skipped(skipped, len(items), "WebShop items")
    return products


def _item_product(item: Any, seen: set[str], attributes: Mapping[str, Any], rng: np.random.Generator) -> Product:
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
    return Product(
        asin=asin,
        title=title,
        category=parse_category(_text(item, "product_category", required=True)),
        product_type=title,
        query=_text(item, "query", required=True).lower().strip(),
        price=_price(item.get("pricing"), rng),
        rating=_rating(item.get("average_rating", item.get("Rating"))),
        attributes=_own_attributes(attributes.get(asin)),
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


def _price(pricing: Any, rng: np.random.Generator) -> float:
    if not pricing:
        return DEFAULT_PRICE
    if not isinstance(pricing, str):
        raise RecordFormatError(f"expected 'pricing' to be text such as '$12.99 - $24.99', got {pricing!r}")
    values = [_dollars(piece, pricing) for piece in pricing.split("$")[1:]]
    if not values:
        raise RecordFormatError(f"expected 'pricing' in dollars such as '$12.99', got {pricing!r}")
    if len(values) == 1:
        return values[0]
    return round(float(rng.uniform(values[0], values[1])), 2)


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
    entries = _read_instructions(instructions_path, human=human)
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


def _read_instructions(path: str | Path, *, human: bool) -> dict[str, Any]:
    kind = "items_human_ins.json: asin -> [{instruction, ...}]" if human else "items_ins_v2*.json: asin -> {...}"
    entries = _read_json(path, dict, f"a JSON object of WebShop instructions ({kind})")
    wrong = next((asin for asin, entry in entries.items() if isinstance(entry, list) != human), None)
    if wrong is not None:
        other = "items_ins_v2*.json" if human else "items_human_ins.json"
        raise RecordFormatError(f"{path}: expected {kind}, got {type(entries[wrong]).__name__} for asin {wrong!r} "
                                f"(is it {other}?)")
    return entries


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


def _read_json(path: str | Path, kind: type, expected: str) -> Any:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RecordFormatError(f"{path}: expected {expected}, got invalid JSON ({error})") from error
    if not isinstance(data, kind):
        raise RecordFormatError(f"{path}: expected {expected}, got a JSON {type(data).__name__}")
    return data


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
    products = load_original_products(args.items, args.attributes, limit=args.limit_products, seed=args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    _write_lines(args.out / "catalogue.jsonl", [json.dumps(p.to_dict(), ensure_ascii=False) for p in products])
    logger.info("wrote %d products to %s", len(products), args.out / "catalogue.jsonl")
    if args.instructions is not None:
        tasks = load_original_goals(products, instructions_path=args.instructions, human=args.human,
                                    seed=args.seed, limit=args.limit_goals)
        _write_lines(args.out / "tasks.jsonl", [task.to_json() for task in tasks])
        logger.info("wrote %d tasks to %s", len(tasks), args.out / "tasks.jsonl")


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


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
