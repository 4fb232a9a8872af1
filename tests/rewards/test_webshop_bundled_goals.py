"""The bundled WebShop goals against the real grader: buying the target with the goal's options scores 1.0."""

from __future__ import annotations

import pytest

from rewards.webshop import webshop_score
from tasks import load_split
from tasks.webshop import DEFAULT_CATALOGUE, Goal, Product, Purchase, load_catalogue


@pytest.fixture(scope="module")
def by_asin() -> dict[str, Product]:
    return {product.asin: product for product in load_catalogue(DEFAULT_CATALOGUE)}


def _ideal_purchase(goal: Goal, product: Product) -> Purchase:
    """The target at its price, with the goal's value in each group it names and the first value elsewhere."""
    options = {group: goal.options.get(group, values[0]) for group, values in product.options.items()}
    return Purchase(asin=product.asin, options=options, price=product.price)


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_the_target_bought_as_asked_scores_one(split: str, by_asin: dict[str, Product]) -> None:
    for task in load_split("WebShop", split):
        goal = Goal.from_dict(task.metadata["goal"])
        product = by_asin[task.answer]
        assert webshop_score(goal, product, _ideal_purchase(goal, product)).value == 1.0, task.id
