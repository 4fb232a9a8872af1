"""Multi-hop questions about a generated world, in the HotpotQA sense, each with a unique answer.

A question is a :class:`Query` (what is asked, as entity ids and relation names) rendered into
words. Three families:

* ``single``: one article holds the answer ("When was the Velt Press founded?", "Who founded the
  Velt Press?").
* ``bridge``: follow relations from a named entity through 2 to 4 articles ("In what year was the
  founder of the publisher of The Silent Harbor born?").
* ``comparison``: compare one attribute of two entities, each named or reached through relations
  ("Who was born first, Mara Velt (painter) or the director of A Mirror in Summer?").

``hops`` is the number of articles a reader must use (the supporting documents), 1 to 4; it is the
task's difficulty.

Why every answer is unique: each entity the question names is named by a string that no other
entity carries (its name, or its disambiguated title when a near-duplicate shares the name); the
question names no other entity (no bridge entity, no answer); relations are functional; and
comparisons have no ties. :func:`check_question` enforces all of it on the rendered text, and
:func:`possible_answers` recomputes the answer from every entity the text could be naming.

Example:
    >>> from tasks.search.world import generate_world
    >>> from tasks.search.corpus import document_ids
    >>> world = generate_world(1, n_entities=200)
    >>> tasks = generate_questions(world, document_ids(world), 4, seed=0, corpus="demo")
    >>> [t.difficulty for t in tasks]
    [1, 2, 3, 4]
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tasks.records import Task
from tasks.search._text import capitalize_first, contains_phrase, format_number, normalize_text, sub_rng
from tasks.search.phrasing import (
    ATTENDANCE_NOUN,
    ATTRIBUTE_QUESTIONS,
    COMPARISON_QUESTIONS,
    DEFAULT_ATTENDANCE_NOUN,
    DEFAULT_FIRST_VERB,
    ENTITY_QUESTIONS,
    OCCUPATION_ALIASES,
    RELATION_PHRASES,
    WORK_FIRST_VERB,
    by_kind,
    ending_with_subject,
)
from tasks.search.world import Entity, World

QUESTIONS_VERSION = 1
"""Bump whenever a change alters any generated question (the bundled splits record it)."""

ENV = "Search"
FAMILIES = ("single", "bridge", "comparison")
MIN_HOPS, MAX_HOPS = 1, 4
_FAMILY_HOPS = {"single": (1, 1), "bridge": (2, MAX_HOPS), "comparison": (2, MAX_HOPS)}
_ENTITY_ANSWER_SHARE = 0.35
_ATTEMPTS = 2_000

ASKED_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    entity_type: tuple(a for t, a in ATTRIBUTE_QUESTIONS if t == entity_type)
    for entity_type in dict.fromkeys(t for t, _ in ATTRIBUTE_QUESTIONS)
}
"""Attributes a question may ask, per entity type."""
COMPARABLE = tuple(COMPARISON_QUESTIONS)
"""``(entity type, attribute, "min" | "max")`` of every comparison question."""

_NUMERIC_UNITS = {"elevation_m": ("{v} metres", "{v} m"), "area_km2": ("{f} km²", "{f} square kilometres")}


@dataclass(frozen=True)
class Chain:
    """A named entity and the relations followed from it.

    Attributes:
        start: Id of the entity the question names.
        relations: Relation names, followed in order.
    """

    start: str
    relations: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return ">".join((self.start, *self.relations))

    @classmethod
    def parse(cls, key: str) -> Chain:
        start, *relations = key.split(">")
        return cls(start, tuple(relations))


@dataclass(frozen=True)
class Query:
    """What a question asks, independent of its wording.

    Attributes:
        chains: One chain for a lookup, two for a comparison (in the order the question names them).
        attribute: The attribute asked (lookup) or compared (comparison); None when a lookup's
            answer is the entity its chain ends at.
        prefer: ``"min"`` or ``"max"`` for a comparison (the earlier year, the larger population...).
    """

    chains: tuple[Chain, ...]
    attribute: str | None = None
    prefer: str | None = None

    @property
    def is_comparison(self) -> bool:
        return len(self.chains) == 2

    @property
    def key(self) -> str:
        """``"lookup|e00012>published_by|year"`` or ``"compare|e1;e2>created_by|year|min"`` (stored in metadata)."""
        chains = ";".join(chain.key for chain in self.chains)
        if self.is_comparison:
            return f"compare|{chains}|{self.attribute}|{self.prefer}"
        return f"lookup|{chains}|{self.attribute or ''}"

    @property
    def signature(self) -> str:
        """The key with a comparison's sides sorted: equal for "A or B" and "B or A"."""
        if not self.is_comparison:
            return self.key
        return f"compare|{';'.join(sorted(c.key for c in self.chains))}|{self.attribute}|{self.prefer}"

    @classmethod
    def parse(cls, key: str) -> Query:
        """The query of a :attr:`key`.

        Raises:
            ValueError: ``key`` is not a query key.
        """
        kind, chains, *rest = key.split("|")
        parsed = tuple(Chain.parse(chain) for chain in chains.split(";"))
        if kind == "lookup" and len(rest) == 1 and len(parsed) == 1:
            return cls(parsed, rest[0] or None)
        if kind == "compare" and len(rest) == 2 and len(parsed) == 2:
            return cls(parsed, rest[0], rest[1])
        raise ValueError(f"expected a query key like 'lookup|e00001>born_in|population', got {key!r}")

    @property
    def hops(self) -> int:
        """Number of articles a reader needs."""
        if self.is_comparison:
            return sum(len(chain.relations) + 1 for chain in self.chains)
        relations = len(self.chains[0].relations)
        return relations if self.attribute is None else relations + 1

    @property
    def family(self) -> str:
        if self.is_comparison:
            return "comparison"
        return "single" if self.hops == 1 else "bridge"


@dataclass(frozen=True)
class Question:
    """A rendered question with its gold answers and the entities that support it.

    Attributes:
        query: What is asked.
        text: The question.
        answer: The canonical gold answer.
        aliases: Other accepted answers.
        answer_entity: Id of the entity the answer names, or None for an attribute value.
        support: Per chain, the ids of the entities whose articles a reader needs, in reading order.
    """

    query: Query
    text: str
    answer: str
    aliases: tuple[str, ...]
    answer_entity: str | None
    support: tuple[tuple[str, ...], ...]

    def question_type(self, world: World) -> str:
        """E.g. ``"work.published_by.founded_by.birth_year"`` or ``"compare.person.birth_year.min"``."""
        query = self.query
        if query.is_comparison:
            end_type = world.entity(self.support[0][-1]).type
            return f"compare.{end_type}.{query.attribute}.{query.prefer}"
        chain = query.chains[0]
        return ".".join((world.entity(chain.start).type, *chain.relations, query.attribute or "entity"))

    def to_task(self, world: World, doc_ids: Mapping[str, str], *, task_id: str, corpus: str) -> Task:
        """The :class:`Task` of this question (doc ids from ``doc_ids``, entity id -> doc id)."""
        chains = [[doc_ids[entity_id] for entity_id in chain] for chain in self.support]
        return Task(
            id=task_id,
            env=ENV,
            family=self.query.family,
            prompt=self.text,
            answer=[self.answer],
            difficulty=self.query.hops,
            metadata={
                "aliases": list(self.aliases),
                "supporting_docs": [doc for chain in chains for doc in chain],
                "chains": chains,
                "hops": self.query.hops,
                "question_type": self.question_type(world),
                "corpus": corpus,
                "answer_entity": self.answer_entity,
                "query": self.query.key,
                "generator_version": QUESTIONS_VERSION,
            },
        )


# --- answers ---------------------------------------------------------------------------------


def chain_entities(world: World, chain: Chain) -> tuple[str, ...] | None:
    """Ids along ``chain``, start to end; None when a relation is missing."""
    ids = [chain.start]
    for relation in chain.relations:
        target = world.entity(ids[-1]).relations.get(relation)
        if target is None:
            return None
        ids.append(target)
    return tuple(ids)


def _compared(world: World, entity_id: str, attribute: str) -> int | None:
    value = world.entity(entity_id).attributes.get(attribute)
    return value if isinstance(value, int) else None


def winner(world: World, ends: Sequence[str], attribute: str, prefer: str) -> str | None:
    """The end entity with the smaller (``"min"``) or larger value; None on a tie or a missing value."""
    values = [_compared(world, end, attribute) for end in ends]
    if any(v is None for v in values) or len(set(values)) != len(values):
        return None
    pick = min if prefer == "min" else max
    return ends[values.index(pick(v for v in values if v is not None))]


def entity_gold(world: World, entity_id: str) -> tuple[str, tuple[str, ...]]:
    """Canonical name, and the other names, aliases and title that only this entity carries."""
    entity = world.entity(entity_id)
    return entity.name, tuple(n for n in world.unique_names(entity_id) if n != entity.name)


def value_gold(entity: Entity, attribute: str) -> tuple[str, tuple[str, ...]]:
    """An attribute value as the articles write it, and other accepted forms (plain digits, units)."""
    value = entity.attributes[attribute]
    if isinstance(value, str):
        extra = OCCUPATION_ALIASES.get(value, ()) if attribute == "occupation" else (f"{value} {entity.kind}",)
        return value, tuple(extra)
    if attribute.endswith("year"):
        return str(value), ()
    written = format_number(value)
    forms = [str(value)] + [unit.format(v=value, f=written) for unit in _NUMERIC_UNITS.get(attribute, ())]
    return written, tuple(f for f in dict.fromkeys(forms) if f != written)


def solve(world: World, query: Query) -> tuple[str, str | None] | None:
    """``(answer text, answer entity id or None)`` of ``query``; None when it has no single answer."""
    ends = []
    for chain in query.chains:
        ids = chain_entities(world, chain)
        if ids is None:
            return None
        ends.append(ids[-1])
    if query.is_comparison:
        best = winner(world, ends, str(query.attribute), str(query.prefer))
        return None if best is None else (world.entity(best).name, best)
    end = world.entity(ends[0])
    if query.attribute is None:
        return end.name, end.id
    if query.attribute not in end.attributes:
        return None
    return value_gold(end, query.attribute)[0], None


# --- what a text names -------------------------------------------------------------------------


def named_entities(world: World, text: str) -> list[str]:
    """Ids of every entity whose name, alias or title ``text`` contains (maximal matches only).

    Matching is on normalized tokens. A name inside a longer name is not counted: "Orsterwick"
    inside "the Orsterwick Wool Fair" names the fair, not the town.
    """
    tokens = normalize_text(text).split()
    found = []
    for i in range(len(tokens)):
        for j in range(min(len(tokens), i + world.max_name_tokens), i, -1):
            ids = world.name_index.get(" ".join(tokens[i:j]))
            if ids:
                found.append((i, j, ids))
    maximal = [ids for i, j, ids in found if not any(a <= i and j <= b and (a, b) != (i, j) for a, b, _ in found)]
    return list(dict.fromkeys(entity_id for ids in maximal for entity_id in ids))


def possible_answers(world: World, query: Query, text: str) -> set[str]:
    """Every answer the question could have, if it named any entity its text can be read as naming.

    For a lookup, the query's relations are followed from every entity named in ``text``; for a
    comparison, every pair of distinct named end entities of the compared attribute is compared.
    A well-posed question has exactly one possible answer.
    """
    named = named_entities(world, text)
    if not query.is_comparison:
        chain = query.chains[0]
        answers = set()
        for start in named:
            candidate = Query((Chain(start, chain.relations),), query.attribute)
            solved = solve(world, candidate)
            if solved is not None:
                answers.add(normalize_text(solved[0]))
        return answers
    ends = {}
    for chain in query.chains:
        for start in named:
            ids = chain_entities(world, Chain(start, chain.relations))
            if ids is not None and _compared(world, ids[-1], str(query.attribute)) is not None:
                ends[ids[-1]] = True
    answers = set()
    for first in ends:
        for second in ends:
            if first != second:
                best = winner(world, (first, second), str(query.attribute), str(query.prefer))
                answers.add("tie" if best is None else normalize_text(world.entity(best).name))
    return answers


def check_question(world: World, question: Question) -> str | None:
    """Why ``question`` is not well posed, or None when it is.

    Checks that the text names exactly the chains' start entities (so no bridge entity or answer
    is given away and no near-duplicate is named instead), that no bridge or answer entity's name
    occurs even inside another name ("the host town of the Orsterwick Wool Fair"), that distinct sides of a comparison
    end at distinct entities with distinct names, that the answer (or a compared value) is not in
    the text nor in the way articles name the entity holding it ("Mara Velt (painter)" gives away
    an occupation), and that :func:`possible_answers` finds the one answer.
    """
    query, text = question.query, question.text
    starts = [chain.start for chain in query.chains]
    named = named_entities(world, text)
    if sorted(named) != sorted(set(starts)) or len(set(starts)) != len(starts):
        return f"names {named}, expected exactly {starts}"
    supporting = [entity_id for chain in question.support for entity_id in chain]
    if len(set(supporting)) != len(supporting):
        return "the chains share an entity"
    hidden = [*supporting, *([question.answer_entity] if question.answer_entity else [])]
    for entity_id in dict.fromkeys(hidden):
        entity = world.entity(entity_id)
        if entity_id not in starts and contains_phrase(text, entity.name):
            return f"the text gives away {entity.name!r}, even if inside another name"
    if query.is_comparison:
        ends = [chain[-1] for chain in question.support]
        if normalize_text(world.entity(ends[0]).name) == normalize_text(world.entity(ends[1]).name):
            return "both sides have the same name"
        for end in ends:
            value = world.entity(end).attributes[str(query.attribute)]
            if contains_phrase(text, str(value)) or contains_phrase(text, format_number(int(value))):
                return f"the text gives away the value {value}"
    elif contains_phrase(text, question.answer):
        return "the text contains the answer"
    elif query.attribute is not None and contains_phrase(world.reference(question.support[0][-1]) or "",
                                                         question.answer):
        return "the answer is in how other articles name the entity (its title qualifier)"
    answers = possible_answers(world, query, text)
    if answers != {normalize_text(question.answer)}:
        return f"possible answers {sorted(answers)}, expected only {question.answer!r}"
    return None


# --- rendering ---------------------------------------------------------------------------------


class QuestionGenerator:
    """Draws well-posed questions about the core (non-distractor) entities of a world.

    Args:
        world: The world.
        include_distractors: Let questions use distractor entities too (hindsight relabeling does:
            the agent may have read their articles).
    """

    def __init__(self, world: World, *, include_distractors: bool = False) -> None:
        self.world = world
        self.references = {e.id: ref for e in world.entities if (include_distractors or not e.distractor)
                           and (ref := world.reference(e.id)) is not None}
        self.core = [world.entity(entity_id) for entity_id in self.references]

    def name(self, entity_id: str) -> str:
        """How a question names an entity: its unique reference, with "the" where the name wants it."""
        entity = self.world.entity(entity_id)
        return f"the {self.references[entity_id]}" if entity.definite else self.references[entity_id]

    def phrase(self, rng: random.Random, ids: Sequence[str], relations: Sequence[str]) -> str:
        """The noun phrase for the end of a chain: "the founder of the publisher of X"."""
        text = self.name(ids[0])
        for index, relation in enumerate(relations):
            source, target = self.world.entity(ids[index]), self.world.entity(ids[index + 1])
            templates = by_kind(RELATION_PHRASES, relation, source.kind)
            if index > 0:  # a long inner phrase reads best last
                templates = ending_with_subject(templates, "{x}")
            text = rng.choice(templates).format(x=text, tk=target.kind)
        return text

    def render(self, rng: random.Random, query: Query) -> Question | None:
        """Words, gold answers and supporting entities for ``query``; None when it has no single answer."""
        world = self.world
        paths = [chain_entities(world, chain) for chain in query.chains]
        solved = solve(world, query)
        if solved is None or any(p is None or any(i not in self.references for i in p) for p in paths):
            return None
        answer, answer_entity = solved
        ids = [p for p in paths if p is not None]
        if query.is_comparison:
            sides = [self.phrase(rng, p, c.relations) for p, c in zip(ids, query.chains, strict=True)]
            end = world.entity(ids[0][-1])
            template = rng.choice(COMPARISON_QUESTIONS[(end.type, str(query.attribute), str(query.prefer))])
            text = template.format(a=sides[0], b=sides[1])
            support = tuple(tuple(p) for p in ids)
            aliases = entity_gold(world, str(answer_entity))[1]
        elif query.attribute is None:
            path, relations = ids[0], query.chains[0].relations
            subject = self.phrase(rng, path[:-1], relations[:-1])
            source, target = world.entity(path[-2]), world.entity(path[-1])
            templates = by_kind(ENTITY_QUESTIONS, relations[-1], source.kind)
            template = rng.choice(ending_with_subject(templates, "{s}?") if len(relations) > 1 else templates)
            text = template.format(s=subject, tk=target.kind)
            support = (tuple(path[:-1]),)
            aliases = entity_gold(world, target.id)[1]
        else:
            path, relations = ids[0], query.chains[0].relations
            end = world.entity(path[-1])
            templates = ATTRIBUTE_QUESTIONS[(end.type, query.attribute)]
            template = rng.choice(ending_with_subject(templates, "{s}?") if relations else templates)
            text = template.format(s=self.phrase(rng, path, relations),
                                   v=WORK_FIRST_VERB.get(end.kind, DEFAULT_FIRST_VERB),
                                   noun=ATTENDANCE_NOUN.get(end.kind, DEFAULT_ATTENDANCE_NOUN))
            support = (tuple(path),)
            aliases = value_gold(end, query.attribute)[1]
        return Question(query, capitalize_first(text), answer, aliases, answer_entity, support)

    # -- drawing queries ----------------------------------------------------------------------------
    def _walk(self, rng: random.Random, steps: int, allowed: Collection[str] | None = None) -> Chain | None:
        """A random forward chain of ``steps`` relations from a core entity, never revisiting one."""
        entity = rng.choice(self.core)
        ids, relations = [entity.id], []
        for _ in range(steps):
            options = [(r, t) for r, t in self.world.entity(ids[-1]).relations.items()
                       if t in self.references and t not in ids and (allowed is None or t in allowed)]
            if not options:
                return None
            relation, target = rng.choice(options)
            ids.append(target)
            relations.append(relation)
        if allowed is not None and ids[0] not in allowed:
            return None
        return Chain(ids[0], tuple(relations))

    def _chain_to(self, rng: random.Random, end: str, docs: int) -> Chain | None:
        """A random chain of ``docs`` articles ending at ``end`` (walking relations backwards)."""
        ids, relations = [end], []
        for _ in range(docs - 1):
            options = [(r, s) for r, s in self.world.inverse(ids[0]) if s in self.references and s not in ids]
            if not options:
                return None
            relation, source = rng.choice(options)
            ids.insert(0, source)
            relations.insert(0, relation)
        return Chain(ids[0], tuple(relations))

    def lookup_query(self, rng: random.Random, hops: int, *, entity_answer: bool) -> Query | None:
        """A single or bridge query of ``hops`` articles, answered by an entity or by an attribute."""
        chain = self._walk(rng, hops if entity_answer else hops - 1)
        if chain is None:
            return None
        if entity_answer:
            return Query((chain,))
        end = self.world.entity(str(self.world.follow(chain.start, chain.relations)))
        attributes = [a for a in ASKED_ATTRIBUTES.get(end.type, ()) if a in end.attributes]
        return Query((chain,), rng.choice(attributes)) if attributes else None

    def comparison_query(self, rng: random.Random, hops: int) -> Query | None:
        """A comparison of two entities reached through chains of ``hops`` articles in total."""
        splits = [(a, hops - a) for a in range(1, hops)]
        first_docs, second_docs = rng.choice(splits)
        comparable = [c for c in COMPARABLE if hops == 2 or c[0] not in ("work", "event")]
        entity_type, attribute, prefer = rng.choice(comparable)
        candidates = [e.id for e in self.core if e.type == entity_type and attribute in e.attributes]
        if len(candidates) < 2:
            return None
        ends = rng.sample(candidates, 2)
        chains = (self._chain_to(rng, ends[0], first_docs), self._chain_to(rng, ends[1], second_docs))
        if chains[0] is None or chains[1] is None:
            return None
        return Query((chains[0], chains[1]), attribute, prefer)

    def draw(self, rng: random.Random, family: str, hops: int, *, exclude: Collection[str] = ()) -> Question:
        """A well-posed question of ``family`` and ``hops`` whose query signature is not in ``exclude``.

        Raises:
            ValueError: ``family`` does not serve ``hops``, or no such question was found (world too small).
        """
        low, high = _FAMILY_HOPS[family]
        if not low <= hops <= high:
            raise ValueError(f"family {family!r} serves hops {low}..{high}, got {hops}")
        for _ in range(_ATTEMPTS):
            if family == "comparison":
                query = self.comparison_query(rng, hops)
            else:
                query = self.lookup_query(rng, hops, entity_answer=rng.random() < _ENTITY_ANSWER_SHARE)
            if query is None or query.signature in exclude:
                continue
            question = self.render(rng, query)
            if question is not None and check_question(self.world, question) is None:
                return question
        raise ValueError(f"found no new {family} question with {hops} hops in {_ATTEMPTS} attempts; "
                         "use a larger world")


def hops_schedule(n: int, hops: int | tuple[int, int] | None) -> list[int]:
    """Hops for ``n`` questions: one level, or cycling evenly through an inclusive ``(low, high)`` band."""
    if n < 0:
        raise ValueError(f"expected a non-negative number of questions, got {n}")
    low, high = (MIN_HOPS, MAX_HOPS) if hops is None else (hops, hops) if isinstance(hops, int) else hops
    if not MIN_HOPS <= low <= high <= MAX_HOPS:
        raise ValueError(f"expected hops in {MIN_HOPS}..{MAX_HOPS} (an int or a (low, high) band), got {hops!r}")
    return [low + i % (high - low + 1) for i in range(n)]


def _families_for(levels: Iterable[int], families: Sequence[str]) -> list[str]:
    """A family per question: those serving its hops, taken in turn (bridge and comparison alternate)."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise ValueError(f"expected families among {FAMILIES}, got {list(families)}")
    seen: dict[int, int] = {}
    chosen = []
    for level in levels:
        serving = [f for f in families if _FAMILY_HOPS[f][0] <= level <= _FAMILY_HOPS[f][1]]
        if not serving:
            raise ValueError(f"no family among {list(families)} has {level}-hop questions "
                             "(single: 1 hop; bridge and comparison: 2 to 4)")
        chosen.append(serving[seen.get(level, 0) % len(serving)])
        seen[level] = seen.get(level, 0) + 1
    return chosen


def generate_questions(
    world: World,
    doc_ids: Mapping[str, str],
    n: int,
    *,
    seed: int,
    corpus: str,
    hops: int | tuple[int, int] | None = None,
    families: Sequence[str] = FAMILIES,
    split: str = "gen",
    exclude: Collection[str] = (),
    generator: QuestionGenerator | None = None,
) -> list[Task]:
    """Generate ``n`` distinct, well-posed questions as tasks with ids ``search/{split}/00000`` onwards.

    Args:
        world: The world the questions are about.
        doc_ids: Entity id -> doc id of the corpus describing ``world``.
        n: Number of questions.
        seed: Seed of the draws.
        corpus: Corpus name recorded in each task's metadata.
        hops: One level (1..4), an inclusive ``(low, high)`` band cycled evenly, or None for 1..4.
        families: Families allowed; for each level, those serving it are taken in turn.
        split: Split name used in the ids.
        exclude: Query signatures (``metadata["query"]`` of other tasks, via :meth:`Query.signature`)
            not to repeat, e.g. those of another split.
        generator: A :class:`QuestionGenerator` of ``world`` to reuse (it caches references).

    Returns:
        The tasks, in index order; no two share a query signature.

    Raises:
        ValueError: Bad ``hops`` or ``families``, or the world is too small for that many questions.
    """
    levels = hops_schedule(n, hops)
    chosen = _families_for(levels, families)
    generator = generator or QuestionGenerator(world)
    rng = sub_rng(seed, "questions", split)
    used = set(exclude)
    tasks = []
    for index, (level, family) in enumerate(zip(levels, chosen, strict=True)):
        question = generator.draw(rng, family, level, exclude=used)
        used.add(question.query.signature)
        tasks.append(question.to_task(world, doc_ids, task_id=f"search/{split}/{index:05d}", corpus=corpus))
    return tasks
