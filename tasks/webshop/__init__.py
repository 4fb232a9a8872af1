"""WebShop tasks: the catalogue products, shopping goals and purchases that WebShop-v0 is built on.

* :class:`Product`: one catalogue item (title, category path, type words, search term, price,
  rating, attributes, option groups, description, bullet points, reviews).
* :class:`Goal`: what the shopper asks for (target product, instruction, attributes, one value per
  option group, price limit); stored in a task as ``Task.metadata["goal"]``.
* :class:`Purchase`: what the agent bought (product, chosen options, price paid).

* :func:`load_catalogue` (:mod:`tasks.webshop.bundled`): a bundled catalogue by name, or one from a JSONL file.
* :func:`generate_catalogue` (:mod:`tasks.webshop.catalogue`): a seeded catalogue with near-duplicate
  distractors; :func:`generate_goals` (:mod:`tasks.webshop.goals`): checked goals as WebShop tasks.
* :func:`load_original_products` and :func:`load_original_goals` (:mod:`tasks.webshop.original`): WebShop's
  own data files (``items_shuffle*.json``, ``items_ins_v2*.json``, ``items_human_ins.json``) for users who
  have them; ``python -m tasks.webshop.original`` converts them for the shop server and the env.

All three records round-trip through ``to_dict``/``from_dict``; :mod:`rewards.webshop` scores a purchase
against a goal.

Example:
    >>> from tasks.webshop import Goal
    >>> goal = Goal(asin="B0001", instruction="navy running shoes under 50 dollars",
    ...             product_type="running shoes", category=("Clothing", "Shoes"), query="running shoes",
    ...             attributes=("lightweight",), options={"color": "navy"}, price_upper=50.0)
    >>> goal.category_text
    'Clothing › Shoes'
"""

from tasks.webshop.bundled import DEFAULT_CATALOGUE, available_catalogues, load_catalogue, parse_catalogue
from tasks.webshop.catalogue import (
    DEPARTMENTS,
    DISTRACTOR_KINDS,
    GENERATOR_VERSION,
    MAX_PRICE_SLACK,
    Department,
    base_asin,
    generate_catalogue,
)
from tasks.webshop.goals import (
    DIFFICULTY_LEVELS,
    GoalDifficulty,
    format_instruction,
    generate_goals,
    product_meets_goal,
)
from tasks.webshop.original import load_original_goals, load_original_products
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
    "DEFAULT_CATALOGUE",
    "DEPARTMENTS",
    "DIFFICULTY_LEVELS",
    "DISTRACTOR_KINDS",
    "GENERATOR_VERSION",
    "MAX_PRICE_SLACK",
    "Department",
    "Goal",
    "GoalDifficulty",
    "Product",
    "Purchase",
    "RecordFormatError",
    "Review",
    "available_catalogues",
    "base_asin",
    "format_category",
    "format_instruction",
    "generate_catalogue",
    "generate_goals",
    "load_catalogue",
    "load_original_goals",
    "load_original_products",
    "parse_catalogue",
    "parse_category",
    "product_meets_goal",
]
