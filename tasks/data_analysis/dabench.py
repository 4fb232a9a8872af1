"""Load InfiAgent-DABench's public files as DataAnalysis tasks, for users who have them.

DABench ships a questions file (JSONL: ``id``, ``question``, ``concepts``, ``constraints``,
``format``, ``file_name``, ``level``), a labels file (JSONL: ``id``, ``common_answers`` as
``[[name, value], ...]``) and a folder of the CSV files the questions name. Each question becomes a
task with ``metadata["data_dir"]`` pointing at that folder; its family is its first concept mapped
onto :data:`~tasks.data_analysis.questions.FAMILIES` (:data:`CONCEPT_FAMILIES`; an unknown one
becomes ``summary_statistics``), the original concepts kept in ``metadata["concepts_original"]``.

Example:
    >>> tasks = load_dabench("da-dev-questions.jsonl", "da-dev-labels.jsonl", "da-dev-tables")  # doctest: +SKIP
    >>> tasks[0].metadata["answer_fields"]  # doctest: +SKIP
    {'mean_fare': '34.65'}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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
    fields = {str(name): value for name, value in answers}
    constraints = record.get("constraints", "")
    metadata = {
        "question": record["question"], "constraints": [constraints] if isinstance(constraints, str) else constraints,
        "format": record.get("format", ""), "concepts": mapped, "concepts_original": concepts,
        "files": [file_name], "tables": {Path(file_name).stem: file_name}, "data_dir": str(data_dir),
        "answer_fields": fields, "level": record.get("level"),
    }
    answer = ", ".join(f"@{name}[{value}]" for name, value in fields.items())
    return Task(f"dabench/{record['id']}", ENV, family, record["question"], answer,
                LEVEL_DIFFICULTY.get(str(record.get("level", "")).lower(), 3), metadata)


def load_dabench(questions: str | os.PathLike[str], labels: str | os.PathLike[str],
                 data_dir: str | os.PathLike[str], *, skip_missing: bool = False) -> list[Task]:
    """DABench's questions with their labels as DataAnalysis tasks.

    Args:
        questions: The questions JSONL file.
        labels: The labels JSONL file.
        data_dir: The folder of the CSV files (made absolute).
        skip_missing: Leave out questions whose label or file is missing (or whose file name is not plain)
            instead of raising.

    Returns:
        The tasks, in the questions file's order.

    Raises:
        TaskError: A malformed line (file and line number), or, unless ``skip_missing``, a question
            without a label or whose file is missing.
    """
    folder = Path(data_dir).resolve()
    answers = _labels(labels)
    tasks = []
    for number, record in _records(questions, "question"):
        if "question" not in record:
            raise TaskError(f"{questions}:{number}: expected a question text, got keys {sorted(record)}")
        try:
            if record["id"] not in answers:
                raise TaskError(f"expected a label for DABench question {record['id']!r} in {labels}, got none")
            tasks.append(dabench_task(record, answers[record["id"]], folder))
        except TaskError:
            if not skip_missing:
                raise
    return tasks
