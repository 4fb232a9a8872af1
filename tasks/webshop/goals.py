"""Shopping goals for WebShop-v0, generated from a catalogue and checked when generated.

A goal is made from one target product: its type, some of its attributes, one offered value of
some of its option groups, and a price limit a little above its price. The instruction follows
WebShop's synthetic form::

    i need a henley that is slim fit and machine wash, with color: navy, and size: large,
    and price lower than 46.00 dollars

Every goal is checked with an exact predicate (:func:`product_meets_goal`): the products of the
catalogue that meet it are counted and the count is stored with the task; a goal no product meets
is dropped (none is, since its target meets it), and instructions are never repeated.

Difficulty levels (:data:`DIFFICULTY_LEVELS`):

=====  ==========  =======  ===========
level  attributes  options  price slack
=====  ==========  =======  ===========
1      1           1        50 %
2      2           1        25 %
3      3           2        10 %
=====  ==========  =======  ===========

Every level asks for at least one option, as nearly every WebShop goal does: without one, a third of
the bundled level-1 goals fell to a random clicker (a product of the right type has a given attribute
about half the time), with one it is near zero.

Example:
    >>> from tasks.webshop.catalogue import generate_catalogue
    >>> catalogue = generate_catalogue(0, types_per_leaf=1, products_per_type=2, distractors=1)
    >>> task = generate_goals(catalogue, 3, seed=0, difficulty=2)[0]
    >>> task.env, task.family, task.metadata["matching_products"] >= 1
    ('WebShop', 'shop', True)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from tasks.records import Task
from tasks.webshop.catalogue import GENERATOR_VERSION, MAX_PRICE_SLACK
from tasks.webshop.records import Goal, Product

ENV = "WebShop"
FAMILY = "shop"


@dataclass(frozen=True)
class GoalDifficulty:
    """How hard a goal is.

    Attributes:
        attributes: How many attributes the goal asks for.
        options: How many option groups it names a value for.
        price_slack: The price limit is the target's price times ``1 + price_slack``, rounded up
            to whole dollars; at most :data:`~tasks.webshop.catalogue.MAX_PRICE_SLACK`.
    """

    attributes: int
    options: int
    price_slack: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.price_slack <= MAX_PRICE_SLACK:
            raise ValueError(f"expected price_slack in 0..{MAX_PRICE_SLACK}, got {self.price_slack}")


DIFFICULTY_LEVELS: dict[int, GoalDifficulty] = {
    1: GoalDifficulty(attributes=1, options=1, price_slack=0.5),
    2: GoalDifficulty(attributes=2, options=1, price_slack=0.25),
    3: GoalDifficulty(attributes=3, options=2, price_slack=0.1),
}
"""Difficulty level -> what a goal of that level asks for."""


def product_meets_goal(goal: Goal, product: Product) -> bool:
    """Whether a product meets a goal exactly.

    The product has the goal's type, every wanted attribute, offers every wanted option value in
    its group, and costs at most the goal's limit.

    Args:
        goal: The shopping goal.
        product: A catalogue product.

    Returns:
        Whether buying it with the wanted options meets every wish.
    """
    return (
        product.product_type == goal.product_type
        and set(goal.attributes) <= set(product.attributes)
        and all(value in product.options.get(group, ()) for group, value in goal.options.items())
        and product.price <= goal.price_upper
    )


def format_instruction(product_type: str, attributes: Sequence[str], options: dict[str, str], price: float) -> str:
    """Write a goal's instruction in WebShop's form.

    Args:
        product_type: What is wanted, e.g. ``"henley"``.
        attributes: The wanted attributes.
        options: Option group -> wanted value.
        price: The price limit in dollars.

    Returns:
        The instruction, lowercase as in WebShop.

    Example:
        >>> format_instruction("henley", ["slim fit"], {"color": "navy", "size": "large"}, 46.0)
        'i need a henley that is slim fit, with color: navy, and size: large, and price lower than 46.00 dollars'
    """
    parts = [f"i need {_with_article(product_type)}"]
    if attributes:
        parts[0] += " that is " + " and ".join(attributes)
    if options:
        parts.append("with " + ", and ".join(f"{group}: {value}" for group, value in options.items()))
    parts.append(f"and price lower than {price:.2f} dollars")
    return ", ".join(parts)


def _with_article(product_type: str) -> str:
    if product_type.endswith("s") and not product_type.endswith("ss"):
        return product_type
    vowel = product_type[0] in "aeiou" and not product_type.startswith("one")
    return f"{'an' if vowel else 'a'} {product_type}"


def generate_goals(
    catalogue: Sequence[Product],
    count: int,
    *,
    seed: int,
    difficulty: int,
    split: str = "train",
    targets: Collection[str] | None = None,
) -> list[Task]:
    """Generate checked shopping goals as WebShop tasks, the same for the same arguments.

    Targets are drawn without repetition; a goal whose instruction was already made is skipped.

    Args:
        catalogue: The shop's products.
        count: How many tasks to make.
        seed: Seed of the numpy generator the targets and wishes are drawn from.
        difficulty: A level of :data:`DIFFICULTY_LEVELS`.
        split: Name used in the task ids, ``"webshop/<split>/<index>"``.
        targets: Ids of the products goals may be made from (to keep splits disjoint by
            product); all of the catalogue when None.

    Returns:
        ``count`` tasks. ``answer`` is the target's id; ``metadata`` holds ``goal`` (the
        :class:`~tasks.webshop.records.Goal` as a dict), ``matching_products`` (how many products
        meet it), ``matching_asins``, ``generator_version`` and ``seed``.

    Raises:
        ValueError: When the difficulty is unknown or fewer than ``count`` distinct goals exist.
    """
    level = _level(difficulty)
    rng = np.random.default_rng(seed)
    pool = sorted(
        (product for product in catalogue if targets is None or product.asin in targets),
        key=lambda product: product.asin,
    )
    tasks: list[Task] = []
    seen: set[str] = set()
    for position in rng.permutation(len(pool)):
        if len(tasks) == count:
            break
        goal = _goal(rng, pool[int(position)], level)
        if goal is None or goal.instruction in seen:
            continue
        seen.add(goal.instruction)
        tasks.append(_task(goal, catalogue, difficulty, split, len(tasks), seed))
    if len(tasks) < count:
        raise ValueError(f"expected {count} distinct goals, got only {len(tasks)} from {len(pool)} target products")
    return tasks


def _level(difficulty: int) -> GoalDifficulty:
    if difficulty not in DIFFICULTY_LEVELS:
        raise ValueError(f"expected difficulty in {sorted(DIFFICULTY_LEVELS)}, got {difficulty!r}")
    return DIFFICULTY_LEVELS[difficulty]


def _goal(rng: np.random.Generator, target: Product, level: GoalDifficulty) -> Goal | None:
    if len(target.attributes) < level.attributes or len(target.options) < level.options:
        return None
    attributes = [target.attributes[i] for i in rng.choice(len(target.attributes), level.attributes, replace=False)]
    groups = sorted(rng.choice(len(target.options), level.options, replace=False))
    names = list(target.options)
    options = {names[i]: _one(rng, target.options[names[i]]) for i in groups}
    price_upper = float(math.ceil(round(target.price * (1 + level.price_slack), 6)))
    return Goal(
        asin=target.asin,
        instruction=format_instruction(target.product_type, attributes, options, price_upper),
        product_type=target.product_type,
        category=target.category,
        query=target.query,
        attributes=tuple(attributes),
        options=options,
        price_upper=price_upper,
    )


def _one(rng: np.random.Generator, values: Sequence[str]) -> str:
    return values[int(rng.integers(len(values)))]


def _task(goal: Goal, catalogue: Sequence[Product], difficulty: int, split: str, index: int, seed: int) -> Task:
    matching = [product.asin for product in catalogue if product_meets_goal(goal, product)]
    return Task(
        id=f"webshop/{split}/{index:04d}",
        env=ENV,
        family=FAMILY,
        prompt=goal.instruction,
        answer=goal.asin,
        difficulty=difficulty,
        metadata={
            "goal": goal.to_dict(),
            "matching_products": len(matching),
            "matching_asins": matching,
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
        },
    )
