"""DABench's closed-form evaluation reproduced: every hand-computed case agrees with DABench's own
``eval_closed_form.py`` (run here from tests/tasks/fixtures/dabench), and the forgiving default differs where
its docstring says it does."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewards.data_analysis import dabench_reward, data_analysis_reward
from tasks.data_analysis.dabench import read_dabench
from tasks.data_analysis.dabench_eval import (
    FIELD_PATTERN,
    dabench_metrics,
    extract_fields,
    grade,
    label_fields,
    score_responses,
    score_tasks,
    task_responses,
)
from tasks.records import Task, Trajectory, Turn

FIXTURES = Path(__file__).parent / "fixtures" / "dabench"

MEAN = [["mean_fare", "34.65"]]
TWO = [["a", "1"], ["b", "x"]]

# (labels as DABench's common_answers, response, DABench's verdict per distinct field, forgiving default's ABQ)
CASES = [
    (MEAN, "@mean_fare[34.65]", [True], 1.0),  # the label itself
    (MEAN, "@mean_fare[34.650]", [True], 1.0),  # a trailing zero: equal as floats
    (MEAN, "@mean_fare[34.6500009]", [True], 1.0),  # 9e-7 away: under DABench's absolute 1e-6
    (MEAN, "@mean_fare[34.651]", [False], 0.0),  # 1e-3 away
    ([["n", "22607406"]], "@n[22607410]", [False], 1.0),  # 4 away: DABench is absolute; the default's relative passes
    (MEAN, "@mean_fare[ 34.65 ]", [True], 1.0),  # spaces: float() strips them; the default strips values
    (MEAN, "@mean_fare[34.65%]", [False], 1.0),  # a percent sign: float() refuses it; the default drops it
    ([["total", "11439.6"]], "@total[11,439.6]", [False], 1.0),  # thousands separator: only the default reads it
    (MEAN, "@mean_fare[3.465e1]", [True], 1.0),  # an exponent
    ([["n", "1000"]], "@n[1_000]", [True], 0.0),  # Python's digit separator: float() reads it, the default does not
    ([["n", "0"]], "@n[-0.0]", [True], 1.0),  # signed zero
    ([["p", "0.5"]], "@p[.5]", [True], 1.0),  # no leading zero
    ([["p", "0"]], "@p[1e-7]", [True], 1.0),  # under 1e-6 from zero
    ([["p", "0.0001"]], "@p[0.0002]", [False], 0.0),  # 1e-4 away
    (MEAN, "@mean_fare[+34.65]", [True], 1.0),  # a plus sign
    ([["relation", "weak positive"]], "@relation[Weak Positive]", [False], 1.0),  # case: only the default forgives
    ([["relation", "weak positive"]], "@relation[weak positive]", [True], 1.0),  # the same text
    ([["c", "Nigeria"]], "@c['Nigeria']", [False], 1.0),  # quotes: only the default strips them
    ([["c", "Congo"]], "@c[Congo.]", [False], 1.0),  # a final period: only the default drops it
    ([["is_normal", "no"]], "@is_normal[false]", [False], 1.0),  # no/false: the same answer only in the default
    ([["is_normal", "No"]], "@is_normal[no]", [False], 1.0),  # DABench's own label case (question 19)
    ([["b", "True"]], "@b[true]", [False], 1.0),  # boolean case
    (MEAN, "@mean_fare[1] @mean_fare[34.65]", [True], 0.0),  # repeated: DABench keeps the last; the default refuses
    (MEAN, "@mean_fare[34.65] @mean_fare[1]", [False], 0.0),  # repeated, the last one wrong
    (MEAN, "@mean_fare[34.65, 31.09, 43.47]", [False], 0.0),  # spraying values into one field never pays
    (MEAN, "@mean_fare[34.65] @mean_fare[31.09] @mean_fare[43.47]", [False], 0.0),  # nor repeating it: the last counts
    (TWO, "@b[x] @a[1]", [True, True], 1.0),  # reordered fields
    (TWO, "@a[1] @b[y]", [True, False], 0.0),  # partial: one of two right
    (TWO, "@a[1]", [True, False], 0.0),  # one field missing
    (TWO, "@a[1]\n@b[x]\n", [True, True], 1.0),  # one field a line
    (TWO, "@a[2] @b[x] @c[3]", [False, True], 0.0),  # a wrong field and one not asked
    (MEAN, "@Mean_Fare[34.65]", [False], 0.0),  # names are case-sensitive
    (MEAN, "@mean_fare [34.65]", [False], 0.0),  # a space before the bracket is no field
    (MEAN, "@mean_fare[34.65\n]", [False], 1.0),  # a line break in the value: DABench's '.' stops there
    (MEAN, "@mean_fare[34.65", [False], 0.0),  # unclosed
    (MEAN, "The mean fare is 34.65.", [False], 0.0),  # no field at all
    (MEAN, "@@mean_fare[34.65]", [True], 1.0),  # a doubled @
    (MEAN, "Answer: `@mean_fare[34.65]`.", [True], 1.0),  # inside prose and code marks
    ([["x", "1, 2018, 88.32"]], "@x[1, 2018, 88.32]", [True], 1.0),  # a list label as DABench stores it (question 77)
    ([["x", "1, 2"]], "@x[[1, 2]]", [False], 0.0),  # a bracketed list: DABench reads '[1, 2' up to the first ']'
    ([["outlier_list", "["]], "@outlier_list[[]", [True], 0.0),  # the cut label (273) met by its literal text
    ([["outlier_list", "["]], "@outlier_list[[12, 40]]", [False], 0.0),  # a real list never meets it
    ([["m", "nan"]], "@m[nan]", [True], 0.0),  # the nan label (554): equal as text; NaN matches nothing by default
    ([["m", "nan"]], "@m[NaN]", [False], 0.0),  # other case: NaN is not within 1e-6 of NaN
    ([["x", "inf"]], "@x[inf]", [True], 1.0),  # infinity as text
    ([["o", ""]], "@o[]", [True], 1.0),  # an empty label (question 116: no outliers) met by an empty value
    ([["o", ""]], "@o[none]", [False], 0.0),  # ... and not by a word
    ([["r", "0.38"], ["r", "0.56"]], "@r[0.56]", [True], 1.0),  # a repeated label (734): its last value counts
    ([["r", "0.38"], ["r", "0.56"]], "@r[0.38]\n@r[0.56]", [True], 0.0),  # the label's own copies, repeated
    ([["r", "0.38"], ["r", "0.56"]], "@r[0.38]", [False], 0.0),  # the earlier value is never asked for
]


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """DABench's ``eval_closed_form.py``, unchanged, with its ``utils.utils`` import served from the fixture."""
    utils, utils_utils = types.ModuleType("utils"), types.ModuleType("utils.utils")
    exec(compile((FIXTURES / "utils.py.txt").read_text(), "utils/utils.py", "exec"), utils_utils.__dict__)
    utils.utils = utils_utils
    monkeypatch.setitem(sys.modules, "utils", utils)
    monkeypatch.setitem(sys.modules, "utils.utils", utils_utils)
    module = types.ModuleType("eval_closed_form")
    exec(compile((FIXTURES / "eval_closed_form.py.txt").read_text(), "eval_closed_form.py", "exec"), module.__dict__)
    return module


def _reference_marks(reference: types.ModuleType, labels: list[list[str]], response: str) -> list[bool]:
    results = reference.evaluate_responses([{"id": 1, "common_answers": labels}], [{"id": 1, "response": response}])
    return list(results[0]["correctness"].values())


def _task(labels: list[list[str]]) -> Task:
    return Task("dabench/t", "DataAnalysis", "summary_statistics", "?", None,
                metadata={"answer_fields": label_fields(labels)})


def _trajectory(answer: str) -> Trajectory:
    return Trajectory((Turn(answer, "", answer=answer),))


@pytest.mark.parametrize(("labels", "response", "marks", "forgiving"), CASES)
def test_exact_mode_agrees_with_dabench_and_the_default_differs_as_documented(
        reference: types.ModuleType, labels: list[list[str]], response: str, marks: list[bool],
        forgiving: float) -> None:
    assert _reference_marks(reference, labels, response) == marks  # the hand-computed verdict is DABench's
    assert list(grade(label_fields(labels), response).values()) == marks
    result = dabench_reward(_task(labels), _trajectory(response), {})
    assert result.value == float(all(marks))
    assert result.components["psaq"] == sum(marks) / len(marks)
    assert data_analysis_reward(_task(labels), _trajectory(response), {}).value == forgiving


@given(st.text(alphabet="@[]\n\r a_1é.", max_size=60))
def test_fields_are_read_as_dabenchs_regex_reads_them(response: str) -> None:
    assert extract_fields(response) == dict(FIELD_PATTERN.findall(response))


def test_an_answer_of_unclosed_fields_is_read_in_linear_time() -> None:
    import time

    started = time.perf_counter()
    assert extract_fields("@a[" * 10_922) == {}  # DABench's own regex takes seconds on this
    assert time.perf_counter() - started < 0.5


def test_the_table_covers_cases_where_the_two_modes_disagree_both_ways() -> None:
    verdicts = {(float(all(marks)), forgiving) for _, _, marks, forgiving in CASES}
    assert verdicts == {(1.0, 1.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0)}


def _fixture_records(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]


def test_the_metrics_are_dabenchs_on_a_mixed_set_of_responses(reference: types.ModuleType) -> None:
    labels = _fixture_records("da-dev-labels.jsonl")
    questions = _fixture_records("da-dev-questions.jsonl")
    gold = {label["id"]: ", ".join(f"@{name}[{value}]" for name, value in label["common_answers"]) for label in labels}
    responses = [
        {"id": 0, "response": gold[0]},  # right
        {"id": 6, "response": "@mean_fare_elderly[43.47] @mean_fare_teenager[31.98]"},  # 2 of 4 fields
        {"id": 11, "response": "@relationship_type[Linear] @correlation_coefficient[0.99]"},  # 1 of 2: case
        {"id": 19, "response": ""},  # empty: DABench leaves the question out
        {"id": 77, "response": gold[77]},
        {"id": 109, "response": "@graduate_mean_loan[141.36]"},  # 1 of 3
        {"id": 273, "response": "@correlation_coefficient[0.922] @outlier_count[0] @outlier_list[[]]"},  # 3 of 3:
        # DABench reads '[' (the cut label) and ignores the second ']'
        {"id": 554, "response": gold[554]},  # the nan label met by its text
        {"id": 734, "response": "@correlation_coefficient[0.56]"},  # 1 of 2 distinct fields
        {"id": 734, "response": gold[734]},  # a second response for the same id: DABench takes the first
        {"id": 999, "response": "@x[1]"},  # no such question: ignored
    ]  # no response for question 116: left out too
    concepts = {question["id"]: question["concepts"] for question in questions}
    ours = score_responses(labels, responses, concepts)
    results = reference.evaluate_responses(labels, responses)
    by_count, two_or_more = reference.analyze_concepts_count_accuracy(results, concepts)
    assert (ours.abq, ours.psaq, ours.uasq) == (
        reference.evaluate_accuracy_by_question(results),
        reference.evaluate_accuracy_proportional_by_sub_question_adjusted(results),
        reference.evaluate_accuracy_by_sub_question(results))
    assert ours.by_concept == reference.analyze_concepts_accuracy(results, concepts)
    assert (ours.by_concept_count, ours.two_or_more_concepts) == (by_count, two_or_more)
    # by hand: 8 questions scored (0, 6, 11, 77, 109, 273, 554, 734), 4 solved (0, 77, 273, 554); 11 of 17 fields
    assert (ours.answered, ours.unanswered) == (8, 2)
    assert (ours.abq, ours.uasq) == (0.5, round(11 / 17, 4))
    assert ours.psaq == round((1 + 2 / 4 + 1 / 2 + 1 + 1 / 3 + 1 + 1 + 1 / 2) / 8, 4)


def test_tasks_give_the_metrics_dabenchs_files_give(tmp_path: Path) -> None:
    # what benchmarks.evaluate scores (labels and concepts read from the tasks, after a JSON round trip) against
    # score_responses on DABench's own files (checked against DABench's script above)
    labels = _fixture_records("da-dev-labels.jsonl")
    concepts = {question["id"]: question["concepts"] for question in _fixture_records("da-dev-questions.jsonl")}
    tasks = [Task.from_dict(json.loads(task.to_json())) for task in _fixture_load(tmp_path).tasks]
    by_id = {task.metadata["dabench_id"]: task for task in tasks}
    answers = [(by_id[0].id, by_id[0].answer), (by_id[6].id, "@mean_fare_elderly[43.47]"), (by_id[19].id, None),
               (by_id[273].id, "@correlation_coefficient[0.922] @outlier_count[0] @outlier_list[[]]"),
               (by_id[734].id, "@correlation_coefficient[0.56]"), (by_id[734].id, by_id[734].answer),
               ("not-a-dabench-task", "@x[1]")]
    responses = task_responses(tasks, answers)
    assert [response["id"] for response in responses] == [0, 6, 19, 273, 734, 734]
    assert responses[2] == {"id": 19, "response": ""}  # no final answer: an empty response, left out by DABench
    ours = score_tasks(tasks, responses)
    assert ours == score_responses(labels, responses, concepts)
    assert (ours.answered, ours.unanswered, ours.abq) == (4, 6, 0.5)


def test_metrics_without_questions_are_zero_and_mismatched_concepts_raise() -> None:
    empty = dabench_metrics([], [])
    assert (empty.abq, empty.psaq, empty.uasq, empty.two_or_more_concepts) == (0, 0, 0, None)
    with pytest.raises(ValueError, match="one concept list per graded question"):
        dabench_metrics([{"a": True}], [])


def _fixture_load(tmp_path: Path, **options: bool):
    for question in _fixture_records("da-dev-questions.jsonl"):
        (tmp_path / question["file_name"]).write_text("x\n1\n", encoding="utf-8")
    return read_dabench(FIXTURES / "da-dev-questions.jsonl", FIXTURES / "da-dev-labels.jsonl", tmp_path, **options)


def test_every_gold_answer_scores_one_in_exact_mode_and_the_broken_labels_are_named(
        tmp_path: Path, reference: types.ModuleType) -> None:
    loaded = _fixture_load(tmp_path)
    assert len(loaded.tasks) == 10 and not loaded.dropped
    responses = [{"id": task.metadata["dabench_id"], "response": task.answer} for task in loaded.tasks]
    questions = _fixture_records("da-dev-questions.jsonl")
    metrics = score_responses(_fixture_records("da-dev-labels.jsonl"), responses,
                              {question["id"]: question["concepts"] for question in questions})
    assert (metrics.abq, metrics.psaq, metrics.uasq, metrics.answered) == (1.0, 1.0, 1.0, 10)
    for task in loaded.tasks:
        assert dabench_reward(task, _trajectory(task.answer), {}).value == 1.0, task.id
        labels = [label for label in _fixture_records("da-dev-labels.jsonl")
                  if f"dabench/{label['id']}" == task.id]
        assert all(_reference_marks(reference, labels[0]["common_answers"], task.answer)), task.id
    flagged = {note.question_id: note.reason for note in loaded.flagged}
    assert sorted(flagged) == [273, 554, 734]
    assert "cut at its first ']'" in flagged[273] and "not a number" in flagged[554]
    assert "keeps the last" in flagged[734]
    forgiving = {task.id for task in loaded.tasks if data_analysis_reward(task, _trajectory(task.answer), {}).value < 1}
    assert forgiving == {"dabench/273", "dabench/554"}  # the default cannot meet a cut list or a nan


def test_skip_broken_drops_the_broken_labels_and_says_why(tmp_path: Path) -> None:
    loaded = _fixture_load(tmp_path, skip_broken=True)
    assert [note.question_id for note in loaded.dropped] == [273, 554, 734] and not loaded.flagged
    assert all(note.reason.startswith("broken label: ") for note in loaded.dropped)
    assert len(loaded.tasks) == 7
