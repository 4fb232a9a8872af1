"""The bundled WebShop benchmark: the generated-v1 catalogue and its train/dev/test goals (tasks.webshop.bundled).

The regeneration tests guard the benchmark: if one fails after a change to the catalogue or goal
generator, either revert the change or bump ``tasks.webshop.catalogue.GENERATOR_VERSION`` and
rebuild with ``python -m tasks.build_splits --env WebShop``.
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

from tasks import SplitIntegrityError, Task, UnknownTaskError, available_splits, build_splits, load_split
from tasks import splits as splits_module
from tasks.build_splits import check_bundled, main
from tasks.splits import MANIFEST_NAME
from tasks.webshop import (
    DEFAULT_CATALOGUE,
    GENERATOR_VERSION,
    Goal,
    Product,
    RecordFormatError,
    available_catalogues,
    base_asin,
    load_catalogue,
    product_meets_goal,
)
from tasks.webshop.bundled import (
    CATALOGUES,
    SPLIT_SIZES,
    CatalogueSpec,
    build_webshop_files,
    catalogue_bytes,
    partition_groups,
)

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "tasks" / "data" / "webshop"
PAIRS = (("train", "dev"), ("train", "test"), ("dev", "test"))


@pytest.fixture(scope="module")
def fresh_files() -> dict[str, bytes]:
    return build_webshop_files()


@pytest.fixture(scope="module")
def bundled_tasks() -> dict[str, list[Task]]:
    return {split: load_split("WebShop", split) for split in SPLIT_SIZES}


@pytest.fixture(scope="module")
def catalogue() -> list[Product]:
    return load_catalogue(DEFAULT_CATALOGUE)


@pytest.fixture(scope="module")
def by_asin(catalogue: list[Product]) -> dict[str, Product]:
    return {product.asin: product for product in catalogue}


def test_registered_next_to_the_other_envs() -> None:
    assert available_splits()["WebShop"] == ["dev", "test", "train"]
    assert available_catalogues() == [DEFAULT_CATALOGUE] == ["generated-v1"]


def test_sizes_ids_levels_and_catalogue(bundled_tasks: dict[str, list[Task]]) -> None:
    for split, tasks in bundled_tasks.items():
        assert len(tasks) == SPLIT_SIZES[split]
        assert [t.id for t in tasks] == [f"webshop/{split}/{i:04d}" for i in range(len(tasks))]
        assert [t.difficulty for t in tasks] == [1 + i % 3 for i in range(len(tasks))]  # cycling 1, 2, 3
        assert {(t.env, t.family) for t in tasks} == {("WebShop", "shop")}
        assert {t.metadata["catalogue"] for t in tasks} == {"generated-v1"}
        assert {t.metadata["generator_version"] for t in tasks} == {GENERATOR_VERSION}


def test_splits_are_disjoint_by_product_group_and_instruction(bundled_tasks: dict[str, list[Task]]) -> None:
    groups = {split: {base_asin(t.answer) for t in tasks} for split, tasks in bundled_tasks.items()}
    prompts = {split: {t.prompt for t in tasks} for split, tasks in bundled_tasks.items()}
    for split, tasks in bundled_tasks.items():
        assert len(prompts[split]) == len({t.answer for t in tasks}) == len(tasks)  # no repeats within a split
    for a, b in PAIRS:
        assert not groups[a] & groups[b] and not prompts[a] & prompts[b]


def test_every_target_is_in_the_catalogue_and_meets_its_goal(bundled_tasks: dict[str, list[Task]],
                                                            by_asin: dict[str, Product]) -> None:
    for task in (t for tasks in bundled_tasks.values() for t in tasks):
        goal = Goal.from_dict(task.metadata["goal"])
        assert goal.asin == task.answer and goal.instruction == task.prompt
        assert product_meets_goal(goal, by_asin[task.answer]), task.id


def test_matching_products_recounted_by_brute_force(bundled_tasks: dict[str, list[Task]],
                                                    catalogue: list[Product]) -> None:
    for task in (t for tasks in bundled_tasks.values() for t in tasks):
        goal = Goal.from_dict(task.metadata["goal"])
        matching = [product.asin for product in catalogue if product_meets_goal(goal, product)]
        assert task.metadata["matching_asins"] == matching and task.metadata["matching_products"] == len(matching)


def test_every_split_has_every_type_in_proportion(catalogue: list[Product]) -> None:
    groups = partition_groups(catalogue)
    type_of = {product.asin: product.product_type for product in catalogue}
    assert sorted(g for split_groups in groups.values() for g in split_groups) == sorted(set(map(base_asin, type_of)))
    per_type = {split: Counter(type_of[g] for g in split_groups) for split, split_groups in groups.items()}
    assert [sorted(set(per_type[split].values())) for split in SPLIT_SIZES] == [[8], [2], [2]]  # 12 groups a type


def test_bundled_files_match_the_manifest() -> None:
    manifest = json.loads((BUNDLED / MANIFEST_NAME).read_text())
    assert manifest["env"] == "WebShop" and manifest["generator_versions"] == {"webshop": GENERATOR_VERSION}
    assert manifest["catalogue"] == DEFAULT_CATALOGUE
    for entry in (*manifest["splits"].values(), *manifest["catalogues"].values()):
        data = (BUNDLED / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert data.count(b"\n") == entry["count"]


def test_the_manifest_regenerates_the_bundled_catalogue(catalogue: list[Product]) -> None:
    entry = json.loads((BUNDLED / MANIFEST_NAME).read_text())["catalogues"]["generated-v1"]
    spec = CatalogueSpec(**{k: entry[k] for k in ("seed", "types_per_leaf", "products_per_type", "distractors",
                                                  "reviews_per_product")})
    assert spec == CATALOGUES["generated-v1"]
    assert spec.generate() == catalogue and entry["count"] == len(catalogue) == 1080


def test_bundled_files_match_a_fresh_regeneration(fresh_files: dict[str, bytes]) -> None:
    assert sorted(fresh_files) == sorted(p.name for p in BUNDLED.iterdir())
    assert check_bundled(fresh_files, BUNDLED) == []


_BUILD_SCRIPT = """
import hashlib
from tasks.webshop.bundled import build_webshop_files
for name, data in build_webshop_files().items():
    print(name, hashlib.sha256(data).hexdigest())
"""


def test_build_is_identical_in_another_process(fresh_files: dict[str, bytes]) -> None:
    # A different string-hash seed in a fresh interpreter must give the same bytes.
    env = {**os.environ, "PYTHONHASHSEED": "4321", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", _BUILD_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout == "".join(f"{n} {hashlib.sha256(d).hexdigest()}\n" for n, d in fresh_files.items())


def test_check_names_the_changed_product(fresh_files: dict[str, bytes], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(build_splits, "build_files", lambda manifest: fresh_files)  # skip rebuilds
    assert main(["--env", "WebShop", "--out", str(tmp_path)]) == 0
    assert main(["--check", "--env", "WebShop", "--out", str(tmp_path)]) == 0
    path = tmp_path / "catalogue-generated-v1.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace('"price": ', '"price": 1', 1)
    path.write_text("".join(lines))
    assert main(["--check", "--env", "WebShop", "--out", str(tmp_path)]) == 1
    asin = json.loads(lines[5])["asin"]
    assert f"catalogue-generated-v1.jsonl: 1 of 1080 lines differ, first at line 6 ({asin})" in capsys.readouterr().err


def test_catalogue_from_a_file_round_trips(catalogue: list[Product], tmp_path: Path) -> None:
    path = tmp_path / "shop.jsonl"
    path.write_bytes(catalogue_bytes(catalogue[:20]) + b"\n")  # a trailing blank line is skipped
    assert load_catalogue(str(path)) == load_catalogue(path) == catalogue[:20]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "shop.jsonl:3: expected a JSON object of a product, got invalid JSON"),
        ('["a list"]', "shop.jsonl:3: expected a dict for a Product, got list"),
        ('{"asin": "B1"}', "shop.jsonl:3: expected key 'title' in the Product dict"),
        (None, "shop.jsonl:3: expected a new product id, got 'B000000000' again (first at line 1)"),
    ],
)
def test_a_bad_catalogue_line_is_reported_with_its_number(catalogue: list[Product], tmp_path: Path,
                                                          line: str | None, message: str) -> None:
    lines = catalogue_bytes(catalogue[:3]).decode().splitlines()
    lines[2] = lines[0] if line is None else line  # None: a repeated product
    path = tmp_path / "shop.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordFormatError) as caught:
        load_catalogue(str(path))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("generated-v2", UnknownTaskError, "among ['generated-v1'] or the path of a catalogue JSONL file, "
                                           "got 'generated-v2'; did you mean 'generated-v1'?"),
        ("amazon", UnknownTaskError, "got 'amazon'"),
        ("missing/shop.jsonl", FileNotFoundError, "expected a WebShop catalogue file at 'missing/shop.jsonl'"),
        ("shop.jsonl", FileNotFoundError, "got no such file"),
        (Path("generated-v1"), FileNotFoundError, "at 'generated-v1', got no such file"),  # a Path is never a name
    ],
)
def test_an_unknown_catalogue_says_what_exists(spec: str | Path, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        load_catalogue(spec)
    assert message in str(caught.value)


def test_an_empty_catalogue_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(RecordFormatError, match=r"empty\.jsonl: expected at least one product, got none"):
        load_catalogue(str(path))


def test_a_changed_bundled_catalogue_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "webshop"
    shutil.copytree(BUNDLED, folder)
    path = folder / "catalogue-generated-v1.jsonl"
    path.write_text(path.read_text().replace('"price": ', '"price": 1', 1))
    monkeypatch.setattr(splits_module, "_data_root", lambda: tmp_path)
    with pytest.raises(SplitIntegrityError, match=r"webshop/catalogue-generated-v1\.jsonl: expected sha256"):
        load_catalogue("generated-v1")
    assert len(load_catalogue("generated-v1", verify=False)) == 1080
