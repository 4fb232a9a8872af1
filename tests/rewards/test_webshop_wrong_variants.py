"""Every wrong variant of the right product, over the bundled catalogues and WebShop-format data, by both graders.

A wrong variant is the goal's own product, bought within the price limit, with one option group set to another
value the product offers in that group (every other group as the goal wants it). The strict grader must never give
one full success. On WebShop-format data WebShop's grader gives many of them full success, which the test also
checks, to show that the enumeration bites (the bundled catalogue's values were chosen so that none fuzzy-matches
another, and WebShop's grader passes none of its wrong variants either).
The WebShop-format files under ``tests/data/webshop/`` (items_shuffle, items_ins_v2, items_human_ins) hold option
values as WebShop's scraped products write them (sizes, pack counts, colour pairs, shoe widths).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rewards.webshop import webshop_score
from tasks.webshop import Goal, Product, Purchase, available_catalogues, load_catalogue
from tasks.webshop.original import load_original_goals, load_original_products

DATA = Path(__file__).parents[1] / "data" / "webshop"


def wrong_variants(goal: Goal, product: Product) -> Iterator[Purchase]:
    """The product with the goal's options, one group at a time set to each other value it offers."""
    wanted = {group: goal.options.get(group, values[0]) for group, values in product.options.items()}
    for group, values in product.options.items():
        for value in values:
            if value != wanted[group] and group in goal.options:
                yield Purchase(product.asin, {**wanted, group: value}, product.price)


def every_combination_goal(product: Product) -> Iterator[Goal]:
    """A goal per option value of the product (that value wanted, the rest as offered first), within its price."""
    for group, values in product.options.items():
        for value in values:
            options = {g: (value if g == group else vs[0]) for g, vs in product.options.items()}
            yield Goal(asin=product.asin, instruction="...", product_type=product.product_type,
                       category=product.category, query=product.query, attributes=product.attributes[:1],
                       options=options, price_upper=product.price + 1.0)


def full_successes(goals_and_products: list[tuple[Goal, Product, bool]], grader: str) -> tuple[int, int]:
    """(wrong-variant purchases that score 1.0, all wrong-variant purchases)."""
    scores = [webshop_score(goal, product, purchase, grader=grader, named=named).value
              for goal, product, named in goals_and_products for purchase in wrong_variants(goal, product)]
    return sum(score == 1.0 for score in scores), len(scores)


@pytest.mark.parametrize("catalogue", available_catalogues())
def test_no_wrong_variant_of_a_bundled_product_succeeds(catalogue: str) -> None:
    cases = [(goal, product, True) for product in load_catalogue(catalogue) for goal in every_combination_goal(product)]
    successes, total = full_successes(cases, "strict")
    assert total > 1000
    assert successes == 0


@pytest.fixture(scope="module")
def original() -> tuple[list[Product], list[tuple[Goal, bool]]]:
    products = load_original_products(DATA / "items_shuffle.json", DATA / "items_ins_v2.json")
    synthetic = load_original_goals(products, instructions_path=DATA / "items_ins_v2.json")
    human = load_original_goals(products, instructions_path=DATA / "items_human_ins.json", human=True)
    goals = [(Goal.from_dict(t.metadata["goal"]), True) for t in synthetic]
    goals += [(Goal.from_dict(t.metadata["goal"]), False) for t in human]
    return products, goals


def test_no_wrong_variant_of_webshop_format_data_succeeds(
        original: tuple[list[Product], list[tuple[Goal, bool]]]) -> None:
    products, goals = original
    by_asin = {product.asin: product for product in products}
    cases = [(goal, by_asin[goal.asin], named) for goal, named in goals]
    successes, total = full_successes(cases, "strict")
    assert total > 1000
    assert successes == 0
    # WebShop's own rule: x-large for large, the other pack count, 8 wide for 8, ...
    assert full_successes(cases, "webshop")[0] > 100


def test_the_right_variant_succeeds(original: tuple[list[Product], list[tuple[Goal, bool]]]) -> None:
    # the goal's own product with its options scores 1.0 under strict, for every synthetic and human goal
    products, goals = original
    by_asin = {product.asin: product for product in products}
    for goal, named in goals:
        product = by_asin[goal.asin]
        purchase = Purchase(product.asin, dict(goal.options), product.price)
        assert webshop_score(goal, product, purchase, named=named).value == 1.0, goal.instruction
