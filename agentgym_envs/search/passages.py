"""Cutting articles into what an agent reads: a query-focused snippet, and fixed-size pages.

Both are pure and deterministic, so that the same search or ``open`` call always shows the same
text (a requirement of same-seed, same-episode determinism).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence

SNIPPET_CHARS = 300
"""Default snippet length, in characters."""

PAGE_CHARS = 1500
"""Default page length of ``open``, in characters."""

ELLIPSIS = "…"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences (and lines) of ``text``, without surrounding blanks."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > start:
            spans.append((start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


TermFinder = Callable[[str, Collection[str]], Sequence[tuple[int, str]]]
"""Finds query terms in a text as the index tokenizes it: ``(text, terms) -> [(offset, term), ...]``."""


def find_words(text: str, terms: Collection[str]) -> list[tuple[int, str]]:
    """Lower-cased words of ``text`` that are in ``terms``, with their offsets: the simplest :data:`TermFinder`.

    Example:
        >>> find_words("Dogs bark at dogs.", {"dogs"})
        [(0, 'dogs'), (13, 'dogs')]
    """
    return [(m.start(), word) for m in re.finditer(r"\w+", text) if (word := m.group().lower()) in terms]


def best_passage(text: str, term_weights: Mapping[str, float], find_terms: TermFinder = find_words,
                 width: int = SNIPPET_CHARS) -> str:
    """The passage of about ``width`` characters that best covers the query terms.

    Windows of consecutive sentences no longer than ``width`` (or one sentence, when a single one is
    longer) are scored by the summed weight of the distinct query terms they contain; the best window
    wins, the earliest on ties. Without any matching term the passage is the article's lead.

    Args:
        text: The article body.
        term_weights: Query terms (as the index tokenizes them) and their weights, e.g. their IDF.
        find_terms: Finds the terms in the text the way the index tokenizer would (lower-casing,
            stopwords, stemming), e.g. :meth:`~agentgym_envs.search.retriever.Tokenizer.find`.
        width: Target length in characters.

    Returns:
        One line of text, with ``…`` where it was cut.

    Example:
        >>> best_passage("Cats purr. Dogs bark loudly. Birds sing.", {"dogs": 1.0}, width=20)
        '… Dogs bark loudly. …'
    """
    sentences = split_sentences(text)
    if not sentences:
        return ""
    matches = list(find_terms(text, term_weights.keys()))
    if not matches:  # nothing matches: show the lead
        return _cut(text, 0, width)
    starts = [start for start, _ in sentences]
    terms: list[set[str]] = [set() for _ in sentences]
    for offset, token in matches:
        terms[max(0, bisect.bisect_right(starts, offset) - 1)].add(token)
    best_score, best = 0.0, (0, 0)
    for i in range(len(sentences)):
        covered: set[str] = set()
        j = i
        while j < len(sentences) and (j == i or sentences[j][1] - sentences[i][0] <= width):
            covered |= terms[j]
            j += 1
        score = math.fsum(term_weights[t] for t in covered)  # exact: the same whatever the set's order
        if score > best_score:
            best_score, best = score, (i, j - 1)
    start, end = sentences[best[0]][0], sentences[best[1]][1]
    if end - start <= width:
        return _mark(text, start, end)
    inside = [(offset, token) for offset, token in matches if start <= offset < end]
    anchor = min(inside, key=lambda match: (-term_weights[match[1]], match[0]))[0]  # the heaviest term, first
    return _cut(text, max(start, anchor - width // 3), width)


def _cut(text: str, start: int, width: int) -> str:
    """About ``width`` characters from ``start``, both ends moved to word boundaries."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + width // 2 else start
    end = min(len(text), start + width)
    if end < len(text):
        space = text.rfind(" ", start + width // 2, end)
        end = space if space > 0 else end
    return _mark(text, start, end)


def _mark(text: str, start: int, end: int) -> str:
    body = " ".join(text[start:end].split())
    return (ELLIPSIS + " " if start > 0 else "") + body + (" " + ELLIPSIS if end < len(text.rstrip()) else "")


def paginate(text: str, page_chars: int = PAGE_CHARS) -> list[str]:
    """Cut ``text`` into pages of at most ``page_chars`` characters, at paragraph, sentence or word breaks.

    A break is taken in the second half of a page: a blank line if there is one, else a line end,
    else a sentence end, else a space; a page without any is cut hard.

    Example:
        >>> paginate("One. Two. Three.", page_chars=10)
        ['One. Two.', 'Three.']
    """
    if page_chars < 1:
        raise ValueError(f"page_chars: expected >= 1, got {page_chars}")
    pages, rest = [], text.strip()
    while len(rest) > page_chars:
        cut = _page_break(rest, page_chars)
        pages.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return [*pages, rest]


_BREAKS = (("\n\n",), ("\n",), (". ", "? ", "! "), (" ",))
"""Page breaks, best first; within a tier the latest one that fits wins."""


def _page_break(text: str, page_chars: int) -> int:
    floor = page_chars // 2
    for tier in _BREAKS:
        at = max(text.rfind(separator, floor, page_chars) for separator in tier)
        if at > 0:
            return at + 1 if tier[0].endswith(" ") and tier[0] != " " else at
    return page_chars
