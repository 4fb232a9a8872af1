"""Smoke test of the retrieval benchmark: it runs tiny and reports every row (no timing checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentgym_envs.search.speed import ROWS, Report, add_speedups, make_corpus, make_queries, summarize

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_benchmark_reports_every_row(tmp_path: Path):
    out = tmp_path / "retrieval.json"
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed", "search", "--articles", "2000", "--queries", "50",
         "--json", str(out)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=180)
    assert completed.returncode == 0, completed.stderr

    report = json.loads(out.read_text())
    assert (report["articles"], report["queries"]) == (2000, 50)
    assert [row["name"] for row in report["rows"]] == list(ROWS)
    assert report["skipped"] == {}
    for row in report["rows"]:
        assert row["calls"] == 50 and row["qps"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0
        assert row["name"] in completed.stdout
        ranking = row["recall_at_5"] is not None
        assert ranking == (row["name"] in {"bm25s", "bm25s-retrieve", "rank_bm25", "bm25s+snippets"})
        if ranking:
            assert row["speedup"] > 0 and row["recall_at_5"] >= 0.8  # every ranker finds most sources
    assert {"bm25s build (tokenize, index, save)", "bm25s load (mmap)",
            "rank_bm25 build (tokenize, index)"} == set(report["build_s"])
    assert "queries per second of rank_bm25" in completed.stdout


def test_corpus_and_queries_are_deterministic():
    corpus = make_corpus(30)
    assert corpus == make_corpus(30)
    assert len({doc.id for doc in corpus}) == len({doc.title for doc in corpus}) == 30
    queries = make_queries(corpus, 10)
    assert queries == make_queries(corpus, 10)
    by_id = {doc.id: doc for doc in corpus}
    for query, source in queries:
        assert query.split()[0] in by_id[source].title  # a title word, then words of the text
        assert all(word in by_id[source].text.lower() for word in query.split()[1:])


def test_speedups_are_relative_to_rank_bm25_and_rows_keep_their_order():
    report = Report(articles=1, queries=2, rows=[
        summarize("env-step-in-process", [2.0, 2.0]),
        summarize("rank_bm25", [10.0, 10.0], recall=1.0),
        summarize("bm25s", [1.0, 1.0], recall=1.0),
    ])
    add_speedups(report)
    assert [row.name for row in report.rows] == ["bm25s", "rank_bm25", "env-step-in-process"]
    assert [row.speedup for row in report.rows] == [10.0, 1.0, None]
    assert report.rows[0].qps == 1000.0
