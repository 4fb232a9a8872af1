"""SWE-v0's grading on the real backends, on SWE-bench-format tasks over a tiny repository in a folder: nothing that
goes wrong while grading escapes ``step`` (an invalid run, scored 0, that says why in its observation and in
``info["grading"]``), and ``rules="swebench"`` grades as SWE-bench's harness does."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.policies.base import tool_call_action
from agentgym_envs.runner import Episode, TurnRecord, record_step
from agentgym_envs.swe import SWEEnv
from agentgym_envs.swe.__main__ import main as validate_command
from agentgym_envs.swe.probes import PATCH_PYTEST
from benchmarks.evaluate import invalid_lines, summarize
from tasks import Task
from tasks.swe.instances import SWEInstance, load_swebench, load_swesmith
from tasks.swe.patches import diff_trees
from tests.agentgym_envs.swe.conftest import CLAMP_BUG, OPS, REPO, TESTS, changed
from tests.conftest import require_backend

MORE_TESTS = b'''import pytest

from calc import clamp


@pytest.mark.parametrize("label, x, expected", [("in range", 5, 5), ("above top", 11, 10)])
def test_labelled(label, x, expected):
    assert clamp(x, 0, 10) == expected


@pytest.mark.xfail(reason="clamp does not let values through")
def test_known_bug():
    assert clamp(-1, 0, 10) == -1


@pytest.mark.skip(reason="not on this platform")
def test_skipped():
    assert False
'''
"""Ids with spaces, an xfail and a skip: where SWE-bench's rules and the strict ones part."""

BUGGY = changed(REPO, {"calc/ops.py": CLAMP_BUG, "tests/test_more.py": MORE_TESTS})
"""The repository at the tasks' base commit: ``clamp`` cuts at ``hi - 1``."""

MOVED_ON = changed(BUGGY, {"tests/test_ops.py": TESTS.replace(b"== expected\n", b"== expected, x\n")})
"""The same repository a commit later: its last test line changed, so the task's test_patch no longer applies."""

TEST_PATCH = diff_trees({"tests/test_ops.py": TESTS},
                        {"tests/test_ops.py": TESTS + b"\n\ndef test_add_more():\n    assert add(1, 1) == 2\n"})
FIX = diff_trees({"calc/ops.py": CLAMP_BUG}, {"calc/ops.py": OPS})
FIX_COMMAND = "sed -i 's/hi - 1/hi/' calc/ops.py"
STRICT_IDS = (["tests/test_ops.py::test_clamp[11-10]"],
              ["tests/test_ops.py::test_add", "tests/test_ops.py::test_clamp[5-5]"])
CUT_IDS = (["tests/test_more.py::test_labelled[above", "tests/test_ops.py::test_clamp[11-10]"],
           ["tests/test_more.py::test_labelled[in", "tests/test_more.py::test_known_bug",
            "tests/test_more.py::test_skipped", "tests/test_ops.py::test_add"])
"""SWE-bench's ids: cut at the first space, and an xfail and a skip among PASS_TO_PASS."""
ALL_IDS = {*STRICT_IDS[0], *STRICT_IDS[1], *CUT_IDS[0], *CUT_IDS[1]}
TEST_TIMEOUT_S = 5.0


def write_folder(folder: Path, files: Mapping[str, bytes]) -> Path:
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


def calc_task(instance_id: str, folder: Path, ids: tuple[list[str], list[str]], test_patch: str = "") -> Task:
    """A SWE-bench-format instance of the clamp bug, loaded as load_swebench loads one from a folder."""
    instance = SWEInstance(instance_id=instance_id, repo="demo/calc", base_commit="c0ffee", patch=FIX,
                           problem_statement="clamp(11, 0, 10) returns 9; it should return 10.",
                           test_patch=test_patch, FAIL_TO_PASS=tuple(ids[0]), PASS_TO_PASS=tuple(ids[1]))
    return instance.to_task({"kind": "path", "path": str(folder)})


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    at_base = write_folder(tmp_path_factory.mktemp("calc"), BUGGY)
    moved_on = write_folder(tmp_path_factory.mktemp("calc-moved-on"), MOVED_ON)
    return {"strict": calc_task("calc-1", at_base, STRICT_IDS),
            "cut": calc_task("calc-2", at_base, CUT_IDS),
            "wrong_commit": calc_task("calc-3", moved_on, STRICT_IDS, test_patch=TEST_PATCH)}


@pytest.fixture(scope="module", params=[pytest.param("docker", marks=pytest.mark.docker),
                                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def backend(request: pytest.FixtureRequest, backend_problems: dict[str, str | None]) -> str:
    require_backend(request.param, backend_problems)
    return request.param


@pytest.fixture(scope="module")
def env(backend: str, tasks: dict[str, Task]) -> Iterator[SWEEnv]:
    """A strict env per backend, over every task."""
    made = SWEEnv(tasks=list(tasks.values()), sandbox=backend, test_timeout_s=TEST_TIMEOUT_S)
    yield made
    made.close()


def submit_after(env: SWEEnv, task: Task, *commands: str) -> tuple[str, float, bool, bool, dict]:
    """Reset on ``task``, run the bash commands, submit; the submit step."""
    env.reset(seed=0, options={"task": task.id})
    for command in commands:
        env.step(tool_call_action("bash", command=command))
    return env.step(tool_call_action("submit"))


def assert_invalid(step: tuple[str, float, bool, bool, dict], reason: str) -> dict:
    """The step ended the episode as an invalid run of ``reason``, said in its observation; its info."""
    observation, reward, terminated, truncated, info = step
    assert (reward, terminated, truncated, info["infra_error"]) == (0.0, True, False, False)
    assert info["reward_components"]["outcome/invalid"] == 1.0
    assert (info["grading"]["valid"], info["grading"]["reason"]) == (False, reason)
    assert f"The grading run was invalid ({reason}: " in observation
    assert not [test_id for test_id in ALL_IDS if test_id in observation]  # the run's detail stays in info
    return info


def test_a_fix_resolves_and_says_its_run_was_valid(env, tasks):
    _, reward, terminated, _, info = submit_after(env, tasks["strict"], FIX_COMMAND)
    assert (reward, terminated, info["reward_components"]["outcome/invalid"]) == (1.0, True, 0.0)
    assert info["grading"] | {"duration_s": 0} == {"valid": True, "status": "ok", "reason": "", "detail": "",
                                                  "exit_code": 0, "duration_s": 0, "tests": 3, "runner": "pytest",
                                                  "tamper_checked": True}


def test_a_folder_at_the_wrong_commit_is_an_invalid_run_not_an_exception(env, tasks):
    # issue 30: load and reset pass, then the test_patch does not apply at grading (it raised PatchError out of step)
    step = submit_after(env, tasks["wrong_commit"], FIX_COMMAND)
    info = assert_invalid(step, "test_patch")
    assert "(a folder at another commit than base_commit?)" in step[0]  # the reason; the detail only in info
    assert info["grading"]["detail"].startswith("expected the task's test_patch to apply to its repository at "
                                                "base_commit c0ffee")
    episode = Episode(env_id="agentrl/SWE-v0", task_id="calc-3", group=0, turns=[TurnRecord(action="submit")])
    record_step(episode, step)  # as the episode runner records it
    result = summarize("oracle", "swe", "scripted", [episode], samples=1, ks=(1,))
    # benchmarks.evaluate counts it apart from wrong answers, with its reason
    assert (result.scored, result.invalid, result.invalid_reasons) == (1, 1, {"test_patch": 1})
    assert invalid_lines([result]) == ["oracle · swe: 1 of 1 scored episodes had an invalid verifier run (unsolved, "
                                       "not a wrong answer): test_patch 1"]


def test_a_library_that_runs_out_of_memory_is_an_invalid_run_of_reason_memory(env, tasks):
    info = assert_invalid(submit_after(env, tasks["strict"], "sed -i '1i _HOG = bytearray(8 * 1024 ** 3)' calc/ops.py"),
                          "memory")
    assert info["grading"]["detail"].startswith("the test run ran out of memory (collection errors in")


def test_a_suite_that_starts_many_threads_fits_the_default_memory(env, tasks):
    # the limit caps address space, and each thread's malloc arena reserved 64 MB of it: 32 threads ended such a
    # run at 1024 MB (MemoryError on docker, "can't start new thread" on bwrap) until MALLOC_ARENA_MAX=2
    threads = ("printf 'import concurrent.futures as _cf\\nwith _cf.ThreadPoolExecutor(48) as _pool:\\n"
               "    list(_pool.map(lambda i: bytearray(200000), range(400)))\\n' >> calc/__init__.py")
    _, reward, _, _, info = submit_after(env, tasks["strict"], FIX_COMMAND, threads)
    assert (reward, info["grading"]["valid"]) == (1.0, True), info["grading"]


def test_a_collection_error_and_a_timeout_name_their_reasons(env, tasks):
    info = assert_invalid(submit_after(env, tasks["strict"], "echo 'def broken(:' >> calc/ops.py"), "collection_error")
    assert info["grading"]["detail"].startswith("collection errors in tests/test_ops.py")
    endless = "sed -i 's/    return a + b/    while True:\\n        pass/' calc/ops.py"
    info = assert_invalid(submit_after(env, tasks["strict"], endless), "timeout")
    assert (info["grading"]["status"], info["grading"]["exit_code"]) == ("timeout", None)
    assert TEST_TIMEOUT_S <= info["grading"]["duration_s"] < TEST_TIMEOUT_S + 5


def test_a_tampered_run_says_why_and_names_its_tests_only_in_info(env, tasks):
    info = assert_invalid(submit_after(env, tasks["strict"], f"printf '\\n%s\\n' {shlex.quote(PATCH_PYTEST)} >> "
                                                             "calc/ops.py"), "tampered")
    assert "tests/test_ops.py::test_clamp[11-10]: the call phase raised but its report says passed" in \
        info["grading"]["detail"]


def test_an_internal_error_of_the_grader_is_an_invalid_run(env, tasks, monkeypatch, caplog):
    def broken_runner(*args: object, **kwargs: object) -> None:
        raise KeyError("exitstatus")

    monkeypatch.setattr("agentgym_envs.swe.env.run_tests", broken_runner)
    info = assert_invalid(submit_after(env, tasks["strict"], FIX_COMMAND), "grader_error")
    assert info["grading"]["detail"] == "KeyError: 'exitstatus'"
    assert "SWE grading of task calc-1 failed" in caplog.text  # and its traceback is logged


def test_swebench_ids_are_not_reported_under_the_strict_rules(env, tasks):
    info = assert_invalid(submit_after(env, tasks["cut"], FIX_COMMAND), "not_reported")
    labelled = "tests/test_more.py::test_labelled"
    assert info["grading"]["detail"] == f"2 requested tests were not reported: {labelled}[above, {labelled}[in"


def test_swebench_rules_resolve_as_swebench_does(backend, tasks):
    made = SWEEnv(tasks=[tasks["cut"], tasks["strict"]], sandbox=backend, rules="swebench")
    try:
        assert made.card.settings["rules"] == "swebench"
        # the cut ids find their tests; the xfail and the skip keep their PASS_TO_PASS places
        _, reward, _, _, info = submit_after(made, tasks["cut"], FIX_COMMAND)
        assert (reward, info["grading"]["valid"], info["grading"]["tests"]) == (1.0, True, 6)
        assert (info["reward_components"]["outcome/f2p_passed"], info["reward_components"]["outcome/p2p_passed"]) \
            == (2.0, 4.0)
        _, reward, _, _, info = submit_after(made, tasks["cut"], "touch notes.txt")  # no fix: both still fail
        assert (reward, info["grading"]["valid"], info["reward_components"]["outcome/f2p_passed"]) == (0.0, True, 0.0)
        assert info["reward_components"]["outcome/p2p_passed"] == 4.0
    finally:
        made.close()


def test_a_swe_smith_instance_plants_its_bug_and_the_fix_resolves(backend, tmp_path):
    # SWE-smith's patch introduces the bug into the clean repository; there is no test_patch
    clean = write_folder(tmp_path / "calc", REPO)
    record = {"instance_id": "demo__calc.c0ffee12.func_pm_op__1", "repo": "demo__calc.c0ffee12",
              "patch": diff_trees({"calc/ops.py": OPS}, {"calc/ops.py": CLAMP_BUG}),
              "problem_statement": "clamp(11, 0, 10) returns 9; it should return 10.",
              "FAIL_TO_PASS": STRICT_IDS[0], "PASS_TO_PASS": STRICT_IDS[1], "image_name": "jyangballin/swesmith.x"}
    path = tmp_path / "smith.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert validate_command(["validate", str(path), "--repository", str(clean), "--sandbox", backend,
                             "--format", "swe-smith"]) == 0
    (task,) = load_swesmith(path, repository=clean)
    assert task.metadata["validation"]["usable"] is True
    assert (task.metadata["base_commit"], task.metadata["test_patch"], task.metadata["format"]) == (
        "c0ffee12", "", "swe-smith")
    made = SWEEnv(tasks=[task], sandbox=backend, test_timeout_s=TEST_TIMEOUT_S)
    try:
        assert made.repository_tree(task)["calc/ops.py"] == CLAMP_BUG  # the bug is planted
        assert submit_after(made, task, FIX_COMMAND)[1] == 1.0
        _, reward, _, _, info = submit_after(made, task, "touch notes.txt")
        assert (reward, info["grading"]["valid"], info["reward_components"]["outcome/f2p_passed"]) == (0.0, True, 0.0)
    finally:
        made.close()


@pytest.mark.bwrap
def test_an_environment_that_does_not_build_is_reported_as_install_failed(tmp_path, backend_problems):
    require_backend("bwrap", backend_problems)
    folder = write_folder(tmp_path / "calc", BUGGY)
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps(SWEInstance(instance_id="calc-9", repo="demo/calc", base_commit="c0ffee", patch=FIX,
                                           problem_statement="clamp", FAIL_TO_PASS=tuple(STRICT_IDS[0]),
                                           PASS_TO_PASS=tuple(STRICT_IDS[1])).to_dict()) + "\n")
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("repositories:\n  demo/calc:\n    '*': {extra_requirements: [agentrl-no-such-package==1.0]}\n")
    assert validate_command(["validate", str(path), "--repository", str(folder), "--sandbox", "bwrap",
                             "--overrides", str(overrides)]) == 1
    verdict = json.loads((tmp_path / "instances.jsonl.validation.json").read_text())["instances"]["calc-9"]
    assert (verdict["usable"], verdict["reason"]) == (False, "install_failed")
    assert "agentrl-no-such-package==1.0: no release matches" in verdict["detail"]


UNIT_TESTS = b'''import unittest

from calc import add, clamp


class TestOps(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_clamp_top(self):
        self.assertEqual(clamp(11, 0, 10), 10)

    def test_clamp_cases(self):
        for x, expected in [(5, 5), (11, 10)]:
            with self.subTest(x=x):
                self.assertEqual(clamp(x, 0, 10), expected)
'''
"""A unittest suite; a failing subtest fails its test."""


def test_a_unittest_environment_grades_with_unittest_not_tamper_checked(backend, tmp_path):
    folder = write_folder(tmp_path / "calc", {**BUGGY, "tests/__init__.py": b"", "tests/test_unit.py": UNIT_TESTS})
    instance = SWEInstance(instance_id="calc-u", repo="demo/calc", base_commit="c0ffee", patch=FIX,
                           problem_statement="clamp(11, 0, 10) returns 9; it should return 10.",
                           FAIL_TO_PASS=("test_clamp_top (tests.test_unit.TestOps)",  # SWE-bench's Django form
                                         "tests.test_unit.TestOps.test_clamp_cases"),
                           PASS_TO_PASS=("test_add (tests.test_unit.TestOps)",))
    path, overrides = tmp_path / "unit.jsonl", tmp_path / "overrides.yaml"
    path.write_text(json.dumps(instance.to_dict()) + "\n")
    overrides.write_text("repositories:\n  demo/calc:\n    '*': {test_runner: unittest}\n")
    made = SWEEnv(tasks=load_swebench(path, repository=folder, overrides=overrides), sandbox=backend,
                  test_timeout_s=TEST_TIMEOUT_S)
    try:
        _, reward, _, _, info = submit_after(made, made.tasks[0], FIX_COMMAND)
        assert (reward, info["grading"]["runner"], info["grading"]["tamper_checked"]) == (1.0, "unittest", False)
        _, reward, _, _, info = submit_after(made, made.tasks[0], "touch notes.txt")
        assert (reward, info["grading"]["valid"], info["reward_components"]["outcome/f2p_passed"],
                info["reward_components"]["outcome/p2p_passed"]) == (0.0, True, 0.0, 1.0)  # the subtest failed too
        assert_invalid(submit_after(made, made.tasks[0], "echo 'def broken(:' >> calc/ops.py"), "collection_error")
    finally:
        made.close()


def test_a_task_without_fail_to_pass_is_refused_at_construction(tasks):
    task = tasks["strict"]
    empty = Task(id="calc-0", env="SWE", family="swebench", prompt=task.prompt, answer=task.answer,
                 metadata={**task.metadata, "FAIL_TO_PASS": []})
    with pytest.raises(EnvConfigError, match="tasks: expected every instance to name at least one FAIL_TO_PASS test "
                                             r"\(without one a no-op would count as a fix\), got none for calc-0"):
        SWEEnv(tasks=[task, empty], sandbox="local")


def test_a_repository_that_pytest_imports_itself_is_refused_naming_why(tasks):
    task = tasks["strict"]
    pluggy = Task(id="pluggy-1", env="SWE", family="swebench", prompt=task.prompt, answer=task.answer,
                  metadata={**task.metadata, "environment": {"repo": "pytest-dev/pluggy", "dist_name": "pluggy"}})
    with pytest.raises(EnvConfigError, match=r"got \[\('pluggy-1', 'pluggy'\)\]: pytest imports them before the tests "
                                             "run, so the tests would see the sandbox's copy"):
        SWEEnv(tasks=[task, pluggy], sandbox="local")


def test_unknown_rules_are_refused_at_construction(tasks):
    with pytest.raises(EnvConfigError, match="rules: expected one of \\['strict', 'swebench'\\], got 'swe-bench'"):
        SWEEnv(tasks=[tasks["strict"]], sandbox="local", rules="swe-bench")
