"""A seeded, generated catalogue for WebShop-v0: categories, product types, attributes, options, prices.

The shop's vocabularies are written here, small and made up (brands included), and chosen so that
WebShop's fuzzy grader (:mod:`rewards.webshop`) agrees with exact comparison on them: no two
attributes, option values or product-type words of the catalogue are near-spellings of each
other, every type has words no other type shares, and a product's text mentions only the
attributes it has. A goal's check in :mod:`tasks.webshop.goals` can therefore be exact.

Each generated product comes with ``distractors`` near-duplicates: the same title, type, category
and search term, differing from it in exactly one attribute, one option value, or a price above
any goal's limit for it (:data:`MAX_PRICE_SLACK`). Ids encode the relation: a product's id is
``"B" + type number (3 digits) + product number (3) + variant (3)``, variant 0 being the original
(:func:`base_asin`).

Example:
    >>> catalogue = generate_catalogue(0, types_per_leaf=1, products_per_type=1, distractors=1)
    >>> len(catalogue), catalogue[0].category_text
    (20, 'Clothing › Men › Tops')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tasks.webshop.records import Product, Review

GENERATOR_VERSION = 2
"""Bump whenever a change alters any generated catalogue or goal (bundled splits record it)."""

MAX_PRICE_SLACK = 0.5
"""The largest price slack a goal may give (:mod:`tasks.webshop.goals`); over-price distractors exceed it."""

ATTRIBUTES_PER_PRODUCT = 4
"""How many attributes each product has (a goal asks for at most 3)."""

DISTRACTOR_KINDS = ("attribute", "option", "price")
"""The one way a near-duplicate differs from its original."""

_MAX_INDEX = 999


@dataclass(frozen=True)
class Department:
    """A top category and the vocabulary its products are made from.

    Attributes:
        name: The top category, the first part of every path under it.
        leaves: Sub-path (the parts after ``name``) -> the product types listed there.
        attributes: The attribute words its products draw from.
        option_groups: Option group -> the values a product may offer.
        price_range: Lowest and highest price of an original product, in dollars.
    """

    name: str
    leaves: dict[tuple[str, str], tuple[str, ...]]
    attributes: tuple[str, ...]
    option_groups: dict[str, tuple[str, ...]]
    price_range: tuple[float, float]


DEPARTMENTS: tuple[Department, ...] = (
    Department(
        name="Clothing",
        leaves={
            ("Men", "Tops"): ("henley", "cardigan", "hoodie"),
            ("Women", "Bottoms"): ("leggings", "culottes", "pleated skirt"),
            ("Kids", "Sleepwear"): ("pajama set", "nightgown", "onesie"),
        },
        attributes=(
            "machine wash",
            "quick drying",
            "slim fit",
            "moisture wicking",
            "button closure",
            "elastic waistband",
            "relaxed cut",
            "breathable fabric",
        ),
        option_groups={
            "color": ("navy", "red", "black", "white", "olive", "beige", "burgundy", "teal"),
            "size": ("small", "medium", "large", "petite"),
        },
        price_range=(12.0, 60.0),
    ),
    Department(
        name="Grocery",
        leaves={
            ("Snack Foods", "Savory Snacks"): ("pretzels", "popcorn", "rice cakes"),
            ("Beverages", "Hot Drinks"): ("herbal tea", "cocoa mix", "espresso beans"),
            ("Pantry", "Spreads"): ("peanut butter", "fruit jam", "hazelnut spread"),
        },
        attributes=(
            "gluten free",
            "non gmo",
            "low sodium",
            "kosher certified",
            "keto friendly",
            "individually wrapped",
            "organic ingredients",
            "high protein",
        ),
        option_groups={
            "flavor": ("vanilla", "lemon", "cinnamon", "sea salt", "mango", "smoky barbecue"),
            "pack size": ("single", "twin pack", "family size", "bulk case"),
        },
        price_range=(3.0, 30.0),
    ),
    Department(
        name="Beauty & Personal Care",
        leaves={
            ("Skin Care", "Face"): ("face serum", "night cream", "clay mask"),
            ("Hair Care", "Styling"): ("hair pomade", "texture spray", "curl gel"),
        },
        attributes=(
            "paraben free",
            "cruelty free",
            "long lasting",
            "dermatologist tested",
            "easy to apply",
            "sensitive skin",
            "vegan formula",
            "travel friendly",
        ),
        option_groups={
            "scent": ("lavender", "eucalyptus", "citrus", "unscented", "rose", "sandalwood"),
            "size": ("travel", "regular", "jumbo"),
        },
        price_range=(6.0, 45.0),
    ),
    Department(
        name="Home & Kitchen",
        leaves={
            ("Kitchen & Dining", "Cookware"): ("frying pan", "stockpot", "saucepan"),
            ("Bedding", "Blankets"): ("throw blanket", "quilt", "duvet cover"),
        },
        attributes=(
            "dishwasher safe",
            "bpa free",
            "easy to clean",
            "heat proof",
            "non stick",
            "space saving",
            "hypoallergenic",
            "oven ready",
        ),
        option_groups={
            "color": ("charcoal", "sage", "ivory", "copper", "slate", "mustard"),
            "size": ("compact", "standard", "oversized"),
        },
        price_range=(18.0, 120.0),
    ),
)
"""The shop's departments, in catalogue order."""

BRANDS: tuple[str, ...] = (
    "Kelvaro",
    "Zandrix",
    "Tressly",
    "Mornbeck",
    "Quillon",
    "Vaspera",
    "Orrindale",
    "Bramwick",
    "Luxenby",
    "Corvath",
    "Fenmoor",
    "Pellucid",
)
"""Made-up brand names."""

_DESCRIPTORS = ("Classic", "Everyday", "Premium", "Essentials", "Signature", "Original")
_AUDIENCES = ("daily use", "gifting", "busy mornings", "weekends at home", "small spaces", "the whole family")
_REVIEWS: dict[int, tuple[tuple[str, str], ...]] = {
    5: (
        ("Love it", "Exactly what I hoped for in a {type}. Would buy again."),
        ("Excellent", "Great quality for the price, and it arrived quickly."),
    ),
    4: (
        ("Very good", "A solid {type}; one small quibble with the packaging."),
        ("Happy overall", "Does what it says. Took a few days to get used to."),
    ),
    3: (("It's okay", "An average {type}, nothing special but fine."),),
    2: (("Disappointed", "The {type} looked different from the pictures."),),
    1: (("Would not recommend", "Mine arrived damaged and support was slow."),),
}


def base_asin(asin: str) -> str:
    """The id of the original product a catalogue id belongs to (itself for an original).

    Args:
        asin: A product id from :func:`generate_catalogue`.

    Returns:
        The id with its variant digits set to 0.

    Example:
        >>> base_asin("B001002003"), base_asin("B001002000")
        ('B001002000', 'B001002000')
    """
    return asin[:-3] + "000"


def generate_catalogue(
    seed: int,
    *,
    types_per_leaf: int = 2,
    products_per_type: int = 3,
    distractors: int = 2,
    reviews_per_product: int = 3,
) -> list[Product]:
    """Generate the shop's catalogue, the same for the same seed and arguments.

    Args:
        seed: Seed of the numpy generator every choice is drawn from.
        types_per_leaf: How many product types each leaf category lists (1 to 3).
        products_per_type: How many original products each type has (1 to 999).
        distractors: How many near-duplicates each original gets (0 to 998); each differs from
            it in one attribute, one option value or its price, cycling through the three kinds.
        reviews_per_product: How many reviews each product has (0 or more).

    Returns:
        The products, originals each followed by their near-duplicates, in department order.

    Raises:
        ValueError: When an argument is out of range.

    Example:
        >>> generate_catalogue(1, types_per_leaf=1, products_per_type=1, distractors=0)[0].asin
        'B000000000'
    """
    _check_sizes(types_per_leaf, products_per_type, distractors, reviews_per_product)
    rng = np.random.default_rng(seed)
    catalogue: list[Product] = []
    type_number = 0
    for department in DEPARTMENTS:
        for leaf, types in department.leaves.items():
            for product_type in types[:types_per_leaf]:
                category = (department.name, *leaf)
                for product_number in range(products_per_type):
                    asin = f"B{type_number:03d}{product_number:03d}000"
                    original = _original(rng, department, category, product_type, asin, reviews_per_product)
                    catalogue.append(original)
                    catalogue.extend(_distractors(rng, department, original, distractors, reviews_per_product))
                type_number += 1
    return catalogue


def _check_sizes(types_per_leaf: int, products_per_type: int, distractors: int, reviews: int) -> None:
    most_types = min(len(types) for department in DEPARTMENTS for types in department.leaves.values())
    if not 1 <= types_per_leaf <= most_types:
        raise ValueError(f"expected types_per_leaf in 1..{most_types}, got {types_per_leaf}")
    if not 1 <= products_per_type <= _MAX_INDEX:
        raise ValueError(f"expected products_per_type in 1..{_MAX_INDEX}, got {products_per_type}")
    if not 0 <= distractors < _MAX_INDEX:
        raise ValueError(f"expected distractors in 0..{_MAX_INDEX - 1}, got {distractors}")
    if reviews < 0:
        raise ValueError(f"expected reviews_per_product >= 0, got {reviews}")


def _pick(rng: np.random.Generator, values: Sequence[str], k: int) -> tuple[str, ...]:
    chosen = rng.choice(len(values), size=k, replace=False)
    return tuple(values[i] for i in sorted(chosen))


def _original(
    rng: np.random.Generator,
    department: Department,
    category: tuple[str, ...],
    product_type: str,
    asin: str,
    n_reviews: int,
) -> Product:
    brand = BRANDS[int(rng.integers(len(BRANDS)))]
    descriptor = _DESCRIPTORS[int(rng.integers(len(_DESCRIPTORS)))]
    low, high = department.price_range
    options = {
        group: _pick(rng, values, int(rng.integers(2, min(4, len(values) - 1) + 1)))
        for group, values in department.option_groups.items()
    }
    return _product(
        rng,
        asin=asin,
        title=f"{brand} {descriptor} {product_type.title()}",
        category=category,
        product_type=product_type,
        price=math.floor(rng.uniform(low, high)) + 0.99,
        attributes=_pick(rng, department.attributes, ATTRIBUTES_PER_PRODUCT),
        options=options,
        n_reviews=n_reviews,
    )


def _product(
    rng: np.random.Generator,
    *,
    asin: str,
    title: str,
    category: tuple[str, ...],
    product_type: str,
    price: float,
    attributes: tuple[str, ...],
    options: dict[str, tuple[str, ...]],
    n_reviews: int,
) -> Product:
    reviews = tuple(_review(rng, product_type) for _ in range(n_reviews))
    rating = round(sum(review.rating for review in reviews) / len(reviews), 1) if reviews else None
    return Product(
        asin=asin,
        title=title,
        category=category,
        product_type=product_type,
        query=product_type,
        price=round(price, 2),
        rating=rating,
        attributes=attributes,
        options=options,
        description=_description(rng, title, product_type, attributes),
        features=_features(attributes, options),
        reviews=reviews,
    )


def _description(rng: np.random.Generator, title: str, product_type: str, attributes: tuple[str, ...]) -> str:
    audience = _AUDIENCES[int(rng.integers(len(_AUDIENCES)))]
    listed = ", ".join(attributes[:-1]) + f" and {attributes[-1]}" if len(attributes) > 1 else attributes[0]
    return f"The {title} is a {product_type} made for {audience}. Highlights: {listed}."


def _features(attributes: tuple[str, ...], options: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    lines = [f"{attribute.capitalize()}" for attribute in attributes]
    lines += [f"Choose your {group}: {', '.join(values)}" for group, values in options.items()]
    return tuple(lines)


def _review(rng: np.random.Generator, product_type: str) -> Review:
    stars = int(rng.choice([5, 4, 3, 2, 1], p=[0.4, 0.3, 0.15, 0.1, 0.05]))
    choices = _REVIEWS[stars]
    title, text = choices[int(rng.integers(len(choices)))]
    return Review(rating=float(stars), title=title, text=text.format(type=product_type))


def _distractors(
    rng: np.random.Generator, department: Department, original: Product, count: int, n_reviews: int
) -> list[Product]:
    first_kind = int(rng.integers(len(DISTRACTOR_KINDS)))
    made = []
    for number in range(1, count + 1):
        kind = DISTRACTOR_KINDS[(first_kind + number - 1) % len(DISTRACTOR_KINDS)]
        attributes, options, price = original.attributes, dict(original.options), original.price
        if kind == "attribute":
            attributes = _swap_one(rng, attributes, department.attributes)
        elif kind == "option":
            group = list(options)[int(rng.integers(len(options)))]
            options[group] = _swap_one(rng, options[group], department.option_groups[group])
        else:
            price = math.ceil(original.price * (1 + MAX_PRICE_SLACK)) + math.floor(rng.uniform(1, 20)) + 0.99
        made.append(
            _product(
                rng,
                asin=original.asin[:-3] + f"{number:03d}",
                title=original.title,
                category=original.category,
                product_type=original.product_type,
                price=price,
                attributes=attributes,
                options=options,
                n_reviews=n_reviews,
            )
        )
    return made


def _swap_one(rng: np.random.Generator, own: tuple[str, ...], vocabulary: Sequence[str]) -> tuple[str, ...]:
    """Replace one of ``own`` by a vocabulary value it lacks, keeping vocabulary order."""
    dropped = own[int(rng.integers(len(own)))]
    spare = [value for value in vocabulary if value not in own]
    added = spare[int(rng.integers(len(spare)))]
    kept = set(own) - {dropped} | {added}
    return tuple(value for value in vocabulary if value in kept)
