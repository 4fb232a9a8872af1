"""TestRun records and the JUnit XML reader: node ids from class names, outcomes, malformed reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tasks.swe.testrun import TestRun, TestRunError, parse_junit_xml

FILES = ["pkg/__init__.py", "pkg/core.py", "tests/test_core.py", "tests/sub/test_deep.py", "test_top.py"]


def report(*cases: str, root: str = "testsuites") -> bytes:
    """A pytest-shaped JUnit report holding the given <testcase> elements."""
    body = "".join(cases)
    if root == "testsuites":
        return f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'.encode()
    return f'<testsuite name="pytest">{body}</testsuite>'.encode()


@pytest.mark.parametrize(("case", "expected"), [
    # a module-level test
    ('<testcase classname="tests.test_core" name="test_a"/>', {"tests/test_core.py::test_a": "passed"}),
    # a test in a class
    ('<testcase classname="tests.test_core.TestCore" name="test_b"/>',
     {"tests/test_core.py::TestCore::test_b": "passed"}),
    # a nested class
    ('<testcase classname="tests.test_core.TestCore.TestInner" name="test_c"/>',
     {"tests/test_core.py::TestCore::TestInner::test_c": "passed"}),
    # parametrized ids keep their brackets, dots and colons
    ('<testcase classname="tests.test_core" name="test_p[a.b-c::d]"/>',
     {"tests/test_core.py::test_p[a.b-c::d]": "passed"}),
    # a test file in a sub-folder, and one at the root
    ('<testcase classname="tests.sub.test_deep" name="test_d"/>', {"tests/sub/test_deep.py::test_d": "passed"}),
    ('<testcase classname="test_top" name="test_e"/>', {"test_top.py::test_e": "passed"}),
    # xunit1's file attribute names the file
    ('<testcase classname="tests.test_core.TestCore" name="test_f" file="tests/test_core.py"/>',
     {"tests/test_core.py::TestCore::test_f": "passed"}),
    # a module that failed to collect is reported under its path
    ('<testcase classname="" name="tests.test_core"><error message="collection failure">E</error></testcase>',
     {"tests/test_core.py": "error"}),
    # a class name whose module is not a known file is read as a module path
    ('<testcase classname="other.test_x" name="test_g"/>', {"other/test_x.py::test_g": "passed"}),
])
def test_node_ids(case: str, expected: dict[str, str]) -> None:
    assert parse_junit_xml(report(case), FILES) == expected


@pytest.mark.parametrize(("children", "outcome"), [
    ("", "passed"),
    ('<failure message="assert 1 == 2">tb</failure>', "failed"),
    ('<error message="failed on setup">tb</error>', "error"),
    ('<skipped type="pytest.skip" message="no">x</skipped>', "skipped"),
    ('<skipped type="pytest.xfail" message=""/>', "xfailed"),
    # a test that failed and errored at teardown in one element: the error wins
    ('<failure message="f"/><error message="teardown"/>', "error"),
    # captured output is not an outcome
    ("<system-out>hello</system-out>", "passed"),
])
def test_outcomes(children: str, outcome: str) -> None:
    case = f'<testcase classname="tests.test_core" name="test_a">{children}</testcase>'
    assert parse_junit_xml(report(case), FILES) == {"tests/test_core.py::test_a": outcome}


def test_a_test_reported_twice_keeps_the_worse_outcome() -> None:
    # pytest writes a failed call and a failing teardown as two elements with one name
    cases = ('<testcase classname="tests.test_core" name="test_a"><failure message="f"/></testcase>',
             '<testcase classname="tests.test_core" name="test_a"><error message="teardown"/></testcase>',
             '<testcase classname="tests.test_core" name="test_b"/>',
             '<testcase classname="tests.test_core" name="test_b"><skipped type="pytest.skip"/></testcase>')
    assert parse_junit_xml(report(*cases), FILES) == {"tests/test_core.py::test_a": "error",
                                                       "tests/test_core.py::test_b": "passed"}


def test_a_bare_testsuite_root_and_text_input() -> None:
    xml = report('<testcase classname="tests.test_core" name="test_a"/>', root="testsuite").decode()
    assert parse_junit_xml(xml, FILES) == {"tests/test_core.py::test_a": "passed"}


def test_the_files_can_come_from_a_folder(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_core.py").write_text("")
    xml = report('<testcase classname="tests.test_core.TestC" name="test_a"/>')
    assert parse_junit_xml(xml, tmp_path) == {"tests/test_core.py::TestC::test_a": "passed"}
    assert parse_junit_xml(xml, str(tmp_path)) == {"tests/test_core.py::TestC::test_a": "passed"}


def test_a_real_pytest_report(tmp_path) -> None:
    # the report pytest itself writes, for the shapes above
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_real.py").write_text(
        "import pytest\n"
        "class TestC:\n"
        "    @pytest.mark.parametrize('x', [1, 'a.b'])\n"
        "    def test_p(self, x):\n"
        "        assert x != 1\n"
        "@pytest.mark.xfail\n"
        "def test_xf():\n"
        "    assert 0\n"
        "def test_skip():\n"
        "    pytest.skip('no')\n")
    xml_path = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}",
                    f"--junitxml={xml_path}", "tests"], cwd=tmp_path, capture_output=True, check=False)
    assert parse_junit_xml(xml_path.read_bytes(), tmp_path) == {
        "tests/test_real.py::TestC::test_p[1]": "failed",
        "tests/test_real.py::TestC::test_p[a.b]": "passed",
        "tests/test_real.py::test_xf": "xfailed",
        "tests/test_real.py::test_skip": "skipped",
    }


@pytest.mark.parametrize(("xml", "message"), [
    (b"<testsuites><testsuite>", "malformed XML"),  # cut off
    (b"", "malformed XML"),  # empty
    (b"<html><body>500</body></html>", "got <html>"),  # not a JUnit report
    (b'<testsuite><testcase classname="tests.test_core"/></testsuite>', "to have a name"),
])
def test_malformed_reports_are_errors(xml: bytes, message: str) -> None:
    with pytest.raises(TestRunError, match=message):
        parse_junit_xml(xml, FILES)


def test_run_round_trips_through_json() -> None:
    run = TestRun("ok", {"b.py::t": "failed", "a.py::t": "passed"}, exit_code=1, duration_s=1.5)
    again = TestRun.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again == run
    assert list(run.to_dict()["outcomes"]) == ["a.py::t", "b.py::t"]  # sorted, byte-stable
    timeout = TestRun("timeout", detail="over 60 s", reason="timeout")
    assert TestRun.from_dict(timeout.to_dict()) == timeout and timeout.exit_code is None
    older = {key: value for key, value in timeout.to_dict().items() if key != "reason"}  # written before reasons
    assert TestRun.from_dict(older).reason == ""


def test_run_queries() -> None:
    run = TestRun("ok", {"a.py::t": "passed", "a.py::u": "xfailed"})
    assert run.ok and run.passed("a.py::t")
    assert not run.passed("a.py::u")  # only "passed" passes
    assert not run.passed("a.py::missing")  # absent: not passed
    assert not TestRun("error", detail="collection").ok


@pytest.mark.parametrize(("data", "message"), [
    ({"status": "done"}, "expected a run status"),
    ({"status": "ok", "outcomes": {"a.py::t": "PASSED"}}, "expected outcomes"),
    ({"outcomes": {}}, "with a status"),
    ({"status": "ok", "outcomes": ["a.py::t"]}, "as a mapping"),
    ({"status": "error", "reason": "bad luck"}, "expected a reason in"),  # not one of REASONS
    ({"status": "ok", "reason": "memory"}, "no reason for an 'ok' run"),  # a valid run has no reason
])
def test_invalid_runs_are_errors(data: dict, message: str) -> None:
    with pytest.raises(TestRunError, match=message):
        TestRun.from_dict(data)
