"""A task's data in the sandbox, and the host side of the ``sql`` tool (DataAnalysis-v0).

:func:`load_task_data` writes the task's files to ``data/<name>`` in the sandbox's work directory, makes them
read-only (a guard against accidents: grading never reads them back), and in one cell loads the task's tables
into an in-memory DuckDB with the task loader (:data:`~tasks.data_analysis.files.SQL_LOADER_SOURCE`, the code
that computed the reference answers) and installs the ``sql`` tool's kernel side
(:mod:`agentgym_envs.data_analysis.sql_kernel`) under the private name ``_agentrl_sql``. The loader, duckdb and
pyarrow are imported and the tables loaded once per episode; a tool call is one short cell, one round trip.

:func:`run_sql` runs one query for the agent and :func:`result_table` runs the final query for grading. Both
read the outcome through a status line carrying a nonce the host draws per call, so neither the rows of a query
nor anything the agent printed can pass for it. When the agent deleted or replaced ``_agentrl_sql``, a call
installs it again (loading the tables from ``data/``) and runs the query once more.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_envs.errors import SandboxError
from agentgym_envs.sandbox.base import ExecResult, Sandbox
from tasks.data_analysis.files import SQL_LOADER_SOURCE

DATA_DIR = "data"
"""The folder of the task's files, relative to the sandbox's work directory."""

RESULT_FILE = ".agentrl-sql-result.json"
"""Where grading's query writes its rows (in the reset sandbox, where only the env's code has run)."""

GRADED_ROWS = 10_000
"""Most rows of a final query that are graded; a larger result counts as no result."""

SQL_TOOL_SOURCE = (Path(__file__).parent / "sql_kernel.py").read_text(encoding="utf-8")
"""The kernel side of the ``sql`` tool, sent into the sandbox as source."""

TOOL_NAME = "_agentrl_sql"
"""The kernel global the tool's cells call."""

SCHEMA_FILE = ".agentrl-schema.json"
"""Where the set-up cell writes the tables' columns; read and removed before the agent's first turn."""

MARKER = "agentrl-sql-1"
"""The kernel tool's ``agentrl`` attribute: a cell calls ``_agentrl_sql`` only when it carries this marker."""

INSTALL = """
def _agentrl_install(namespace):
    exec(compile({tool!r}, "<sql tool>", "exec"), namespace)
    return namespace["install"]({loader!r}, {tables!r}, {marker!r}, {schema_path!r})
{name} = _agentrl_install({{"__name__": "agentrl_sql"}})
del _agentrl_install
"""
"""The set-up cell: defines the tool's kernel side in its own namespace and binds the tool to ``_agentrl_sql``."""


class DataLoadError(SandboxError):
    """The task's data could not be set up in a fresh sandbox (no code of the agent ran there: an infrastructure
    fault, or limits too small for the analysis stack); the message says why."""


@dataclass(frozen=True)
class SqlSettings:
    """How the ``sql`` tool runs and shows a query.

    Attributes:
        max_rows: Most rows shown.
        max_cell_chars: Longer cells are cut (and end with ``…``).
        max_chars: The shown table is cut to this many characters.
        timeout_s: A query is stopped after this long.
    """

    max_rows: int = 50
    max_cell_chars: int = 80
    max_chars: int = 12_000
    timeout_s: float = 10.0


@dataclass(frozen=True)
class Schema:
    """What the loader made of a task's tables.

    Attributes:
        columns: Table -> ``[column, duckdb type]`` pairs; None when the tables could not be loaded.
        error: Why the tables could not be loaded, or None.
    """

    columns: dict[str, list[list[str]]] | None
    error: str | None


@dataclass(frozen=True)
class SqlRun:
    """One ``sql`` tool call.

    Attributes:
        output: What the agent sees.
        ok: The query ran and returned a table.
        state_lost: The kernel was restarted (its work directory with it), so the data must be loaded again.
    """

    output: str
    ok: bool
    state_lost: bool


def load_task_data(sandbox: Sandbox, files: Mapping[str, bytes], tables: Mapping[str, str]) -> Schema:
    """Write ``files`` to ``data/``, make them read-only, load ``tables`` and install the ``sql`` tool.

    Args:
        sandbox: A sandbox with a fresh kernel and an empty work directory.
        files: File name -> bytes.
        tables: Table name -> file name, as the task loader reads them.

    Returns:
        The tables' columns, or why they could not be loaded (then the tool says so on every call).

    Raises:
        DataLoadError: The files do not fit in the sandbox, or the install cell failed.
        SandboxError: The sandbox itself failed (an infrastructure fault).
    """
    for name, data in files.items():
        try:
            sandbox.write_file(f"{DATA_DIR}/{name}", data)
        except FileNotFoundError as exc:
            raise DataLoadError(f"could not write {name!r} ({len(data)} bytes) into the sandbox (is the sandbox's "
                                f"disk_mb large enough?): {exc}") from exc
    return install_sql_tool(sandbox, tables)


def install_sql_tool(sandbox: Sandbox, tables: Mapping[str, str]) -> Schema:
    """Make ``data/`` read-only, load ``tables`` from it and bind the tool to ``_agentrl_sql`` in the kernel.

    Returns:
        The tables' columns, read from :data:`SCHEMA_FILE` (which is then removed).

    Raises:
        DataLoadError: The install cell failed (it does not fail for files DuckDB cannot read).
    """
    _run_install(sandbox, tables, SCHEMA_FILE)
    try:
        schema = json.loads(sandbox.read_file(SCHEMA_FILE))
    except (FileNotFoundError, ValueError) as exc:
        raise DataLoadError(f"the set-up cell wrote no readable schema: {exc}") from exc
    sandbox.run_code(f"import os; os.remove({SCHEMA_FILE!r}); del os")
    return Schema(columns=schema["columns"], error=schema["error"])


def _run_install(sandbox: Sandbox, tables: Mapping[str, str], schema_path: str | None) -> None:
    """Run the set-up cell (:data:`INSTALL`); with ``schema_path``, it also protects the data and writes the schema.

    Raises:
        DataLoadError: The cell failed.
    """
    code = INSTALL.format(tool=SQL_TOOL_SOURCE, loader=SQL_LOADER_SOURCE, tables=dict(tables), marker=MARKER,
                          schema_path=schema_path, name=TOOL_NAME)
    result = sandbox.run_code(code, timeout_s=max(sandbox.limits.timeout_s, 60.0))
    if not result.ok:
        raise DataLoadError(f"loading the tables in the sandbox failed: {result.output[-2000:]}")


def _call(query: str, nonce: str, settings: SqlSettings, max_rows: int, result_path: str | None) -> str:
    """The cell that calls the kernel's tool, or prints ``<nonce>:missing`` when it is gone or replaced."""
    args = (f"{query!r}, {nonce!r}, {max_rows}, {settings.max_cell_chars}, {settings.max_chars}, "
            f"{settings.timeout_s!r}, {result_path!r}")
    return (f"if getattr(globals().get({TOOL_NAME!r}), 'agentrl', None) == {MARKER!r}: {TOOL_NAME}({args})\n"
            f"else: print({nonce!r} + ':missing')")


def _status(result: ExecResult, nonce: str) -> tuple[str | None, str]:
    """The status the tool printed last (``ok``, ``error``, ``missing``; None when it printed none) and the text
    before it."""
    match = re.search(rf"(?:^|\n){nonce}:(ok|error|missing)\n?$", result.output)
    if match is None:
        return None, result.output
    return match.group(1), result.output[:match.start()]


def _run_tool(sandbox: Sandbox, query: str, tables: Mapping[str, str], settings: SqlSettings, max_rows: int,
              result_path: str | None) -> tuple[ExecResult, str | None, str]:
    """Run the tool's cell, installing the tool again once when it is missing; the result, status and text."""
    timeout_s = settings.timeout_s + 5.0  # the tool stops the query itself at timeout_s
    for attempt in range(2):
        nonce = secrets.token_hex(8)
        result = sandbox.run_code(_call(query, nonce, settings, max_rows, result_path), timeout_s=timeout_s)
        status, text = _status(result, nonce)
        if status != "missing" or attempt:
            return result, status, text
        try:
            _run_install(sandbox, tables, schema_path=None)
        except DataLoadError as exc:  # the agent's code broke what the tool imports: its outcome
            return result, "error", f"Error: the sql tool could not be set up again: {exc}"
    raise AssertionError("unreachable")


def run_sql(sandbox: Sandbox, query: str, tables: Mapping[str, str], settings: SqlSettings) -> SqlRun:
    """Run the agent's ``query`` with the kernel's ``sql`` tool; every mistake comes back as a failed run.

    Args:
        sandbox: The episode's sandbox, where :func:`load_task_data` ran.
        query: The agent's SQL.
        tables: The task's tables (to install the tool again when the agent deleted it).
        settings: Caps and time limit.

    Raises:
        DataLoadError: The tool was gone and could not be installed again.
        SandboxError: The sandbox itself failed (an infrastructure fault).
    """
    result, status, text = _run_tool(sandbox, query, tables, settings, settings.max_rows, None)
    if status is None:  # the kernel broke, timed out or the agent replaced the tool's parts: show what happened
        return SqlRun(result.output.rstrip() or "(no output)", ok=False, state_lost=result.state_lost)
    return SqlRun(text.rstrip() or "(no output)", ok=status == "ok", state_lost=result.state_lost)


def result_table(sandbox: Sandbox, query: str, tables: Mapping[str, str], settings: SqlSettings) -> dict[str, Any]:
    """Grading's run of the final ``query``: ``{"answer_table": rows | None, "sql_error": str | None}``.

    Run in a sandbox where :func:`load_task_data` has just run (reset, files written again, fresh kernel),
    so nothing the agent did can reach it. The rows are JSON cells (dates and times as ISO strings); a
    result of more than :data:`GRADED_ROWS` rows, a refused or failed query, or a broken kernel gives
    ``answer_table`` None and says why in ``sql_error``.

    Raises:
        SandboxError: The sandbox itself failed (an infrastructure fault).
    """
    result, status, _ = _run_tool(sandbox, query, tables, settings, GRADED_ROWS + 1, RESULT_FILE)
    if status is None:
        return {"answer_table": None, "sql_error": f"the query's kernel failed: {result.output[-500:]}"}
    try:
        outcome = json.loads(sandbox.read_file(RESULT_FILE, max_bytes=64 << 20))
    except (FileNotFoundError, ValueError) as exc:
        return {"answer_table": None, "sql_error": f"no result was written: {exc}"}
    if outcome["error"] is not None:
        return {"answer_table": None, "sql_error": outcome["error"]}
    if outcome["total"] > GRADED_ROWS:
        return {"answer_table": None, "sql_error": f"the query returned {outcome['total']} rows, more than the "
                                                   f"{GRADED_ROWS} graded"}
    return {"answer_table": outcome["rows"], "sql_error": None}
