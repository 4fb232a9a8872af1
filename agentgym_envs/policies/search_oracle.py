"""A tools-only oracle for Search-v0: reads the question, then the articles, hop by hop.

The oracle knows how the bundled questions are worded (it parses them with the generator's own templates,
:mod:`tasks.search.phrasing`) and how the articles phrase their facts (it has read the style guide), but it
learns every fact through the tools: it is given nothing but the
question text. For each hop it searches for the entity it has reached, picks the result whose title
is exactly that entity's name (so "Mara Velt (painter)" is never read for "Mara Velt (poet)", nor
"Bitter Mirrors" for "The Bitter Mirror"), reads the wanted fact from the snippet, or else opens the
article page by page, and goes on to the entity the fact names. The two sides of a comparison are
read side by side, their calls sharing a turn. Each action carries a one-line ``<think>``, so its
episodes double as demonstrations for SFT.

Example:
    >>> parse_question("What is the founding year of the studio that produced The Bitter Mirror?").chains
    (Chain(start='The Bitter Mirror', relations=('published_by',), cue='film'),)
    >>> read_fact("born_in", "Presk was born in Shohaven. She spoke 5 languages.")
    'Shohaven'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym_envs.policies.base import answer_action
from tasks import Task
from tasks.search.phrasing import (
    ATTENDANCE_NOUN,
    ATTRIBUTE_QUESTIONS,
    COMPARISON_QUESTIONS,
    DEFAULT_ATTENDANCE_NOUN,
    ENTITY_QUESTIONS,
    RELATION_PHRASES,
    WORK_FIRST_VERB,
)
from tasks.search.world import ORGANIZATION_KINDS, PLACE_KINDS, REGION_KINDS

# --- what the question asks ---------------------------------------------------------------------

_KIND = "(?:" + "|".join(map(re.escape, (*PLACE_KINDS, *REGION_KINDS, *ORGANIZATION_KINDS))) + ")"
_NOUN = "(?:" + "|".join(map(re.escape, sorted({*ATTENDANCE_NOUN.values(), DEFAULT_ATTENDANCE_NOUN}))) + ")"
_EITHER_ATTRIBUTE = {frozenset({"founding_year", "year"}): "start_year"}
"""Attributes that one comparison's wording serves alike ("Which is older, {a} or {b}?" of organizations, places
and works), as the fact the oracle then reads: whichever of them the article states."""


@dataclass(frozen=True)
class _Template:
    """One compiled template: what it asks (a relation, an attribute, or an attribute and a preference).

    ``cue`` is what the wording tells of the entity it names, as words a search may add: the work kinds a
    template is used for ("novel poetry collection" for "the author of {x}"), or "" when it serves any kind.
    """

    key: Any
    cue: str
    text: str
    pattern: re.Pattern[str]


def _compile(template: str) -> re.Pattern[str]:
    """A template with ``{x}``/``{s}``/``{tk}``/``{noun}`` slots (and ``{a} or {b}``) as a full-match pattern."""
    slots = {"x": "(?P<x>.+)", "s": "(?P<s>.+)", "tk": _KIND, "noun": _NOUN, "p": "(?P<pair>.+)"}
    parts = re.split(r"(\{[a-z]+\})", re.sub(r"\{a\} (?:or|and) \{b\}", "{p}", template))
    return re.compile("".join(slots[part[1:-1]] if re.fullmatch(r"\{[a-z]+\}", part) else re.escape(part)
                              for part in parts))


def _templates(rows: Iterable[tuple[Any, str, str]]) -> list[_Template]:
    """One template per distinct ``(key, text)`` of ``rows`` (key, kind or ``"*"``, text), its cue the kinds it
    serves, the most literal text first: "When was {s} born?" must be tried before the bare "In what year was
    {s}?" reads "X born" as a name."""
    kinds: dict[tuple[Any, str], list[str]] = {}
    for key, kind, text in rows:
        kinds.setdefault((key, text), []).append(kind)
    templates = [_Template(key, " ".join(kind for kind in cue if kind != "*"), text, _compile(text))
                 for (key, text), cue in kinds.items()]
    return sorted(templates, key=lambda template: -len(re.sub(r"\{[a-z]+\}", "", template.text)))


def _by_kind(table: Mapping[str, Mapping[str, tuple[str, ...]]]) -> Iterator[tuple[str, str, str]]:
    """``(relation, kind, text)`` of a table of :mod:`tasks.search.phrasing` keyed by relation, then kind."""
    return ((relation, kind, text) for relation, by_kind in table.items() for kind, texts in by_kind.items()
            for text in texts)


def _attribute_rows() -> Iterator[tuple[str, str, str]]:
    """``(attribute, kind, text)`` of every attribute question, ``{v}`` spelt out for each work kind."""
    for (_, attribute), texts in ATTRIBUTE_QUESTIONS.items():
        for text in texts:
            if "{v}" in text:
                yield from ((attribute, kind, text.replace("{v}", verb)) for kind, verb in WORK_FIRST_VERB.items())
            else:
                yield attribute, "*", text


def _comparison_templates() -> list[_Template]:
    """The comparison templates, keyed ``(attribute, prefer)``; a text that several attributes share is keyed by
    the fact that reads either (:data:`_EITHER_ATTRIBUTE`)."""
    keys: dict[str, set[tuple[str, str]]] = {}
    for (_, attribute, prefer), texts in COMPARISON_QUESTIONS.items():
        for text in texts:
            keys.setdefault(text, set()).add((attribute, prefer))
    rows = []
    for text, pairs in keys.items():
        attributes = frozenset(attribute for attribute, _ in pairs)
        attribute = next(iter(attributes)) if len(attributes) == 1 else _EITHER_ATTRIBUTE[attributes]
        (prefer,) = {prefer for _, prefer in pairs}
        rows.append(((attribute, prefer), "*", text))
    return _templates(rows)


_PHRASES = _templates(_by_kind(RELATION_PHRASES))
_ENTITY_PATTERNS = _templates(_by_kind(ENTITY_QUESTIONS))
_ATTRIBUTE_PATTERNS = _templates(_attribute_rows())
_COMPARISON_PATTERNS = _comparison_templates()
_NAME = re.compile(r"(?:the )?[A-Z0-9]")


@dataclass(frozen=True)
class Chain:
    """A named entity and the relations to follow from it.

    Attributes:
        start: The entity as the question names it ("the Royal Society of Kelden", "Mara Velt (painter)").
        relations: Relation names, in the order they are followed.
        cue: What the question says the named entity is ("film", "novel poetry collection"), or "".
    """

    start: str
    relations: tuple[str, ...] = ()
    cue: str = ""


@dataclass(frozen=True)
class Plan:
    """What a question asks.

    Attributes:
        chains: One chain for a lookup, two for a comparison.
        attribute: The attribute asked or compared; None when the answer is the entity the chain ends at.
        prefer: ``"min"`` or ``"max"`` for a comparison, else None.
    """

    chains: tuple[Chain, ...]
    attribute: str | None = None
    prefer: str | None = None


def _extend(inner: Chain, relation: str | None, cue: str) -> Chain:
    """``inner`` followed by ``relation``; ``cue`` describes the start when ``inner`` is a bare name."""
    relations = (*inner.relations, relation) if relation else inner.relations
    return Chain(inner.start, relations, inner.cue if inner.relations else cue)


def parse_phrase(text: str) -> Chain | None:
    """The chain a noun phrase denotes ("the founder of the publisher of X"), or None if it is not one.

    A phrase that starts with a capital (after an optional lower-case "the") is a name; any other must
    be a relation template around an inner phrase.

    Example:
        >>> parse_phrase("the birthplace of the director of Stoela at Brorbridge (film)")
        Chain(start='Stoela at Brorbridge (film)', relations=('created_by', 'born_in'), cue='film')
    """
    if _NAME.match(text):
        return Chain(text)
    for template in _PHRASES:
        match = template.pattern.fullmatch(text)
        inner = parse_phrase(match["x"]) if match else None
        if inner is not None:
            return _extend(inner, template.key, template.cue)
    return None


def _split_pair(pair: str, separator: str) -> tuple[Chain, Chain] | None:
    """The two sides of "A or B" (or "A and B"), trying every occurrence of the separator."""
    for match in re.finditer(re.escape(separator), pair):
        first, second = parse_phrase(pair[:match.start()]), parse_phrase(pair[match.end():])
        if first is not None and second is not None:
            return first, second
    return None


def _subject(templates: Sequence[_Template], text: str) -> tuple[_Template, Chain] | None:
    """The first template that matches ``text`` with a subject that parses, and that subject."""
    for template in templates:
        match = template.pattern.fullmatch(text)
        chain = parse_phrase(match["s"]) if match else None
        if chain is not None:
            return template, chain
    return None


def parse_question(text: str) -> Plan:
    """The :class:`Plan` of a Search-v0 question.

    Raises:
        ValueError: The question is not worded as the bundled generator words questions.
    """
    text = text.strip()
    for template in _COMPARISON_PATTERNS:
        match = template.pattern.fullmatch(text)
        sides = _split_pair(match["pair"], " or " if "{a} or" in template.text else " and ") if match else None
        if sides is not None:
            attribute, prefer = template.key
            return Plan(sides, attribute, prefer)
    found = _subject(_ATTRIBUTE_PATTERNS, text)
    if found is not None:
        return Plan((_extend(found[1], None, found[0].cue),), found[0].key)
    found = _subject(_ENTITY_PATTERNS, text)
    if found is not None:
        return Plan((_extend(found[1], found[0].key, found[0].cue),))
    raise ValueError(f"SearchOraclePolicy: expected a question worded like the Search-v0 generator's, got {text!r}")


# --- what the articles say ----------------------------------------------------------------------

_X = r"(?P<v>[^.,;]+?)"  # a mention of another entity: no sentence punctuation inside names
_Y = r"(?P<v>\d{3,4})"
_N = r"(?P<v>\d{1,3}(?:,\d{3})+|\d+)"
_WORK = r"(?:novel|poetry collection|film|album|painting|opera)"
_CREATED = r"(?:written|directed|recorded|painted|composed)"

_FOUNDING_YEAR = (rf"\b(?:founded|established) in {_Y}\b", rf"^Founded in {_Y}, ",
                  rf"dates from {_Y}, when it was founded")
_YEAR = (rf" is an? {_Y} ", rf"\({_Y}\) is an? ", rf"\bfirst (?:[a-z]+ )+in {_Y}\.$",
         rf"\b(?:held|took place) in .+ in {_Y}\.$", rf"^In {_Y}, .+ hosted ")

# Fact (relation or attribute) -> patterns over one sentence of the article that states it; group "v" is the value.
_FACT_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {fact: tuple(map(re.compile, patterns)) for fact, patterns in {
    "born_in": (rf"\bwas born in {_X}(?: and grew up there)?\.$", rf"\bwas a native of {_X}\.$",
                rf"'s birthplace was {_X}\.$"),
    "educated_at": (rf"\bstudied at {_X}\.$", rf"\bwas educated at {_X}\.$",
                    rf"\breceived (?:his|her) education at {_X}\.$"),
    "member_of": (rf"\bwas a member of {_X}\.$", rf"\bjoined {_X} early in (?:his|her) career\.$",
                  rf"\bbelonged to {_X} for many years\.$"),
    "founded_by": (rf"\bwas founded by {_X}\.$", rf"^{_X} founded the [a-z ]+\.$",
                   rf"^The founder of .+? was {_X}\.$"),
    "headquartered_in": (rf"\bis based in {_X}\.$", rf"^The headquarters of .+? are in {_X}\.$",
                         rf"\bhas its seat in {_X}\.$"),
    "located_in": (rf"^.+? is an? (?:city|town|village) (?:located )?in (?:the (?:province|county|district) of )?"
                   rf"{_X}\.$",),
    "capital": (rf"^The capital of .+? is {_X}\.$", rf"^{_X} serves as the capital of ",
                rf"\bhas its capital at {_X}\.$"),
    "created_by": (rf" is an? (?:\d{{3,4}} )?[a-z ]+? by {_X}(?:, first .*|\.)$", rf"\bwas {_CREATED} by {_X}\.$"),
    "published_by": (rf"\b(?:published|produced|premiered) by {_X}\.$", rf"\bproduced at {_X}\.$",
                     rf"\breleased (?:on the label|by) {_X}\.$", rf"\bin the collection of {_X}\.$",
                     rf"^It hangs in {_X}\.$", rf"^{_X} (?:published|produced|released|holds) the {_WORK}\.$",
                     rf"^{_X} published the collection\.$", rf"^{_X} gave the first performance\.$"),
    "held_in": (rf"\bheld in {_X} in \d{{3,4}}\.$", rf"\btook place in {_X} in \d{{3,4}}\.$",
                rf"^In \d{{3,4}}, {_X} hosted "),
    "organized_by": (rf"\borganized by {_X}\.$", rf"^{_X} organized the [a-z ]+\.$",
                     rf"\borganizer of .+? was {_X}\.$"),
    "birth_year": (rf"\({_Y}–", rf"\blived from {_Y} to ", rf"\(born {_Y}[,)]", rf"^Born in {_Y}, ",
                   rf", born in {_Y}\.$"),
    "death_year": (rf"–{_Y}\)", rf"\blived from \d+ to {_Y}\.$", rf"\bdied {_Y}\)", rf"\bdied in {_Y}\.$"),
    "occupation": (r"\) (?:was|is) an? (?P<v>[a-z ]+)\.$", r" was an? (?P<v>[a-z ]+?) who lived from ",
                   r"^Born in \d+, .+? (?:was|is) an? (?P<v>[a-z ]+?)[.;]", r" is an? (?P<v>[a-z ]+), born in \d+\.$"),
    "founding_year": _FOUNDING_YEAR,
    "year": _YEAR,
    "start_year": _FOUNDING_YEAR + _YEAR,
    "genre": (rf" is an? (?:\d{{3,4}} )?(?P<v>[a-z ]+?) {_WORK}\b",),
    "population": (rf"\bhas a population of {_N}\.$", rf"\bhad {_N} inhabitants\b",
                   rf"^The population of .+? (?:is|was) {_N}\b", rf"\bis home to {_N} people\.$",
                   rf"^{_N} people live in "),
    "elevation_m": (rf"\belevation of {_N} metres\b", rf"\b{_N} (?:metres|m) above sea level\b"),
    "area_km2": (rf"\barea of {_N} square kilometres\b", rf"\bcovering {_N} km²"),
    "attendance": (rf"\b(?:drew|attended by|reached) {_N} {_NOUN}\b",),
}.items()}

# Words that steer the search snippet towards the sentence holding the fact.
_SEARCH_HINTS = {
    "born_in": "born native birthplace", "educated_at": "studied educated education",
    "member_of": "member joined belonged", "founded_by": "founded founder",
    "headquartered_in": "based headquarters seat", "located_in": "located", "capital": "capital",
    "created_by": "written directed recorded painted composed",
    "published_by": "published produced released label collection hangs holds premiered performance",
    "held_in": "held hosted", "organized_by": "organized organizer", "birth_year": "born", "death_year": "died",
    "occupation": "born",
    "founding_year": "founded established", "year": "first published released completed performed held",
    "start_year": "founded first published released completed performed", "genre": "",
    "population": "population inhabitants people", "elevation_m": "elevation metres sea level",
    "area_km2": "area square kilometres", "attendance": "attendance drew attended visitors delegates entrants",
}
_BIOGRAPHY = frozenset({"born_in", "educated_at", "member_of"})
"""Facts about a person that the article's body states with the family name alone ("Velt studied at ...")."""
_DESCRIPTIONS = {
    "born_in": "birthplace", "educated_at": "alma mater", "member_of": "organization", "founded_by": "founder",
    "headquartered_in": "home", "located_in": "region", "capital": "capital", "created_by": "creator",
    "published_by": "publisher", "held_in": "host place", "organized_by": "organizer", "birth_year": "birth year",
    "death_year": "year of death", "occupation": "occupation", "founding_year": "founding year", "year": "year",
    "start_year": "founding or release year", "genre": "genre", "population": "population",
    "elevation_m": "elevation", "area_km2": "area", "attendance": "attendance",
}
FALLBACK_K = 20
"""Results asked for by the second search of a hop, when the first did not return the article."""
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+|…")


def _sentences(text: str) -> list[str]:
    """The sentences of an article, page or snippet (a snippet's ``…`` ends a fragment)."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text) if s.strip()]


def read_fact(fact: str, text: str) -> str | None:
    """The value of ``fact`` (a relation or attribute name) stated in ``text``, the first one found.

    Relations give the other entity as the article mentions it ("the Royal Society of Kelden"),
    attributes their value as written ("52,000", "gothic").

    Example:
        >>> read_fact("population", "Maemton is a town in Sheprandshire. Maemton has a population of 52,000.")
        '52,000'
    """
    for sentence in _sentences(text):
        for pattern in _FACT_PATTERNS[fact]:
            match = pattern.search(sentence)
            if match:
                return match["v"].strip()
    return None


# --- reading a chain through the tools ------------------------------------------------------------

_HIT = re.compile(r"^\[\d+\] (?P<doc>\S+) \| (?P<title>.*)\n {4}(?P<snippet>.*)$", re.MULTILINE)
_PAGE_HEADER = re.compile(r"^\S+ \| .* \(page (?P<page>\d+) of (?P<pages>\d+)\)$", re.MULTILINE)
_BLOCK_HEADER = re.compile(r"^\[(?:search|open) result \((?:ok|error)\)\]\n", re.MULTILINE)


def _bare(name: str) -> str:
    """A name without the "the" that running text puts before definite names ("the Velt Gallery")."""
    return re.sub(r"^the (?=[A-Z0-9])", "", name)


def _family_name(title: str) -> str:
    """A person's family name: "Mara Velt (painter)" -> "Velt"."""
    return re.sub(r" \(.*\)$", "", title).split()[-1]


def _find_hit(observation: str, name: str) -> tuple[str, str, str] | None:
    """``(doc_id, title, snippet)`` of the search result titled ``name``, else titled ``name`` without its "the"."""
    exact, loose = name.casefold(), re.sub(r"^the ", "", name.casefold())
    hits = [hit for hit in _HIT.finditer(observation) if hit["title"].casefold() in (exact, loose)]
    hits.sort(key=lambda hit: hit["title"].casefold() != exact)  # stable: rank order within each kind
    return (hits[0]["doc"], hits[0]["title"], hits[0]["snippet"]) if hits else None


@dataclass(frozen=True)
class _ToolCall:
    """One tool call a reader wants made."""

    name: str
    arguments: Mapping[str, Any]


class _ChainReader:
    """Follows one chain through the articles: per hop, search, then read the snippet or open pages.

    Args:
        chain: The named entity and the relations to follow.
        attribute: The attribute to read at the end, if any.
        k: Search results to ask for (a second search, when the first misses the article, asks for
            :data:`FALLBACK_K`).
    """

    def __init__(self, chain: Chain, attribute: str | None, k: int) -> None:
        self.k = k
        self.facts = (*chain.relations, *([attribute] if attribute else []))
        self.entities = [chain.start]
        self._cue = chain.cue
        self.values: list[str] = []
        self.failed = False
        self._start_hop()

    @property
    def done(self) -> bool:
        """Every fact is read, or the chain cannot be followed further."""
        return self.failed or len(self.values) == len(self.facts)

    @property
    def fact(self) -> str:
        """The fact the current hop looks for."""
        return self.facts[len(self.values)]

    @property
    def subject(self) -> str:
        """The entity whose article the current hop reads (the last one reached)."""
        return self.entities[-1]

    def _start_hop(self) -> None:
        name = f"{_bare(self.subject)} {self._cue if len(self.entities) == 1 else ''}".strip()
        first = _family_name(self.subject) if self.fact in _BIOGRAPHY else name
        self._queries = [(f"{first} {_SEARCH_HINTS[self.fact]}".strip(), self.k), (name, FALLBACK_K)]
        self._doc: tuple[str, str] | None = None
        self._text = ""
        self._pages = 1
        self._read = 0

    def next_calls(self, budget: int) -> tuple[list[_ToolCall], str]:
        """The calls of the next turn (at most ``budget``) and a one-line account of them."""
        what = f"the {_DESCRIPTIONS[self.fact]} of {_bare(self.subject)}"
        if self._doc is None:
            query, k = self._queries[0]
            return [_ToolCall("search", {"query": query, "k": k})], f"Search for {what}."
        doc_id, title = self._doc
        pages = range(self._read + 1, min(self._pages, self._read + budget) + 1)
        where = f"page {pages[0]}" if len(pages) == 1 else f"pages {pages[0]}-{pages[-1]}"
        calls = [_ToolCall("open", {"doc_id": doc_id, "page": page}) for page in pages]
        return calls, f"Read {where} of {title} for {what}."

    def feed(self, results: Sequence[str]) -> None:
        """Take the results of the calls :meth:`next_calls` returned, in order."""
        if self._doc is None:
            self._take_search(results[0])
        else:
            self._take_pages(results)

    def _take_search(self, observation: str) -> None:
        hit = _find_hit(observation, self.subject)
        if hit is None:
            self._queries.pop(0)
            self.failed = not self._queries
            return
        doc_id, title, snippet = hit
        self._doc = (doc_id, title)
        self._learn(read_fact(self.fact, snippet))

    def _take_pages(self, results: Sequence[str]) -> None:
        for result in results:
            header = _PAGE_HEADER.search(result)
            if header is None:  # an error message instead of a page
                self.failed = True
                return
            self._pages, self._read = int(header["pages"]), int(header["page"])
            self._text += "\n\n" + result[header.end():]
        value = read_fact(self.fact, self._text)
        self.failed = value is None and self._read >= self._pages
        self._learn(value)

    def _learn(self, value: str | None) -> None:
        if value is None:
            return
        self.values.append(value)
        if not self.done:
            self.entities.append(value)
            self._start_hop()


class SearchOraclePolicy:
    """Answers Search-v0 questions by reading the articles the tools return, hop by hop.

    It reads only ``task.prompt`` (run it with ``shown_task=prompt_only(task)`` to prove it), and it
    is deterministic: the same question and tool outputs give the same actions.

    Args:
        k: Search results to ask for per search.
        max_tool_calls_per_turn: Most tool calls in one action (the env's limit, 4 by default).

    Example:
        >>> import gymnasium as gym, agentgym_envs                                           # doctest: +SKIP
        >>> from agentgym_envs.policies import SearchOraclePolicy, run_episode, prompt_only  # doctest: +SKIP
        >>> env = gym.make("agentrl/Search-v0", split="test")                                # doctest: +SKIP
        >>> task = env.unwrapped.tasks[0]                                                    # doctest: +SKIP
        >>> run_episode(env, SearchOraclePolicy(), task, shown_task=prompt_only(task)).reward  # doctest: +SKIP
        1.0
    """

    name = "search-oracle"

    def __init__(self, k: int = 5, max_tool_calls_per_turn: int = 4) -> None:
        if k < 1 or max_tool_calls_per_turn < 2:
            raise ValueError(f"SearchOraclePolicy: expected k >= 1 and max_tool_calls_per_turn >= 2, "
                             f"got k={k}, max_tool_calls_per_turn={max_tool_calls_per_turn}")
        self.k = k
        self.max_tool_calls_per_turn = max_tool_calls_per_turn
        self._plan = Plan(())
        self._readers: list[_ChainReader] = []
        self._waiting: list[tuple[_ChainReader, int]] = []

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Parse the question (``task.prompt`` only) into the chains to follow.

        Raises:
            ValueError: The question is not worded as Search-v0 questions are.
        """
        self._plan = parse_question(task.prompt)
        self._readers = [_ChainReader(chain, self._plan.attribute, self.k) for chain in self._plan.chains]
        self._waiting = []

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """Hand the tool results to the chains that asked for them; then their next calls, or the answer."""
        if self._waiting:
            self._distribute(observation)
        active = [reader for reader in self._readers if not reader.done]
        if not active:
            return self._answer()
        budget = self.max_tool_calls_per_turn // len(active)
        calls: list[_ToolCall] = []
        notes: list[str] = []
        for reader in active:
            reader_calls, note = reader.next_calls(budget)
            self._waiting.append((reader, len(reader_calls)))
            calls.extend(reader_calls)
            notes.append(note)
        return _action(" ".join(notes), calls)

    def _distribute(self, observation: str) -> None:
        results = _BLOCK_HEADER.split(observation)[1:]
        waiting, self._waiting = self._waiting, []
        if len(results) != sum(count for _, count in waiting):  # not the results asked for (a format error)
            for reader, _ in waiting:
                reader.failed = True
            return
        for reader, count in waiting:
            reader.feed(results[:count])
            results = results[count:]

    def _answer(self) -> str:
        if any(reader.failed for reader in self._readers):
            lost = next(reader for reader in self._readers if reader.failed)
            return _answer(f"I could not find the {_DESCRIPTIONS[lost.fact]} of {_bare(lost.subject)}.", "unknown")
        if len(self._readers) == 1:
            reader = self._readers[0]
            value = _bare(reader.values[-1])
            return _answer(f"The {_DESCRIPTIONS[reader.facts[-1]]} of {_bare(reader.subject)} is {value}.", value)
        return self._compare()

    def _compare(self) -> str:
        sides = [(_bare(reader.subject), reader.values[-1]) for reader in self._readers]
        pick = min if self._plan.prefer == "min" else max
        winner = pick(sides, key=lambda side: _number(side[1]))[0]
        facts = " and ".join(f"{name}: {value}" for name, value in sides)
        return _answer(f"{_DESCRIPTIONS[str(self._plan.attribute)].capitalize()}: {facts}; so {winner}.", winner)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _action(think: str, calls: Sequence[_ToolCall]) -> str:
    blocks = [json.dumps({"name": call.name, "arguments": dict(call.arguments)}) for call in calls]
    return f"<think>{think}</think>\n" + "\n".join(f"<tool_call>{block}</tool_call>" for block in blocks)


def _answer(think: str, answer: str) -> str:
    return f"<think>{think}</think>\n{answer_action(answer)}"
