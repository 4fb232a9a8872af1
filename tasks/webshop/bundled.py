"""The bundled WebShop benchmark: the ``generated-v1`` catalogue and its train/dev/test goals.

Files live in ``tasks/data/webshop/``: ``catalogue-generated-v1.jsonl`` (one
:meth:`~tasks.webshop.records.Product.to_dict` a line), ``train.jsonl``, ``dev.jsonl``,
``test.jsonl`` (one task a line) and ``MANIFEST.json``, which lists the catalogues (file, sha256,
seed, sizes) and the splits. :func:`load_catalogue` resolves a catalogue by bundled name or by path,
and is what the shop's web server loads its products with.

Example:
    >>> products = load_catalogue(DEFAULT_CATALOGUE)
    >>> products[0].asin
    'B000000000'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tasks.errors import UnknownTaskError, did_you_mean
from tasks.splits import bundle_manifest, read_bundled_file
from tasks.webshop.records import Product, RecordFormatError

ENV = "WebShop"
DEFAULT_CATALOGUE = "generated-v1"
"""The catalogue the bundled splits are about, and the shop's default."""


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
