"""BM25Retriever: ranking, the memory-mapped index on disk, snippets, suggestions, thread safety."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search import BM25Retriever, Retriever, Tokenizer, UnknownDocumentError, default_index_root
from agentgym_envs.search.retriever import META_NAME, index_key
from tasks import Document

QUERIES = ["Who founded Marrowick?", "Tess river", "copper mines", "Liora Quent architect", "abbey flood 1533",
           "council of Kelden law", "harbour market guild"]


@pytest.mark.parametrize(("query", "expected"), [
    ("Marrowick", "doc-000001"),                                   # a title
    ("Oskar Vell", "doc-000002"),                                  # a two-word title
    ("Tess (river)", "doc-000005"),                                # a title with punctuation
    ("town known for its copper mines", "doc-000003"),             # a fact in the text
    ("who studied under the sculptor Edda Morn", "doc-000004"),    # a fact, with stopwords
    ("abbey abandoned after the flood", "doc-000006"),             # stemming: abandoned/flood
    ("Liora Quent painter birth", "doc-000004"),                   # partly matching
])
def test_the_right_article_ranks_first(retriever, query, expected):
    hits = retriever.search(query, k=5)
    assert hits[0].doc_id == expected, [(h.doc_id, h.score) for h in hits]


def test_hits_are_ranked_best_first_and_limited_to_k(retriever):
    hits = retriever.search("Marrowick Kelden", k=3)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score > 0 for h in hits)
    assert {h.doc_id for h in hits} <= {d.id for d in retriever.documents}


def test_only_matching_documents_are_returned(retriever):
    assert retriever.search("the of who what", k=5) == []  # stopwords only
    assert retriever.search("zyzzyva", k=5) == []          # an unknown word
    assert len(retriever.search("Brannock", k=20)) == 1     # fewer matches than k


def test_ties_are_broken_by_corpus_order(tmp_path):
    docs = [Document(f"d{i}", f"Twin {i}", "identical text about lanterns") for i in range(5)]
    hits = BM25Retriever(docs, index_dir=tmp_path / "i", stemmer=None).search("lanterns", k=3)
    assert [h.doc_id for h in hits] == ["d0", "d1", "d2"]


def test_k_below_one_is_an_error(retriever):
    with pytest.raises(ValueError, match="k: expected >= 1, got 0"):
        retriever.search("Marrowick", 0)


def test_snippet_is_the_passage_around_the_query_terms(retriever):
    hit = next(h for h in retriever.search("council law 1043", k=5) if h.doc_id == "doc-000007")
    assert "1043" in hit.snippet
    assert len(hit.snippet) <= 300 + 4  # the passage and its ellipses
    assert hit.snippet.startswith("…")  # it is not the lead of the article
    assert retriever.search("council law 1043", k=5) == retriever.search("council law 1043", k=5)


def test_snippet_falls_back_to_the_lead_when_only_the_title_matches(tmp_path):
    docs = [Document("d1", "Quill", "A long text. " * 40), Document("d2", "Other", "Nothing here.")]
    hit = BM25Retriever(docs, index_dir=tmp_path / "i").search("quill", k=1)[0]
    assert hit.snippet.startswith("A long text.") and hit.snippet.endswith("…")


def test_a_build_says_so_on_stderr_and_a_load_is_silent(tmp_path, capsys):
    docs = [Document("a", "Lanterns", "Lanterns of the north."), Document("b", "Quills", "A quill and ink.")]
    BM25Retriever(docs, index_dir=tmp_path / "i").close()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"building the BM25 index of 2 documents in {tmp_path / 'i'} (once; later runs load it) ..."
    assert lines[-1].startswith("building the BM25 index of 2 documents") and " done in " in lines[-1]
    BM25Retriever(docs, index_dir=tmp_path / "i").close()
    assert capsys.readouterr().err == ""


def test_saved_index_is_reloaded_memory_mapped_with_identical_results(corpus, retriever, index_dir):
    meta = index_dir / META_NAME
    built_at = meta.stat().st_mtime_ns
    reloaded = BM25Retriever(corpus, index_dir=index_dir)
    try:
        assert meta.stat().st_mtime_ns == built_at  # loaded, not rebuilt
        assert isinstance(reloaded._bm25.scores["data"], np.memmap)
        assert json.loads(meta.read_text())["key"] == reloaded.key == retriever.key
        for query in QUERIES:
            assert reloaded.search(query, 10) == retriever.search(query, 10)
    finally:
        reloaded.close()


def test_default_index_dir_is_the_cache_keyed_by_corpus(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    instance = BM25Retriever(corpus[:5])
    assert default_index_root() == tmp_path / "agentrl" / "bm25"
    assert instance.index_dir == default_index_root() / instance.key
    assert len(instance.key) == 16 and (instance.index_dir / META_NAME).is_file()


def test_key_changes_with_the_corpus_and_the_tokenizer(corpus):
    params = {"k1": 1.5, "b": 0.75, "method": "lucene"}
    base = index_key(corpus, Tokenizer(), params)
    edited = [Document(corpus[0].id, corpus[0].title, corpus[0].text + "!"), *corpus[1:]]
    assert index_key(corpus, Tokenizer(), params) == base
    assert index_key(edited, Tokenizer(), params) != base
    assert index_key(corpus, Tokenizer(stemmer=None), params) != base
    assert index_key(corpus, Tokenizer(), {**params, "k1": 1.2}) != base


def test_an_index_dir_of_another_corpus_is_refused(corpus, index_dir):
    with pytest.raises(EnvConfigError, match="holds the index of another corpus"):
        BM25Retriever(corpus[:3], index_dir=index_dir)


def test_bad_corpora_are_refused(tmp_path):
    with pytest.raises(EnvConfigError, match="at least one document"):
        BM25Retriever([], index_dir=tmp_path / "a")
    with pytest.raises(EnvConfigError, match="unique document ids"):
        BM25Retriever([Document("x", "A", "a"), Document("x", "B", "b")], index_dir=tmp_path / "b")
    with pytest.raises(EnvConfigError, match="stemmer"):
        Tokenizer(stemmer="klingon")


def test_concurrent_builders_share_one_index(corpus, tmp_path):
    target = tmp_path / "shared"
    barrier = threading.Barrier(4)

    def build() -> list[str]:
        barrier.wait()
        instance = BM25Retriever(corpus, index_dir=target)
        return [h.doc_id for h in instance.search("Marrowick founded", 5)]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: build(), range(4)))
    assert all(result == results[0] for result in results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared", "shared.lock"]  # no staging left behind


def test_an_index_renamed_into_place_between_two_looks_is_loaded_and_a_foreign_folder_refused(
        corpus, tmp_path, monkeypatch):
    target = tmp_path / "shared"
    BM25Retriever(corpus, index_dir=target)  # another builder's finished index
    real_is_file, looks = Path.is_file, []

    def first_look_before_the_rename(path: Path) -> bool:
        looks.append(path)
        return False if len(looks) == 1 else real_is_file(path)

    monkeypatch.setattr(Path, "is_file", first_look_before_the_rename)
    assert BM25Retriever(corpus, index_dir=target).search("Marrowick founded", 1)  # not "holding other files"
    monkeypatch.undo()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(EnvConfigError, match="holding other files"):
        BM25Retriever(corpus, index_dir=foreign)


def test_concurrent_searches_match_sequential_ones(retriever):
    expected = {query: retriever.search(query, 5) for query in QUERIES}
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda q: (q, retriever.search(q, 5)), QUERIES * 20))
    assert all(hits == expected[query] for query, hits in results)


def test_document_lookup_and_suggestions(retriever):
    assert retriever.document("doc-000004").title == "Liora Quent"
    with pytest.raises(UnknownDocumentError, match="did you mean 'doc-000004'") as typo:
        retriever.document("doc-00004")
    assert typo.value.suggestion == "doc-000004"
    with pytest.raises(UnknownDocumentError) as by_title:
        retriever.document("liora quent")  # a title instead of an id
    assert by_title.value.suggestion == "doc-000004"
    with pytest.raises(UnknownDocumentError) as nothing_close:
        retriever.document("???")
    assert nothing_close.value.suggestion is None
    assert isinstance(nothing_close.value, KeyError)


def test_implements_the_protocol_and_closes(corpus, index_dir):
    instance = BM25Retriever(corpus, index_dir=index_dir)
    assert isinstance(instance, Retriever)
    instance.close()
    with pytest.raises(EnvConfigError, match="closed"):
        instance.search("Marrowick", 1)
