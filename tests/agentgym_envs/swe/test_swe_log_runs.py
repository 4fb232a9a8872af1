"""judge_log_run: when a per-repository runner's run (Django's runtests.py, sympy's bin/test) may be used, and why
not, from the exit code and the log (hand-written cases, one comment each)."""

from __future__ import annotations

import pytest

from agentgym_envs.swe.testing import judge_log_run
from tasks.swe.runners import LOG_RUNNERS

DJANGO = LOG_RUNNERS["django"]
A, B = "test_a (m.C)", "test_b (m.C)"
OK_A, FAIL_B = f"{A} ... ok", f"{B} ... FAIL"

CASES = [
    # every requested test reported, the exit code agrees: a valid run whatever the outcomes
    (0, f"{OK_A}\n{B} ... ok", [A, B], "ok", ""),
    (1, f"{OK_A}\n{FAIL_B}", [A, B], "ok", ""),
    # killed at the time limit
    (None, OK_A, [A], "timeout", "timeout"),
    # killed by a signal (the OOM killer); with a MemoryError in the log: memory
    (-9, OK_A, [A], "error", "killed"),
    (-9, "MemoryError", [A], "error", "memory"),
    # the command died before any test (an ImportError of the settings): no report
    (1, "Traceback ...\nImportError: No module named 'asgiref'", [A], "error", "no_report"),
    # a test module that did not import
    (1, "m.tests (unittest.loader._FailedTest.m.tests) ... ERROR", [A], "error", "collection_error"),
    # exit codes that contradict the log, or are neither 0 nor 1
    (0, f"{OK_A}\n{FAIL_B}", [A, B], "error", "exit_code"),
    (1, OK_A, [A], "error", "exit_code"),
    (2, OK_A, [A], "error", "exit_code"),
    # a requested test that the log does not name (renamed, deleted, or its module not among the labels)
    (0, OK_A, [A, B], "error", "not_reported"),
]


@pytest.mark.parametrize(("returncode", "log", "ids", "status", "reason"), CASES)
def test_a_log_run_is_judged_from_its_exit_code_and_log(returncode, log, ids, status, reason):
    run = judge_log_run({"returncode": returncode, "duration_s": 1.0, "log_tail": ""}, log, DJANGO, test_ids=ids)
    assert (run.status, run.reason) == (status, reason), run.detail
    assert run.outcomes == DJANGO.parse(log)
