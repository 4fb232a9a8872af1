"""The DataAnalysis grader: closed-form answer fields (InfiAgent-DABench) and SQL result tables.

When two answers are the same answer is defined once, in :mod:`tasks.data_analysis.answers`, whose
docstring states the rules for answer fields and for result tables; the readings audit that builds
the tasks judges its two reference programs by the same rules. This module scores trajectories with
them and re-exports their public names (:func:`parse_answer_fields`, :func:`field_matches`,
:func:`list_matches`, :func:`tables_match`, ...). Those three comparisons raise this layer's errors:
:class:`~rewards.errors.RewardConfigError` for a tolerance that is negative or not finite,
:class:`~rewards.errors.RewardComputationError` for a malformed table.

:func:`data_analysis_reward` pays 1.0 only when every expected field is given once and right (ABQ,
accuracy by question); :func:`psaq_reward` pays the share of right fields (PSAQ). Fields that
were not asked do not pay. An answer over :data:`MAX_ANSWER_CHARS` scores 0.
:func:`dabench_reward` grades by DABench's own closed-form rules instead
(:mod:`tasks.data_analysis.dabench_eval`: first ``]`` ends a value, the last copy of a field wins, text equality
or an absolute 1e-6), for numbers that sit beside published DABench scores.
:func:`sql_result_reward` pays 1.0 when the agent's final query returned the expected table.

Example:
    >>> parse_answer_fields("@mean_fare[34.65], @city[Paris]").fields
    {'mean_fare': '34.65', 'city': 'Paris'}
    >>> field_matches("1234.5", "1,234.50"), field_matches("0.12", "12%")
    (True, False)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any, ParamSpec, TypeVar

from rewards.base import RewardResult
from rewards.errors import RewardComputationError, RewardConfigError
from tasks.data_analysis import answers, dabench_eval
from tasks.data_analysis.answers import (
    ABS_TOL,
    MAX_COLUMN_ASSIGNMENTS,
    REL_TOL,
    AnswerFields,
    Cell,
    parse_answer_fields,
    parse_number,
    split_list,
)
from tasks.records import Task, Trajectory

__all__ = [
    "ABS_TOL",
    "MAX_ANSWER_CHARS",
    "MAX_COLUMN_ASSIGNMENTS",
    "REL_TOL",
    "AnswerFields",
    "Cell",
    "dabench_reward",
    "data_analysis_reward",
    "field_matches",
    "list_matches",
    "parse_answer_fields",
    "parse_number",
    "psaq_reward",
    "split_list",
    "sql_result_reward",
    "tables_match",
]

MAX_ANSWER_CHARS = 10_000
"""A final answer longer than this scores 0 unparsed (``too_long``)."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _raising_reward_errors(compare: Callable[_P, _R]) -> Callable[_P, _R]:
    """A comparison of :mod:`tasks.data_analysis.answers` that raises this layer's errors instead of its own."""

    @functools.wraps(compare)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return compare(*args, **kwargs)
        except answers.ToleranceError as error:
            raise RewardConfigError(str(error)) from error
        except answers.MalformedTableError as error:
            raise RewardComputationError(str(error)) from error

    return checked


field_matches = _raising_reward_errors(answers.field_matches)
list_matches = _raising_reward_errors(answers.list_matches)
tables_match = _raising_reward_errors(answers.tables_match)


# ------------------------------------------------------------------------------ answer-field rewards


@dataclass(frozen=True)
class _ExpectedField:
    value: str | tuple[str, ...]
    rel_tol: float
    abs_tol: float
    ordered: bool

    def matches(self, given: str) -> bool:
        if isinstance(self.value, str):
            return field_matches(self.value, given, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        return list_matches(self.value, given, ordered=self.ordered, rel_tol=self.rel_tol, abs_tol=self.abs_tol)


def data_analysis_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: 1.0 when every expected answer field is given once and right (DABench's ABQ).

    The expected fields are ``task.metadata["answer_fields"]`` (name -> a string, a number, a
    boolean or a JSON list of those). Optional metadata: ``"tolerance"`` (``{"rel": ..., "abs":
    ...}``, defaults :data:`REL_TOL` and :data:`ABS_TOL`) for every field, ``"field_tolerance"``
    (name -> ``{"rel", "abs"}``) overriding it per field, and ``"unordered_fields"`` (names of list
    fields compared as multisets). The answer is ``trajectory.final_answer``; ``evidence`` is not used.

    Returns:
        The value with components ``fields_right``, ``fields_total``, ``psaq`` (share right),
        ``abq`` (1.0 when all are right), ``missing`` (expected names not given, or unclosed), ``extra`` (names
        given but not asked), ``duplicates`` (names given more than once; wrong when asked),
        ``unclosed`` (fields without their ``]``) and ``too_long`` (1.0 when the answer was over
        :data:`MAX_ANSWER_CHARS` and scored 0 unread).

    Raises:
        RewardComputationError: When the task's metadata is malformed.

    Example:
        >>> from tasks.records import Turn
        >>> task = Task("da/0", "DataAnalysis", "dabench", "...", None,
        ...             metadata={"answer_fields": {"mean_fare": 34.65, "city": "Paris"}})
        >>> answer = "@mean_fare[34.650] @city[paris]"
        >>> data_analysis_reward(task, Trajectory((Turn(answer, "", answer=answer),)), {}).value
        1.0
    """
    components = _grade_fields(task, trajectory.final_answer)
    return RewardResult(components["abq"], components)


def psaq_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: the share of expected answer fields given once and right (DABench's PSAQ).

    Reads the task and the answer as :func:`data_analysis_reward` does, with the same components.

    Raises:
        RewardComputationError: When the task's metadata is malformed.

    Example:
        >>> from tasks.records import Turn
        >>> task = Task("da/0", "DataAnalysis", "dabench", "...", None,
        ...             metadata={"answer_fields": {"mean_fare": 34.65, "city": "Paris"}})
        >>> answer = "@mean_fare[34.65] @city[Rome]"
        >>> psaq_reward(task, Trajectory((Turn(answer, "", answer=answer),)), {}).value
        0.5
    """
    components = _grade_fields(task, trajectory.final_answer)
    return RewardResult(components["psaq"], components)


def dabench_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: 1.0 when DABench's own evaluator finds every expected field right (its ABQ, exactly).

    Grades ``trajectory.final_answer`` against ``task.metadata["answer_fields"]`` with
    :func:`tasks.data_analysis.dabench_eval.grade`: a value runs to its first ``]`` and is not stripped, the last
    copy of a repeated field counts, and a value is right when its text equals the label or both are numbers less
    than 1e-6 apart. Case, quotes, ``%``, thousands separators and relative closeness are not forgiven, a field
    given twice is not wrong, and no answer is too long (:func:`data_analysis_reward` differs on each). A label
    that is not a string is compared as the text :func:`data_analysis_reward` reads it as (``true`` for True);
    ``tolerance`` and the other grading metadata are ignored, as DABench has none. ``evidence`` is not used.

    Returns:
        The value with components ``fields_right``, ``fields_total``, ``psaq`` (share right), ``abq`` and
        ``unanswered`` (1.0 when the final answer is missing or empty: DABench's evaluator would leave the
        question out of its metrics rather than score it 0).

    Raises:
        RewardComputationError: When the task's metadata is malformed or a field's label is a list (DABench's
            regex cannot read a list's ``]``).

    Example:
        >>> from tasks.records import Turn
        >>> task = Task("da/0", "DataAnalysis", "dabench", "...", None,
        ...             metadata={"answer_fields": {"mean_fare": "34.65"}})
        >>> answer = "@mean_fare[1] @mean_fare[34.6500000001]"
        >>> dabench_reward(task, Trajectory((Turn(answer, "", answer=answer),)), {}).value
        1.0
    """
    answer = trajectory.final_answer or ""
    marks = dabench_eval.grade(_dabench_labels(task), answer)
    right = sum(marks.values())
    components = {"fields_right": float(right), "fields_total": float(len(marks)), "psaq": right / len(marks),
                  "abq": float(right == len(marks)), "unanswered": float(not answer)}
    return RewardResult(components["abq"], components)


def _dabench_labels(task: Task) -> dict[str, str]:
    fields = task.metadata.get("answer_fields")
    if not isinstance(fields, Mapping) or not fields:
        raise RewardComputationError(
            f'expected task.metadata["answer_fields"] of task {task.id!r} to be a non-empty mapping, got {fields!r}'
        )
    labels = {}
    for name, value in fields.items():
        where = f"answer field {name!r} of task {task.id!r}"
        if isinstance(value, list):
            raise RewardComputationError(f"expected {where} to be a scalar for DABench's grading (its regex stops a "
                                         f"value at the first ']'), got the list {value!r}")
        labels[name] = _expected_scalar(value, where)
    return labels


def _grade_fields(task: Task, answer: str | None) -> dict[str, float]:
    expected = _expected_fields(task)
    too_long = answer is not None and len(answer) > MAX_ANSWER_CHARS
    parsed = parse_answer_fields("" if answer is None or too_long else answer)
    right = sum(name in parsed.fields and want.matches(parsed.fields[name]) for name, want in expected.items())
    named = parsed.fields.keys() | parsed.duplicates | parsed.unclosed
    return {
        "fields_right": float(right),
        "fields_total": float(len(expected)),
        "psaq": right / len(expected),
        "abq": float(right == len(expected)),
        "missing": float(len(expected.keys() - parsed.fields.keys() - parsed.duplicates)),
        "extra": float(len(named - expected.keys())),
        "duplicates": float(len(parsed.duplicates)),
        "unclosed": float(len(parsed.unclosed)),
        "too_long": float(too_long),
    }


def _expected_fields(task: Task) -> dict[str, _ExpectedField]:
    fields = task.metadata.get("answer_fields")
    if not isinstance(fields, Mapping) or not fields:
        raise RewardComputationError(
            f'expected task.metadata["answer_fields"] of task {task.id!r} to be a non-empty mapping, got {fields!r}'
        )
    default = _tolerance(task.metadata.get("tolerance", {}), f'task.metadata["tolerance"] of task {task.id!r}')
    overrides = _names_mapping(task, "field_tolerance", fields)
    unordered = _unordered_fields(task, fields)
    return {
        name: _ExpectedField(
            _expected_value(value, f"answer field {name!r} of task {task.id!r}"),
            *(_tolerance(overrides[name], f"the tolerance of field {name!r} of task {task.id!r}")
              if name in overrides else default),
            ordered=name not in unordered,
        )
        for name, value in fields.items()
    }


def _expected_value(value: Any, where: str) -> str | tuple[str, ...]:
    if isinstance(value, list):
        return tuple(_expected_scalar(item, where) for item in value)
    return _expected_scalar(value, where)


def _expected_scalar(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        return str(value)
    raise RewardComputationError(f"expected {where} to be a string, a number, a boolean or a list, got {value!r}")


def _tolerance(spec: Any, where: str) -> tuple[float, float]:
    if not isinstance(spec, Mapping) or not spec.keys() <= {"rel", "abs"}:
        raise RewardComputationError(f'expected {where} to be a mapping with keys "rel" and "abs", got {spec!r}')
    rel_tol, abs_tol = spec.get("rel", REL_TOL), spec.get("abs", ABS_TOL)
    try:
        answers.check_tolerance(rel_tol, abs_tol)
    except answers.ToleranceError as error:
        raise RewardComputationError(f"malformed {where}: {error}") from error
    return rel_tol, abs_tol


def _names_mapping(task: Task, key: str, fields: Mapping[str, Any]) -> Mapping[str, Any]:
    mapping = task.metadata.get(key, {})
    if not isinstance(mapping, Mapping):
        raise RewardComputationError(f"expected task.metadata[{key!r}] of task {task.id!r} to be a mapping, got "
                                     f"{mapping!r}")
    _check_names(task, key, mapping, fields)
    return mapping


def _unordered_fields(task: Task, fields: Mapping[str, Any]) -> frozenset[str]:
    names = task.metadata.get("unordered_fields", [])
    if not isinstance(names, list | tuple) or not all(isinstance(name, str) for name in names):
        raise RewardComputationError(f'expected task.metadata["unordered_fields"] of task {task.id!r} to be a list '
                                     f"of field names, got {names!r}")
    _check_names(task, "unordered_fields", names, fields)
    return frozenset(names)


def _check_names(task: Task, key: str, names: Any, fields: Mapping[str, Any]) -> None:
    for name in names:
        if name not in fields:
            close = get_close_matches(str(name), list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise RewardComputationError(f"expected the names in task.metadata[{key!r}] of task {task.id!r} to be "
                                         f"answer fields {sorted(fields)}, got {name!r}{hint}")


def sql_result_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: 1.0 when the agent's final query returned the expected table (:func:`tables_match`).

    The expected rows are ``task.metadata["answer_table"]`` (a list of lists), compared in order
    when ``task.metadata.get("ordered", False)``, with ``task.metadata.get("tolerance")`` as in
    :func:`data_analysis_reward`. The given rows are ``evidence["answer_table"]``: the environment
    ran the agent's final query; a missing query or one that failed leaves it absent or None.
    ``trajectory`` is not used.

    Returns:
        The value with components ``rows_expected``, ``rows_given`` (0 without a result),
        ``match`` and ``no_result`` (1.0 when there was no table to compare).

    Raises:
        RewardComputationError: When the task's metadata or the evidence's table is malformed.

    Example:
        >>> task = Task("sql/0", "DataAnalysis", "sql", "...", None, metadata={"answer_table": [["Paris", 3]]})
        >>> sql_result_reward(task, Trajectory(), {"answer_table": [[3, "Paris"]]}).components["match"]
        1.0
    """
    expected = _metadata_table(task)
    ordered = task.metadata.get("ordered", False)
    if not isinstance(ordered, bool):
        raise RewardComputationError(f'expected task.metadata["ordered"] of task {task.id!r} to be a bool, '
                                     f"got {ordered!r}")
    rel_tol, abs_tol = _tolerance(task.metadata.get("tolerance", {}), f'task.metadata["tolerance"] of task {task.id!r}')
    given = evidence.get("answer_table")
    if given is None:
        return RewardResult(0.0, {"rows_expected": float(len(expected)), "rows_given": 0.0, "match": 0.0,
                                  "no_result": 1.0})
    if not _is_row_list(given):
        raise RewardComputationError(f'expected evidence["answer_table"] to be a list of rows, got {given!r:.200}')
    match = tables_match(expected, given, ordered=ordered, rel_tol=rel_tol, abs_tol=abs_tol)
    return RewardResult(float(match), {"rows_expected": float(len(expected)), "rows_given": float(len(given)),
                                       "match": float(match), "no_result": 0.0})


def _metadata_table(task: Task) -> Sequence[Sequence[Cell]]:
    table = task.metadata.get("answer_table")
    if not _is_row_list(table):
        raise RewardComputationError(f'expected task.metadata["answer_table"] of task {task.id!r} to be a list of '
                                     f"lists, got {table!r:.200}")
    return table


def _is_row_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(row, list | tuple) for row in value)
