"""The bundled fictional-v1 corpus and its train/dev/test splits.

The regeneration tests guard the benchmark: if one fails after a generator change, either revert
the change or bump the generator's version (world, corpus or questions) and rebuild with
``python -m tasks.build_splits``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tasks import SplitIntegrityError, Task, UnknownTaskError, available_splits, build_splits
from tasks import splits as splits_module
from tasks.build_splits import check_bundled, main
from tasks.search import SearchWorld, World, available_corpora, load_corpus
from tasks.search._text import contains_phrase, normalize_text
from tasks.search.bundled import SPLIT_SIZES, build_search_files, generator_versions
from tasks.search.questions import Query
from tasks.search.search_world import corpus_bytes
from tasks.splits import MANIFEST_NAME

REPO = Path(__file__).resolve().parents[3]
BUNDLED = REPO / "tasks" / "data" / "search"


@pytest.fixture(scope="module")
def fresh_files() -> dict[str, bytes]:
    return build_search_files()


@pytest.fixture(scope="module")
def all_tasks(bundled_tasks: dict[str, list[Task]]) -> list[Task]:
    return [task for tasks in bundled_tasks.values() for task in tasks]


def test_registered_next_to_python_sandbox() -> None:
    assert available_splits()["Search"] == ["dev", "test", "train"]
    assert available_corpora() == ["fictional-v1"]


def test_sizes_hops_and_families(bundled_tasks: dict[str, list[Task]]) -> None:
    for split, tasks in bundled_tasks.items():
        assert len(tasks) == SPLIT_SIZES[split]
        assert Counter(t.difficulty for t in tasks) == {hops: len(tasks) // 4 for hops in (1, 2, 3, 4)}
        families = Counter(t.family for t in tasks)
        assert families["single"] == len(tasks) // 4
        assert abs(families["bridge"] - families["comparison"]) <= 3
        assert {t.env for t in tasks} == {"Search"} and {t.metadata["corpus"] for t in tasks} == {"fictional-v1"}


def test_splits_are_disjoint(bundled_tasks: dict[str, list[Task]], all_tasks: list[Task]) -> None:
    assert len({t.id for t in all_tasks}) == len(all_tasks)
    signatures = {split: {Query.parse(t.metadata["query"]).signature for t in tasks}
                  for split, tasks in bundled_tasks.items()}
    prompts = {split: {t.prompt for t in tasks} for split, tasks in bundled_tasks.items()}
    for split, tasks in bundled_tasks.items():
        assert len(signatures[split]) == len(prompts[split]) == len(tasks)
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not signatures[a] & signatures[b] and not prompts[a] & prompts[b]


def test_answers_appear_in_the_supporting_documents_and_chains_link(all_tasks: list[Task],
                                                                    bundled_world: SearchWorld) -> None:
    world = bundled_world.world
    for task in all_tasks:
        docs = [bundled_world.document(d) for d in task.metadata["supporting_docs"]]
        text = "\n".join(f"{d.title}\n{d.text}" for d in docs)
        assert any(contains_phrase(text, gold) for gold in task.answer), task.id
        query = Query.parse(task.metadata["query"])
        for chain_docs, chain in zip(task.metadata["chains"], query.chains, strict=True):
            assert bundled_world.entity_of(chain_docs[0]).id == chain.start
            assert contains_phrase(task.prompt, world.reference(chain.start))
            for previous, following in itertools.pairwise(chain_docs):
                bridge = bundled_world.entity_of(following)
                assert contains_phrase(bundled_world.document(previous).text, world.reference(bridge.id)), task.id
                assert not contains_phrase(task.prompt, bridge.name), task.id  # the bridge is not given away


@pytest.fixture(scope="module")
def names_to_ids(bundled_world: SearchWorld) -> dict[str, set[str]]:
    """Every normalized name, alias and title of every entity, scanned from the entities themselves."""
    names: dict[str, set[str]] = {}
    for entity in bundled_world.world.entities:
        for name in (*entity.names, entity.title):
            names.setdefault(normalize_text(name), set()).add(entity.id)
    return names


def _named_by_brute_force(names_to_ids: dict[str, set[str]], text: str) -> set[str]:
    """Entities a text names: every token span that is some entity's name (maximal matches only)."""
    tokens = normalize_text(text).split()
    spans = [(i, j, entity_id) for i in range(len(tokens)) for j in range(i + 1, len(tokens) + 1)
             for entity_id in names_to_ids.get(" ".join(tokens[i:j]), ())]
    return {entity_id for i, j, entity_id in spans
            if not any(a <= i and j <= b and (a, b) != (i, j) for a, b, _ in spans)}


def _ends(world: World, named: set[str], relations: tuple[str, ...]) -> set[str]:
    ends = set()
    for start in named:
        current: str | None = start
        for relation in relations:
            current = world.entity(current).relations.get(relation) if current else None
        if current is not None:
            ends.add(current)
    return ends


def _valid_answers(world: World, names_to_ids: dict[str, set[str]], task: Task) -> set[str]:
    """Every answer the question admits, if it could be about any entity its text names."""
    query = Query.parse(task.metadata["query"])
    named = _named_by_brute_force(names_to_ids, task.prompt)
    if not query.is_comparison:
        ends = [world.entity(e) for e in _ends(world, named, query.chains[0].relations)]
        if query.attribute is None:
            return {normalize_text(e.name) for e in ends}
        return {normalize_text(str(e.attributes[query.attribute])) for e in ends if query.attribute in e.attributes}
    sides = [{e for e in _ends(world, named, chain.relations) if query.attribute in world.entity(e).attributes}
             for chain in query.chains]
    answers = set()
    for first in sides[0]:
        for second in sides[1] - {first}:
            values = (world.entity(first).attributes[query.attribute], world.entity(second).attributes[query.attribute])
            if values[0] == values[1]:
                answers.add("a tie")
            else:
                best = first if (values[0] < values[1]) == (query.prefer == "min") else second
                answers.add(normalize_text(world.entity(best).name))
    return answers


def test_no_question_has_two_valid_answers(all_tasks: list[Task], bundled_world: SearchWorld,
                                          names_to_ids: dict[str, set[str]]) -> None:
    for task in all_tasks:
        assert _valid_answers(bundled_world.world, names_to_ids, task) == {normalize_text(task.answer[0])}, task.id


def test_bundled_files_match_the_manifest() -> None:
    manifest = json.loads((BUNDLED / MANIFEST_NAME).read_text())
    assert manifest["env"] == "Search" and manifest["generator_versions"] == generator_versions()
    entries = [*manifest["splits"].values(), *manifest["corpora"].values()]
    for entry in entries:
        data = (BUNDLED / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert data.count(b"\n") == entry["count"]
    corpus = manifest["corpora"]["fictional-v1"]
    assert 2_000 <= corpus["count"] <= 4_000
    assert (BUNDLED / corpus["file"]).stat().st_size < 8_000_000


def test_bundled_files_match_a_fresh_regeneration(fresh_files: dict[str, bytes]) -> None:
    assert sorted(fresh_files) == sorted(p.name for p in BUNDLED.iterdir())
    assert check_bundled(fresh_files, BUNDLED) == []


def test_load_world_regenerates_the_corpus_byte_for_byte(bundled_world: SearchWorld) -> None:
    assert corpus_bytes(bundled_world.documents) == (BUNDLED / "corpus-fictional-v1.jsonl").read_bytes()
    assert bundled_world.corpus == load_corpus("fictional-v1")
    assert bundled_world.name == "fictional-v1"


def test_unknown_corpus_lists_the_bundled_ones() -> None:
    with pytest.raises(UnknownTaskError, match=r"among \['fictional-v1'\], got 'fictional-v2'; did you mean"):
        load_corpus("fictional-v2")


def test_a_changed_corpus_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "search"
    shutil.copytree(BUNDLED, folder)
    corpus = folder / "corpus-fictional-v1.jsonl"
    corpus.write_bytes(corpus.read_bytes().replace(b" was born in ", b" was born near ", 1))
    monkeypatch.setattr(splits_module, "_data_root", lambda: tmp_path)
    with pytest.raises(SplitIntegrityError, match=r"search/corpus-fictional-v1\.jsonl: expected sha256"):
        load_corpus()
    assert len(load_corpus(verify=False)) == 3300


def test_main_writes_and_checks_search(fresh_files: dict[str, bytes], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(build_splits, "build_files", lambda manifest: fresh_files)  # skip rebuilds
    assert main(["--env", "Search", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(fresh_files)
    assert main(["--check", "--env", "Search", "--out", str(tmp_path)]) == 0
    (tmp_path / "dev.jsonl").write_bytes(b"")
    assert main(["--check", "--env", "Search", "--out", str(tmp_path)]) == 1
    assert "dev.jsonl: 0 of 100 lines differ" in capsys.readouterr().err
