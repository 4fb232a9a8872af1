"""DataAnalysis-v0 speed: episode set-up, a SQL call and a pandas call through the env, against a process per call.

For each backend (docker, bwrap) that works here, in one run, on the bundled tasks of ``--split``:

    ======================  ==================================================================================
    row                     one sample
    ======================  ==================================================================================
    reset                   ``env.reset()``: sandbox reset, the task's files written to ``data/``, its tables
                            loaded by the task loader, the ``sql`` tool installed (a different task each time)
    sql trivial             ``env.step`` of a ``sql`` call ``SELECT count(*) FROM <table>``
    sql join                ``env.step`` of a ``sql`` call running the task's reference query (a join and a
                            group-by); ``sql aggregate`` (a group-by average) when the task has one table
    pandas groupby          ``env.step`` of a ``python`` call ``_bench_result = frame.groupby(key)[value].mean()``
                            on a DataFrame loaded once in the kernel
    ... (fresh process)     the same query (or pandas call) in a new process that imports duckdb, loads the
                            tables with the same loader from the same files and runs it: ``docker exec
                            <container> python3 -c ...`` or the bwrap sandbox's ``python_argv("-c", ...)``
    ======================  ==================================================================================

A tool call's latency is the env's own clock, ``info["tool_calls"][0]["latency_s"]``. Its *own time* is the same
work timed inside the same kernel: ``connection.execute(query).fetchall()`` on the ``sql`` tool's own connection
(read from the closure of the kernel global ``_agentrl_sql``), or the same pandas statement. The overhead is
tool p50 - own p50; ``x own`` is tool p50 / own p50 and ``x tool`` a fresh process's p50 / the tool call's p50.
Every timed row follows untimed warm-up calls (one warm-up reset starts the sandbox).

Target (issue "DataAnalysis-v0"): tool-call overhead within 2 ms of the query's own time at p50. The other
target, 64 concurrent episodes with no infrastructure error, is measured by
``python -m benchmarks.stress --env agentrl/DataAnalysis-v0 --concurrency 64``.

Example:
    python -m benchmarks.speed data                     # both backends, ~1-2 minutes
    python -m benchmarks.speed data --backends bwrap --calls 100 --json data_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich import box
from rich.console import Console
from rich.table import Table

from agentgym_envs import make
from agentgym_envs.errors import ImageBuildError, SandboxError, SandboxUnavailableError
from agentgym_envs.sandbox import KernelSandbox
from agentgym_envs.timing import WARMUP_CALLS, Sample, milliseconds, percentiles, time_calls, timed_reset, tool_call
from tasks import Task, load_split
from tasks.data_analysis.files import SQL_LOADER_SOURCE, duckdb_connection, table_sources, task_files

ENV_ID = "agentrl/DataAnalysis-v0"
TARGET_OVERHEAD_MS = 2.0
"""Target: a tool call's p50 minus its query's own p50, in milliseconds."""

MAX_EPISODE_STEPS = 100_000
"""The turn limit of the benchmark's env: every timed call is one turn of a single episode."""

NAIVE_TIMEOUT_S = 120.0
"""Longest a fresh process may take."""

SETUP_CELL = """
import json as _bench_json, time as _bench_time, duckdb as _bench_duckdb
_bench_con = next(cell.cell_contents for cell in _agentrl_sql.__closure__
                  if isinstance(cell.cell_contents, _bench_duckdb.DuckDBPyConnection))
_bench_frame = _bench_con.sql({select!r}).df()
"""
"""Binds the ``sql`` tool's own connection to ``_bench_con`` and loads the pandas call's DataFrame, once."""

OWN_TIME_CELL = """
def _bench_own_times(code, calls, warmup):
    times = []
    for _ in range(warmup + calls):
        started = _bench_time.perf_counter()
        exec(code, globals())
        times.append((_bench_time.perf_counter() - started) * 1000.0)
    return times[warmup:]
print(_bench_json.dumps(_bench_own_times(compile({statement!r}, "<own time>", "exec"), {calls}, {warmup})))
"""
"""Times ``statement`` ``calls`` times inside the kernel and prints the milliseconds as JSON."""


@dataclass(frozen=True)
class Workload:
    """What is measured on one task: its tables, two queries and one pandas call.

    Attributes:
        task_id: The task whose data the calls run on.
        tables: Table name -> file name, as the task loader reads them.
        queries: Row name -> SQL: ``sql trivial`` and ``sql join`` (or ``sql aggregate``).
        frame_table: The table loaded as the pandas call's DataFrame (the task's largest).
        key: The column the pandas call groups by (text, fewest distinct values).
        value: The numeric column it averages.
    """

    task_id: str
    tables: dict[str, str]
    queries: dict[str, str]
    frame_table: str
    key: str
    value: str

    @property
    def frame_select(self) -> str:
        """The SQL that loads the DataFrame."""
        return f"SELECT * FROM {quote(self.frame_table)}"

    @property
    def pandas_statement(self) -> str:
        """The pandas call, as the ``python`` tool runs it (assigned, so nothing is printed)."""
        return f"_bench_result = _bench_frame.groupby({self.key!r})[{self.value!r}].mean()"

    @property
    def naive_query(self) -> str:
        """The row name of the query the fresh-process baseline runs (the heavier one)."""
        return next(name for name in self.queries if name != "sql trivial")


@dataclass(frozen=True)
class Row:
    """Timings of one (backend, what) pair, in milliseconds.

    Attributes:
        backend: ``docker`` or ``bwrap``.
        what: ``reset``, a query's row name (:attr:`Workload.queries`) or ``pandas groupby``.
        via: ``env.reset``, ``tool call`` (``env.step``) or ``fresh process``.
        method: What one sample runs, in words.
        calls: Timed samples (warm-up excluded).
        p50_ms: Median latency.
        p99_ms: 99th percentile latency.
        own_p50_ms: Median of the same work timed inside the kernel (tool-call rows only).
        overhead_ms: ``p50_ms - own_p50_ms`` (tool-call rows only).
        own_ratio: ``p50_ms / own_p50_ms`` (tool-call rows only).
        tool_ratio: ``p50_ms`` over the matching tool call's ``p50_ms`` (fresh-process rows only).
        failed: Samples whose call was not ok (a failed tool call, a non-zero exit).
        infra_errors: Tool calls the env reported as infrastructure errors.
    """

    backend: str
    what: str
    via: str
    method: str
    calls: int
    p50_ms: float
    p99_ms: float
    own_p50_ms: float | None = None
    overhead_ms: float | None = None
    own_ratio: float | None = None
    tool_ratio: float | None = None
    failed: int = 0
    infra_errors: int = 0


@dataclass
class BackendReport:
    """Everything measured on one backend.

    Attributes:
        backend: ``docker`` or ``bwrap``.
        rows: The measured rows, in display order.
        target_met: True when every tool-call row's overhead is at most :data:`TARGET_OVERHEAD_MS`.
    """

    backend: str
    rows: list[Row] = field(default_factory=list)
    target_met: bool = False


@dataclass
class Report:
    """Everything one run measured.

    Attributes:
        workload: The task, queries and pandas call of the call rows.
        backends: One report per measured backend.
        skipped: Backends not measured, with the reason.
        settings: The run's call counts and split.
        target_overhead_ms: The overhead target.
        machine: CPU count, platform and Python version of the host.
    """

    workload: Workload
    backends: list[BackendReport] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    target_overhead_ms: float = TARGET_OVERHEAD_MS
    machine: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- workload


def quote(identifier: str) -> str:
    """A SQL identifier in double quotes."""
    return '"' + identifier.replace('"', '""') + '"'


def pick_task(tasks: Sequence[Task], task_id: str | None) -> Task:
    """The task named ``task_id``, else the first ``joins`` task (else the first task).

    Raises:
        ValueError: No task has id ``task_id``.
    """
    if task_id is not None:
        for task in tasks:
            if task.id == task_id:
                return task
        raise ValueError(f"--task: expected a task id of the split, got {task_id!r}")
    return next((task for task in tasks if task.family == "joins"), tasks[0])


def plan_workload(task: Task, folder: Path) -> Workload:
    """The queries and the pandas call of ``task``, its columns chosen on its files in ``folder`` (on the host).

    The second query is the task's reference SQL when the task has several tables (a join), otherwise a
    group-by average of the pandas call's columns.
    """
    tables = table_sources(task)
    connection = duckdb_connection(folder, tables)
    sizes = {table: connection.execute(f"SELECT count(*) FROM {quote(table)}").fetchall()[0][0] for table in tables}
    frame_table = max(sizes, key=sizes.__getitem__)
    key, value = groupby_columns(connection.sql(f"SELECT * FROM {quote(frame_table)}").df())
    if len(tables) > 1:
        heavy = ("sql join", task.metadata["reference"]["sql"])
    else:
        heavy = ("sql aggregate", f"SELECT {quote(key)}, avg({quote(value)}) FROM {quote(frame_table)} "
                                  f"GROUP BY {quote(key)}")
    trivial = f"SELECT count(*) FROM {quote(frame_table)}"
    return Workload(task.id, tables, {"sql trivial": trivial, heavy[0]: heavy[1]}, frame_table, key, value)


def groupby_columns(frame: Any) -> tuple[str, str]:
    """A text column with the fewest distinct values and a numeric one (a float one when there is one).

    Raises:
        ValueError: The frame lacks a text or a numeric column.
    """
    from pandas.api import types

    texts = [name for name in frame.columns if types.is_string_dtype(frame[name]) or types.is_object_dtype(frame[name])]
    numbers = [name for name in frame.columns
               if types.is_numeric_dtype(frame[name]) and not types.is_bool_dtype(frame[name])]
    if not texts or not numbers:
        raise ValueError(f"expected a text and a numeric column to group by, got columns {dict(frame.dtypes)}")
    key = min(texts, key=lambda name: frame[name].nunique())
    value = next((name for name in numbers if types.is_float_dtype(frame[name])), numbers[0])
    return str(key), str(value)


def write_files(task: Task, folder: Path) -> None:
    """Write the task's files into ``folder``, readable by the sandbox's user."""
    folder.chmod(0o755)
    for name, data in task_files(task).items():
        (folder / name).write_bytes(data)
        (folder / name).chmod(0o644)


# ------------------------------------------------------------------------------------------------ timing


def summarize(backend: str, what: str, via: str, method: str, samples: Sequence[Sample], **extra: float) -> Row:
    """A :class:`Row` of ``samples``, with the failures counted."""
    p50, p99 = percentiles(samples)
    return Row(backend=backend, what=what, via=via, method=method, calls=len(samples), p50_ms=p50, p99_ms=p99,
               failed=sum(not sample.ok for sample in samples),
               infra_errors=sum(sample.infra_error for sample in samples), **extra)


def with_own_time(row: Row, own_ms: Sequence[float]) -> Row:
    """``row`` with the own time's median, the overhead and the ratio filled in."""
    own = statistics.median(own_ms)
    return Row(**{**asdict(row), "own_p50_ms": own, "overhead_ms": row.p50_ms - own, "own_ratio": row.p50_ms / own})


# --------------------------------------------------------------------------------------------- env calls


def run_cell(sandbox: KernelSandbox, code: str) -> str:
    """Run a benchmark cell in the episode's kernel; its output.

    Raises:
        SandboxError: The cell failed.
    """
    result = sandbox.run_code(code, timeout_s=120.0)
    if not result.ok:
        raise SandboxError(f"a benchmark cell failed in the {sandbox.backend} kernel: {result.output[-1000:]}")
    return result.output


def own_times(sandbox: KernelSandbox, statement: str, calls: int) -> list[float]:
    """``statement`` timed ``calls`` times inside the kernel, in milliseconds."""
    output = run_cell(sandbox, OWN_TIME_CELL.format(statement=statement, calls=calls, warmup=WARMUP_CALLS))
    return json.loads(output.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------- fresh processes


def naive_sql_code(workload: Workload) -> str:
    """A fresh process's program: load the tables from ``data/`` with the task loader, run the heavier query."""
    query = workload.queries[workload.naive_query]
    return (f"{SQL_LOADER_SOURCE}\nconnection = load_tables('data', {workload.tables!r})\n"
            f"print(len(connection.execute({query!r}).fetchall()))\n")


def naive_pandas_code(workload: Workload) -> str:
    """A fresh process's program: load the tables, the DataFrame, and make the pandas call."""
    return (f"{SQL_LOADER_SOURCE}\nconnection = load_tables('data', {workload.tables!r})\n"
            f"_bench_frame = connection.sql({workload.frame_select!r}).df()\n"
            f"{workload.pandas_statement}\nprint(len(_bench_result))\n")


def process_call(argv: Sequence[str]) -> Callable[[], Sample]:
    """One fresh process, timed from start to exit; ok when it exits with 0."""
    def call() -> Sample:
        started = time.perf_counter()
        completed = subprocess.run(list(argv), capture_output=True, timeout=NAIVE_TIMEOUT_S)
        return Sample((time.perf_counter() - started) * 1000.0, ok=completed.returncode == 0)
    return call


def fresh_process_argv(sandbox: KernelSandbox, code: str, host_data: Path) -> list[str]:
    """The command that runs ``code`` in a fresh process beside the sandbox's kernel, with the data at ``data/``.

    Docker: ``docker exec`` in the sandbox's container as its user, in ``/work`` (where ``data/`` lies).
    bwrap: the sandbox's own namespaces (:meth:`~agentgym_envs.sandbox.bwrap.BwrapSandbox.python_argv`), whose
    fresh ``/work`` gets the host copy of the files bound read-only at ``/work/data``.
    """
    if sandbox.backend == "docker":
        from agentgym_envs.sandbox.docker import SANDBOX_USER

        return ["docker", "exec", "-u", SANDBOX_USER, "-w", "/work", sandbox.container.id, "python3", "-I", "-c", code]
    argv = sandbox.python_argv("-c", code)
    separator = argv.index("--")
    return [*argv[:separator], "--ro-bind", str(host_data), "/work/data", *argv[separator:]]


# ------------------------------------------------------------------------------------------------- rows


def measure_resets(env: gym.Env, backend: str, tasks: Sequence[Task], episodes: int) -> Row:
    """``episodes`` timed resets, each on the next of ``tasks`` (cycled)."""
    samples = [timed_reset(env, tasks[index % len(tasks)]) for index in range(episodes)]
    return summarize(backend, "reset", "env.reset", "sandbox reset, files written, tables loaded", samples)


def tool_rows(env: gym.Env, backend: str, workload: Workload, calls: int) -> list[Row]:
    """One row per query and one for the pandas call: ``env.step`` latencies, each with its in-kernel own time."""
    sandbox = env.unwrapped.sandbox
    run_cell(sandbox, SETUP_CELL.format(select=workload.frame_select))
    rows = []
    for what, query in workload.queries.items():
        samples = time_calls(tool_call(env, "sql", query=query), calls)
        own = own_times(sandbox, f"_bench_rows = _bench_con.execute({query!r}).fetchall()", calls)
        rows.append(with_own_time(summarize(backend, what, "tool call", "env.step: sql", samples), own))
    samples = time_calls(tool_call(env, "python", code=workload.pandas_statement), calls)
    own = own_times(sandbox, workload.pandas_statement, calls)
    rows.append(with_own_time(summarize(backend, "pandas groupby", "tool call", "env.step: python", samples), own))
    return rows


def process_rows(sandbox: KernelSandbox, workload: Workload, host_data: Path, tool_p50: Mapping[str, float],
                 calls: int) -> list[Row]:
    """The heavier query and the pandas call in a fresh process each time, against the tool call's p50."""
    method = "docker exec python3 -c" if sandbox.backend == "docker" else "bwrap ... python3 -c"
    programs = {workload.naive_query: naive_sql_code(workload), "pandas groupby": naive_pandas_code(workload)}
    rows = []
    for what, code in programs.items():
        samples = time_calls(process_call(fresh_process_argv(sandbox, code, host_data)), calls, warmup=1)
        p50, _ = percentiles(samples)
        rows.append(summarize(sandbox.backend, what, "fresh process", method, samples,
                              tool_ratio=p50 / tool_p50[what]))
    return rows


def open_env(backend: str, split: str, first_task: Task) -> gym.Env:
    """The env on ``backend``, reset once on ``first_task`` (untimed: it starts the sandbox).

    Raises:
        SandboxUnavailableError, ImageBuildError: The backend cannot run here.
    """
    if backend == "docker":
        from agentgym_envs.sandbox.system import docker_daemon_reachable

        if not docker_daemon_reachable():
            raise SandboxUnavailableError("no Docker daemon answers (run `python -m agentgym_envs.sandbox setup`)")
    else:
        from agentgym_envs.sandbox.bwrap import bwrap_available

        if not bwrap_available():
            raise SandboxUnavailableError("bubblewrap is missing or cannot create namespaces "
                                          "(apt-get install bubblewrap)")
    env = make(ENV_ID, sandbox=backend, split=split, max_episode_steps=MAX_EPISODE_STEPS)
    try:
        env.reset(options={"task": first_task})
    except BaseException:
        env.close()
        raise
    return env


def measure_backend(backend: str, tasks: Sequence[Task], workload_task: Task, workload: Workload, host_data: Path,
                    settings: Mapping[str, Any]) -> BackendReport:
    """Every row of one backend (the env opened by :func:`open_env`, closed at the end)."""
    env = open_env(backend, settings["split"], tasks[0])
    try:
        rows = [measure_resets(env, backend, tasks, settings["episodes"])]
        env.reset(options={"task": workload_task})
        rows += tool_rows(env, backend, workload, settings["calls"])
        tool_p50 = {row.what: row.p50_ms for row in rows if row.via == "tool call"}
        rows += process_rows(env.unwrapped.sandbox, workload, host_data, tool_p50, settings["process_calls"])
    finally:
        env.close()
    overheads = [row.overhead_ms for row in rows if row.overhead_ms is not None]
    return BackendReport(backend, rows, all(overhead <= TARGET_OVERHEAD_MS for overhead in overheads))


def run_benchmark(backends: Sequence[str] = ("docker", "bwrap"), *, split: str = "test", task_id: str | None = None,
                  episodes: int = 10, calls: int = 30, process_calls: int = 20) -> Report:
    """Measure every row of ``backends`` and return the report.

    Args:
        backends: Which of ``docker`` and ``bwrap`` to measure; an unavailable one is skipped with its reason.
        split: The bundled split whose tasks are reset and queried.
        task_id: The task the calls run on; the split's first ``joins`` task when None.
        episodes: Timed resets, over the split's first ``episodes`` tasks.
        calls: Timed tool calls per row (and in-kernel own-time runs).
        process_calls: Timed fresh processes per row.

    Returns:
        The report; ``report.backends`` is empty when no backend could run.

    Example:
        >>> report = run_benchmark(["bwrap"], episodes=2, calls=5, process_calls=2)  # doctest: +SKIP
        >>> report.backends[0].rows[0].what
        'reset'
    """
    tasks = load_split("DataAnalysis", split)
    workload_task = pick_task(tasks, task_id)
    settings = {"split": split, "episodes": episodes, "calls": calls, "process_calls": process_calls}
    with tempfile.TemporaryDirectory(prefix="agentrl-data-speed-") as folder:
        host_data = Path(folder)
        write_files(workload_task, host_data)
        report = Report(workload=plan_workload(workload_task, host_data), settings=settings,
                        machine={"cpus": str(os.cpu_count()), "platform": platform.platform(),
                                 "python": platform.python_version()})
        for backend in backends:
            try:
                report.backends.append(measure_backend(backend, tasks[:episodes], workload_task, report.workload,
                                                       host_data, settings))
            except (SandboxUnavailableError, ImageBuildError) as exc:
                report.skipped[backend] = str(exc)
    return report


# ------------------------------------------------------------------------------------------------ report


def target_line(backend: BackendReport) -> str:
    """One sentence: does the backend meet the overhead target?"""
    overheads = ", ".join(f"{row.what} {row.overhead_ms:+.2f} ms"
                          for row in backend.rows if row.overhead_ms is not None)
    verdict = "MET" if backend.target_met else "NOT MET"
    return (f"{backend.backend}: target tool-call overhead p50 <= {TARGET_OVERHEAD_MS:g} ms over the call's own "
            f"time: {verdict} ({overheads})")


def ratio(row: Row) -> str:
    """``x own`` of a tool-call row, ``x tool`` of a fresh-process row, ``-`` of a reset row."""
    if row.own_ratio is not None:
        return f"{row.own_ratio:.1f}x own"
    if row.tool_ratio is not None:
        return f"{row.tool_ratio:.0f}x tool"
    return "-"


def render(report: Report, console: Console) -> None:
    """Print the table, the workload, the skipped backends and one target line per backend."""
    workload = report.workload
    table = Table(title=f"DataAnalysis-v0 speed on {workload.task_id} ({report.machine.get('cpus')} CPUs, "
                        f"Python {report.machine.get('python')})", box=box.SIMPLE_HEAD,
                  caption="overhead = p50 - own p50; x own = p50 / own p50; x tool = p50 / the tool call's p50")
    for column in ("backend", "what", "via", "calls", "p50 ms", "p99 ms", "own p50", "overhead", "ratio", "failed"):
        table.add_column(column, justify="left" if column in ("backend", "what", "via") else "right", no_wrap=True)
    for backend in report.backends:
        for row in backend.rows:
            table.add_row(row.backend, row.what, row.via, str(row.calls), milliseconds(row.p50_ms),
                          milliseconds(row.p99_ms), milliseconds(row.own_p50_ms),
                          milliseconds(row.overhead_ms, signed=True), ratio(row), str(row.failed + row.infra_errors))
        table.add_section()
    console.print(table)
    for name, query in workload.queries.items():
        console.print(f"{name}: {' '.join(query.split())}")
    console.print(f"pandas groupby: {workload.pandas_statement} (frame: table {workload.frame_table})")
    for name, reason in report.skipped.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
    for backend in report.backends:
        console.print(target_line(backend))


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed data",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=("docker", "bwrap"), default=["docker", "bwrap"],
                        help="backends to measure (unavailable ones are reported as skipped)")
    parser.add_argument("--split", default="test", help="bundled DataAnalysis split (default test)")
    parser.add_argument("--task", default=None, help="task id the calls run on (default: the first joins task)")
    parser.add_argument("--episodes", type=int, default=10, help="timed resets, one per task")
    parser.add_argument("--calls", type=int, default=30, help="timed tool calls per row")
    parser.add_argument("--process-calls", type=int, default=20, help="timed fresh processes per row")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a backend misses the target")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; status 2 when no backend could run, 1 with --check and a missed target."""
    args = build_parser().parse_args(argv)
    for name in ("episodes", "calls", "process_calls"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}: expected >= 1, got {getattr(args, name)}")
    report = run_benchmark(args.backends, split=args.split, task_id=args.task, episodes=args.episodes,
                           calls=args.calls, process_calls=args.process_calls)
    render(report, Console(width=None if sys.stdout.isatty() else 140))  # whole numbers when piped
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
    if not report.backends:
        return 2
    return 1 if args.check and not all(backend.target_met for backend in report.backends) else 0


if __name__ == "__main__":
    sys.exit(main())
