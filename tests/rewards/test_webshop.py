from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from rewards import (
    RewardComputationError,
    attribute_matched,
    fuzzy_match,
    fuzzy_score,
    normalize_color,
    options_matched,
    price_ok,
    type_factor,
    type_match,
    type_words,
    webshop_reward,
    webshop_score,
)
from tasks.records import Task, Trajectory
from tasks.webshop import Goal, Product, Purchase, RecordFormatError, Review, parse_category

# The running example: a goal with 2 attributes and 2 options, so the denominator is 2 + 2 + 1 = 5.
GOAL = Goal(
    asin="B0RUN",
    instruction="i need lightweight, non slip men's running shoes in navy, size large, under 50 dollars",
    product_type="running shoes",
    category=("Clothing", "Men", "Shoes"),
    query="men's running shoes",
    attributes=("lightweight", "non slip"),
    options={"color": "navy", "size": "large"},
    price_upper=50.0,
)
PRODUCT = Product(
    asin="B0RUN",
    title="Stride Men's Road Running Shoes",
    category=("Clothing", "Men", "Shoes"),
    product_type="running shoes",
    query="men's running shoes",
    price=39.99,
    rating=4.5,
    attributes=("lightweight", "non slip", "breathable"),
    options={"color": ("navy", "red", "navy blue", "heather grey"), "size": ("small", "large", "x-large")},
    description="A road shoe for daily miles.",
    features=("Mesh upper", "Cushioned midsole"),
    reviews=(Review(5, "Great", "Fits well."),),
)
PURCHASE = Purchase(asin="B0RUN", options={"color": "navy", "size": "large"}, price=39.99)


def score(goal: dict[str, Any] | None = None, product: dict[str, Any] | None = None, **purchase: Any) -> float:
    """The score of the running example with some fields replaced."""
    return webshop_score(
        dataclasses.replace(GOAL, **(goal or {})),
        dataclasses.replace(PRODUCT, **(product or {})),
        dataclasses.replace(PURCHASE, **purchase),
    ).value


@pytest.mark.parametrize(
    ("goal", "product", "purchase", "expected"),
    [
        # exact match: (2 attributes + 2 options + price) / 5 = 5/5, type factor 1
        ({}, {}, {}, 1.0),
        # "non slip" is nowhere in the product (attributes, title, bullets, description): (1 + 2 + 1) / 5
        ({}, {"attributes": ("lightweight",)}, {}, 4 / 5),
        # wrong size ("small" vs "large" scores 20): (2 + 1 + 1) / 5
        ({}, {}, {"options": {"color": "navy", "size": "small"}}, 4 / 5),
        # wrong colour and wrong size: (2 + 0 + 1) / 5
        ({}, {}, {"options": {"color": "red", "size": "small"}}, 3 / 5),
        # an option left unchosen counts as unmatched: (2 + 1 + 1) / 5
        ({}, {}, {"options": {"color": "navy"}}, 4 / 5),
        # one cent over the limit: (2 + 2 + 0) / 5
        ({}, {}, {"price": 50.01}, 4 / 5),
        # exactly at the limit is within it: 5/5
        ({}, {}, {"price": 50.0}, 1.0),
        # nothing right but the type: (0 + 0 + 0) / 5 = 0 whatever the factor
        ({}, {"attributes": ()}, {"options": {}, "price": 99.0}, 0.0),
        # "navy blue" is normalised to "navy": 5/5
        ({}, {}, {"options": {"color": "navy blue", "size": "large"}}, 1.0),
        # "Heather Grey" -> "heather gray" contains the wanted "gray" ("grey" vs "gray" alone scores 75): 5/5
        (
            {"options": {"color": "gray", "size": "large"}},
            {},
            {"options": {"color": "Heather Grey", "size": "large"}},
            1.0,
        ),
        # "blue" is not "navy": navy blue is normalised to navy, so blue is unmatched: (2 + 1 + 1) / 5
        (
            {"options": {"color": "blue", "size": "large"}},
            {},
            {"options": {"color": "navy blue", "size": "large"}},
            4 / 5,
        ),
        # WebShop compares a wanted value with every chosen value, whatever its group: 5/5
        ({}, {}, {"options": {"size": "navy", "color": "large"}}, 1.0),
        # fuzzy attribute: "light weight" vs "lightweight" scores 96 > 85: 5/5
        ({}, {"attributes": ("light weight", "non slip")}, {}, 1.0),
        # "non slip" is not an attribute but is in the description (case-insensitive): 5/5
        ({}, {"attributes": ("lightweight",), "description": "NON SLIP rubber outsole."}, {}, 1.0),
        # ... or in a bullet point: 5/5
        ({}, {"attributes": ("lightweight",), "features": ("Mesh upper", "Non slip sole")}, {}, 1.0),
        # ... or in the title: 5/5
        ({}, {"attributes": ("lightweight",), "title": "Stride Non Slip Running Shoes"}, {}, 1.0),
        # the text fallback is an exact substring, not fuzzy: "non-slip" does not contain "non slip": 4/5
        ({}, {"attributes": ("lightweight",), "title": "Stride Non-Slip Running Shoes"}, {}, 4 / 5),
        # a goal without attributes or options: price alone, 1/1
        ({"attributes": (), "options": {}}, {}, {}, 1.0),
        # type factor 0.5 (other query, one shared category part, 1 of 6 type words) times 5/5
        (
            {"product_type": "stainless steel chef knife block set", "category": ("Home", "Kitchen", "Knives")},
            {
                "product_type": "paring knife",
                "title": "Paring Knife",
                "query": "paring knife",
                "category": ("Home", "Tools"),
            },
            {},
            0.5,
        ),
        # type factor 0 (no type word in common) zeroes a purchase that is otherwise perfect
        ({}, {"title": "Garden Hose", "product_type": "hose"}, {}, 0.0),
        # type factor 0.1 times (1 + 2 + 1) / 5
        (
            {"product_type": "extra large heavy duty stainless steel outdoor garden storage shed kit"},
            {"title": "Garden Hose", "product_type": "hose", "attributes": ("lightweight",)},
            {},
            0.1 * 4 / 5,
        ),
    ],
)
def test_webshop_score(
    goal: dict[str, Any], product: dict[str, Any], purchase: dict[str, Any], expected: float
) -> None:
    assert score(goal, product, **purchase) == pytest.approx(expected)


def test_webshop_score_reports_every_component() -> None:
    # one attribute missing and the price over the limit: (1 + 2 + 0) / 5
    result = webshop_score(
        GOAL, dataclasses.replace(PRODUCT, attributes=("lightweight",)), dataclasses.replace(PURCHASE, price=60.0)
    )
    assert result.value == pytest.approx(3 / 5)
    assert result.components == {
        "type_factor": 1.0,
        "query_match": 1.0,
        "category_match": 1.0,
        "title_score": 1.0,
        "attributes_matched": 1.0,
        "attributes_total": 2.0,
        "options_matched": 2.0,
        "options_total": 2.0,
        "price_ok": 0.0,
        "purchased": 1.0,
        "success": 0.0,
    }


@pytest.mark.parametrize(
    ("purchase", "success"),
    [
        # score exactly 1.0
        ({}, 1.0),
        # 4/5 is not a success
        ({"price": 51.0}, 0.0),
    ],
)
def test_success_means_a_perfect_score(purchase: dict[str, Any], success: float) -> None:
    result = webshop_score(GOAL, PRODUCT, dataclasses.replace(PURCHASE, **purchase))
    assert result.components["success"] == success


def test_webshop_score_rejects_a_product_that_was_not_bought() -> None:
    # the env must hand over the record of the product the purchase names
    with pytest.raises(RewardComputationError, match="expected the record of the purchased product 'B0OTHER'"):
        webshop_score(GOAL, PRODUCT, dataclasses.replace(PURCHASE, asin="B0OTHER"))


@pytest.mark.parametrize(
    ("query_match", "category_match", "title_score", "factor"),
    [
        # everything matches
        (True, True, 1.0, 1.0),
        # a title score above 0.2 is enough on its own
        (False, False, 0.21, 1.0),
        # 0.2 is not above 0.2, and neither query nor category matches
        (False, False, 0.2, 0.5),
        # 0.1 is not below 0.1: still 0.5
        (False, False, 0.1, 0.5),
        # a query match lifts a weak title score to 1
        (True, False, 0.15, 1.0),
        # so does a category match
        (False, True, 0.15, 1.0),
        # below 0.1 the factor is 0.1 even when query and category match
        (True, True, 0.099, 0.1),
        (False, False, 0.05, 0.1),
        # no type word in common: 0 even when query and category match
        (True, True, 0.0, 0.0),
    ],
)
def test_type_factor(query_match: bool, category_match: bool, title_score: float, factor: float) -> None:
    assert type_factor(query_match, category_match, title_score) == factor


@pytest.mark.parametrize(
    ("goal", "product", "expected"),
    [
        # same query, same category, same type words: (factor, query, category, title score)
        ({}, {}, (1.0, True, True, 1.0)),
        # query compared trimmed and lowercased
        ({}, {"query": "  Men's Running Shoes "}, (1.0, True, True, 1.0)),
        # another query, 2 of 3 category parts shared (order does not matter): category match
        ({}, {"query": "women's running shoes", "category": ("Shoes", "Women", "Clothing")}, (1.0, False, True, 1.0)),
        # another query, 1 part shared, but "running" is 1 of the 2 type words {running, shoe}: 0.5 > 0.2
        (
            {},
            {
                "query": "sneakers",
                "category": ("Clothing", "Sports"),
                "title": "Trail Sneakers for Running",
                "product_type": "sneakers",
            },
            (1.0, False, False, 0.5),
        ),
        # 1 of 6 type words (knife of stainless steel chef knife block set), nothing else: 0.5
        (
            {"product_type": "stainless steel chef knife block set"},
            {
                "query": "paring knife",
                "category": ("Home", "Kitchen"),
                "title": "Paring Knife",
                "product_type": "paring knife",
            },
            (0.5, False, False, 1 / 6),
        ),
        # the same with 2 category parts shared: 1.0
        (
            {"product_type": "stainless steel chef knife block set", "category": ("Home", "Kitchen", "Knives")},
            {
                "query": "paring knife",
                "category": ("Home", "Kitchen"),
                "title": "Paring Knife",
                "product_type": "paring knife",
            },
            (1.0, False, True, 1 / 6),
        ),
        # 1 of 11 type words (garden) is below 0.1: 0.1 although query and category match
        (
            {"product_type": "extra large heavy duty stainless steel outdoor garden storage shed kit"},
            {"title": "Garden Hose", "product_type": "hose"},
            (0.1, True, True, 1 / 11),
        ),
        # no type word in common: 0 although query and category match
        ({}, {"title": "Garden Hose", "product_type": "hose"}, (0.0, True, True, 0.0)),
        # the product's type words count as well as its title ("shoes" folds to "shoe")
        ({}, {"title": "Stride Road Runner", "product_type": "running shoe"}, (1.0, True, True, 1.0)),
        # a goal without type words gets title score 0.2; with no query or category match that is 0.5
        ({"product_type": ""}, {"query": "hose", "category": ("Garden",)}, (0.5, False, False, 0.2)),
        # ... and with a query match 1.0
        ({"product_type": ""}, {"category": ("Garden",)}, (1.0, True, False, 0.2)),
    ],
)
def test_type_match(goal: dict[str, Any], product: dict[str, Any], expected: tuple[float, bool, bool, float]) -> None:
    match = type_match(dataclasses.replace(GOAL, **goal), dataclasses.replace(PRODUCT, **product))
    factor, query_match, category_match, title_score = expected
    assert (match.factor, match.query_match, match.category_match) == (factor, query_match, category_match)
    assert match.title_score == pytest.approx(title_score)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # lowercased, "'s" leaves a one-letter word that is dropped, plural folded
        ("Men's Running Shoes", {"men", "running", "shoe"}),
        # function words dropped; -ies -> -y
        ("Bags and Accessories for the Kitchen", {"bag", "accessory", "kitchen"}),
        # -sses / -ches / -xes lose "es"; -ss and short words are kept
        ("glasses watches boxes dress bus", {"glass", "watch", "box", "dress", "bus"}),
        # -ses after a vowel only loses "s", so "cases" meets "case"
        ("phone cases", {"phone", "case"}),
        # nothing left
        ("a / the", set()),
    ],
)
def test_type_words(text: str, words: set[str]) -> None:
    assert type_words(text) == words


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        # case and punctuation
        ("Navy-Blue", "navy"),
        # British spelling of gray, inside a longer value
        ("Heather Grey", "heather gray"),
        # a longer variant wins over the shorter one inside it
        ("Charcoal Grey", "charcoal"),
        ("Multi-Colour", "multicolor"),
        ("multi colored", "multicolor"),
        # abbreviations
        ("BLK", "black"),
        # whole words only: "standard" keeps its "tan", "greyhound" its "grey"
        ("standard", "standard"),
        ("greyhound", "greyhound"),
        # sizes pass through, only lowercased
        ("X-Large", "x large"),
    ],
)
def test_normalize_color(value: str, normalized: str) -> None:
    assert normalize_color(value) == normalized


@pytest.mark.parametrize(
    ("a", "b", "score", "matched"),
    [
        # equal after lowercasing
        ("Navy", "navy", 100, True),
        # one word added: the subset scores 100
        ("essential oils", "essential oils for hair", 100, True),
        # ratio 96 (26 of 27 characters)
        ("essential oil", "essential oils", 96, True),
        # 85.7 rounds to 86 > 85
        ("machine wash", "machine washable", 86, True),
        # 84.8 rounds to 85, not above 85
        ("wireless charging", "wireless charger", 85, False),
        # 40/47 = 85.1 rounds to 85 (WebShop rounds to an integer before comparing): no match
        ("abcdefghijklmnopqrst", "abcdefghijklmnopqrstuvwxyza", 85, False),
        # grey and gray without normalisation: 75
        ("grey", "gray", 75, False),
        # WebShop's leniency, kept: punctuation splits "x-small", whose words contain "small"
        ("small", "x-small", 100, True),
        # non-ASCII characters are dropped, as thefuzz 0.19 does
        ("café", "caf", 100, True),
        # no words at all
        ("", "navy", 0, False),
    ],
)
def test_fuzzy_match(a: str, b: str, score: int, matched: bool) -> None:
    assert fuzzy_score(a, b) == score
    assert fuzzy_match(a, b) is matched


@pytest.mark.parametrize(
    ("attribute", "product", "matched"),
    [
        # among the attributes
        ("lightweight", {}, True),
        # fuzzy among the attributes (96)
        ("light weight", {}, True),
        # not anywhere
        ("waterproof", {}, False),
        # in the description, case-insensitive
        ("Waterproof", {"description": "Fully WATERPROOF upper."}, True),
        # a substring of a longer word counts, as in WebShop
        ("proof", {"description": "Fully waterproof upper."}, True),
        # bullet points are joined by spaces, so a phrase may span two of them
        ("upper cushioned", {}, True),
    ],
)
def test_attribute_matched(attribute: str, product: dict[str, Any], matched: bool) -> None:
    assert attribute_matched(attribute, dataclasses.replace(PRODUCT, **product)) is matched


@pytest.mark.parametrize(
    ("wanted", "chosen", "count"),
    [
        # both
        ({"color": "navy", "size": "large"}, {"color": "navy", "size": "large"}, 2),
        # colour variant on the chosen side
        ({"color": "navy", "size": "large"}, {"color": "Navy Blue", "size": "small"}, 1),
        # colour variant on the wanted side
        ({"color": "grey"}, {"color": "gray"}, 1),
        # nothing chosen
        ({"color": "navy"}, {}, 0),
        # nothing wanted
        ({}, {"color": "navy"}, 0),
    ],
)
def test_options_matched(wanted: dict[str, str], chosen: dict[str, str], count: int) -> None:
    assert options_matched(wanted, chosen) == count


@pytest.mark.parametrize(
    ("price", "limit", "ok"),
    [
        # under
        (39.99, 50.0, True),
        # equal is within
        (50.0, 50.0, True),
        # over
        (50.01, 50.0, False),
    ],
)
def test_price_ok(price: float, limit: float, ok: bool) -> None:
    assert price_ok(price, limit) is ok


def make_task(goal: dict[str, Any] | None = None) -> Task:
    """A WebShop task storing ``goal`` (the running example's goal by default) as JSONL would."""
    return Task(
        id="webshop/0",
        env="WebShop",
        family="shop",
        prompt=GOAL.instruction,
        answer=None,
        metadata={"goal": GOAL.to_dict() if goal is None else goal},
    )


def test_webshop_reward_scores_the_purchase_from_evidence() -> None:
    # wrong size: 4/5, the same as webshop_score on the records
    purchase = dataclasses.replace(PURCHASE, options={"color": "navy", "size": "small"})
    evidence = {"purchase": purchase.to_dict(), "product": PRODUCT.to_dict()}
    result = webshop_reward(make_task(), Trajectory(), evidence)
    assert result.value == pytest.approx(4 / 5)
    assert result == webshop_score(GOAL, PRODUCT, purchase)


@pytest.mark.parametrize(
    "evidence",
    [
        # no purchase key
        {},
        # the env says explicitly that nothing was bought
        {"purchase": None, "product": None},
    ],
)
def test_webshop_reward_without_purchase_is_zero(evidence: dict[str, Any]) -> None:
    result = webshop_reward(make_task(), Trajectory(), evidence)
    assert result.value == 0.0
    assert result.components["purchased"] == 0.0
    assert result.components["success"] == 0.0
    # what the goal wanted is still reported
    assert (result.components["attributes_total"], result.components["options_total"]) == (2.0, 2.0)


@pytest.mark.parametrize(
    ("task", "evidence", "message"),
    [
        # the task carries no goal
        (Task(id="webshop/1", env="WebShop", family="shop", prompt="", answer=None), {}, "task.metadata"),
        # a purchase without the product record
        (make_task(), {"purchase": PURCHASE.to_dict()}, 'evidence\\["product"\\]'),
        # a purchase dict missing its price
        (
            make_task(),
            {"purchase": {"asin": "B0RUN", "options": {}}, "product": PRODUCT.to_dict()},
            "expected key 'price'",
        ),
        # a goal with attributes as one string instead of a list
        (make_task({**GOAL.to_dict(), "attributes": "lightweight"}), {}, "expected Goal.attributes"),
    ],
)
def test_webshop_reward_errors(task: Task, evidence: dict[str, Any], message: str) -> None:
    with pytest.raises(RewardComputationError, match=message):
        webshop_reward(task, Trajectory(), evidence)


@pytest.mark.parametrize("record", [GOAL, PRODUCT, PURCHASE, PRODUCT.reviews[0]])
def test_records_round_trip_through_json(record: Any) -> None:
    data = json.loads(json.dumps(record.to_dict()))
    assert type(record).from_dict(data) == record


def test_goal_round_trips_through_a_task_jsonl_line() -> None:
    # the way tasks are stored: the goal dict inside Task.metadata, one JSON line per task
    line = make_task().to_json()
    restored = Task.from_dict(json.loads(line))
    assert Goal.from_dict(restored.metadata["goal"]) == GOAL


def test_records_accept_a_category_written_as_text() -> None:
    # WebShop's own data writes the path as "A › B › C"
    data = {**GOAL.to_dict(), "category": "Clothing › Men ›Shoes"}
    assert Goal.from_dict(data).category == ("Clothing", "Men", "Shoes")
    assert GOAL.category_text == "Clothing › Men › Shoes"
    assert parse_category(PRODUCT.category_text) == PRODUCT.category


@pytest.mark.parametrize(
    ("build", "message"),
    [
        # a missing required key names the key
        (lambda: Product.from_dict({"asin": "B1"}), "expected key 'title' in the Product dict"),
        # no price limit
        (lambda: dataclasses.replace(GOAL, price_upper=0.0), "expected Goal.price_upper > 0"),
        # a negative price
        (lambda: dataclasses.replace(PRODUCT, price=-1.0), "expected Product.price to be a finite number"),
        # an option group whose values are one string
        (lambda: dataclasses.replace(PRODUCT, options={"color": "navy"}), "expected Product.options\\['color'\\]"),
        # a chosen option that is not a string
        (lambda: Purchase("B1", {"size": 10}, 1.0), "expected Purchase.options\\['size'\\] to be a string"),
        # an empty id
        (lambda: Purchase(" ", {}, 1.0), "expected Purchase.asin to be a non-empty id"),
        # a rating out of range
        (lambda: Review(6, "", ""), "expected Review.rating"),
    ],
)
def test_records_reject_malformed_fields(build: Any, message: str) -> None:
    with pytest.raises(RecordFormatError, match=message):
        build()
