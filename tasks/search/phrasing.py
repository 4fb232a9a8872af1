"""Question wording: noun phrases along relations, attribute questions, entity questions, comparisons.

The one copy of how Search questions are worded: the generator (:mod:`tasks.search.questions`) fills these
templates, and the tools-only oracle (:mod:`agentgym_envs.policies.search_oracle`) parses questions with them.

Every template is a ``str.format`` pattern. ``{x}`` is the inner noun phrase, ``{s}`` the subject
of a question, ``{a}``/``{b}`` the two sides of a comparison, ``{tk}`` the kind of the entity
the phrase denotes ("town", "province"), ``{v}`` a verb that depends on a work's kind
(:data:`WORK_FIRST_VERB`), ``{noun}`` who attends an event (:data:`ATTENDANCE_NOUN`).
"""

from __future__ import annotations

import re

# A relation applied to a noun phrase {x} denoting its source; keyed by relation, then by source kind
# where the wording depends on it ("the director of" a film, "the author of" a novel).
RELATION_PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "born_in": {"*": ("the birthplace of {x}", "the {tk} where {x} was born")},
    "educated_at": {"*": ("the alma mater of {x}", "the university attended by {x}")},
    "member_of": {"*": ("the {tk} of which {x} was a member", "the {tk} that {x} belonged to")},
    "founded_by": {"*": ("the founder of {x}", "the person who founded {x}")},
    "headquartered_in": {"*": ("the home {tk} of {x}", "the {tk} that is home to {x}")},
    "located_in": {"*": ("the {tk} containing {x}", "the {tk} that includes {x}")},
    "capital": {"*": ("the capital of {x}", "the capital {tk} of {x}")},
    "created_by": {
        "novel": ("the author of {x}", "the novelist who wrote {x}"),
        "poetry collection": ("the poet who wrote {x}", "the author of {x}"),
        "film": ("the director of {x}", "the person who directed {x}"),
        "album": ("the musician who recorded {x}", "the artist behind the album {x}"),
        "painting": ("the painter of {x}", "the artist who painted {x}"),
        "opera": ("the composer of {x}", "the person who composed {x}"),
    },
    "published_by": {
        "novel": ("the publisher of {x}", "the publishing house that published {x}"),
        "poetry collection": ("the publisher of {x}", "the publishing house that published {x}"),
        "film": ("the studio that produced {x}", "the film studio behind {x}"),
        "album": ("the label that released {x}", "the record label that released {x}"),
        "painting": ("the museum that holds {x}", "the museum that owns {x}"),
        "opera": ("the company that premiered {x}", "the opera company that premiered {x}"),
    },
    "held_in": {"*": ("the {tk} that hosted {x}", "the host {tk} of {x}")},
    "organized_by": {"*": ("the organizer of {x}", "the organization that organized {x}")},
}

# A question whose answer is the target of a relation from the subject {s}.
ENTITY_QUESTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "born_in": {"*": ("Where was {s} born?", "In which {tk} was {s} born?", "What is the birthplace of {s}?")},
    "educated_at": {"*": ("Where did {s} study?", "Which university did {s} attend?",
                          "What is the alma mater of {s}?")},
    "member_of": {"*": ("Which organization was {s} a member of?", "Of which {tk} was {s} a member?")},
    "founded_by": {"*": ("Who founded {s}?", "Who was the founder of {s}?")},
    "headquartered_in": {"*": ("Where is {s} based?", "In which {tk} is {s} headquartered?",
                               "What is the home {tk} of {s}?")},
    "located_in": {"*": ("In which {tk} is {s}?", "Which {tk} is {s} located in?")},
    "capital": {"*": ("What is the capital of {s}?", "Which {tk} is the capital of {s}?")},
    "created_by": {
        "novel": ("Who wrote {s}?", "Who is the author of {s}?"),
        "poetry collection": ("Who wrote {s}?", "Which poet wrote {s}?"),
        "film": ("Who directed {s}?", "Who was the director of {s}?"),
        "album": ("Who recorded {s}?", "Which musician recorded {s}?"),
        "painting": ("Who painted {s}?", "Which artist painted {s}?"),
        "opera": ("Who composed {s}?", "Who wrote the music of {s}?"),
    },
    "published_by": {
        "novel": ("Which publisher published {s}?", "Who published {s}?"),
        "poetry collection": ("Which publisher published {s}?", "Who published {s}?"),
        "film": ("Which studio produced {s}?", "Which film studio made {s}?"),
        "album": ("Which label released {s}?", "On which record label was {s} released?"),
        "painting": ("Which museum holds {s}?", "In which museum's collection is {s}?"),
        "opera": ("Which company premiered {s}?", "Which opera company gave the premiere of {s}?"),
    },
    "held_in": {"*": ("Where was {s} held?", "In which {tk} did {s} take place?", "Which {tk} hosted {s}?")},
    "organized_by": {"*": ("Who organized {s}?", "Which organization organized {s}?")},
}

# A question asking an attribute of the subject {s}; keyed by (entity type, attribute).
ATTRIBUTE_QUESTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("person", "birth_year"): ("In what year was {s} born?", "What is the birth year of {s}?", "When was {s} born?"),
    ("person", "death_year"): ("In what year did {s} die?", "When did {s} die?", "What is the year of death of {s}?"),
    ("person", "occupation"): ("What was the occupation of {s}?", "What did {s} do for a living?"),
    ("organization", "founding_year"): ("In what year was {s} founded?", "When was {s} founded?",
                                        "What is the founding year of {s}?"),
    ("place", "population"): ("What is the population of {s}?", "How many people live in {s}?"),
    ("place", "founding_year"): ("In what year was {s} founded?", "When was {s} founded?",
                                 "What is the founding year of {s}?"),
    ("place", "elevation_m"): ("What is the elevation in metres of {s}?",
                               "How many metres above sea level is {s}?"),
    ("region", "area_km2"): ("What is the area in square kilometres of {s}?",
                             "How many square kilometres does {s} cover?", "What is the area, in km², of {s}?"),
    ("region", "population"): ("What is the population of {s}?", "How many people live in {s}?"),
    ("work", "year"): ("In what year was {s} first {v}?", "When was {s} first {v}?"),
    ("work", "genre"): ("What genre is {s}?", "To which genre does {s} belong?"),
    ("event", "year"): ("In what year did {s} take place?", "When was {s} held?", "In what year was {s}?"),
    ("event", "attendance"): ("How many {noun} attended {s}?", "What was the number of {noun} at {s}?"),
}

WORK_FIRST_VERB = {"novel": "published", "poetry collection": "published", "film": "released",
                   "album": "released", "painting": "completed", "opera": "performed"}
"""Work kind -> the verb of ``{v}`` ("When was {s} first published?")."""
DEFAULT_FIRST_VERB = "released"
"""``{v}`` for a work of a kind :data:`WORK_FIRST_VERB` does not list."""
ATTENDANCE_NOUN = {"festival": "visitors", "congress": "delegates", "exhibition": "visitors",
                   "competition": "entrants", "fair": "visitors"}
"""Event kind -> the noun of ``{noun}`` ("How many delegates attended {s}?")."""
DEFAULT_ATTENDANCE_NOUN = "people"
"""``{noun}`` for an event of a kind :data:`ATTENDANCE_NOUN` does not list."""

# Comparisons: (entity type, attribute, "min" or "max") -> templates over {a} and {b}.
COMPARISON_QUESTIONS: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("person", "birth_year", "min"): ("Who was born first, {a} or {b}?", "Which of {a} and {b} was born earlier?"),
    ("person", "birth_year", "max"): ("Who was born later, {a} or {b}?",
                                      "Which of {a} and {b} was born more recently?"),
    ("person", "death_year", "min"): ("Who died first, {a} or {b}?", "Which of {a} and {b} died earlier?"),
    ("person", "death_year", "max"): ("Who died later, {a} or {b}?",),
    ("organization", "founding_year", "min"): ("Which was founded first, {a} or {b}?", "Which is older, {a} or {b}?"),
    ("organization", "founding_year", "max"): ("Which was founded more recently, {a} or {b}?",),
    ("place", "population", "max"): ("Which has the larger population, {a} or {b}?",
                                     "Which is more populous, {a} or {b}?"),
    ("place", "population", "min"): ("Which has the smaller population, {a} or {b}?",),
    ("place", "founding_year", "min"): ("Which was founded first, {a} or {b}?", "Which is older, {a} or {b}?"),
    ("place", "elevation_m", "max"): ("Which lies at a higher elevation, {a} or {b}?",),
    ("place", "elevation_m", "min"): ("Which lies at a lower elevation, {a} or {b}?",),
    ("region", "area_km2", "max"): ("Which covers a larger area, {a} or {b}?",),
    ("region", "area_km2", "min"): ("Which is smaller in area, {a} or {b}?",),
    ("region", "population", "max"): ("Which has the larger population, {a} or {b}?",),
    ("work", "year", "min"): ("Which came out first, {a} or {b}?", "Which is older, {a} or {b}?"),
    ("work", "year", "max"): ("Which came out later, {a} or {b}?",),
    ("event", "year", "min"): ("Which took place first, {a} or {b}?",),
    ("event", "year", "max"): ("Which took place later, {a} or {b}?",),
    ("event", "attendance", "max"): ("Which drew more attendees, {a} or {b}?",),
    ("event", "attendance", "min"): ("Which drew fewer attendees, {a} or {b}?",),
}

OCCUPATION_ALIASES = {
    "novelist": ("writer", "author"), "poet": ("writer",), "film director": ("director", "filmmaker"),
    "painter": ("artist",), "musician": (), "composer": (), "architect": (), "physicist": ("scientist",),
    "botanist": ("scientist",), "mathematician": (), "explorer": (), "merchant": ("trader",),
    "politician": (),
}


def ending_with_subject(templates: tuple[str, ...], slot: str) -> tuple[str, ...]:
    """The templates that end with ``slot`` (``"{s}?"``, ``"{x}"``), or all when none does.

    A long subject ("the founder of the publisher of X") reads best last: "What is the birth year
    of the founder of the publisher of X?" rather than "When was the founder ... born?".
    """
    return tuple(t for t in templates if t.endswith(slot)) or templates


def by_kind(table: dict[str, dict[str, tuple[str, ...]]], relation: str, kind: str) -> tuple[str, ...]:
    """The templates of ``relation`` for a source of ``kind`` (falling back to the ``"*"`` entry)."""
    entry = table[relation]
    return entry.get(kind) or entry.get("*") or next(iter(entry.values()))


def _vocabulary() -> frozenset[str]:
    words: list[str] = []
    tables = (RELATION_PHRASES, ENTITY_QUESTIONS)
    texts = [t for table in tables for entry in table.values() for group in entry.values() for t in group]
    texts += [t for group in (*ATTRIBUTE_QUESTIONS.values(), *COMPARISON_QUESTIONS.values()) for t in group]
    texts += [*WORK_FIRST_VERB, *WORK_FIRST_VERB.values(), *ATTENDANCE_NOUN, *ATTENDANCE_NOUN.values()]
    for text in texts:
        words.extend(re.findall(r"[a-z]+", re.sub(r"\{[a-z]+\}", " ", text.lower())))
    return frozenset(words)


VOCABULARY = _vocabulary()
"""Every word the question templates use: no alias may be one, or questions would seem to name it."""
