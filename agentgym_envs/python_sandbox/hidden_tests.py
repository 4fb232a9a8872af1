"""Running a submitted solution against hidden unit tests, after the episode, in the sandbox.

The agent never sees the tests: they are used only after its final answer, when the sandbox has
been reset (every process the agent started is dead and its files are gone). Only the tests'
*arguments* enter the sandbox; the expected values stay on the host, which compares the values
the solution returned. A solution therefore cannot pass by reading, editing or printing the
expected results, nor by exiting early: a test counts as passed only when its returned value
matches.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentgym_envs.sandbox.base import Sandbox
from rewards import UnitTestEvidence

RESULTS_FILE = ".agentrl-test-results.json"
"""The file, in the sandbox's working folder, where the harness writes each hidden test's outcome (a JSON list).

The host reads it after the run; a solution that writes to it, or leaves it unreadable, only fails its own tests
(the probes of :mod:`agentgym_envs.python_sandbox.probes` tamper with this very file). Import it from here rather
than spelling it out."""
FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)

HARNESS = r'''
import json, signal

def _agentrl_hidden_tests(source, entry_point, cases, timeout_s, results_file):
    class _TestTimeout(BaseException):
        pass

    def _alarm(signum, frame):
        raise _TestTimeout()

    def _plain(value):
        if isinstance(value, (set, frozenset)):
            return sorted(value, key=repr)
        if isinstance(value, tuple):
            return list(value)
        return repr(value)

    outcomes = []
    namespace = {"__name__": "solution"}
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
        function = namespace[entry_point]
        load_error = None
    except BaseException as exc:
        load_error = f"{type(exc).__name__}: {exc}"
    signal.signal(signal.SIGALRM, _alarm)
    for args in cases:
        if load_error is not None:
            outcomes.append({"ok": False, "error": load_error})
            continue
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            value = json.loads(json.dumps(function(*args), default=_plain))
            outcomes.append({"ok": True, "value": value})
        except _TestTimeout:
            outcomes.append({"ok": False, "error": f"timed out after {timeout_s} s"})
        except BaseException as exc:
            outcomes.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    with open(results_file, "w") as handle:
        json.dump(outcomes, handle)
'''


def extract_code(answer: str) -> str:
    """The code of an answer: the first fenced block if there is one, else the whole text."""
    match = FENCE.search(answer)
    return (match.group(1) if match else answer).strip() + "\n"


def values_match(actual: Any, expected: Any) -> bool:
    """JSON values equal, with a relative tolerance of 1e-9 for floats."""
    if isinstance(expected, float) or isinstance(actual, float):
        return (isinstance(actual, (int, float)) and not isinstance(actual, bool)
                and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12))
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(values_match(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(values_match(actual[k], expected[k]) for k in expected)
    return type(actual) is type(expected) and actual == expected


def run_hidden_tests(sandbox: Sandbox, answer: str, entry_point: str, tests: Sequence[Mapping[str, Any]],
                     *, per_test_timeout_s: float = 5.0) -> UnitTestEvidence:
    """Reset ``sandbox``, run the answer's code on each test's arguments and compare on the host.

    Whatever the solution does to its kernel (stops or kills it, leaves processes that do, garbles the
    results file) fails the tests; only a fault of the sandbox itself raises.

    Raises:
        SandboxError: The sandbox failed (an infrastructure fault, never scored as a failure).
    """
    sandbox.reset()
    cases = [list(test["args"]) for test in tests]
    call = (f"_agentrl_hidden_tests({extract_code(answer)!r}, {entry_point!r}, {json.dumps(cases)}, "
            f"{per_test_timeout_s!r}, {RESULTS_FILE!r})")
    run = sandbox.run_code(HARNESS + "\n" + call, timeout_s=per_test_timeout_s * (len(cases) + 1) + 5)
    try:
        outcomes = json.loads(sandbox.read_file(RESULTS_FILE, max_bytes=16 << 20))
    except (FileNotFoundError, ValueError, RecursionError):  # gone with a broken kernel, not JSON, not UTF-8
        return UnitTestEvidence(results=(False,) * len(tests), error=run.output[-2000:] or "no results were written")
    if not isinstance(outcomes, list) or len(outcomes) != len(tests):
        return UnitTestEvidence(results=(False,) * len(tests), error="the results file was tampered with")
    results = tuple(isinstance(o, dict) and o.get("ok") is True and values_match(o.get("value"), t["expected"])
                    for o, t in zip(outcomes, tests, strict=True))
    errors = [o.get("error") for o in outcomes if isinstance(o, dict) and o.get("error")]
    return UnitTestEvidence(results=results, error=errors[0] if errors else None)
