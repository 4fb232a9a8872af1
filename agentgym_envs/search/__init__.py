"""Search-v0: question answering over a document collection with ``search`` and ``open`` tools.

The retriever is pluggable (:class:`Retriever`): :class:`BM25Retriever` in-process (bm25s, memory-
mapped index), or :class:`RemoteRetriever` against the loopback service
``python -m agentgym_envs.search.server``.
"""

from agentgym_envs.lazy import lazy_exports

_EXPORTS = {
    "read_jsonl_corpus": "corpus",
    "resolve_corpus": "corpus",
    "FAMILIES": "env",
    "SearchEnv": "env",
    "default_reward": "env",
    "RetrieverUnavailableError": "errors",
    "UnknownDocumentError": "errors",
    "best_passage": "passages",
    "paginate": "passages",
    "RemoteRetriever": "remote",
    "BM25Retriever": "retriever",
    "Hit": "retriever",
    "Retriever": "retriever",
    "Tokenizer": "retriever",
    "default_index_root": "retriever",
    "index_key": "retriever",
}
"""Each public name and the module it lives in (imported on first use)."""

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
