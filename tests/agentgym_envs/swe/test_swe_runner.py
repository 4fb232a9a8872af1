"""run_tests, prepare_tree, restore_files and working_tree_diff in real sandboxes, on a tiny repository the test
writes: honest runs, a planted bug, and the ways a patch could try to pass without fixing anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentgym_envs.sandbox import KernelSandbox
from agentgym_envs.swe import (
    prepare_tree,
    pytest_config,
    read_tree,
    restore_files,
    run_tests,
    working_tree_diff,
)
from tasks.swe import TestRun
from tasks.swe.repos import is_test_file
from tests.agentgym_envs.swe.conftest import CLAMP_BUG, OPS, REPO, TEST_IDS, TESTS, changed

REWRITING_CONFTEST = b'''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''

PATCHING_PYTEST = b'''import _pytest.reports

_original_init = _pytest.reports.TestReport.__init__


def _always_passed(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    self.outcome = "passed"


_pytest.reports.TestReport.__init__ = _always_passed
from calc.ops import add, clamp, mul
'''

HIDING_PASSED = b'''import _pytest.reports

_pytest.reports.TestReport.passed = property(lambda self: True)
from calc.ops import add, clamp, mul
'''
"""A library that, at import, defines on TestReport the ``passed`` it inherits from BaseReport, so every report
reads as passed."""

EXIT_AT_IMPORT = b"import os\nos._exit(0)\n" + OPS

EXIT_ZERO_AT_SHUTDOWN = b"import atexit, os\natexit.register(os._exit, 0)\n" + CLAMP_BUG

ENDLESS_ADD = OPS.replace(b"    return a + b", b"    while True:\n        pass")

HOG_AT_IMPORT = b"_HOG = bytearray(8 * 1024 ** 3)\n" + OPS
"""A library that asks for more memory than the sandbox's limit at import: pytest's collection ends in a MemoryError."""

SUBTESTS = b"""import unittest

from calc import clamp


class TestClamp(unittest.TestCase):
    def test_inside(self):
        for x in (0, 5, 9):
            with self.subTest(x=x):
                self.assertEqual(clamp(x, 0, 10), x)

    def test_above(self):
        for x in (11, 12):
            with self.subTest(x=x):
                self.assertEqual(clamp(x, 0, 10), 10)
"""
"""unittest subTests, which pytest 9 reports natively (a subtest report each) and pytest 7 does not."""

SUBTEST_IDS = ["tests/test_sub.py::TestClamp::test_inside", "tests/test_sub.py::TestClamp::test_above"]

FORGED_SUBTEST = b"""import pytest


def test_forged(request):
    subtests = pytest.importorskip("_pytest.subtests")  # pytest 9's
    item = request.node
    base = pytest.TestReport(item.nodeid, item.location, {}, "passed", None, "call")
    forged = subtests.SubtestReport._new(base, subtests.SubtestContext(msg="forged", kwargs={}), None, None)
    item.ihook.pytest_runtest_logreport(report=forged)
"""
"""A subtest report made without pytest_runtest_makereport (on pytest 9; the test skips on a pytest without)."""

SPACED_IDS = b"""import pytest

from calc import clamp


@pytest.mark.parametrize("label, x, expected", [("in range", 5, 5), ("above top", 11, 10)])
def test_labelled(label, x, expected):
    assert clamp(x, 0, 10) == expected
"""
"""Parametrize ids with spaces (``test_labelled[in range-5-5]``), which SWE-bench stores cut at the space."""


def run(sandbox: KernelSandbox, files: dict[str, bytes], test_ids: list[str] | None = TEST_IDS, *,
        timeout_s: float = 30.0) -> TestRun:
    """Put ``files`` in the sandbox and run ``test_ids`` with the repository's configuration."""
    prepare_tree(sandbox, files)
    return run_tests(sandbox, test_ids, timeout_s=timeout_s, config=pytest_config(REPO))


def test_clean_tree_passes_every_test(swe_sandbox: KernelSandbox) -> None:
    clean = run(swe_sandbox, REPO)
    assert (clean.status, clean.exit_code, clean.detail) == ("ok", 0, "")
    assert clean.outcomes == dict.fromkeys(TEST_IDS, "passed")
    whole_suite = run_tests(swe_sandbox, None, timeout_s=30.0, suite_paths=["tests"])
    assert whole_suite.outcomes == clean.outcomes  # the parametrized ids as pytest writes them


def test_planted_bug_fails_exactly_its_tests(swe_sandbox: KernelSandbox) -> None:
    buggy = run(swe_sandbox, changed(REPO, {"calc/ops.py": CLAMP_BUG}))
    assert (buggy.status, buggy.exit_code) == ("ok", 1)
    assert {test_id for test_id, outcome in buggy.outcomes.items() if outcome != "passed"} == {TEST_IDS[4]}
    assert buggy.outcomes[TEST_IDS[4]] == "failed"


def test_only_requested_tests_run(swe_sandbox: KernelSandbox) -> None:
    subset = run(swe_sandbox, changed(REPO, {"calc/ops.py": CLAMP_BUG}), TEST_IDS[:2])
    assert (subset.status, subset.outcomes) == ("ok", dict.fromkeys(TEST_IDS[:2], "passed"))


def test_conftest_rewriting_reports_is_caught_by_the_guard_and_removed_by_restore(swe_sandbox: KernelSandbox) -> None:
    tampered = changed(REPO, {"calc/ops.py": CLAMP_BUG, "tests/conftest.py": REWRITING_CONFTEST})
    caught = run(swe_sandbox, tampered)
    assert caught.status == "error"
    assert "test_clamp[11-10]: the call phase raised but its report says passed" in caught.detail

    removed = restore_files(swe_sandbox, {path: data for path, data in REPO.items() if is_test_file(path)})
    assert removed == ["tests/conftest.py"]
    graded = run_tests(swe_sandbox, TEST_IDS, timeout_s=30.0, config=pytest_config(REPO))
    assert (graded.status, graded.outcomes[TEST_IDS[4]]) == ("ok", "failed")


def test_restore_puts_edited_and_deleted_tests_back(swe_sandbox: KernelSandbox) -> None:
    weakened = TESTS.replace(b"assert clamp(x, 0, 10) == expected", b"pass")
    prepare_tree(swe_sandbox, changed(REPO, {"calc/ops.py": CLAMP_BUG, "tests/test_ops.py": weakened}))
    assert run_tests(swe_sandbox, TEST_IDS, timeout_s=30.0).outcomes[TEST_IDS[4]] == "passed"
    swe_sandbox.run_code("import os; os.remove('testbed/tests/test_ops.py'); os.symlink('/etc/hostname', "
                         "'testbed/tests/test_ops.py')")
    restore_files(swe_sandbox, {"tests/test_ops.py": TESTS})
    assert read_tree(swe_sandbox)["tests/test_ops.py"] == TESTS
    assert run_tests(swe_sandbox, TEST_IDS, timeout_s=30.0).outcomes[TEST_IDS[4]] == "failed"


def test_monkeypatching_pytest_at_import_is_an_error(swe_sandbox: KernelSandbox) -> None:
    patched = run(swe_sandbox, changed(REPO, {"calc/ops.py": CLAMP_BUG, "calc/__init__.py": PATCHING_PYTEST}))
    assert patched.status == "error"
    assert "_pytest.reports.TestReport was replaced or modified (__init__)" in patched.detail


def test_hiding_an_inherited_member_of_pytest_at_import_is_an_error(swe_sandbox: KernelSandbox) -> None:
    # the names TestReport inherits are taken once, at the guard's snapshot; one defined over them later is found
    hidden = run(swe_sandbox, changed(REPO, {"calc/ops.py": CLAMP_BUG, "calc/__init__.py": HIDING_PASSED}))
    assert (hidden.status, hidden.reason) == ("error", "tampered")
    assert "_pytest.reports.TestReport was replaced or modified (passed)" in hidden.detail


def test_exit_at_import_is_an_error(swe_sandbox: KernelSandbox) -> None:
    exited = run(swe_sandbox, changed(REPO, {"calc/ops.py": EXIT_AT_IMPORT}))
    assert (exited.status, exited.exit_code, exited.outcomes) == ("error", 0, {})
    assert exited.detail.startswith("no report with this run's nonce was written (pytest exited with code 0)")


def test_exit_code_that_contradicts_the_report_is_an_error(swe_sandbox: KernelSandbox) -> None:
    contradicted = run(swe_sandbox, changed(REPO, {"calc/ops.py": EXIT_ZERO_AT_SHUTDOWN}))
    assert (contradicted.status, contradicted.exit_code) == ("error", 0)
    assert contradicted.detail.startswith("pytest exited with code 0 but its session ended with 1")
    assert contradicted.outcomes[TEST_IDS[4]] == "failed"


def test_deleted_tests_are_missing_and_not_passed(swe_sandbox: KernelSandbox) -> None:
    without_add = TESTS.replace(b"def test_add():\n    assert add(2, 3) == 5\n", b"")
    deleted = run(swe_sandbox, changed(REPO, {"tests/test_ops.py": without_add}))
    assert deleted.status == "error"
    assert deleted.detail == "1 requested tests were not reported: tests/test_ops.py::test_add"
    assert TEST_IDS[0] not in deleted.outcomes and not deleted.passed(TEST_IDS[0])
    assert deleted.outcomes[TEST_IDS[1]] == "passed"


def test_endless_test_times_out_and_the_sandbox_stays_usable(swe_sandbox: KernelSandbox) -> None:
    endless = run(swe_sandbox, changed(REPO, {"calc/ops.py": ENDLESS_ADD}), timeout_s=3.0)
    assert (endless.status, endless.exit_code, endless.reason) == ("timeout", None, "timeout")
    assert 3.0 <= endless.duration_s < 6.0
    left = swe_sandbox.run_code("import subprocess; print(subprocess.run(['ps', '-eo', 'args'], capture_output=True, "
                                "text=True).stdout.count('bootstrap.py'))")
    assert left.ok and left.output.strip() == "0"  # the killed pytest left no process behind
    assert run(swe_sandbox, REPO).status == "ok"


def test_working_tree_diff_applies_with_patch(swe_sandbox: KernelSandbox, tmp_path: Path) -> None:
    prepare_tree(swe_sandbox, REPO)
    swe_sandbox.run_code(
        "import os, pathlib\n"
        "ops = pathlib.Path('testbed/calc/ops.py'); ops.write_text(ops.read_text().replace('a * b', 'b * a'))\n"
        "pathlib.Path('testbed/calc/extra.py').write_text('VALUE = 1')  # no newline at the end\n"
        "os.remove('testbed/setup.cfg')\n"
        "os.makedirs('testbed/calc/__pycache__'); pathlib.Path('testbed/calc/__pycache__/ops.pyc').write_bytes(b'x')")
    patch = working_tree_diff(swe_sandbox, REPO)
    assert "--- a/calc/ops.py\n+++ b/calc/ops.py\n" in patch
    assert "--- /dev/null\n+++ b/calc/extra.py\n" in patch and "\\ No newline at end of file\n" in patch
    assert "--- a/setup.cfg\n+++ /dev/null\n" in patch and "__pycache__" not in patch
    for path, data in REPO.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    subprocess.run(["patch", "-p1", "--quiet"], input=patch.encode(), cwd=tmp_path, check=True)
    applied = {path.relative_to(tmp_path).as_posix(): path.read_bytes()
               for path in tmp_path.rglob("*") if path.is_file()}
    assert applied == read_tree(swe_sandbox)
    assert "calc/__pycache__/ops.pyc" not in applied and "setup.cfg" not in applied


def test_a_collection_error_and_a_memory_error_name_their_reasons(swe_sandbox: KernelSandbox) -> None:
    broken = run(swe_sandbox, changed(REPO, {"calc/ops.py": OPS + b"def broken(:\n"}))
    assert (broken.status, broken.reason) == ("error", "collection_error")
    assert broken.detail.startswith("collection errors in tests/test_ops.py")
    hog = run(swe_sandbox, changed(REPO, {"calc/ops.py": HOG_AT_IMPORT}))
    assert (hog.status, hog.reason) == ("error", "memory")
    assert hog.detail.startswith("the test run ran out of memory (collection errors in tests/test_ops.py)")


def sandbox_has_subtests(sandbox: KernelSandbox) -> bool:
    """Whether the sandbox's pytest reports subtests natively (pytest 9: the host's, so bwrap's)."""
    probe = sandbox.run_code("import importlib.util; print(importlib.util.find_spec('_pytest.subtests') is not None)")
    return probe.output.strip() == "True"


def test_unittest_subtests_are_not_a_tamper_finding_and_a_failed_one_fails_its_test(swe_sandbox: KernelSandbox) -> None:
    files = changed(REPO, {"tests/test_sub.py": SUBTESTS})
    fixed = run(swe_sandbox, files, SUBTEST_IDS)
    assert (fixed.status, fixed.detail, fixed.outcomes) == ("ok", "", dict.fromkeys(SUBTEST_IDS, "passed"))
    buggy = run(swe_sandbox, changed(files, {"calc/ops.py": CLAMP_BUG}), SUBTEST_IDS)
    assert (buggy.status, buggy.exit_code, buggy.detail) == ("ok", 1, "")
    assert buggy.outcomes == {SUBTEST_IDS[0]: "passed", SUBTEST_IDS[1]: "failed"}


def test_a_forged_subtest_report_is_found(swe_sandbox: KernelSandbox) -> None:
    forged = run(swe_sandbox, changed(REPO, {"tests/test_forged.py": FORGED_SUBTEST}),
                 ["tests/test_forged.py::test_forged"])
    if not sandbox_has_subtests(swe_sandbox):  # pytest 7 (the docker image's): no subtest reports to forge
        assert (forged.status, forged.outcomes) == ("ok", {"tests/test_forged.py::test_forged": "skipped"})
        return
    assert (forged.status, forged.reason) == ("error", "tampered")
    assert forged.detail == ("the test run was tampered with: tests/test_forged.py::test_forged: a subtest report "
                             "that pytest_runtest_makereport did not make")


def test_swebench_rules_run_the_tests_its_cut_ids_name(swe_sandbox: KernelSandbox) -> None:
    files = changed(REPO, {"tests/test_labelled.py": SPACED_IDS, "calc/ops.py": CLAMP_BUG})
    cut = ["tests/test_labelled.py::test_labelled[in", "tests/test_labelled.py::test_labelled[above"]
    prepare_tree(swe_sandbox, files)
    graded = run_tests(swe_sandbox, cut, timeout_s=30.0, config=pytest_config(REPO), rules="swebench")
    assert (graded.status, graded.outcomes) == ("ok", {
        "tests/test_labelled.py::test_labelled[in range-5-5]": "passed",
        "tests/test_labelled.py::test_labelled[above top-11-10]": "failed"})
    strict = run_tests(swe_sandbox, cut, timeout_s=30.0, config=pytest_config(REPO))
    assert (strict.status, strict.reason, strict.outcomes) == ("error", "not_reported", {})
