"""Search-v0 through scripted agents: a tools-only oracle solves it, a random agent does not.

The oracle is only told the question (``prompt_only``), so a high score proves that the questions
are answerable through ``search`` and ``open`` and that the verifier accepts the right answers; the
edited-corpus tests prove that it reads the articles instead of remembering them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.wrappers import TimeLimit

from agentgym_envs import parse_action
from agentgym_envs.policies import RandomPolicy, SearchOraclePolicy, run_episode
from agentgym_envs.policies.base import Policy, prompt_only
from agentgym_envs.policies.search_oracle import Chain, Plan, parse_question, read_fact
from agentgym_envs.runner import Episode
from agentgym_envs.search import SearchEnv
from tasks import Document, Task, load_split
from tasks.search.bundled import load_corpus, load_world
from tasks.search.phrasing import (
    ATTRIBUTE_QUESTIONS,
    COMPARISON_QUESTIONS,
    DEFAULT_ATTENDANCE_NOUN,
    ENTITY_QUESTIONS,
    RELATION_PHRASES,
    WORK_FIRST_VERB,
)

TURN_LIMIT = 10  # Search-v0's max_episode_steps


@pytest.fixture(scope="module")
def test_tasks() -> list[Task]:
    return load_split("Search", "test")


@pytest.fixture(scope="module")
def search_env() -> Iterator[gym.Env]:
    env = gym.make("agentgym_envs:agentrl/Search-v0", split="test")
    yield env
    env.close()


def play(env: gym.Env, policy: Policy, tasks: list[Task]) -> list[Episode]:
    """One episode per task; the policy sees only the question."""
    return [run_episode(env, policy, task, seed=0, shown_task=prompt_only(task)) for task in tasks]


# --- the whole test split ------------------------------------------------------------------------


def test_oracle_solves_the_test_split_through_the_tools(search_env: gym.Env, test_tasks: list[Task]) -> None:
    results = play(search_env, SearchOraclePolicy(), test_tasks)
    mean = sum(result.reward for result in results) / len(results)
    failed = [(result.task_id, result.trajectory.turns[-1].action) for result in results if result.reward < 1.0]
    assert mean >= 0.95, failed
    assert all(result.stop_reason == "answered" for result in results)  # answers within the turn limit


def test_random_policy_scores_near_zero(search_env: gym.Env, test_tasks: list[Task]) -> None:
    results = play(search_env, RandomPolicy(seed=0), test_tasks)
    assert sum(result.reward for result in results) / len(results) <= 0.05


def test_oracle_actions_are_well_formed_and_deterministic(search_env: gym.Env, test_tasks: list[Task]) -> None:
    chosen = [next(t for t in test_tasks if t.family == family) for family in ("single", "bridge", "comparison")]
    first, second = play(search_env, SearchOraclePolicy(), chosen), play(search_env, SearchOraclePolicy(), chosen)
    actions = [[turn.action for turn in result.trajectory.turns] for result in first]
    assert actions == [[turn.action for turn in result.trajectory.turns] for result in second]
    for action in (action for episode in actions for action in episode):
        parsed = parse_action(action)
        assert parsed.well_formed and parsed.think and "\n" not in parsed.think, action


# --- it reads, it does not remember -----------------------------------------------------------------


def _edited_env(task: Task, doc_id: str, old: str, new: str, index_dir: str) -> gym.Env:
    """A Search env over the bundled corpus with ``old`` replaced by ``new`` in one article."""
    corpus: list[Document] = []
    for doc in load_corpus("fictional-v1"):
        if doc.id == doc_id:
            assert old in doc.text, f"{old!r} is not in {doc_id}"
            doc = dataclasses.replace(doc, text=doc.text.replace(old, new))
        corpus.append(doc)
    return TimeLimit(SearchEnv(tasks=[task], corpus=corpus, index_dir=index_dir), TURN_LIMIT)


@pytest.mark.parametrize("edit", ["value", "link"])
def test_oracle_answers_from_an_edited_article(edit: str, test_tasks: list[Task], tmp_path: Path) -> None:
    # "The founding year of the studio that produced X": edit the studio's founding year ("value"), or make
    # X's article name another studio ("link"), whose founding year the oracle must then look up.
    task = next(t for t in test_tasks if t.metadata["question_type"] == "work.published_by.founding_year")
    work_doc, publisher_doc = task.metadata["chains"][0]
    world = load_world("fictional-v1")
    publisher = world.entity_of(publisher_doc)
    if edit == "value":
        old, new = task.answer[0], str(int(task.answer[0]) + 7)
        edited, answer = publisher_doc, new
    else:
        year = publisher.attributes["founding_year"]
        other = next(e for e in world.world.of_type("organization", distractors=False)
                     if e.kind == publisher.kind and e.attributes["founding_year"] != year
                     and world.world.reference(e.id) == e.name and not e.definite)
        old, new = publisher.name, other.name
        edited, answer = work_doc, str(other.attributes["founding_year"])
    edited_task = dataclasses.replace(task, answer=[answer])
    env = _edited_env(edited_task, edited, old, new, str(tmp_path))
    try:
        result = run_episode(env, SearchOraclePolicy(), edited_task, seed=0, shown_task=prompt_only(edited_task))
    finally:
        env.close()
    assert answer != task.answer[0]
    assert result.reward == 1.0, result.trajectory.turns[-1].action
    assert parse_action(result.trajectory.turns[-1].action).answer == answer


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "plan"), [
    # a one-hop attribute question about a definite name
    ("In what year was the Lostmere Lace Fair?", Plan((Chain("the Lostmere Lace Fair"),), "year")),
    # "When was X born?" must not be read as the event question "In what year was {X born}?"
    ("When was Mara Velt (painter) born?", Plan((Chain("Mara Velt (painter)"),), "birth_year")),
    # a bridge whose relations nest; the innermost phrase says the named work is a novel or a collection
    ("In what year was the founder of the publisher of The Silent Harbor born?",
     Plan((Chain("The Silent Harbor", ("published_by", "founded_by"), "novel poetry collection"),), "birth_year")),
    # an entity question: the last relation comes from the question template
    ("In which district is the village where Wyra Nysaeskard was born?",
     Plan((Chain("Wyra Nysaeskard", ("born_in", "located_in")),))),
    # a member_of phrase with the inner phrase in the middle
    ("What is the founding year of the museum that the person who founded the museum that owns The Island's Garden "
     "belonged to?",
     Plan((Chain("The Island's Garden", ("published_by", "founded_by", "member_of"), "painting"),), "founding_year")),
    # a comparison of a named person and one reached through a film
    ("Who was born first, Mara Velt (painter) or the director of A Mirror in Summer?",
     Plan((Chain("Mara Velt (painter)"), Chain("A Mirror in Summer", ("created_by",), "film")), "birth_year", "min")),
    # "Which of A and B": the sides are split at the "and" that leaves two phrases
    ("Which of Braetheine Brahathvik (architect) and Zestetem Gowinmar died earlier?",
     Plan((Chain("Braetheine Brahathvik (architect)"), Chain("Zestetem Gowinmar")), "death_year", "min")),
])
def test_parse_question(question: str, plan: Plan) -> None:
    assert parse_question(question) == plan


def _every_template() -> Iterator[tuple[str, Plan]]:
    """A question from every template of :mod:`tasks.search.phrasing` (the generator's), and the plan it asks."""
    name, other = "Mara Velt", "Joss Arden"
    for relation, by_kind in ENTITY_QUESTIONS.items():
        for kind, texts in by_kind.items():
            for text in texts:
                yield text.format(s=name, tk="town"), Plan((Chain(name, (relation,), _cue(kind)),))
    for relation, by_kind in RELATION_PHRASES.items():
        for kind, texts in by_kind.items():
            for text in texts:
                phrase = text.format(x=name, tk="town")
                yield f"Who founded {phrase}?", Plan((Chain(name, (relation, "founded_by"), _cue(kind)),))
    for (_, attribute), texts in ATTRIBUTE_QUESTIONS.items():
        for text in texts:
            for kind in WORK_FIRST_VERB if "{v}" in text else ("*",):
                question = text.format(s=name, v=WORK_FIRST_VERB.get(kind), noun=DEFAULT_ATTENDANCE_NOUN)
                yield question, Plan((Chain(name, (), _cue(kind)),), attribute)
    for (_, attribute, prefer), texts in COMPARISON_QUESTIONS.items():
        for text in texts:
            yield text.format(a=name, b=other), Plan((Chain(name), Chain(other)), attribute, prefer)


def _cue(kind: str) -> str:
    return "" if kind == "*" else kind


@pytest.mark.parametrize(("question", "plan"), list(_every_template()), ids=lambda value: str(value)[:60])
def test_the_oracle_parses_every_template_the_generator_words_questions_with(question: str, plan: Plan) -> None:
    parsed = parse_question(question)
    assert [(chain.start, chain.relations) for chain in parsed.chains] == \
        [(chain.start, chain.relations) for chain in plan.chains]
    for expected, got in zip(plan.chains, parsed.chains, strict=True):
        # a cue names every work kind that shares the wording ("novel poetry collection")
        assert expected.cue in got.cue if expected.cue else got.cue == ""
    assert parsed.prefer == plan.prefer
    # a comparison that serves founding years and work years alike reads either ("start_year")
    assert parsed.attribute == plan.attribute or (parsed.attribute == "start_year"
                                                  and plan.attribute in ("founding_year", "year"))


def test_parse_question_rejects_other_wordings() -> None:
    with pytest.raises(ValueError, match="expected a question worded like"):
        parse_question("Who is the best painter in Kelden?")


@pytest.mark.parametrize(("fact", "text", "value"), [
    # a person's facts use the family name; "and grew up there" is not part of the place
    ("born_in", "Velt often spent the summer near Ganby. Velt was born in Orsterwick and grew up there.", "Orsterwick"),
    # a mention that names a near-duplicate keeps its qualifier
    ("founded_by", "Mara Velt (painter) founded the museum.", "Mara Velt (painter)"),
    # a definite name at the start of a sentence
    ("published_by", "It has been discussed in 5 scholarly studies. The Velt Gallery holds the painting.",
     "The Velt Gallery"),
    # the creator in the lead, before ", first released in"
    ("created_by", "The Bitter Mirror is a drama film by Oskar Lind, first released in 1921.", "Oskar Lind"),
    # "the earlier novel by" names the creator of the other work with that title, not this one's
    ("created_by", "The film shares its title with the earlier novel by Ada Holm.", None),
    ("birth_year", "Mara Velt (1850–1912) was a painter.", "1850"),
    ("death_year", "Born in 1850, Mara Velt was a film director; she died in 1912.", "1912"),
    ("occupation", "Born in 1850, Mara Velt was a film director; she died in 1912.", "film director"),
    ("population", "At the last census, Orsterwick had 52,000 inhabitants.", "52,000"),
    ("elevation_m", "The town lies 1783 m above sea level.", "1783"),
    ("area_km2", "Kelden is a province covering 20,073 km².", "20,073"),
    ("genre", "Hidden Lighthouses is an 1834 science fiction novel by Ada Holm.", "science fiction"),
    # the generator writes "first first performed" for operas
    ("year", "Last Bridges is a tragic opera, first first performed in 1825.", "1825"),
    # a region's capital, even in the sentence form a place's own article also uses
    ("capital", "Orsterwick serves as the capital of Kelden.", "Orsterwick"),
    # a truncated snippet: no sentence end, no value
    ("headquartered_in", "… The headquarters of the Velt Press are in Orster …", None),
])
def test_read_fact(fact: str, text: str, value: str | None) -> None:
    assert read_fact(fact, text) == value
