from __future__ import annotations

import statistics
from typing import Any

import pytest

from rewards.data_analysis import (
    MAX_ANSWER_CHARS,
    field_matches,
    list_matches,
    parse_answer_fields,
    parse_number,
    psaq_reward,
    sql_result_reward,
    tables_match,
)
from rewards.data_analysis import data_analysis_reward as reward
from rewards.errors import RewardComputationError, RewardConfigError
from tasks.records import Task, Trajectory, Turn

FIELDS = {"mean_fare": 34.65, "city": "Paris"}


def task(fields: dict[str, Any] | None = None, **metadata: Any) -> Task:
    """A DABench-style task with the given expected fields and extra metadata."""
    metadata = {"answer_fields": fields or FIELDS, **metadata}
    return Task("da/0", "DataAnalysis", "dabench", "...", None, metadata=metadata)


def answered(text: str | None) -> Trajectory:
    """A one-turn trajectory whose final answer is ``text`` (no answer when None)."""
    return Trajectory((Turn(action="...", observation="", answer=text),))


@pytest.mark.parametrize(
    ("text", "fields", "duplicates", "unclosed"),
    [
        # two fields, comma-separated
        ("@mean_fare[34.65], @city[Paris]", {"mean_fare": "34.65", "city": "Paris"}, set(), set()),
        # a value may hold commas and spaces; it is stripped
        ("@cities[ Paris, Rome ]", {"cities": "Paris, Rome"}, set(), set()),
        # nested brackets: the value runs to the matching ]
        ("@rows[[1, 2], [3]] @n[2]", {"rows": "[1, 2], [3]", "n": "2"}, set(), set()),
        # a name given twice is a duplicate, and neither value is kept
        ("@x[1] @x[2] @y[3]", {"y": "3"}, {"x"}, set()),
        # even when both copies agree
        ("@x[1] @x[1]", {}, {"x"}, set()),
        # missing brackets: no field at all
        ("mean_fare: 34.65, @city Paris", {}, set(), set()),
        # an unclosed field is not kept
        ("@city[Paris] @mean_fare[34.65", {"city": "Paris"}, set(), {"mean_fare"}),
        # an unclosed field hiding another copy is a duplicate
        ("@x[1 @x[2]", {}, {"x"}, set()),
        # no answer text
        ("", {}, set(), set()),
    ],
)
def test_parse_answer_fields(text: str, fields: dict[str, str], duplicates: set[str], unclosed: set[str]) -> None:
    parsed = parse_answer_fields(text)
    assert (parsed.fields, parsed.duplicates, parsed.unclosed) == (fields, duplicates, unclosed)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("34.65", 34.65),  # plain decimal
        ("-3", -3.0),  # signed integer
        ("1,234.5", 1234.5),  # thousands separators in groups of three
        ("1,234,567", 1234567.0),  # several groups
        ("12%", 12.0),  # a percent sign is dropped, the number is not scaled
        ("12.5 %", 12.5),  # a space before it too
        ("1.5e-3", 0.0015),  # scientific notation
        ("1E3", 1000.0),  # capital exponent
        (".5", 0.5),  # no leading digit
        ("3.", 3.0),  # a trailing period is punctuation
        ('"42"', 42.0),  # quoted
        ("-inf", float("-inf")),  # infinity
        ("1,23", None),  # commas that are not thousands groups
        ("$5", None),  # currency signs are not removed
        ("5 km", None),  # nor units
        ("e3", None),  # an exponent needs a mantissa
        ("", None),  # empty
        ("1 2 3", None),  # several numbers
    ],
)
def test_parse_number(text: str, number: float | None) -> None:
    assert parse_number(text) == number


STD_POP = statistics.pstdev([1, 2, 3, 4])  # ddof = 0: 1.118034
STD_SAMPLE = statistics.stdev([1, 2, 3, 4])  # ddof = 1: 1.290994


@pytest.mark.parametrize(
    ("expected", "given", "tolerance", "matches"),
    [
        # "3.0" is the number 3
        ("3", "3.0", {}, True),
        # thousands separators
        ("1234.5", "1,234.50", {}, True),
        # scientific notation
        ("0.0015", "1.5e-3", {}, True),
        # a percent sign is dropped without scaling: 12% is 12 ...
        ("12", "12%", {}, True),
        # ... and not 0.12
        ("0.12", "12%", {}, False),
        # ddof 1 answer for a ddof 0 question: differs by 15%, wrong
        (f"{STD_POP:.6f}", f"{STD_SAMPLE:.6f}", {}, False),
        # ... even at a loose absolute tolerance of 0.01
        (f"{STD_POP:.2f}", f"{STD_SAMPLE:.2f}", {"abs_tol": 0.01}, False),
        # the same reading, rounded to 6 decimals: within 1e-6 relative
        (str(STD_POP), f"{STD_POP:.6f}", {}, True),
        # half-even (2) vs half-up (3) at 0 decimals: not forgiven at the default tolerance
        ("2", "3", {}, False),
        # a task that accepts either convention sets abs to the rounding unit
        ("2", "3", {"abs_tol": 1.0}, True),
        # a count with nulls kept (891) vs dropped (714) is wrong
        ("891", "714", {}, False),
        # float tolerance at the boundary: abs difference exactly 0.5 with abs_tol 0.5 passes ...
        ("1.0", "1.5", {"rel_tol": 0.0, "abs_tol": 0.5}, True),
        # ... just past it fails
        ("1.0", "1.5000001", {"rel_tol": 0.0, "abs_tol": 0.5}, False),
        # relative tolerance: 1e6 vs 1e6 + 1 is 1e-6 relative
        ("1000000", "1000001", {"abs_tol": 0.0}, True),
        # ... 1e6 + 2 is not
        ("1000000", "1000002", {"abs_tol": 0.0}, False),
        # NaN never matches, not even NaN
        ("nan", "nan", {}, False),
        # an infinity matches only the same infinity
        ("inf", "Infinity", {}, True),
        ("inf", "-inf", {}, False),
        # a number expected, text given
        ("34.65", "about 34.65", {}, False),
        # every number sprayed into one value
        ("34.65", "34.6 34.65 34.7", {}, False),
        # two answers in one value
        ("34.65", "34.65 or 34.66", {}, False),
        # a list in a scalar field
        ("34.65", "[34.65, 35]", {}, False),
        # case and whitespace in strings
        ("New York", "  new   YORK ", {}, True),
        # surrounding quotes and a trailing period
        ("Paris", '"Paris".', {}, True),
        # a different string
        ("Paris", "Paris, France", {}, False),
        # ties: naming the other of two tied modes is wrong
        ("Paris", "London", {}, False),
        # ... and so is naming both
        ("Paris", "Paris, London", {}, False),
        # booleans: any case, and yes/no mean true/false
        ("True", "true", {}, True),
        ("True", "YES", {}, True),
        ("no", "False", {}, True),
        ("True", "no", {}, False),
        # 1 and 0 are numbers, not booleans
        ("True", "1", {}, False),
    ],
)
def test_field_matches(expected: str, given: str, tolerance: dict[str, float], matches: bool) -> None:
    assert field_matches(expected, given, **tolerance) is matches


@pytest.mark.parametrize("tolerance", [{"rel_tol": -1e-6}, {"abs_tol": float("nan")}, {"abs_tol": float("inf")}])
def test_field_matches_rejects_bad_tolerances(tolerance: dict[str, float]) -> None:
    # a negative, NaN or infinite tolerance is a configuration error
    with pytest.raises(RewardConfigError, match="expected a finite, non-negative"):
        field_matches("1", "1", **tolerance)


@pytest.mark.parametrize(
    ("expected", "given", "ordered", "matches"),
    [
        # brackets and spaces
        (["1", "2", "3"], "[1, 2, 3]", True, True),
        # no brackets
        (["a", "b"], "A, b", True, True),
        # a JSON list may hold commas inside strings
        (["a, b", "c"], '["a, b", "c"]', True, True),
        # order matters by default
        (["1", "2"], "2, 1", True, False),
        # ... not for an unordered field
        (["1", "2"], "2, 1", False, True),
        # multisets: [1, 1, 2] is not [1, 2, 2]
        (["1", "1", "2"], "1, 2, 2", False, False),
        # a missing element
        (["1", "2"], "1", True, False),
        # an extra element
        (["1", "2"], "1, 2, 3", False, False),
        # numbers within tolerance
        (["0.5", "2"], "[2.0000001, .5]", False, True),
        # empty lists
        ([], "[]", True, True),
    ],
)
def test_list_matches(expected: list[str], given: str, ordered: bool, matches: bool) -> None:
    assert list_matches(expected, given, ordered=ordered) is matches


@pytest.mark.parametrize(
    ("answer", "value", "components"),
    [
        # both right
        ("@mean_fare[34.65], @city[Paris]", 1.0, {"fields_right": 2, "missing": 0, "extra": 0, "duplicates": 0}),
        # one right
        ("@mean_fare[34.65] @city[Rome]", 0.0, {"fields_right": 1, "psaq": 0.5}),
        # answers in the wrong field name: missing and extra, nothing right
        ("@mean[34.65] @city[Paris]", 0.0, {"fields_right": 1, "missing": 1, "extra": 1}),
        # extra fields do not pay, nor hurt the right ones
        ("@mean_fare[34.65] @city[Paris] @note[hi]", 1.0, {"fields_right": 2, "extra": 1}),
        # many values for one field: a duplicate, wrong
        ("@mean_fare[34.6] @mean_fare[34.65] @city[Paris]", 0.0, {"fields_right": 1, "duplicates": 1}),
        # missing brackets
        ("mean_fare = 34.65, city = Paris", 0.0, {"fields_right": 0, "missing": 2}),
        # an unclosed field is missing
        ("@city[Paris] @mean_fare[34.65", 0.0, {"fields_right": 1, "missing": 1, "unclosed": 1}),
        # no answer at all
        (None, 0.0, {"fields_right": 0, "missing": 2, "psaq": 0.0}),
        # a right answer padded past the length cap scores 0 unread
        ("@mean_fare[34.65] @city[Paris]" + " " * MAX_ANSWER_CHARS, 0.0, {"too_long": 1, "missing": 2}),
    ],
)
def test_data_analysis_reward(answer: str | None, value: float, components: dict[str, float]) -> None:
    result = reward(task(), answered(answer), {})
    assert result.value == value
    assert {key: result.components[key] for key in components} == components


def test_reward_reports_every_component() -> None:
    # one right, one wrong, one not asked
    result = reward(task(), answered("@mean_fare[34.65] @city[Rome] @x[1]"), {})
    assert result.components == {
        "fields_right": 1.0,
        "fields_total": 2.0,
        "psaq": 0.5,
        "abq": 0.0,
        "missing": 0.0,
        "extra": 1.0,
        "duplicates": 0.0,
        "unclosed": 0.0,
        "too_long": 0.0,
    }


def test_spraying_every_number_never_pays() -> None:
    # a probe that names the field once per candidate value scores 0 whatever the candidates
    spray = " ".join(f"@mean_fare[{cents / 100}]" for cents in range(3400, 3600)) + " @city[Paris]"
    result = reward(task(), answered(spray), {})
    assert (result.value, result.components["fields_right"], result.components["duplicates"]) == (0.0, 1.0, 1.0)


def test_psaq_reward_pays_the_share_right() -> None:
    # one of two fields right
    assert psaq_reward(task(), answered("@mean_fare[34.65] @city[Rome]"), {}).value == 0.5


@pytest.mark.parametrize(
    ("metadata", "answer", "value"),
    [
        # a task-wide absolute tolerance of 0.01 forgives a rounding difference
        ({"tolerance": {"abs": 0.01}}, "@mean_fare[34.651] @city[Paris]", 1.0),
        # a per-field tolerance overrides the task-wide one
        ({"tolerance": {"abs": 0.01}, "field_tolerance": {"mean_fare": {"abs": 0.0}}}, "@mean_fare[34.651] "
         "@city[Paris]", 0.0),
        # the default tolerance does not
        ({}, "@mean_fare[34.651] @city[Paris]", 0.0),
    ],
)
def test_tolerance_from_metadata(metadata: dict[str, Any], answer: str, value: float) -> None:
    assert reward(task(**metadata), answered(answer), {}).value == value


@pytest.mark.parametrize(
    ("fields", "metadata", "answer", "value"),
    [
        # an expected JSON list, in order
        ({"top": ["Paris", "Rome"]}, {}, "@top[Paris, Rome]", 1.0),
        # order matters by default
        ({"top": ["Paris", "Rome"]}, {}, "@top[Rome, Paris]", 0.0),
        # not for an unordered field
        ({"top": ["Paris", "Rome"]}, {"unordered_fields": ["top"]}, "@top[[Rome, Paris]]", 1.0),
        # booleans and numbers from JSON
        ({"normal": False, "n": 12}, {}, "@normal[no] @n[12.0]", 1.0),
    ],
)
def test_expected_value_kinds(fields: dict[str, Any], metadata: dict[str, Any], answer: str, value: float) -> None:
    assert reward(task(fields, **metadata), answered(answer), {}).value == value


@pytest.mark.parametrize(
    ("fields", "metadata", "message"),
    [
        # no expected fields
        ({}, {}, "non-empty mapping"),
        # an expected value of the wrong kind
        ({"x": {"a": 1}}, {}, "to be a string, a number"),
        # an unknown tolerance key
        (FIELDS, {"tolerance": {"relative": 0.1}}, 'keys "rel" and "abs"'),
        # a negative tolerance
        (FIELDS, {"tolerance": {"abs": -1}}, "finite, non-negative abs_tol"),
        # a per-field tolerance for a field that was not asked, with a suggestion
        (FIELDS, {"field_tolerance": {"mean_far": {"abs": 1}}}, "did you mean 'mean_fare'"),
        # unordered_fields must name fields
        (FIELDS, {"unordered_fields": ["cty"]}, "did you mean 'city'"),
    ],
)
def test_malformed_metadata_is_an_error(fields: dict[str, Any], metadata: dict[str, Any], message: str) -> None:
    bad = Task("da/1", "DataAnalysis", "dabench", "...", None, metadata={"answer_fields": fields, **metadata})
    with pytest.raises(RewardComputationError, match=message):
        reward(bad, answered("@x[1]"), {})


# ------------------------------------------------------------------------------ result tables


@pytest.mark.parametrize(
    ("expected", "given", "ordered", "matches"),
    [
        # identical tables
        ([["a", 1], ["b", 2]], [["a", 1], ["b", 2]], False, True),
        # row order is free without ORDER BY
        ([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], False, True),
        # ... and matters with it
        ([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], True, False),
        # ties under ORDER BY: the tied rows in the other order fail an ordered comparison
        ([["a", 1], ["b", 1]], [["b", 1], ["a", 1]], True, False),
        # bag semantics: [a, a, b] is not [a, b, b]
        ([["a"], ["a"], ["b"]], [["a"], ["b"], ["b"]], False, False),
        # ... nor [a, b] (a dropped duplicate, e.g. DISTINCT)
        ([["a"], ["a"], ["b"]], [["a"], ["b"]], False, False),
        # column order is free
        ([["a", 1, None]], [[None, 1, "a"]], False, True),
        # ... also when ordered
        ([["a", 1], ["b", 2]], [[1, "a"], [2, "b"]], True, True),
        # two numeric columns swapped: found by permutation
        ([[1, 2], [3, 4]], [[2, 1], [4, 3]], False, True),
        # a permutation must hold for every row, not one per row
        ([[1, 2], [3, 4]], [[2, 1], [3, 4]], False, False),
        # NULL matches only NULL
        ([[None]], [[None]], False, True),
        ([[None]], [[0]], False, False),
        ([[None]], [["NULL"]], False, False),
        # nulls kept vs dropped: a different row count
        ([["a"], [None]], [["a"]], False, False),
        # int and float are the same number
        ([[3]], [[3.0]], False, True),
        # a number stored as text is not the number
        ([[3]], [["3"]], False, False),
        # strings are exact: case differs
        ([["Paris"]], [["paris"]], False, False),
        # float tolerance: 1e-7 relative passes
        ([[0.1 + 0.2]], [[0.3]], False, True),
        # ... 1e-3 does not
        ([[1.0]], [[1.001]], False, False),
        # an extra column
        ([["a"]], [["a", 1]], False, False),
        # empty results agree
        ([], [], False, True),
        # an empty result for a non-empty expectation
        ([["a"]], [], False, False),
    ],
)
def test_tables_match(expected: list[list[Any]], given: list[list[Any]], ordered: bool, matches: bool) -> None:
    assert tables_match(expected, given, ordered=ordered) is matches


@pytest.mark.parametrize(
    ("expected", "given", "matches"),
    [
        # tolerance is not transitive: 1.0 ~ 1.4 and 1.4 ~ 1.8 but 1.0 !~ 1.8; a greedy pairing of
        # expected 1.4 with the given 1.0 would strand the expected 1.0; the matching finds 1.0-1.0, 1.4-1.8
        ([[1.4], [1.0]], [[1.0], [1.8]], True),
        # rounding to a grid would split 0.4999 and 0.5001 (grid 0 vs 1); the tolerance of 0.5 keeps them
        ([[0.4999]], [[0.5001]], True),
        # at the boundary: a difference of exactly 0.5 passes, more fails
        ([[1.0]], [[1.5]], True),
        ([[1.0]], [[1.5000001]], False),
    ],
)
def test_tables_match_tolerance_is_a_matching(expected: list[list[Any]], given: list[list[Any]],
                                              matches: bool) -> None:
    assert tables_match(expected, given, rel_tol=0.0, abs_tol=0.5) is matches


def test_tables_match_permutes_eight_columns() -> None:
    # eight interchangeable numeric columns, fully reversed: the search reaches the last permutations
    row = list(range(8))
    assert tables_match([row, [x * 10 for x in row]], [row[::-1], [x * 10 for x in row[::-1]]])


def test_tables_match_scales_to_large_equal_tables() -> None:
    # 5000 rows off by float noise, shuffled: the sorted scan pairs them in about one check each
    expected = [[i, i / 7] for i in range(5000)]
    given = [[i, i / 7 * (1 + 1e-9)] for i in reversed(range(5000))]
    assert tables_match(expected, given)


@pytest.mark.parametrize(
    ("expected", "given", "message"),
    [
        # ragged rows
        ([["a"], ["a", 1]], [["a"], ["a"]], "one width"),
        # a cell that is no database value
        ([[["a"]]], [[["a"]]], "NULL, numbers, strings or bytes"),
    ],
)
def test_tables_match_rejects_malformed_tables(expected: list[list[Any]], given: list[list[Any]],
                                               message: str) -> None:
    with pytest.raises(RewardComputationError, match=message):
        tables_match(expected, given)


def sql_task(**metadata: Any) -> Task:
    """A text-to-SQL task expecting a two-row table."""
    return Task("sql/0", "DataAnalysis", "sql", "...", None,
                metadata={"answer_table": [["Paris", 3], ["Rome", 2]], **metadata})


@pytest.mark.parametrize(
    ("metadata", "evidence", "value", "components"),
    [
        # the same rows in another order and column order
        ({}, {"answer_table": [[2, "Rome"], [3, "Paris"]]}, 1.0, {"rows_given": 2, "match": 1, "no_result": 0}),
        # ordered: the other order fails
        ({"ordered": True}, {"answer_table": [["Rome", 2], ["Paris", 3]]}, 0.0, {"match": 0}),
        # a wrong count
        ({}, {"answer_table": [["Paris", 3]]}, 0.0, {"rows_expected": 2, "rows_given": 1, "match": 0}),
        # no final query, or one that failed
        ({}, {}, 0.0, {"rows_given": 0, "match": 0, "no_result": 1}),
        ({}, {"answer_table": None}, 0.0, {"no_result": 1}),
        # a task tolerance forgives rounding
        ({"tolerance": {"abs": 0.01}}, {"answer_table": [["Paris", 3.001], ["Rome", 2]]}, 1.0, {"match": 1}),
    ],
)
def test_sql_result_reward(metadata: dict[str, Any], evidence: dict[str, Any], value: float,
                           components: dict[str, float]) -> None:
    result = sql_result_reward(sql_task(**metadata), Trajectory(), evidence)
    assert result.value == value
    assert {key: result.components[key] for key in components} == components


@pytest.mark.parametrize(
    ("metadata", "evidence", "message"),
    [
        # no expected table
        ({"answer_table": None}, {}, 'answer_table"] of task \'sql/0\' to be a list of lists'),
        # ordered must be a bool
        ({"ordered": "yes"}, {}, "to be a bool"),
        # the env handed over something that is not rows
        ({}, {"answer_table": "Paris"}, 'evidence\\["answer_table"\\] to be a list of rows'),
    ],
)
def test_sql_result_reward_rejects_malformed_input(metadata: dict[str, Any], evidence: dict[str, Any],
                                                   message: str) -> None:
    with pytest.raises(RewardComputationError, match=message):
        sql_result_reward(sql_task(**metadata), Trajectory(), evidence)
