"""The DataAnalysis speed benchmark measures what it says: every call ok, own times inside the tool calls, fresh
processes slower than the kernel (relations that a broken measurement fails; no timing thresholds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from agentgym_envs.data_analysis.speed import (
    Row,
    Workload,
    groupby_columns,
    pick_task,
    plan_workload,
    ratio,
    with_own_time,
    write_files,
)
from tasks import load_split
from tasks.data_analysis.files import duckdb_connection

REPO_ROOT = Path(__file__).resolve().parents[3]
TASKS = load_split("DataAnalysis", "test")
EXPECTED_ROWS = [("reset", "env.reset", 2), ("sql trivial", "tool call", 3), ("sql join", "tool call", 3),
                 ("pandas groupby", "tool call", 3), ("sql join", "fresh process", 2),
                 ("pandas groupby", "fresh process", 2)]
"""(what, via, timed calls) of every row, for the command line the backend test runs."""


def run_small(backend: str, out: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.speed", "data", "--backends", backend, "--episodes", "2",
         "--calls", "3", "--process-calls", "2", "--json", str(out)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=300)


def test_benchmark_measures_every_row_of_a_backend(backend: str, tmp_path: Path):
    completed = run_small(backend, tmp_path / "speed.json")
    assert completed.returncode == 0, completed.stderr

    report = json.loads((tmp_path / "speed.json").read_text())
    assert report["skipped"] == {}
    (measured,) = report["backends"]
    assert measured["backend"] == backend and isinstance(measured["target_met"], bool)
    rows = measured["rows"]
    assert [(row["what"], row["via"], row["calls"]) for row in rows] == EXPECTED_ROWS
    for row in rows:
        assert row["failed"] == 0 and row["infra_errors"] == 0, row
        assert 0 < row["p50_ms"] <= row["p99_ms"]
    tool = {row["what"]: row for row in rows if row["via"] == "tool call"}
    for row in tool.values():  # the call's own work is timed inside it: positive, and less than the whole call
        assert 0 < row["own_p50_ms"] < row["p50_ms"]
        assert row["overhead_ms"] == pytest.approx(row["p50_ms"] - row["own_p50_ms"])
    for row in (row for row in rows if row["via"] == "fresh process"):  # imports and loads the data every time
        assert row["p50_ms"] > tool[row["what"]]["p50_ms"] and row["tool_ratio"] > 1
    assert rows[0]["p50_ms"] > tool["sql trivial"]["p50_ms"]  # a reset loads the tables; a count(*) reads them
    assert f"{backend}: target tool-call overhead p50 <= 2 ms" in completed.stdout


def test_the_workload_of_a_joins_task_runs_its_reference_join(tmp_path: Path):
    task = pick_task(TASKS, None)
    write_files(task, tmp_path)
    workload = plan_workload(task, tmp_path)
    assert task.family == "joins" and list(workload.queries) == ["sql trivial", "sql join"]
    assert workload.queries["sql join"] == task.metadata["reference"]["sql"]
    assert workload.naive_query == "sql join"
    connection = duckdb_connection(tmp_path, workload.tables)
    frame = connection.sql(workload.frame_select).df()
    assert connection.execute(workload.queries["sql trivial"]).fetchall() == [(len(frame),)]
    assert {workload.key, workload.value} <= set(frame.columns)


def test_a_single_table_task_gets_a_groupby_aggregate_matching_the_pandas_call(tmp_path: Path):
    task = next(task for task in TASKS if len(task.metadata["tables"]) == 1)
    write_files(task, tmp_path)
    workload = plan_workload(task, tmp_path)
    assert list(workload.queries) == ["sql trivial", "sql aggregate"]
    connection = duckdb_connection(tmp_path, workload.tables)
    namespace = {"_bench_frame": connection.sql(workload.frame_select).df()}
    exec(workload.pandas_statement, namespace)
    groups = connection.execute(workload.queries["sql aggregate"]).fetchall()
    assert len(groups) == len(namespace["_bench_result"]) + namespace["_bench_frame"][workload.key].isna().any()


def test_pick_task_by_id_and_a_typo():
    assert pick_task(TASKS, TASKS[5].id) is TASKS[5]
    with pytest.raises(ValueError, match="expected a task id of the split"):
        pick_task(TASKS, "data-analysis/test/nope")


@pytest.mark.parametrize(("frame", "expected"), [
    # the text column with the fewest distinct values; the float column over an integer id
    (pd.DataFrame({"id": [1, 2, 3], "city": ["a", "b", "c"], "kind": ["x", "x", "y"], "t": [1.5, 2.5, 3.5]}),
     ("kind", "t")),
    # no float column: the first numeric one that is not a flag
    (pd.DataFrame({"flag": [True, False], "name": ["a", "b"], "n": [1, 2]}), ("name", "n")),
])
def test_groupby_columns(frame: pd.DataFrame, expected: tuple[str, str]):
    assert groupby_columns(frame) == expected


def test_groupby_columns_needs_text_and_numbers():
    with pytest.raises(ValueError, match="expected a text and a numeric column"):
        groupby_columns(pd.DataFrame({"n": [1, 2]}))


def test_own_time_gives_overhead_and_ratio_and_the_table_names_them():
    row = Row("bwrap", "sql join", "tool call", "env.step: sql", calls=3, p50_ms=3.0, p99_ms=4.0)
    timed = with_own_time(row, [1.0, 2.0, 9.0])
    assert (timed.own_p50_ms, timed.overhead_ms, timed.own_ratio) == (2.0, 1.0, 1.5)
    assert ratio(timed) == "1.5x own"
    process = Row("bwrap", "sql join", "fresh process", "bwrap ... python3 -c", 2, 300.0, 310.0, tool_ratio=100.0)
    assert ratio(process) == "100x tool"
    assert Workload("t", {}, {"sql trivial": "q1", "sql join": "q2"}, "t", "k", "v").naive_query == "sql join"
