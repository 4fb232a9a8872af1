"""File names and formats of DataAnalysis data: which names are plain, and which suffixes are read as what.

The rules every other module of :mod:`tasks.data_analysis` applies to a file name (a dataset's tables, a task's
files, DABench's questions), kept apart so that each of them can import it.

Example:
    >>> table_format("orders.CSV")
    'csv'
    >>> check_file_name("shop.sqlite", "an example")
    'shop.sqlite'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.errors import TaskError

CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet",)
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
"""File suffixes the loader reads, by format (matched case-insensitively)."""


def check_file_name(name: Any, where: str) -> str:
    """Return ``name`` when it is a plain file name (no folder, not ``.`` or ``..``).

    Args:
        name: The name to check.
        where: What the name belongs to, for the error message.

    Returns:
        The name, unchanged.

    Raises:
        TaskError: ``name`` is not a non-empty string without ``/`` or ``\\``, or is ``.`` or ``..``.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:
        raise TaskError(f"expected a plain file name (no folder, not '.' or '..') in {where}, got {name!r}")
    return name


def table_format(file_name: str) -> str:
    """The format a file is read as, from its suffix: ``"csv"``, ``"parquet"`` or ``"sqlite"``.

    Raises:
        TaskError: The suffix is none of :data:`CSV_SUFFIXES`, :data:`PARQUET_SUFFIXES`, :data:`SQLITE_SUFFIXES`.
    """
    suffix = Path(file_name).suffix.lower()
    for kind, suffixes in (("csv", CSV_SUFFIXES), ("parquet", PARQUET_SUFFIXES), ("sqlite", SQLITE_SUFFIXES)):
        if suffix in suffixes:
            return kind
    raise TaskError(f"expected a file ending in one of {CSV_SUFFIXES + PARQUET_SUFFIXES + SQLITE_SUFFIXES}, "
                    f"got {file_name!r}")
