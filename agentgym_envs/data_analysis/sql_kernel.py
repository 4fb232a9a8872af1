"""The ``sql`` tool's side inside the sandbox's kernel (DataAnalysis-v0).

This file is shipped into the sandbox as source text (:data:`SQL_TOOL_SOURCE`) and run there next to the
task's SQL loader, so it uses the standard library and duckdb only and must run on the sandbox's Python. Its
:func:`make_sql_tool` wraps the loaded connection into the callable that the env's tool cells call:

- a query must be exactly one statement of a read-only kind, judged on duckdb's own parse
  (:func:`check_read_only`): ``SELECT`` (which covers ``WITH``, ``VALUES``, ``FROM``-first, ``DESCRIBE``, ``SHOW``
  and ``SUMMARIZE``), ``EXPLAIN`` of such a statement, and ``PRAGMA`` of :data:`READ_ONLY_PRAGMAS`; and it runs in
  a read-only transaction, which refuses the writes a ``SELECT`` can hide in a data-modifying ``WITH``;
- a running query is stopped after ``timeout_s`` by ``connection.interrupt()`` from a watchdog thread (a query
  running in duckdb's C++ never sees the kernel's timer signal; one thread for the kernel's life, since
  starting a timer thread per call would cost more than most queries);
- the tool shows the first ``max_rows`` rows as a text table, each cell cut to ``max_cell_chars``, the whole
  cut to ``max_chars``, with the total row count (:func:`render_table`); grading writes every row (up to a
  cap) as JSON cells to a file instead (:func:`json_cell`).

Every call ends its output with a status line ``<nonce>:ok`` or ``<nonce>:error``, the nonce chosen by the host
for that call, which the host strips; the rows a query returns cannot write that line.

:func:`install` is what the env's set-up cell calls: it makes the data files read-only and the empty ``outputs/``
folder for the agent's files, loads the tables with the task loader's source, writes their columns for the
prompt and returns the tool.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import decimal
import json
import math
import os
import re
import threading
import time
import warnings
from collections.abc import Iterator

import duckdb

READ_ONLY_TYPES = frozenset({"SELECT", "EXPLAIN", "PRAGMA"})
"""duckdb statement types the tool runs (``EXPLAIN`` and ``PRAGMA`` further checked)."""

READ_ONLY_PRAGMAS = frozenset({"table_info", "show", "show_tables", "show_tables_expanded", "database_list",
                               "database_size", "storage_info", "version", "platform", "functions", "collations"})
"""``PRAGMA`` names that only read."""

EXPLAIN = re.compile(r"\s*explain\s+(?:\(.*?\)\s*|analy[sz]e\s+)?", re.IGNORECASE | re.DOTALL)
PRAGMA = re.compile(r"\s*pragma\s+([A-Za-z_]+)", re.IGNORECASE)
BATCH_ROWS = 4096
DATA_DIR = "data"
OUTPUTS_DIR = "outputs"
M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most malloc arenas."""


class QueryRefused(Exception):
    """The query is not one read-only statement; the message says what is allowed."""


def check_read_only(query: str) -> str:
    """The one statement of ``query`` when it is read-only; raises :class:`QueryRefused` or ``duckdb.Error``."""
    statements = duckdb.extract_statements(query)
    if len(statements) != 1:
        raise QueryRefused(f"expected exactly one SQL statement, got {len(statements)}")
    statement = statements[0]
    kind = statement.type.name
    if kind not in READ_ONLY_TYPES:
        raise QueryRefused(f"only read-only statements run here (SELECT, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE, "
                           f"EXPLAIN, PRAGMA table_info, ...); got a statement of type {kind}")
    if kind == "EXPLAIN":
        check_read_only(query[EXPLAIN.match(query).end():])
    if kind == "PRAGMA":
        name = PRAGMA.match(query)
        if name is None or name.group(1).lower() not in READ_ONLY_PRAGMAS:
            raise QueryRefused(f"only these PRAGMAs run here: {', '.join(sorted(READ_ONLY_PRAGMAS))}")
    return query


class Watchdog:
    """Interrupts a connection's query once its deadline passes; one daemon thread.

    ``connection.interrupt()`` on an idle connection does nothing, so a deadline that passes just as the query
    ends is harmless.
    """

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection
        self._deadline: float | None = None
        self._changed = threading.Condition()
        threading.Thread(target=self._watch, name="agentrl-sql-watchdog", daemon=True).start()

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._deadline is None:
                    self._changed.wait()
                elif time.monotonic() >= self._deadline:
                    self._connection.interrupt()
                    self._deadline = None
                else:
                    self._changed.wait(self._deadline - time.monotonic())

    @contextlib.contextmanager
    def limit(self, timeout_s: float) -> Iterator[None]:
        """Interrupt the connection's query if the block runs past ``timeout_s``."""
        with self._changed:
            self._deadline = time.monotonic() + timeout_s
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:  # the watchdog wakes at the old deadline, finds none and sleeps again
                self._deadline = None


def run_query(connection: duckdb.DuckDBPyConnection, watchdog: Watchdog, query: str, keep_rows: int,
              timeout_s: float) -> tuple[list[str], list[tuple], int]:
    """Column names, the first ``keep_rows`` rows and the total row count of ``query``, stopped after ``timeout_s``.

    The query runs in a read-only transaction, rolled back after it: a statement of type ``SELECT`` may still
    write through a data-modifying ``WITH`` (``WITH d AS (DELETE ... RETURNING *) SELECT ...``).
    """
    statement = check_read_only(query)
    connection.execute("BEGIN TRANSACTION READ ONLY")
    try:
        with watchdog.limit(timeout_s), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            relation = connection.sql(statement)
            if relation is None:
                return [], [], 0
            columns = list(relation.columns)
            rows, total = [], 0
            for batch in relation.to_arrow_reader(BATCH_ROWS):
                if len(rows) < keep_rows:
                    kept = batch.slice(0, keep_rows - len(rows))
                    rows += zip(*(column.to_pylist() for column in kept.columns), strict=True)
                total += batch.num_rows
    finally:
        connection.execute("ROLLBACK")
    return columns, rows, total


def shown_cell(value: object, max_cell_chars: int) -> str:
    """A cell as the table shows it: ``NULL``, or its text on one line, cut to ``max_cell_chars``."""
    if value is None:
        return "NULL"
    text = value if isinstance(value, str) else value.isoformat(" ") if isinstance(value, datetime.datetime) \
        else str(value)
    text = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return text if len(text) <= max_cell_chars else text[:max(max_cell_chars - 1, 0)] + "…"


def render_table(columns: list[str], rows: list[tuple], total: int, max_cell_chars: int, max_chars: int) -> str:
    """A text table of ``rows`` under ``columns``, then the row count (and how many rows are shown)."""
    if not columns:
        return "(the statement returned no table)"
    cells = [[shown_cell(name, max_cell_chars) for name in columns]]
    cells += [[shown_cell(value, max_cell_chars) for value in row] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
             for line in cells]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    footer = f"({total} row{'' if total == 1 else 's'}" + (f", showing the first {len(rows)})" if total > len(rows)
                                                           else ")")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[:max_chars].rsplit("\n", 1)[0] + "\n[table cut at the output limit]"
    return text + "\n" + footer


def json_cell(value: object) -> object:
    """A cell as JSON for grading: null, bool, int, float, str; dates and times as ISO strings (``"2024-01-02"``,
    ``"2024-01-02 03:04:00"``), as :func:`tasks.data_analysis.references.json_cell` writes expected tables."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(" ")  # as the tasks write their answer tables
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def error_text(error: BaseException) -> str:
    """The message of a refused or failed query, on its own (no traceback)."""
    if isinstance(error, duckdb.InterruptException):
        return "the query was stopped at the time limit"
    return str(error).strip() or type(error).__name__


def make_sql_tool(connection: duckdb.DuckDBPyConnection | None, load_error: str | None, marker: str) -> object:
    """The kernel's ``_agentrl_sql(query, nonce, max_rows, max_cell_chars, max_chars, timeout_s, result_path=None)``.

    Without ``result_path`` it prints the table (or the error) and the status line; with it, it writes
    ``{"columns", "rows", "total", "error"}`` to that file (at most ``max_rows`` rows) and prints only the status.
    When the tables could not be loaded (``load_error``), every call fails with that message. The callable's
    ``agentrl`` attribute is ``marker``, which tells it from a look-alike the agent defined.
    """
    watchdog = Watchdog(connection) if connection is not None else None

    def sql_tool(query: str, nonce: str, max_rows: int, max_cell_chars: int, max_chars: int, timeout_s: float,
                 result_path: str | None = None) -> None:
        try:
            if connection is None:
                raise QueryRefused(f"the tables could not be loaded: {load_error}")
            columns, rows, total = run_query(connection, watchdog, query, max_rows, timeout_s)
            outcome = {"columns": columns, "rows": [[json_cell(v) for v in row] for row in rows] if result_path
                       else rows, "total": total, "error": None}
        except Exception as error:  # every failure of the agent's query is its observation
            outcome = {"columns": None, "rows": None, "total": 0, "error": error_text(error)}
        if result_path is not None:
            with open(result_path, "w", encoding="utf-8") as handle:
                json.dump(outcome, handle)
        elif outcome["error"] is None:
            print(render_table(outcome["columns"], outcome["rows"], outcome["total"], max_cell_chars, max_chars))
        else:
            print(f"Error: {outcome['error']}")
        print(f"{nonce}:{'ok' if outcome['error'] is None else 'error'}")

    sql_tool.agentrl = marker
    return sql_tool


def table_columns(connection: duckdb.DuckDBPyConnection, tables: list[str]) -> dict[str, list[list[str]]]:
    """Table name -> ``[column name, duckdb type]`` of each column, for the prompt."""
    columns = {}
    for table in tables:
        relation = connection.sql('SELECT * FROM "' + table.replace('"', '""') + '" LIMIT 0')
        columns[table] = [[name, str(kind)] for name, kind in zip(relation.columns, relation.types, strict=True)]
    return columns


def frugal_memory() -> None:
    """One malloc arena and Arrow's system allocator, so that the address-space limit measures memory in use.

    Each thread duckdb starts would otherwise reserve a 64 MB arena, and Arrow its own pool: together enough to
    fail an import under a limit of a few hundred MB that the data itself would never reach.
    """
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def prepare_workdir() -> None:
    """Make the data files and their folder read-only (a guard against accidents, not a boundary), and the
    writable :data:`OUTPUTS_DIR` beside them."""
    for name in os.listdir(DATA_DIR):
        os.chmod(os.path.join(DATA_DIR, name), 0o444)
    os.chmod(DATA_DIR, 0o555)
    os.makedirs(OUTPUTS_DIR, exist_ok=True)


def install(loader_source: str, tables: dict[str, str], marker: str, schema_path: str | None) -> object:
    """Load ``tables`` from ``data/`` with the loader's source and return the tool (:func:`make_sql_tool`).

    With ``schema_path`` (the episode's first install), first makes the data read-only and ``outputs/``, and writes
    ``{"columns": table -> [[name, type], ...] | None, "error": str | None}`` there. A file DuckDB cannot read
    is not an error here: the tool then answers every call with the reason.
    """
    frugal_memory()
    if schema_path is not None:
        prepare_workdir()
    namespace: dict = {"__name__": "agentrl_sql_loader"}
    try:
        exec(compile(loader_source, "<sql loader>", "exec"), namespace)
        connection = namespace["load_tables"](DATA_DIR, tables)
        schema = {"columns": table_columns(connection, list(tables)), "error": None}
    except Exception as error:  # a file the loader cannot read: every call will say so
        connection, schema = None, {"columns": None, "error": f"{type(error).__name__}: {error}"}
    if schema_path is not None:
        with open(schema_path, "w", encoding="utf-8") as handle:
            json.dump(schema, handle)
    return make_sql_tool(connection, schema["error"], marker)
