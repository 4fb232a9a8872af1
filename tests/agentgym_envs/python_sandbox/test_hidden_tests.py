"""The hidden-test harness writes its outcomes to :data:`RESULTS_FILE`, the one name the tooling reads."""

from __future__ import annotations

import json

from agentgym_envs.python_sandbox.hidden_tests import RESULTS_FILE, run_hidden_tests
from agentgym_envs.sandbox import KernelSandbox

TESTS = [{"args": [2], "expected": 4}, {"args": [3], "expected": 7}]


def test_the_harness_writes_one_outcome_per_test_to_the_results_file(sandbox: KernelSandbox) -> None:
    evidence = run_hidden_tests(sandbox, "def double(x):\n    return 2 * x\n", "double", TESTS)
    assert evidence.results == (True, False)  # 2*3 is not 7: the host compares, not the sandbox
    outcomes = json.loads(sandbox.read_file(RESULTS_FILE))
    assert [outcome["value"] for outcome in outcomes] == [4, 6]
