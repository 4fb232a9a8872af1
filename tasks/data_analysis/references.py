"""The two reference programs of a DataAnalysis question, the readings they are built under, and how they run.

A *reading* fixes every choice a question could leave open, one per *dimension*
(:data:`DIMENSIONS`): whether exact duplicate rows are dropped, whether category labels are
compared after trimming and lower-casing, whether missing measure values are skipped or counted
as 0, which standard deviation, which of tied groups wins, how halves are rounded. A question
states some of them as constraints; the others are checked by running the pandas program under
every reading of them (:func:`run_pandas`).

The pandas program reads ``data/<file>`` (relative to the working folder) and prints the answer
line (``@a[v], @b[v]``) or, for a result table, one JSON list per row. The SQL program runs over
the tables that :func:`tasks.data_analysis.files.duckdb_connection` loads (:func:`run_sql`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.data_analysis.datasets import Table, Theme
from tasks.data_analysis.files import duckdb_connection
from tasks.errors import TaskError

if TYPE_CHECKING:
    import duckdb

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "duplicates": ("dropped", "kept"),
    "labels": ("normalized", "raw"),
    "nulls": ("skipped", "zero"),
    "ddof": ("1", "0"),
    "ties": ("first", "last"),
    "rounding": ("half_even", "half_up"),
}
"""Ambiguity dimension -> its readings (the first is the default of an unstated dimension)."""

Reading = Mapping[str, str]
"""Dimension -> the reading chosen for it."""

NUMBER_PATTERN = r"[^0-9.\-]"
"""What is stripped from a measure written as text (``$1,234.50`` -> ``1234.50``)."""


def constraint(dimension: str, reading: str, theme: Theme) -> str:
    """The sentence that states one reading of a dimension, in a question's constraints.

    Raises:
        TaskError: The dimension or reading is unknown.
    """
    texts = {
        ("duplicates", "dropped"): f"Drop exact duplicate rows of {theme.fact} before computing anything.",
        ("duplicates", "kept"): f"Keep exact duplicate rows of {theme.fact}: every row counts.",
        ("labels", "normalized"): f"Compare {theme.category} values after trimming spaces and lower-casing them.",
        ("labels", "raw"): f"Compare {theme.category} values exactly as written.",
        ("nulls", "skipped"): f"Leave out missing {theme.measure} values; do not fill them.",
        ("nulls", "zero"): f"Count a missing {theme.measure} value as 0.",
        ("ddof", "1"): "Use the sample standard deviation (ddof=1).",
        ("ddof", "0"): "Use the population standard deviation (ddof=0).",
        ("ties", "first"): "If several candidates tie, answer the alphabetically first.",
        ("ties", "last"): "If several candidates tie, answer the alphabetically last.",
        ("rounding", "half_even"): "Round halves to even.",
        ("rounding", "half_up"): "Round halves up (away from zero).",
    }
    if (dimension, reading) not in texts:
        raise TaskError(f"expected a dimension and reading among {sorted(texts)}, got {(dimension, reading)}")
    return texts[(dimension, reading)]


# ------------------------------------------------------------------------------ pandas


def pandas_load(table: Table) -> str:
    """The line that loads one table into a DataFrame named after it."""
    path = f"data/{table.file}"
    if table.format == "csv":
        return f'{table.name} = pd.read_csv("{path}")'
    if table.format == "parquet":
        return f'{table.name} = pd.read_parquet("{path}")'
    return f'{table.name} = pd.read_sql_query("SELECT * FROM {table.name}", sqlite3.connect("{path}"))'


def pandas_prelude(tables: Sequence[Table], theme: Theme, reading: Reading, *, dirtiness: int,
                   uses_date: bool, prints_table: bool) -> list[str]:
    """The imports, loads and cleaning steps that make ``fact``, the fact table as the reading sees it."""
    standard = ["import json"] if prints_table else []
    standard += ["import sqlite3"] if any(table.format == "sqlite" for table in tables) else []
    standard += ["from decimal import ROUND_HALF_UP, Decimal"] if reading.get("rounding") == "half_up" else []
    lines = [*standard, "", "import pandas as pd", ""] if standard else ["import pandas as pd", ""]
    lines += [pandas_load(table) for table in tables]
    lines.append(f"fact = {theme.fact}.copy()")
    if reading.get("duplicates") == "dropped":
        lines.append("fact = fact.drop_duplicates()")
    if reading.get("labels") == "normalized":
        lines.append(f'fact["{theme.category}"] = fact["{theme.category}"].str.strip().str.lower()')
    if dirtiness >= 3:
        lines.append(f'fact["{theme.measure}"] = pd.to_numeric(fact["{theme.measure}"].str.replace('
                     f'r"{NUMBER_PATTERN}", "", regex=True))')
    if reading.get("nulls") == "zero":
        lines.append(f'fact["{theme.measure}"] = fact["{theme.measure}"].fillna(0)')
    if uses_date:
        lines += _pandas_dates(theme, dirtiness)
    return lines + _pandas_formatter(reading.get("rounding"))


def _pandas_dates(theme: Theme, dirtiness: int) -> list[str]:
    if dirtiness < 3:
        return [f'fact["{theme.date}"] = pd.to_datetime(fact["{theme.date}"])']
    time = " %H:%M:%S" if theme.date_type == "timestamp" else ""
    return [f'written = fact["{theme.date}"].astype("str")',
            f'iso = pd.to_datetime(written, format="%Y-%m-%d{time}", errors="coerce")',
            f'us = pd.to_datetime(written, format="%m/%d/%Y{time}", errors="coerce")',
            f'fact["{theme.date}"] = iso.fillna(us)']


def _pandas_formatter(rounding: str | None) -> list[str]:
    """``fmt(value, places)``: the number rounded and written with ``places`` decimals."""
    if rounding is None:
        return [""]
    if rounding == "half_up":
        return ["", "", "def fmt(value, places):",
                "    exact = Decimal(repr(float(value)))",
                "    return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))", "", ""]
    if rounding == "exact":
        return ["", "", "def fmt(value, places):", "    return repr(float(value))", "", ""]
    return ["", "", "def fmt(value, places):", '    return f"{value:.{places}f}"', "", ""]


def answer_printer(names: Sequence[str]) -> list[str]:
    """The last line of a field question's program: print ``@name[value]`` for each answer variable."""
    fields = ", ".join(f'"@{name}[" + str({name}) + "]"' for name in names)
    return [f"print(\", \".join([{fields}]))"]


TABLE_PRINTER = ["for row in result.itertuples(index=False):",
                 "    print(json.dumps([cell.item() if hasattr(cell, \"item\") else cell for cell in row]))"]
"""The last lines of a result-table program: one JSON list per row of the DataFrame ``result``."""


def run_pandas(source: str, work_dir: str | os.PathLike[str]) -> str:
    """Run a pandas reference program in ``work_dir`` (which holds ``data/``) and return what it printed.

    The program runs in this process, in a fresh namespace, with the working directory changed to
    ``work_dir`` for the duration (so not from two threads at once).

    Raises:
        TaskError: The program raised; the message carries the exception.
    """
    printed = io.StringIO()
    try:
        with contextlib.chdir(work_dir), contextlib.redirect_stdout(printed):
            exec(compile(source, "<pandas reference>", "exec"), {"__name__": "__main__"})
    except Exception as error:  # a reference program is generated code: any failure is a bug to report
        raise TaskError(f"expected the pandas reference to run, got {type(error).__name__}: {error}\n"
                        f"{source}") from error
    return printed.getvalue()


# ------------------------------------------------------------------------------ SQL


def sql_fact(theme: Theme, reading: Reading, *, dirtiness: int, uses_date: bool) -> str:
    """The ``WITH fact AS (...)`` clause: the fact table as the reading sees it."""
    replaced = []
    if reading.get("labels") == "normalized":
        replaced.append(f"lower(trim({theme.category})) AS {theme.category}")
    measure = theme.measure
    if dirtiness >= 3:
        measure = f"CAST(NULLIF(regexp_replace({theme.measure}, '{NUMBER_PATTERN}', '', 'g'), '') AS DOUBLE)"
    if reading.get("nulls") == "zero":
        measure = f"COALESCE({measure}, 0)"
    if measure != theme.measure:
        replaced.append(f"{measure} AS {theme.measure}")
    if uses_date:
        replaced.append(f"{_sql_date(theme, dirtiness)} AS {theme.date}")
    source = f"(SELECT DISTINCT * FROM {theme.fact})" if reading.get("duplicates") == "dropped" else theme.fact
    replace = f" REPLACE ({', '.join(replaced)})" if replaced else ""
    return f"WITH fact AS (SELECT *{replace} FROM {source})"


def _sql_date(theme: Theme, dirtiness: int) -> str:
    kind = "DATE" if theme.date_type == "date" else "TIMESTAMP"
    if dirtiness < 3:
        return f"CAST({theme.date} AS {kind})"
    time = " %H:%M:%S" if theme.date_type == "timestamp" else ""
    return (f"CAST(COALESCE(try_strptime({theme.date}, '%Y-%m-%d{time}'), "
            f"try_strptime({theme.date}, '%m/%d/%Y{time}')) AS {kind})")


def run_sql(query: str, work_dir: str | os.PathLike[str], tables: Mapping[str, str],
            loaded: LoadedTables | None = None) -> list[list[Any]]:
    """Run a SQL reference over the task's tables (loaded from ``work_dir/data``); rows as JSON-safe cells.

    Args:
        query: The SQL reference.
        work_dir: The folder holding ``data/``.
        tables: Table name -> file name in ``data/``.
        loaded: Where the tables are kept loaded between calls (a generator runs thousands of references over a
            few datasets); None loads them for this query alone.

    Raises:
        TaskError: The tables do not load or the query fails.
    """
    import duckdb

    if loaded is not None:
        return loaded.run(query, work_dir, tables)
    connection = duckdb_connection(Path(work_dir) / "data", tables)
    try:
        rows = connection.execute(query).fetchall()
    except duckdb.Error as error:
        raise TaskError(f"expected the SQL reference to run, got {type(error).__name__}: {error}\n{query}") from error
    finally:
        connection.close()
    return [[json_cell(cell) for cell in row] for row in rows]


class LoadedTables:
    """DuckDB databases of SQL references' tables, each loaded once per ``(folder, tables)`` and kept until
    :meth:`close`; each query runs on a cursor of its own in a transaction that is rolled back, so no query sees
    what another one did.

    Example:
        >>> with LoadedTables() as loaded:                                              # doctest: +SKIP
        ...     rows = run_sql("SELECT count(*) FROM orders", "/tmp/ds", {"orders": "orders.csv"}, loaded)
    """

    def __init__(self) -> None:
        self._databases: dict[tuple[str, tuple[tuple[str, str], ...]], duckdb.DuckDBPyConnection] = {}

    def run(self, query: str, work_dir: str | os.PathLike[str], tables: Mapping[str, str]) -> list[list[Any]]:
        """:func:`run_sql` on the tables loaded before (loading them the first time).

        Raises:
            TaskError: The tables do not load or the query fails.
        """
        import duckdb

        folder = os.fspath(Path(work_dir) / "data")
        key = (folder, tuple(sorted(tables.items())))
        if key not in self._databases:
            self._databases[key] = duckdb_connection(folder, tables)
        cursor = self._databases[key].cursor()
        try:
            cursor.begin()
            rows = cursor.execute(query).fetchall()
        except duckdb.Error as error:
            raise TaskError(f"expected the SQL reference to run, got {type(error).__name__}: {error}\n"
                            f"{query}") from error
        finally:
            cursor.close()  # rolls back the open transaction
        return [[json_cell(cell) for cell in row] for row in rows]

    def close(self) -> None:
        """Close every database; idempotent."""
        for connection in self._databases.values():
            connection.close()
        self._databases.clear()

    def __enter__(self) -> LoadedTables:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def json_cell(cell: Any) -> Any:
    """A result cell as JSON holds it: dates and times as ISO strings, decimals as floats."""
    if isinstance(cell, dt.datetime):
        return cell.isoformat(sep=" ")
    if isinstance(cell, dt.date):
        return cell.isoformat()
    if isinstance(cell, decimal.Decimal):
        return float(cell)
    return cell


def write_files(files: Mapping[str, bytes], work_dir: Path) -> Path:
    """Write ``files`` under ``work_dir/data/`` (the folders made as needed) and return ``work_dir``."""
    (work_dir / "data").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (work_dir / "data" / name).write_bytes(data)
    return work_dir
