"""Tests of the bundled PythonSandbox splits (tasks.splits, tasks.build_splits).

The regeneration tests are the guard that a change to a generator cannot silently alter the
benchmark: if one fails, either revert the change or bump the generator's GENERATOR_VERSION and
rebuild with ``python -m tasks.build_splits``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tasks import (
    SplitIntegrityError,
    Task,
    UnknownTaskError,
    available_splits,
    build_splits,
    generate_code_tasks,
    generate_math_tasks,
    load_split,
)
from tasks import splits as splits_module
from tasks.build_splits import check_bundled, main
from tasks.python_bundled import SPLIT_SIZES, build_python_sandbox_splits
from tasks.splits import MANIFEST_NAME, bundle_manifest, write_bundle

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "tasks" / "data" / "python_sandbox"


@pytest.fixture(scope="module")
def fresh_files() -> dict[str, bytes]:
    """The split files as a rebuild in this process produces them."""
    return build_python_sandbox_splits()


@pytest.fixture(scope="module")
def all_tasks() -> dict[str, list[Task]]:
    return {split: load_split("PythonSandbox", split) for split in SPLIT_SIZES}


def test_available_splits() -> None:
    splits = ["dev", "test", "train"]
    assert available_splits() == {"DataAnalysis": splits, "PythonSandbox": splits, "SWE": splits, "Search": splits,
                                  "WebShop": splits}


def test_sizes_families_and_levels(all_tasks: dict[str, list[Task]]) -> None:
    for split, tasks in all_tasks.items():
        assert len(tasks) == SPLIT_SIZES[split]
        assert Counter(t.family for t in tasks) == {"math": len(tasks) // 2, "code": len(tasks) // 2}
        assert Counter(t.difficulty for t in tasks) == {level: len(tasks) // 5 for level in range(1, 6)}
        assert {t.env for t in tasks} == {"PythonSandbox"}


def test_family_filter() -> None:
    code = load_split("PythonSandbox", "dev", family="code")
    assert len(code) == 50 and {t.family for t in code} == {"code"}


def test_ids_unique_and_splits_disjoint_by_prompt(all_tasks: dict[str, list[Task]]) -> None:
    ids = [t.id for tasks in all_tasks.values() for t in tasks]
    assert len(ids) == len(set(ids))
    prompts = {split: {t.prompt for t in tasks} for split, tasks in all_tasks.items()}
    assert all(len(prompts[split]) == SPLIT_SIZES[split] for split in prompts)
    assert not prompts["train"] & prompts["dev"]
    assert not prompts["train"] & prompts["test"]
    assert not prompts["dev"] & prompts["test"]


def test_bundled_files_match_the_manifest() -> None:
    manifest = json.loads((BUNDLED / MANIFEST_NAME).read_text())
    assert manifest["env"] == "PythonSandbox"
    for split, entry in manifest["splits"].items():
        data = (BUNDLED / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], split
        assert data.count(b"\n") == entry["count"] == SPLIT_SIZES[split]


def test_bundled_files_match_a_fresh_regeneration(fresh_files: dict[str, bytes]) -> None:
    assert sorted(fresh_files) == sorted(p.name for p in BUNDLED.iterdir())
    assert check_bundled(fresh_files, BUNDLED) == []


_BATCH_SCRIPT = """
from tasks import generate_code_tasks, generate_math_tasks
for task in generate_math_tasks(30, seed=8, split="x") + generate_code_tasks(30, seed=8, split="x"):
    print(task.to_json())
"""


def test_generation_is_identical_in_another_process() -> None:
    # A different string-hash seed in a fresh interpreter must give the same bytes.
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", _BATCH_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    here = generate_math_tasks(30, seed=8, split="x") + generate_code_tasks(30, seed=8, split="x")
    assert result.stdout == "".join(task.to_json() + "\n" for task in here)


def test_check_reports_a_changed_file(fresh_files: dict[str, bytes], tmp_path: Path) -> None:
    shutil.copytree(BUNDLED, tmp_path, dirs_exist_ok=True)
    lines = (tmp_path / "dev.jsonl").read_text().splitlines(keepends=True)
    record = json.loads(lines[3])
    record["answer"] = "tampered"
    lines[3] = json.dumps(record, sort_keys=True) + "\n"
    (tmp_path / "dev.jsonl").write_text("".join(lines))
    (tmp_path / "test.jsonl").unlink()
    problems = check_bundled(fresh_files, tmp_path)
    assert problems[0].startswith("dev.jsonl: 1 of 100 lines differ, first at line 4")
    assert problems[1].startswith("test.jsonl: missing")


def test_main_writes_and_checks(
    fresh_files: dict[str, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(build_splits, "build_files", lambda manifest: fresh_files)  # skip rebuilds
    assert main(["--env", "PythonSandbox", "--out", str(tmp_path)]) == 0
    assert check_bundled(fresh_files, tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in BUNDLED.iterdir())
    (tmp_path / "train.jsonl").write_bytes(b"")
    assert main(["--check", "--env", "PythonSandbox", "--out", str(tmp_path)]) == 1
    assert "train.jsonl: 0 of 400 lines differ" in capsys.readouterr().err


@pytest.fixture
def tampered_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the data folder, with one character of dev.jsonl changed, served as the package data."""
    folder = tmp_path / "python_sandbox"
    shutil.copytree(BUNDLED, folder)
    data = (folder / "dev.jsonl").read_text()
    (folder / "dev.jsonl").write_text(data.replace('"difficulty": 1', '"difficulty": 2', 1))
    monkeypatch.setattr(splits_module, "_data_root", lambda: tmp_path)
    return folder


def test_integrity_error_names_the_file_and_both_hashes(tampered_root: Path) -> None:
    expected = json.loads((tampered_root / MANIFEST_NAME).read_text())["splits"]["dev"]["sha256"]
    actual = hashlib.sha256((tampered_root / "dev.jsonl").read_bytes()).hexdigest()
    with pytest.raises(SplitIntegrityError) as caught:
        load_split("PythonSandbox", "dev")
    assert "python_sandbox/dev.jsonl" in str(caught.value)
    assert expected in str(caught.value) and actual in str(caught.value)
    assert len(load_split("PythonSandbox", "dev", verify=False)) == 100
    assert len(load_split("PythonSandbox", "test")) == 100  # untouched files still verify


@pytest.mark.parametrize(
    ("env", "split", "family", "message"),
    [
        ("Shopping", "test", None, "among ['DataAnalysis', 'PythonSandbox', 'SWE', 'Search', 'WebShop'], "
                                        "got 'Shopping'"),
        ("PythonSandBox", "test", None, "did you mean 'PythonSandbox'"),
        ("PythonSandbox", "validation", None, "among ['dev', 'test', 'train'], got 'validation'"),
        ("PythonSandbox", "tset", None, "did you mean 'test'"),
        ("PythonSandbox", "test", "maths", "among ['code', 'math'], got 'maths'; did you mean 'math'"),
    ],
)
def test_unknown_names_list_what_exists(env: str, split: str, family: str | None, message: str) -> None:
    with pytest.raises(UnknownTaskError) as caught:
        load_split(env, split, family=family)
    assert message in str(caught.value)


def test_a_bundle_of_ones_own_loads_from_its_folder(tmp_path: Path) -> None:
    mine = load_split("PythonSandbox", "dev")[:6]
    written = write_bundle(tmp_path / "mine", "PythonSandbox", {"small": mine, "smaller": mine[:2]},
                           manifest={"generator_versions": {"hand": 1}})
    assert load_split("PythonSandbox", "small", splits_dir=tmp_path / "mine") == mine
    assert load_split("PythonSandbox", "smaller", splits_dir=str(tmp_path / "mine"), family="math") == \
        [task for task in mine[:2] if task.family == "math"]
    assert bundle_manifest("PythonSandbox", splits_dir=tmp_path / "mine") == written
    assert written["splits"]["small"]["count"] == 6
    assert len(load_split("PythonSandbox", "dev")) == 100  # the installed bundle is untouched


def test_a_split_of_ones_own_bundle_is_verified(tmp_path: Path) -> None:
    write_bundle(tmp_path, "PythonSandbox", {"small": load_split("PythonSandbox", "dev")[:3]})
    data = (tmp_path / "small.jsonl").read_text()
    (tmp_path / "small.jsonl").write_text(data.replace('"difficulty": 1', '"difficulty": 2', 1))
    with pytest.raises(SplitIntegrityError, match=r"small\.jsonl: expected sha256"):
        load_split("PythonSandbox", "small", splits_dir=tmp_path)


@pytest.mark.parametrize(("layout", "message"), [
    # a folder without a manifest, e.g. the parent of the bundle
    ("empty", "expected a folder holding a split bundle's MANIFEST.json"),
    # another environment's bundle
    ("search", "expected a bundle of PythonSandbox"),
])
def test_a_wrong_splits_dir_says_what_it_expected(tmp_path: Path, layout: str, message: str) -> None:
    if layout == "search":
        write_bundle(tmp_path, "Search", {"dev": load_split("Search", "dev")[:2]})
    with pytest.raises(UnknownTaskError, match=message):
        load_split("PythonSandbox", "dev", splits_dir=tmp_path)


def test_an_unknown_split_of_ones_own_bundle_lists_its_splits(tmp_path: Path) -> None:
    write_bundle(tmp_path, "PythonSandbox", {"small": load_split("PythonSandbox", "dev")[:2]})
    with pytest.raises(UnknownTaskError, match=r"among \['small'\], got 'dev'"):
        load_split("PythonSandbox", "dev", splits_dir=tmp_path)


def test_read_tasks_round_trips_a_jsonl_file_and_names_a_bad_line(tmp_path):
    from tasks import TaskError, read_tasks

    tasks = load_split("WebShop", "dev")[:3]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(task.to_json() + "\n" for task in tasks) + "\n")
    assert read_tasks(path) == tasks
    path.write_text(tasks[0].to_json() + "\n{\"id\": 1}\n")
    with pytest.raises(TaskError, match=r"tasks.jsonl:2: expected a task"):
        read_tasks(path)
