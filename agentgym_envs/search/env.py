"""Search-v0: multi-hop question answering over a document collection with a search engine.

The agent has two tools: ``search`` (BM25 over titles and texts; ranked doc ids, titles and
query-focused snippets) and ``open`` (an article's text, page by page). It ends the episode with
``<answer>``, a short entity name or value, checked by exact match against the gold answer and its
aliases. Three task families of the bundled ``fictional-v1`` world: ``single`` (one fact),
``bridge`` (find an entity, then a fact about it) and ``comparison`` (compare two entities).

The retriever runs in-process by default (a memory-mapped index shared through the page cache);
``retriever="http://127.0.0.1:8000"`` uses the loopback service of
:mod:`agentgym_envs.search.server` instead, so that many workers share one index and the workers
never load the corpus. A retriever that does not answer is an infrastructure error
(``info["infra_error"]``, the episode truncates), never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Unpack

from agentgym_envs.core import TextEnv, TextEnvOptions
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search.corpus import resolve_corpus
from agentgym_envs.search.errors import UnknownDocumentError
from agentgym_envs.search.passages import PAGE_CHARS, paginate
from agentgym_envs.search.remote import RemoteRetriever
from agentgym_envs.search.retriever import BM25Retriever, Hit, Retriever
from agentgym_envs.tools import Tool, ToolResult
from rewards import (
    CompositeReward,
    RewardFn,
    Term,
    exact_match_reward,
    f1_reward,
    format_reward,
    make_tool_shaping_reward,
)
from tasks import Document, Task, Trajectory

FAMILIES = ("single", "bridge", "comparison")
REQUIRED_TOOLS = dict.fromkeys(FAMILIES, ("search",))
DEFAULT_CORPUS = "fictional-v1"
MAX_K = 20
DEFAULT_K = 5

SEARCH_TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "Keywords to look for (names, places, dates)."},
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": DEFAULT_K,
              "description": f"How many results to return (1 to {MAX_K})."},
    },
    "required": ["query"],
    "additionalProperties": False,
}
OPEN_TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "doc_id": {"type": "string", "minLength": 1, "description": "A doc id from the search results."},
        "page": {"type": "integer", "minimum": 1, "default": 1, "description": "Page of the article, from 1."},
    },
    "required": ["doc_id"],
    "additionalProperties": False,
}
INSTRUCTIONS = (
    "You answer a question using a collection of encyclopedia articles. Answer from the articles, not from "
    "memory: the collection may describe a world that differs from the one you know. Use `search` to find "
    "articles by keywords; it returns ranked doc ids, titles and the best-matching passage of each. Use "
    "`open` with a doc id to read an article, page by page. Some questions need two steps: find the first "
    "entity, then search for a fact about it. When you know the answer, give only the short answer (an "
    "entity name, a date or a number, not a sentence) inside <answer>...</answer>, e.g. <answer>Marrowick"
    "</answer>. You answer once."
)


def default_reward() -> CompositeReward:
    """Exact match is the reward; F1, format and tool use (``search`` required) are logged at weight 0.

    Raise the weights of ``format`` and ``tool_use`` (kept small against the outcome) to shape.
    """
    return CompositeReward([
        Term("outcome", exact_match_reward, weight=1.0),
        Term("f1", f1_reward, weight=0.0),
        Term("format", format_reward, weight=0.0),
        Term("tool_use", make_tool_shaping_reward(required_tools=REQUIRED_TOOLS["single"]), weight=0.0),
    ])


class SearchEnv(TextEnv):
    """Question answering with a search engine over a corpus.

    Args:
        corpus: The documents: a bundled corpus name (default ``"fictional-v1"``), a JSONL file of
            ``{"id", "title", "text"}``, or a sequence of :class:`~tasks.records.Document`. Loaded on the
            first ``reset``; unused when ``retriever`` is given.
        retriever: None for an in-process :class:`BM25Retriever` over ``corpus``; the URL of the
            retrieval service (``"http://127.0.0.1:8000"``); or any object of the :class:`Retriever`
            protocol (shared, so this env does not close it). For ``AsyncVectorEnv`` pass None or a URL:
            each worker then opens the same saved index (memory-mapped) or talks to the one service.
        index_dir: Where the in-process index lives (default ``~/.cache/agentrl/bm25/<key>``).
        page_chars: Length of a page of ``open``.
        **options: Every env's options (:class:`~agentgym_envs.core.TextEnvOptions`: ``split``, ``splits_dir``,
            ``families``, ``tasks``, ``reward``, the limits, ``render_mode``, ``prompt_style``); see
            :class:`~agentgym_envs.core.TextEnv`. Families: ``"single"``, ``"bridge"``, ``"comparison"``.
            Search runs no agent code, so it takes no ``sandbox``.

    Example:
        >>> import gymnasium as gym, agentgym_envs                                  # doctest: +SKIP
        >>> env = gym.make("agentrl/Search-v0", retriever="http://127.0.0.1:8000")  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)                                          # doctest: +SKIP
        >>> env.step('<tool_call>{"name": "search", "arguments": {"query": "Marrowick"}}</tool_call>')  # doctest: +SKIP
    """

    env_name: ClassVar[str] = "Search"
    task_families: ClassVar[tuple[str, ...]] = FAMILIES
    required_tools: ClassVar[dict[str, tuple[str, ...]]] = REQUIRED_TOOLS

    def __init__(self, *, corpus: Sequence[Document] | str = DEFAULT_CORPUS, retriever: Retriever | str | None = None,
                 index_dir: str | None = None, page_chars: int = PAGE_CHARS,
                 **options: Unpack[TextEnvOptions]) -> None:
        if page_chars < 200:
            raise EnvConfigError(f"page_chars: expected >= 200, got {page_chars}")
        if retriever is not None and not isinstance(retriever, str | Retriever):
            raise EnvConfigError(f"retriever: expected None, a URL or a Retriever, got {type(retriever).__name__}")
        super().__init__(**options)
        if retriever is None and _is_corpus_name(corpus):
            _check_task_corpus(self.tasks, corpus)
        self.corpus = corpus
        self.index_dir = index_dir
        self.page_chars = page_chars
        self._retriever_spec = retriever
        self._retriever: Retriever | None = None
        self._owns_retriever = not isinstance(retriever, Retriever)
        self._retrieved: list[str] = []
        self._opened: list[str] = []
        self._tools = (
            Tool("search", "Search the article collection; returns ranked doc ids, titles and snippets.",
                 SEARCH_TOOL_SCHEMA, self._search),
            Tool("open", f"Read an article by doc id, one page (about {page_chars:,} characters) at a time.",
                 OPEN_TOOL_SCHEMA, self._open),
        )

    @property
    def tools(self) -> Sequence[Tool]:
        """``search`` and ``open``."""
        return self._tools

    @property
    def retriever(self) -> Retriever:
        """The retriever, created on first use (loading the corpus and index when in-process)."""
        return self._require_retriever()

    def _require_retriever(self) -> Retriever:
        if self._retriever is None:
            spec = self._retriever_spec
            if spec is None:
                self._retriever = BM25Retriever(resolve_corpus(self.corpus), index_dir=self.index_dir)
            elif isinstance(spec, str):
                self._retriever = RemoteRetriever(spec)
            else:
                self._retriever = spec
        return self._retriever

    def default_reward(self, family: str) -> RewardFn:
        """:func:`default_reward` (the same for every family)."""
        return default_reward()

    def _instructions(self, task: Task) -> str:
        return INSTRUCTIONS

    def _settings(self) -> dict[str, Any]:
        corpus = self.corpus if isinstance(self.corpus, str) else f"custom ({len(self.corpus)} documents)"
        retriever = self._retriever_spec
        source = "in-process" if retriever is None else retriever if isinstance(retriever, str) else "custom"
        return {"corpus": corpus, "retriever": source, "page_chars": self.page_chars}

    def _begin_episode(self, task: Task) -> None:
        self._require_retriever()  # build or load the index now, not inside the first tool call
        self._retrieved, self._opened = [], []

    # -- tools ----------------------------------------------------------------------------------
    def _search(self, query: str, k: int = DEFAULT_K) -> ToolResult:
        if not query.strip():
            return ToolResult("search: expected a query with at least one keyword, got only whitespace.", ok=False)
        hits = self.retriever.search(query, int(k))
        self._retrieved.extend(hit.doc_id for hit in hits)
        if not hits:
            return ToolResult(f"No article matches {query!r}. Try other keywords: names, places, dates.")
        return ToolResult("\n".join(_render_hit(rank, hit) for rank, hit in enumerate(hits, 1)))

    def _open(self, doc_id: str, page: int = 1) -> ToolResult:
        try:
            doc = self.retriever.document(doc_id)
        except UnknownDocumentError as exc:
            hint = f" Did you mean {exc.suggestion!r}?" if exc.suggestion else ""
            return ToolResult(f"open: unknown doc_id {doc_id!r}.{hint} Use a doc id from the search results "
                              "(the part after [n]).", ok=False)
        pages = paginate(doc.text, self.page_chars)
        page = int(page)
        if page > len(pages):
            return ToolResult(f"open: page {page} is out of range: {doc.id} has {len(pages)} "
                              f"page{'s' if len(pages) > 1 else ''}; expected 1 to {len(pages)}.", ok=False)
        self._opened.append(doc.id)
        header = f"{doc.id} | {doc.title} (page {page} of {len(pages)})"
        footer = (f'[page {page} of {len(pages)}; call open with "page": {page + 1} for more]'
                  if page < len(pages) else f"[page {page} of {len(pages)}; end of article]")
        return ToolResult(f"{header}\n\n{pages[page - 1]}\n\n{footer}")

    # -- scoring --------------------------------------------------------------------------------
    def _evidence(self, task: Task, trajectory: Trajectory) -> dict[str, Any]:
        """The doc ids the episode's searches returned and the ones it opened."""
        return {"retrieved_doc_ids": tuple(self._retrieved), "opened_doc_ids": tuple(self._opened)}

    def close(self) -> None:
        """Close the retriever (and its HTTP connections) if this env created it; idempotent."""
        retriever, self._retriever = self._retriever, None
        if retriever is not None and self._owns_retriever:
            retriever.close()
        super().close()


def _render_hit(rank: int, hit: Hit) -> str:
    return f"[{rank}] {hit.doc_id} | {hit.title}\n    {hit.snippet}"


def _is_corpus_name(corpus: Sequence[Document] | str) -> bool:
    """True for the name of a bundled corpus (not a list of documents, not a file path)."""
    return isinstance(corpus, str) and not corpus.endswith(".jsonl") and "/" not in corpus


def _check_task_corpus(tasks: Sequence[Task], corpus: Sequence[Document] | str) -> None:
    """Tasks written for another bundled corpus would be unanswerable: refuse them up front."""
    others = sorted({str(t.metadata["corpus"]) for t in tasks if t.metadata.get("corpus") not in (None, corpus)})
    if others:
        raise EnvConfigError(f"corpus: the tasks were written for corpus {others}, got corpus={corpus!r}; "
                             "pass the matching corpus")
