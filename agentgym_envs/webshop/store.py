"""The shop's catalogue on disk: its products in SQLite and their BM25 index in bm25s's format, memory-mapped.

WebShop's catalogue has 1,181,436 products. Held as Python objects, with the token lists bm25s indexes
from, they need several GiB; here nothing the shop keeps grows with the catalogue but the index's
vocabulary. :meth:`ShopStore.open` makes a folder, once per catalogue, in one pass over its products
(each read, checked, written and tokenized as it comes, never all at once):

* ``catalogue.sqlite``: each product's :meth:`~tasks.webshop.records.Product.to_dict` JSON, by position
  and by ASIN, with its title and price in columns of their own: a results page reads those (:class:`Listing`),
  an item page the whole product (the last :data:`PRODUCT_CACHE_SIZE` stay parsed);
* ``asins.npy``: the ASINs in catalogue order, memory-mapped: what a search's positions are turned into;
* the BM25 index, made by bm25s's own builder (``BM25.index``) from the token ids, which the pass spills
  to a file and bm25s reads back from it, so that its scores are bm25s's scores; searches read its CSC
  arrays memory-mapped (:func:`~agentgym_envs.search.retriever.bm25_scores`) as the Search env does;
* ``agentrl-shop.json``: the key, a sha256 over the catalogue's lines and the tokenizer and BM25
  settings, checked at every open: a changed catalogue gets a new folder, never a stale one.

The folder is built in a staging folder beside it and renamed into place, under a file lock, so that
shop servers started together build it once.

Example:
    >>> store = ShopStore.open(generate_catalogue(0), index_dir=tmp_path / "shop")   # doctest: +SKIP
    >>> store.search("navy henley", 10)                                                # doctest: +SKIP
    ('B000001000', ...)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search.retriever import Tokenizer, bm25_scores, default_index_root, top_k
from tasks.locks import file_lock, lock_path
from tasks.progress import reported
from tasks.records import Document
from tasks.webshop.records import Product

STORE_FORMAT = 2
"""Version of the folder's layout; part of its key."""

META_NAME = "agentrl-shop.json"
DATABASE_NAME = "catalogue.sqlite"
ASINS_NAME = "asins.npy"
TOKEN_IDS_NAME = "token-ids.int32"
"""The build's spill file of every product's token ids (removed once the index is saved)."""

PRODUCT_CACHE_SIZE = 4096
"""Products kept parsed in memory (a page shows ten; an agent goes back to the ones it saw)."""

BM25_PARAMS = {"k1": 1.5, "b": 0.75, "method": "lucene"}
"""The shop's BM25 settings (the Search env's defaults)."""

BUILD_PROGRESS_EVERY_S = 20.0
"""Seconds between two progress lines of a build (a third of :class:`~agentgym_envs.webshop.service.ShopServer`'s
default startup timeout, which counts the server's silence)."""

INSERT_BATCH = 10_000
"""Rows written to SQLite per statement during a build."""

CatalogueSource = Sequence[Product] | Path
"""A catalogue: products in memory, or a JSONL file of :meth:`Product.to_dict` objects (read as a stream)."""


@dataclass(frozen=True)
class Listing:
    """What a results page shows of a product.

    Attributes:
        asin: The product's ASIN.
        title: Its title.
        price: What a buyer pays.
        price_range: The listing's price range, when it gives one.
    """

    asin: str
    title: str
    price: float
    price_range: tuple[float, float] | None


def product_document(product: Product) -> Document:
    """The search index's document for ``product``: its title, then category, type, description, features, options."""
    option_values = " ".join(value for values in product.options.values() for value in values)
    parts = (product.category_text, product.product_type, product.description, *product.features, option_values)
    return Document(id=product.asin, title=product.title, text="\n".join(part for part in parts if part))


def catalogue_lines(source: CatalogueSource) -> Iterator[tuple[str, str]]:
    """``(where, line)`` of each product of ``source`` as a JSON line; ``where`` names it in error messages.

    Raises:
        EnvConfigError: ``source`` is a path that is not a file.
    """
    if isinstance(source, Path):
        if not source.is_file():
            raise EnvConfigError(f"catalogue: expected a JSONL file of products, got {str(source)!r}, "
                                 "which does not exist")
        with source.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    yield f"{source}:{number}", line.rstrip("\n")
        return
    for number, product in enumerate(source):
        yield f"product {number}", json.dumps(product.to_dict(), ensure_ascii=False)


def parse_product(where: str, line: str) -> Product:
    """The product a catalogue line holds.

    Raises:
        EnvConfigError: The line is not a product's JSON (the message names ``where``).
    """
    try:
        return Product.from_dict(json.loads(line))
    except ValueError as exc:  # bad JSON, or RecordFormatError
        raise EnvConfigError(f"{where}: expected a product as JSON ({exc}), got {line.strip()[:120]!r}") from exc


def store_key(source: CatalogueSource, tokenizer: Tokenizer) -> str:
    """First 16 hex digits of a sha256 over the layout, tokenizer and BM25 settings and the catalogue's lines."""
    digest = hashlib.sha256()
    settings = {"format": STORE_FORMAT, "tokenizer": tokenizer.config(), "bm25": BM25_PARAMS}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for _, line in catalogue_lines(source):
        encoded = line.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()[:16]


class _SpilledTokenIds:
    """Every product's token ids, read back from the build's spill file: what bm25s's ``index`` takes.

    bm25s reads ``ids`` three times (lengths, document frequencies, scores) and ``vocab`` once; here each
    pass reads the file, one document's ids at a time, instead of keeping the lists.
    """

    def __init__(self, path: Path, offsets: np.ndarray, vocab: dict[str, int]) -> None:
        self.path = path
        self.offsets = offsets
        self.vocab = vocab
        self.ids = self

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self) -> Iterator[list[int]]:
        ids = np.memmap(self.path, dtype=np.int32, mode="r") if self.offsets[-1] else np.zeros(0, np.int32)
        for start, end in zip(self.offsets[:-1], self.offsets[1:], strict=True):
            yield ids[start:end].tolist()


class ShopStore:
    """A catalogue's products and BM25 index in a folder (see the module docstring); open it with :meth:`open`.

    Thread-safe: one SQLite connection behind a lock; searches only read the memory-mapped index.

    Args:
        folder: A folder :meth:`open` made.
        tokenizer: The tokenizer the index was built with.
    """

    def __init__(self, folder: Path, tokenizer: Tokenizer) -> None:
        self.folder = folder
        self.tokenizer = tokenizer
        meta = json.loads((folder / META_NAME).read_text())
        self.key: str = meta["key"]
        self.size: int = meta["products"]
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(f"file:{folder / DATABASE_NAME}?mode=ro", uri=True,
                                                              check_same_thread=False)
        self._bm25: bm25s.BM25 | None = bm25s.BM25.load(str(folder), mmap=True, show_progress=False)
        self._asins = np.load(folder / ASINS_NAME, mmap_mode="r")
        self.product = lru_cache(maxsize=PRODUCT_CACHE_SIZE)(self._read_product)

    @classmethod
    def open(cls, source: CatalogueSource, *, index_dir: str | os.PathLike[str] | None = None,
             tokenizer: Tokenizer | None = None) -> ShopStore:
        """The store of ``source``, built in ``index_dir`` first when it is not there.

        Args:
            source: The products, or a JSONL file of them.
            index_dir: The store's folder; default ``default_index_root() / f"shop-{key}"``.
            tokenizer: How products and queries are split into terms (the Search env's by default).

        Raises:
            EnvConfigError: An empty catalogue, a line that is not a product, two products with one ASIN,
                or an ``index_dir`` that holds something else (another catalogue's store, other files).
        """
        tokenizer = tokenizer or Tokenizer()
        key = store_key(source, tokenizer)
        folder = Path(index_dir) if index_dir is not None else default_index_root() / f"shop-{key}"
        if not _ready(folder, key):
            with file_lock(lock_path(folder), waiting=f"waiting for another process to build the shop's store in "
                                                      f"{folder}", every_s=BUILD_PROGRESS_EVERY_S):
                if not _ready(folder, key):
                    with reported(f"building the shop's product store and BM25 index in {folder} (once; later "
                                  "runs open it)", every_s=BUILD_PROGRESS_EVERY_S):
                        _build(source, folder, key, tokenizer)
        return cls(folder, tokenizer)

    def __len__(self) -> int:
        return self.size

    def _read_product(self, asin: str) -> Product | None:
        """The product ``asin`` (None when the catalogue has none); cached as :attr:`product`."""
        rows = self._query("SELECT record FROM products WHERE asin = ?", (asin,))
        return Product.from_dict(json.loads(rows[0][0])) if rows else None

    def search(self, query: str, k: int) -> tuple[str, ...]:
        """ASINs of the best ``k`` products for ``query`` by BM25, best first; ties go to the earlier product.

        Products that share no term with the query are never returned.
        """
        bm25 = self._index()
        token_ids = sorted({bm25.vocab_dict[t] for t in self.tokenizer(query) if t in bm25.vocab_dict})
        if not token_ids:
            return ()
        return tuple(asin.decode() for asin in self._asins[top_k(bm25_scores(bm25, token_ids), k)])

    def listings(self, asins: Sequence[str]) -> list[Listing]:
        """The listings of ``asins``, in that order (those the catalogue has)."""
        rows = self._query(f"SELECT asin, title, price, price_low, price_high FROM products WHERE asin IN "
                           f"({','.join('?' * len(asins))})", asins)
        found = {asin: Listing(asin, title, price, None if low is None else (low, high))
                 for asin, title, price, low, high in rows}
        return [found[asin] for asin in asins if asin in found]

    def close(self) -> None:
        """Close the database and drop the index; idempotent. Reads afterwards raise."""
        with self._lock:
            if self._db is not None:
                self._db.close()
            self._db, self._bm25 = None, None

    def _index(self) -> bm25s.BM25:
        if self._bm25 is None:
            raise EnvConfigError("this ShopStore is closed")
        return self._bm25

    def _query(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._db is None:
                raise EnvConfigError("this ShopStore is closed")
            return self._db.execute(sql, parameters).fetchall()


def _ready(folder: Path, key: str) -> bool:
    """Whether ``folder`` holds the store of ``key``; False when it is absent or empty.

    Raises:
        EnvConfigError: It holds another catalogue's store, or other files.
    """
    meta_path = folder / META_NAME
    if not meta_path.is_file():
        if folder.exists() and any(folder.iterdir()):
            raise EnvConfigError(f"index_dir: expected a shop's store or an empty folder, got {str(folder)!r} "
                                 "holding other files")
        return False
    found = json.loads(meta_path.read_text()).get("key")
    if found != key:
        raise EnvConfigError(f"index_dir: {str(folder)!r} holds the store of another catalogue or tokenizer (key "
                             f"{found!r}, expected {key!r}); pass another index_dir or delete that one")
    return True


def _build(source: CatalogueSource, folder: Path, key: str, tokenizer: Tokenizer) -> None:
    """Write the store of ``source`` to a staging folder beside ``folder``, then rename it into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        offsets, vocab = _write_products(source, staging, tokenizer)
        bm25 = bm25s.BM25(**BM25_PARAMS)
        bm25.index(_SpilledTokenIds(staging / TOKEN_IDS_NAME, offsets, vocab), show_progress=False)
        bm25.save(str(staging), show_progress=False)
        (staging / TOKEN_IDS_NAME).unlink()
        meta = {"key": key, "format": STORE_FORMAT, "products": len(offsets) - 1, "tokenizer": tokenizer.config(),
                "bm25": BM25_PARAMS, "bm25s": bm25s.__version__}
        (staging / META_NAME).write_text(json.dumps(meta, indent=1) + "\n")
        if folder.exists():  # an empty folder named by the caller
            folder.rmdir()
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_products(source: CatalogueSource, staging: Path, tokenizer: Tokenizer) -> tuple[np.ndarray, dict[str, int]]:
    """One pass over ``source``: each product checked, written to SQLite, its token ids to the spill file.

    Returns:
        Where each product's ids start in the spill file (and, last, where they end), and the vocabulary.

    Raises:
        EnvConfigError: An empty catalogue, a line that is not a product, or an ASIN given twice.
    """
    vocab: dict[str, int] = {}
    offsets = [0]
    rows: list[tuple[Any, ...]] = []
    database = sqlite3.connect(staging / DATABASE_NAME)
    try:
        database.execute("PRAGMA journal_mode = OFF")
        database.execute("PRAGMA synchronous = OFF")
        database.execute("CREATE TABLE products (position INTEGER PRIMARY KEY, asin TEXT NOT NULL, title TEXT NOT "
                         "NULL, price REAL NOT NULL, price_low REAL, price_high REAL, record TEXT NOT NULL)")
        with (staging / TOKEN_IDS_NAME).open("wb") as spill:
            for position, (where, line) in enumerate(catalogue_lines(source)):
                product = parse_product(where, line)
                document = product_document(product)
                ids = [vocab.setdefault(token, len(vocab)) for token in tokenizer(f"{document.title}\n{document.text}")]
                np.asarray(ids, dtype=np.int32).tofile(spill)
                offsets.append(offsets[-1] + len(ids))
                low, high = product.price_range or (None, None)
                rows.append((position, product.asin, product.title, product.price, low, high, line))
                if len(rows) == INSERT_BATCH:
                    _insert(database, rows)
        _insert(database, rows)
        if len(offsets) == 1:
            raise EnvConfigError("catalogue: expected at least one product, got none")
        _index_asins(database)
        database.commit()
        _write_asins(database, staging / ASINS_NAME, len(offsets) - 1)
    finally:
        database.close()
    return np.asarray(offsets, dtype=np.int64), vocab


def _insert(database: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    database.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    rows.clear()


def _write_asins(database: sqlite3.Connection, path: Path, count: int) -> None:
    """``asins.npy``: the ASINs (UTF-8, fixed width) in position order, read from the database as a stream."""
    (width,) = database.execute("SELECT max(length(CAST(asin AS BLOB))) FROM products").fetchone()
    asins = np.lib.format.open_memmap(path, mode="w+", dtype=f"S{width}", shape=(count,))
    for position, (asin,) in enumerate(database.execute("SELECT asin FROM products ORDER BY position")):
        asins[position] = asin.encode()
    asins.flush()
    del asins


def _index_asins(database: sqlite3.Connection) -> None:
    """The ASIN index (made after the rows: faster than row by row).

    Raises:
        EnvConfigError: Two products share an ASIN (the message names up to five).
    """
    duplicates = [asin for (asin,) in database.execute(
        "SELECT asin FROM products GROUP BY asin HAVING count(*) > 1 ORDER BY min(position) LIMIT 5")]
    if duplicates:
        raise EnvConfigError(f"catalogue: expected unique ASINs, got products sharing {', '.join(duplicates)}")
    database.execute("CREATE UNIQUE INDEX products_asin ON products (asin)")


__all__ = ["CatalogueSource", "Listing", "ShopStore", "catalogue_lines", "parse_product", "product_document",
           "store_key"]
