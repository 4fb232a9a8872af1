"""The SWE grader: SWE-bench's resolution rules over a hidden test run, and SWE-RL's patch similarity.

The environment restores the test files, runs the task's FAIL_TO_PASS and PASS_TO_PASS tests in its
sandbox and hands the outcome over as ``evidence["test_run"]``, the dict form of
``tasks.swe.testrun.TestRun`` (``{"status": "ok" | "error" | "timeout", "outcomes": {test_id:
outcome}, ...}``), with the agent's diff of the working tree as ``evidence["patch"]`` and
``evidence["truncated"]`` (optional, a bool) when the episode hit the turn limit.

Resolution (:func:`swe_resolved_reward`, :func:`swe_partial_reward`) follows SWE-bench's harness:
resolved only if every FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes; a run that
errored or timed out is invalid and never resolved; an empty patch is never resolved (SWE-bench does
not even evaluate it); a test absent from the outcomes did not pass. A task without FAIL_TO_PASS
tests is malformed under both rules below (a no-op would resolve it; SWE-bench counts it resolved).
``evidence["rules"]`` (optional) names the rules the env ran the tests under:

- ``"strict"`` (the default), so that no outcome the agent can steer pays: a test passes only when
  its outcome is ``"passed"`` and its id is the test's full pytest node id.
- ``"swebench"``, SWE-bench's harness (``swebench/harness/grading.py``), so that numbers can be set
  beside published ones. The outcomes are read as its pytest log parser reads pytest's ``-rA``
  summary (:func:`swebench_status_map`): each test id cut at its first whitespace
  (:func:`swebench_test_key`), ``xfailed`` as ``XFAIL``, an ``xpassed`` test
  absent (its ``XPASS`` line is not parsed), and where two tests cut to one id, the later summary
  line wins (pytest writes passed, skipped, xfailed, errors, then failures). A FAIL_TO_PASS test
  passes when its status is ``PASSED`` or ``XFAIL``; a PASS_TO_PASS test is kept when it passes or
  is ``SKIPPED``; an id cut mid-parameter (more ``[`` than ``]``) that no test has is read from the
  tests it begins when they agree on passing or not (:func:`swebench_matches`).
  One difference stays: SWE-bench's log folds skipped tests into ``SKIPPED [n] file:line`` lines,
  which its parser drops, so on a pytest repository it counts a skipped PASS_TO_PASS test as
  failed; here every test's own report is read, so its grading rule applies as written.

Patch similarity (:func:`patch_similarity`, :func:`swe_patch_similarity_reward`) is SWE-RL's
reward (``swerl.core.reward``): a ``difflib.SequenceMatcher(None, pred, gold, autojunk=False)``
ratio per file between the two normalised per-file diffs, averaged over the union of the files
either patch changes, so that a file changed by only one of them scores 0, as does a file whose
change is empty on either side. Where SWE-RL has file contents and rebuilds each file's diff with
``difflib.unified_diff`` (3 context lines, file headers dropped), this module has only the two
unified diffs and normalises them instead (:func:`normalize_patch`): file headers, ``diff --git``,
``index``, mode and rename lines and timestamps are dropped; hunk headers are kept in one form
(``@@ -l,n +l,n @@``, without git's function-name heading, which ``difflib`` never writes); the
``+``/``-``/context lines are kept with trailing whitespace stripped (SWE-RL keeps it) and ``\\ No
newline at end of file`` markers dropped. SWE-RL scores a format error -1; here an empty or
malformed predicted patch scores ``format_error_score``, 0 by default
(:func:`make_swe_patch_similarity_reward` sets -1 for SWE-RL's).

Example:
    >>> gold = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
    >>> patch_similarity(gold, gold)
    1.0
    >>> patch_similarity(gold.replace("x = 2", "x = 3"), gold) == 28 / 29
    True
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewards.base import RewardFn, RewardResult, required_evidence
from rewards.errors import RewardComputationError, RewardConfigError
from tasks.records import Task, Trajectory

TEST_RUN_KEY = "test_run"
"""The evidence key of the grading run: a ``TestRun.to_dict()``."""

PATCH_KEY = "patch"
"""The evidence key of the agent's patch: a unified diff of the working tree, ``""`` for no change."""

TRUNCATED_KEY = "truncated"
"""The optional evidence key that says (a bool) the episode hit the turn limit before submitting."""

RUN_STATUSES = frozenset({"ok", "error", "timeout"})
"""A grading run's statuses; only ``"ok"`` is a valid run."""

TEST_OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfailed", "xpassed"})
"""A test's outcomes in a grading run; under the strict rules only ``"passed"`` passes."""

RULES_KEY = "rules"
"""The optional evidence key that names the grading rules: one of :data:`RULES` (default ``"strict"``)."""

RULES = ("strict", "swebench")
"""The grading rules: the project's strict ones, and SWE-bench's harness (see the module docstring)."""

SWEBENCH_STATUS = {"passed": "PASSED", "skipped": "SKIPPED", "xfailed": "XFAIL", "error": "ERROR",
                   "failed": "FAILED"}
"""Outcome -> the status SWE-bench's pytest log parser reads, in the order pytest's ``-rA`` summary writes
them (a later line wins); ``"xpassed"`` is absent: its ``XPASS`` line is not parsed."""

SWEBENCH_PASSING = frozenset({"PASSED", "XFAIL"})
"""SWE-bench statuses that pass a FAIL_TO_PASS test (``test_passed``)."""

SWEBENCH_KEPT = SWEBENCH_PASSING | {"SKIPPED"}
"""SWE-bench statuses that keep a PASS_TO_PASS test (``test_maintained``)."""

_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

_GIT_EXTENDED_HEADERS = (
    "index ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "copy from ",
    "copy to ",
    "rename from ",
    "rename to ",
    "similarity index ",
    "dissimilarity index ",
)
"""The lines git may write between ``diff --git`` and the file's ``---``/``+++`` headers."""


class MalformedPatchError(RewardComputationError):
    """A patch is not a unified diff: a hunk outside a file, cut short, or with a foreign line."""


# ------------------------------------------------------------------------------ resolution


def swe_resolved_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: 1.0 when the patch resolves the task by SWE-bench's rules, else 0.0.

    Resolved means a valid run (status ``"ok"``), a non-empty patch, every FAIL_TO_PASS test
    passed and every PASS_TO_PASS test kept, by the rules of ``evidence["rules"]`` (strict: each
    ``"passed"``; see the module docstring for SWE-bench's). The test ids are
    ``task.metadata["FAIL_TO_PASS"]`` and ``["PASS_TO_PASS"]``, lists or their JSON encoding (as in
    SWE-bench's files). The outcomes of an invalid run (``"error"``, ``"timeout"``) are not read.

    Returns:
        The value with components ``f2p_passed``, ``f2p_total``, ``p2p_passed``, ``p2p_total``,
        ``resolved``, ``partial`` (the :func:`swe_partial_reward` value), ``invalid`` (1.0 when
        the run was not ``"ok"``), ``no_patch`` (1.0 for an empty patch) and ``truncated`` (1.0
        when the episode hit the turn limit; the patch is graded all the same).

    Raises:
        RewardComputationError: When the task has no FAIL_TO_PASS tests or malformed test lists,
            the evidence lacks a well-formed ``test_run`` or ``patch``, or names unknown rules.

    Example:
        >>> task = Task("toolz-1", "SWE", "synthetic", "Fix it.", answer="...",
        ...             metadata={"FAIL_TO_PASS": '["t.py::a"]', "PASS_TO_PASS": ["t.py::b"]})
        >>> run = {"status": "ok", "outcomes": {"t.py::a": "passed", "t.py::b": "passed"}}
        >>> swe_resolved_reward(task, Trajectory(), {"test_run": run, "patch": "--- a/m.py ..."}).value
        1.0
    """
    components = _grade(task, evidence)
    return RewardResult(components["resolved"], components)


def swe_partial_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: the share of FAIL_TO_PASS tests that passed, paid only if every PASS_TO_PASS test did.

    Reads the task and the evidence as :func:`swe_resolved_reward` does, with the same components.
    An invalid run or an empty patch scores 0.

    Raises:
        RewardComputationError: As :func:`swe_resolved_reward`.

    Example:
        >>> task = Task("toolz-1", "SWE", "synthetic", "Fix it.", answer="...",
        ...             metadata={"FAIL_TO_PASS": ["t.py::a", "t.py::c"], "PASS_TO_PASS": ["t.py::b"]})
        >>> run = {"status": "ok", "outcomes": {"t.py::a": "passed", "t.py::b": "passed"}}
        >>> swe_partial_reward(task, Trajectory(), {"test_run": run, "patch": "--- a/m.py ..."}).value
        0.5
    """
    components = _grade(task, evidence)
    return RewardResult(components["partial"], components)


def _grade(task: Task, evidence: Mapping[str, Any]) -> dict[str, float]:
    fail_to_pass = _test_ids(task, "FAIL_TO_PASS")
    pass_to_pass = _test_ids(task, "PASS_TO_PASS")
    if not fail_to_pass:
        raise RewardComputationError(
            f"expected task {task.id!r} to have at least one FAIL_TO_PASS test (a no-op would resolve it), got none"
        )
    run = _test_run(evidence)
    rules = _rules(evidence)
    no_patch = not _patch(evidence).strip()
    valid = run.status == "ok"
    f2p_passed = _count_passed(fail_to_pass, run.outcomes, rules, kept=False) if valid else 0
    p2p_passed = _count_passed(pass_to_pass, run.outcomes, rules, kept=True) if valid else 0
    kept = valid and not no_patch and p2p_passed == len(pass_to_pass)
    return {
        "f2p_passed": float(f2p_passed),
        "f2p_total": float(len(fail_to_pass)),
        "p2p_passed": float(p2p_passed),
        "p2p_total": float(len(pass_to_pass)),
        "resolved": float(kept and f2p_passed == len(fail_to_pass)),
        "partial": f2p_passed / len(fail_to_pass) if kept else 0.0,
        "invalid": float(not valid),
        "no_patch": float(no_patch),
        "truncated": float(_truncated(evidence)),
    }


def _count_passed(test_ids: Sequence[str], outcomes: Mapping[str, str], rules: str, *, kept: bool) -> int:
    """How many of ``test_ids`` passed (FAIL_TO_PASS) or were kept (PASS_TO_PASS, ``kept``) under ``rules``."""
    return len(passing_tests(test_ids, outcomes, rules, kept=kept))


def passing_tests(test_ids: Sequence[str], outcomes: Mapping[str, str], rules: str, *, kept: bool) -> list[str]:
    """The ``test_ids`` that passed (a FAIL_TO_PASS reading) or were kept (a PASS_TO_PASS reading, ``kept``) in a
    valid run's ``outcomes``, under ``rules`` (see the module docstring)."""
    if rules == "strict":
        return [test_id for test_id in test_ids if outcomes.get(test_id) == "passed"]
    status_map = swebench_status_map(outcomes)
    accepted = SWEBENCH_KEPT if kept else SWEBENCH_PASSING
    return [test_id for test_id in test_ids if swebench_status(test_id, status_map) in accepted]


def swebench_test_key(test_id: str) -> str:
    """A test id as SWE-bench's pytest log parser stores it: cut at its first whitespace.

    The parser reads pytest's ``-rA`` summary lines (``PASSED tests/test_x.py::test_f[a b]``) and keeps the word
    after the status, so a parametrize id with a space in it is cut there.

    Example:
        >>> swebench_test_key("tests/test_x.py::test_f[a b]"), swebench_test_key("tests/test_x.py::test_g")
        ('tests/test_x.py::test_f[a', 'tests/test_x.py::test_g')
    """
    words = test_id.split()
    return words[0] if words else test_id


def is_cut_test_id(test_id: str) -> bool:
    """Whether ``test_id`` was cut inside a parametrize id: it opens more ``[`` than it closes."""
    return test_id.count("[") > test_id.count("]")


def swebench_matches(test_id: str, keys: Collection[str]) -> list[str]:
    """The keys (:func:`swebench_test_key` form, in their order) that SWE-bench's grading reads ``test_id`` from.

    ``test_id`` itself when it is a key; else, for a cut id (:func:`is_cut_test_id`), every key it begins (the
    ids its dataset stores cut mid-parameter); else none.

    Example:
        >>> swebench_matches("t.py::test_f[log(x", ["t.py::test_f[log(x)]", "t.py::test_g"])
        ['t.py::test_f[log(x)]']
    """
    if test_id in keys:
        return [test_id]
    if is_cut_test_id(test_id):
        return [key for key in keys if key.startswith(test_id)]
    return []


def swebench_status_map(outcomes: Mapping[str, str]) -> dict[str, str]:
    """The status map SWE-bench's pytest log parser would read from this run's ``-rA`` summary.

    Each test id is cut at its first whitespace (:func:`swebench_test_key`) and its
    outcome written as :data:`SWEBENCH_STATUS` says, in pytest's summary order (ids sorted within an
    outcome): where two tests cut to one id, the later line wins and the first one's place is kept.

    Example:
        >>> swebench_status_map({"t.py::f[a b]": "passed", "t.py::f[a c]": "failed", "t.py::g": "xpassed"})
        {'t.py::f[a': 'FAILED'}
    """
    status_map: dict[str, str] = {}
    for outcome, status in SWEBENCH_STATUS.items():
        for test_id in sorted(test_id for test_id, found in outcomes.items() if found == outcome):
            status_map[swebench_test_key(test_id)] = status
    return status_map


def swebench_status(test_id: str, status_map: Mapping[str, str]) -> str | None:
    """The status SWE-bench's grading reads for ``test_id`` (None: not found, which fails it).

    The id's own status; for an id cut mid-parameter that no test has, the first status of the tests it
    begins, when they all pass or all do not (:data:`SWEBENCH_PASSING`); else None.
    """
    matches = swebench_matches(test_id, status_map)
    if len({status_map[key] in SWEBENCH_PASSING for key in matches}) != 1:
        return None
    return status_map[matches[0]]


def _rules(evidence: Mapping[str, Any]) -> str:
    rules = evidence.get(RULES_KEY, "strict")
    if rules not in RULES:
        raise RewardComputationError(f"expected evidence[{RULES_KEY!r}] to be one of {list(RULES)}, got {rules!r}")
    return rules


def _test_ids(task: Task, key: str) -> tuple[str, ...]:
    """The test ids of ``task.metadata[key]``, a list or its JSON encoding, without repeats."""
    if key not in task.metadata:
        raise RewardComputationError(
            f"expected task.metadata[{key!r}] with a list of test ids, got keys {sorted(task.metadata)}"
        )
    test_ids = task.metadata[key]
    if isinstance(test_ids, str):
        try:
            test_ids = json.loads(test_ids)
        except json.JSONDecodeError as error:
            raise RewardComputationError(
                f"expected task.metadata[{key!r}] to be a list of test ids or its JSON encoding, "
                f"got a string that is not JSON ({error})"
            ) from error
    if not isinstance(test_ids, list | tuple) or not all(isinstance(test_id, str) for test_id in test_ids):
        raise RewardComputationError(
            f"expected task.metadata[{key!r}] to be a list of test ids (strings), got {test_ids!r:.200}"
        )
    return tuple(dict.fromkeys(test_ids))


@dataclass(frozen=True)
class _Run:
    status: str
    outcomes: Mapping[str, str]


def _test_run(evidence: Mapping[str, Any]) -> _Run:
    """Read and check ``evidence["test_run"]``: a mapping with a known status and test outcomes."""
    run = required_evidence(evidence, TEST_RUN_KEY, Mapping, holding="the grading run",
                            form="a TestRun's dict form (TestRun.to_dict())")
    status = run.get("status")
    if status not in RUN_STATUSES:
        raise RewardComputationError(
            f"expected evidence[{TEST_RUN_KEY!r}]['status'] to be one of {sorted(RUN_STATUSES)}, got {status!r}"
        )
    return _Run(status, _outcomes(run.get("outcomes")))


def _outcomes(outcomes: object) -> Mapping[str, str]:
    if not isinstance(outcomes, Mapping):
        raise RewardComputationError(
            f"expected evidence[{TEST_RUN_KEY!r}]['outcomes'] to be a mapping of test id to outcome, "
            f"got {type(outcomes).__name__}"
        )
    for test_id, outcome in outcomes.items():
        if not isinstance(test_id, str) or outcome not in TEST_OUTCOMES:
            raise RewardComputationError(
                f"expected evidence[{TEST_RUN_KEY!r}]['outcomes'] to map test ids (strings) to one of "
                f"{sorted(TEST_OUTCOMES)}, got {test_id!r}: {outcome!r}"
            )
    return outcomes


def _patch(evidence: Mapping[str, Any]) -> str:
    return required_evidence(evidence, PATCH_KEY, str, holding="the agent's diff", form="a unified diff (str)")


def _truncated(evidence: Mapping[str, Any]) -> bool:
    truncated = evidence.get(TRUNCATED_KEY, False)
    if not isinstance(truncated, bool):
        raise RewardComputationError(
            f"expected evidence[{TRUNCATED_KEY!r}] to be a bool, got {type(truncated).__name__}"
        )
    return truncated


# ------------------------------------------------------------------------------ patch similarity


def patch_similarity(pred_patch: str, gold_patch: str) -> float:
    """SWE-RL's similarity of two unified diffs: the mean per-file ratio over the union of their files.

    Each file's normalised diff (:func:`normalize_patch`) is compared with
    ``difflib.SequenceMatcher(None, pred, gold, autojunk=False).ratio()``; a file that only one
    patch changes, or whose change is empty on either side, scores 0.

    Args:
        pred_patch: The predicted patch; an empty one scores 0.0.
        gold_patch: The reference patch; it must change at least one file.

    Returns:
        A similarity in ``[0, 1]``.

    Raises:
        MalformedPatchError: When either patch is not a unified diff, or the gold patch is empty.

    Example:
        >>> gold = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
        >>> other = "--- a/n.py\\n+++ b/n.py\\n@@ -1 +1 @@\\n-y = 1\\n+y = 2\\n"
        >>> patch_similarity(gold + other, gold)
        0.5
    """
    gold_files = normalize_patch(gold_patch)
    if not gold_files:
        raise MalformedPatchError("expected the gold patch to change at least one file, got an empty patch")
    return _mean_file_similarity(normalize_patch(pred_patch), gold_files)


def _mean_file_similarity(pred_files: Mapping[str, str], gold_files: Mapping[str, str]) -> float:
    paths = pred_files.keys() | gold_files.keys()
    return sum(_file_similarity(pred_files.get(path, ""), gold_files.get(path, "")) for path in paths) / len(paths)


def _file_similarity(pred: str, gold: str) -> float:
    if not pred or not gold:
        return 0.0
    return difflib.SequenceMatcher(None, pred, gold, autojunk=False).ratio()


def swe_patch_similarity_reward(task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    """Reward term: SWE-RL's :func:`patch_similarity` of ``evidence["patch"]`` to the reference ``task.answer``.

    An empty or malformed predicted patch scores 0.0 (see :func:`make_swe_patch_similarity_reward`
    for SWE-RL's -1).

    Returns:
        The value with components ``similarity`` (0.0 for an empty or malformed patch), ``files``
        (the union of files), ``pred_files``, ``gold_files``, ``no_patch`` and ``malformed``.

    Raises:
        RewardComputationError: When ``evidence["patch"]`` is missing or not a string, or the
            reference patch is empty or not a unified diff.

    Example:
        >>> gold = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
        >>> task = Task("toolz-1", "SWE", "synthetic", "Fix it.", answer=gold)
        >>> swe_patch_similarity_reward(task, Trajectory(), {"patch": gold}).value
        1.0
    """
    return _patch_similarity_term(task, trajectory, evidence, format_error_score=0.0)


def make_swe_patch_similarity_reward(format_error_score: float = 0.0) -> RewardFn:
    """Build the patch-similarity term with a chosen score for an empty or malformed patch.

    Args:
        format_error_score: The value of an empty or malformed predicted patch; SWE-RL uses -1.0.

    Returns:
        A picklable reward function like :func:`swe_patch_similarity_reward`.

    Raises:
        RewardConfigError: When ``format_error_score`` is not finite.

    Example:
        >>> gold = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
        >>> task = Task("toolz-1", "SWE", "synthetic", "Fix it.", answer=gold)
        >>> make_swe_patch_similarity_reward(-1.0)(task, Trajectory(), {"patch": "not a diff"}).value
        -1.0
    """
    if not math.isfinite(format_error_score):
        raise RewardConfigError(f"expected a finite format_error_score, got {format_error_score!r}")
    return functools.partial(_patch_similarity_term, format_error_score=format_error_score)


def _patch_similarity_term(
    task: Task, trajectory: Trajectory, evidence: Mapping[str, Any], *, format_error_score: float
) -> RewardResult:
    gold_files = _gold_files(task)
    components = {"similarity": 0.0, "files": 0.0, "pred_files": 0.0, "gold_files": float(len(gold_files))}
    try:
        pred_files = normalize_patch(_patch(evidence))
    except MalformedPatchError:
        return RewardResult(format_error_score, {**components, "no_patch": 0.0, "malformed": 1.0})
    if not pred_files:
        return RewardResult(format_error_score, {**components, "no_patch": 1.0, "malformed": 0.0})
    similarity = _mean_file_similarity(pred_files, gold_files)
    components.update(
        similarity=similarity,
        files=float(len(pred_files.keys() | gold_files.keys())),
        pred_files=float(len(pred_files)),
        no_patch=0.0,
        malformed=0.0,
    )
    return RewardResult(similarity, components)


def _gold_files(task: Task) -> dict[str, str]:
    if not isinstance(task.answer, str):
        raise RewardComputationError(
            f"expected task.answer to be the reference patch (str), got {type(task.answer).__name__}"
        )
    try:
        gold_files = normalize_patch(task.answer)
    except MalformedPatchError as error:
        raise RewardComputationError(f"expected task.answer to be a unified diff: {error}") from error
    if not gold_files:
        raise RewardComputationError(f"expected task {task.id!r} to have a reference patch, got an empty one")
    return gold_files


# ------------------------------------------------------------------------------ unified diffs


@dataclass
class _FileDiff:
    path: str
    awaiting_headers: bool
    """Still in the extended header of ``diff --git``: the next ``---``/``+++`` pair names this file."""
    lines: list[str] = field(default_factory=list)


def normalize_patch(patch: str) -> dict[str, str]:
    """Split a unified diff into files and normalise each file's hunks to one text, as SWE-RL compares them.

    A file's text is its hunks, one line each: the hunk header as ``@@ -l,n +l,n @@`` and the
    ``+``/``-``/context lines with trailing whitespace stripped. File headers, ``diff --git``,
    ``index``, mode and rename lines, timestamps and ``\\ No newline at end of file`` are dropped,
    and so is text before the first file (a commit message). A file is named by its new path
    without the ``b/`` prefix (the old one without ``a/`` when deleted); a file with no hunks (a
    binary or mode change) has an empty text.

    Args:
        patch: A unified diff, ``git diff`` or ``diff -u`` style; blank for no change.

    Returns:
        Path -> normalised text, in the order the files appear; empty for a blank patch.

    Raises:
        MalformedPatchError: When a hunk comes before any file, is shorter than its header says,
            holds a line that is not ``' '``, ``'+'``, ``'-'`` or ``'\\'``, or when a non-blank
            patch has no file at all.

    Example:
        >>> normalize_patch("diff --git a/m.py b/m.py\\nindex 1..2 100644\\n--- a/m.py\\n+++ b/m.py\\n"
        ...                 "@@ -1 +1 @@ def f():\\n-x = 1  \\n+x = 2\\n")
        {'m.py': '@@ -1,1 +1,1 @@\\n-x = 1\\n+x = 2'}
    """
    lines = patch.removesuffix("\n").split("\n")
    files: list[_FileDiff] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("@@"):
            if not files:
                raise MalformedPatchError(f"line {index + 1}: expected a file header before the hunk {line!r}")
            hunk, index = _read_hunk(lines, index)
            files[-1].lines.extend(hunk)
            files[-1].awaiting_headers = False
            continue
        if line.startswith("diff --git "):
            files.append(_FileDiff(_git_header_path(line), awaiting_headers=True))
        elif line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            _start_file(files, _header_path(line[4:], lines[index + 1][4:]))
            index += 1
        elif files and not line.startswith(_GIT_EXTENDED_HEADERS):
            files[-1].awaiting_headers = False
        index += 1
    if patch.strip() and not files:
        raise MalformedPatchError(f"expected a unified diff with file headers, got {patch[:80]!r}")
    return _merge_files(files)


def _start_file(files: list[_FileDiff], path: str) -> None:
    """Name the file that ``diff --git`` opened, or open a new one (a ``diff -u`` patch has no such line)."""
    if files and files[-1].awaiting_headers:
        files[-1] = _FileDiff(path, awaiting_headers=False)
    else:
        files.append(_FileDiff(path, awaiting_headers=False))


def _merge_files(files: list[_FileDiff]) -> dict[str, str]:
    merged: dict[str, list[str]] = {}
    for file in files:
        merged.setdefault(file.path, []).extend(file.lines)
    return {path: "\n".join(lines) for path, lines in merged.items()}


def _git_header_path(line: str) -> str:
    """The new path of ``diff --git a/old b/new`` (the last word when the prefixes are off)."""
    names = line[len("diff --git ") :].rstrip()
    _, separator, new = names.rpartition(" b/")
    return new if separator else names.rsplit(" ", 1)[-1]


def _header_path(old_header: str, new_header: str) -> str:
    """The path named by ``--- old`` and ``+++ new`` headers: the new one unless it is /dev/null."""
    old, new = (_strip_prefix(header.split("\t", 1)[0].rstrip()) for header in (old_header, new_header))
    return old if new == "/dev/null" else new


def _strip_prefix(name: str) -> str:
    return name[2:] if name.startswith(("a/", "b/")) else name


def _read_hunk(lines: list[str], start: int) -> tuple[list[str], int]:
    """Read the hunk whose header is ``lines[start]``; return its normalised lines and the next index."""
    match = _HUNK_HEADER.match(lines[start])
    if match is None:
        raise MalformedPatchError(f"line {start + 1}: expected a hunk header '@@ -l,n +l,n @@', got {lines[start]!r}")
    old_start, old_count, new_start, new_count = (int(group) if group else 1 for group in match.groups())
    hunk = [f"@@ -{old_start},{old_count} +{new_start},{new_count} @@"]
    index = start + 1
    while old_count > 0 or new_count > 0:
        if index >= len(lines):
            raise MalformedPatchError(f"line {start + 1}: the hunk ends before its {lines[start]!r} lines")
        tag, text = lines[index][:1] or " ", lines[index][1:].rstrip()
        if tag not in " +-\\":
            raise MalformedPatchError(
                f"line {index + 1}: expected a hunk line starting with ' ', '+', '-' or '\\', got {lines[index]!r}"
            )
        old_count -= tag in " -"
        new_count -= tag in " +"
        if old_count < 0 or new_count < 0:
            raise MalformedPatchError(f"line {index + 1}: the hunk has more lines than {lines[start]!r} says")
        if tag != "\\":
            hunk.append(tag + text)
        index += 1
    return hunk, index
