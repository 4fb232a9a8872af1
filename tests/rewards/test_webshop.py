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
    option_key,
    price_ok,
    strict_option_matched,
    type_factor,
    type_match,
    type_words,
    webshop_normalize_color,
    webshop_options_matched,
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


def score(goal: dict[str, Any] | None = None, product: dict[str, Any] | None = None, *, grader: str = "strict",
          named: bool = True, **purchase: Any) -> float:
    """The score of the running example with some fields replaced."""
    return webshop_score(
        dataclasses.replace(GOAL, **(goal or {})),
        dataclasses.replace(PRODUCT, **(product or {})),
        dataclasses.replace(PURCHASE, **purchase),
        grader=grader,
        named=named,
    ).value


# Each case: (goal fields, product fields, purchase fields, strict score, WebShop's score). The goal's options are
# compared as a synthetic goal's, with their group names, under "webshop": ("color", "navy") is the colour word
# "navy" (a colour word of WebShop's list equal to the value), ("size", "large") is the text "size large".
# The "webshop" column was also checked against WebShop's own get_reward (thefuzz 0.19.0, type factor given).
@pytest.mark.parametrize(
    ("goal", "product", "purchase", "strict", "webshop"),
    [
        # exact match: (2 attributes + 2 options + price) / 5 = 5/5, type factor 1; "large" is a subset of
        # "size large" (100)
        ({}, {}, {}, 1.0, 1.0),
        # "non slip" is nowhere in the product (attributes, title, bullets, description): (1 + 2 + 1) / 5
        ({}, {"attributes": ("lightweight",)}, {}, 4 / 5, 4 / 5),
        # wrong size ("small" shares no word with "size large"): (2 + 1 + 1) / 5
        ({}, {}, {"options": {"color": "navy", "size": "small"}}, 4 / 5, 4 / 5),
        # wrong colour and wrong size: (2 + 0 + 1) / 5
        ({}, {}, {"options": {"color": "red", "size": "small"}}, 3 / 5, 3 / 5),
        # an option left unchosen counts as unmatched: (2 + 1 + 1) / 5
        ({}, {}, {"options": {"color": "navy"}}, 4 / 5, 4 / 5),
        # one cent over the limit: (2 + 2 + 0) / 5
        ({}, {}, {"price": 50.01}, 4 / 5, 4 / 5),
        # exactly at the limit is within it: 5/5
        ({}, {}, {"price": 50.0}, 1.0, 1.0),
        # nothing right but the type: (0 + 0 + 0) / 5 = 0 whatever the factor
        ({}, {"attributes": ()}, {"options": {}, "price": 99.0}, 0.0, 0.0),
        # x-large for large: strict, another value of the group; WebShop: "x large" vs "size large" scores 83: 4/5
        ({}, {}, {"options": {"color": "navy", "size": "x-large"}}, 4 / 5, 4 / 5),
        # large for x-large: strict 4/5; WebShop: "large" is a subset of "size x large" (100): 5/5
        ({"options": {"color": "navy", "size": "x-large"}}, {}, {}, 4 / 5, 1.0),
        # navy blue for navy: strict, navy is offered so only navy is navy: 4/5; WebShop turns "navy blue" into
        # "blue" (blue comes before navy in its colour list), and blue is not navy: 4/5
        ({}, {}, {"options": {"color": "navy blue", "size": "large"}}, 4 / 5, 4 / 5),
        # grey wanted, "heather grey" chosen: strict, "heather gray" is not "gray": 4/5; WebShop turns "heather
        # grey" into "grey" (grey comes before heather in its list) and ("color", "grey") into "grey": 5/5
        ({"options": {"color": "grey", "size": "large"}}, {}, {"options": {"color": "heather grey", "size": "large"}},
         4 / 5, 1.0),
        # gray wanted, "heather grey" chosen: WebShop's "grey" vs "gray" scores 75: 4/5 under both
        ({"options": {"color": "gray", "size": "large"}}, {}, {"options": {"color": "heather grey", "size": "large"}},
         4 / 5, 4 / 5),
        # a value the product does not offer, written another way: grey wanted, gray chosen, strict compares their
        # keys (gray = gray): 5/5; WebShop: "gray" vs "grey" 75: 4/5
        ({"options": {"color": "grey", "size": "large"}}, {"options": {"color": ("gray",), "size": ("large",)}},
         {"options": {"color": "gray", "size": "large"}}, 1.0, 4 / 5),
        # the groups swapped: strict compares each group's own value: (2 + 0 + 1) / 5; WebShop compares each wanted
        # value with every chosen one: 5/5
        ({}, {}, {"options": {"size": "navy", "color": "large"}}, 3 / 5, 1.0),
        # the other pack size: strict 4/5; WebShop: "16 fl oz pack of 1" vs "size 16 fl oz pack of 2" scores 94: 5/5
        ({"options": {"color": "navy", "size": "16 fl oz (pack of 2)"}},
         {"options": {"color": ("navy",), "size": ("16 fl oz (pack of 1)", "16 fl oz (pack of 2)")}},
         {"options": {"color": "navy", "size": "16 fl oz (pack of 1)"}}, 4 / 5, 1.0),
        # the issue's case: 8.12 fl oz (pack of 1) for 16 fl oz (pack of 2); with the group name WebShop scores 84
        ({"options": {"color": "navy", "size": "16 fl oz (pack of 2)"}},
         {"options": {"color": ("navy",), "size": ("8.12 fl oz (pack of 1)", "16 fl oz (pack of 2)")}},
         {"options": {"color": "navy", "size": "8.12 fl oz (pack of 1)"}}, 4 / 5, 4 / 5),
        # WebShop turns "standard" into "tan" (its colour rule is a substring test), so the right size fails there
        ({"options": {"color": "navy", "size": "standard"}}, {"options": {"color": ("navy",), "size": ("standard",)}},
         {"options": {"color": "navy", "size": "standard"}}, 1.0, 4 / 5),
        # fuzzy attribute: "light weight" vs "lightweight" scores 96 > 85: 5/5
        ({}, {"attributes": ("light weight", "non slip")}, {}, 1.0, 1.0),
        # "non slip" is not an attribute but is in the description (lowercased): 5/5
        ({}, {"attributes": ("lightweight",), "description": "NON SLIP rubber outsole."}, {}, 1.0, 1.0),
        # ... or in a bullet point: 5/5
        ({}, {"attributes": ("lightweight",), "features": ("Mesh upper", "Non slip sole")}, {}, 1.0, 1.0),
        # ... or in the title: 5/5
        ({}, {"attributes": ("lightweight",), "title": "Stride Non Slip Running Shoes"}, {}, 1.0, 1.0),
        # the text fallback is an exact substring, not fuzzy: "non-slip" does not contain "non slip": 4/5
        ({}, {"attributes": ("lightweight",), "title": "Stride Non-Slip Running Shoes"}, {}, 4 / 5, 4 / 5),
        # a wanted attribute written with capitals: strict lowercases it; WebShop looks for "Non Slip" in the
        # lowercased text and misses it: 4/5
        ({"attributes": ("lightweight", "Non Slip")}, {"attributes": ("lightweight",), "description": "non slip sole"},
         {}, 1.0, 4 / 5),
        # a goal without attributes or options: price alone, 1/1
        ({"attributes": (), "options": {}}, {}, {}, 1.0, 1.0),
        # type factor 0.5 (other query, one shared category part, 1 of 6 type words) times 5/5
        (
            {"product_type": "stainless steel chef knife block set", "category": ("Home", "Kitchen", "Knives")},
            {"product_type": "paring knife", "title": "Paring Knife", "query": "paring knife",
             "category": ("Home", "Tools")},
            {},
            0.5,
            0.5,
        ),
        # the same with category parts that differ only in case: strict folds case (2 shared: factor 1.0);
        # WebShop compares them as written (1 shared: 0.5)
        (
            {"product_type": "stainless steel chef knife block set", "category": ("Home", "Kitchen", "Knives")},
            {"product_type": "paring knife", "title": "Paring Knife", "query": "paring knife",
             "category": ("Home", "kitchen")},
            {},
            1.0,
            0.5,
        ),
        # type factor 0 (no type word in common) zeroes a purchase that is otherwise perfect
        ({}, {"title": "Garden Hose", "product_type": "hose"}, {}, 0.0, 0.0),
        # type factor 0.1 times (1 + 2 + 1) / 5
        (
            {"product_type": "extra large heavy duty stainless steel outdoor garden storage shed kit"},
            {"title": "Garden Hose", "product_type": "hose", "attributes": ("lightweight",)},
            {},
            0.1 * 4 / 5,
            0.1 * 4 / 5,
        ),
    ],
)
def test_webshop_score(
    goal: dict[str, Any], product: dict[str, Any], purchase: dict[str, Any], strict: float, webshop: float
) -> None:
    assert score(goal, product, **purchase) == pytest.approx(strict)
    assert score(goal, product, grader="webshop", **purchase) == pytest.approx(webshop)


# A human goal's options are bare values (WebShop's items_human_ins.json has no group names): (group-free)
# "webshop" compares them with every chosen value; strict still compares the value chosen in the group the
# converter gave the wanted value (its product's group that offers it).
@pytest.mark.parametrize(
    ("goal", "product", "purchase", "strict", "webshop"),
    [
        # exact: 5/5
        ({}, {}, {}, 1.0, 1.0),
        # x-large for large: "large" is a subset of "x large" (100): WebShop 5/5, strict 4/5
        ({}, {}, {"options": {"color": "navy", "size": "x-large"}}, 4 / 5, 1.0),
        # the issue's case without group names: "8.12 fl oz pack of 1" vs "16 fl oz pack of 2" scores 89: 5/5
        ({"options": {"color": "navy", "size": "16 fl oz (pack of 2)"}},
         {"options": {"color": ("navy",), "size": ("8.12 fl oz (pack of 1)", "16 fl oz (pack of 2)")}},
         {"options": {"color": "navy", "size": "8.12 fl oz (pack of 1)"}}, 4 / 5, 1.0),
        # white wanted, "black | white" chosen: WebShop turns it into "black": 4/5 under both
        ({"options": {"color": "white", "size": "large"}}, {"options": {"color": ("white", "black | white"),
                                                                          "size": ("large",)}},
         {"options": {"color": "black | white", "size": "large"}}, 4 / 5, 4 / 5),
        # a value the product does not offer, kept under "unmatched 1": strict matches it with any chosen value of
        # the same key ("XL" = "x-large"); WebShop: "xl" vs "x large" 57: 4/5
        ({"options": {"color": "navy", "unmatched 1": "XL"}}, {}, {"options": {"color": "navy", "size": "x-large"}},
         1.0, 4 / 5),
    ],
)
def test_webshop_score_of_a_human_goal(
    goal: dict[str, Any], product: dict[str, Any], purchase: dict[str, Any], strict: float, webshop: float
) -> None:
    assert score(goal, product, named=False, **purchase) == pytest.approx(strict)
    assert score(goal, product, grader="webshop", named=False, **purchase) == pytest.approx(webshop)


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
    ("value", "key"),
    [
        # case, punctuation and spacing
        ("Navy-Blue", "navy"),
        ("  Heather   Grey ", "heather gray"),
        # a longer colour variant wins over the shorter one inside it
        ("Charcoal Grey", "charcoal"),
        ("Multi-Colour", "multicolor"),
        # abbreviations
        ("BLK", "black"),
        # whole words only: "standard" keeps its "tan", "greyhound" its "grey"
        ("standard", "standard"),
        ("greyhound", "greyhound"),
        # sizes: one code per size, and distinct sizes stay distinct
        ("X-Large", "xl"),
        ("Extra Large", "xl"),
        ("large", "large"),
        ("XX-Large", "2xl"),
        ("2XL", "2xl"),
        ("3X-Large", "3xl"),
        ("x-small", "xs"),
        ("Twin XL", "twin xl"),
        # pack counts and units
        ("16 Fl Oz (Pack of 2)", "16 fl oz pack of 2"),
        ("16 fl. oz, 2-pack", "16 fl oz pack of 2"),
        ("16 Fluid Ounces (Pack of 1)", "16 fl oz pack of 1"),
        ("12 Ounce (Pack of 3)", "12 oz pack of 3"),
        ("24 Count", "pack of 24"),
        ("2 Pounds", "2 lb"),
        # numbers: a decimal is one number, trailing zeros do not count, a number is split from its unit
        ("8.12 fl oz", "8.12 fl oz"),
        ("7.50", "7.5"),
        ("16oz", "16 oz"),
    ],
)
def test_option_key(value: str, key: str) -> None:
    assert option_key(value) == key


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        # the first colour of WebShop's list found anywhere in the text: blue comes before navy
        ("navy blue", "blue"),
        # a substring test: "standard" holds "tan", "sandalwood" holds "sand"
        ("standard", "tan"),
        ("sandalwood", "sand"),
        # case-sensitive: "Black" holds no colour of the (lowercase) list
        ("Black", "Black"),
        # no colour: unchanged
        ("x-large", "x-large"),
        # a synthetic goal's (group, value) pair: a colour only when the whole value is one
        (("color", "black"), "black"),
        (("color", "navy blue"), ("color", "navy blue")),
    ],
)
def test_webshop_normalize_color(value: str | tuple[str, str], normalized: str | tuple[str, str]) -> None:
    assert webshop_normalize_color(value) == normalized


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
        # a (group, value) pair is compared as its text, "('size', 'large')" -> "size large": a subset (100) ...
        ("large", ("size", "large"), 100, True),
        # ... or not: "large x" vs "large size" scores 83
        ("x-large", ("size", "large"), 83, False),
        # difflib's ratio, as thefuzz 0.19 uses it without python-Levenshtein: "fl of oz pack 1 12 8" vs
        # "fl of oz pack 16 2" (2 * 17 / 38 = 89.5)
        ("8.12 fl oz (pack of 1)", "16 fl oz (pack of 2)", 89, True),
    ],
)
def test_fuzzy_match(a: str, b: object, score: int, matched: bool) -> None:
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
    ("group", "wanted", "chosen", "matched"),
    [
        # the value chosen in the wanted group
        ("size", "large", {"size": "large", "color": "navy"}, True),
        # spelled another way (case, punctuation)
        ("size", "LARGE", {"size": "large"}, True),
        # another value of the group: x-large is not large, large is not x-large
        ("size", "large", {"size": "x-large"}, False),
        ("size", "x-large", {"size": "large"}, False),
        # the right value in another group does not count
        ("size", "large", {"color": "large", "size": "small"}, False),
        # navy and navy blue are both offered: only navy is navy
        ("color", "navy", {"color": "navy blue"}, False),
        # heather grey is offered, grey is not: their keys differ
        ("color", "grey", {"color": "heather grey"}, False),
        # a value not offered, matched by key: XL is x-large
        ("size", "XL", {"size": "x-large"}, True),
        # group names compared by key too ("Colour" is "color")
        ("Colour", "navy", {"color": "navy"}, True),
        # no group of that name chosen: any chosen value of the same key
        ("unmatched 1", "x-large", {"color": "navy", "size": "x-large"}, True),
        ("unmatched 1", "large", {"color": "navy", "size": "x-large"}, False),
        # nothing chosen
        ("color", "navy", {}, False),
    ],
)
def test_strict_option_matched(group: str, wanted: str, chosen: dict[str, str], matched: bool) -> None:
    assert strict_option_matched(group, wanted, chosen, PRODUCT) is matched


@pytest.mark.parametrize(
    ("wanted", "chosen", "named", "count"),
    [
        # both, with group names ("navy"; "size large" vs "large": 100)
        ({"color": "navy", "size": "large"}, {"color": "navy", "size": "large"}, True, 2),
        # "navy blue" becomes "blue", which is not navy
        ({"color": "navy", "size": "large"}, {"color": "navy blue", "size": "small"}, True, 0),
        # a wanted value is compared with every chosen value, whatever its group
        ({"color": "navy"}, {"size": "navy"}, True, 1),
        # "black | white" becomes "black"; ("color", "white") is "white"
        ({"color": "white"}, {"color": "black | white"}, True, 0),
        # bare values (a human goal): large matches x-large
        ({"size": "large"}, {"size": "x-large"}, False, 1),
        # ... not with the group name (83)
        ({"size": "large"}, {"size": "x-large"}, True, 0),
        # nothing chosen; nothing wanted
        ({"color": "navy"}, {}, True, 0),
        ({}, {"color": "navy"}, True, 0),
    ],
)
def test_webshop_options_matched(wanted: dict[str, str], chosen: dict[str, str], named: bool, count: int) -> None:
    assert webshop_options_matched(wanted, chosen, named=named) == count


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


@pytest.mark.parametrize(
    ("source", "written", "grader", "expected"),
    [
        # the default grader is strict: x-large is not large, (2 + 1 + 1) / 5
        (None, None, None, 4 / 5),
        ("human", None, "strict", 4 / 5),
        # WebShop's, with group names (a goal made here): "x large" vs "size large" 83, 4/5
        (None, None, "webshop", 4 / 5),
        # WebShop's, a human goal: bare values, "large" is a subset of "x large": 5/5
        ("human", None, "webshop", 1.0),
        # ... as its file writes them: "Navy Blue" (capitals: no colour of WebShop's lowercase list) contains
        # the chosen "navy"; the lowercased "navy blue" would become "blue" and miss it
        ("human", ["Navy Blue", "large"], "webshop", 1.0),
        ("human", ["navy blue", "large"], "webshop", 4 / 5),
    ],
)
def test_webshop_reward_grader(source: str | None, written: list[str] | None, grader: str | None,
                               expected: float) -> None:
    task = make_task()
    task = dataclasses.replace(task, metadata={**task.metadata, "source": source, "written_options": written})
    purchase = dataclasses.replace(PURCHASE, options={"color": "navy", "size": "x-large"})
    evidence = {"purchase": purchase.to_dict(), "product": PRODUCT.to_dict()}
    if grader is not None:
        evidence["grader"] = grader
    assert webshop_reward(task, Trajectory(), evidence).value == pytest.approx(expected)


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
        # a grader that does not exist
        (make_task(), {"grader": "loose"}, "expected a WebShop grader, one of \\['strict', 'webshop'\\], got 'loose'"),
    ],
)
def test_webshop_reward_errors(task: Task, evidence: dict[str, Any], message: str) -> None:
    with pytest.raises(RewardComputationError, match=message):
        webshop_reward(task, Trajectory(), evidence)


@pytest.mark.parametrize(
    "record", [GOAL, PRODUCT, PURCHASE, PRODUCT.reviews[0], dataclasses.replace(PRODUCT, price_range=(29.99, 49.99))]
)
def test_records_round_trip_through_json(record: Any) -> None:
    data = json.loads(json.dumps(record.to_dict()))
    assert type(record).from_dict(data) == record


def test_a_product_writes_its_price_range_only_when_it_has_one() -> None:
    # the bundled catalogue's lines (no range) stay as they are
    assert "price_range" not in PRODUCT.to_dict()
    assert dataclasses.replace(PRODUCT, price_range=(29.99, 49.99)).to_dict()["price_range"] == [29.99, 49.99]


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
        # a price range that does not hold the price, or is not two numbers
        (lambda: dataclasses.replace(PRODUCT, price_range=(40.0, 50.0)), "expected Product.price_range to hold"),
        (lambda: dataclasses.replace(PRODUCT, price_range=(30.0,)), "expected Product.price_range to be"),
    ],
)
def test_records_reject_malformed_fields(build: Any, message: str) -> None:
    with pytest.raises(RecordFormatError, match=message):
        build()
