"""The host-side rules of the SWE runner, without a sandbox: how a run is judged from its status and report, the
diff format and which configuration a run uses."""

from __future__ import annotations

from typing import Any

import pytest

from agentgym_envs.swe import PytestConfig, judge_run, pytest_config, tree_diff

NONCE = "n" * 32
IDS = ["tests/test_a.py::test_one", "tests/test_a.py::test_two"]


def report(**overrides: Any) -> dict[str, Any]:
    """A well-formed guard report of a run where both tests passed."""
    return {"nonce": NONCE, "exitstatus": 0, "outcomes": dict.fromkeys(IDS, "passed"), "collection_errors": [],
            "not_collected": [], "tamper": [], **overrides}


def status(returncode: int | None = 0, tail: str = "2 passed in 0.01s") -> dict[str, Any]:
    """What the kernel cell saw."""
    return {"returncode": returncode, "duration_s": 1.25, "log_tail": tail}


MEMORY_TAIL = ('INTERNALERROR>   File "/usr/lib/python3/dist-packages/_pytest/main.py", line 270\n'
               "INTERNALERROR> MemoryError")
COLLECTION_MEMORY_TAIL = "ERROR tests/test_a.py - MemoryError\n!!! Interrupted: 1 error during collection !!!"


@pytest.mark.parametrize(("run_status", "run_report", "expected_status", "reason", "detail_start"), [
    # both passed, exit 0
    (status(0), report(), "ok", "", ""),
    # a failure reported with exit 1
    (status(1), report(exitstatus=1, outcomes={IDS[0]: "passed", IDS[1]: "failed"}), "ok", "", ""),
    # killed at the time limit
    (status(None), None, "timeout", "timeout", "the test run passed its time limit"),
    # pytest died before writing the report (os._exit at import)
    (status(0), None, "error", "no_report", "no report with this run's nonce was written (pytest exited with code 0)"),
    # a report someone else wrote, without this run's nonce
    (status(0), report(nonce="forged"), "error", "no_report", "no report with this run's nonce"),
    # an outcome that is not one of pytest's
    (status(0), report(outcomes={IDS[0]: "great"}), "error", "no_report", "the report's outcomes are malformed"),
    # killed by a signal (the OOM killer) before it reported
    (status(-9), None, "error", "killed",
     "no report with this run's nonce was written (pytest was killed by signal 9)"),
    # a MemoryError ended pytest before it reported
    (status(1, "MemoryError"), None, "error", "memory", "no report with this run's nonce was written"),
    # pytest's own INTERNALERROR> MemoryError, exit 3 (a large suite over the memory limit)
    (status(3, MEMORY_TAIL), report(exitstatus=3), "error", "memory", "the test run ran out of memory (pytest exited "
     "with code 3 (internal error))"),
    # a MemoryError while importing a test file: memory, not a plain collection error
    (status(2, COLLECTION_MEMORY_TAIL), report(exitstatus=2, outcomes={}, collection_errors=["tests/test_a.py"]),
     "error", "memory", "the test run ran out of memory (collection errors in tests/test_a.py)"),
    # a MemoryError in the terminal summary, after the session's report: exit 1 from the traceback
    (status(1, "    ^^^^\nMemoryError"), report(), "error", "memory",
     "the test run ran out of memory (pytest exited with code 1 but its session ended with 0)"),
    # a test that failed with a MemoryError of its own is a valid run's failure
    (status(1, "FAILED tests/test_a.py::test_two - MemoryError"),
     report(exitstatus=1, outcomes={IDS[0]: "passed", IDS[1]: "failed"}), "ok", "", ""),
    # the guard's findings
    (status(0), report(tamper=["_pytest.runner.call_and_report was replaced"]), "error", "tampered",
     "the test run was tampered with: _pytest.runner.call_and_report"),
    # tampering wins over a MemoryError in the output
    (status(3, MEMORY_TAIL), report(exitstatus=3, tamper=["x"]), "error", "tampered", "the test run was tampered"),
    # a collection error (exit 2)
    (status(2), report(exitstatus=2, outcomes={}, collection_errors=["tests/test_a.py"]), "error", "collection_error",
     "collection errors in tests/test_a.py"),
    # the process's exit code is not the session's (an atexit os._exit(0))
    (status(0), report(exitstatus=1, outcomes={IDS[0]: "passed", IDS[1]: "failed"}), "error", "exit_code",
     "pytest exited with code 0 but its session ended with 1"),
    # exit 0 with a failure in the report
    (status(0), report(outcomes={IDS[0]: "passed", IDS[1]: "error"}), "error", "exit_code",
     "pytest exited with code 0 but reported failures (tests/test_a.py::test_two)"),
    # exit 1 with no failure in the report
    (status(1), report(exitstatus=1), "error", "exit_code", "pytest exited with code 1 but reported no failure"),
    # an internal error that is not a MemoryError
    (status(3), report(exitstatus=3), "error", "internal_error", "pytest exited with code 3 (internal error)"),
    # interrupted with no collection error, a usage error; no test collected because no requested id names one
    (status(2), report(exitstatus=2), "error", "interrupted", "pytest exited with code 2 (interrupted)"),
    (status(4), report(exitstatus=4), "error", "usage_error", "pytest exited with code 4 (usage error)"),
    (status(5), report(exitstatus=5, outcomes={}), "error", "not_reported", "2 requested tests were not reported"),
    # a requested test missing from the report
    (status(0), report(outcomes={IDS[0]: "passed"}), "error", "not_reported",
     "1 requested tests were not reported: " + IDS[1]),
])
def test_judge_run(run_status: dict[str, Any], run_report: dict[str, Any] | None, expected_status: str, reason: str,
                   detail_start: str) -> None:
    run = judge_run(run_status, run_report, nonce=NONCE, test_ids=IDS)
    assert (run.status, run.reason) == (expected_status, reason)
    assert run.detail.startswith(detail_start) and bool(run.detail) == bool(detail_start)
    assert run.exit_code == run_status["returncode"] and run.duration_s == 1.25


SPACED = {"t.py::test_f[in range]": "passed", "t.py::test_f[above top]": "failed", "t.py::test_g[log(x)]": "passed"}


@pytest.mark.parametrize(("rules", "requested", "missing"), [
    # strict: full node ids only
    ("strict", ["t.py::test_f[in range]", "t.py::test_g[log(x)]"], []),
    ("strict", ["t.py::test_f[in"], ["t.py::test_f[in"]),
    # swebench: ids as its log parser cuts them, at the first space
    ("swebench", ["t.py::test_f[in", "t.py::test_f[above"], []),
    # swebench: an id cut mid-parameter (more '[' than ']') names the tests it begins
    ("swebench", ["t.py::test_g[log("], []),
    # swebench: a full id with a space is never in SWE-bench's status map
    ("swebench", ["t.py::test_f[in range]"], ["t.py::test_f[in range]"]),
    # swebench: a balanced id is matched whole, never as a prefix
    ("swebench", ["t.py::test"], ["t.py::test"]),
])
def test_judge_run_finds_requested_ids_by_the_rules(rules: str, requested: list[str], missing: list[str]) -> None:
    run = judge_run(status(1), report(exitstatus=1, outcomes=SPACED), nonce=NONCE, test_ids=requested, rules=rules)
    assert (run.status, run.reason) == (("error", "not_reported") if missing else ("ok", ""))
    assert run.detail == (f"{len(missing)} requested tests were not reported: {', '.join(missing)}" if missing else "")


def test_judge_run_keeps_the_outcomes_of_an_invalid_but_well_formed_report() -> None:
    run = judge_run(status(0), report(tamper=["x"]), nonce=NONCE, test_ids=IDS)
    assert run.outcomes == dict.fromkeys(IDS, "passed") and run.status == "error"


def test_judge_run_of_the_whole_suite_needs_no_ids() -> None:
    assert judge_run(status(0), report(), nonce=NONCE, test_ids=None).status == "ok"
    empty = judge_run(status(5), report(exitstatus=5, outcomes={}), nonce=NONCE, test_ids=None)
    assert (empty.status, empty.reason) == ("error", "no_tests")  # a suite with no test at all


def test_tree_diff_edit_add_delete() -> None:
    before = {"a.py": b"x = 1\ny = 2\n", "gone.py": b"old\n", "same.py": b"same\n"}
    after = {"a.py": b"x = 1\ny = 3\n", "new.py": b"fresh", "same.py": b"same\n", "a/__pycache__/a.pyc": b"\0"}
    assert tree_diff(before, after) == (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+fresh\n"
        "\\ No newline at end of file\n")


def test_tree_diff_splits_lines_at_newlines_only_and_marks_binary_files() -> None:
    form_feed = tree_diff({"a.py": b"a\x0cb\n"}, {"a.py": b"a\x0cc\n"})
    assert "-a\x0cb\n+a\x0cc\n" in form_feed
    assert tree_diff({"logo.png": b"\x89PNG\xff"}, {"logo.png": b"\x89PNG\xfe"}).endswith(
        "Binary files a/logo.png and b/logo.png differ\n")
    assert tree_diff({"a.py": b"x\n"}, {"a.py": b"x\n"}) == ""


def test_pytest_config_reads_the_file_pytest_would() -> None:
    assert pytest_config({"setup.cfg": b"[metadata]\n", "tox.ini": b"[pytest]\nxfail_strict = true\n"}) == \
        PytestConfig("tox.ini", b"[pytest]\nxfail_strict = true\n")
    assert pytest_config({"pytest.ini": b"", "setup.cfg": b"[tool:pytest]\n"}) == PytestConfig("pytest.ini", b"")
    assert pytest_config({"pyproject.toml": b"[project]\nname = 'x'\n"}) == PytestConfig()
