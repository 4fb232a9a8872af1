"""InfiAgent-DABench's closed-form evaluation, reproduced rule for rule.

The source is ``examples/DA-Agent/eval_closed_form.py`` of github:InfiAgent/InfiAgent (Apache-2.0). Its rules,
which this module follows exactly so that a score here means what a published DABench score means:

* **Fields.** Every match of ``@(\\w+)\\[(.*?)\\]`` in the response (:data:`FIELD_PATTERN`): a name of word
  characters (Unicode letters, digits, underscore), and a value that runs to the *first* ``]`` on the same line
  (``.`` does not cross a newline), never stripped. A name given more than once keeps its **last** value
  (``dict(zip(names, values))``). The labels are read the same way: a label that names a field twice keeps its
  last value, and the question has as many sub-questions as distinct names.
* **Equality** (:func:`is_equal`): the texts are equal, or both parse with Python's ``float`` and differ by less
  than ``1e-6`` in absolute value. ``float`` accepts surrounding spaces, ``_`` between digits, exponents, ``inf``
  and ``nan``; it rejects ``,`` and ``%``. NaN equals NaN only as the same text. A field that is absent is wrong.
* **Which questions count.** A question is scored only when the responses hold one with its id and a non-empty
  ``response`` (the first such one). A question with no response, or an empty one, is *left out* of every
  denominator, not scored 0: :class:`DabenchMetrics` counts them in ``unanswered`` so that no one mistakes the
  answered share for the whole. (A record with an id and no ``response`` key counts as empty here, where
  DABench's script stops with a ``KeyError``.)
* **Metrics** (each rounded to 4 decimals, as DABench prints them): ABQ, accuracy by question (every
  sub-question right); PSAQ, proportional by sub-question (the mean over questions of the share right);
  UASQ, uniform by sub-question (right sub-questions over all sub-questions); ABQ per concept (a question counts
  once for each of its concepts) and per number of concepts.

This project's forgiving default (:mod:`tasks.data_analysis.answers`) differs on purpose: it forgives case,
quotes, thousands separators, a trailing ``%`` and a relative 1e-6, reads values to their *matching* ``]``,
and counts a field given twice as wrong, so that spraying values never pays.

Example:
    >>> extract_fields("@x[1] @y[ 2 ] @x[3]")
    {'x': '3', 'y': ' 2 '}
    >>> is_equal("0.1000000001", "0.1"), is_equal("1,000", "1000"), is_equal(None, "1")
    (True, False, False)
    >>> grade({"x": "3", "y": "2"}, "@x[3.0000001] @y[two]")
    {'x': True, 'y': False}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.records import Task

FIELD_PATTERN = re.compile(r"@(\w+)\[(.*?)\]")
"""DABench's field pattern (``extract_format``), applied with ``findall``."""

ABS_TOL = 1e-6
"""DABench's numeric rule: ``abs(float(response) - float(label)) < 1e-6``."""


_FIELD_OPENING = re.compile(r"@(\w+)\[")


def extract_fields(response: str) -> dict[str, str]:
    """The fields of a response as DABench reads them: every :data:`FIELD_PATTERN` match, the last value of a name.

    The result is ``dict(FIELD_PATTERN.findall(response))``, found in linear time: the regex itself looks for a
    ``]`` to the end of the line from every ``@name[`` that has none, which takes seconds on a 32 kB answer
    made of ``@a[`` alone.

    Example:
        >>> extract_fields("@a[[1, 2]] @b[x]")
        {'a': '[1, 2', 'b': 'x'}
    """
    fields = {}
    position = 0
    while opening := _FIELD_OPENING.search(response, position):
        close = response.find("]", opening.end())
        if close == -1:  # no "]" anywhere after: no later field can close either
            break
        line_end = response.find("\n", opening.end(), close)
        if line_end != -1:  # every opening before this line's end meets the line's end before a "]"
            position = line_end + 1
            continue
        fields[opening.group(1)] = response[opening.end():close]
        position = close + 1
    return fields


def is_equal(response: Any, label: Any) -> bool:
    """DABench's ``is_equal``: the same value, or both ``float``-parsable and within :data:`ABS_TOL`.

    Args:
        response: The extracted value, or None when the field was not given.
        label: The labelled value (a string in DABench's files).
    """
    if response == label:
        return True
    try:
        return abs(float(response) - float(label)) < ABS_TOL
    except (TypeError, ValueError):  # DABench's bare ``except`` catches exactly these here
        return False


def label_fields(common_answers: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """A label's ``[[name, value], ...]`` as DABench reads it: the last value of a repeated name."""
    return {answer[0]: answer[1] for answer in common_answers}


def grade(labels: Mapping[str, Any], response: str) -> dict[str, bool]:
    """DABench's correctness of each labelled field (sub-question) of one response.

    Args:
        labels: Name -> labelled value (:func:`label_fields` of the label's ``common_answers``).
        response: The response text.

    Returns:
        Name -> right, in the labels' order.
    """
    given = extract_fields(response)
    return {name: is_equal(given.get(name), value) for name, value in labels.items()}


@dataclass(frozen=True)
class DabenchMetrics:
    """DABench's three metrics over the answered questions, and ABQ per concept, rounded to 4 decimals.

    Attributes:
        abq: Accuracy by question: the share of answered questions with every sub-question right.
        psaq: Proportional by sub-question: the mean over answered questions of their share right.
        uasq: Uniform by sub-question: right sub-questions over all sub-questions of the answered questions.
        answered: Questions scored (those with a non-empty response).
        unanswered: Questions without a response, or with an empty one: DABench leaves them out of every metric.
        by_concept: Concept -> ABQ of the answered questions that have it.
        by_concept_count: Number of concepts -> ABQ of the answered questions with that many.
        two_or_more_concepts: ABQ of the answered questions with two or more concepts; None when there are none.
    """

    abq: float
    psaq: float
    uasq: float
    answered: int
    unanswered: int
    by_concept: dict[str, float]
    by_concept_count: dict[int, float]
    two_or_more_concepts: float | None


def _share(right: float, total: int) -> float:
    return round(right / total, 4) if total > 0 else 0


def dabench_metrics(correctness: Sequence[Mapping[str, bool]], concepts: Sequence[Sequence[str] | None], *,
                    unanswered: int = 0) -> DabenchMetrics:
    """DABench's metrics of graded questions, as ``eval_closed_form.py`` computes them.

    Args:
        correctness: One :func:`grade` result per answered question.
        concepts: The concepts of each of those questions, in the same order; None for a question the questions
            file lacks, which then counts in no concept table (as in DABench).
        unanswered: How many questions had no (or an empty) response; reported, never scored.

    Example:
        >>> metrics = dabench_metrics([{"a": True, "b": False}, {"c": True}], [["Summary Statistics"], []])
        >>> metrics.abq, metrics.psaq, metrics.uasq
        (0.5, 0.75, 0.6667)
    """
    if len(correctness) != len(concepts):
        raise ValueError(f"expected one concept list per graded question ({len(correctness)}), got {len(concepts)}")
    solved = [all(marks.values()) for marks in correctness]
    # DABench's order of operations (a sum times 1/n, added question by question), so that rounding agrees
    proportional = sum(sum(marks.values()) * (1 / len(marks)) for marks in correctness if marks)
    by_concept: dict[str, list[int]] = {}
    by_count: dict[int, list[int]] = {}
    known = [(names, right) for names, right in zip(concepts, solved, strict=True) if names is not None]
    for names, right in known:
        for concept in names:
            by_concept.setdefault(concept, [0, 0])[0] += right
            by_concept[concept][1] += 1
        by_count.setdefault(len(names), [0, 0])[0] += right
        by_count[len(names)][1] += 1
    many = [right for names, right in known if len(names) >= 2]
    return DabenchMetrics(
        abq=_share(sum(solved), len(solved)),
        psaq=_share(proportional, len(correctness)),
        uasq=_share(sum(sum(marks.values()) for marks in correctness), sum(len(marks) for marks in correctness)),
        answered=len(correctness),
        unanswered=unanswered,
        by_concept={concept: _share(right, total) for concept, (right, total) in by_concept.items()},
        by_concept_count={count: _share(right, total) for count, (right, total) in by_count.items()},
        two_or_more_concepts=_share(sum(many), len(many)) if many else None,
    )


def score_responses(labels: Sequence[Mapping[str, Any]], responses: Sequence[Mapping[str, Any]],
                    concepts: Mapping[Any, Sequence[str]]) -> DabenchMetrics:
    """DABench's metrics of a responses file against a labels file, with its rules for which questions count.

    Args:
        labels: The labels file's records (``id``, ``common_answers``), in its order.
        responses: The responses file's records (``id``, ``response``); for each label the first record with its
            id and a non-empty response is scored.
        concepts: Question id -> concepts (the questions file's ``concepts``); a question missing here counts in
            no concept table.
    """
    graded, graded_concepts = [], []
    for label in labels:
        response = next((r for r in responses if "id" in r and r.get("response") and r["id"] == label["id"]), None)
        if response is not None:
            graded.append(grade(label_fields(label["common_answers"]), response["response"]))
            graded_concepts.append(concepts.get(label["id"]))
    return dabench_metrics(graded, graded_concepts, unanswered=len(labels) - len(graded))


def task_responses(tasks: Sequence[Task], answers: Iterable[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """DABench responses (``id``, ``response``: the format its ``eval_closed_form.py`` reads) of final answers to
    tasks made from DABench's files (:func:`~tasks.data_analysis.dabench.dabench_task`).

    Args:
        tasks: The tasks; answers to tasks without ``metadata["dabench_id"]`` are left out.
        answers: ``(task id, final answer or None)`` per episode, in play order; None becomes an empty response.
    """
    ids = {task.id: task.metadata["dabench_id"] for task in tasks if "dabench_id" in task.metadata}
    return [{"id": ids[task_id], "response": answer or ""} for task_id, answer in answers if task_id in ids]


def score_tasks(tasks: Sequence[Task], responses: Sequence[Mapping[str, Any]]) -> DabenchMetrics:
    """DABench's metrics of ``responses`` to tasks made from its files: what :func:`score_responses` gives with
    DABench's labels and questions files, read from the tasks instead (``metadata["answer_fields"]``, the label's
    fields; ``metadata["concepts_original"]``, the question's concepts).

    Args:
        tasks: The tasks played; those without ``metadata["dabench_id"]`` are left out.
        responses: DABench responses (:func:`task_responses`).
    """
    played = [task for task in tasks if "dabench_id" in task.metadata]
    labels = [{"id": task.metadata["dabench_id"], "common_answers": list(task.metadata["answer_fields"].items())}
              for task in played]
    concepts = {task.metadata["dabench_id"]: task.metadata["concepts_original"] for task in played}
    return score_responses(labels, responses, concepts)


def metrics_lines(metrics: DabenchMetrics) -> list[str]:
    """The metrics as lines of text, percentages with two decimals as DABench prints them."""
    lines = [f"Accuracy by Question (ABQ): {metrics.abq:.2%}",
             f"Accuracy Proportional by Sub-Question (PSAQ): {metrics.psaq:.2%}",
             f"Accuracy by Sub-Question (UASQ): {metrics.uasq:.2%}",
             f"questions scored: {metrics.answered}; without a response, left out as DABench does: "
             f"{metrics.unanswered}",
             "ABQ by concept:", *(f"  {concept}: {accuracy:.2%}" for concept, accuracy in metrics.by_concept.items()),
             "ABQ by number of concepts:",
             *(f"  {count}: {accuracy:.2%}" for count, accuracy in metrics.by_concept_count.items())]
    if metrics.two_or_more_concepts is not None:
        lines.append(f"ABQ with two or more concepts: {metrics.two_or_more_concepts:.2%}")
    if metrics.unanswered:
        whole = metrics.abq * metrics.answered / (metrics.answered + metrics.unanswered)
        lines.append(f"not DABench's: ABQ with the {metrics.unanswered} questions without a response counted wrong: "
                     f"{whole:.2%}")
    return lines
