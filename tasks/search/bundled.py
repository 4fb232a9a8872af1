"""The bundled Search benchmark: the ``fictional-v1`` corpus and its train/dev/test questions.

Files live in ``tasks/data/search/``: ``corpus-fictional-v1.jsonl`` (one document a line),
``train.jsonl``, ``dev.jsonl``, ``test.jsonl`` (one task a line) and ``MANIFEST.json``, which
records every file's sha256, the generator versions and the world parameters (seed, entity
counts) from which :func:`load_world` regenerates the world behind the corpus. They are written by
``python -m tasks.build_splits`` and checked by ``python -m tasks.build_splits --check``.

Example:
    >>> docs = load_corpus("fictional-v1")
    >>> docs[0].id
    'doc-000000'
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from tasks.errors import SplitIntegrityError, UnknownTaskError, did_you_mean
from tasks.records import Document
from tasks.search import corpus as corpus_module
from tasks.search import questions as questions_module
from tasks.search import world as world_module
from tasks.search.search_world import SearchWorld, build_search_world, corpus_bytes
from tasks.search.world import generate_world
from tasks.splits import MANIFEST_NAME, bundle_manifest, read_bundled_file

BUILDER = "tasks.search.bundled:build_search_files"
"""What the manifest names as its builder (``python -m tasks.build_splits`` calls it)."""

ENV = "Search"
DATA_FOLDER = "search"
DEFAULT_CORPUS = "fictional-v1"


@dataclass(frozen=True)
class CorpusSpec:
    """How a bundled corpus is generated.

    Attributes:
        seed: World seed.
        n_entities: Core entities (questions use only these).
        n_distractors: Distractor entities (near-duplicates and others no question uses).
    """

    seed: int
    n_entities: int
    n_distractors: int


CORPORA = {"fictional-v1": CorpusSpec(seed=20_250_101, n_entities=2_600, n_distractors=700)}
"""Bundled corpora by name."""

SPLIT_SIZES = {"train": 400, "dev": 100, "test": 100}
QUESTION_SEEDS = {"train": 1_000_000, "dev": 2_000_000, "test": 3_000_000}
SPLITS_CORPUS = DEFAULT_CORPUS
"""The corpus the bundled questions are about."""


def generator_versions() -> dict[str, int]:
    """Versions of the world, corpus and question generators (recorded in the manifest)."""
    return {"world": world_module.GENERATOR_VERSION, "corpus": corpus_module.CORPUS_VERSION,
            "questions": questions_module.QUESTIONS_VERSION}


def corpus_file(name: str) -> str:
    return f"corpus-{name}.jsonl"


def _search_world(name: str) -> SearchWorld:
    spec = CORPORA[name]
    world = generate_world(spec.seed, n_entities=spec.n_entities, n_distractors=spec.n_distractors)
    return build_search_world(world, name)


def build_search_files() -> dict[str, bytes]:
    """Generate every bundled Search file and the manifest, in memory.

    Split ``s`` draws its questions with seed ``QUESTION_SEEDS[s]``, never repeating a question
    (query signature) of an earlier split, so train, dev and test are disjoint.

    Returns:
        File name -> exact bytes.
    """
    files: dict[str, bytes] = {}
    corpora: dict[str, dict[str, Any]] = {}
    worlds = {}
    for name, spec in CORPORA.items():
        worlds[name] = _search_world(name)
        data = corpus_bytes(worlds[name].documents)
        files[corpus_file(name)] = data
        corpora[name] = {"file": corpus_file(name), "count": len(worlds[name].documents),
                         "sha256": hashlib.sha256(data).hexdigest(), "seed": spec.seed,
                         "n_entities": spec.n_entities, "n_distractors": spec.n_distractors}
    search_world = worlds[SPLITS_CORPUS]
    used: set[str] = set()
    splits = {}
    for split, size in SPLIT_SIZES.items():
        tasks = search_world.questions(size, QUESTION_SEEDS[split], split=split, exclude=used)
        used.update(questions_module.Query.parse(t.metadata["query"]).signature for t in tasks)
        data = "".join(task.to_json() + "\n" for task in tasks).encode("utf-8")
        files[f"{split}.jsonl"] = data
        splits[split] = {"file": f"{split}.jsonl", "count": len(tasks), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"builder": BUILDER, "env": ENV, "generator_versions": generator_versions(), "corpora": corpora,
                "question_seeds": QUESTION_SEEDS, "corpus": SPLITS_CORPUS, "splits": splits}
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def _corpus_entry(name: str) -> dict[str, Any]:
    corpora = bundle_manifest(ENV).get("corpora", {})
    if name not in corpora:
        raise UnknownTaskError(f"expected a bundled Search corpus among {sorted(corpora)}, got {name!r}"
                               + did_you_mean(name, corpora))
    return corpora[name]


def available_corpora() -> list[str]:
    """Names of the bundled Search corpora, e.g. ``["fictional-v1"]``."""
    return sorted(bundle_manifest(ENV).get("corpora", {}))


def load_corpus(name: str = DEFAULT_CORPUS, *, verify: bool = True) -> list[Document]:
    """Load a bundled Search corpus.

    Args:
        name: Corpus name (see :func:`available_corpora`).
        verify: Check the file against the sha256 in the manifest first.

    Returns:
        The documents, in doc id order.

    Raises:
        UnknownTaskError: No bundled corpus has that name (the message lists those that exist).
        SplitIntegrityError: ``verify`` is set and the file does not match its manifest.

    Example:
        >>> len(load_corpus()) > 1000
        True
    """
    data = read_bundled_file(ENV, _corpus_entry(name), verify=verify)
    return [Document(**json.loads(line)) for line in data.decode("utf-8").splitlines() if line]


def load_world(name: str = DEFAULT_CORPUS, *, verify: bool = True) -> SearchWorld:
    """Regenerate the world behind a bundled corpus, from the parameters its manifest records.

    Use it to relabel trajectories on the bundled benchmark (:mod:`tasks.search.relabel`) or to
    draw fresh questions about the bundled corpus.

    Args:
        name: Corpus name.
        verify: Check that the regenerated corpus is byte-identical to the bundled file.

    Raises:
        UnknownTaskError: No bundled corpus has that name.
        SplitIntegrityError: The manifest was written by other generator versions, or (``verify``)
            the regenerated corpus differs from the bundled one.
    """
    entry = _corpus_entry(name)
    recorded = bundle_manifest(ENV)["generator_versions"]
    if recorded != generator_versions():
        raise SplitIntegrityError(f"{DATA_FOLDER}/{MANIFEST_NAME}: expected generator versions "
                                  f"{generator_versions()}, got {recorded}; rebuild with "
                                  "`python -m tasks.build_splits`")
    world = generate_world(int(entry["seed"]), n_entities=int(entry["n_entities"]),
                           n_distractors=int(entry["n_distractors"]))
    search_world = build_search_world(world, name)
    if verify:
        digest = hashlib.sha256(corpus_bytes(search_world.documents)).hexdigest()
        if digest != entry["sha256"]:
            raise SplitIntegrityError(f"{DATA_FOLDER}/{entry['file']}: the regenerated corpus has sha256 {digest}, "
                                      f"the manifest {entry['sha256']}; rebuild with `python -m tasks.build_splits`")
    return search_world

