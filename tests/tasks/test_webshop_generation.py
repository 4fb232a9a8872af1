"""Tests of WebShop-v0's generated catalogue and goals (tasks.webshop.catalogue, tasks.webshop.goals)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from rewards.webshop import fuzzy_match, type_words, webshop_score
from tasks.webshop import (
    CATEGORY_SEPARATOR,
    DEPARTMENTS,
    DIFFICULTY_LEVELS,
    GENERATOR_VERSION,
    Goal,
    Product,
    Purchase,
    base_asin,
    generate_catalogue,
    generate_goals,
    parse_category,
)

LEVELS = sorted(DIFFICULTY_LEVELS)


@pytest.fixture(scope="module")
def catalogue() -> list[Product]:
    return generate_catalogue(3, types_per_leaf=2, products_per_type=3, distractors=3)


def _purchase(goal: Goal, product: Product) -> Purchase:
    """Buy the product at its price with the goal's options where offered, else its first values."""
    options = {
        group: goal.options[group] if goal.options.get(group) in values else values[0]
        for group, values in product.options.items()
    }
    return Purchase(asin=product.asin, options=options, price=product.price)


def _score(goal: Goal, product: Product) -> float:
    return webshop_score(goal, product, _purchase(goal, product)).value


def _goals(catalogue: list[Product], difficulty: int, count: int = 25) -> list[Goal]:
    tasks = generate_goals(catalogue, count, seed=11, difficulty=difficulty)
    return [Goal.from_dict(task.metadata["goal"]) for task in tasks]


def test_same_seed_gives_the_same_catalogue_and_goals() -> None:
    first = generate_catalogue(5, types_per_leaf=1, products_per_type=2, distractors=2)
    again = generate_catalogue(5, types_per_leaf=1, products_per_type=2, distractors=2)
    assert first == again
    assert generate_goals(first, 8, seed=1, difficulty=2) == generate_goals(again, 8, seed=1, difficulty=2)


def test_different_seeds_give_different_catalogues_and_goals(catalogue: list[Product]) -> None:
    other = generate_catalogue(4, types_per_leaf=2, products_per_type=3, distractors=3)
    assert [p.to_dict() for p in other] != [p.to_dict() for p in catalogue]
    prompts = [t.prompt for t in generate_goals(catalogue, 10, seed=1, difficulty=2)]
    assert prompts != [t.prompt for t in generate_goals(catalogue, 10, seed=2, difficulty=2)]


def test_catalogue_size_follows_the_arguments() -> None:
    leaves = sum(len(department.leaves) for department in DEPARTMENTS)
    products = generate_catalogue(0, types_per_leaf=2, products_per_type=3, distractors=2)
    assert len(products) == leaves * 2 * 3 * (1 + 2)
    assert len({product.asin for product in products}) == len(products)


@pytest.mark.parametrize("bad", [{"types_per_leaf": 0}, {"products_per_type": 0}, {"distractors": -1}])
def test_bad_sizes_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="expected"):
        generate_catalogue(0, **bad)


def test_category_paths_are_three_parts_written_with_the_separator(catalogue: list[Product]) -> None:
    for product in catalogue:
        assert len(product.category) == 3
        assert product.category_text.count(CATEGORY_SEPARATOR) == 2
        assert parse_category(product.category_text) == product.category


def test_vocabularies_do_not_fuzzy_match_each_other() -> None:
    # The exact goal check agrees with the fuzzy grader only if no two words are near-spellings.
    for department in DEPARTMENTS:
        values = [value for group in department.option_groups.values() for value in group]
        for vocabulary in (department.attributes, values):
            assert not [(a, b) for a, b in itertools.combinations(vocabulary, 2) if fuzzy_match(a, b)]
    types = [t for department in DEPARTMENTS for leaf in department.leaves.values() for t in leaf]
    shared = Counter(word for t in types for word in type_words(t))
    assert max(shared.values()) == 1


def test_distractors_differ_from_their_original_in_exactly_one_field(catalogue: list[Product]) -> None:
    originals = {product.asin: product for product in catalogue if base_asin(product.asin) == product.asin}
    kinds = Counter()
    for product in catalogue:
        original = originals[base_asin(product.asin)]
        if product is original:
            continue
        for name in ("title", "category", "product_type", "query"):
            assert getattr(product, name) == getattr(original, name)
        differs = [
            name for name in ("attributes", "options", "price") if getattr(product, name) != getattr(original, name)
        ]
        assert len(differs) == 1, (product.asin, differs)
        kinds[differs[0]] += 1
        if differs == ["attributes"]:
            assert len(set(product.attributes) ^ set(original.attributes)) == 2  # one swapped for another
        if differs == ["options"]:
            changed = [g for g in original.options if product.options[g] != original.options[g]]
            assert len(changed) == 1
            assert len(set(product.options[changed[0]]) ^ set(original.options[changed[0]])) == 2
        if differs == ["price"]:
            assert product.price > original.price * 1.5
    assert set(kinds) == {"attributes", "options", "price"}


def test_text_mentions_only_the_products_own_attributes(catalogue: list[Product]) -> None:
    vocabulary = {attribute for department in DEPARTMENTS for attribute in department.attributes}
    for product in catalogue:
        text = " ".join((product.title, " ".join(product.features), product.description)).lower()
        assert {attribute for attribute in vocabulary if attribute in text} == set(product.attributes)


@pytest.mark.parametrize("difficulty", LEVELS)
def test_every_target_scores_one_with_the_grader(catalogue: list[Product], difficulty: int) -> None:
    by_asin = {product.asin: product for product in catalogue}
    for goal in _goals(catalogue, difficulty):
        target = by_asin[goal.asin]
        purchase = Purchase(asin=target.asin, options=dict(goal.options), price=target.price)
        assert webshop_score(goal, target, purchase).value == 1.0, goal.instruction


def test_a_distractor_lacking_a_wanted_attribute_scores_below_one(catalogue: list[Product]) -> None:
    checked = 0
    for goal in _goals(catalogue, 3):
        for product in catalogue:
            lacking = set(goal.attributes) - set(product.attributes)
            if base_asin(product.asin) == base_asin(goal.asin) and lacking:
                assert _score(goal, product) < 1.0
                checked += 1
    assert checked > 0


@pytest.mark.parametrize("difficulty", LEVELS)
def test_recorded_matches_equal_a_brute_force_count_with_the_grader(catalogue: list[Product], difficulty: int) -> None:
    for task in generate_goals(catalogue, 25, seed=11, difficulty=difficulty):
        goal = Goal.from_dict(task.metadata["goal"])
        matching = [product.asin for product in catalogue if _score(goal, product) == 1.0]
        assert task.metadata["matching_products"] == len(matching) >= 1
        assert task.metadata["matching_asins"] == matching


@pytest.mark.parametrize("difficulty", LEVELS)
def test_instructions_are_unique_and_in_webshops_form(catalogue: list[Product], difficulty: int) -> None:
    tasks = generate_goals(catalogue, 40, seed=0, difficulty=difficulty)
    assert len({task.prompt for task in tasks}) == len(tasks) == 40
    assert len({task.id for task in tasks}) == 40
    for task in tasks:
        goal = task.metadata["goal"]
        assert task.prompt == goal["instruction"]
        assert task.prompt.startswith("i need ")
        assert task.prompt.endswith(f"and price lower than {goal['price_upper']:.2f} dollars")
        for group, value in goal["options"].items():
            assert f"{group}: {value}" in task.prompt
        assert (task.env, task.family, task.difficulty) == ("WebShop", "shop", difficulty)
        assert task.metadata["generator_version"] == GENERATOR_VERSION


def test_difficulty_sets_the_number_of_attributes_options_and_the_price_slack(catalogue: list[Product]) -> None:
    by_asin = {product.asin: product for product in catalogue}
    for difficulty in LEVELS:
        level = DIFFICULTY_LEVELS[difficulty]
        for goal in _goals(catalogue, difficulty):
            assert len(goal.attributes) == level.attributes
            assert len(goal.options) == level.options
            price = by_asin[goal.asin].price
            assert goal.price_upper == pytest.approx(-(-price * (1 + level.price_slack) // 1))
    assert [DIFFICULTY_LEVELS[d].attributes for d in LEVELS] == [1, 2, 3]
    assert [DIFFICULTY_LEVELS[d].options for d in LEVELS] == [1, 1, 2]


def test_targets_restrict_the_goals_to_the_given_products(catalogue: list[Product]) -> None:
    allowed = {product.asin for product in catalogue if product.asin.endswith("000")}
    tasks = generate_goals(catalogue, 10, seed=0, difficulty=2, targets=allowed)
    assert {task.answer for task in tasks} <= allowed


def test_too_many_goals_or_an_unknown_difficulty_is_refused(catalogue: list[Product]) -> None:
    with pytest.raises(ValueError, match="distinct goals"):
        generate_goals(catalogue[:3], 10, seed=0, difficulty=1)
    with pytest.raises(ValueError, match="difficulty"):
        generate_goals(catalogue, 1, seed=0, difficulty=9)
