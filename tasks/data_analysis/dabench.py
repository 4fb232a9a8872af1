"""Load InfiAgent-DABench's public files as DataAnalysis tasks, for users who have them.

DABench ships a questions file (JSONL: ``id``, ``question``, ``concepts``, ``constraints``,
``format``, ``file_name``, ``level``), a labels file (JSONL: ``id``, ``common_answers`` as
``[[name, value], ...]``) and a folder of the CSV files the questions name. Each question becomes a
task with ``metadata["data_dir"]`` pointing at that folder; its family is its first concept mapped
onto :data:`~tasks.data_analysis.questions.FAMILIES` (:data:`CONCEPT_FAMILIES`; an unknown one
becomes ``summary_statistics``), the original concepts kept in ``metadata["concepts_original"]`` and its id
in ``metadata["dabench_id"]`` (the ``id`` of a response in DABench's format).

A question is never dropped or changed silently. :func:`read_dabench` returns, besides the tasks, every
question it dropped (``skip_missing``: no label, no file, a file name that is not plain) and every question
whose label DABench itself broke (:func:`label_problems`), each with the reason. DABench's public dev labels
have three: a ``nan`` (id 554), a list cut to ``[`` by DABench's own field regex (id 273) and a field named
several times (id 734). They are kept by default, with ``metadata["label_problems"]``, and scored as DABench
scores them (the last value of a repeated name, the literal text otherwise), so that counts stay comparable
with published ones; ``skip_broken`` drops them instead.

Example:
    >>> loaded = read_dabench("da-dev-questions.jsonl", "da-dev-labels.jsonl", "da-dev-tables")  # doctest: +SKIP
    >>> loaded.tasks[0].metadata["answer_fields"]  # doctest: +SKIP
    {'mean_fare': '34.65'}
    >>> [note.question_id for note in loaded.flagged]  # doctest: +SKIP
    [273, 554, 734]
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.data_analysis.dabench_eval import label_fields
from tasks.data_analysis.datasets import ENV
from tasks.data_analysis.formats import check_file_name
from tasks.errors import TaskError
from tasks.records import Task

CONCEPT_FAMILIES = {
    "summary statistics": "summary_statistics",
    "distribution analysis": "summary_statistics",
    "correlation analysis": "correlation",
    "outlier detection": "outliers",
    "feature engineering": "cleaning",
    "comprehensive data preprocessing": "cleaning",
    "data preprocessing": "cleaning",
    "time series analysis": "time_series",
    "grouping": "grouping",
    "filtering": "filtering",
}
"""DABench concept (case-insensitive) -> family; any other concept maps to ``summary_statistics``."""
LEVEL_DIFFICULTY = {"easy": 1, "medium": 3, "hard": 5}
"""DABench level -> difficulty."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuestionNote:
    """A DABench question the loader dropped or flagged, and why.

    Attributes:
        question_id: The question's ``id``.
        reason: What is wrong, in a sentence.
    """

    question_id: Any
    reason: str

    def __str__(self) -> str:
        return f"question {self.question_id!r}: {self.reason}"


@dataclass(frozen=True)
class DabenchLoad:
    """What :func:`read_dabench` made of DABench's files.

    Attributes:
        tasks: The tasks, in the questions file's order.
        dropped: Questions left out (``skip_missing``, ``skip_broken``), with the reason.
        flagged: Questions whose label DABench broke (:func:`label_problems`), kept unless ``skip_broken``.
    """

    tasks: list[Task]
    dropped: list[QuestionNote] = field(default_factory=list)
    flagged: list[QuestionNote] = field(default_factory=list)


def _records(path: str | os.PathLike[str], what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSONL file."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise TaskError(f"{path}:{number}: expected a JSON object of a DABench {what}, got invalid JSON "
                                f"({error})") from error
            if not isinstance(record, dict) or "id" not in record:
                raise TaskError(f"{path}:{number}: expected a JSON object with an id, got {line.strip()[:80]!r}")
            yield number, record


def family_of(concepts: list[str]) -> str:
    """The family of a DABench question: its first concept mapped by :data:`CONCEPT_FAMILIES`."""
    return CONCEPT_FAMILIES.get(concepts[0].strip().lower(), "summary_statistics") if concepts else "summary_statistics"


def label_problems(common_answers: list[list[Any]]) -> list[str]:
    """Why a DABench label cannot be met by a correct answer, one sentence per problem (none: a sound label).

    * a name labelled more than once: DABench keeps its last value, so the earlier ones are never asked for;
    * a value ``nan``: not a number, so no computed answer equals it (DABench accepts only the text ``nan``);
    * a value holding ``[`` without its ``]``, or ``]``, or a line break: DABench's regex ends a value at its first
      ``]`` and at the line's end, so such a label is a list cut short (only its literal text scores) or one that
      nothing can match.

    Example:
        >>> label_problems([["outliers", "["], ["n", "2"], ["n", "3"]])  # doctest: +NORMALIZE_WHITESPACE
        ["field 'n' is labelled 2 times ('2', '3'): DABench keeps the last, '3'",
         "field 'outliers' is labelled '[': a list cut at its first ']' by DABench's own field regex; only that
         literal text scores"]
    """
    problems = []
    counts = Counter(name for name, _ in common_answers)
    for name, count in counts.items():
        if count > 1:
            values = tuple(value for other, value in common_answers if other == name)
            problems.append(f"field {name!r} is labelled {count} times ({', '.join(map(repr, values))}): DABench "
                            f"keeps the last, {values[-1]!r}")
    for name, value in label_fields(common_answers).items():
        text = str(value)
        if text.strip().lower() == "nan" or (isinstance(value, float) and math.isnan(value)):
            problems.append(f"field {name!r} is labelled {text!r}: not a number, so no computed answer equals it "
                            f"(DABench accepts only the text {text!r})")
        elif "]" in text or "\n" in text:
            problems.append(f"field {name!r} is labelled {text!r}: DABench's field regex ends a value at its first "
                            f"']' and at a line end, so no answer can match it")
        elif "[" in text:
            problems.append(f"field {name!r} is labelled {text!r}: a list cut at its first ']' by DABench's own "
                            f"field regex; only that literal text scores")
    return problems


def _labels(path: str | os.PathLike[str]) -> dict[Any, list[list[Any]]]:
    labels = {}
    for number, record in _records(path, "label"):
        answers = record.get("common_answers")
        if not isinstance(answers, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in answers):
            raise TaskError(f"{path}:{number}: expected common_answers as [[name, value], ...], got {answers!r}")
        labels[record["id"]] = answers
    return labels


def dabench_task(record: Mapping[str, Any], answers: list[list[Any]], data_dir: Path) -> Task:
    """One DABench question and its answers as a task whose files are in ``data_dir``.

    Raises:
        TaskError: The file name is not plain or the file is missing from ``data_dir``.
    """
    file_name = check_file_name(record.get("file_name"), f"DABench question {record['id']!r}")
    if not (data_dir / file_name).is_file():
        raise TaskError(f"expected file {file_name!r} of DABench question {record['id']!r} at "
                        f"{data_dir / file_name}, got no such file")
    concepts = [str(concept) for concept in record.get("concepts", [])]
    family = family_of(concepts)
    mapped = [family] + [name for name in dict.fromkeys(family_of([concept]) for concept in concepts)
                         if name != family]
    fields = {str(name): value for name, value in label_fields(answers).items()}
    constraints = record.get("constraints", "")
    metadata = {
        "question": record["question"], "constraints": [constraints] if isinstance(constraints, str) else constraints,
        "format": record.get("format", ""), "concepts": mapped, "concepts_original": concepts,
        "files": [file_name], "tables": {Path(file_name).stem: file_name}, "data_dir": str(data_dir),
        "answer_fields": fields, "level": record.get("level"), "label_problems": label_problems(answers),
        "dabench_id": record["id"],
    }
    answer = ", ".join(f"@{name}[{value}]" for name, value in fields.items())
    return Task(f"dabench/{record['id']}", ENV, family, record["question"], answer,
                LEVEL_DIFFICULTY.get(str(record.get("level", "")).lower(), 3), metadata)


def read_dabench(questions: str | os.PathLike[str], labels: str | os.PathLike[str],
                 data_dir: str | os.PathLike[str], *, skip_missing: bool = False,
                 skip_broken: bool = False) -> DabenchLoad:
    """DABench's questions with their labels as DataAnalysis tasks, and every question dropped or flagged.

    Args:
        questions: The questions JSONL file.
        labels: The labels JSONL file.
        data_dir: The folder of the CSV files (made absolute).
        skip_missing: Drop questions whose label or file is missing (or whose file name is not plain) instead of
            raising; each is named in ``dropped``.
        skip_broken: Drop questions whose label DABench broke (:func:`label_problems`) instead of keeping and
            flagging them; each is named in ``dropped``.

    Returns:
        The tasks, the dropped questions and the flagged ones, each with its reason.

    Raises:
        TaskError: A malformed line (file and line number), or, unless ``skip_missing``, a question
            without a label or whose file is missing.
    """
    folder = Path(data_dir).resolve()
    answers = _labels(labels)
    loaded = DabenchLoad([])
    for number, record in _records(questions, "question"):
        if "question" not in record:
            raise TaskError(f"{questions}:{number}: expected a question text, got keys {sorted(record)}")
        try:
            if record["id"] not in answers:
                raise TaskError(f"expected a label for DABench question {record['id']!r} in {labels}, got none")
            task = dabench_task(record, answers[record["id"]], folder)
        except TaskError as error:
            if not skip_missing:
                raise
            loaded.dropped.append(QuestionNote(record["id"], str(error)))
            continue
        problems = task.metadata["label_problems"]
        if problems and skip_broken:
            loaded.dropped.append(QuestionNote(record["id"], "broken label: " + "; ".join(problems)))
            continue
        loaded.flagged.extend(QuestionNote(record["id"], problem) for problem in problems)
        loaded.tasks.append(task)
    return loaded


def load_dabench(questions: str | os.PathLike[str], labels: str | os.PathLike[str],
                 data_dir: str | os.PathLike[str], *, skip_missing: bool = False,
                 skip_broken: bool = False) -> list[Task]:
    """The tasks of :func:`read_dabench`; each dropped or flagged question is logged as a warning with its reason.

    Raises:
        TaskError: As :func:`read_dabench`.
    """
    loaded = read_dabench(questions, labels, data_dir, skip_missing=skip_missing, skip_broken=skip_broken)
    for note in loaded.dropped:
        logger.warning("dropped DABench %s", note)
    for note in loaded.flagged:
        logger.warning("kept DABench %s", note)
    return loaded.tasks
