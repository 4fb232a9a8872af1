"""From a drafted question to a checked task: both references run and agree, and no unstated reading matters.

:func:`build_task` picks a reading per ambiguity dimension the draft touches and states some of
them as constraints. It runs the pandas program and the SQL query under that reading; they must
agree (answer fields by :func:`~tasks.data_analysis.answers.field_matches`, result tables by
:func:`~tasks.data_analysis.answers.tables_match`). Then it runs the pandas program under every other
reading of every dimension. A dimension left unstated whose readings disagree makes the question
ambiguous: it is dropped. So is a number within :data:`BOUNDARY_EPSILON` of a rounding boundary,
an answer that is not a number where one is asked (NaN), and an empty result table. The audit is
kept in ``metadata["readings"]``: per dimension, whether it was stated and the answer under each reading.

Agreement is judged by the grader's own rules (:mod:`tasks.data_analysis.answers`, which
:mod:`rewards.data_analysis` scores with), so that a kept answer is one the grader accepts from either reference.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tasks.data_analysis.answers import field_matches, parse_answer_fields, tables_match
from tasks.data_analysis.datasets import ENV, Dataset, Theme
from tasks.data_analysis.questions import Draft
from tasks.data_analysis.references import (
    DIMENSIONS,
    TABLE_PRINTER,
    LoadedTables,
    answer_printer,
    constraint,
    pandas_prelude,
    run_pandas,
    run_sql,
    sql_fact,
)
from tasks.records import Task

STATE_PROBABILITY = 0.7
"""Chance that a touched dimension is stated as a constraint; unstated ones are audited."""
BOUNDARY_EPSILON = 1e-9
"""A number this close (scaled to its last kept decimal) to a rounding half is dropped."""
_PREFERRED = {"duplicates": 0.8, "nulls": 0.8, "ties": 0.8, "labels": 1.0, "ddof": 0.5}
"""Chance of a dimension's first reading when a reading is picked."""


@dataclass(frozen=True)
class Dropped:
    """A draft that did not become a task.

    Attributes:
        reason: Why: ``"unstated <dimension>"``, ``"references disagree"``, ``"rounding boundary"``,
            ``"not a number"`` or ``"empty result"``.
    """

    reason: str


@dataclass(frozen=True)
class Plan:
    """The readings of a question and which are stated.

    Attributes:
        reading: Dimension -> reading, for every dimension the program depends on.
        stated: The dimensions stated as constraints.
        audited: The dimensions whose other readings are run (all touched ones, and rounding).
    """

    reading: dict[str, str]
    stated: tuple[str, ...]
    audited: tuple[str, ...]


def plan_readings(draft: Draft, rng: random.Random, *, state_probability: float = STATE_PROBABILITY) -> Plan:
    """Pick a reading for each dimension the draft touches and decide which to state.

    Args:
        draft: The question.
        rng: The random source.
        state_probability: Chance of stating each touched dimension.

    Returns:
        The plan; readings the question's words fix are in it and count as stated.
    """
    reading, stated = dict(draft.fixed), list(draft.fixed)
    for dimension in draft.dimensions:
        first, other = DIMENSIONS[dimension]
        reading[dimension] = first if rng.random() < _PREFERRED[dimension] else other
        if rng.random() < state_probability:
            stated.append(dimension)
    audited = list(draft.dimensions)
    if any(spec.kind == "number" for spec in draft.fields) or draft.family == "sql":
        reading["rounding"] = "half_even"
        audited.append("rounding")
    return Plan(reading, tuple(stated), tuple(audited))


def pandas_source(draft: Draft, dataset: Dataset, theme: Theme, reading: Mapping[str, str]) -> str:
    """The pandas reference program of a draft under a reading."""
    tables = [dataset.table(name) for name in draft.tables]
    lines = pandas_prelude(tables, theme, reading, dirtiness=dataset.dirtiness, uses_date=draft.uses_date,
                           prints_table=draft.family == "sql")
    lines += draft.body(dict(reading))
    lines += TABLE_PRINTER if draft.family == "sql" else answer_printer([spec.name for spec in draft.fields])
    return "\n".join(lines) + "\n"


def sql_source(draft: Draft, dataset: Dataset, theme: Theme, reading: Mapping[str, str]) -> str:
    """The SQL reference query of a draft under a reading."""
    head = sql_fact(theme, reading, dirtiness=dataset.dirtiness, uses_date=draft.uses_date)
    std = "STDDEV_SAMP" if reading.get("ddof", "1") == "1" else "STDDEV_POP"
    ties = "ASC" if reading.get("ties", "first") == "first" else "DESC"
    select = draft.select.format(std=std, ties=ties)
    return f"{head}\n{select}" if select.startswith("SELECT") else f"{head}{select}"


def constraints(draft: Draft, dataset: Dataset, theme: Theme, plan: Plan) -> list[str]:
    """The question's constraints: the stated readings, then how dirty columns are written."""
    lines = [constraint(dimension, plan.reading[dimension], theme) for dimension in plan.stated
             if dimension not in draft.fixed]
    if dataset.dirtiness >= 3:
        lines.append(f"{theme.measure} is written as text with a unit and thousands separators (e.g. "
                     f"'{theme.unit[0]}1,234.50{theme.unit[1]}'); read the number in it.")
        if draft.uses_date:
            time = " followed by HH:MM:SS" if theme.date_type == "timestamp" else ""
            lines.append(f"{theme.date} is written either YYYY-MM-DD or MM/DD/YYYY{time}.")
    return lines


def build_task(draft: Draft, dataset: Dataset, theme: Theme, work_dir: str, rng: random.Random,
               task_id: str, loaded: LoadedTables | None = None) -> Task | Dropped:
    """Run and audit a draft; the task, or why it was dropped.

    Args:
        draft: The question.
        dataset: Its dataset, whose files are under ``work_dir/data``.
        theme: The dataset's theme.
        work_dir: The folder the programs run in.
        rng: The random source of the readings.
        task_id: The task's id.
        loaded: Where the SQL reference's tables stay loaded between drafts (see :func:`run_sql`).

    Returns:
        The task, or a :class:`Dropped` saying why not.

    Raises:
        TaskError: A reference program failed to run (a bug in its family).
    """
    return check_draft(draft, dataset, theme, work_dir, plan_readings(draft, rng), task_id, loaded)


def check_draft(draft: Draft, dataset: Dataset, theme: Theme, work_dir: str, plan: Plan,
                task_id: str, loaded: LoadedTables | None = None) -> Task | Dropped:
    """Run and audit a draft under a given plan of readings (:func:`build_task` after :func:`plan_readings`).

    Args:
        draft: The question.
        dataset: Its dataset, whose files are under ``work_dir/data``.
        theme: The dataset's theme.
        work_dir: The folder the programs run in.
        plan: The readings, which of them are stated, and which are audited.
        task_id: The task's id.
        loaded: Where the SQL reference's tables stay loaded between drafts (see :func:`run_sql`).

    Returns:
        The task, or a :class:`Dropped` saying why not.

    Raises:
        TaskError: A reference program failed to run.
    """
    tables = {name: dataset.table(name).file for name in draft.tables}
    pandas_code = pandas_source(draft, dataset, theme, plan.reading)
    sql_code = sql_source(draft, dataset, theme, plan.reading)
    printed = run_pandas(pandas_code, work_dir)
    rows = run_sql(sql_code, work_dir, tables, loaded)
    outcome = _table_answer(draft, printed, rows) if draft.family == "sql" else _field_answer(draft, printed, rows)
    if isinstance(outcome, Dropped):
        return outcome
    readings = _audit(draft, dataset, theme, work_dir, plan, outcome)
    if isinstance(readings, Dropped):
        return readings
    return _task(draft, dataset, theme, plan, task_id, outcome, readings,
                 {"pandas": pandas_code, "sql": sql_code}, tables)


def _field_answer(draft: Draft, printed: str, rows: list[list[Any]]) -> tuple[str, dict[str, Any]] | Dropped:
    """The answer line and typed fields, when both references give the same fields."""
    line = printed.strip()
    fields = parse_answer_fields(line).fields
    if len(rows) != 1 or list(fields) != [spec.name for spec in draft.fields]:
        return Dropped("references disagree")
    values = {}
    for spec, given in zip(draft.fields, rows[0], strict=True):
        text = fields[spec.name]
        if spec.kind != "text" and not math.isfinite(float(text)):
            return Dropped("not a number")
        if given is None or not field_matches(text, str(given)):
            return Dropped("references disagree")
        values[spec.name] = text if spec.kind == "text" else int(text) if spec.kind == "integer" else float(text)
    return line, values


def _table_answer(draft: Draft, printed: str, rows: list[list[Any]]) -> tuple[str, list[list[Any]]] | Dropped:
    """The result table, when the pandas table matches the SQL one and is not empty or NaN-bearing."""
    computed = [json.loads(line) for line in printed.splitlines() if line]
    if not rows or any(cell is None or (isinstance(cell, float) and not math.isfinite(cell))
                       for row in computed for cell in row):
        return Dropped("empty result")
    if not tables_match(rows, computed, ordered=draft.ordered):
        return Dropped("references disagree")
    return "", rows if draft.ordered else sorted(rows, key=json.dumps)  # DuckDB's unordered rows come in any order


def _same(draft: Draft, canonical: Any, other: str) -> tuple[bool, Any]:
    """Whether another reading's output gives the canonical answer, and that output as recorded."""
    if draft.family == "sql":
        table = [json.loads(line) for line in other.splitlines() if line]
        return tables_match(canonical, table, ordered=draft.ordered), table
    fields = parse_answer_fields(other.strip()).fields
    same = all(name in fields and field_matches(str(value), fields[name]) for name, value in canonical.items())
    return same, other.strip()


def _audit(draft: Draft, dataset: Dataset, theme: Theme, work_dir: str, plan: Plan,
           outcome: tuple[str, Any]) -> dict[str, Any] | Dropped:
    """Every reading of every audited dimension, or why the question is ambiguous."""
    line, canonical = outcome
    record = {}
    for dimension in plan.audited:
        values: dict[str, Any] = {}
        for option in DIMENSIONS[dimension]:
            if option == plan.reading[dimension]:
                values[option] = canonical if draft.family == "sql" else line
                continue
            reading = {**plan.reading, dimension: option}
            same, shown = _same(draft, canonical, run_pandas(pandas_source(draft, dataset, theme, reading), work_dir))
            values[option] = shown
            if not same and dimension not in plan.stated:
                return Dropped(f"unstated {dimension}")
        record[dimension] = {"stated": dimension in plan.stated, "values": values}
    if draft.fields and _near_boundary(draft, dataset, theme, work_dir, plan):
        return Dropped("rounding boundary")
    return record


def _near_boundary(draft: Draft, dataset: Dataset, theme: Theme, work_dir: str, plan: Plan) -> bool:
    """Whether a rounded field's exact value lies within :data:`BOUNDARY_EPSILON` of a rounding half."""
    exact = run_pandas(pandas_source(draft, dataset, theme, {**plan.reading, "rounding": "exact"}), work_dir)
    fields = parse_answer_fields(exact.strip()).fields
    return any(_on_half(float(fields[spec.name]), spec.places) for spec in draft.fields if spec.kind == "number")


def _on_half(value: float, places: int) -> bool:
    scaled = abs(value) * 10**places
    return abs(scaled - math.floor(scaled) - 0.5) < BOUNDARY_EPSILON * max(1.0, scaled)


def format_line(draft: Draft) -> str:
    """The format line: one ``@name[value] where ...`` per field, or the result's columns for ``sql``."""
    if draft.family == "sql":
        order = ", in the order the question asks" if draft.ordered else " (row order does not matter)"
        return f"A SQL query returning columns {', '.join(draft.columns)}{order}"
    return "\n".join(spec.format_line() for spec in draft.fields)


def _task(draft: Draft, dataset: Dataset, theme: Theme, plan: Plan, task_id: str, outcome: tuple[str, Any],
          readings: dict[str, Any], reference: dict[str, str], tables: dict[str, str]) -> Task:
    line, value = outcome
    metadata: dict[str, Any] = {
        "question": draft.question, "constraints": constraints(draft, dataset, theme, plan),
        "format": format_line(draft), "concepts": list(draft.concepts),
        "files": list(dict.fromkeys(tables.values())), "tables": tables, "dataset": dataset.name,
        "readings": readings, "reference": reference,
    }
    if draft.family == "sql":
        metadata.update({"answer_table": value, "ordered": draft.ordered})
        answer = reference["sql"]
    else:
        metadata["answer_fields"] = value
        answer = line
    return Task(task_id, ENV, draft.family, draft.question, answer, difficulty_of(draft, dataset), metadata)


def difficulty_of(draft: Draft, dataset: Dataset) -> int:
    """1 + extra answer fields (for ``sql``: a requested order) + joins + extra concepts + dirtiness (at most 2).

    Capped at 5.
    """
    extra = draft.ordered if draft.family == "sql" else len(draft.fields) - 1
    points = extra + len(draft.tables) - 1 + len(draft.concepts) - 1 + min(2, dataset.dirtiness)
    return min(5, 1 + points)
