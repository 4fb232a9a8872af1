"""The per-repository runners' log parsers and directives, on hand-written logs in Django's and sympy's formats
(one comment per case: what the line means and why the outcome is what it is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.errors import TaskError
from tasks.swe.runners import LOG_RUNNERS, django_labels, parse_django_log, parse_sympy_log, sympy_files

DJANGO_CASES = [
    # Python < 3.11's unittest: the id as SWE-bench's instances store it
    ("test_add (utils_tests.test_text.TestText) ... ok", {"test_add (utils_tests.test_text.TestText)": "passed"}),
    # Python 3.11 adds the method's name to the class path: read as the older form, so stored ids match
    ("test_add (utils_tests.test_text.TestText.test_add) ... ok",
     {"test_add (utils_tests.test_text.TestText)": "passed"}),
    ("test_a (m.C) ... FAIL", {"test_a (m.C)": "failed"}),
    ("test_a (m.C) ... ERROR", {"test_a (m.C)": "error"}),
    ("test_a (m.C) ... skipped 'needs PostgreSQL'", {"test_a (m.C)": "skipped"}),
    ("test_a (m.C) ... expected failure", {"test_a (m.C)": "xfailed"}),
    ("test_a (m.C) ... unexpected success", {"test_a (m.C)": "xpassed"}),
    # a test with a docstring: unittest writes the id, then the docstring's first line with the result
    ("test_doc (m.C)\nThe docstring's line. ... ok", {"The docstring's line.": "passed"}),
    # the test printed after the "...": its result comes alone on a later line
    ("test_noisy (m.C) ... System check identified no issues (0 silenced).\nok", {"test_noisy (m.C)": "passed"}),
    ("test_noisy (m.C) ... some output\nmore output\nFAIL", {"test_noisy (m.C)": "failed"}),
    # passed, then failed in tearDown: the report's header says ERROR; the worse outcome is kept
    ("test_t (m.C) ... ok\n\n======\nERROR: test_t (m.C)\n------\nTraceback ...",
     {"test_t (m.C)": "error"}),
    # the failure report's header alone (the result line cut from the log) still counts
    ("FAIL: test_f (m.C.test_f)\nTraceback (most recent call last):", {"test_f (m.C)": "failed"}),
    # a module that did not import: unittest's stand-in test, kept under its own id
    ("m.tests (unittest.loader._FailedTest.m.tests) ... ERROR",
     {"m.tests (unittest.loader._FailedTest)": "error"}),
    # the runner's own lines and the summary are no tests
    ("Testing against Django installed in '/work/testbed/django'\nFound 2 test(s).\nRan 2 tests in 0.01s\nOK", {}),
]


@pytest.mark.parametrize(("log", "expected"), DJANGO_CASES)
def test_the_django_parser_reads_runtests_verbose_output(log, expected):
    assert parse_django_log(log) == expected


SYMPY_CASES = [
    ("test_add ok", {"test_add": "passed"}),
    ("test_add F", {"test_add": "failed"}),
    # an exception in the test (sympy counts exceptions apart from failures)
    ("test_add E", {"test_add": "error"}),
    # a test past --timeout
    ("test_slow_one T", {"test_slow_one": "error"}),
    ("test_known_bug f", {"test_known_bug": "xfailed"}),
    ("test_known_bug X", {"test_known_bug": "xpassed"}),
    # a skip writes its message, or " - " with none, before the mark
    ("test_needs_numpy numpy not installed s", {"test_needs_numpy": "skipped"}),
    ("test_plain_skip  - s", {"test_plain_skip": "skipped"}),
    # a slow test left out
    ("test_huge Slow w", {"test_huge": "skipped"}),
    # the last test of a file: the file's verdict follows, right-aligned (seen in sympy 1.13's runner)
    ("test_last ok                                          [OK]", {"test_last": "passed"}),
    ("test_zz_skip not today s                              [FAIL]", {"test_zz_skip": "skipped"}),
    # the file line and the summary are no tests; a word that is no mark is not an outcome
    ("sympy/core/tests/test_basic.py[3] \ntests finished: 3 passed, in 0.1 seconds\ntest_x printed", {}),
    # the report's headers: one colon for an exception, two for a failure
    ("test_a ok\n______ sympy/core/tests/test_basic.py:test_a ______",
     {"test_a": "error"}),
    ("_______ sympy/core/tests/test_basic.py::test_b ________", {"test_b": "failed"}),
]


@pytest.mark.parametrize(("log", "expected"), SYMPY_CASES)
def test_the_sympy_parser_reads_bin_test_verbose_output(log, expected):
    assert parse_sympy_log(log) == expected


def test_django_labels_are_the_modules_of_the_ids():
    ids = ["test_a (admin_views.tests.AdminViewTests)", "test_b (admin_views.tests.OtherTests)",
           "The docstring's line.", "test_c (utils_tests.test_text.TestText.test_c)"]
    assert django_labels(ids) == ["admin_views.tests", "utils_tests.test_text"]
    assert LOG_RUNNERS["django"].arguments(ids[:1], ()) == [
        "tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1", "admin_views.tests"]
    with pytest.raises(TaskError, match="none names its module"):
        django_labels(["The docstring's line."])


def test_sympy_runs_the_test_patchs_files():
    assert sympy_files(["test_a"], ["sympy/core/tests/test_basic.py", "doc/notes.md"]) == [
        "sympy/core/tests/test_basic.py"]
    assert LOG_RUNNERS["sympy"].arguments(["test_a"], ["sympy/a/tests/test_x.py"]) == [
        "bin/test", "-C", "--verbose", "sympy/a/tests/test_x.py"]
    with pytest.raises(TaskError, match=r"touches no \.py file"):
        sympy_files(["test_a"], [])


def test_the_sympy_parser_reads_a_real_log_of_sympys_own_runner():
    # sympy 1.13.3's runner (what bin/test calls) on sympy/core/tests/test_basic.py with four tests added: one
    # failing, one raising, an XFAIL and a SKIP (the last, so that the file's [FAIL] verdict follows it)
    log = (Path(__file__).parent / "fixtures" / "sympy_runtests_verbose.log").read_text()
    outcomes = parse_sympy_log(log)
    assert len(outcomes) == 28 and "tests finished: 24 passed, 1 failed, 1 skipped, 1 expected to fail" in log
    assert {test: outcome for test, outcome in outcomes.items() if outcome != "passed"} == {
        "test_zz_fails": "failed", "test_zz_raises": "error", "test_zz_xfail": "xfailed", "test_zz_skip": "skipped"}
