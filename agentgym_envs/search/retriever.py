"""Retrievers: the :class:`Retriever` protocol and :class:`BM25Retriever`, an in-process BM25 index on bm25s.

The index is built once per corpus and tokenizer, saved under ``~/.cache/agentrl/bm25/<key>`` (or
``$XDG_CACHE_HOME/agentrl/bm25/<key>``, or an ``index_dir`` of your choice), and loaded
memory-mapped by every later process, so that many environment workers share one copy of it in
the page cache. ``<key>`` is the first 16 hex digits of a sha256 over the ids, titles and texts of
the documents and the tokenizer settings: a changed corpus or tokenizer gets a fresh index, never a
stale one. Concurrent builders of the same index wait on a file lock; only one builds.

Example:
    >>> from tasks import Document
    >>> docs = [Document("d1", "Ada Lovelace", "Ada Lovelace wrote the first program."),
    ...         Document("d2", "Alan Turing", "Alan Turing defined computability.")]
    >>> retriever = BM25Retriever(docs, index_dir=tmp_path / "index")      # doctest: +SKIP
    >>> retriever.search("who wrote the first program", k=1)[0].doc_id     # doctest: +SKIP
    'd1'
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN
from rapidfuzz import process as fuzzy_process

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.search.errors import UnknownDocumentError
from agentgym_envs.search.passages import SNIPPET_CHARS, best_passage
from tasks.locks import file_lock, lock_path
from tasks.progress import reported
from tasks.records import Document

INDEX_FORMAT = 1
"""Version of the on-disk layout; part of the index key."""

QUESTION_WORDS = ("who", "whom", "whose", "what", "which", "when", "where", "how", "why", "did", "does", "do")
ENGLISH_STOPWORDS: tuple[str, ...] = tuple(sorted({*STOPWORDS_EN, *QUESTION_WORDS}))
"""Lucene's English stopwords plus question words (which every question has and no fact needs)."""

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
META_NAME = "agentrl-index.json"


@dataclass(frozen=True)
class Hit:
    """One search result.

    Attributes:
        doc_id: Id of the document.
        title: Its title.
        snippet: The passage that best matches the query (about 300 characters).
        score: BM25 score (higher is better).
    """

    doc_id: str
    title: str
    snippet: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    """What the Search environment needs from a retriever (in-process or remote)."""

    def search(self, query: str, k: int) -> list[Hit]:
        """The best ``k`` documents for ``query``, best first (fewer when fewer match)."""
        ...

    def document(self, doc_id: str) -> Document:
        """The document with id ``doc_id``.

        Raises:
            UnknownDocumentError: No document has that id.
        """
        ...

    def close(self) -> None:
        """Release files, memory maps and connections; idempotent."""
        ...


class Tokenizer:
    """Lower-cases, splits into words of two or more characters, drops stopwords, stems (Snowball).

    Thread-safe: each thread gets its own stemmer (PyStemmer's are not thread-safe).

    Args:
        stopwords: Words to drop (compared before stemming).
        stemmer: A Snowball algorithm name known to PyStemmer (``"english"``), or None for no stemming.
    """

    def __init__(self, stopwords: Sequence[str] = ENGLISH_STOPWORDS, stemmer: str | None = "english") -> None:
        if stemmer is not None and stemmer not in Stemmer.algorithms():
            raise EnvConfigError(f"stemmer: expected None or one of {Stemmer.algorithms()}, got {stemmer!r}")
        self.stopwords = frozenset(word.lower() for word in stopwords)
        self.stemmer = stemmer
        self._pattern = re.compile(TOKEN_PATTERN)
        self._local = threading.local()

    def __call__(self, text: str) -> list[str]:
        """The tokens of ``text``, in order (what the index and the queries are made of)."""
        words = [w for w in map(str.lower, self._pattern.findall(text)) if w not in self.stopwords]
        return self._stem(words)

    def positions(self, text: str) -> list[tuple[int, str]]:
        """The tokens of :meth:`__call__` with the offset in ``text`` where each word starts."""
        found = [(m.start(), w) for m in self._pattern.finditer(text) if (w := m.group().lower()) not in self.stopwords]
        return list(zip((offset for offset, _ in found), self._stem([w for _, w in found]), strict=True))

    def find(self, text: str, terms: Collection[str]) -> list[tuple[int, str]]:
        """``(offset, token)`` of the words of ``text`` whose token is in ``terms``, in text order.

        The same as filtering :meth:`positions`, but it stems only the distinct words that start like a
        term and finds the matching words with one regular expression: snippets cost several times less.
        """
        lowered = text.lower()
        if len(lowered) != len(text):  # a letter whose lower case is longer: offsets would shift
            return [(offset, token) for offset, token in self.positions(text) if token in terms]
        initials = {term[:1] for term in terms}  # Snowball stems only change endings: first letters agree
        words = sorted(w for w in set(self._pattern.findall(lowered)) - self.stopwords if w[:1] in initials)
        forms = {word: token for word, token in zip(words, self._stem(words), strict=True) if token in terms}
        if not forms:
            return []
        alternatives = "|".join(map(re.escape, sorted(forms, key=lambda w: (-len(w), w))))
        return [(m.start(), forms[m.group()]) for m in re.finditer(rf"\b(?:{alternatives})\b", lowered)]

    def _stem(self, words: list[str]) -> list[str]:
        if self.stemmer is None:
            return words
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            # No cache: PyStemmer's default one (10,000 words) thrashes on a corpus vocabulary and then
            # costs 3x more than stemming afresh (measured: 1.0 against 0.3 us a word).
            stemmer = self._local.stemmer = Stemmer.Stemmer(self.stemmer, 0)
        return stemmer.stemWords(words)

    def config(self) -> dict[str, Any]:
        """Everything that changes the tokens (part of the index key)."""
        return {"pattern": TOKEN_PATTERN, "stopwords": sorted(self.stopwords), "stemmer": self.stemmer}


def default_index_root() -> Path:
    """``$XDG_CACHE_HOME/agentrl/bm25``, by default ``~/.cache/agentrl/bm25``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "agentrl" / "bm25"


def index_key(corpus: Sequence[Document], tokenizer: Tokenizer, params: dict[str, Any]) -> str:
    """First 16 hex digits of a sha256 over the corpus (ids, titles, texts), tokenizer and BM25 parameters."""
    digest = hashlib.sha256()
    settings = {"format": INDEX_FORMAT, "tokenizer": tokenizer.config(), "bm25": params}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for doc in corpus:
        for part in (doc.id, doc.title, doc.text):
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()[:16]


class BM25Retriever:
    """BM25 over the titles and texts of a corpus, built once and then loaded memory-mapped.

    Thread-safe: searches only read the memory-mapped index.

    Args:
        corpus: The documents; ids must be unique.
        index_dir: Where the index lives (built there when absent). Default:
            ``default_index_root() / index_key(...)``.
        stemmer: Snowball algorithm for PyStemmer, or None.
        stopwords: Words left out of the index and queries.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalization.
        snippet_chars: Length of each hit's snippet.

    Raises:
        EnvConfigError: An empty corpus, duplicate ids, or an ``index_dir`` holding another corpus's index.
    """

    def __init__(self, corpus: Sequence[Document], *, index_dir: str | os.PathLike[str] | None = None,
                 stemmer: str | None = "english", stopwords: Sequence[str] = ENGLISH_STOPWORDS,
                 k1: float = 1.5, b: float = 0.75, snippet_chars: int = SNIPPET_CHARS) -> None:
        self.documents = tuple(corpus)
        if not self.documents:
            raise EnvConfigError("corpus: expected at least one document, got none")
        self._positions = {doc.id: i for i, doc in enumerate(self.documents)}
        if len(self._positions) != len(self.documents):
            raise EnvConfigError(f"corpus: expected unique document ids, got "
                                 f"{len(self.documents) - len(self._positions)} duplicates")
        self.tokenizer = Tokenizer(stopwords, stemmer)
        self.params = {"k1": k1, "b": b, "method": "lucene"}
        self.snippet_chars = snippet_chars
        self.key = index_key(self.documents, self.tokenizer, self.params)
        self.index_dir = Path(index_dir) if index_dir is not None else default_index_root() / self.key
        self._titles: dict[str, str] | None = None
        self._bm25: bm25s.BM25 | None = self._load_or_build()
        self._doc_freqs = np.diff(np.asarray(self._bm25.scores["indptr"]))

    # -- index on disk ------------------------------------------------------------------------
    def _load_or_build(self) -> bm25s.BM25:
        if not self._index_ready(locked=False):
            with file_lock(lock_path(self.index_dir)):
                if not self._index_ready(locked=True):
                    self._build()
        return bm25s.BM25.load(str(self.index_dir), mmap=True, show_progress=False)

    def _index_ready(self, *, locked: bool) -> bool:
        """True when ``index_dir`` holds this corpus's index; False when it is absent or empty.

        A folder of other files without the index's metadata is an error, found only under the build lock
        (``locked``): without it, another builder's rename of its finished index may land between the look for the
        metadata and the look at the folder.
        """
        meta_path = self.index_dir / META_NAME
        if not meta_path.is_file():
            if locked and self.index_dir.exists() and any(self.index_dir.iterdir()):
                raise EnvConfigError(f"index_dir: expected an agentrl BM25 index or an empty folder, got "
                                     f"{str(self.index_dir)!r} holding other files")
            return False
        meta = json.loads(meta_path.read_text())
        if meta.get("key") != self.key:
            raise EnvConfigError(f"index_dir: {str(self.index_dir)!r} holds the index of another corpus or "
                                 f"tokenizer (key {meta.get('key')!r}, expected {self.key!r}); pass another "
                                 "index_dir or delete that one")
        return True

    def _build(self) -> None:
        """Tokenize, index, save to a temporary folder, then move it into place atomically."""
        with reported(f"building the BM25 index of {len(self.documents):,} documents in {self.index_dir} "
                      "(once; later runs load it)"):
            tokens = [self.tokenizer(f"{doc.title}\n{doc.text}") for doc in self.documents]
            bm25 = bm25s.BM25(**self.params)
            bm25.index(tokens, show_progress=False)
        self.index_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.index_dir.name}.", dir=self.index_dir.parent))
        try:
            bm25.save(str(staging), show_progress=False)
            meta = {"key": self.key, "format": INDEX_FORMAT, "documents": len(self.documents),
                    "tokenizer": self.tokenizer.config(), "bm25": self.params, "bm25s": bm25s.__version__}
            (staging / META_NAME).write_text(json.dumps(meta, indent=1) + "\n")
            if self.index_dir.exists():  # an empty folder named by the caller
                self.index_dir.rmdir()
            staging.rename(self.index_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    # -- the Retriever protocol -----------------------------------------------------------------
    def search(self, query: str, k: int) -> list[Hit]:
        """The best ``k`` documents for ``query``, best first; ties go to the earlier document.

        Documents that share no term with the query are never returned, so a query of stopwords only
        returns nothing.

        Raises:
            ValueError: ``k`` is below 1.
        """
        return [self._hit(position, score, terms) for position, score, terms in self._rank(query, k)]

    def rank(self, query: str, k: int) -> list[tuple[str, float]]:
        """``(doc_id, score)`` of the best ``k`` documents, without snippets (what benchmarks time)."""
        return [(self.documents[position].id, score) for position, score, _ in self._rank(query, k)]

    def document(self, doc_id: str) -> Document:
        """The document with id ``doc_id``.

        Raises:
            UnknownDocumentError: No such id; it carries the closest id (or the id of a document with
                exactly that title) as ``suggestion``.
        """
        position = self._positions.get(doc_id)
        if position is None:
            raise UnknownDocumentError(doc_id, self.suggest(doc_id))
        return self.documents[position]

    def suggest(self, doc_id: str) -> str | None:
        """The id of a document titled ``doc_id`` (any case), else the closest id, else None."""
        if self._titles is None:
            self._titles = {}
            for doc in self.documents:
                self._titles.setdefault(doc.title.casefold(), doc.id)
        if doc_id.strip().casefold() in self._titles:
            return self._titles[doc_id.strip().casefold()]
        match = fuzzy_process.extractOne(doc_id, list(self._positions), score_cutoff=80)
        return match[0] if match else None

    def close(self) -> None:
        """Drop the memory-mapped index; searches afterwards raise."""
        self._bm25 = None

    def __len__(self) -> int:
        return len(self.documents)

    # -- internals ------------------------------------------------------------------------------
    def _rank(self, query: str, k: int) -> list[tuple[int, float, list[str]]]:
        if k < 1:
            raise ValueError(f"k: expected >= 1, got {k}")
        bm25 = self._index()
        terms = self.tokenizer(query)
        token_ids = sorted({bm25.vocab_dict[t] for t in terms if t in bm25.vocab_dict})
        if not token_ids:
            return []
        scores = bm25_scores(bm25, token_ids)
        positions = top_k(scores, k)
        return [(int(p), float(scores[p]), terms) for p in positions]

    def _index(self) -> bm25s.BM25:
        if self._bm25 is None:
            raise EnvConfigError("this BM25Retriever is closed")
        return self._bm25

    def _hit(self, position: int, score: float, terms: list[str]) -> Hit:
        doc = self.documents[position]
        snippet = best_passage(doc.text, self._term_weights(terms), self.tokenizer.find, self.snippet_chars)
        return Hit(doc_id=doc.id, title=doc.title, snippet=snippet, score=score)

    def _term_weights(self, terms: list[str]) -> dict[str, float]:
        """IDF of each query term, so that a rare name outweighs a common word in snippet choice."""
        vocab, total = self._index().vocab_dict, len(self.documents)
        weights = {}
        for term in terms:
            if term in vocab:
                df = int(self._doc_freqs[vocab[term]])
                weights[term] = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
        return weights


def bm25_scores(bm25: bm25s.BM25, token_ids: list[int]) -> np.ndarray:
    """Each document's score for the terms ``token_ids``: the sum of the index's precomputed per-(term, document)
    BM25 scores, read from its (memory-mapped) CSC arrays."""
    index = bm25.scores
    indptr, indices, data = index["indptr"], index["indices"], index["data"]
    rows = [indices[indptr[t]:indptr[t + 1]] for t in token_ids]
    values = [data[indptr[t]:indptr[t + 1]] for t in token_ids]
    return np.bincount(np.concatenate(rows), weights=np.concatenate(values), minlength=index["num_docs"])


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest positive scores, by score descending then position ascending."""
    matching = np.flatnonzero(scores > 0)
    if len(matching) > k:
        threshold = np.partition(scores[matching], len(matching) - k)[len(matching) - k]
        matching = matching[scores[matching] >= threshold]  # keeps every tie at the boundary
    order = np.lexsort((matching, -scores[matching]))
    return matching[order[:k]]


__all__ = ["ENGLISH_STOPWORDS", "BM25Retriever", "Hit", "Retriever", "Tokenizer", "bm25_scores", "default_index_root",
           "index_key", "top_k"]
