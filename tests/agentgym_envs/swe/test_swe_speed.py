"""The SWE speed benchmark measures what it says: every call ok and every graded task resolved, the naive way's
grading a real test run over the fixed tree (relations that a broken measurement fails; no timing thresholds)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym_envs.swe.speed import (
    NAIVE_PROGRAM,
    BackendReport,
    Row,
    cycled,
    edited_file,
    pytest_argv,
    target_line,
    tree_archive,
)
from agentgym_envs.timing import Sample
from tasks import load_split

REPO_ROOT = Path(__file__).resolve().parents[3]
TASKS = load_split("SWE", "test")
EXPECTED_ROWS = [("reset", "env.reset", 3), ("bash", "tool call", 3), ("editor view", "tool call", 3),
                 ("grading", "env.step", 2), ("reset", "naive", 2), ("grading", "naive", 2)]
"""(what, via, timed samples) of every row, for the command line the backend test runs."""


def run_small(backend: str, out: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.speed", "swe", "--backends", backend, "--tasks", "2", "--episodes", "3",
         "--calls", "3", "--gradings", "2", "--naive-calls", "2", "--no-targets", "--json", str(out)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=300)


def test_benchmark_measures_every_row_of_a_backend(backend: str, tmp_path: Path):
    completed = run_small(backend, tmp_path / "speed.json")
    assert completed.returncode == 0, completed.stdout + completed.stderr

    report = json.loads((tmp_path / "speed.json").read_text())
    assert report["skipped"] == {} and len(report["tasks"]) == 2
    (measured,) = report["backends"]
    assert measured["backend"] == backend and isinstance(measured["target_met"], bool)
    rows = measured["rows"]
    assert [(row["what"], row["via"], row["calls"]) for row in rows] == EXPECTED_ROWS
    for row in rows:  # every call ok, every graded task resolved, every naive test run passed
        assert row["failed"] == 0 and row["infra_errors"] == 0, row
        assert 0 < row["p50_ms"] <= row["p99_ms"]
    warm = {(row["what"], row["via"]): row for row in rows}
    for what in ("bash", "editor view"):  # a tool call in a warm sandbox is cheaper than a reset or a test run
        assert warm[(what, "tool call")]["p50_ms"] < warm[("reset", "env.reset")]["p50_ms"]
    assert warm[("grading", "env.step")]["p50_ms"] > warm[("reset", "env.reset")]["p50_ms"]  # it resets too
    for what, via in (("reset", "env.reset"), ("grading", "env.step")):  # a fresh sandbox starts a process
        naive = warm[(what, "naive")]
        assert naive["warm_ratio"] == pytest.approx(naive["p50_ms"] / warm[(what, via)]["p50_ms"])
        assert naive["p50_ms"] > warm[("bash", "tool call")]["p50_ms"]
    assert f"{backend}: reset p50 under 1 s: " in completed.stdout  # the target line; met or not is a timing


def test_the_naive_program_unpacks_the_tree_and_runs_the_tests_on_it(tmp_path: Path):
    files = {"pkg/__init__.py": b"VALUE = 2\n", "test_pkg.py": b"from pkg import VALUE\n\n"
             b"def test_value():\n    assert VALUE == 2\n\ndef test_other():\n    assert VALUE\n"}
    task = dataclasses.replace(TASKS[0], metadata={**TASKS[0].metadata, "FAIL_TO_PASS": ["test_pkg.py::test_value"],
                                                   "PASS_TO_PASS": ["test_pkg.py::test_other"]})
    folder = str(tmp_path / "testbed")
    program = NAIVE_PROGRAM.format(folder=folder, argv=pytest_argv(sys.executable, task))
    completed = subprocess.run([sys.executable, "-I", "-c", program], input=tree_archive(files),
                               capture_output=True, timeout=120)
    assert completed.returncode == 0, completed.stdout
    assert b"2 passed" in completed.stdout
    assert (tmp_path / "testbed" / "pkg" / "__init__.py").read_bytes() == files["pkg/__init__.py"]


def test_edited_file_is_the_file_the_fix_touches():
    for task in TASKS[:5]:
        assert f"--- a/{edited_file(task)}" in task.answer


def test_cycled_goes_round_the_tasks():
    seen: list[int] = []
    call = cycled(lambda index: seen.append(index) or Sample(1.0), 3)
    for _ in range(5):
        call()
    assert seen == [0, 1, 2, 0, 1]


def test_target_line_says_met_or_missed():
    reset = Row("docker", "reset", "env.reset", "sandbox reset", calls=3, p50_ms=180.0, p99_ms=1500.0)
    assert target_line(BackendReport("docker", [reset], target_met=True)) == (
        "docker: reset p50 under 1 s: MET (p50 0.180 s, p99 1.500 s)")
    slow = Row("bwrap", "reset", "env.reset", "sandbox reset", calls=3, p50_ms=1200.0, p99_ms=1500.0)
    assert "MISSED" in target_line(BackendReport("bwrap", [slow], target_met=False))


def test_a_target_line_names_the_target_its_numbers_and_met_or_missed():
    from agentgym_envs.swe.speed import TargetResult

    line = TargetResult("grading at most 1.5x a bare pytest run", "docker", "1.81x: grading p50 2.5 s", False).line()
    assert line == "docker: grading at most 1.5x a bare pytest run: MISSED (1.81x: grading p50 2.5 s)"


def test_the_stress_split_all_is_every_bundled_repository_in_its_own_environment():
    from agentgym_envs.sandbox import SandboxLimits
    from agentgym_envs.spec import StressSettings
    from agentgym_envs.swe.spec import ALL_SPLITS, stress_kwargs
    from tasks.splits import bundle_manifest
    from tasks.swe.instances import with_pin_environment

    kwargs = stress_kwargs(StressSettings(ALL_SPLITS, "bwrap", SandboxLimits()))
    assert "split" not in kwargs
    environments = {task.metadata["environment"]["repo"] for task in kwargs["tasks"]}
    bundled = {f"pypi/{name}" for entry in bundle_manifest("SWE")["splits"].values() for name in entry["repos"]}
    assert environments == bundled and len(bundled) >= 12
    assert stress_kwargs(StressSettings("test", "bwrap", SandboxLimits()))["split"] == "test"  # others: as before
    with pytest.raises(Exception, match="expected a planted-bug task on a pin"):
        with_pin_environment(dataclasses.replace(TASKS[0], metadata={"repo_source": {"kind": "path", "path": "/"}}))
