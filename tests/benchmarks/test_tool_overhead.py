"""Smoke test of the tool-call overhead benchmark: it runs and reports every row (no timing checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.tool_overhead import ROW_BACKEND, Report, Row, add_ratios, summarize

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECTED_CALLS = {"kernel-docker": 3, "kernel-bwrap": 3, "docker-exec": 2, "bwrap-process": 2, "docker-run": 1}
"""Timed calls per row for the command line the smoke test runs."""


def test_benchmark_reports_every_row_of_a_backend(backend: str, tmp_path: Path):
    out = tmp_path / "overhead.json"
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.tool_overhead", "--calls", "3", "--process-calls", "2",
         "--run-calls", "1", "--backends", backend, "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert completed.returncode == 0, completed.stderr

    report = json.loads(out.read_text())
    expected = {name for name, owner in ROW_BACKEND.items() if owner == backend}
    assert {row["name"] for row in report["rows"]} == expected
    assert report["skipped"] == {}
    assert report["baseline"] == f"kernel-{backend}"
    assert isinstance(report["target_met"], bool)
    for row in report["rows"]:
        assert row["p50_ms"] > 0 and row["p99_ms"] >= row["p50_ms"] and row["ratio"] > 0
        assert row["calls"] == EXPECTED_CALLS[row["name"]]
        assert row["name"] in completed.stdout
    assert "Target persistent-kernel overhead p50 <= 2 ms" in completed.stdout


def test_ratios_are_relative_to_the_docker_kernel_and_target_checks_every_kernel():
    report = Report(rows=[summarize("docker-exec", [40.0, 50.0, 60.0]),
                          summarize("kernel-bwrap", [3.0, 3.0, 3.0]),
                          summarize("kernel-docker", [0.5, 0.5, 0.5])])
    add_ratios(report)
    assert report.baseline == "kernel-docker"
    assert [row.name for row in report.rows] == ["kernel-docker", "kernel-bwrap", "docker-exec"]
    assert [row.ratio for row in report.rows] == [1.0, 6.0, 100.0]
    assert report.target_met is False  # the bwrap kernel's 3 ms misses the 2 ms target


def test_ratios_fall_back_to_the_bwrap_kernel_without_docker():
    report = Report(rows=[summarize("kernel-bwrap", [1.0]), summarize("bwrap-process", [30.0])])
    add_ratios(report)
    assert report.baseline == "kernel-bwrap"
    assert [row.ratio for row in report.rows] == [1.0, 30.0]
    assert report.target_met is True


def test_summary_percentiles():
    row: Row = summarize("kernel-docker", [float(v) for v in range(1, 101)])
    assert (row.calls, row.p50_ms, row.mean_ms) == (100, 50.5, 50.5)
    assert 99.0 <= row.p99_ms <= 100.0
