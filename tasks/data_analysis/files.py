"""The data files of a DataAnalysis task, and the one loader that turns them into SQL tables.

A task names its files in ``metadata["files"]`` (plain file names, placed in the sandbox at
``data/<name>``) and its SQL tables in ``metadata["tables"]`` (table name -> file name: a ``.csv``
or ``.parquet`` file is one table named by its stem; a ``.sqlite`` file holds one or more tables,
each named as inside the file). The bytes come from exactly one of:

* ``metadata["dataset"]``: a bundled dataset by name, materialized in memory (cached per dataset);
* ``metadata["data_dir"]``: an absolute host folder holding the files (the user's data, DABench's).

:data:`SQL_LOADER_SOURCE` is the source of ``load_tables(folder, tables)``, which builds an
in-memory DuckDB with one table per entry of ``tables`` and then locks it away from the file
system. It is self-contained (stdlib, duckdb, pyarrow) so that the environment can send the same
text into the sandbox's kernel for its ``sql`` tool; :func:`duckdb_connection` runs that very text
on the host (for the SQL reference programs), so both places load tables by one code path.

Example:
    >>> task = Task("da/0", "DataAnalysis", "filtering", "How many rows?", "@rows[2]",
    ...             metadata={"files": ["t.csv"], "tables": {"t": "t.csv"}, "data_dir": "/data/mine"})
    >>> table_sources(task)
    {'t': 't.csv'}
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.data_analysis.datasets import dataset_files
from tasks.data_analysis.formats import check_file_name, table_format
from tasks.errors import TaskError
from tasks.records import Task

if TYPE_CHECKING:  # duckdb is imported only when a connection is built
    import duckdb

SQL_LOADER_SOURCE = '''\
"""Load a task's data files into an in-memory DuckDB, one table per entry (DataAnalysis-v0)."""
import csv
import os
import sqlite3

import duckdb
import pyarrow

_SQLITE_AFFINITIES = (("INT", pyarrow.int64()), ("CHAR", pyarrow.string()), ("CLOB", pyarrow.string()),
                      ("TEXT", pyarrow.string()), ("BLOB", pyarrow.binary()), ("REAL", pyarrow.float64()),
                      ("FLOA", pyarrow.float64()), ("DOUB", pyarrow.float64()))


_PANDAS_NA_VALUES = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                     "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def _loader_quote(identifier):
    return '"' + identifier.replace('"', '""') + '"'


def _loader_sqlite_type(declared):
    declared = (declared or "").upper()
    for marker, arrow_type in _SQLITE_AFFINITIES:
        if marker in declared:
            return arrow_type
    return None


def _loader_sqlite_column(values, declared):
    arrow_type = _loader_sqlite_type(declared)
    try:
        return pyarrow.array(values, type=arrow_type)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError):
        return pyarrow.array([None if value is None else str(value) for value in values], type=pyarrow.string())


def _loader_sqlite_table(path, table):
    uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    with sqlite3.connect(uri, uri=True) as source:
        declared = {row[1]: row[2] for row in source.execute("PRAGMA table_info(" + _loader_quote(table) + ")")}
        if not declared:
            raise ValueError("expected a table " + repr(table) + " in " + path + ", got none of that name")
        cursor = source.execute("SELECT * FROM " + _loader_quote(table))
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    columns = [_loader_sqlite_column([row[i] for row in rows], declared[name]) for i, name in enumerate(names)]
    return pyarrow.table(columns, names=names)


def _loader_csv_header(path):
    """The header pandas.read_csv finds by default: its first non-blank line split at commas (byte-order mark
    dropped, spaces kept), named as pandas names the columns ("Unnamed: i" for an empty name at position i;
    repeated names suffixed ".1", ".2", ..., skipping suffixed names the header already has, given names before
    unnamed ones); with the number of blank lines before it."""
    blank = 0
    with open(path, newline="", encoding="utf-8-sig") as handle:
        for header in csv.reader(handle):
            if header:
                break
            blank += 1
        else:
            header = []
    names = [name or "Unnamed: " + str(index) for index, name in enumerate(header)]
    unnamed = [index for index, name in enumerate(header) if not name]
    counts = {}
    for index in [index for index in range(len(names)) if index not in unnamed] + unnamed:
        base = name = names[index]
        count = counts.get(name, 0)
        while count > 0:
            counts[base] = count + 1
            name = base + "." + str(count)
            count = count + 1 if name in names else counts.get(name, 0)
        names[index] = name
        counts[name] = count + 1
    return names, blank


def _loader_read_csv(connection, target, path):
    names, blank = _loader_csv_header(path)
    connection.execute("CREATE TABLE " + target + " AS SELECT * FROM read_csv(?, skip=?, header=true, names=?, "
                       "delim=',', quote=?, escape=?, nullstr=?, null_padding=true, parallel=false, "
                       "auto_detect=true)", [path, blank, names, '"', '"', list(_PANDAS_NA_VALUES)])


def _loader_add_table(connection, folder, table, file_name):
    if file_name in ("", ".", "..") or "/" in file_name or "\\\\" in file_name:
        raise ValueError("expected a plain file name for table " + repr(table) + ", got " + repr(file_name))
    path = os.path.join(folder, file_name)
    suffix = os.path.splitext(file_name)[1].lower()
    target = _loader_quote(table)
    if suffix == ".csv":
        _loader_read_csv(connection, target, path)
    elif suffix == ".parquet":
        connection.execute("CREATE TABLE " + target + " AS SELECT * FROM read_parquet(?)", [path])
    elif suffix in (".sqlite", ".sqlite3", ".db"):
        connection.register("__loader_arrow", _loader_sqlite_table(path, table))
        connection.execute("CREATE TABLE " + target + " AS SELECT * FROM __loader_arrow")
        connection.unregister("__loader_arrow")
    else:
        raise ValueError("expected a .csv, .parquet, .sqlite, .sqlite3 or .db file for table " + repr(table)
                         + ", got " + repr(file_name))


def load_tables(folder, tables):
    """An in-memory DuckDB holding one table per entry of tables (name -> file in folder), file access off."""
    connection = duckdb.connect(config={"autoinstall_known_extensions": False,
                                        "autoload_known_extensions": False, "threads": 1})
    for table, file_name in tables.items():
        _loader_add_table(connection, folder, table, file_name)
    connection.execute("SET enable_external_access=false")
    connection.execute("SET lock_configuration=true")
    return connection
'''
"""Source of ``load_tables(folder: str, tables: dict[str, str]) -> duckdb.DuckDBPyConnection``.

Run it with ``exec`` in a fresh namespace (it also defines private helpers named ``_loader_*``,
``_SQLITE_AFFINITIES`` and ``_PANDAS_NA_VALUES``). ``load_tables`` makes CSV tables with DuckDB's
``read_csv`` set to see the table ``pandas.read_csv(path)`` sees: the first non-blank line is always the header
(DuckDB's sniffer would otherwise guess, and call a first line of mostly empty fields data), named as pandas
names it (byte-order mark dropped, spaces around names kept, ``Unnamed: i`` for an empty name, ``.1`` after a
repeated one), comma-separated with ``"`` quoting, UTF-8, pandas's default missing-value strings (``NA``,
``null``, ``N/A``, ...) read as NULL, short rows padded with NULLs; column types are DuckDB's own guesses
(a date column is a DATE, ``007`` stays text), as pandas's are its own. Two layouts still differ: data rows
with more fields than the header (pandas makes the first ones the index, DuckDB adds columns) and a blank line
in a one-column file (pandas skips it, DuckDB reads a NULL). Parquet tables with ``read_parquet``,
and SQLite tables by
reading them with :mod:`sqlite3` (DuckDB's SQLite extension cannot be loaded here) into Arrow,
typed by each column's declared affinity (values that do not fit become text). Extension
auto-install and auto-load are off, and DuckDB runs one thread, so that a query gives the same rows
in the same order with the same float sums every time (a parallel SUM adds in varying order, which
can move a rounded result across a half). Once the tables exist it sets
``enable_external_access=false`` and ``lock_configuration=true``. A bad file name, suffix or
SQLite table raises ``ValueError``."""


def duckdb_connection(folder: str | os.PathLike[str], tables: Mapping[str, str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one table per entry of ``tables``, loaded by :data:`SQL_LOADER_SOURCE`.

    Args:
        folder: The folder holding the files (the sandbox's ``data``, or a host folder).
        tables: Table name -> file name in ``folder`` (see :func:`table_sources`).

    Returns:
        The connection, with external (file) access disabled and its configuration locked.

    Raises:
        TaskError: A file name is not plain, its suffix is not read, a SQLite file lacks the
            table, or DuckDB cannot read a file (the message says which).

    Example:
        >>> connection = duckdb_connection("/data/mine", {"t": "t.csv"})  # doctest: +SKIP
        >>> connection.sql("SELECT count(*) FROM t").fetchone()  # doctest: +SKIP
        (2,)
    """
    import duckdb

    try:
        return _load_tables()(os.fspath(folder), dict(tables))
    except (ValueError, OSError, duckdb.Error) as error:
        raise TaskError(f"expected loadable tables {dict(tables)} in {os.fspath(folder)}, got "
                        f"{type(error).__name__}: {error}") from error


@functools.cache
def _load_tables() -> Any:
    """The ``load_tables`` function that :data:`SQL_LOADER_SOURCE` defines (built once)."""
    namespace: dict[str, Any] = {}
    exec(compile(SQL_LOADER_SOURCE, "<tasks.data_analysis SQL loader>", "exec"), namespace)
    return namespace["load_tables"]


def file_names(task: Task) -> list[str]:
    """The plain file names of ``task.metadata["files"]``, checked.

    Raises:
        TaskError: ``files`` is missing, empty, not a list, repeats a name or holds one that is not plain.
    """
    names = task.metadata.get("files")
    if not isinstance(names, list) or not names:
        raise TaskError(f'expected task.metadata["files"] of task {task.id!r} to be a non-empty list of file '
                        f"names, got {names!r}")
    checked = [check_file_name(name, f'task.metadata["files"] of task {task.id!r}') for name in names]
    if len(set(checked)) != len(checked):
        raise TaskError(f'expected distinct names in task.metadata["files"] of task {task.id!r}, got {checked}')
    return checked


def table_sources(task: Task) -> dict[str, str]:
    """The task's SQL tables, ``metadata["tables"]`` (table name -> file name), checked.

    Every file must be one of ``metadata["files"]`` and readable by the loader; a CSV or Parquet
    file is one table named by the file's stem.

    Args:
        task: A DataAnalysis task.

    Returns:
        A copy of the mapping, in its order.

    Raises:
        TaskError: The mapping is missing or malformed, names a file the task does not list, or
            names a CSV/Parquet table other than by its file's stem.
    """
    tables = task.metadata.get("tables")
    if not isinstance(tables, Mapping) or not tables:
        raise TaskError(f'expected task.metadata["tables"] of task {task.id!r} to be a non-empty mapping of table '
                        f"name -> file name, got {tables!r}")
    listed = file_names(task)
    for table, file_name in tables.items():
        if not isinstance(table, str) or not table or file_name not in listed:
            raise TaskError(f"expected table {table!r} of task {task.id!r} to name one of its files {listed}, "
                            f"got {file_name!r}")
        if table_format(file_name) != "sqlite" and Path(file_name).stem != table:
            raise TaskError(f"expected the table of {file_name!r} in task {task.id!r} to be named "
                            f"{Path(file_name).stem!r} (its stem), got {table!r}")
    return dict(tables)


def task_files(task: Task) -> dict[str, bytes]:
    """The bytes of every file the task names, by file name, in ``metadata["files"]`` order.

    Args:
        task: A DataAnalysis task with ``metadata["files"]`` and exactly one of
            ``metadata["dataset"]`` (a bundled dataset) or ``metadata["data_dir"]`` (an absolute folder).

    Returns:
        File name -> bytes.

    Raises:
        TaskError: The file names are not plain, the task has neither or both sources, ``data_dir``
            is not absolute, a file is missing (the message says which and where), or the dataset is
            not bundled.

    Example:
        >>> task_files(load_split("DataAnalysis", "dev")[0]).keys()  # doctest: +SKIP
        dict_keys(['orders.csv', 'shop.sqlite'])
    """
    names = file_names(task)
    dataset, data_dir = task.metadata.get("dataset"), task.metadata.get("data_dir")
    if (dataset is None) == (data_dir is None):
        raise TaskError(f'expected exactly one of task.metadata["dataset"] and task.metadata["data_dir"] in task '
                        f"{task.id!r}, got {'both' if dataset is not None else 'neither'}")
    if dataset is not None:
        return _dataset_files(task, str(dataset), names)
    return _folder_files(task, data_dir, names)


def _dataset_files(task: Task, dataset: str, names: list[str]) -> dict[str, bytes]:
    """The named files of a bundled dataset."""
    available = dataset_files(dataset)
    missing = [name for name in names if name not in available]
    if missing:
        raise TaskError(f"expected files {missing} of task {task.id!r} in bundled dataset {dataset!r}, got only "
                        f"{sorted(available)}")
    return {name: available[name] for name in names}


def _folder_files(task: Task, data_dir: Any, names: list[str]) -> dict[str, bytes]:
    """The named files of a host folder."""
    if not isinstance(data_dir, str) or not os.path.isabs(data_dir):
        raise TaskError(f'expected task.metadata["data_dir"] of task {task.id!r} to be an absolute folder path, '
                        f"got {data_dir!r}")
    files = {}
    for name in names:
        path = Path(data_dir) / name
        if not path.is_file():
            raise TaskError(f"expected file {name!r} of task {task.id!r} at {path}, got no such file")
        files[name] = path.read_bytes()
    return files
