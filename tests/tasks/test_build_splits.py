"""``python -m tasks.build_splits``: bundles are found by their manifests and rebuilt by the builder each names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.build_splits import bundle_folders, main
from tasks.splits import MANIFEST_NAME, load_split

BUILDER_MODULE = '''
import hashlib, json
from tasks.records import Task

def build():
    tasks = [Task(id=f"toy/{i}", env="Toy", family="sum", prompt=f"What is {i} + {i}?", answer=str(2 * i))
             for i in range(3)]
    data = "".join(task.to_json() + "\\n" for task in tasks).encode()
    manifest = {"builder": "toy_bundle:build", "env": "Toy",
                "splits": {"dev": {"file": "dev.jsonl", "count": 3, "sha256": hashlib.sha256(data).hexdigest()}}}
    return {"dev.jsonl": data, "MANIFEST.json": (json.dumps(manifest, sort_keys=True) + "\\n").encode()}
'''


@pytest.fixture
def own_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of one's own whose manifest names a builder in an importable module (``toy_bundle:build``)."""
    (tmp_path / "toy_bundle.py").write_text(BUILDER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / MANIFEST_NAME).write_text(json.dumps({"builder": "toy_bundle:build", "env": "Toy", "splits": {}}))
    return folder


def test_every_bundled_folder_is_found_by_its_manifest_and_names_a_builder_or_is_swe() -> None:
    folders = bundle_folders()
    assert set(folders) == {"PythonSandbox", "Search", "WebShop", "DataAnalysis", "SWE"}
    for env, folder in folders.items():
        manifest = json.loads((folder / MANIFEST_NAME).read_text())
        assert ("builder" in manifest) == (env != "SWE"), env


def test_a_bundle_of_ones_own_is_built_and_checked_through_the_builder_its_manifest_names(
        own_bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--folder", str(own_bundle)]) == 0
    assert [task.answer for task in load_split("Toy", "dev", splits_dir=own_bundle)] == ["0", "2", "4"]
    assert main(["--check", "--folder", str(own_bundle)]) == 0
    (own_bundle / "dev.jsonl").write_text("")
    assert main(["--check", "--folder", str(own_bundle)]) == 1
    assert "Toy: dev.jsonl: 0 of 3 lines differ" in capsys.readouterr().err


def test_a_bundle_without_a_builder_is_skipped_and_said_to_be(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "--env", "SWE"]) == 0
    assert "skipped SWE: its manifest names no builder" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--env", "Nope"], "expected bundled env names among ['DataAnalysis', 'PythonSandbox', 'SWE', 'Search', "
                        "'WebShop'], got ['Nope']"),
    (["--env", "Search", "--env", "WebShop", "--out", "x"], "--out: expected exactly one bundle"),
])
def test_a_wrong_selection_is_a_usage_error_that_says_what_was_expected(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_a_builder_that_cannot_be_loaded_is_named(own_bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (own_bundle / MANIFEST_NAME).write_text(json.dumps({"builder": "toy_bundle:missing", "env": "Toy"}))
    with pytest.raises(SystemExit):
        main(["--check", "--folder", str(own_bundle)])
    assert "Toy: the manifest's builder 'toy_bundle:missing' cannot be loaded" in capsys.readouterr().err
