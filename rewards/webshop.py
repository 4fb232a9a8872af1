"""The WebShop grader: how well a purchase meets a shopping goal (Yao et al. 2022).

WebShop scores a purchase with one formula::

    score = type_factor * (attributes matched + options matched + [price <= limit])
                        / (attributes wanted + options wanted + 1)

* An attribute the goal wants is matched when one of the product's attributes has a fuzzy
  token-set ratio above :data:`FUZZY_THRESHOLD` (85) with it, or, failing that, when it appears
  word for word (case-insensitive substring) in the product's title, bullet points or description.
* An option the goal wants is matched when, after colour normalisation of both sides, one of the
  chosen option values has a token-set ratio above 85 with it. As in WebShop, the wanted value is
  compared with every chosen value, not only with the one of its own group.
* The type factor is 1.0, 0.5, 0.1 or 0.0 from three signals: the product was listed under the
  goal's search term (query match), the two category paths share at least two parts (category
  match), and the share of the goal's type words found in the product (title score). See
  :func:`type_factor` for the thresholds.

The purchase succeeds when the score is 1.0: right type, every attribute, every option, within the
price limit.

Where this differs from WebShop's code, and why:

* WebShop's title score compares the nouns spaCy finds in the two product titles. spaCy's model
  cannot be downloaded here, so the goal's side is the catalogue's own type words
  (:attr:`~tasks.webshop.Goal.product_type`) and the product's side is its title plus its type
  words; both are lowercased, split into words, stripped of a few function words and folded to a
  crude singular (:func:`type_words`). A goal without type words gets title score 0.2, as a title
  without nouns does in WebShop.
* WebShop's colour normaliser keeps the first word of a fixed colour list (in alphabetical order)
  found anywhere in the value as a substring, so "navy blue" becomes "blue" (and no longer matches
  "navy") and a size "standard" becomes "tan". :func:`normalize_color` instead rewrites whole-word
  colour variants to one spelling ("grey" -> "gray", "navy blue" -> "navy", "multi-colour" ->
  "multicolor") and leaves every other word alone; the token-set ratio already forgives extra
  words such as "dark" or "heather".
* Query and category parts are compared after trimming and lowercasing.

Kept on purpose, for comparability with published WebShop numbers: the fuzzy matcher processes
text as thefuzz 0.19 does (ASCII only, lowercase, punctuation to spaces) and rounds the ratio to an
integer before the ``> 85`` test, so "small" matches "x-small" (a subset of the words scores 100).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from rapidfuzz import fuzz, utils

from rewards.base import RewardResult
from rewards.errors import RewardComputationError
from tasks.records import Task, Trajectory
from tasks.webshop.records import Goal, Product, Purchase, RecordFormatError

FUZZY_THRESHOLD = 85
"""A fuzzy match needs a token-set ratio (0-100, rounded to an integer) strictly above this, as in WebShop."""

NO_TYPE_WORDS_SCORE = 0.2
"""The title score of a goal that has no type words (WebShop's score for a title without nouns)."""

_COLOR_VARIANTS: dict[str, str] = {
    "grey": "gray",
    "gry": "gray",
    "charcoal grey": "charcoal",
    "charcoal gray": "charcoal",
    "navy blue": "navy",
    "dark navy": "navy",
    "blk": "black",
    "wht": "white",
    "golden": "gold",
    "fuschia": "fuchsia",
    "camouflage": "camo",
    "transparent": "clear",
    "bordeaux": "burgundy",
    "wine red": "burgundy",
    "multicolour": "multicolor",
    "multicoloured": "multicolor",
    "multicolored": "multicolor",
    "multi colour": "multicolor",
    "multi color": "multicolor",
    "multi coloured": "multicolor",
    "multi colored": "multicolor",
}
"""Colour variant (whole words, after lowercasing and punctuation to spaces) -> its one spelling."""

_COLOR_PATTERN = re.compile(
    r"\b(" + "|".join(re.escape(v) for v in sorted(_COLOR_VARIANTS, key=len, reverse=True)) + r")\b"
)
_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_WORDS = frozenset({"a", "an", "and", "by", "for", "in", "of", "on", "or", "the", "to", "with"})

_Record = TypeVar("_Record", Goal, Product, Purchase)


def normalize_color(value: str) -> str:
    """Rewrite the colour variants in an option value to one spelling.

    The value is lowercased, every run of non-alphanumeric characters becomes one space, and each
    whole-word variant in the module's table is replaced (longest first). Values that are not
    colours pass through with only the case and punctuation changed.

    Args:
        value: An option value, e.g. ``"Navy-Blue"`` or ``"X-Large"``.

    Returns:
        The normalised value.

    Example:
        >>> normalize_color("Heather Grey"), normalize_color("Navy-Blue"), normalize_color("standard")
        ('heather gray', 'navy', 'standard')
    """
    text = " ".join(re.findall(r"[^\W_]+", value.lower()))
    return _COLOR_PATTERN.sub(lambda match: _COLOR_VARIANTS[match.group(1)], text)


def fuzzy_score(a: str, b: str) -> int:
    """WebShop's fuzzy similarity: the token-set ratio of two texts, rounded to an integer.

    Both texts are processed as thefuzz 0.19 (which WebShop pins) does by default: non-ASCII
    characters dropped, lowercased, punctuation turned into spaces. When the words of one text are
    a subset of the other's, the score is 100.

    Args:
        a: One text.
        b: The other text.

    Returns:
        An integer from 0 to 100; 0 when either text has no words.

    Example:
        >>> fuzzy_score("essential oil", "Essential Oils"), fuzzy_score("small", "x-small")
        (96, 100)
    """
    return round(fuzz.token_set_ratio(_ascii(a), _ascii(b), processor=utils.default_process))


def fuzzy_match(a: str, b: str) -> bool:
    """True when :func:`fuzzy_score` is above :data:`FUZZY_THRESHOLD` (85).

    Example:
        >>> fuzzy_match("essential oil", "essential oils"), fuzzy_match("grey", "gray")
        (True, False)
    """
    return fuzzy_score(a, b) > FUZZY_THRESHOLD


def _ascii(text: str) -> str:
    return text.encode("ascii", "ignore").decode("ascii")


def type_words(text: str) -> frozenset[str]:
    """The words that say what a product is, as the type factor compares them.

    Lowercased alphanumeric words of two or more characters, without function words ("and",
    "for", "with", ...), each folded to a crude singular ("shoes" -> "shoe", "accessories" ->
    "accessory", "glasses" -> "glass"; "dress" stays).

    Args:
        text: A product type or a title.

    Returns:
        The set of folded words.

    Example:
        >>> sorted(type_words("Women's Running Shoes and Accessories"))
        ['accessory', 'running', 'shoe', 'women']
    """
    words = _WORD.findall(text.lower())
    return frozenset(_singular(word) for word in words if len(word) > 1 and word not in _FUNCTION_WORDS)


def _singular(word: str) -> str:
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


@dataclass(frozen=True)
class TypeMatch:
    """How well a product's type fits a goal's, and the signals behind it.

    Attributes:
        factor: The type factor, 1.0, 0.5, 0.1 or 0.0 (:func:`type_factor`).
        query_match: The product was listed under the goal's search term.
        category_match: The two category paths share at least two parts, in any order.
        title_score: Share of the goal's type words found in the product's title and type words
            (0.2 when the goal has no type words).
    """

    factor: float
    query_match: bool
    category_match: bool
    title_score: float


def type_factor(query_match: bool, category_match: bool, title_score: float) -> float:
    """WebShop's type factor from its three signals.

    1.0 by default; 0.5 when neither the query nor the category matches and the title score is
    at most 0.2; 0.1 whenever the title score is below 0.1 (whatever the query and category);
    0.0 when the title score is 0.

    Args:
        query_match: The product was listed under the goal's search term.
        category_match: The category paths share at least two parts.
        title_score: Share of the goal's type words found in the product, 0 to 1.

    Returns:
        The factor the score is multiplied by.

    Example:
        >>> type_factor(False, False, 0.2), type_factor(True, True, 0.05), type_factor(True, True, 0.0)
        (0.5, 0.1, 0.0)
    """
    if title_score == 0.0:
        return 0.0
    if title_score < 0.1:
        return 0.1
    if query_match or category_match or title_score > NO_TYPE_WORDS_SCORE:
        return 1.0
    return 0.5


def type_match(goal: Goal, product: Product) -> TypeMatch:
    """Compare the product's search term, category path and type words with the goal's.

    Args:
        goal: The shopping goal.
        product: The product bought.

    Returns:
        The signals and the resulting factor.
    """
    query_match = _fold(product.query) == _fold(goal.query)
    shared = {_fold(part) for part in product.category} & {_fold(part) for part in goal.category}
    category_match = len(shared) >= 2
    wanted = type_words(goal.product_type)
    if wanted:
        found = type_words(product.title) | type_words(product.product_type)
        title_score = len(wanted & found) / len(wanted)
    else:
        title_score = NO_TYPE_WORDS_SCORE
    factor = type_factor(query_match, category_match, title_score)
    return TypeMatch(factor, query_match, category_match, title_score)


def _fold(text: str) -> str:
    return text.strip().lower()


def attribute_matched(attribute: str, product: Product) -> bool:
    """Whether the product has a wanted attribute.

    True when one of the product's attributes is a fuzzy match (:func:`fuzzy_match`) of it, or
    else when the attribute appears, lowercased, as a substring of the lowercased title, bullet
    points (joined by spaces) or description. The text check is exact, not fuzzy, as in WebShop.

    Args:
        attribute: The attribute the goal wants, e.g. ``"non slip"``.
        product: The product bought.

    Returns:
        Whether it is matched.
    """
    if any(fuzzy_match(own, attribute) for own in product.attributes):
        return True
    needle = attribute.lower()
    texts = (product.title, " ".join(product.features), product.description)
    return any(needle in text.lower() for text in texts)


def attributes_matched(attributes: Iterable[str], product: Product) -> int:
    """How many of the wanted attributes the product has (:func:`attribute_matched`).

    Args:
        attributes: The attributes the goal wants.
        product: The product bought.

    Returns:
        The count of matched attributes.
    """
    return sum(attribute_matched(attribute, product) for attribute in attributes)


def options_matched(wanted: Mapping[str, str], chosen: Mapping[str, str]) -> int:
    """How many wanted option values the buyer chose.

    Each wanted value is normalised (:func:`normalize_color`) and counts once when any chosen value,
    normalised too, is a fuzzy match of it (:func:`fuzzy_match`); group names are not compared, as
    in WebShop.

    Args:
        wanted: The goal's option group -> value.
        chosen: The purchase's option group -> value.

    Returns:
        The count of matched wanted values.

    Example:
        >>> options_matched({"color": "navy", "size": "large"}, {"color": "Navy Blue", "size": "small"})
        1
    """
    chosen_values = [normalize_color(value) for value in chosen.values()]
    return sum(any(fuzzy_match(value, normalize_color(want)) for value in chosen_values) for want in wanted.values())


def price_ok(price: float, price_upper: float) -> bool:
    """Whether the price paid is within the goal's limit (at most ``price_upper``, inclusive).

    Example:
        >>> price_ok(50.0, 50.0), price_ok(50.01, 50.0)
        (True, False)
    """
    return price <= price_upper


def webshop_score(goal: Goal, product: Product, purchase: Purchase) -> RewardResult:
    """WebShop's score of a purchase against a goal, with every component.

    Args:
        goal: The shopping goal.
        product: The product bought (its catalogue record).
        purchase: What was bought: the product id, the chosen options and the price paid.

    Returns:
        ``value`` is the score in [0, 1]. ``components``: ``type_factor``, ``query_match``,
        ``category_match``, ``title_score``, ``attributes_matched``, ``attributes_total``,
        ``options_matched``, ``options_total``, ``price_ok``, ``purchased`` (1.0) and ``success``
        (1.0 when the score is 1.0); booleans are given as 0.0 / 1.0.

    Raises:
        RewardComputationError: When ``product`` is not the product the purchase names.

    Example:
        >>> goal = Goal(asin="B1", instruction="...", product_type="running shoes",
        ...             category=("Clothing", "Shoes"), query="running shoes", attributes=("lightweight",),
        ...             options={"color": "navy"}, price_upper=50.0)
        >>> product = Product(asin="B1", title="Lightweight Running Shoes", category=("Clothing", "Shoes"),
        ...                   product_type="running shoes", query="running shoes", price=40.0,
        ...                   options={"color": ("navy", "red")})
        >>> webshop_score(goal, product, Purchase("B1", {"color": "red"}, 40.0)).value  # 2 of 3
        0.6666666666666666
    """
    if product.asin != purchase.asin:
        raise RewardComputationError(
            f"expected the record of the purchased product {purchase.asin!r}, got product {product.asin!r}"
        )
    kind = type_match(goal, product)
    n_attributes = attributes_matched(goal.attributes, product)
    n_options = options_matched(goal.options, purchase.options)
    within = price_ok(purchase.price, goal.price_upper)
    total = len(goal.attributes) + len(goal.options) + 1
    score = kind.factor * (n_attributes + n_options + within) / total
    return RewardResult(
        score,
        {
            "type_factor": kind.factor,
            "query_match": float(kind.query_match),
            "category_match": float(kind.category_match),
            "title_score": kind.title_score,
            "attributes_matched": float(n_attributes),
            "attributes_total": float(len(goal.attributes)),
            "options_matched": float(n_options),
            "options_total": float(len(goal.options)),
            "price_ok": float(within),
            "purchased": 1.0,
            "success": float(score >= 1.0),
        },
    )


def webshop_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: :func:`webshop_score` of the episode's purchase.

    The goal is ``task.metadata["goal"]``; the purchase and the purchased product are
    ``evidence["purchase"]`` and ``evidence["product"]``, each a record or its ``to_dict`` form.
    When nothing was bought (no ``"purchase"``, or None) the reward is 0.0 with ``purchased`` 0.0
    and the other components at 0 (the totals still count what the goal wanted). ``trajectory``
    is not used.

    Raises:
        RewardComputationError: When the goal is missing, a record is malformed, or a purchase
            comes without its product.
    """
    goal = _record(task.metadata.get("goal"), Goal, f'task.metadata["goal"] of task {task.id!r}')
    if evidence.get("purchase") is None:
        return _nothing_bought(goal)
    purchase = _record(evidence["purchase"], Purchase, 'evidence["purchase"]')
    product = _record(evidence.get("product"), Product, 'evidence["product"]')
    return webshop_score(goal, product, purchase)


def _record(value: Any, kind: type[_Record], where: str) -> _Record:
    if isinstance(value, kind):
        return value
    if not isinstance(value, Mapping):
        raise RewardComputationError(f"expected {where} to be a {kind.__name__} dict, got {value!r}")
    try:
        return kind.from_dict(value)
    except RecordFormatError as error:
        raise RewardComputationError(f"malformed {where}: {error}") from error


def _nothing_bought(goal: Goal) -> RewardResult:
    components = dict.fromkeys(
        ("type_factor", "query_match", "category_match", "title_score", "attributes_matched"), 0.0
    )
    components |= {
        "attributes_total": float(len(goal.attributes)),
        "options_matched": 0.0,
        "options_total": float(len(goal.options)),
        "price_ok": 0.0,
        "purchased": 0.0,
        "success": 0.0,
    }
    return RewardResult(0.0, components)
