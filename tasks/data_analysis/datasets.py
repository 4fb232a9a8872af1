"""Datasets of DataAnalysis tasks: related tables stored canonically, and written out as CSV, Parquet and SQLite.

A :class:`Dataset` is a few :class:`Table` records, each with typed columns, JSON rows and the
file it is written to: ``<table>.csv`` or ``<table>.parquet`` (one table per file), or one shared
``<dataset theme>.sqlite`` file holding several tables. The canonical form (:meth:`Dataset.to_dict`,
JSON) is what the bundle stores; :func:`materialize` turns it into file bytes the same way every
time (with a given pyarrow and SQLite version), so the bytes never depend on a random generator.
The bundled datasets (``datasets.jsonl`` of the DataAnalysis bundle) are read by name with
:func:`load_dataset` and :func:`dataset_files`.

Column types (:data:`COLUMN_TYPES`): ``int``, ``float``, ``str``, ``bool``, ``date`` (an ISO
``YYYY-MM-DD`` string in the rows) and ``timestamp`` (``YYYY-MM-DD HH:MM:SS``). Any cell may be
``None`` (an empty CSV field, a Parquet or SQLite NULL). Dirty data is data: a price written as
``"$1,234.50"`` lives in a ``str`` column.

Example:
    >>> table = Table("t", "t.csv", (Column("x", "int"), Column("y", "str")), ((1, "a"), (None, "b")))
    >>> materialize(Dataset("demo-000", "demo", 0, 1, (table,)))["t.csv"]
    b'x,y\\n1,a\\n,b\\n'
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import json
import random
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.data_analysis.formats import check_file_name, table_format
from tasks.errors import TaskError, UnknownTaskError, did_you_mean
from tasks.splits import bundle_manifest, read_bundled_file

ENV = "DataAnalysis"
"""The environment's name, under which its bundle (splits and datasets) is found."""
COLUMN_TYPES = ("int", "float", "str", "bool", "date", "timestamp")
"""The types a column may have."""

_SQLITE_TYPES = {"int": "INTEGER", "float": "REAL", "str": "TEXT", "bool": "INTEGER", "date": "TEXT",
                 "timestamp": "TEXT"}

Cell = None | bool | int | float | str
"""A cell of a canonical row."""


@dataclass(frozen=True)
class Column:
    """One typed column.

    Attributes:
        name: Column name.
        type: One of :data:`COLUMN_TYPES`.
    """

    name: str
    type: str

    def __post_init__(self) -> None:
        if self.type not in COLUMN_TYPES:
            raise TaskError(f"expected column {self.name!r} to have a type among {COLUMN_TYPES}, got {self.type!r}")


@dataclass(frozen=True)
class Table:
    """One table of a dataset.

    Attributes:
        name: Table name (for a CSV or Parquet file, the file's stem).
        file: The file it is written to: ``.csv``, ``.parquet`` or ``.sqlite``.
        columns: The columns, in order.
        rows: The rows, each one cell per column.
    """

    name: str
    file: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]

    @property
    def format(self) -> str:
        """``"csv"``, ``"parquet"`` or ``"sqlite"``."""
        return table_format(self.file)

    def column(self, name: str) -> list[Cell]:
        """The cells of one column, in row order."""
        index = [column.name for column in self.columns].index(name)
        return [row[index] for row in self.rows]


@dataclass(frozen=True)
class Dataset:
    """Related tables generated together.

    Attributes:
        name: Unique name, e.g. ``"retail-007"``.
        theme: What the tables are about, e.g. ``"retail"``.
        seed: The generator's seed.
        dirtiness: 0 (clean) to 3 (nulls, duplicates, dirty types and outliers everywhere).
        tables: The tables.
    """

    name: str
    theme: str
    seed: int
    dirtiness: int
    tables: tuple[Table, ...]

    def table(self, name: str) -> Table:
        """The table called ``name``.

        Raises:
            TaskError: No table has that name.
        """
        for table in self.tables:
            if table.name == name:
                return table
        raise TaskError(f"expected a table of dataset {self.name!r} among {[t.name for t in self.tables]}, "
                        f"got {name!r}")

    @property
    def files(self) -> list[str]:
        """The dataset's file names, in table order, each once."""
        return list(dict.fromkeys(table.file for table in self.tables))

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form: columns as ``[name, type]`` pairs and rows as lists."""
        return {
            "name": self.name, "theme": self.theme, "seed": self.seed, "dirtiness": self.dirtiness,
            "tables": [{"name": table.name, "file": table.file,
                        "columns": [[column.name, column.type] for column in table.columns],
                        "rows": [list(row) for row in table.rows]} for table in self.tables],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Dataset:
        """Build a dataset from :meth:`to_dict` output.

        Raises:
            TaskError: A key is missing, a column type is unknown or a row has the wrong width.
        """
        try:
            tables = tuple(_table_from_dict(table) for table in data["tables"])
            return cls(data["name"], data["theme"], int(data["seed"]), int(data["dirtiness"]), tables)
        except (KeyError, TypeError, ValueError) as error:
            raise TaskError(f"expected a dataset as JSON with keys name, theme, seed, dirtiness, tables, got "
                            f"{type(error).__name__}: {error}") from error


def _table_from_dict(data: Mapping[str, Any]) -> Table:
    columns = tuple(Column(name, kind) for name, kind in data["columns"])
    rows = tuple(tuple(row) for row in data["rows"])
    if any(len(row) != len(columns) for row in rows):
        raise TaskError(f"expected every row of table {data['name']!r} to have {len(columns)} cells")
    return Table(data["name"], check_file_name(data["file"], f"table {data['name']!r}"), columns, rows)


def materialize(dataset: Dataset) -> dict[str, bytes]:
    """The bytes of every file of a dataset, by file name.

    Args:
        dataset: The dataset.

    Returns:
        File name -> bytes, in :attr:`Dataset.files` order. CSV: a header line, then one line per
        row (``\\n`` endings, floats by ``repr``, booleans ``true``/``false``, NULL as an empty
        field). Parquet: typed columns (``date`` as date32, ``timestamp`` as microseconds).
        SQLite: one file per dataset with declared column types (dates and booleans as TEXT and
        INTEGER).

    Raises:
        TaskError: A CSV or Parquet table is not named by its file's stem.
    """
    files: dict[str, bytes] = {}
    for name in dataset.files:
        tables = [table for table in dataset.tables if table.file == name]
        kind = table_format(name)
        if kind != "sqlite" and (len(tables) > 1 or f"{tables[0].name}.{kind}" != name):
            raise TaskError(f"expected one table named by the stem of {name!r}, got {[t.name for t in tables]}")
        files[name] = {"csv": _csv_bytes, "parquet": _parquet_bytes, "sqlite": _sqlite_bytes}[kind](tables)
    return files


def _csv_cell(cell: Cell) -> str:
    if cell is None:
        return ""
    if isinstance(cell, bool):
        return "true" if cell else "false"
    if isinstance(cell, float):
        return repr(cell)
    return str(cell)


def _csv_bytes(tables: Sequence[Table]) -> bytes:
    (table,) = tables
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([column.name for column in table.columns])
    writer.writerows([_csv_cell(cell) for cell in row] for row in table.rows)
    return out.getvalue().encode("utf-8")


def _arrow_values(cells: list[Cell], kind: str) -> list[Any]:
    if kind == "date":
        return [None if cell is None else dt.date.fromisoformat(str(cell)) for cell in cells]
    if kind == "timestamp":
        return [None if cell is None else dt.datetime.fromisoformat(str(cell)) for cell in cells]
    return cells


def _parquet_bytes(tables: Sequence[Table]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (table,) = tables
    types = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_(),
             "date": pa.date32(), "timestamp": pa.timestamp("us")}
    arrays = [pa.array(_arrow_values(table.column(column.name), column.type), type=types[column.type])
              for column in table.columns]
    out = io.BytesIO()
    pq.write_table(pa.table(arrays, names=[column.name for column in table.columns]), out)
    return out.getvalue()


def _sqlite_bytes(tables: Sequence[Table]) -> bytes:
    connection = sqlite3.connect(":memory:")
    try:
        for table in tables:
            columns = ", ".join(f'"{column.name}" {_SQLITE_TYPES[column.type]}' for column in table.columns)
            connection.execute(f'CREATE TABLE "{table.name}" ({columns})')
            marks = ", ".join("?" for _ in table.columns)
            connection.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})', table.rows)
        connection.commit()
        return connection.serialize()
    finally:
        connection.close()


# ------------------------------------------------------------------------------ the seeded generator

GENERATOR_VERSION = 1
DIRTINESS_LEVELS = (0, 1, 2, 3)
"""0: clean; 1: nulls in the measure and untidy category labels; 2: also duplicate rows;
3: also the measure written as text with a unit and thousands separators, and mixed date formats."""

NULL_SHARE = 0.06
LABEL_NOISE_SHARE = 0.15
DUPLICATE_SHARE = 0.04
US_DATE_SHARE = 0.3
US_DATE_FORMAT = "%m/%d/%Y"
"""The second date format of a dirty date column (``MM/DD/YYYY``), beside ISO ``YYYY-MM-DD``."""


@dataclass(frozen=True)
class Dimension:
    """A lookup table the fact table points to.

    Attributes:
        table: Table name, e.g. ``"customers"``.
        key: Its key column, also the fact table's foreign key, e.g. ``"customer_id"``.
        label: A categorical column, e.g. ``"region"``.
        labels: The label's values.
        number: An integer column, e.g. ``"age"``.
        number_range: Inclusive bounds of ``number``.
    """

    table: str
    key: str
    label: str
    labels: tuple[str, ...]
    number: str
    number_range: tuple[int, int]


@dataclass(frozen=True)
class Theme:
    """What a dataset is about: one fact table of events over time and two dimensions.

    Attributes:
        name: Theme name, e.g. ``"retail"``.
        sqlite_file: The SQLite file of tables stored in SQLite.
        fact: Fact table name, e.g. ``"orders"``.
        key: The fact table's id column.
        date: Its date or timestamp column.
        date_type: ``"date"`` or ``"timestamp"``.
        measure: Its float measure, e.g. ``"amount"``.
        measure_words: How questions name the measure, e.g. ``"order amount"``.
        unit: Prefix and suffix of the measure written as text (dirtiness 3), e.g. ``("$", "")``.
        center: Typical value of the measure.
        count: Its integer column, e.g. ``"quantity"``.
        count_range: Inclusive bounds of ``count``.
        category: Its categorical column, e.g. ``"status"``.
        categories: The category's values.
        dimensions: The two lookup tables.
    """

    name: str
    sqlite_file: str
    fact: str
    key: str
    date: str
    date_type: str
    measure: str
    measure_words: str
    unit: tuple[str, str]
    center: float
    count: str
    count_range: tuple[int, int]
    category: str
    categories: tuple[str, ...]
    dimensions: tuple[Dimension, Dimension]


THEMES = {
    "retail": Theme("retail", "shop.sqlite", "orders", "order_id", "order_date", "date", "amount", "order amount",
                    ("$", ""), 120.0, "quantity", (1, 9), "status", ("completed", "shipped", "returned", "cancelled"),
                    (Dimension("customers", "customer_id", "region", ("north", "south", "east", "west", "central"),
                               "age", (18, 80)),
                     Dimension("products", "product_id", "category", ("books", "garden", "toys", "kitchen",
                                                                       "sports", "music"), "stock", (0, 400)))),
    "sensors": Theme("sensors", "telemetry.sqlite", "readings", "reading_id", "reading_time", "timestamp",
                     "temperature", "temperature reading", ("", " C"), 21.0, "battery", (5, 100), "state",
                     ("ok", "degraded", "fault"),
                     (Dimension("stations", "station_id", "city", ("oslo", "lyon", "porto", "turin", "graz",
                                                                    "ghent"), "elevation", (0, 1800)),
                      Dimension("devices", "device_id", "model", ("ax10", "bx20", "cx30", "dx40"), "firmware",
                                (1, 12)))),
    "flights": Theme("flights", "airline.sqlite", "flights", "flight_id", "flight_date", "date", "delay",
                     "departure delay in minutes", ("", " min"), 18.0, "passengers", (40, 320), "outcome",
                     ("on_time", "late", "diverted", "cancelled"),
                     (Dimension("carriers", "carrier_id", "country", ("canada", "mexico", "brazil", "peru",
                                                                      "chile"), "fleet_size", (10, 300)),
                      Dimension("airports", "airport_id", "state", ("ohio", "texas", "utah", "maine", "iowa",
                                                                     "idaho"), "runways", (1, 6)))),
}
"""The themes datasets are drawn from, by name."""


def generate_dataset(theme: str, seed: int, dirtiness: int, *, name: str | None = None) -> Dataset:
    """A seeded dataset of one theme: a fact table of events over time and its two dimension tables.

    The measure depends on the count (a per-dataset slope), on the first dimension's label and on
    noise, and a few rows carry outliers (8 to 15 times the center). Each table goes to a CSV,
    Parquet or the theme's SQLite file, drawn per table. Dirtiness adds, cumulatively, nulls in the
    measure and untidy category labels (1), exact duplicate rows (2), and the measure written as
    text with a unit and thousands separators plus dates in two formats (3).

    Args:
        theme: A key of :data:`THEMES`.
        seed: Seed of the draw (``random.Random``; nothing else is random).
        dirtiness: One of :data:`DIRTINESS_LEVELS`.
        name: The dataset's name; default ``"<theme>-<seed>"``.

    Returns:
        The dataset; the same arguments always give an equal one.

    Raises:
        TaskError: An unknown theme or dirtiness level.

    Example:
        >>> generate_dataset("retail", 7, 0).tables[0].name
        'orders'
    """
    if theme not in THEMES:
        raise TaskError(f"expected a theme among {sorted(THEMES)}, got {theme!r}")
    if dirtiness not in DIRTINESS_LEVELS:
        raise TaskError(f"expected a dirtiness level among {DIRTINESS_LEVELS}, got {dirtiness!r}")
    spec, rng = THEMES[theme], random.Random(seed)
    dimensions = [_dimension_table(spec, dimension, rng) for dimension in spec.dimensions]
    fact = _fact_table(spec, dimensions, rng, dirtiness)
    return Dataset(name or f"{theme}-{seed}", theme, seed, dirtiness, (fact, *dimensions))


def _file(spec: Theme, table: str, rng: random.Random) -> str:
    kind = rng.choice(("csv", "parquet", "sqlite"))
    return spec.sqlite_file if kind == "sqlite" else f"{table}.{kind}"


def _dimension_table(spec: Theme, dimension: Dimension, rng: random.Random) -> Table:
    size = rng.randint(10, 24)
    low, high = dimension.number_range
    rows = tuple((key, dimension.labels[key % len(dimension.labels)] if key <= len(dimension.labels)
                  else rng.choice(dimension.labels), rng.randint(low, high)) for key in range(1, size + 1))
    columns = (Column(dimension.key, "int"), Column(dimension.label, "str"), Column(dimension.number, "int"))
    return Table(dimension.table, _file(spec, dimension.table, rng), columns, rows)


def _fact_table(spec: Theme, dimensions: list[Table], rng: random.Random, dirtiness: int) -> Table:
    size = rng.randint(150, 450)
    effects = {label: rng.uniform(-0.3, 0.3) * spec.center for label in spec.dimensions[0].labels}
    slope = rng.uniform(-1.0, 1.0) * spec.center / (spec.count_range[1] - spec.count_range[0])
    start, span = dt.datetime(2022, 1, 3) + dt.timedelta(days=rng.randint(0, 700)), rng.randint(150, 420)
    rows = [_fact_row(spec, dimensions, rng, key, (effects, slope), (start, span)) for key in range(1, size + 1)]
    rows.sort(key=lambda row: (row[3], row[0]))
    for index in rng.sample(range(size), rng.randint(2, 5)):
        rows[index][5] = round(spec.center * rng.uniform(8, 15), 2)
    columns = [Column(spec.key, "int"), Column(spec.dimensions[0].key, "int"), Column(spec.dimensions[1].key, "int"),
               Column(spec.date, spec.date_type), Column(spec.count, "int"), Column(spec.measure, "float"),
               Column(spec.category, "str")]
    rows, columns = _dirty(spec, rows, columns, rng, dirtiness)
    return Table(spec.fact, _file(spec, spec.fact, rng), tuple(columns), tuple(tuple(row) for row in rows))


def _fact_row(spec: Theme, dimensions: list[Table], rng: random.Random, key: int,
              shape: tuple[dict[str, float], float], window: tuple[dt.datetime, int]) -> list[Cell]:
    (effects, slope), (start, span) = shape, window
    first = rng.choice(dimensions[0].rows)
    second = rng.choice(dimensions[1].rows)
    count = rng.randint(*spec.count_range)
    measure = max(0.05 * spec.center, spec.center + effects[str(first[1])] + slope * (count - spec.count_range[0])
                  + rng.gauss(0, 0.25 * spec.center))
    moment = start + dt.timedelta(days=rng.randrange(span), seconds=rng.randrange(86_400))
    when = moment.strftime("%Y-%m-%d" if spec.date_type == "date" else "%Y-%m-%d %H:%M:%S")
    category = spec.categories[min(int(rng.random() ** 1.6 * len(spec.categories)), len(spec.categories) - 1)]
    return [key, first[0], second[0], when, count, round(measure, 2), category]


def _dirty(spec: Theme, rows: list[list[Cell]], columns: list[Column], rng: random.Random,
           dirtiness: int) -> tuple[list[list[Cell]], list[Column]]:
    """Apply the dirtiness levels to the fact rows (measure at 5, category at 6, date at 3)."""
    if dirtiness >= 1:
        for row in rows:
            if rng.random() < NULL_SHARE:
                row[5] = None
            if rng.random() < LABEL_NOISE_SHARE:
                row[6] = _untidy_label(str(row[6]), rng)
    if dirtiness >= 3:
        prefix, suffix = spec.unit
        for row in rows:
            if row[5] is not None:
                row[5] = f"{prefix}{row[5]:,.2f}{suffix}"
            if rng.random() < US_DATE_SHARE:
                row[3] = _us_date(str(row[3]))
        columns[3], columns[5] = Column(spec.date, "str"), Column(spec.measure, "str")
    if dirtiness >= 2:
        for index in sorted(rng.sample(range(len(rows)), max(2, int(DUPLICATE_SHARE * len(rows)))), reverse=True):
            rows.insert(index + 1 + rng.randrange(3), list(rows[index]))
    return rows, columns


def _untidy_label(label: str, rng: random.Random) -> str:
    """The label with other letter case and stray spaces, never equal to it."""
    cased = rng.choice((label.upper(), label.title(), label))
    padded = rng.choice((f" {cased}", f"{cased} ", f"  {cased} ", cased))
    return padded if padded != label else f"{label} "


def _us_date(iso: str) -> str:
    """An ISO date or timestamp rewritten with the date part as ``MM/DD/YYYY``."""
    day, _, time = iso.partition(" ")
    us = dt.date.fromisoformat(day).strftime(US_DATE_FORMAT)
    return f"{us} {time}" if time else us


# -- the bundled datasets ----------------------------------------------------------------------


@functools.cache
def _bundled_datasets() -> dict[str, Dataset]:
    """Every bundled dataset by name, read once (checked against the manifest's sha256)."""
    data = read_bundled_file(ENV, bundle_manifest(ENV)["datasets"])
    datasets = (Dataset.from_dict(json.loads(line)) for line in data.decode("utf-8").splitlines() if line)
    return {dataset.name: dataset for dataset in datasets}


def available_datasets() -> list[str]:
    """Names of the bundled datasets, sorted."""
    return sorted(_bundled_datasets())


def load_dataset(name: str) -> Dataset:
    """A bundled dataset by name.

    Raises:
        UnknownTaskError: No bundled dataset has that name (the message suggests the closest).
        SplitIntegrityError: The datasets file does not match its manifest.
    """
    datasets = _bundled_datasets()
    if name not in datasets:
        raise UnknownTaskError(f"expected a bundled DataAnalysis dataset, got {name!r}" + did_you_mean(name, datasets))
    return datasets[name]


@functools.lru_cache(maxsize=32)
def _materialized(name: str) -> dict[str, bytes]:
    return materialize(load_dataset(name))


def dataset_files(name: str) -> dict[str, bytes]:
    """The file bytes of a bundled dataset, by file name (materialized once per dataset, then cached).

    Raises:
        UnknownTaskError: No bundled dataset has that name.
    """
    return dict(_materialized(name))
