"""Retrieval speed of the Search env: bm25s against rank_bm25 on one corpus, and the latency of a ``search`` step.

Side by side in one run, on the same synthetic corpus and the same queries (tokenized by the same
tokenizer, with stopwords and Snowball stemming):

    =====================  ===================================================================
    row                    what one call does
    =====================  ===================================================================
    bm25s                  ``BM25Retriever.rank``: tokenize, score over the memory-mapped bm25s
                           index, top 5 (what every search does before its snippets)
    bm25s-retrieve         the bm25s library's own ``BM25.retrieve`` on the same index (reference)
    rank_bm25              ``BM25Okapi.get_scores`` and a top 5 (the baseline)
    bm25s+snippets         ``BM25Retriever.search``: the ranking plus a snippet per hit
    env-step-in-process    ``SearchEnv.step`` of a ``search`` tool call, retriever in-process
    env-step-http          the same step against ``python -m agentgym_envs.search.server`` (loopback)
    =====================  ===================================================================

Ranking rows give queries per second and their speed-up over rank_bm25, and recall@5 (the share of
queries whose source article is among the top 5: a check that the rows agree on quality, not a
benchmark of it). Every row gives p50 and p99 latency. Index build and load times are reported too.

The corpus is generated deterministically: articles with made-up titles and Zipf-distributed words
from a made-up vocabulary; each query is words of its source article's title and text.

Example:
    python -m benchmarks.speed search                          # 50,000 articles, 1,000 queries
    python -m benchmarks.speed search --articles 2000 --queries 50 --json retrieval.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import bm25s
import numpy as np
from rank_bm25 import BM25Okapi
from rich.console import Console
from rich.table import Table

from agentgym_envs.search import BM25Retriever, SearchEnv
from tasks import Document, Task

TOP_K = 5
SEED = 2024
VOCABULARY = 30_000
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "di", "ar", "en", "is", "ol", "um", "ba", "qui",
             "zor", "fen", "gal", "hth", "pri", "wy", "xan", "el")
ROWS = ("bm25s", "bm25s-retrieve", "rank_bm25", "bm25s+snippets", "env-step-in-process", "env-step-http")
ROW_METHOD = {
    "bm25s": "BM25Retriever.rank (mmap index)",
    "bm25s-retrieve": "bm25s BM25.retrieve",
    "rank_bm25": "BM25Okapi.get_scores + top-k",
    "bm25s+snippets": "BM25Retriever.search",
    "env-step-in-process": "SearchEnv.step(search), in-process",
    "env-step-http": "SearchEnv.step(search), HTTP service",
}
BASELINE = "rank_bm25"
ENV_STEPS_PER_EPISODE = 8


@dataclass(frozen=True)
class Row:
    """Timings of one way of answering the queries.

    Attributes:
        name: One of :data:`ROWS`.
        method: What one call does, in words.
        calls: Timed calls.
        qps: Calls per second (sequential, one thread).
        p50_ms: Median latency.
        p99_ms: 99th percentile latency.
        speedup: ``qps`` over the rank_bm25 row's ``qps`` (ranking rows only).
        recall_at_5: Share of queries whose source article is in the top 5 (ranking rows only).
    """

    name: str
    method: str
    calls: int
    qps: float
    p50_ms: float
    p99_ms: float
    speedup: float | None = None
    recall_at_5: float | None = None


@dataclass
class Report:
    """Everything one run measured.

    Attributes:
        articles: Corpus size.
        queries: Number of queries.
        corpus_words: Total words in the corpus.
        rows: Measured rows, in :data:`ROWS` order.
        build_s: Seconds to build each index (tokenizing included) and to load the saved bm25s index.
        skipped: Rows not measured, with the reason.
        machine: CPU count, platform and Python version.
    """

    articles: int
    queries: int
    corpus_words: int = 0
    rows: list[Row] = field(default_factory=list)
    build_s: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    machine: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- corpus


def make_vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """``size`` distinct made-up words of two to four syllables."""
    words: dict[str, None] = {}
    while len(words) < size:
        count = int(rng.integers(2, 5))
        words["".join(SYLLABLES[i] for i in rng.integers(len(SYLLABLES), size=count))] = None
    return list(words)


def make_corpus(articles: int, seed: int = SEED) -> list[Document]:
    """``articles`` synthetic articles (deterministic for a seed): a two-word title, 80 to 400 words."""
    rng = np.random.default_rng(seed)
    vocabulary = make_vocabulary(VOCABULARY, rng)
    weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** 1.05  # Zipf-like word frequencies
    weights /= weights.sum()
    lengths = rng.integers(80, 401, size=articles)
    words = rng.choice(len(vocabulary), size=int(lengths.sum()), p=weights)
    names = make_vocabulary(2 * articles + 1000, np.random.default_rng(seed + 1))
    docs, offset = [], 0
    for n, length in enumerate(lengths):
        title = f"{names[2 * n].capitalize()} {names[2 * n + 1].capitalize()}"
        body = [vocabulary[i] for i in words[offset:offset + length]]
        offset += length
        sentences = [" ".join(body[i:i + 12]).capitalize() + "." for i in range(0, len(body), 12)]
        docs.append(Document(f"doc-{n:07d}", title, f"{title} is " + " ".join(sentences)))
    return docs


def make_queries(corpus: Sequence[Document], count: int, seed: int = SEED) -> list[tuple[str, str]]:
    """``(query, source doc id)`` pairs: one title word and three words of the source article's text."""
    rng = np.random.default_rng(seed + 2)
    queries = []
    for position in rng.integers(len(corpus), size=count):
        doc = corpus[int(position)]
        title_word = doc.title.split()[int(rng.integers(2))]
        text = doc.text.split()
        picked = [text[int(i)].strip(".").lower() for i in rng.integers(3, len(text), size=3)]
        queries.append((" ".join([title_word, *picked]), doc.id))
    return queries


# ---------------------------------------------------------------------------------------- timing


def time_calls(call: Callable[[int], object], calls: int) -> list[float]:
    """Latencies in ms of ``call(i)`` for ``i`` in ``range(calls)``."""
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def summarize(name: str, samples: Sequence[float], recall: float | None = None) -> Row:
    """A :class:`Row` from latencies in ms."""
    ordered = sorted(samples)
    p99 = ordered[-1] if len(ordered) < 2 else statistics.quantiles(ordered, n=100, method="inclusive")[98]
    return Row(name=name, method=ROW_METHOD[name], calls=len(ordered), qps=1000.0 * len(ordered) / sum(ordered),
               p50_ms=statistics.median(ordered), p99_ms=p99, recall_at_5=recall)


def ranking_row(name: str, rank: Callable[[str], list[str]], queries: Sequence[tuple[str, str]]) -> Row:
    """Time ``rank`` over the queries and score its recall@5."""
    found: list[bool] = []

    def call(i: int) -> None:
        query, source = queries[i]
        found.append(source in rank(query))

    for query, _ in queries[:3]:  # warm-up: page cache, first imports
        rank(query)
    samples = time_calls(call, len(queries))
    return summarize(name, samples, recall=sum(found) / len(found))


def top_k(scores: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Positions of the ``k`` highest scores (any order among ties)."""
    k = min(k, len(scores))
    return np.argpartition(-scores, k - 1)[:k]


# ------------------------------------------------------------------------------------------- rows


def measure_ranking(corpus: list[Document], queries: list[tuple[str, str]], index_dir: Path,
                    report: Report) -> BM25Retriever:
    """The bm25s, bm25s-retrieve, rank_bm25 and bm25s+snippets rows, and the build times."""
    started = time.perf_counter()
    BM25Retriever(corpus, index_dir=index_dir).close()
    report.build_s["bm25s build (tokenize, index, save)"] = time.perf_counter() - started
    started = time.perf_counter()
    retriever = BM25Retriever(corpus, index_dir=index_dir)
    report.build_s["bm25s load (mmap)"] = time.perf_counter() - started
    ids = [doc.id for doc in corpus]
    tokenize = retriever.tokenizer

    report.rows.append(ranking_row("bm25s", lambda q: [d for d, _ in retriever.rank(q, TOP_K)], queries))
    library = retriever._bm25
    assert library is not None

    def library_rank(query: str) -> list[str]:
        tokens = [t for t in tokenize(query) if t in library.vocab_dict] or [""]
        found = library.retrieve([tokens], k=TOP_K, show_progress=False, n_threads=0)
        return [ids[int(i)] for i in found.documents[0]]

    report.rows.append(ranking_row("bm25s-retrieve", library_rank, queries))

    measure_rank_bm25(corpus, queries, tokenize, report)  # its index is freed on return
    report.rows.append(ranking_row("bm25s+snippets", lambda q: [h.doc_id for h in retriever.search(q, TOP_K)],
                                   queries))
    return retriever


def measure_rank_bm25(corpus: list[Document], queries: list[tuple[str, str]], tokenize: Callable[[str], list[str]],
                      report: Report) -> None:
    """The rank_bm25 row (BM25Okapi over the same tokens) and its build time."""
    started = time.perf_counter()
    okapi = BM25Okapi([tokenize(f"{doc.title}\n{doc.text}") for doc in corpus])
    report.build_s["rank_bm25 build (tokenize, index)"] = time.perf_counter() - started
    ids = [doc.id for doc in corpus]
    report.rows.append(ranking_row("rank_bm25", lambda q: [ids[i] for i in top_k(okapi.get_scores(tokenize(q)))],
                                   queries))


def search_action(query: str) -> str:
    """The action text of a ``search`` tool call."""
    return f'<tool_call>{json.dumps({"name": "search", "arguments": {"query": query, "k": TOP_K}})}</tool_call>'


def env_step_samples(env: SearchEnv, queries: Sequence[tuple[str, str]]) -> list[float]:
    """Latencies (ms) of one ``search`` step per query; a new episode every few steps (untimed)."""
    samples = []
    for i, (query, _) in enumerate(queries):
        if i % ENV_STEPS_PER_EPISODE == 0:
            env.reset(seed=i)
        started = time.perf_counter()
        _, _, _, truncated, info = env.step(search_action(query))
        samples.append((time.perf_counter() - started) * 1000.0)
        if truncated or not info["ok"]:
            raise RuntimeError(f"the search step failed: {info}")
    return samples


def benchmark_tasks(queries: Sequence[tuple[str, str]]) -> list[Task]:
    """One task per source article (the env needs tasks; the answer does not matter here)."""
    return [Task(id=f"bench/{n}", env="Search", family="single", prompt=f"Find {source}.", answer=[source])
            for n, (_, source) in enumerate(queries[:50])]


def measure_env_steps(retriever: BM25Retriever, corpus: list[Document], queries: list[tuple[str, str]],
                      index_dir: Path, workdir: Path, report: Report) -> None:
    """Step latency of a ``search`` action, in-process and over the HTTP service (a separate process)."""
    tasks = benchmark_tasks(queries)
    env = SearchEnv(tasks=tasks, retriever=retriever)
    try:
        env_step_samples(env, queries[:5])  # warm-up
        report.rows.append(summarize("env-step-in-process", env_step_samples(env, queries)))
    finally:
        env.close()
    corpus_file = workdir / "corpus.jsonl"
    with corpus_file.open("w", encoding="utf-8") as out:
        for doc in corpus:
            out.write(json.dumps(doc.to_dict(), ensure_ascii=False) + "\n")
    with ServiceProcess(corpus_file, index_dir) as url:
        env = SearchEnv(tasks=tasks, retriever=url)
        try:
            env_step_samples(env, queries[:5])
            report.rows.append(summarize("env-step-http", env_step_samples(env, queries)))
        finally:
            env.close()


class ServiceProcess:
    """``python -m agentgym_envs.search.server`` on a free loopback port, for a ``with`` block."""

    def __init__(self, corpus_file: Path, index_dir: Path) -> None:
        self.argv = [sys.executable, "-m", "agentgym_envs.search.server", "--corpus", str(corpus_file),
                     "--index-dir", str(index_dir), "--host", "127.0.0.1", "--port", "0"]
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        env=env)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.process.kill()
            raise RuntimeError(f"the retrieval service did not start (exit {self.process.wait()}): {line!r}")
        return line.split()[2]

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)


# ----------------------------------------------------------------------------------------- report


def add_speedups(report: Report) -> None:
    """Set each ranking row's speed-up over the rank_bm25 row and put the rows in :data:`ROWS` order."""
    by_name = {row.name: row for row in report.rows}
    if BASELINE in by_name:
        base = by_name[BASELINE].qps
        report.rows = [Row(**{**asdict(row), "speedup": row.qps / base}) if row.recall_at_5 is not None else row
                       for row in report.rows]
    order = {name: index for index, name in enumerate(ROWS)}
    report.rows.sort(key=lambda row: order[row.name])


def run_benchmark(articles: int = 50_000, queries: int = 1_000, *, http: bool = True) -> Report:
    """Build the corpus and queries, measure every row and return the report.

    Args:
        articles: Corpus size.
        queries: Queries per row.
        http: Also measure the env step over the HTTP service (starts a server process).
    """
    report = Report(articles=articles, queries=queries,
                    machine={"cpus": str(os.cpu_count()), "platform": platform.platform(),
                             "python": platform.python_version(), "bm25s": bm25s.__version__})
    corpus = make_corpus(articles)
    report.corpus_words = sum(len(doc.text.split()) for doc in corpus)
    query_list = make_queries(corpus, queries)
    with tempfile.TemporaryDirectory(prefix="agentrl-retrieval-") as tmp:
        workdir = Path(tmp)
        index_dir = workdir / "index"
        retriever = measure_ranking(corpus, query_list, index_dir, report)
        try:
            if http:
                measure_env_steps(retriever, corpus, query_list, index_dir, workdir, report)
            else:
                report.skipped["env-step-http"] = "--no-http"
                env = SearchEnv(tasks=benchmark_tasks(query_list), retriever=retriever)
                report.rows.append(summarize("env-step-in-process", env_step_samples(env, query_list)))
                env.close()
        finally:
            retriever.close()
    add_speedups(report)
    return report


def render(report: Report, console: Console) -> None:
    """Print the timing table, the build times and the headline ratio."""
    title = (f"Retrieval over {report.articles:,} articles ({report.corpus_words:,} words), {report.queries:,} "
             f"queries, top {TOP_K} ({report.machine.get('cpus')} CPUs, Python {report.machine.get('python')})")
    table = Table(title=title, caption=f"speed-up = queries/s over {BASELINE}'s; one thread, sequential calls")
    for column, justify in (("row", "left"), ("one call", "left"), ("calls", "right"), ("queries/s", "right"),
                            ("p50 ms", "right"), ("p99 ms", "right"), ("speed-up", "right"),
                            ("recall@5", "right")):
        table.add_column(column, justify=justify, no_wrap=column != "one call")
    for row in report.rows:
        speedup = "-" if row.speedup is None else f"{row.speedup:,.1f}x"
        recall = "-" if row.recall_at_5 is None else f"{row.recall_at_5:.3f}"
        table.add_row(row.name, row.method, str(row.calls), f"{row.qps:,.0f}", f"{row.p50_ms:,.2f}",
                      f"{row.p99_ms:,.2f}", speedup, recall)
    console.print(table)
    for what, seconds in report.build_s.items():
        console.print(f"{what}: {seconds:,.2f} s")
    for name, reason in report.skipped.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
    by_name = {row.name: row for row in report.rows}
    if "bm25s" in by_name and BASELINE in by_name:
        console.print(f"bm25s answers {by_name['bm25s'].speedup:,.1f}x the queries per second of {BASELINE} "
                      f"({by_name['bm25s'].qps:,.0f} against {by_name[BASELINE].qps:,.0f}).")


def write_json(report: Report, path: Path) -> None:
    """Write the report as JSON."""
    path.write_text(json.dumps(asdict(report), indent=2) + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed search", description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=50_000, help="articles in the synthetic corpus")
    parser.add_argument("--queries", type=int, default=1_000, help="queries timed per row")
    parser.add_argument("--no-http", action="store_true", help="skip the env step over the HTTP service")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    args = build_parser().parse_args(argv)
    if args.articles < 10 or args.queries < 1:
        raise SystemExit(f"expected --articles >= 10 and --queries >= 1, got {args.articles} and {args.queries}")
    report = run_benchmark(args.articles, args.queries, http=not args.no_http)
    render(report, Console(width=None if sys.stdout.isatty() else 150))  # full rows when piped to a file
    if args.json is not None:
        write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
