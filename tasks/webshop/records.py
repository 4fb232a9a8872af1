"""The records WebShop-v0 is made of: a catalogue product, a shopping goal, and a purchase.

The task generator writes them, the shop's web server shows them and the reward
(:mod:`rewards.webshop`) scores them, so all three layers share these definitions. Each record is a
frozen dataclass with ``to_dict``/``from_dict`` for JSON round trips: a WebShop task stores its
goal as ``Task.metadata["goal"] = goal.to_dict()``, and the environment hands the purchase and the
purchased product to the reward in the same form. Sequences are stored as tuples; ``from_dict``
accepts JSON lists and checks every field's type. Nothing here reads or writes files.

Example:
    >>> purchase = Purchase(asin="B0001", options={"color": "navy"}, price=24.99)
    >>> Purchase.from_dict(purchase.to_dict()) == purchase
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.errors import TaskError

CATEGORY_SEPARATOR = " › "
"""How a category path is written as text, as on Amazon and in WebShop: ``"A › B › C"``."""


class RecordFormatError(TaskError, ValueError):
    """A WebShop record (or its dict form) has a missing field or a field of the wrong type."""


def format_category(category: tuple[str, ...]) -> str:
    """Write a category path as text.

    Args:
        category: The path from the root, e.g. ``("Clothing", "Men", "Shoes")``.

    Returns:
        The parts joined by :data:`CATEGORY_SEPARATOR`.

    Example:
        >>> format_category(("Clothing", "Men", "Shoes"))
        'Clothing › Men › Shoes'
    """
    return CATEGORY_SEPARATOR.join(category)


def parse_category(text: str) -> tuple[str, ...]:
    """Split a category path written as ``"A › B › C"`` into its stripped, non-empty parts.

    Args:
        text: The path as text; spaces around the separators do not matter.

    Returns:
        The parts, root first.

    Example:
        >>> parse_category("Clothing›Men ›  Shoes")
        ('Clothing', 'Men', 'Shoes')
    """
    return tuple(part.strip() for part in text.split(CATEGORY_SEPARATOR.strip()) if part.strip())


@dataclass(frozen=True)
class Review:
    """One customer review of a product.

    Attributes:
        rating: Stars given, 1 to 5.
        title: The review's headline.
        text: The review's body.
    """

    rating: float
    title: str
    text: str

    def __post_init__(self) -> None:
        _check_number(self.rating, "Review.rating", low=1.0, high=5.0)
        _check_str(self.title, "Review.title")
        _check_str(self.text, "Review.text")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"rating", "title", "text"}``."""
        return {"rating": self.rating, "title": self.title, "text": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Review:
        """Build a review from :meth:`to_dict` output.

        Raises:
            RecordFormatError: When a field is missing or has the wrong type.
        """
        _check_mapping(data, "Review")
        return cls(
            rating=_field(data, "rating", "Review"),
            title=_field(data, "title", "Review"),
            text=_field(data, "text", "Review"),
        )


@dataclass(frozen=True)
class Product:
    """One product of the shop's catalogue.

    Attributes:
        asin: The product's id (Amazon's name for it), unique in the catalogue.
        title: The product's name as listed.
        category: The category path, root first; shown as ``"A › B › C"`` (:attr:`category_text`).
        product_type: The catalogue's own words for what the product is, e.g. ``"running shoes"``.
            The reward's type factor compares these words (it stands in for WebShop's spaCy nouns).
        query: The search term the product was listed under, e.g. ``"men's running shoes"``.
        price: Price in dollars, at least 0.
        rating: Average stars (1 to 5), or None when the product has no rating.
        attributes: Short properties the product has, e.g. ``("lightweight", "non slip")``.
        options: Option group -> the values a buyer can choose, e.g.
            ``{"color": ("navy", "red"), "size": ("small", "large")}``.
        description: The product's description.
        features: The bullet points under the title.
        reviews: Customer reviews.
        price_range: The lowest and highest price the listing gives, when it gives a range (WebShop's
            items do: the shop shows the range, and ``price``, drawn within it, is what a buyer pays);
            None for one price. Written by ``to_dict`` only when set.
    """

    asin: str
    title: str
    category: tuple[str, ...]
    product_type: str
    query: str
    price: float
    rating: float | None = None
    attributes: tuple[str, ...] = ()
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    description: str = ""
    features: tuple[str, ...] = ()
    reviews: tuple[Review, ...] = ()
    price_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _check_id(self.asin, "Product.asin")
        for name in ("title", "product_type", "query", "description"):
            _check_str(getattr(self, name), f"Product.{name}")
        _check_number(self.price, "Product.price", low=0.0)
        if self.rating is not None:
            _check_number(self.rating, "Product.rating", low=1.0, high=5.0)
        object.__setattr__(self, "category", _str_tuple(self.category, "Product.category"))
        object.__setattr__(self, "attributes", _str_tuple(self.attributes, "Product.attributes"))
        object.__setattr__(self, "features", _str_tuple(self.features, "Product.features"))
        object.__setattr__(self, "options", _option_groups(self.options, "Product.options"))
        object.__setattr__(self, "reviews", _reviews(self.reviews))
        object.__setattr__(self, "price_range", _price_range(self.price_range, self.price))

    @property
    def category_text(self) -> str:
        """The category path as text, ``"A › B › C"``."""
        return format_category(self.category)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict; tuples become lists; ``price_range`` only when set."""
        return self._fields() | ({} if self.price_range is None else {"price_range": list(self.price_range)})

    def _fields(self) -> dict[str, Any]:
        return {
            "asin": self.asin,
            "title": self.title,
            "category": list(self.category),
            "product_type": self.product_type,
            "query": self.query,
            "price": self.price,
            "rating": self.rating,
            "attributes": list(self.attributes),
            "options": {group: list(values) for group, values in self.options.items()},
            "description": self.description,
            "features": list(self.features),
            "reviews": [review.to_dict() for review in self.reviews],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Product:
        """Build a product from :meth:`to_dict` output.

        ``category`` may also be given as text, ``"A › B › C"``; the fields after ``price`` may be
        left out.

        Raises:
            RecordFormatError: When a required field is missing or a field has the wrong type.
        """
        _check_mapping(data, "Product")
        reviews = data.get("reviews", [])
        if not isinstance(reviews, list | tuple):
            raise RecordFormatError(f"expected Product.reviews to be a list, got {reviews!r}")
        return cls(
            asin=_field(data, "asin", "Product"),
            title=_field(data, "title", "Product"),
            category=_category(_field(data, "category", "Product"), "Product.category"),
            product_type=_field(data, "product_type", "Product"),
            query=_field(data, "query", "Product"),
            price=_field(data, "price", "Product"),
            rating=data.get("rating"),
            attributes=data.get("attributes", ()),
            options=data.get("options", {}),
            description=data.get("description", ""),
            features=data.get("features", ()),
            reviews=tuple(Review.from_dict(review) for review in reviews),
            price_range=data.get("price_range"),
        )


@dataclass(frozen=True)
class Goal:
    """What the shopper asks for: a target product and the wishes it meets.

    Attributes:
        asin: The id of the product the goal was made from (one product that meets it).
        instruction: The instruction shown to the agent, e.g. ``"I need navy running shoes, size
            large, lightweight, and price lower than 50.00 dollars"``.
        product_type: The target's type words (:attr:`Product.product_type`).
        category: The target's category path, root first.
        query: The target's search term (:attr:`Product.query`).
        attributes: The attributes wanted.
        options: Option group -> the value wanted, e.g. ``{"color": "navy", "size": "large"}``.
        price_upper: The most the shopper will pay, in dollars; greater than 0.
    """

    asin: str
    instruction: str
    product_type: str
    category: tuple[str, ...]
    query: str
    attributes: tuple[str, ...]
    options: Mapping[str, str]
    price_upper: float

    def __post_init__(self) -> None:
        _check_id(self.asin, "Goal.asin")
        for name in ("instruction", "product_type", "query"):
            _check_str(getattr(self, name), f"Goal.{name}")
        _check_number(self.price_upper, "Goal.price_upper", low=0.0)
        if self.price_upper <= 0:
            raise RecordFormatError(f"expected Goal.price_upper > 0, got {self.price_upper!r}")
        object.__setattr__(self, "category", _str_tuple(self.category, "Goal.category"))
        object.__setattr__(self, "attributes", _str_tuple(self.attributes, "Goal.attributes"))
        object.__setattr__(self, "options", _chosen_options(self.options, "Goal.options"))

    @property
    def category_text(self) -> str:
        """The category path as text, ``"A › B › C"``."""
        return format_category(self.category)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict; tuples become lists."""
        return {
            "asin": self.asin,
            "instruction": self.instruction,
            "product_type": self.product_type,
            "category": list(self.category),
            "query": self.query,
            "attributes": list(self.attributes),
            "options": dict(self.options),
            "price_upper": self.price_upper,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Goal:
        """Build a goal from :meth:`to_dict` output (``category`` may also be text, ``"A › B › C"``).

        Raises:
            RecordFormatError: When a field is missing or has the wrong type.
        """
        _check_mapping(data, "Goal")
        return cls(
            asin=_field(data, "asin", "Goal"),
            instruction=_field(data, "instruction", "Goal"),
            product_type=_field(data, "product_type", "Goal"),
            category=_category(_field(data, "category", "Goal"), "Goal.category"),
            query=_field(data, "query", "Goal"),
            attributes=_field(data, "attributes", "Goal"),
            options=_field(data, "options", "Goal"),
            price_upper=_field(data, "price_upper", "Goal"),
        )


@dataclass(frozen=True)
class Purchase:
    """What the agent bought.

    Attributes:
        asin: The id of the product bought.
        options: Option group -> the value chosen, e.g. ``{"color": "navy", "size": "large"}``.
        price: The price paid, in dollars.
    """

    asin: str
    options: Mapping[str, str] = field(default_factory=dict)
    price: float = 0.0

    def __post_init__(self) -> None:
        _check_id(self.asin, "Purchase.asin")
        _check_number(self.price, "Purchase.price", low=0.0)
        object.__setattr__(self, "options", _chosen_options(self.options, "Purchase.options"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"asin", "options", "price"}``."""
        return {"asin": self.asin, "options": dict(self.options), "price": self.price}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Purchase:
        """Build a purchase from :meth:`to_dict` output.

        Raises:
            RecordFormatError: When a field is missing or has the wrong type.
        """
        _check_mapping(data, "Purchase")
        return cls(
            asin=_field(data, "asin", "Purchase"),
            options=_field(data, "options", "Purchase"),
            price=_field(data, "price", "Purchase"),
        )


def _check_mapping(data: Any, record: str) -> None:
    if not isinstance(data, Mapping):
        raise RecordFormatError(f"expected a dict for a {record}, got {type(data).__name__}")


def _field(data: Mapping[str, Any], key: str, record: str) -> Any:
    if key not in data:
        raise RecordFormatError(f"expected key {key!r} in the {record} dict, got keys {sorted(data)}")
    return data[key]


def _check_str(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise RecordFormatError(f"expected {where} to be a string, got {value!r}")


def _check_id(value: Any, where: str) -> None:
    _check_str(value, where)
    if not value.strip():
        raise RecordFormatError(f"expected {where} to be a non-empty id, got {value!r}")


def _check_number(value: Any, where: str, *, low: float, high: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise RecordFormatError(f"expected {where} to be a number, got {value!r}")
    if not low <= value <= high or math.isinf(value):
        raise RecordFormatError(f"expected {where} to be a finite number in [{low}, {high}], got {value!r}")


def _str_tuple(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise RecordFormatError(f"expected {where} to be a list of strings, got {value!r}")
    for item in value:
        _check_str(item, f"each item of {where}")
    return tuple(value)


def _category(value: Any, where: str) -> tuple[str, ...]:
    return parse_category(value) if isinstance(value, str) else _str_tuple(value, where)


def _option_groups(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise RecordFormatError(f"expected {where} to be a dict of group -> list of values, got {value!r}")
    groups = {}
    for group, values in value.items():
        _check_str(group, f"each group name of {where}")
        groups[group] = _str_tuple(values, f"{where}[{group!r}]")
    return groups


def _chosen_options(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise RecordFormatError(f"expected {where} to be a dict of group -> value, got {value!r}")
    for group, chosen in value.items():
        _check_str(group, f"each group name of {where}")
        _check_str(chosen, f"{where}[{group!r}]")
    return dict(value)


def _price_range(value: Any, price: float) -> tuple[float, float] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple) or len(value) != 2:
        raise RecordFormatError(f"expected Product.price_range to be [lowest, highest] or None, got {value!r}")
    for bound in value:
        _check_number(bound, "each bound of Product.price_range", low=0.0)
    low, high = value
    if not low <= price <= high:
        raise RecordFormatError(f"expected Product.price_range to hold the price {price!r}, got {value!r}")
    return (float(low), float(high))


def _reviews(value: Any) -> tuple[Review, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, Review) for item in value):
        raise RecordFormatError(f"expected Product.reviews to be a sequence of Review, got {value!r}")
    return tuple(value)
