"""The bundled WebShop benchmark: the ``generated-v1`` catalogue and its train/dev/test goals.

Files live in ``tasks/data/webshop/``: ``catalogue-generated-v1.jsonl`` (one
:meth:`~tasks.webshop.records.Product.to_dict` a line), ``train.jsonl``, ``dev.jsonl``,
``test.jsonl`` (one task a line) and ``MANIFEST.json``, which lists the catalogues (file, sha256,
seed, sizes) and the splits. :func:`load_catalogue` resolves a catalogue by bundled name or by path,
and is what the shop's web server loads its products with.

The splits are disjoint by product: every base group (an original and its near-duplicates) belongs
to one split (:func:`partition_groups`), whose goals take their targets only from its groups. They
are written by ``python -m tasks.build_splits`` (:func:`build_webshop_files`) and checked by
``python -m tasks.build_splits --check``.

Example:
    >>> products = load_catalogue(DEFAULT_CATALOGUE)
    >>> products[0].asin
    'B000000000'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.errors import UnknownTaskError, did_you_mean
from tasks.records import Task
from tasks.splits import MANIFEST_NAME, bundle_manifest, read_bundled_file
from tasks.webshop.catalogue import GENERATOR_VERSION, base_asin, generate_catalogue
from tasks.webshop.goals import DIFFICULTY_LEVELS, generate_goals, product_meets_goal
from tasks.webshop.records import Goal, Product, RecordFormatError

BUILDER = "tasks.webshop.bundled:build_webshop_files"
"""What the manifest names as its builder (``python -m tasks.build_splits`` calls it)."""

ENV = "WebShop"
DEFAULT_CATALOGUE = "generated-v1"
"""The catalogue the bundled splits are about, and the shop's default."""


@dataclass(frozen=True)
class CatalogueSpec:
    """How a bundled catalogue is generated (the arguments of :func:`generate_catalogue`).

    Attributes:
        seed: Catalogue seed.
        types_per_leaf: Product types per leaf category.
        products_per_type: Original products (base groups) per type.
        distractors: Near-duplicates per original.
        reviews_per_product: Reviews per product.
    """

    seed: int
    types_per_leaf: int
    products_per_type: int
    distractors: int
    reviews_per_product: int

    def generate(self) -> list[Product]:
        """The catalogue these parameters make."""
        return generate_catalogue(self.seed, types_per_leaf=self.types_per_leaf,
                                  products_per_type=self.products_per_type, distractors=self.distractors,
                                  reviews_per_product=self.reviews_per_product)


CATALOGUES = {
    "generated-v1": CatalogueSpec(seed=20_250_601, types_per_leaf=3, products_per_type=12, distractors=2,
                                  reviews_per_product=3),
}
"""Bundled catalogues by name: 30 types x 12 originals x 3 variants = 1,080 products."""

SPLIT_SIZES = {"train": 400, "dev": 100, "test": 100}
GOAL_SEEDS = {"train": 1_000_000, "dev": 2_000_000, "test": 3_000_000}
"""Split -> seed base; the goals of difficulty ``level`` are drawn with seed ``base + level``."""
PARTITION_SEED = 20_250_602
"""Seed of the shuffle that assigns each type's base groups to the splits."""
SPLITS_CATALOGUE = DEFAULT_CATALOGUE
_SURPLUS = 0.2
"""Extra goals drawn per call, as a share of those needed, to replace ones repeating an instruction."""


def catalogue_file(name: str) -> str:
    """The file name of a bundled catalogue, ``catalogue-<name>.jsonl``."""
    return f"catalogue-{name}.jsonl"


def catalogue_bytes(products: Sequence[Product]) -> bytes:
    """The JSONL form of a catalogue: one :meth:`Product.to_dict` a line, in its own key order."""
    return "".join(json.dumps(product.to_dict(), ensure_ascii=False) + "\n" for product in products).encode("utf-8")


def partition_groups(catalogue: Sequence[Product], seed: int = PARTITION_SEED) -> dict[str, list[str]]:
    """Assign every base product group to one split, in proportion to :data:`SPLIT_SIZES` within each type.

    A group is an original and its near-duplicates (:func:`~tasks.webshop.catalogue.base_asin`).
    Each type's groups are shuffled, then cut into consecutive runs in split order: dev and test get
    ``groups * size // total`` each, train the rest, so every split has every type.

    Args:
        catalogue: The shop's products.
        seed: Seed of the shuffle.

    Returns:
        Split -> the base ids of its groups, sorted.
    """
    rng = np.random.default_rng(seed)
    by_type: dict[str, dict[str, None]] = {}
    for product in catalogue:
        by_type.setdefault(product.product_type, {})[base_asin(product.asin)] = None
    assigned: dict[str, list[str]] = {split: [] for split in SPLIT_SIZES}
    for groups in by_type.values():
        bases = list(groups)
        shuffled = [bases[i] for i in rng.permutation(len(bases))]
        start = 0
        for split, share in _shares(len(bases)).items():
            assigned[split] += shuffled[start:start + share]
            start += share
    return {split: sorted(groups) for split, groups in assigned.items()}


def _shares(groups: int) -> dict[str, int]:
    """How many of a type's ``groups`` each split gets: its share of the tasks, rounded down; train the rest."""
    total = sum(SPLIT_SIZES.values())
    shares = {split: groups * size // total for split, size in SPLIT_SIZES.items()}
    shares["train"] += groups - sum(shares.values())
    return shares


def build_webshop_files() -> dict[str, bytes]:
    """Generate the bundled catalogues, the train/dev/test goals and the manifest, in memory.

    Each split draws its targets only from its own base groups (:func:`partition_groups`), so no
    product is a target in two splits; difficulties cycle 1, 2, 3; no instruction repeats within or
    across splits; no target repeats within a split. Every goal is checked to be met by its target.

    Returns:
        File name -> exact bytes.

    Raises:
        ValueError: When a check fails or a split cannot be filled.
    """
    files: dict[str, bytes] = {}
    catalogues: dict[str, dict[str, Any]] = {}
    products: dict[str, list[Product]] = {}
    for name, spec in CATALOGUES.items():
        products[name] = spec.generate()
        data = catalogue_bytes(products[name])
        files[catalogue_file(name)] = data
        catalogues[name] = {"file": catalogue_file(name), "count": len(products[name]),
                            "sha256": hashlib.sha256(data).hexdigest(), "generator_version": GENERATOR_VERSION,
                            **dataclasses.asdict(spec)}
    catalogue = products[SPLITS_CATALOGUE]
    groups = partition_groups(catalogue)
    used: set[str] = set()
    splits = {}
    for split, size in SPLIT_SIZES.items():
        tasks = _split_tasks(catalogue, split, size, set(groups[split]), used)
        data = "".join(task.to_json() + "\n" for task in tasks).encode("utf-8")
        files[f"{split}.jsonl"] = data
        splits[split] = {"file": f"{split}.jsonl", "count": len(tasks), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"builder": BUILDER, "env": ENV, "generator_versions": {"webshop": GENERATOR_VERSION},
                "catalogues": catalogues, "catalogue": SPLITS_CATALOGUE, "goal_seeds": GOAL_SEEDS,
                "partition_seed": PARTITION_SEED, "splits": splits}
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def _split_tasks(catalogue: Sequence[Product], split: str, size: int, groups: set[str], used: set[str]) -> list[Task]:
    """One split's tasks: difficulties cycling 1..3, targets from ``groups``, instructions new to ``used``."""
    levels = sorted(DIFFICULTY_LEVELS)
    targets = [product.asin for product in catalogue if base_asin(product.asin) in groups]
    by_level: dict[int, list[Task]] = {}
    for position, level in enumerate(levels):
        count = len(range(position, size, len(levels)))
        by_level[level] = _level_tasks(catalogue, split, level, count, targets, used)
        taken = {task.answer for task in by_level[level]}
        targets = [asin for asin in targets if asin not in taken]
    tasks = []
    for index in range(size):
        task = by_level[levels[index % len(levels)]][index // len(levels)]
        metadata = {**task.metadata, "catalogue": SPLITS_CATALOGUE}
        tasks.append(dataclasses.replace(task, id=f"webshop/{split}/{index:04d}", metadata=metadata))
    _check_split(tasks, catalogue, groups)
    return tasks


def _level_tasks(
    catalogue: Sequence[Product], split: str, level: int, count: int, targets: list[str], used: set[str]
) -> list[Task]:
    """``count`` goals of one level whose instructions are not in ``used`` (which they are added to)."""
    drawn = generate_goals(catalogue, count + int(count * _SURPLUS) + 1, seed=GOAL_SEEDS[split] + level,
                           difficulty=level, split=split, targets=targets)
    fresh = [task for task in drawn if task.prompt not in used][:count]
    if len(fresh) < count:
        raise ValueError(f"expected {count} goals of level {level} for {split} with new instructions, "
                         f"got {len(fresh)}; raise _SURPLUS")
    used.update(task.prompt for task in fresh)
    return fresh


def _check_split(tasks: Sequence[Task], catalogue: Sequence[Product], groups: set[str]) -> None:
    """Raise ValueError unless ids and targets are unique and every target is in ``groups`` and meets its goal."""
    by_asin = {product.asin: product for product in catalogue}
    for name, values in (("id", [t.id for t in tasks]), ("target", [t.answer for t in tasks])):
        if len(set(values)) != len(values):
            raise ValueError(f"expected unique task {name}s, got {len(values) - len(set(values))} repeated")
    for task in tasks:
        goal = Goal.from_dict(task.metadata["goal"])
        if base_asin(task.answer) not in groups or not product_meets_goal(goal, by_asin[task.answer]):
            raise ValueError(f"expected {task.id}'s target {task.answer} in its split's groups and meeting its goal, "
                             "got one that is not")


def available_catalogues() -> list[str]:
    """Names of the bundled WebShop catalogues, e.g. ``["generated-v1"]``."""
    return sorted(bundle_manifest(ENV).get("catalogues", {}))


def load_catalogue(spec: str | Path, *, verify: bool = True) -> list[Product]:
    """Load a WebShop catalogue by bundled name or from a JSONL file.

    Args:
        spec: A bundled catalogue name (see :func:`available_catalogues`), or the path of a JSONL
            file with one :meth:`Product.to_dict` per line (blank lines are skipped).
        verify: For a bundled catalogue, check the file against the sha256 in the manifest first.

    Returns:
        The products, in file order.

    Raises:
        UnknownTaskError: ``spec`` is neither an existing file nor a bundled catalogue name (the
            message lists the names and suggests the closest).
        FileNotFoundError: ``spec`` looks like a path (it has a folder or a ``.jsonl`` suffix) and
            no such file exists.
        RecordFormatError: A line is not a product's JSON, or two products share an id; the
            message gives the file and line number.
        SplitIntegrityError: ``verify`` is set and a bundled file does not match its manifest.

    Example:
        >>> load_catalogue("generated-v1")[0].category_text
        'Clothing › Men › Tops'
    """
    path = Path(spec)
    if path.is_file():
        return parse_catalogue(path.read_bytes(), str(path))
    if isinstance(spec, Path) or len(path.parts) > 1 or path.suffix == ".jsonl":
        raise FileNotFoundError(f"expected a WebShop catalogue file at {str(spec)!r}, got no such file")
    entry = _catalogue_entry(str(spec))
    return parse_catalogue(read_bundled_file(ENV, entry, verify=verify), entry["file"])


def parse_catalogue(data: bytes, source: str) -> list[Product]:
    """Parse catalogue JSONL bytes into products.

    Args:
        data: UTF-8 JSONL, one :meth:`Product.to_dict` per line; blank lines are skipped.
        source: Where the bytes came from, named in error messages.

    Returns:
        The products, in line order.

    Raises:
        RecordFormatError: A line is not a product's JSON, two products share an id, or there is
            no product at all.
    """
    products: list[Product] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        product = _parse_product(line, f"{source}:{number}")
        if product.asin in first_line:
            raise RecordFormatError(f"{source}:{number}: expected a new product id, got {product.asin!r} "
                                    f"again (first at line {first_line[product.asin]})")
        first_line[product.asin] = number
        products.append(product)
    if not products:
        raise RecordFormatError(f"{source}: expected at least one product, got none")
    return products


def _parse_product(line: str, where: str) -> Product:
    try:
        return Product.from_dict(json.loads(line))
    except json.JSONDecodeError as error:
        raise RecordFormatError(f"{where}: expected a JSON object of a product, got invalid JSON ({error})") from error
    except RecordFormatError as error:
        raise RecordFormatError(f"{where}: {error}") from error


def _catalogue_entry(name: str) -> dict[str, Any]:
    catalogues = bundle_manifest(ENV).get("catalogues", {})
    if name not in catalogues:
        raise UnknownTaskError(f"expected a bundled WebShop catalogue among {sorted(catalogues)} or the path of a "
                               f"catalogue JSONL file, got {name!r}" + did_you_mean(name, catalogues))
    return catalogues[name]
