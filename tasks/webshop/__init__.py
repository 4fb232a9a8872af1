"""WebShop tasks: the catalogue products, shopping goals and purchases that WebShop-v0 is built on.

* :class:`Product`: one catalogue item (title, category path, type words, search term, price,
  rating, attributes, option groups, description, bullet points, reviews).
* :class:`Goal`: what the shopper asks for (target product, instruction, attributes, one value per
  option group, price limit); stored in a task as ``Task.metadata["goal"]``.
* :class:`Purchase`: what the agent bought (product, chosen options, price paid).

All three round-trip through ``to_dict``/``from_dict``; :mod:`rewards.webshop` scores a purchase
against a goal.

Example:
    >>> from tasks.webshop import Goal
    >>> goal = Goal(asin="B0001", instruction="navy running shoes under 50 dollars",
    ...             product_type="running shoes", category=("Clothing", "Shoes"), query="running shoes",
    ...             attributes=("lightweight",), options={"color": "navy"}, price_upper=50.0)
    >>> goal.category_text
    'Clothing › Shoes'
"""

from tasks.webshop.records import (
    CATEGORY_SEPARATOR,
    Goal,
    Product,
    Purchase,
    RecordFormatError,
    Review,
    format_category,
    parse_category,
)

__all__ = [
    "CATEGORY_SEPARATOR",
    "Goal",
    "Product",
    "Purchase",
    "RecordFormatError",
    "Review",
    "format_category",
    "parse_category",
]
