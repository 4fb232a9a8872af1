"""The WebShop grader: how well a purchase meets a shopping goal (Yao et al. 2022), by two graders.

WebShop scores a purchase with one formula::

    score = type_factor * (attributes matched + options matched + [price <= limit])
                        / (attributes wanted + options wanted + 1)

and the purchase succeeds when the score is 1.0. The two graders (:data:`GRADERS`) share the formula,
the attribute rule, the price rule and the type factor; they differ in when a wanted option counts as
matched.

``"strict"`` (the default): an option is right only when the value chosen *in the wanted option's
group* is the wanted value (:func:`strict_option_matched`). Values are compared after
:func:`option_key` (case, spacing and punctuation; colour spellings such as ``grey``/``gray``; sizes
such as ``XL``/``x-large``; pack counts such as ``2-pack``/``pack of 2``; units such as
``ounce``/``oz``), and a value the product offers in that group word for word is only matched by
itself, so no other value of the product's group ever counts: ``x-large`` is not ``large``,
``pack of 1`` is not ``pack of 2``, ``black | white`` is not ``white``. No wrong variant of the right
product scores 1.0. Where the purchase has no group of the wanted group's name (another product's
group names, or a human goal's value its product does not offer), any chosen value counts, by the same
comparison.

``"webshop"``: WebShop's own ``get_reward`` (``web_agent_site/engine/goal.py``), for numbers that sit
beside published ones:

* :func:`webshop_normalize_color` of each side (the first word of WebShop's colour list found
  anywhere in the value, so ``"navy blue"`` becomes ``"blue"`` and ``"standard"`` becomes ``"tan"``);
* a wanted option counts when any chosen value, whatever its group, has :func:`fuzzy_score` above
  :data:`FUZZY_THRESHOLD` (85) with it;
* a synthetic goal's option is compared as WebShop compares it, as the text of its
  ``(group, value)`` pair (``"size 16 fl oz pack of 2"``), unless the value is itself a colour word of
  the list; a human goal's options (``task.metadata["source"] == "human"``) are bare values. Goals
  made here (generated and bundled) are in WebShop's synthetic form and are graded as synthetic;
* query and category parts are compared case-sensitively, and an attribute is looked up in the
  product's text without lowercasing it, as WebShop does.

Both graders:

* An attribute the goal wants is matched when one of the product's attributes has
  :func:`fuzzy_score` above 85 with it, or else when it appears word for word in the product's title,
  bullet points (joined by spaces) or description (case-insensitive under ``"strict"``).
* :func:`fuzzy_score` is thefuzz 0.19's ``token_set_ratio``, which WebShop pins, as it runs without
  python-Levenshtein (WebShop's requirements do not install it): :mod:`difflib`'s ratio, text
  processed as thefuzz 0.19 does (characters 128-255 dropped, every other non-word character a space,
  lowercased), rounded to an integer before the ``> 85`` test.
* The type factor is 1.0, 0.5, 0.1 or 0.0 from three signals: the product was listed under the goal's
  search term (query match), the two category paths share at least two parts (category match), and
  the share of the goal's type words found in the product (title score); see :func:`type_factor`.

Where ``"webshop"`` cannot be WebShop's code, and why: WebShop's title score compares the nouns spaCy
(``en_core_web_sm``) finds in the two product names. spaCy's model cannot be installed here, so the
goal's side is its type words (:attr:`~tasks.webshop.Goal.product_type`: the product's name for
WebShop's data, the catalogue's type words for generated goals) and the product's side its title plus
its type words; both are lowercased, split into words, stripped of a few function words and folded to
a crude singular (:func:`type_words`). Adjectives and verbs therefore count where spaCy would drop
them: the factor can differ for a product of another name than the goal's (never for the goal's own
product, whose title score is 1.0 either way). A goal without type words gets title score 0.2, as a
name without nouns does in WebShop. WebShop keeps the empty part of a category path that ends in
``›``; the records here drop it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, TypeVar

from rewards.base import RewardResult
from rewards.errors import RewardComputationError
from tasks.records import Task, Trajectory
from tasks.webshop.records import Goal, Product, Purchase, RecordFormatError

GRADERS = ("strict", "webshop")
"""The option rules: the project's strict one (default) and WebShop's own ``get_reward``."""

GRADER_KEY = "grader"
"""The optional evidence key that names the grader: one of :data:`GRADERS` (default ``"strict"``)."""

FUZZY_THRESHOLD = 85
"""A fuzzy match needs a token-set ratio (0-100, rounded to an integer) strictly above this, as in WebShop."""

NO_TYPE_WORDS_SCORE = 0.2
"""The title score of a goal that has no type words (WebShop's score for a title without nouns)."""

WEBSHOP_COLORS = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass",
    "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light",
    "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow",
    "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white",
    "wine", "yellow",
)  # fmt: skip
"""WebShop's ``COLOR_SET`` (``web_agent_site/engine/normalize.py``), in its order."""

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
    "colour": "color",
}
"""Colour variant (whole words of an option key) -> its one spelling."""

_SIZE_VARIANTS: dict[str, str] = {
    "extra extra small": "xxs", "xx small": "xxs", "2 x small": "xxs", "2 xs": "xxs",
    "extra small": "xs", "x small": "xs",
    "extra extra large": "2xl", "xx large": "2xl", "2 x large": "2xl", "2 xl": "2xl", "xxl": "2xl",
    "xxx large": "3xl", "3 x large": "3xl", "3 xl": "3xl", "xxxl": "3xl",
    "4 x large": "4xl", "4 xl": "4xl", "xxxxl": "4xl", "5 x large": "5xl", "5 xl": "5xl", "xxxxxl": "5xl",
    "extra large": "xl", "x large": "xl",
    "med": "medium", "sm": "small", "lg": "large",
}  # fmt: skip
"""Size variant (whole words) -> its one code: ``x-large`` and ``XL`` are one size, ``large`` another."""

_UNIT_VARIANTS: dict[str, str] = {
    "fluid ounces": "fl oz", "fluid ounce": "fl oz", "fl ounce": "fl oz", "floz": "fl oz",
    "ounces": "oz", "ounce": "oz", "pounds": "lb", "pound": "lb", "lbs": "lb",
    "inches": "inch", "feet": "ft", "foot": "ft", "grams": "g", "gram": "g", "milliliters": "ml", "millilitres": "ml",
    "liters": "l", "litres": "l", "liter": "l", "litre": "l",
}  # fmt: skip
"""Unit spelling (whole words) -> its one spelling."""


def _variant_pattern(variants: Mapping[str, str]) -> re.Pattern[str]:
    names = sorted(variants, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(name) for name in names) + r")(?![\w.])")


_VARIANTS = {**_COLOR_VARIANTS, **_SIZE_VARIANTS, **_UNIT_VARIANTS}
_VARIANT_PATTERN = _variant_pattern(_VARIANTS)
_PACK_PATTERNS = (
    re.compile(r"\b(?:pack|set|case|box|bundle) of (\d+)\b"),
    re.compile(r"\b(\d+) ?(?:pack|packs|pk|count|ct|pcs|pc|pieces|piece|per pack)\b"),
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_KEY_WORD = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")
_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_WORDS = frozenset({"a", "an", "and", "by", "for", "in", "of", "on", "or", "the", "to", "with"})
_THEFUZZ_DROPPED = {code: None for code in range(128, 256)}
_THEFUZZ_NON_WORD = re.compile(r"(?ui)\W")

_Record = TypeVar("_Record", Goal, Product, Purchase)


# -- text comparison ---------------------------------------------------------------------------------
def fuzzy_score(a: object, b: object) -> int:
    """WebShop's fuzzy similarity: thefuzz 0.19's ``token_set_ratio`` of two texts (0 to 100).

    As thefuzz 0.19 computes it without python-Levenshtein: each side is turned into text (``str``;
    WebShop hands it a synthetic goal's ``(group, value)`` pair), characters 128-255 are dropped,
    every other non-word character becomes a space, and the text is lowercased. The words of each
    side make a set; the shared words sorted, and the shared words followed by each side's own
    sorted words, are compared pairwise with :class:`difflib.SequenceMatcher`; the best ratio,
    times 100 and rounded to an integer, is the score. A subset of the other side's words scores 100.

    Args:
        a: One text (or a value whose ``str`` is compared).
        b: The other.

    Returns:
        An integer from 0 to 100; 0 when either side has no words.

    Example:
        >>> fuzzy_score("essential oil", "Essential Oils"), fuzzy_score("small", "x-small")
        (96, 100)
        >>> fuzzy_score("x-large", ("size", "large")), fuzzy_score("large", ("size", "x-large"))
        (83, 100)
    """
    words_a, words_b = _thefuzz_words(a), _thefuzz_words(b)
    if not words_a or not words_b:
        return 0
    shared = " ".join(sorted(words_a & words_b))
    only_a = (shared + " " + " ".join(sorted(words_a - words_b))).strip()
    only_b = (shared + " " + " ".join(sorted(words_b - words_a))).strip()
    return max(_thefuzz_ratio(shared, only_a), _thefuzz_ratio(shared, only_b), _thefuzz_ratio(only_a, only_b))


def _thefuzz_words(value: object) -> set[str]:
    text = value if isinstance(value, str) else str(value)
    return set(_THEFUZZ_NON_WORD.sub(" ", text.translate(_THEFUZZ_DROPPED)).lower().split())


def _thefuzz_ratio(a: str, b: str) -> int:
    if a == b:
        return 100
    if not a or not b:
        return 0
    return round(100 * SequenceMatcher(None, a, b).ratio())


def fuzzy_match(a: object, b: object) -> bool:
    """True when :func:`fuzzy_score` is above :data:`FUZZY_THRESHOLD` (85).

    Example:
        >>> fuzzy_match("essential oil", "essential oils"), fuzzy_match("grey", "gray")
        (True, False)
    """
    return fuzzy_score(a, b) > FUZZY_THRESHOLD


def webshop_normalize_color(value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """WebShop's ``normalize_color``: the first colour of :data:`WEBSHOP_COLORS` found in the value, else the value.

    For text the test is a substring test, so ``"navy blue"`` gives ``"blue"`` (``blue`` comes first in
    the list) and ``"standard"`` gives ``"tan"``; for a synthetic goal's ``(group, value)`` pair it is
    Python's ``in`` on the pair, true only for a colour word equal to the whole value (or group).

    Example:
        >>> webshop_normalize_color("navy blue"), webshop_normalize_color("standard")
        ('blue', 'tan')
        >>> webshop_normalize_color(("color", "black")), webshop_normalize_color(("color", "navy blue"))
        ('black', ('color', 'navy blue'))
    """
    return next((color for color in WEBSHOP_COLORS if color in value), value)


def option_key(value: str) -> str:
    """What an option value is, as the strict grader compares it.

    Lowercased words and numbers (``16oz`` is ``16 oz``, ``8.12`` one number; punctuation and spacing
    do not count),
    then whole-word variants written one way: colours (``grey`` -> ``gray``, ``navy blue`` ->
    ``navy``), sizes (``x-large``, ``extra large`` -> ``xl``; ``xx-large``, ``2x-large``, ``xxl``
    -> ``2xl``; ``x-small`` -> ``xs``), units (``ounces`` -> ``oz``, ``fluid ounce`` -> ``fl oz``,
    ``pounds`` -> ``lb``), pack counts (``2-pack``, ``2 count``, ``set of 2`` -> ``pack of 2``) and
    numbers (``16.0`` -> ``16``). Distinct sizes and counts stay distinct.

    Args:
        value: An option value, e.g. ``"16 Fl Oz (Pack of 2)"``.

    Returns:
        The key; two values are the same option when their keys are equal.

    Example:
        >>> option_key("X-Large"), option_key("large"), option_key("XXL"), option_key("2X-Large")
        ('xl', 'large', '2xl', '2xl')
        >>> option_key("16 Fluid Ounce (2-Pack)"), option_key("Heather Grey")
        ('16 fl oz pack of 2', 'heather gray')
    """
    text = " ".join(_number(word) for word in _KEY_WORD.findall(value.lower()))
    text = _VARIANT_PATTERN.sub(lambda match: _VARIANTS[match.group(1)], text)
    for pattern in _PACK_PATTERNS:
        text = pattern.sub(r"pack of \1", text)
    return text


def _number(word: str) -> str:
    if not _NUMBER.fullmatch(word):
        return word
    whole, _, fraction = word.partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def _spelling(value: str) -> str:
    """A value as written, less case, spacing and punctuation (``"X-Large"`` -> ``"x large"``)."""
    return " ".join(_KEY_WORD.findall(value.lower()))


# -- type, attributes, options, price ---------------------------------------------------------------
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


def type_match(goal: Goal, product: Product, *, fold_case: bool = True) -> TypeMatch:
    """Compare the product's search term, category path and type words with the goal's.

    Args:
        goal: The shopping goal.
        product: The product bought.
        fold_case: Compare the search terms and category parts trimmed and lowercased (the strict
            grader); False compares them as written, as WebShop does.

    Returns:
        The signals and the resulting factor.
    """
    fold = _fold if fold_case else str
    query_match = fold(product.query) == fold(goal.query)
    shared = {fold(part) for part in product.category} & {fold(part) for part in goal.category}
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


def attribute_matched(attribute: str, product: Product, *, fold_case: bool = True) -> bool:
    """Whether the product has a wanted attribute.

    True when one of the product's attributes is a fuzzy match (:func:`fuzzy_match`) of it, or
    else when the attribute appears as a substring of the lowercased title, bullet points (joined
    by spaces) or description. The text check is exact, not fuzzy, as in WebShop.

    Args:
        attribute: The attribute the goal wants, e.g. ``"non slip"``.
        product: The product bought.
        fold_case: Lowercase the attribute too (the strict grader); False looks it up as written,
            as WebShop does (an attribute with a capital letter is then never found in the text).

    Returns:
        Whether it is matched.
    """
    if any(fuzzy_match(own, attribute) for own in product.attributes):
        return True
    needle = attribute.lower() if fold_case else attribute
    texts = (product.title, " ".join(product.features), product.description)
    return any(needle in text.lower() for text in texts)


def attributes_matched(attributes: Iterable[str], product: Product, *, fold_case: bool = True) -> int:
    """How many of the wanted attributes the product has (:func:`attribute_matched`).

    Args:
        attributes: The attributes the goal wants.
        product: The product bought.
        fold_case: See :func:`attribute_matched`.

    Returns:
        The count of matched attributes.
    """
    return sum(attribute_matched(attribute, product, fold_case=fold_case) for attribute in attributes)


def strict_option_matched(group: str, wanted: str, chosen: Mapping[str, str], product: Product) -> bool:
    """Whether the buyer chose the wanted value of a group: the strict grader's option rule.

    The value chosen in the purchase's group of the same name (compared as :func:`option_key`
    compares values) is the candidate; where the purchase has no such group, every chosen value is.
    A candidate is right when

    * the product offers, in the candidate's group, a value spelled as the wanted one (up to case,
      spacing and punctuation), and the candidate is spelled so too; or else
    * its :func:`option_key` equals the wanted value's.

    So a value the product offers is matched by itself alone, even where another offered value
    shares its key, and no other offered value of the group is ever right.

    Args:
        group: The wanted option's group, e.g. ``"size"`` (a human goal's value the product does not
            offer is kept under a group such as ``"unmatched 1"``).
        wanted: The wanted value, e.g. ``"large"``.
        chosen: The purchase's group -> chosen value.
        product: The product bought (its offered values).

    Returns:
        Whether the wanted option is met.

    Example:
        >>> shirt = Product(asin="B1", title="Tee", category=("Clothing",), product_type="tee", query="tee",
        ...                 price=9.0, options={"size": ("large", "x-large")})
        >>> strict_option_matched("size", "large", {"size": "x-large"}, shirt)
        False
        >>> strict_option_matched("size", "XL", {"size": "x-large"}, shirt)
        True
    """
    by_key = {option_key(name): name for name in chosen}
    own = by_key.get(option_key(group))
    candidates = [own] if own is not None else list(chosen)
    return any(_same_option(wanted, chosen[name], _offered(product, name)) for name in candidates)


def _offered(product: Product, group: str) -> tuple[str, ...]:
    values = product.options.get(group)
    if values is None:
        key = option_key(group)
        values = next((v for name, v in product.options.items() if option_key(name) == key), ())
    return values


def _same_option(wanted: str, candidate: str, offered: Iterable[str]) -> bool:
    spelling = _spelling(wanted)
    if any(_spelling(value) == spelling for value in offered):
        return _spelling(candidate) == spelling
    return option_key(candidate) == option_key(wanted)


def webshop_options_matched(wanted: Mapping[str, str], chosen: Mapping[str, str], *, named: bool = True) -> int:
    """How many wanted options WebShop's ``get_option_reward`` counts as matched.

    Each side goes through :func:`webshop_normalize_color`; a wanted option counts once when any
    chosen value, whatever its group, has :func:`fuzzy_score` above 85 with it.

    Args:
        wanted: The goal's group -> value.
        chosen: The purchase's group -> value.
        named: Compare each wanted value with its group name, as the ``(group, value)`` pair WebShop's
            synthetic goals hand it (True), or as the bare value of its human goals (False).

    Returns:
        The count of matched wanted options.

    Example:
        >>> webshop_options_matched({"size": "large"}, {"size": "x-large"})
        0
        >>> webshop_options_matched({"size": "x-large"}, {"size": "large"})
        1
        >>> webshop_options_matched({"size": "large"}, {"size": "x-large"}, named=False)  # a human goal
        1
    """
    chosen_values = [webshop_normalize_color(value) for value in chosen.values()]
    goals = [webshop_normalize_color((group, value) if named else value) for group, value in wanted.items()]
    return sum(any(fuzzy_match(value, goal) for value in chosen_values) for goal in goals)


def options_matched(goal: Goal, purchase: Purchase, product: Product, *, grader: str = "strict",
                    named: bool = True) -> int:
    """How many of the goal's options the purchase meets, by a grader's rule.

    Args:
        goal: The shopping goal.
        purchase: What was bought.
        product: The product bought.
        grader: ``"strict"`` (:func:`strict_option_matched`) or ``"webshop"``
            (:func:`webshop_options_matched`).
        named: For ``"webshop"``: whether the goal's options carry their group names (see
            :func:`webshop_options_matched`).

    Returns:
        The count of matched options.

    Raises:
        RewardComputationError: An unknown grader.
    """
    if _check_grader(grader) == "webshop":
        return webshop_options_matched(goal.options, purchase.options, named=named)
    return sum(strict_option_matched(group, value, purchase.options, product) for group, value in goal.options.items())


def price_ok(price: float, price_upper: float) -> bool:
    """Whether the price paid is within the goal's limit (at most ``price_upper``, inclusive).

    Example:
        >>> price_ok(50.0, 50.0), price_ok(50.01, 50.0)
        (True, False)
    """
    return price <= price_upper


def webshop_score(goal: Goal, product: Product, purchase: Purchase, *, grader: str = "strict",
                  named: bool = True) -> RewardResult:
    """WebShop's score of a purchase against a goal, with every component.

    Args:
        goal: The shopping goal.
        product: The product bought (its catalogue record).
        purchase: What was bought: the product id, the chosen options and the price paid.
        grader: ``"strict"`` (default) or ``"webshop"`` (WebShop's ``get_reward``); see the module.
        named: Whether the goal's options carry their group names as WebShop's synthetic goals do
            (True: the goals made here and WebShop's synthetic goals) or are bare values (False:
            WebShop's human goals). Used by ``"webshop"`` only.

    Returns:
        ``value`` is the score in [0, 1]. ``components``: ``type_factor``, ``query_match``,
        ``category_match``, ``title_score``, ``attributes_matched``, ``attributes_total``,
        ``options_matched``, ``options_total``, ``price_ok``, ``purchased`` (1.0) and ``success``
        (1.0 when the score is 1.0); booleans are given as 0.0 / 1.0.

    Raises:
        RewardComputationError: When ``product`` is not the product the purchase names, or the
            grader is unknown.

    Example:
        >>> goal = Goal(asin="B1", instruction="...", product_type="running shoes",
        ...             category=("Clothing", "Shoes"), query="running shoes", attributes=("lightweight",),
        ...             options={"size": "large"}, price_upper=50.0)
        >>> product = Product(asin="B1", title="Lightweight Running Shoes", category=("Clothing", "Shoes"),
        ...                   product_type="running shoes", query="running shoes", price=40.0,
        ...                   options={"size": ("large", "x-large")})
        >>> wrong_size = Purchase("B1", {"size": "x-large"}, 40.0)
        >>> webshop_score(goal, product, wrong_size).value  # 2 of 3
        0.6666666666666666
    """
    if product.asin != purchase.asin:
        raise RewardComputationError(
            f"expected the record of the purchased product {purchase.asin!r}, got product {product.asin!r}"
        )
    strict = _check_grader(grader) == "strict"
    kind = type_match(goal, product, fold_case=strict)
    n_attributes = attributes_matched(goal.attributes, product, fold_case=strict)
    n_options = options_matched(goal, purchase, product, grader=grader, named=named)
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


def _check_grader(grader: str) -> str:
    if grader not in GRADERS:
        raise RewardComputationError(f"expected a WebShop grader, one of {list(GRADERS)}, got {grader!r}")
    return grader


def webshop_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: :func:`webshop_score` of the episode's purchase.

    The goal is ``task.metadata["goal"]``; the purchase and the purchased product are
    ``evidence["purchase"]`` and ``evidence["product"]``, each a record or its ``to_dict`` form;
    ``evidence["grader"]`` names the grader (default ``"strict"``). A task of WebShop's human goals
    (``task.metadata["source"] == "human"``) has bare option values, and ``"webshop"`` compares them as
    the file writes them (``task.metadata["written_options"]``, when present); every other goal's
    options are compared with their group names under ``"webshop"``. When nothing was bought (no
    ``"purchase"``, or None) the reward is 0.0 with ``purchased`` 0.0 and the other components at 0
    (the totals still count what the goal wanted). ``trajectory`` is not used.

    Raises:
        RewardComputationError: When the goal is missing, a record is malformed, a purchase comes
            without its product, or the grader is unknown.
    """
    goal = _record(task.metadata.get("goal"), Goal, f'task.metadata["goal"] of task {task.id!r}')
    grader = _check_grader(evidence.get(GRADER_KEY, "strict"))
    if evidence.get("purchase") is None:
        return _nothing_bought(goal)
    purchase = _record(evidence["purchase"], Purchase, 'evidence["purchase"]')
    product = _record(evidence.get("product"), Product, 'evidence["product"]')
    human = task.metadata.get("source") == "human"
    if human and grader == "webshop":
        goal = _as_written(goal, task.metadata.get("written_options"))
    return webshop_score(goal, product, purchase, grader=grader, named=not human)


def _as_written(goal: Goal, written: Any) -> Goal:
    """A human goal with the option values its file writes (WebShop compares those, not lowercased ones)."""
    if written is None:
        return goal
    if not isinstance(written, list) or not all(isinstance(value, str) for value in written):
        raise RewardComputationError(
            f'expected task.metadata["written_options"] to be a list of strings, got {written!r}'
        )
    return dataclasses.replace(goal, options={str(number): value for number, value in enumerate(written)})


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
