"""A seeded fictional world: typed entities with attributes and relations, and deliberate near-duplicates.

The world is what the Search corpus describes and what its questions ask about. Nothing in it can
be known from pre-training: names are built from syllables, numbers are drawn.

Entity types and what they carry:

============  ==========================================  =======================================
type          attributes                                  relations (one target each)
============  ==========================================  =======================================
person        birth_year, death_year, occupation          born_in, educated_at, member_of
organization  founding_year                               founded_by, headquartered_in
place         population, founding_year, elevation_m      located_in
region        area_km2, population                        capital
work          year, genre                                 created_by, published_by
event         year, attendance                            held_in, organized_by
============  ==========================================  =======================================

Near-duplicates are made on purpose: people who share a full name but not an occupation (titled
"Mara Velt (painter)" and "Mara Velt (poet)"), places whose names differ by one sound
("Orsterwick", "Orsterwyck"), and works that share a title (a novel and its later film). Entities
generated as *distractors* are described in the corpus but never used by a question; most of them
are near-duplicates of core entities.

Generation is a pure function of its arguments: ``random.Random`` streams derived from the seed
through sha256, lists and dicts in insertion order, no set iteration and no ``hash()``.

Example:
    >>> world = generate_world(7, n_entities=120, n_distractors=30)
    >>> len(world.entities), world.entities[0].id
    (150, 'e00000')
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tasks.errors import UnknownTaskError, did_you_mean
from tasks.search import _names
from tasks.search._text import normalize_text, sub_rng
from tasks.search.phrasing import VOCABULARY

GENERATOR_VERSION = 1
"""Bump whenever a change alters any generated world (the bundled corpus records it)."""

ENTITY_TYPES = ("person", "organization", "place", "region", "work", "event")

RELATIONS: dict[str, tuple[str, str]] = {
    "born_in": ("person", "place"),
    "educated_at": ("person", "organization"),
    "member_of": ("person", "organization"),
    "founded_by": ("organization", "person"),
    "headquartered_in": ("organization", "place"),
    "located_in": ("place", "region"),
    "capital": ("region", "place"),
    "created_by": ("work", "person"),
    "published_by": ("work", "organization"),
    "held_in": ("event", "place"),
    "organized_by": ("event", "organization"),
}
"""Relation name -> (source type, target type). Every relation is functional: one target at most."""

ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "person": ("birth_year", "death_year", "occupation"),
    "organization": ("founding_year",),
    "place": ("population", "founding_year", "elevation_m"),
    "region": ("area_km2", "population"),
    "work": ("year", "genre"),
    "event": ("year", "attendance"),
}
"""Attributes each entity type may carry (``death_year`` is absent for the living)."""

WORK_KINDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "novel": ("novelist", "publishing house",
              ("mystery", "historical", "satirical", "romance", "science fiction", "gothic", "adventure")),
    "poetry collection": ("poet", "publishing house", ("pastoral", "elegiac", "satirical", "devotional")),
    "film": ("film director", "film studio", ("drama", "comedy", "thriller", "war", "musical", "western")),
    "album": ("musician", "record label", ("jazz", "folk", "chamber pop", "electronic", "blues")),
    "painting": ("painter", "museum", ("landscape", "portrait", "still life", "allegorical", "maritime")),
    "opera": ("composer", "opera company", ("tragic", "comic", "romantic")),
}
"""Work kind -> (creator occupation, publishing organization kind, genres)."""

OCCUPATIONS = (
    "novelist", "poet", "film director", "musician", "painter", "composer", "architect", "physicist",
    "botanist", "mathematician", "explorer", "merchant", "politician",
)
_OCCUPATION_WEIGHTS = (9, 5, 6, 6, 8, 6, 3, 3, 2, 2, 2, 2, 2)
_CREATOR_KINDS = {creator: kind for kind, (creator, _, _) in WORK_KINDS.items()}
_HONORIFIC_OCCUPATIONS = ("physicist", "botanist", "mathematician")

ORGANIZATION_KINDS = (
    "university", "publishing house", "record label", "film studio", "museum", "opera company",
    "learned society", "trading company",
)
_ORGANIZATION_WEIGHTS = (3, 4, 3, 3, 3, 2, 2, 2)
PLACE_KINDS = ("city", "town", "village")
_POPULATION_RANGES = {"city": (60_000, 900_000), "town": (5_000, 59_000), "village": (200, 4_900)}
REGION_KINDS = ("province", "county", "district")
EVENT_KINDS = ("festival", "congress", "exhibition", "competition", "fair")
_ATTENDANCE_RANGES = {
    "festival": (2_000, 90_000), "congress": (150, 3_000), "exhibition": (5_000, 400_000),
    "competition": (40, 600), "fair": (1_000, 60_000),
}

_TYPE_SHARES = {"region": 4, "place": 18, "person": 34, "organization": 14, "work": 22, "event": 8}
_MIN_PER_TYPE = {"region": 2, "place": 4, "person": 6, "organization": 4, "work": 4, "event": 2}
MIN_ENTITIES = 40
"""The smallest world :func:`generate_world` builds (every type needs a few members)."""

_QUESTION_WORDS = VOCABULARY | frozenset(
    word for kinds in (PLACE_KINDS, REGION_KINDS, ORGANIZATION_KINDS, EVENT_KINDS, tuple(WORK_KINDS), OCCUPATIONS)
    for kind in kinds for word in kind.split()
)
_CORE_TWIN_RATES = {"person": 0.07, "place": 0.10, "work": 0.08}
_DISTRACTOR_TWIN_RATES = {"person": 0.45, "place": 0.35, "work": 0.40}
LAST_YEAR = 2023
_EARLIEST_BIRTH = {"film director": 1865, "musician": 1880}
_EARLIEST_GENRE = {"electronic": 1960, "chamber pop": 1960, "jazz": 1915, "blues": 1910, "science fiction": 1880,
                   "western": 1905, "musical": 1930}


@dataclass(frozen=True)
class Entity:
    """One thing in the world.

    Attributes:
        id: Stable id, ``"e00042"``; ids follow creation order.
        type: One of :data:`ENTITY_TYPES`.
        kind: Finer kind: the occupation of a person, ``"novel"``, ``"city"``, ``"museum"``...
        name: Canonical name (shared by the members of a same-name near-duplicate group).
        aliases: Other names: ``"Dr. Mara Velt"``, ``"M. Velt"``, ``"Velt"``, acronyms.
        attributes: Attribute name -> value (ints for years and counts, strings otherwise).
        relations: Relation name -> target entity id.
        qualifier: Disambiguating word of the article title when the name is shared, e.g. ``"painter"``.
        gender: ``"f"`` or ``"m"`` for people (pronouns of their article), else None.
        definite: Whether running text puts "the" before the name ("the Royal Society of Kelden").
        distractor: Described in the corpus, never used by a question.
        twin_of: Id of the entity this one near-duplicates, if it was made as one.
    """

    id: str
    type: str
    kind: str
    name: str
    aliases: tuple[str, ...] = ()
    attributes: Mapping[str, int | str] = field(default_factory=dict)
    relations: Mapping[str, str] = field(default_factory=dict)
    qualifier: str | None = None
    gender: str | None = None
    definite: bool = False
    distractor: bool = False
    twin_of: str | None = None

    @property
    def title(self) -> str:
        """Article title: the name, with the qualifier in parentheses when there is one."""
        return f"{self.name} ({self.qualifier})" if self.qualifier else self.name

    @property
    def names(self) -> tuple[str, ...]:
        """Canonical name first, then the aliases."""
        return (self.name, *self.aliases)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (keys in a fixed order)."""
        return {
            "id": self.id, "type": self.type, "kind": self.kind, "name": self.name, "aliases": list(self.aliases),
            "attributes": dict(self.attributes), "relations": dict(self.relations), "qualifier": self.qualifier,
            "gender": self.gender, "definite": self.definite, "distractor": self.distractor, "twin_of": self.twin_of,
        }


@dataclass(frozen=True)
class World:
    """A generated world: its entities and the indexes questions and relabelers need.

    Attributes:
        seed: The seed it was generated from.
        n_entities: Number of core entities (those questions may use).
        n_distractors: Number of distractor entities.
        entities: Every entity, core first, in id order.
    """

    seed: int
    n_entities: int
    n_distractors: int
    entities: tuple[Entity, ...]

    @cached_property
    def _by_id(self) -> dict[str, Entity]:
        return {entity.id: entity for entity in self.entities}

    def entity(self, entity_id: str) -> Entity:
        """The entity with ``entity_id``.

        Raises:
            UnknownTaskError: No such entity (the message suggests the close id).
        """
        if entity_id not in self._by_id:
            raise UnknownTaskError(f"expected an entity id of this world, got {entity_id!r}"
                                   + did_you_mean(entity_id, self._by_id))
        return self._by_id[entity_id]

    @cached_property
    def _by_type(self) -> dict[tuple[str, bool], tuple[Entity, ...]]:
        index: dict[tuple[str, bool], list[Entity]] = {}
        for entity in self.entities:
            index.setdefault((entity.type, True), []).append(entity)
            if not entity.distractor:
                index.setdefault((entity.type, False), []).append(entity)
        return {key: tuple(group) for key, group in index.items()}

    def of_type(self, entity_type: str, *, distractors: bool = True) -> tuple[Entity, ...]:
        """Entities of one type, in id order; without distractors when ``distractors`` is False."""
        return self._by_type.get((entity_type, distractors), ())

    @cached_property
    def name_index(self) -> dict[str, tuple[str, ...]]:
        """Normalized name, alias or title -> ids of the entities that carry it, in id order."""
        index: dict[str, list[str]] = {}
        for entity in self.entities:
            for name in dict.fromkeys(normalize_text(n) for n in (*entity.names, entity.title)):
                index.setdefault(name, []).append(entity.id)
        return {name: tuple(ids) for name, ids in index.items()}

    @cached_property
    def max_name_tokens(self) -> int:
        """The most words in any normalized name, alias or title."""
        return max(len(name.split()) for name in self.name_index)

    def referents(self, text: str) -> tuple[Entity, ...]:
        """Every entity one of whose names, aliases or title normalizes like ``text``."""
        return tuple(self._by_id[i] for i in self.name_index.get(normalize_text(text), ()))

    def reference(self, entity_id: str) -> str | None:
        """The shortest name that picks out this entity alone: its name, else its title, else None."""
        entity = self.entity(entity_id)
        for text in (entity.name, entity.title):
            if [e.id for e in self.referents(text)] == [entity_id]:
                return text
        return None

    def unique_names(self, entity_id: str) -> tuple[str, ...]:
        """The entity's names, aliases and title that no other entity carries (canonical name first)."""
        entity = self.entity(entity_id)
        names = dict.fromkeys((*entity.names, entity.title))
        return tuple(n for n in names if self.name_index[normalize_text(n)] == (entity_id,))

    @cached_property
    def _inverse(self) -> dict[str, tuple[tuple[str, str], ...]]:
        inverse: dict[str, list[tuple[str, str]]] = {}
        for entity in self.entities:
            for relation, target in entity.relations.items():
                inverse.setdefault(target, []).append((relation, entity.id))
        return {target: tuple(pairs) for target, pairs in inverse.items()}

    def inverse(self, entity_id: str) -> tuple[tuple[str, str], ...]:
        """``(relation, source id)`` of every relation pointing at ``entity_id``, in source id order."""
        return self._inverse.get(entity_id, ())

    def follow(self, start: str, relations: Sequence[str]) -> str | None:
        """The entity reached from ``start`` along ``relations``; None where a relation is missing."""
        current: str | None = start
        for relation in relations:
            if current is None:
                return None
            current = self._by_id[current].relations.get(relation)
        return current

    def near_duplicates(self) -> list[tuple[Entity, ...]]:
        """Groups of entities that share a name, or that were generated to sound like another, in id order."""
        groups: dict[str, list[Entity]] = {}
        for entity in self.entities:
            root = entity.twin_of or entity.id
            groups.setdefault(root, []).append(entity)
        return [tuple(group) for group in groups.values() if len(group) > 1]


@dataclass
class _Draft:
    """A mutable entity under construction."""

    id: str
    type: str
    kind: str
    name: str
    aliases: list[str] = field(default_factory=list)
    attributes: dict[str, int | str] = field(default_factory=dict)
    relations: dict[str, str] = field(default_factory=dict)
    gender: str | None = None
    definite: bool = False
    distractor: bool = False
    twin_of: str | None = None

    def freeze(self, qualifier: str | None) -> Entity:
        return Entity(
            id=self.id, type=self.type, kind=self.kind, name=self.name, aliases=tuple(self.aliases),
            attributes=dict(self.attributes), relations=dict(self.relations), qualifier=qualifier,
            gender=self.gender, definite=self.definite, distractor=self.distractor, twin_of=self.twin_of,
        )


def _type_counts(total: int) -> dict[str, int]:
    """Split ``total`` entities over the types by :data:`_TYPE_SHARES` (largest remainder, stable order)."""
    share_sum = sum(_TYPE_SHARES.values())
    exact = {t: total * share / share_sum for t, share in _TYPE_SHARES.items()}
    counts = {t: int(value) for t, value in exact.items()}
    by_remainder = sorted(exact, key=lambda t: (-(exact[t] - counts[t]), list(_TYPE_SHARES).index(t)))
    for t in by_remainder[: total - sum(counts.values())]:
        counts[t] += 1
    return counts


class _Builder:
    """Creates drafts phase by phase (core, then distractors), keeping names unique except for twins."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.drafts: list[_Draft] = []
        self.owners: dict[str, str] = {}  # normalized name -> id of the twin group root that owns it
        self.rng = random.Random(0)
        self.distractor = False
        self.twin_rates: dict[str, float] = {}

    # -- bookkeeping ------------------------------------------------------------------------------
    def pool(self, entity_type: str) -> list[_Draft]:
        """Drafts a new entity may point at: core only while building the core, else every draft."""
        return [d for d in self.drafts if d.type == entity_type and (self.distractor or not d.distractor)]

    def free(self, name: str, group: str | None = None) -> bool:
        """Whether ``name`` is unclaimed (or claimed by the twin group ``group``)."""
        owner = self.owners.get(normalize_text(name))
        return owner is None or (group is not None and owner == group)

    def unique_name(self, make: Callable[[], str]) -> str:
        for _ in range(200):
            name = make()
            if self.free(name):
                return name
        raise RuntimeError("could not find an unused name after 200 draws; the name space is exhausted")

    def add(self, entity_type: str, kind: str, name: str, aliases: Sequence[str] = (), **fields: Any) -> _Draft:
        group = fields.get("twin_of")
        draft = _Draft(
            id=f"e{len(self.drafts):05d}", type=entity_type, kind=kind, name=name,
            aliases=[a for a in dict.fromkeys(aliases) if a != name and self.free(a, group) and _usable_alias(a)],
            distractor=self.distractor, **fields,
        )
        for text in (draft.name, *draft.aliases):
            self.owners.setdefault(normalize_text(text), group or draft.id)
        self.drafts.append(draft)
        return draft

    def twin_source(self, entity_type: str) -> _Draft | None:
        """A draft to near-duplicate, drawn with the phase's twin rate (core sources during distractors)."""
        rate = self.twin_rates.get(entity_type, 0.0)
        if self.rng.random() >= rate:
            return None
        sources = [d for d in self.drafts if d.type == entity_type and not d.distractor]
        return self.rng.choice(sources) if sources else None

    # -- regions and places ---------------------------------------------------------------------
    def region(self) -> None:
        rng = self.rng
        self.add("region", rng.choice(REGION_KINDS), self.unique_name(lambda: _names.region_name(rng)),
                 attributes={"area_km2": rng.randint(1_200, 48_000)})

    def place(self) -> None:
        rng = self.rng
        region = rng.choice(self.pool("region"))
        source = self.twin_source("place")
        name, twin_of = None, None
        if source is not None:
            candidate = _names.sound_alike(rng, source.name)
            if candidate is not None and self.free(candidate):
                name, twin_of = candidate, source.twin_of or source.id
                if rng.random() < 0.5:  # the harder case: both in the same region
                    region = self._draft(source.relations["located_in"])
        if name is None:
            name = self.unique_name(lambda: _names.place_name(rng))
        kind = rng.choices(PLACE_KINDS, weights=(3, 5, 3))[0]
        low, high = _POPULATION_RANGES[kind]
        self.add("place", kind, name, twin_of=twin_of, relations={"located_in": region.id}, attributes={
            "population": round(rng.randint(low, high), -1 if kind == "village" else -2),
            "founding_year": rng.randint(850, 1890),
            "elevation_m": rng.randint(2, 2_200),
        })

    # -- people ---------------------------------------------------------------------------------
    def person(self) -> None:
        rng = self.rng
        source = self.twin_source("person")
        occupation = rng.choices(OCCUPATIONS, weights=_OCCUPATION_WEIGHTS)[0]
        if source is not None:
            group = source.twin_of or source.id
            taken = [d.kind for d in self.drafts if d.type == "person" and (d.twin_of or d.id) == group]
            occupation = rng.choice([o for o in OCCUPATIONS if o not in taken])
            gender, parts, twin_of = source.gender or "f", _split_person_name(source), group
        else:
            gender = rng.choice(("f", "m"))
            parts, twin_of = self._fresh_person_parts(gender), None
        given, middle, family = parts
        birth = rng.randint(_EARLIEST_BIRTH.get(occupation, 1760), 1985)
        attributes: dict[str, int | str] = {"birth_year": birth, "occupation": occupation}
        death = birth + rng.randint(38, 96)
        if death <= LAST_YEAR:
            attributes["death_year"] = death
        places = [p for p in self.pool("place") if int(p.attributes["founding_year"]) < birth] or self.pool("place")
        name = " ".join(part for part in (given, middle, family) if part)
        self.add("person", occupation, name, _person_aliases(rng, given, middle, family, gender, occupation),
                 gender=gender, twin_of=twin_of, attributes=attributes,
                 relations={"born_in": rng.choice(places).id})

    def _fresh_person_parts(self, gender: str) -> tuple[str, str, str]:
        rng = self.rng
        for _ in range(200):
            given, family = _names.given_name(rng, gender), _names.surname(rng)
            middle = _names.given_name(rng, gender) if rng.random() < 0.2 else ""
            if self.free(" ".join(p for p in (given, middle, family) if p)) and self.free(f"{given} {family}"):
                return given, middle, family
        raise RuntimeError("could not find an unused person name after 200 draws")

    def memberships(self, people: Sequence[_Draft]) -> None:
        """Give some people an alma mater and a membership, among organizations older than them."""
        rng = self.rng
        organizations = self.pool("organization")
        for person in people:
            birth = int(person.attributes["birth_year"])
            schools = [o for o in organizations
                       if o.kind == "university" and int(o.attributes["founding_year"]) <= birth + 18]
            if schools and rng.random() < 0.5:
                person.relations["educated_at"] = rng.choice(schools).id
            clubs = [o for o in organizations if o.kind != "university" and o.relations.get("founded_by") != person.id
                     and int(o.attributes["founding_year"]) <= birth + 40]
            if clubs and rng.random() < 0.5:
                person.relations["member_of"] = rng.choice(clubs).id

    # -- organizations, works, events -------------------------------------------------------------
    def organization(self) -> None:
        rng = self.rng
        kind = rng.choices(ORGANIZATION_KINDS, weights=_ORGANIZATION_WEIGHTS)[0]
        founders = [p for p in self.pool("person") if int(p.attributes["birth_year"]) <= 1990]
        founder = rng.choice(founders)
        founded = min(int(founder.attributes["birth_year"]) + rng.randint(25, 55), 2020)
        places = [p for p in self.pool("place") if int(p.attributes["founding_year"]) < founded] or self.pool("place")
        home = rng.choice(places)
        region = self._draft(home.relations["located_in"])
        surname = rng.choice((_split_person_name(founder)[2], _names.surname(rng)))
        for _ in range(200):
            name, definite = _names.organization_name(rng, kind, place=home.name, region=region.name, person=surname)
            if self.free(name):
                break
            surname = _names.surname(rng)
        else:
            raise RuntimeError("could not find an unused organization name after 200 draws")
        self.add("organization", kind, name, _acronyms(name), definite=definite,
                 attributes={"founding_year": founded},
                 relations={"founded_by": founder.id, "headquartered_in": home.id})

    def work(self) -> None:
        rng = self.rng
        source = self.twin_source("work")
        if source is not None and self._twin_work(source):
            return
        people = [p for p in self.pool("person") if _first_year(p) <= _last_year(p)]
        creator = rng.choice([p for p in people if p.kind in _CREATOR_KINDS] or people)
        kind = _CREATOR_KINDS.get(creator.kind) or rng.choice(list(WORK_KINDS))
        year = rng.randint(_first_year(creator), _last_year(creator))
        title = self.unique_name(lambda: _names.work_title(
            rng, place=rng.choice(self.pool("place")).name, given=_names.given_name(rng, rng.choice("fm"))))
        self._add_work(kind, title, creator, year, twin_of=None)

    def _twin_work(self, source: _Draft) -> bool:
        """A work of another kind with ``source``'s title, made later (an adaptation); False if none fits."""
        rng = self.rng
        group = source.twin_of or source.id
        taken = [d.kind for d in self.drafts if d.type == "work" and (d.twin_of or d.id) == group]
        after = int(source.attributes["year"]) + 2
        creators = [p for p in self.pool("person") if p.kind in _CREATOR_KINDS
                    and _CREATOR_KINDS[p.kind] not in taken and max(after, _first_year(p)) <= _last_year(p)]
        if not creators:
            return False
        creator = rng.choice(creators)
        year = rng.randint(max(after, _first_year(creator)), _last_year(creator))
        self._add_work(_CREATOR_KINDS[creator.kind], source.name, creator, year, twin_of=group)
        return True

    def _add_work(self, kind: str, title: str, creator: _Draft, year: int, twin_of: str | None) -> None:
        rng = self.rng
        _, publisher_kind, genres = WORK_KINDS[kind]
        relations = {"created_by": creator.id}
        publishers = [o for o in self.pool("organization")
                      if o.kind == publisher_kind and int(o.attributes["founding_year"]) <= year]
        if publishers and rng.random() < 0.85:
            relations["published_by"] = rng.choice(publishers).id
        aliases = [title[4:]] if title.startswith("The ") else []
        genres = tuple(g for g in genres if _EARLIEST_GENRE.get(g, 0) <= year) or genres
        self.add("work", kind, title, aliases, twin_of=twin_of, relations=relations,
                 attributes={"year": year, "genre": rng.choice(genres)})

    def event(self) -> None:
        rng = self.rng
        kind = rng.choice(EVENT_KINDS)
        year = rng.randint(1820, 2020)
        places = [p for p in self.pool("place") if int(p.attributes["founding_year"]) < year] or self.pool("place")
        for _ in range(200):
            place = rng.choice(places)
            name = _names.event_name(rng, kind, place=place.name)
            if self.free(name):
                break
        else:
            raise RuntimeError("could not find an unused event name after 200 draws")
        relations = {"held_in": place.id}
        organizers = [o for o in self.pool("organization") if int(o.attributes["founding_year"]) <= year]
        if organizers and rng.random() < 0.9:
            relations["organized_by"] = rng.choice(organizers).id
        low, high = _ATTENDANCE_RANGES[kind]
        self.add("event", kind, name, definite=True, relations=relations,
                 attributes={"year": year, "attendance": round(rng.randint(low, high), -1)})

    def _draft(self, entity_id: str) -> _Draft:
        return self.drafts[int(entity_id[1:])]

    # -- phases ---------------------------------------------------------------------------------
    def phase(self, counts: Mapping[str, int], *, distractor: bool, rng: random.Random) -> None:
        """Create ``counts`` entities of each type, regions first, relations pointing at earlier phases too."""
        self.rng, self.distractor = rng, distractor
        self.twin_rates = _DISTRACTOR_TWIN_RATES if distractor else _CORE_TWIN_RATES
        for _ in range(counts["region"]):
            self.region()
        for _ in range(counts["place"]):
            self.place()
        first_person = len(self.drafts)
        for _ in range(counts["person"]):
            self.person()
        people = self.drafts[first_person:]
        for _ in range(counts["organization"]):
            self.organization()
        self.memberships(people)
        for _ in range(counts["work"]):
            self.work()
        for _ in range(counts["event"]):
            self.event()

    def finish_regions(self) -> None:
        """Each region's capital (its most populous place) and population, from places of its own phase."""
        for region in (d for d in self.drafts if d.type == "region"):
            places = [p for p in self.drafts if p.type == "place" and p.relations["located_in"] == region.id
                      and p.distractor == region.distractor]
            total = sum(int(p.attributes["population"]) for p in places)
            factor = sub_rng(self.seed, "region-population", region.id).uniform(1.4, 2.6)
            region.attributes["population"] = round(int(total * factor) + 50_000, -3)
            if places:
                capital = max(places, key=lambda p: (int(p.attributes["population"]), p.id))
                region.relations["capital"] = capital.id


def _usable_alias(alias: str) -> bool:
    """False for an alias that would read as an ordinary word of a question ("Was", "WHO")."""
    normalized = normalize_text(alias)
    return bool(normalized) and normalized not in _QUESTION_WORDS


def _first_year(person: _Draft) -> int:
    """First year a person can have made a work: at 20."""
    return int(person.attributes["birth_year"]) + 20


def _last_year(person: _Draft) -> int:
    """Last year a person can have made a work: their death, or :data:`LAST_YEAR`."""
    return min(int(person.attributes.get("death_year", LAST_YEAR)), LAST_YEAR)


def _split_person_name(person: _Draft) -> tuple[str, str, str]:
    parts = person.name.split(" ")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else (parts[0], "", parts[-1])


def _person_aliases(rng: random.Random, given: str, middle: str, family: str, gender: str,
                    occupation: str) -> list[str]:
    aliases = []
    if occupation in _HONORIFIC_OCCUPATIONS and rng.random() < 0.5:
        aliases.append(f"Dr. {given} {family}")
    elif rng.random() < 0.08:
        aliases.append(f"{'Dame' if gender == 'f' else 'Sir'} {given} {family}")
    if middle:
        aliases.append(f"{given} {family}")
    aliases.extend([f"{given[0]}. {family}", family])
    return aliases


def _acronyms(name: str) -> list[str]:
    """``"Royal Society of Kelden"`` -> ``["RSK"]``: initials of three or more capitalized words."""
    initials = "".join(word[0] for word in name.split() if word[:1].isupper())
    return [initials] if len(initials) >= 3 else []


def _qualifiers(drafts: Sequence[_Draft]) -> dict[str, str]:
    """Title qualifiers of the entities whose canonical name is shared: their kind (unique in the group)."""
    groups: dict[str, list[_Draft]] = {}
    for draft in drafts:
        groups.setdefault(normalize_text(draft.name), []).append(draft)
    qualifiers = {}
    for group in groups.values():
        if len(group) > 1:
            kinds = [d.kind for d in group]
            if len(set(kinds)) != len(kinds):
                raise AssertionError(f"near-duplicates {[d.id for d in group]} share a kind: {kinds}")
            qualifiers.update({d.id: d.kind for d in group})
    return qualifiers


def generate_world(seed: int, *, n_entities: int, n_distractors: int = 0) -> World:
    """Generate a fictional world.

    Args:
        seed: Seed of every random draw; the same arguments give the same world, byte for byte.
        n_entities: Number of core entities, at least :data:`MIN_ENTITIES`; split over the types
            (about a third people, a fifth works and places, the rest organizations, events, regions).
        n_distractors: Number of extra entities, mostly near-duplicates of core ones, that questions
            never use. The core entities do not depend on it (their titles may gain a qualifier).

    Returns:
        The world, core entities first.

    Raises:
        ValueError: ``n_entities`` below :data:`MIN_ENTITIES` or ``n_distractors`` negative.

    Example:
        >>> world = generate_world(3, n_entities=80)
        >>> sorted({e.type for e in world.entities}) == sorted(ENTITY_TYPES)
        True
    """
    if isinstance(n_entities, bool) or not isinstance(n_entities, int) or n_entities < MIN_ENTITIES:
        raise ValueError(f"expected n_entities >= {MIN_ENTITIES}, got {n_entities!r}")
    if isinstance(n_distractors, bool) or not isinstance(n_distractors, int) or n_distractors < 0:
        raise ValueError(f"expected n_distractors >= 0, got {n_distractors!r}")
    core_counts = _type_counts(n_entities)
    if any(core_counts[t] < minimum for t, minimum in _MIN_PER_TYPE.items()):
        raise ValueError(f"expected n_entities large enough for every type, got {n_entities}")
    builder = _Builder(seed)
    builder.phase(core_counts, distractor=False, rng=sub_rng(seed, "world", "core"))
    builder.phase(_type_counts(n_distractors), distractor=True, rng=sub_rng(seed, "world", "distractors"))
    builder.finish_regions()
    qualifiers = _qualifiers(builder.drafts)
    entities = tuple(draft.freeze(qualifiers.get(draft.id)) for draft in builder.drafts)
    return World(seed=seed, n_entities=n_entities, n_distractors=n_distractors, entities=entities)
