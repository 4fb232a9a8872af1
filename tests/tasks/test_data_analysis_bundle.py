"""The bundled DataAnalysis splits: shape, disjointness, and both references recomputed for every task."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewards.data_analysis import field_matches, parse_answer_fields, tables_match
from tasks import load_split
from tasks.build_splits import BUNDLED_ROOT, check_bundled
from tasks.data_analysis import FAMILIES, dataset_files, load_dataset, task_files
from tasks.data_analysis.bundled import SPLIT_SIZES, build_data_analysis_files
from tasks.data_analysis.references import LoadedTables, run_pandas, run_sql, write_files
from tasks.records import Task
from tasks.splits import bundle_manifest

SPLITS = tuple(SPLIT_SIZES)
BUNDLE = BUNDLED_ROOT / "data_analysis"
ALLOWED_IMPORTS = {"json", "sqlite3", "pandas", "decimal"}


@pytest.fixture(scope="module")
def splits() -> dict[str, list[Task]]:
    return {split: load_split("DataAnalysis", split) for split in SPLITS}


@pytest.fixture(scope="module")
def work_dirs(tmp_path_factory: pytest.TempPathFactory, splits: dict[str, list[Task]]) -> dict[str, str]:
    """Each bundled dataset's files under ``<folder>/data``, written once for the module."""
    names = sorted({task.metadata["dataset"] for tasks in splits.values() for task in tasks})
    root = tmp_path_factory.mktemp("datasets")
    return {name: str(write_files(dataset_files(name), root / name)) for name in names}


@pytest.fixture(scope="module")
def loaded() -> Iterator[LoadedTables]:
    """The SQL references' tables, each dataset's loaded once for the module."""
    with LoadedTables() as tables:
        yield tables


def test_split_sizes_families_and_difficulties(splits: dict[str, list[Task]]) -> None:
    for split, tasks in splits.items():
        assert len(tasks) == SPLIT_SIZES[split]
        families = Counter(task.family for task in tasks)
        assert set(families) == set(FAMILIES) and max(families.values()) - min(families.values()) <= 1
        assert {task.difficulty for task in tasks} == {1, 2, 3, 4, 5}
        assert len({task.id for task in tasks}) == len(tasks)


def test_splits_are_disjoint_by_dataset(splits: dict[str, list[Task]]) -> None:
    datasets = {split: {task.metadata["dataset"] for task in tasks} for split, tasks in splits.items()}
    assert not datasets["train"] & datasets["dev"] and not datasets["train"] & datasets["test"]
    assert not datasets["dev"] & datasets["test"]
    manifest = bundle_manifest("DataAnalysis")["splits"]
    assert all(datasets[split] <= set(entry["datasets"]) for split, entry in manifest.items())


def test_the_bundle_stays_small() -> None:
    assert sum(path.stat().st_size for path in BUNDLE.iterdir()) < 4_000_000


def test_each_task_names_its_files_and_tables(splits: dict[str, list[Task]]) -> None:
    for task in splits["dev"]:
        dataset = load_dataset(task.metadata["dataset"])
        assert set(task_files(task)) == set(task.metadata["files"]) <= set(dataset.files)
        assert {dataset.table(name).file for name in task.metadata["tables"]} == set(task.metadata["files"])


def test_pandas_references_import_only_the_allowed_modules_and_read_only_named_files(
        splits: dict[str, list[Task]]) -> None:
    for task in (task for tasks in splits.values() for task in tasks):
        tree = ast.parse(task.metadata["reference"]["pandas"])
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert imported <= ALLOWED_IMPORTS, task.id
        paths = {node.value[len("data/"):] for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("data/")}
        assert paths == set(task.metadata["files"]), task.id


@pytest.mark.parametrize("split", SPLITS)
def test_both_references_give_the_bundled_answer(split: str, splits: dict[str, list[Task]],
                                                 work_dirs: dict[str, str], loaded: LoadedTables) -> None:
    for task in splits[split]:
        work_dir = work_dirs[task.metadata["dataset"]]
        printed = run_pandas(task.metadata["reference"]["pandas"], work_dir)
        rows = run_sql(task.metadata["reference"]["sql"], work_dir, task.metadata["tables"], loaded)
        if task.family == "sql":
            computed = [json.loads(line) for line in printed.splitlines()]
            assert task.answer == task.metadata["reference"]["sql"]
            assert tables_match(task.metadata["answer_table"], rows, ordered=task.metadata["ordered"]), task.id
            assert tables_match(rows, computed, ordered=task.metadata["ordered"]), task.id
        else:
            assert printed == task.answer + "\n", task.id
            names = list(parse_answer_fields(task.answer).fields)  # in the SQL columns' order
            expected = task.metadata["answer_fields"]
            assert sorted(names) == sorted(expected), task.id
            assert len(rows) == 1 and all(field_matches(str(expected[name]), str(given))
                                          for name, given in zip(names, rows[0], strict=True)), task.id


def test_no_unstated_reading_changes_a_bundled_answer(splits: dict[str, list[Task]]) -> None:
    for task in (task for tasks in splits.values() for task in tasks):
        for dimension, audit in task.metadata["readings"].items():
            if audit["stated"]:
                continue
            for value in audit["values"].values():
                if task.family == "sql":
                    assert tables_match(task.metadata["answer_table"], value, ordered=task.metadata["ordered"])
                else:
                    given = parse_answer_fields(value).fields
                    assert all(field_matches(str(want), given[name])
                               for name, want in task.metadata["answer_fields"].items()), (task.id, dimension)


def test_a_reference_runs_unchanged_in_a_fresh_interpreter_per_family(tmp_path: Path,
                                                                      splits: dict[str, list[Task]]) -> None:
    chosen = {task.family: task for task in reversed(splits["test"])}
    running = {}
    for family, task in chosen.items():
        work_dir = write_files(task_files(task), tmp_path / family)
        running[family] = subprocess.Popen([sys.executable, "-I", "-c", task.metadata["reference"]["pandas"]],
                                           cwd=work_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for family, process in running.items():
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        if family != "sql":
            assert out == chosen[family].answer + "\n"


def test_build_splits_check_finds_the_bundle_current() -> None:
    assert check_bundled(build_data_analysis_files(), BUNDLE) == []
