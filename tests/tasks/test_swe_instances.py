"""Candidate bugs, SWE-bench instances and their tasks, the SWE-bench loader, and the command line."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import subprocess
from pathlib import Path

import pytest

from tasks.errors import TaskError
from tasks.records import Task
from tasks.swe.__main__ import main
from tasks.swe.instances import (
    SWEInstance,
    as_test_ids,
    difficulty_of,
    instance_from_task,
    load_swebench,
    load_swesmith,
    make_instance,
    pypi_source,
    read_instances,
    tree_digest,
    with_pin_environment,
    write_instances,
)
from tasks.swe.keep import judge_candidate
from tasks.swe.mutations import find_sites
from tasks.swe.patches import apply_patch, diff_trees
from tasks.swe.repos import PINS, folder_files
from tasks.swe.synthesis import Bug, bug_candidates, plant
from tasks.swe.testrun import TestRun

REPO = {
    "calc/__init__.py": b"from calc.ops import half, clamp\n",
    "calc/ops.py": b"def half(x):\n    return x // 2\n\n\ndef clamp(x, top):\n    if x > top:\n        return top\n"
                   b"    return x\n",
    "tests/test_ops.py": b"from calc import half, clamp\n\n\ndef test_half():\n    assert half(4) == 2\n\n\n"
                         b"def test_clamp():\n    assert clamp(5, 3) == 3\n",
}
LIBRARY = ["calc/__init__.py", "calc/ops.py"]


def test_bug_candidates_are_deterministic_and_reversible() -> None:
    first = list(bug_candidates(REPO, LIBRARY, random.Random(1)))
    assert first == list(bug_candidates(REPO, LIBRARY, random.Random(1)))
    assert first and all(path == "calc/ops.py" for bug in first for path in bug.paths)  # tests never mutated
    for bug in first:
        buggy = bug.buggy_tree(REPO)
        assert buggy != REPO and apply_patch(buggy, bug.fix_patch) == REPO
        assert apply_patch(REPO, bug.fix_patch, reverse=True) == buggy


def test_several_bugs_are_in_different_functions() -> None:
    for bug in itertools.islice(bug_candidates(REPO, LIBRARY, random.Random(2), bugs=2), 5):
        assert sorted(bug.functions) == ["clamp", "half"]
        both = bug.buggy_tree(REPO)
        for one in bug.sites:  # each bug is in the patch: planting one alone gives another tree
            assert plant(REPO, [one]).buggy_tree(REPO) not in (REPO, both)
    assert list(bug_candidates(REPO, LIBRARY, random.Random(2), bugs=3)) == []  # only two functions
    with pytest.raises(TaskError, match="at least 1 bug"):
        next(bug_candidates(REPO, LIBRARY, random.Random(2), bugs=0))


def kept_judgement():
    clean = TestRun("ok", {"tests/test_ops.py::test_half": "passed", "tests/test_ops.py::test_clamp": "passed"})
    buggy = TestRun("ok", {"tests/test_ops.py::test_half": "failed", "tests/test_ops.py::test_clamp": "passed"})
    return judge_candidate((clean, clean), (buggy, buggy))


def half_bug() -> Bug:
    """``x // 2`` -> ``x / 2`` in ``calc.ops.half``."""
    (site,) = find_sites(REPO["calc/ops.py"].decode(), operators=["change_arithmetic"])
    return plant(REPO, [("calc/ops.py", site)])


def planted_instance(level: int = 2) -> tuple[SWEInstance, dict[str, bytes]]:
    output = "E   assert 2.5 == 2\n"
    return make_instance(PINS["toolz"], REPO, half_bug(), kept_judgement(), level=level, failing_output=output), REPO


def test_a_planted_instance() -> None:
    instance, files = planted_instance()
    buggy = apply_patch(files, instance.patch, reverse=True)
    assert instance.base_commit == tree_digest(buggy) and len(instance.base_commit) == 40
    assert instance.FAIL_TO_PASS == ("tests/test_ops.py::test_half",)
    assert instance.PASS_TO_PASS == ("tests/test_ops.py::test_clamp",)
    assert instance.test_patch == "" and instance.repo == "pypi/toolz" and instance.difficulty == 2
    assert "`calc.ops.half`" in instance.problem_statement and "//" not in instance.problem_statement
    assert instance.instance_id.startswith("toolz__toolz-1.2.0-")
    assert planted_instance()[0] == instance  # deterministic


def test_a_planted_task_gets_its_pins_environment_unless_it_has_one() -> None:
    instance, _ = planted_instance()
    task = instance.to_task(pypi_source(PINS["face"]), family="synthetic")
    environment = with_pin_environment(task).metadata["environment"]  # fetches face's sdist (cached)
    assert (environment["repo"], environment["requirements"]) == ("pypi/face", ["boltons==26.2.0"])
    own = dataclasses.replace(task, metadata={**task.metadata, "environment": {"repo": "me/mine"}})
    assert with_pin_environment(own) is own  # the synthesizer's record is kept as it is


def test_a_dropped_bug_makes_no_instance() -> None:
    clean = TestRun("ok", {"t.py::a": "passed"})
    with pytest.raises(TaskError, match="dropped: no test fails with the bug"):
        make_instance(PINS["toolz"], REPO, half_bug(), judge_candidate((clean, clean), (clean, clean)), level=1)


def test_instance_and_task_round_trip(tmp_path) -> None:
    instance, _ = planted_instance()
    task = instance.to_task(pypi_source(PINS["toolz"]), family="synthetic")
    assert (task.env, task.family, task.prompt, task.answer) == ("SWE", "synthetic", instance.problem_statement,
                                                                 instance.patch)
    assert task.metadata["FAIL_TO_PASS"] == ["tests/test_ops.py::test_half"]  # lists in a task
    assert task.metadata["repo_source"] == {"kind": "pypi", "name": "toolz", "version": "1.2.0",
                                            "sha256": PINS["toolz"].sha256}
    assert instance_from_task(Task.from_dict(json.loads(task.to_json()))) == instance
    write_instances([instance], tmp_path / "instances.jsonl")
    record = json.loads((tmp_path / "instances.jsonl").read_text())
    assert record["FAIL_TO_PASS"] == '["tests/test_ops.py::test_half"]'  # JSON strings in a file, as SWE-bench
    assert read_instances(tmp_path / "instances.jsonl") == [instance]


@pytest.mark.parametrize(("level", "bugs", "difficulty"), [(3, 1, 1), (2, 1, 2), (1, 1, 3), (1, 3, 5), (1, 9, 5)])
def test_difficulty(level: int, bugs: int, difficulty: int) -> None:
    assert difficulty_of(level, bugs) == difficulty


def swebench_file(tmp_path, repo_folder, *, as_list: bool) -> tuple:
    """A local repository with a bug, and a SWE-bench instance file for it (its gold patch fixes the bug)."""
    for path, data in REPO.items():
        (repo_folder / path).parent.mkdir(parents=True, exist_ok=True)
        (repo_folder / path).write_bytes(data.replace(b"x // 2", b"x // 3"))
    fixed = {**folder_files(repo_folder), "calc/ops.py": REPO["calc/ops.py"]}
    record = {"instance_id": "local__calc-1", "repo": "local/calc", "base_commit": "0" * 40,
              "problem_statement": "half(4) is not 2", "patch": diff_trees(folder_files(repo_folder), fixed),
              "test_patch": "", "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_half"]),
              "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp"]), "version": "0.1",
              "created_at": "2024-01-01T00:00:00Z", "hints_text": "", "environment_setup_commit": "0" * 40}
    path = tmp_path / ("instances.json" if as_list else "instances.jsonl")
    path.write_text(json.dumps([record]) if as_list else json.dumps(record) + "\n")
    return path, fixed


@pytest.mark.parametrize("as_list", [False, True])
def test_load_swebench_from_a_local_repository(tmp_path, as_list: bool) -> None:
    folder = tmp_path / "calc"
    path, fixed = swebench_file(tmp_path, folder, as_list=as_list)
    (task,) = load_swebench(path, repository=folder)
    assert (task.id, task.env, task.family) == ("local__calc-1", "SWE", "swebench")
    assert task.metadata["FAIL_TO_PASS"] == ["tests/test_ops.py::test_half"]
    assert task.metadata["repo_source"] == {"kind": "path", "path": str(folder.resolve())}
    assert apply_patch(folder_files(task.metadata["repo_source"]["path"]), task.answer) == fixed  # the fix applies
    (by_repo,) = load_swebench(path, repository={"local/calc": str(folder)})
    assert by_repo == task
    (imaged,) = load_swebench(path, image="sweb.eval.x86_64.{instance_id}:latest")
    assert imaged.metadata["repo_source"] == {"kind": "image", "image": "sweb.eval.x86_64.local__calc-1:latest"}


def test_load_swebench_errors(tmp_path) -> None:
    path, _ = swebench_file(tmp_path, tmp_path / "calc", as_list=False)
    with pytest.raises(TaskError, match=r"expected where the repository of .* is: .* got none"):
        load_swebench(path)
    with pytest.raises(TaskError, match="expected a folder for repo 'local/calc'"):
        load_swebench(path, repository={"other/repo": str(tmp_path)})
    with pytest.raises(TaskError, match="not a folder"):
        load_swebench(path, repository=tmp_path / "missing")
    (tmp_path / "bad.jsonl").write_text('{"instance_id": "x", "repo": "r"}\n')
    with pytest.raises(TaskError, match="record 1: expected SWE-bench instance fields"):
        load_swebench(tmp_path / "bad.jsonl", repository=tmp_path)
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    with pytest.raises(TaskError, match=r"broken\.jsonl:1: expected one JSON instance a line"):
        read_instances(tmp_path / "broken.jsonl")


@pytest.mark.parametrize("fail_to_pass", ["[]", "", None, []])
def test_an_instance_without_fail_to_pass_is_refused_at_load_naming_it(tmp_path, fail_to_pass) -> None:
    # SWE-bench would count a no-op resolved; the strict rules could not score it: a broken task, not an episode
    path, _ = swebench_file(tmp_path, tmp_path / "calc", as_list=False)
    record = json.loads(path.read_text())
    path.write_text(json.dumps(record) + "\n" + json.dumps({**record, "instance_id": "local__calc-2",
                                                            "FAIL_TO_PASS": fail_to_pass}) + "\n")
    with pytest.raises(TaskError, match=r"instances\.jsonl: expected every instance to name at least one "
                                        r"FAIL_TO_PASS test .*got none for local__calc-2; drop them"):
        load_swebench(path, repository=tmp_path / "calc")
    assert [instance.FAIL_TO_PASS for instance in read_instances(path)][1] == ()  # reading alone is fine


@pytest.mark.parametrize(("value", "expected"), [
    ('["a.py::t", "b.py::u[1]"]', ("a.py::t", "b.py::u[1]")),  # SWE-bench's JSON string
    (["a.py::t"], ("a.py::t",)),  # a list
    ("", ()), (None, ()), ("[]", ()),
])
def test_test_id_lists(value, expected) -> None:
    assert as_test_ids(value, "FAIL_TO_PASS") == expected


@pytest.mark.parametrize("value", ["[1, 2]", "not json", 7, {"a": 1}])
def test_bad_test_id_lists(value) -> None:
    with pytest.raises(TaskError, match="FAIL_TO_PASS"):
        as_test_ids(value, "FAIL_TO_PASS")


def test_cli_candidates_for_a_local_repository(tmp_path, capsys) -> None:
    for path, data in REPO.items():
        (tmp_path / "repo" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / path).write_bytes(data)
    out = tmp_path / "bugs.jsonl"
    argv = ["candidates", "--path", str(tmp_path / "repo"), "--source", "calc", "--tests", "tests", "--seed", "3",
            "--count", "4", "--out", str(out)]
    assert main(argv) == 0 and "wrote 4 candidate bugs" in capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4 and all(record["sites"][0]["path"] == "calc/ops.py" for record in records)
    first = out.read_text()
    assert main(argv) == 0 and out.read_text() == first  # the same seed writes the same file
    assert main(["candidates", "--path", str(tmp_path / "repo"), "--seed", "1", "--out", str(out)]) == 2
    assert "expected --source" in capsys.readouterr().err


def test_a_git_repository_gives_each_instance_its_base_commit(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    clone = tmp_path / "calc"
    path, _ = swebench_file(tmp_path, clone, as_list=False)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "buggy"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (clone / "calc" / "ops.py").write_bytes(REPO["calc/ops.py"])
    subprocess.run([*git, "commit", "-qam", "fixed"], check=True)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "base_commit": first}) + "\n"
                    + json.dumps({**record, "instance_id": "local__calc-2", "base_commit": "HEAD"}) + "\n")
    at_bug, at_fix = load_swebench(path, repository=clone)
    assert folder_files(at_bug.metadata["repo_source"]["path"])["calc/ops.py"] != REPO["calc/ops.py"]
    assert folder_files(at_fix.metadata["repo_source"]["path"])["calc/ops.py"] == REPO["calc/ops.py"]
    assert not (Path(at_bug.metadata["repo_source"]["path"]) / ".git").exists()  # a plain tree
    path.write_text(json.dumps({**record, "base_commit": "f" * 40}) + "\n")
    with pytest.raises(TaskError, match=f"expected base_commit '{'f' * 40}' to be a commit of the git repository"):
        load_swebench(path, repository=clone)


def test_load_swesmith_errors_name_the_record(tmp_path) -> None:
    folder = tmp_path / "calc"
    for path, data in REPO.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    bug = diff_trees({"calc/ops.py": REPO["calc/ops.py"]}, {"calc/ops.py": REPO["calc/ops.py"].replace(b"2", b"3")})
    record = {"instance_id": "demo__calc.0a1b2c3d.lm_1", "repo": "demo__calc.0a1b2c3d", "patch": bug,
              "problem_statement": "", "FAIL_TO_PASS": ["tests/test_ops.py::test_half"], "PASS_TO_PASS": []}
    path = tmp_path / "smith.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TaskError, match=r"record 1: expected SWE-smith fields .* got \['problem_statement'\] missing"):
        load_swesmith(path, repository=folder)
    path.write_text(json.dumps({**record, "problem_statement": "half is off", "patch": bug.replace("x // 2", "x")})
                    + "\n")
    with pytest.raises(TaskError, match=r"record 1 \(demo__calc.0a1b2c3d.lm_1\): expected its patch to apply"):
        load_swesmith(path, repository=folder)
    path.write_text(json.dumps({**record, "problem_statement": "half is off"}) + "\n")
    (task,) = load_swesmith(path, repository=folder)
    buggy = apply_patch(folder_files(folder), bug)
    assert apply_patch(buggy, task.answer) == folder_files(folder)  # the reference fix is the bug's patch reversed
    assert task.metadata["repo_source"] == {"kind": "path", "path": str(folder.resolve()), "planted": True}
