"""SWE task synthesis: the keep/drop rules on real sandboxes (a tiny repository the tests write), the end-to-end
driver and its command line, and a sample of the bundled test split re-validated. The builder's pure parts are
tested in ``tests/tasks/test_swe_synthesis.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from agentgym_envs.sandbox import KernelSandbox, open_sandbox
from agentgym_envs.swe.synthesize import (
    SYNTHESIS_LIMITS,
    Synthesizer,
    failure_section,
    main,
    open_backends,
    refuse_installed,
    report_tasks,
    synthesize,
)
from agentgym_envs.swe.testing import prepare_tree, run_tests
from tasks import load_split, read_tasks
from tasks.swe.environments import RepoEnvironment
from tasks.swe.instances import instance_from_task, tree_digest
from tasks.swe.patches import apply_patch
from tasks.swe.repos import PINS, RepoError, repository_files
from tasks.swe.synthesis import SynthesisError, SynthesisSettings, drop_category, folder_source, pin_source
from tests.conftest import require_backend

OPS = b'''def add(a, b):
    return a + b


def clamp(x, lo, hi):
    return max(lo, min(x, hi))


def unused(x):
    return x + 1


def count_down(n):
    while n > 0:
        n -= 1
    return n
'''

TESTS = b'''import pytest

from calc.ops import add, clamp, count_down


def test_add():
    assert add(2, 3) == 5


@pytest.mark.parametrize("x, expected", [(-1, 0), (5, 5), (11, 10)])
def test_clamp(x, expected):
    assert clamp(x, 0, 10) == expected


def test_count_down():
    assert count_down(3) == 0
'''

FLAKY = b'''from pathlib import Path


def test_flaky():
    counter = Path(__file__).parent / "runs.txt"
    runs = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(runs))
    assert runs % 2 == 1
'''

REPO = {"calc/__init__.py": b"", "calc/ops.py": OPS, "tests/test_ops.py": TESTS}
"""A module and its tests: six tests, three of them one parametrized function; ``unused`` is never tested."""

CLEAN_PASSING = ("tests/test_ops.py::test_add", "tests/test_ops.py::test_clamp[-1-0]",
                 "tests/test_ops.py::test_clamp[11-10]", "tests/test_ops.py::test_clamp[5-5]",
                 "tests/test_ops.py::test_count_down")


def with_ops(old: bytes, new: bytes, files: Mapping[str, bytes] = REPO) -> dict[str, bytes]:
    """``files`` with one change in calc/ops.py."""
    assert old in files["calc/ops.py"]
    return {**files, "calc/ops.py": files["calc/ops.py"].replace(old, new)}


def write_repo(folder: Path, files: Mapping[str, bytes]) -> Path:
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


@pytest.fixture(scope="module", params=[pytest.param("docker", marks=pytest.mark.docker),
                                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def sandboxes(request: pytest.FixtureRequest, backend_problems: dict[str, str | None]) -> Iterator[dict[str,
                                                                                                       KernelSandbox]]:
    """One sandbox of a real backend, with synthesis's limits, shared by the module."""
    require_backend(request.param, backend_problems)
    box = open_sandbox(request.param, SYNTHESIS_LIMITS)
    try:
        yield {request.param: box}
    finally:
        box.close()


def ready_synthesizer(tmp_path: Path, sandboxes: dict[str, KernelSandbox], files: Mapping[str, bytes] = REPO,
                      **settings: float) -> Synthesizer:
    """A synthesizer of a tiny repository whose clean suite has run."""
    source = folder_source(write_repo(tmp_path, files), ["calc"], ["tests"], name="calc")
    synthesizer = Synthesizer(source, SynthesisSettings(count=1, seed=0, **settings), sandboxes, log=print)
    synthesizer.run_clean()
    return synthesizer


# --- pure parts -------------------------------------------------------------------------------------------------


def test_failure_section_is_the_traceback_without_summaries() -> None:
    output = ("F                                                        [100%]\n"
              "=================================== FAILURES ===================================\n"
              "___ test_b ___\ntest_six.py:3: in test_b\n    assert f() == 1\nE   AssertionError\n"
              "=========================== short test summary info ============================\n"
              "FAILED test_six.py::test_b - AssertionError\n1 failed in 0.12s\n")
    assert failure_section(output) == ("___ test_b ___\ntest_six.py:3: in test_b\n    assert f() == 1\n"
                                       "E   AssertionError")
    # the header cut off by the output cap: what comes before the summary
    assert failure_section("E   ValueError\n==== short test summary info ====\n") == "E   ValueError"


# --- the keep/drop rules on real sandboxes --------------------------------------------------------------------


def test_a_caught_bug_is_kept_with_its_tests(tmp_path: Path, sandboxes: dict[str, KernelSandbox]) -> None:
    synthesizer = ready_synthesizer(tmp_path, sandboxes)
    judgement = synthesizer.judge(with_ops(b"min(x, hi)", b"min(x, hi - 1)"))
    assert judgement.kept
    assert judgement.fail_to_pass == ("tests/test_ops.py::test_clamp[11-10]",)
    assert judgement.pass_to_pass == tuple(test for test in CLEAN_PASSING if test not in judgement.fail_to_pass)


def test_a_bug_no_test_catches_is_dropped(tmp_path: Path, sandboxes: dict[str, KernelSandbox]) -> None:
    synthesizer = ready_synthesizer(tmp_path, sandboxes)
    judgement = synthesizer.judge(with_ops(b"return x + 1", b"return x - 1"))
    assert not judgement.kept
    assert judgement.reason == "no test fails with the bug and passes without it"


def test_a_flaky_test_is_in_neither_list(tmp_path: Path, sandboxes: dict[str, KernelSandbox]) -> None:
    files = {**REPO, "tests/test_flaky.py": FLAKY}
    synthesizer = ready_synthesizer(tmp_path, sandboxes, files)
    judgement = synthesizer.judge(with_ops(b"min(x, hi)", b"min(x, hi - 1)", files))
    assert judgement.kept and judgement.flaky == ("tests/test_flaky.py::test_flaky",)
    assert "tests/test_flaky.py::test_flaky" not in judgement.fail_to_pass + judgement.pass_to_pass
    assert judgement.fail_to_pass == ("tests/test_ops.py::test_clamp[11-10]",)


def test_a_candidate_that_times_out_is_dropped(tmp_path: Path, sandboxes: dict[str, KernelSandbox]) -> None:
    synthesizer = ready_synthesizer(tmp_path, sandboxes, timeout_s=2.0)
    judgement = synthesizer.judge(with_ops(b"n -= 1", b"n += 1"))
    assert not judgement.kept
    assert drop_category(judgement.reason) == "timeout run with the bug"


def test_synthesize_makes_instances_whose_fix_is_the_reverse_of_the_bug(tmp_path: Path,
                                                                         sandboxes: dict[str, KernelSandbox]) -> None:
    files = {path: data for path, data in REPO.items()}
    source = folder_source(write_repo(tmp_path, files), ["calc"], ["tests"], name="calc")
    report = synthesize(source, SynthesisSettings(count=3, seed=0, timeout_s=2.0), sandboxes, log=print)
    assert [instance.difficulty for instance in report.instances] == [1, 2, 3][:len(report.instances)]
    assert report.instances and report.kept_singles >= 1
    for instance in report.instances:
        buggy = apply_patch(files, instance.patch, reverse=True)
        assert buggy != files and instance.base_commit == tree_digest(buggy)
        assert set(instance.FAIL_TO_PASS) | set(instance.PASS_TO_PASS) <= set(CLEAN_PASSING)
        assert instance.patch not in instance.problem_statement
    assert sum(report.dropped.values()) + report.kept_singles >= report.candidates


def test_the_command_line_writes_tasks_read_tasks_reads(tmp_path: Path, sandboxes: dict[str, KernelSandbox],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_repo(tmp_path / "calc", REPO)
    out = tmp_path / "tasks.jsonl"
    code = main(["--path", str(repo), "--source", "calc", "--tests", "tests", "--count", "2", "--seed", "1",
                 "--timeout", "2", "--backends", ",".join(sandboxes), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "single-bug candidates:" in printed and f"wrote 2 instances to {out}" in printed
    tasks = read_tasks(out)
    assert [(task.env, task.family) for task in tasks] == [("SWE", "synthetic")] * 2
    assert tasks[0].metadata["repo_source"] == {"kind": "path", "path": str(repo.resolve()),
                                                "pytest_config": "repository"}
    assert instance_from_task(tasks[0]).FAIL_TO_PASS and tasks[0].answer.startswith("diff --git a/calc/")


def test_the_command_line_says_what_a_folder_lacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--path", str(tmp_path), "--tests", "tests", "--out", str(tmp_path / "x.jsonl")])
    assert code == 2 and "expected --source PKG and --tests PATH with --path" in capsys.readouterr().err


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("bwrap", marks=pytest.mark.bwrap)])
def test_a_pin_with_a_dependency_and_a_src_layout_is_synthesized_in_its_own_environment(
        backend: str, backend_problems: dict[str, str | None]) -> None:
    require_backend(backend, backend_problems)
    source = pin_source("humanize")  # src/humanize; its tests import freezegun; its version is read from metadata
    assert source.environment.package_roots == ("src",) and "freezegun==1.5.5" in source.environment.requirements
    # in the plain sandbox its suite does not even import
    with open_backends([backend]) as plain:
        synthesizer = Synthesizer(source, SynthesisSettings(count=1, seed=0), plain, log=print)
        try:
            with pytest.raises(SynthesisError, match="expected the clean suite of pypi/humanize to run"):
                synthesizer.run_clean()
        finally:
            synthesizer.close()
    with open_backends([backend], environment=source.environment) as sandboxes:
        report = synthesize(source, SynthesisSettings(count=1, seed=0, max_candidates=12), sandboxes, log=print)
    (instance,) = report.instances
    assert instance.difficulty == 1 and instance.FAIL_TO_PASS[0].startswith("tests/")
    # level 3 quotes the failing test's output, run in the environment too: the test ran, nothing failed to import
    test_name = instance.FAIL_TO_PASS[0].split("::")[-1].split("[")[0]
    assert f"_ {test_name}" in instance.problem_statement, instance.problem_statement
    assert not any(error in instance.problem_statement for error in ("ModuleNotFoundError", "ImportError",
                                                                     "PackageNotFoundError"))
    (task,) = report_tasks(source, report)
    assert task.metadata["environment"] == source.environment.to_dict()  # grading runs it there as well


def test_a_repository_the_sandbox_python_already_has_is_refused(sandboxes: dict[str, KernelSandbox]) -> None:
    # six is installed in the sandbox image (Debian's python3-six) and in the host's Python that bwrap runs: its
    # release would be the fix of every bug planted in it
    with pytest.raises(SynthesisError, match=r"sandbox's Python does not have, got .*six"):
        refuse_installed(pin_source("six"), sandboxes)
    refuse_installed(pin_source("parse"), sandboxes)  # not installed: accepted


# --- the bundled splits ---------------------------------------------------------------------------------------


def test_a_sample_of_the_bundled_test_split_still_holds(sandboxes: dict[str, KernelSandbox]) -> None:
    (backend,) = sandboxes
    tasks = load_split("SWE", "test")
    for task in (tasks[0], tasks[-1]):  # parse (no dependency) and face (boltons), each in its own environment
        source = task.metadata["repo_source"]
        try:
            clean = repository_files(PINS[source["name"]])
        except RepoError as error:
            pytest.skip(f"the pinned sdist could not be fetched (is PyPI reachable?): {error}")
        buggy = apply_patch(clean, task.answer, reverse=True)
        assert tree_digest(buggy) == task.metadata["base_commit"]
        tests = list(task.metadata["FAIL_TO_PASS"]) + list(task.metadata["PASS_TO_PASS"])
        environment = RepoEnvironment.from_dict(task.metadata["environment"])
        with open_backends([backend], environment=environment) as own:
            sandbox = own[backend]
            prepare_tree(sandbox, buggy)
            before = run_tests(sandbox, tests, timeout_s=120.0)
            assert before.ok, before.detail
            assert not any(before.passed(test) for test in task.metadata["FAIL_TO_PASS"])
            assert all(before.passed(test) for test in task.metadata["PASS_TO_PASS"])
            prepare_tree(sandbox, apply_patch(buggy, task.answer))
            after = run_tests(sandbox, tests, timeout_s=120.0)
            assert after.ok and all(after.passed(test) for test in tests), json.dumps(after.to_dict())[:500]
