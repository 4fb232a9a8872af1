"""The SWE task builder's pure parts: verdicts combined across backends, drops counted by kind, the slot plan, the
repository sources, the tasks made of a report, and the bundle's manifest as the builder writes it."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from tasks import load_split
from tasks.errors import SplitIntegrityError
from tasks.splits import bundle_manifest
from tasks.swe.environments import RepoEnvironment
from tasks.swe.instances import SWEInstance
from tasks.swe.keep import Judgement
from tasks.swe.repos import PINS
from tasks.swe.synthesis import (
    BUNDLE_FOLDER,
    BUNDLE_PLAN,
    DIFFICULTY_SLOTS,
    LocalRepoSpec,
    Slot,
    SuiteSource,
    SynthesisError,
    SynthesisReport,
    bundle_entry,
    bundled_pins,
    combine_judgements,
    drop_category,
    folder_source,
    report_tasks,
    task_plan,
)

REPO = {"calc/__init__.py": b"", "calc/ops.py": b"def add(a, b):\n    return a + b\n",
        "tests/test_ops.py": b"from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}


def write_repo(folder: Path) -> Path:
    for path, data in REPO.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


def test_combine_judgements_keeps_only_the_tests_every_backend_agrees_on() -> None:
    docker = Judgement(True, ("t::a", "t::b"), ("t::c", "t::d"), (), "kept")
    bwrap = Judgement(True, ("t::a",), ("t::c", "t::e"), ("t::f",), "kept")
    assert combine_judgements([docker, bwrap]) == Judgement(True, ("t::a",), ("t::c",), ("t::f",), "kept")
    # one backend's drop is the verdict
    dropped = Judgement(False, (), (), (), "no test fails with the bug and passes without it")
    assert combine_judgements([docker, dropped]) == dropped
    # each backend keeps, but on different tests: no common FAIL_TO_PASS
    other = Judgement(True, ("t::x",), ("t::c",), (), "kept")
    assert combine_judgements([docker, other]).reason == "the backends agree on no FAIL_TO_PASS test"


def test_drop_category_folds_run_details() -> None:
    assert drop_category("a run of the bug tree is 'timeout': the test run passed its time limit") == \
        "timeout run with the bug"
    assert drop_category("a run of the bug tree is 'error': collection errors in x") == "error run with the bug"
    assert drop_category("no test fails with the bug and passes without it") == \
        "no test fails with the bug and passes without it"


def test_task_plan_cycles_difficulties_and_is_seeded() -> None:
    plan = task_plan(10, random.Random(3))
    assert [slot.difficulty for slot in plan] == [1, 2, 3, 4, 5] * 2
    assert plan == task_plan(10, random.Random(3))
    assert all((slot.level, slot.bugs) in DIFFICULTY_SLOTS[slot.difficulty] for slot in plan)
    assert {bugs for pairs in DIFFICULTY_SLOTS.values() for _, bugs in pairs} == {1, 2, 3}




def test_the_bundle_matches_its_manifest_and_is_disjoint_by_repository() -> None:
    manifest = bundle_manifest("SWE")
    repos_of_split = {}
    for split, entry in manifest["splits"].items():
        tasks = load_split("SWE", split)  # checks the sha256
        assert len(tasks) == entry["count"] > 0
        names = {task.metadata["repo_source"]["name"] for task in tasks}
        assert names == set(entry["repos"])
        repos_of_split[split] = names
        for task in tasks:
            assert task.env == "SWE" and task.family == "synthetic" and task.metadata["FAIL_TO_PASS"]
            assert task.answer and task.answer not in task.prompt
            assert task.metadata["repo_source"]["version"] == PINS[task.metadata["repo_source"]["name"]].version
    assert sorted(repos_of_split) == ["dev", "test", "train"]
    names = [name for split_names in repos_of_split.values() for name in split_names]
    assert len(names) == len(set(names)), repos_of_split
    assert (BUNDLE_FOLDER / "MANIFEST.json").is_file()


def test_the_bundle_is_large_and_every_task_runs_in_its_pins_environment() -> None:
    manifest = bundle_manifest("SWE")
    tasks = [task for split in manifest["splits"] for task in load_split("SWE", split)]
    assert len(tasks) >= 500 and len(manifest["pins"]) >= 15
    layouts, dependencies = set(), set()
    for task in tasks:
        name = task.metadata["repo_source"]["name"]
        environment = RepoEnvironment.from_dict(task.metadata["environment"])
        assert environment.repo == PINS[name].repo and environment.requirements == PINS[name].requirements
        src_layout = PINS[name].source_folders[0].startswith("src/")
        assert environment.package_roots == (("src",) if src_layout else (".",))
        layouts.add(src_layout)
        dependencies.add(bool(environment.requirements))
    assert layouts == dependencies == {True, False}
    # the test and train splits have repositories with a src/ layout and with a dependency
    for split in ("test", "train"):
        names = manifest["splits"][split]["repos"]
        assert any(PINS[name].requirements for name in names), names
        assert any(PINS[name].source_folders[0].startswith("src/") for name in names), names


def test_a_rebuild_keeps_the_bundled_repositories_whose_inputs_did_not_change(tmp_path: Path) -> None:
    folder = tmp_path / "swe"
    shutil.copytree(BUNDLE_FOLDER, folder)
    manifest = bundle_manifest("SWE", splits_dir=folder)
    plan = {split: tuple(tuple(entry) for entry in entries) for split, entries in manifest["plan"].items()}
    backends = manifest["backends"]
    kept = bundled_pins(folder, plan, backends)
    assert sorted(kept) == sorted(manifest["pins"])
    for split, entries in plan.items():  # each repository's tasks, in file order, and its record
        assert [task for name, _, _ in entries for task in kept[name][0]] == load_split("SWE", split)
        assert all(kept[name][1] == manifest["pins"][name] for name, _, _ in entries)
    # a new seed (or count) makes its repository again; the others stay
    (name, count, seed), *others = plan["test"]
    changed_plan = {**plan, "test": ((name, count, seed + 1), *others)}
    assert sorted(bundled_pins(folder, changed_plan, backends)) == sorted(set(manifest["pins"]) - {name})
    # other backends, or a pin whose release changed, make them again
    assert bundled_pins(folder, plan, ["bwrap"]) == {}
    manifest["pins"][name]["sha256"] = "0" * 64
    (folder / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert name not in bundled_pins(folder, plan, backends)
    # an edited split file is an error, not a silent rebuild; no bundle keeps nothing
    with (folder / "test.jsonl").open("a", encoding="utf-8") as split_file:
        split_file.write("\n")
    with pytest.raises(SplitIntegrityError, match=r"test\.jsonl"):
        bundled_pins(folder, plan, backends)
    assert bundled_pins(tmp_path / "empty", plan, backends) == {}


def test_the_manifest_keeps_keep_rates_drops_and_validation_on_every_backend() -> None:
    manifest = bundle_manifest("SWE")
    assert manifest["backends"] == ["docker", "bwrap"]
    for name, record in manifest["pins"].items():
        assert record["keep_rate"] == round(record["kept_singles"] / record["candidates"], 3), name
        assert sum(record["dropped"].values()) + record["kept_singles"] >= record["candidates"], name
        validation = record["validation"]
        assert sorted(validation["per_backend"]) == ["bwrap", "docker"], name
        for verdicts in validation["per_backend"].values():  # each synthesized instance validated there
            assert sum(verdicts.values()) == record["instances"], name
            assert verdicts.get("usable", 0) >= record["instances"] - validation["dropped"], name
    # the splits hold the instances usable on every backend
    kept = sum(record["instances"] - record["validation"]["dropped"] for record in manifest["pins"].values())
    assert kept == sum(entry["count"] for entry in manifest["splits"].values())


def test_the_builder_writes_the_manifest_entries_the_bundle_ships() -> None:
    # the bundled splits load as they always did, and the builder's entry of each is the manifest's
    manifest = bundle_manifest("SWE")
    assert manifest["plan"] == {split: [list(entry) for entry in entries] for split, entries in BUNDLE_PLAN.items()}
    for split, entry in manifest["splits"].items():
        repos = [name for name, _, _ in BUNDLE_PLAN[split]]
        assert bundle_entry(load_split("SWE", split), entry["file"], repos) == entry


def test_a_folder_source_reads_the_library_and_records_the_configuration(tmp_path: Path) -> None:
    source = folder_source(write_repo(tmp_path / "calc"), ["calc"], ["tests"], name="calc")
    assert source.library == ("calc/__init__.py", "calc/ops.py") and dict(source.files) == REPO
    assert source.spec.repo == "local/calc" and source.spec.test_paths == ("tests",)
    assert source.repo_source == {"kind": "path", "path": str((tmp_path / "calc").resolve()),
                                  "pytest_config": "repository"}
    # its environment is derived from its metadata (none here: no requirement, the package at the root)
    assert source.environment == RepoEnvironment("local/calc", "local", (), (".",), "calc", "0")
    empty = folder_source(tmp_path / "calc", ["calc"], [], own_config=False)  # candidates need no suite
    assert empty.repo_source["pytest_config"] == "empty" and empty.spec.name == "calc"
    with pytest.raises(SynthesisError, match=r"expected Python library files under \['lib'\]"):
        folder_source(tmp_path / "calc", ["lib"], ["tests"])


def test_report_tasks_records_each_slot() -> None:
    instance = SWEInstance(instance_id="calc__calc-local-0", repo="local/calc", base_commit="0" * 40,
                           problem_statement="add is wrong", patch="diff", FAIL_TO_PASS=("t::a",),
                           PASS_TO_PASS=("t::b",), difficulty=3)
    report = SynthesisReport(instances=[instance], slots=[Slot(level=2, bugs=2)])
    spec = LocalRepoSpec("calc", "local", "", "", ("calc",), ("tests",), suite_seconds=0.0, tests_passed=0)
    environment = RepoEnvironment("local/calc", "local", ("idna==3.10",), ("src",), "calc")
    source = SuiteSource(spec=spec, files=REPO, library=("calc/ops.py",),
                         repo_source={"kind": "path", "path": "/src/calc", "pytest_config": "repository"},
                         environment=environment)
    (task,) = report_tasks(source, report)
    assert (task.env, task.family, task.difficulty) == ("SWE", "synthetic", 3)
    assert (task.metadata["hint_level"], task.metadata["bugs"]) == (2, 2)
    # grading runs it where it was synthesized
    assert RepoEnvironment.from_dict(task.metadata["environment"]) == environment
    assert task.metadata["repo_source"] == {"kind": "path", "path": "/src/calc", "pytest_config": "repository"}

