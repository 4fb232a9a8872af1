from __future__ import annotations

import pickle
from typing import Any

import pytest

from rewards import (
    MalformedPatchError,
    RewardComputationError,
    RewardConfigError,
    make_swe_patch_similarity_reward,
    normalize_patch,
    patch_similarity,
    swe_partial_reward,
    swe_patch_similarity_reward,
    swe_resolved_reward,
)
from tasks.records import Task, Trajectory

F2P = ["tests/test_m.py::test_a", "tests/test_m.py::test_b[1-2]"]
P2P = ["tests/test_m.py::test_c"]
A, B, C = (*F2P, *P2P)
PATCH = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def swe_task(fail_to_pass: Any = F2P, pass_to_pass: Any = P2P, answer: Any = PATCH) -> Task:
    return Task(
        id="toolz-1",
        env="SWE",
        family="synthetic",
        prompt="Fix it.",
        answer=answer,
        metadata={"FAIL_TO_PASS": fail_to_pass, "PASS_TO_PASS": pass_to_pass},
    )


def run(outcomes: dict[str, str], status: str = "ok") -> dict[str, Any]:
    # the shape of TestRun.to_dict()
    return {"status": status, "outcomes": outcomes, "exit_code": 0, "duration_s": 1.5, "detail": ""}


ALL_PASS = {A: "passed", B: "passed", C: "passed"}


# ------------------------------------------------------------------------------ resolution


@pytest.mark.parametrize(
    ("evidence", "resolved", "partial", "counts"),
    [
        # every FAIL_TO_PASS and PASS_TO_PASS test passed: resolved
        ({"test_run": run(ALL_PASS), "patch": PATCH}, 1.0, 1.0, (2, 1)),
        # one FAIL_TO_PASS test still fails: not resolved, half the partial credit
        ({"test_run": run({**ALL_PASS, B: "failed"}), "patch": PATCH}, 0.0, 0.5, (1, 1)),
        # an error counts as not passed
        ({"test_run": run({**ALL_PASS, A: "error"}), "patch": PATCH}, 0.0, 0.5, (1, 1)),
        # a FAIL_TO_PASS test missing from the outcomes did not pass
        ({"test_run": run({B: "passed", C: "passed"}), "patch": PATCH}, 0.0, 0.5, (1, 1)),
        # skipped, xfailed and xpassed are not passed (stricter than SWE-bench's xfail and skip rules)
        ({"test_run": run({A: "skipped", B: "xfailed", C: "passed"}), "patch": PATCH}, 0.0, 0.0, (0, 1)),
        ({"test_run": run({A: "xpassed", B: "passed", C: "passed"}), "patch": PATCH}, 0.0, 0.5, (1, 1)),
        # the fix broke a PASS_TO_PASS test: no partial credit either
        ({"test_run": run({**ALL_PASS, C: "failed"}), "patch": PATCH}, 0.0, 0.0, (2, 0)),
        # a PASS_TO_PASS test missing from the report broke too
        ({"test_run": run({A: "passed", B: "passed"}), "patch": PATCH}, 0.0, 0.0, (2, 0)),
        # outcomes of tests outside both lists do not matter
        ({"test_run": run({**ALL_PASS, "tests/test_m.py::other": "failed"}), "patch": PATCH}, 1.0, 1.0, (2, 1)),
        # the patch at the turn limit is graded all the same
        ({"test_run": run(ALL_PASS), "patch": PATCH, "truncated": True}, 1.0, 1.0, (2, 1)),
    ],
)
def test_resolution_rules(evidence: dict[str, Any], resolved: float, partial: float, counts: tuple[int, int]) -> None:
    for fn, value in [(swe_resolved_reward, resolved), (swe_partial_reward, partial)]:
        result = fn(swe_task(), Trajectory(), evidence)
        assert result.value == value
        assert dict(result.components) == {
            "f2p_passed": float(counts[0]),
            "f2p_total": 2.0,
            "p2p_passed": float(counts[1]),
            "p2p_total": 1.0,
            "resolved": resolved,
            "partial": partial,
            "invalid": 0.0,
            "no_patch": 0.0,
            "truncated": float(evidence.get("truncated", False)),
        }


F, G = "t.py::test_f", "t.py::test_g"


@pytest.mark.parametrize(
    ("fail_to_pass", "pass_to_pass", "outcomes", "strict", "swebench"),
    [
        # an xfailed FAIL_TO_PASS test passes under SWE-bench's rules (XFAIL is passing), not under the strict ones
        ([A, B], [C], {A: "xfailed", B: "passed", C: "passed"}, (1, 1), (2, 1)),
        # a skipped PASS_TO_PASS test is kept under SWE-bench's rules (test_maintained)
        ([A, B], [C], {A: "passed", B: "passed", C: "skipped"}, (2, 0), (2, 1)),
        # ... and an xfailed one too (XFAIL passes)
        ([A, B], [C], {A: "passed", B: "passed", C: "xfailed"}, (2, 0), (2, 1)),
        # a skipped FAIL_TO_PASS test is not fixed under either (SWE-bench's test_failed lists SKIPPED)
        ([A, B], [C], {A: "skipped", B: "passed", C: "passed"}, (1, 1), (1, 1)),
        # an xpassed test is absent from SWE-bench's map (its XPASS line is not parsed): failed, in either list
        ([A, B], [C], {A: "xpassed", B: "passed", C: "xpassed"}, (1, 0), (1, 0)),
        # an error fails both lists under both rules
        ([A, B], [C], {A: "error", B: "passed", C: "error"}, (1, 0), (1, 0)),
        # an id cut at the first space, as SWE-bench's log parser stores it: found under its rules only
        ([f"{F}[in"], [f"{F}[above"], {f"{F}[in range]": "passed", f"{F}[above top]": "passed"}, (0, 0), (1, 1)),
        # a full id with a space is never in SWE-bench's map: not passed there
        ([f"{F}[in range]"], [], {f"{F}[in range]": "passed"}, (1, 0), (0, 0)),
        # two tests cut to one id: the later summary line wins (failures are written after passes)
        ([f"{F}[a"], [], {f"{F}[a b]": "passed", f"{F}[a c]": "failed"}, (0, 0), (0, 0)),
        # ... skips after passes: SKIPPED, which fails a FAIL_TO_PASS test and keeps a PASS_TO_PASS one
        ([f"{F}[a"], [f"{F}[a"], {f"{F}[a b]": "passed", f"{F}[a c]": "skipped"}, (0, 0), (0, 1)),
        # ... errors after xfails: ERROR
        ([f"{F}[a"], [], {f"{F}[a b]": "xfailed", f"{F}[a c]": "error"}, (0, 0), (0, 0)),
        # an id cut mid-parameter (more '[' than ']') is read from the tests it begins when they agree on passing
        ([f"{G}[log(x"], [], {f"{G}[log(x)]": "passed", f"{G}[log(x^2)]": "xfailed"}, (0, 0), (1, 0)),
        # ... and not found when they disagree
        ([f"{G}[log(x"], [], {f"{G}[log(x)]": "passed", f"{G}[log(x^2)]": "failed"}, (0, 0), (0, 0)),
        # ... where they agree on not passing, the first in the map is read: the skipped one (skips come before
        # failures), which keeps a PASS_TO_PASS test
        ([A], [f"{G}[log(x"], {A: "passed", f"{G}[log(x)]": "failed", f"{G}[log(x^2)]": "skipped"}, (1, 0), (1, 1)),
        # a balanced id is never matched as a prefix
        ([F], [], {f"{F}[1]": "passed"}, (0, 0), (0, 0)),
    ],
)
def test_swebench_rules(fail_to_pass: list[str], pass_to_pass: list[str], outcomes: dict[str, str],
                        strict: tuple[int, int], swebench: tuple[int, int]) -> None:
    task = swe_task(fail_to_pass, pass_to_pass)
    for rules, (f2p, p2p) in [("strict", strict), ("swebench", swebench)]:
        result = swe_resolved_reward(task, Trajectory(), {"test_run": run(outcomes), "patch": PATCH, "rules": rules})
        components = dict(result.components)
        assert (components["f2p_passed"], components["p2p_passed"]) == (f2p, p2p), rules
        resolved = (f2p, p2p) == (len(fail_to_pass), len(pass_to_pass))
        assert (result.value, components["resolved"]) == (float(resolved), float(resolved)), rules
        assert swe_partial_reward(task, Trajectory(), {"test_run": run(outcomes), "patch": PATCH, "rules": rules}
                                  ).value == (f2p / len(fail_to_pass) if p2p == len(pass_to_pass) else 0.0), rules


def test_the_rules_default_to_strict_and_unknown_rules_are_an_error() -> None:
    evidence = {"test_run": run({A: "xfailed", B: "passed", C: "passed"}), "patch": PATCH}
    assert swe_resolved_reward(swe_task(), Trajectory(), evidence).value == 0.0  # xfail does not pass
    with pytest.raises(RewardComputationError, match="one of \\['strict', 'swebench'\\], got 'SWE-bench'"):
        swe_resolved_reward(swe_task(), Trajectory(), {**evidence, "rules": "SWE-bench"})


@pytest.mark.parametrize(
    ("status", "outcomes"),
    [
        # pytest could not collect or the report was tampered with: every test "passed" is not believed
        ("error", ALL_PASS),
        # the run went over its time limit
        ("timeout", ALL_PASS),
        # an invalid run with no outcomes at all
        ("error", {}),
    ],
)
@pytest.mark.parametrize("fn", [swe_resolved_reward, swe_partial_reward])
def test_an_invalid_run_scores_zero_and_its_outcomes_are_not_read(status: str, outcomes: dict, fn) -> None:
    result = fn(swe_task(), Trajectory(), {"test_run": run(outcomes, status=status), "patch": PATCH})
    assert result.value == 0.0
    components = dict(result.components)
    assert components["invalid"] == 1.0
    assert (components["f2p_passed"], components["p2p_passed"], components["resolved"]) == (0.0, 0.0, 0.0)
    assert (components["f2p_total"], components["p2p_total"]) == (2.0, 1.0)


@pytest.mark.parametrize("patch", ["", "  \n"])
@pytest.mark.parametrize("fn", [swe_resolved_reward, swe_partial_reward])
def test_an_empty_patch_is_never_resolved(patch: str, fn) -> None:
    # SWE-bench does not evaluate an empty patch; even tests that (somehow) pass do not pay
    result = fn(swe_task(), Trajectory(), {"test_run": run(ALL_PASS), "patch": patch})
    assert result.value == 0.0
    assert dict(result.components)["no_patch"] == 1.0
    assert dict(result.components)["resolved"] == 0.0


@pytest.mark.parametrize(
    ("fail_to_pass", "pass_to_pass", "outcomes", "resolved", "partial"),
    [
        # SWE-bench's files hold JSON-encoded lists
        (f'["{A}", "{B}"]', f'["{C}"]', ALL_PASS, 1.0, 1.0),
        (f'["{A}", "{B}"]', f'["{C}"]', {A: "passed", C: "passed"}, 0.0, 0.5),
        # tuples are lists too
        ((A, B), (C,), ALL_PASS, 1.0, 1.0),
        # no PASS_TO_PASS tests: all of them (none) still pass
        ([A], "[]", {A: "passed"}, 1.0, 1.0),
        # a test listed twice counts once
        ([A, A, B], [C], {A: "passed", C: "passed"}, 0.0, 0.5),
    ],
)
def test_test_lists(fail_to_pass: Any, pass_to_pass: Any, outcomes: dict, resolved: float, partial: float) -> None:
    task = swe_task(fail_to_pass, pass_to_pass)
    evidence = {"test_run": run(outcomes), "patch": PATCH}
    assert swe_resolved_reward(task, Trajectory(), evidence).value == resolved
    assert swe_partial_reward(task, Trajectory(), evidence).value == partial


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        # no FAIL_TO_PASS list
        ({"PASS_TO_PASS": P2P}, r"expected task.metadata\['FAIL_TO_PASS'\] with a list of test ids"),
        # no PASS_TO_PASS list
        ({"FAIL_TO_PASS": F2P}, r"expected task.metadata\['PASS_TO_PASS'\] with a list of test ids"),
        # a string that is not JSON
        ({"FAIL_TO_PASS": "tests/test_m.py::test_a", "PASS_TO_PASS": P2P}, "got a string that is not JSON"),
        # JSON, but not a list
        ({"FAIL_TO_PASS": '{"a": 1}', "PASS_TO_PASS": P2P}, r"to be a list of test ids \(strings\), got \{'a': 1\}"),
        # a list of something else
        ({"FAIL_TO_PASS": [A, 3], "PASS_TO_PASS": P2P}, r"to be a list of test ids \(strings\)"),
        (
            {"FAIL_TO_PASS": F2P, "PASS_TO_PASS": None},
            r"PASS_TO_PASS'\] to be a list of test ids \(strings\), got None",
        ),
        # no FAIL_TO_PASS test: a no-op would resolve the task
        ({"FAIL_TO_PASS": "[]", "PASS_TO_PASS": P2P}, "at least one FAIL_TO_PASS test"),
    ],
)
@pytest.mark.parametrize("fn", [swe_resolved_reward, swe_partial_reward])
def test_malformed_task_is_an_error(metadata: dict, message: str, fn) -> None:
    task = Task("toolz-1", "SWE", "synthetic", "Fix it.", answer=PATCH, metadata=metadata)
    with pytest.raises(RewardComputationError, match=message):
        fn(task, Trajectory(), {"test_run": run(ALL_PASS), "patch": PATCH})


class _NotADict:
    pass


@pytest.mark.parametrize(
    ("evidence", "message"),
    [
        # the environment did not grade
        ({"patch": PATCH}, r"expected evidence\['test_run'\] with the grading run, got keys \['patch'\]"),
        # it handed over an object instead of its dict form
        ({"test_run": _NotADict(), "patch": PATCH}, r"TestRun's dict form \(TestRun.to_dict\(\)\), got _NotADict"),
        # an unknown or missing status
        ({"test_run": run(ALL_PASS, status="passed"), "patch": PATCH}, r"\['status'\] to be one of .*got 'passed'"),
        ({"test_run": {"outcomes": ALL_PASS}, "patch": PATCH}, r"\['status'\] to be one of .*got None"),
        # outcomes missing or of the wrong type
        ({"test_run": {"status": "ok"}, "patch": PATCH}, r"\['outcomes'\] to be a mapping .* got NoneType"),
        ({"test_run": run([A]), "patch": PATCH}, r"\['outcomes'\] to be a mapping .* got list"),
        # an outcome pytest does not have, or a boolean instead of one
        ({"test_run": run({A: "PASSED"}), "patch": PATCH}, r"got 'tests/test_m.py::test_a': 'PASSED'"),
        ({"test_run": run({A: True}), "patch": PATCH}, r"got 'tests/test_m.py::test_a': True"),
        # a test id that is not a string
        ({"test_run": run({1: "passed"}), "patch": PATCH}, r"got 1: 'passed'"),
        # no patch, or not a string
        ({"test_run": run(ALL_PASS)}, r"expected evidence\['patch'\] with the agent's diff"),
        ({"test_run": run(ALL_PASS), "patch": b"diff"}, r"to be a unified diff \(str\), got bytes"),
        # truncated is a flag
        ({"test_run": run(ALL_PASS), "patch": PATCH, "truncated": 1}, r"\['truncated'\] to be a bool, got int"),
    ],
)
@pytest.mark.parametrize("fn", [swe_resolved_reward, swe_partial_reward])
def test_malformed_evidence_is_an_error(evidence: dict, message: str, fn) -> None:
    with pytest.raises(RewardComputationError, match=message):
        fn(swe_task(), Trajectory(), evidence)


# ------------------------------------------------------------------------------ normalisation

M_A_B = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n"  # "@@ -1,1 +1,1 @@\n-a\n+b": 21 characters
M_A_C = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+c\n"  # the same but its last character
N_A_B = "--- a/n.py\n+++ b/n.py\n@@ -1 +1 @@\n-a\n+b\n"
M_AB_CD = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n-b\n+c\n+d\n"  # "@@ -1,2 +1,2 @@\n-a\n-b\n+c\n+d": 27
M_AB_CX = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n-b\n+c\n+x\n"
BINARY = "diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n"
M_AB_DC = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n-b\n+d\n+c\n"

GIT_PATCH = (
    "diff --git a/pkg/m.py b/pkg/m.py\n"
    "index 3b18e51..a042389 100644\n"
    "--- a/pkg/m.py\n"
    "+++ b/pkg/m.py\n"
    "@@ -10,3 +10,3 @@ def f(x):\n"
    "     y = x   \n"  # trailing blanks
    "-    return y + 1\n"
    "+    return y - 1\n"
    " \n"  # an empty context line
)


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        # git's extras go: diff/index lines, the function heading; trailing blanks are stripped,
        # an empty context line keeps its space
        (GIT_PATCH, {"pkg/m.py": "@@ -10,3 +10,3 @@\n     y = x\n-    return y + 1\n+    return y - 1\n "}),
        # diff -u style with timestamps; counts of 1 written out
        (
            "--- a/m.py\t2024-01-01 10:00:00\n+++ b/m.py\t2024-01-02 10:00:00\n@@ -1 +1 @@\n-a\n+b\n",
            {"m.py": "@@ -1,1 +1,1 @@\n-a\n+b"},
        ),
        # no newline at end of file: the marker goes, inside the hunk and after it
        (
            "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n",
            {"m.py": "@@ -1,1 +1,1 @@\n-a\n+b"},
        ),
        # a new file is named by its new path, a deleted one by its old path
        ("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n", {"new.py": "@@ -0,0 +1,1 @@\n+x"}),
        ("--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", {"old.py": "@@ -1,1 +0,0 @@\n-x"}),
        # the ---/+++ headers name the file that diff --git opened, whose names are ambiguous here
        (
            "diff --git a/x b/m.py b/x b/m.py\n--- a/x b/m.py\n+++ b/x b/m.py\n@@ -1 +1 @@\n-a\n+b\n",
            {"x b/m.py": "@@ -1,1 +1,1 @@\n-a\n+b"},
        ),
        # a binary change has no hunks: the file is there with an empty text, also before a diff -u section
        (BINARY + M_A_B, {"logo.png": "", "m.py": "@@ -1,1 +1,1 @@\n-a\n+b"}),
        # git's extended headers (a new file, a rename) before ---/+++
        (
            "diff --git a/new.py b/new.py\nnew file mode 100644\nindex 0000000..e69de29\n"
            "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n",
            {"new.py": "@@ -0,0 +1,1 @@\n+x"},
        ),
        (
            "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n"
            "--- a/old.py\n+++ b/new.py\n@@ -1 +1 @@\n-a\n+b\n",
            {"new.py": "@@ -1,1 +1,1 @@\n-a\n+b"},
        ),
        ("diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n", {"logo.png": ""}),
        # a removed line that looks like a file header is read by the hunk's counts
        ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1 @@\n--- x\n-+++ y\n+z\n", {"m.py": "@@ -1,2 +1,1 @@\n--- x\n-+++ y\n+z"}),
        # a commit message before the first file is not part of the patch
        ("Fix m.\n\n" + PATCH, {"m.py": "@@ -1,1 +1,1 @@\n-x = 1\n+x = 2"}),
        # two hunks of one file join; CRLF line ends are trailing whitespace
        (
            "--- a/m.py\r\n+++ b/m.py\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n@@ -9 +9 @@\r\n-c\r\n+d\r\n",
            {"m.py": "@@ -1,1 +1,1 @@\n-a\n+b\n@@ -9,1 +9,1 @@\n-c\n+d"},
        ),
        # blank: no change
        ("", {}),
        ("\n \n", {}),
    ],
)
def test_normalize_patch(patch: str, expected: dict[str, str]) -> None:
    assert normalize_patch(patch) == expected


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        # text that is no diff at all
        ("I fixed the bug.", "expected a unified diff with file headers"),
        # a hunk with no file
        ("@@ -1 +1 @@\n-a\n+b\n", "line 1: expected a file header before the hunk"),
        # a hunk header that is not one
        ("--- a/m.py\n+++ b/m.py\n@@ one @@\n-a\n", r"line 3: expected a hunk header '@@ -l,n \+l,n @@'"),
        # a hunk cut short
        ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n+b\n", "line 3: the hunk ends before"),
        # a foreign line inside a hunk
        ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n*b\n", r"line 5: expected a hunk line starting with"),
        # more removed lines than the header says
        ("--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n-a\n-b\n+c\n", "line 5: the hunk has more lines than"),
    ],
)
def test_malformed_patch_is_an_error(patch: str, message: str) -> None:
    with pytest.raises(MalformedPatchError, match=message):
        normalize_patch(patch)


# ------------------------------------------------------------------------------ similarity


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        # the same patch
        (M_A_B, M_A_B, 1.0),
        # the same change written by git: extras and the hunk heading do not count
        (GIT_PATCH, GIT_PATCH.replace("diff --git a/pkg/m.py b/pkg/m.py\nindex 3b18e51..a042389 100644\n", ""), 1.0),
        (GIT_PATCH.replace(" def f(x):", ""), GIT_PATCH, 1.0),
        # one character of 21 differs: 2 * 20 / 42
        (M_A_C, M_A_B, 20 / 21),
        # one of 27: 2 * 26 / 54
        (M_AB_CX, M_AB_CD, 26 / 27),
        # a long line one character off: 319 of 320 match (difflib's autojunk would drop the
        # frequent "x" and score it 0.0625)
        (M_A_B.replace("+b", "+y" + "x" * 299), M_A_B.replace("+b", "+" + "x" * 300), 319 / 320),
        # two lines swapped: the common first 23 characters and one "\n+" match, 2 * 25 / 54
        (M_AB_DC, M_AB_CD, 25 / 27),
        # the right file plus one the gold patch leaves alone: the union has two files
        (M_A_B + N_A_B, M_A_B, 0.5),
        # half the gold patch's files
        (M_A_B, M_A_B + N_A_B, 0.5),
        # half the files, one of them a character off: (20/21 + 0) / 2
        (M_A_C, M_A_B + N_A_B, 10 / 21),
        # the right change in the wrong file
        (N_A_B, M_A_B, 0.0),
        # an empty patch
        ("", M_A_B, 0.0),
        # the same binary change: an empty change scores 0 on either side (SWE-RL's rule against no-op edits)
        (BINARY, BINARY, 0.0),
        (BINARY + M_A_B, BINARY + M_A_B, 0.5),
    ],
)
def test_patch_similarity(pred: str, gold: str, expected: float) -> None:
    assert patch_similarity(pred, gold) == pytest.approx(expected, abs=1e-12)


def test_patch_similarity_is_symmetric_on_a_hand_case() -> None:
    # SequenceMatcher.ratio is 2M / T either way round on these strings
    assert patch_similarity(M_A_C, M_A_B) == patch_similarity(M_A_B, M_A_C) == pytest.approx(20 / 21)


@pytest.mark.parametrize(
    ("pred", "gold", "message"),
    [
        # an empty reference patch: nothing to compare with
        (M_A_B, "", "expected the gold patch to change at least one file"),
        # either side malformed
        ("not a diff", M_A_B, "expected a unified diff"),
        (M_A_B, "not a diff", "expected a unified diff"),
    ],
)
def test_patch_similarity_rejects_malformed_patches(pred: str, gold: str, message: str) -> None:
    with pytest.raises(MalformedPatchError, match=message):
        patch_similarity(pred, gold)


@pytest.mark.parametrize(
    ("patch", "value", "components"),
    [
        # the reference fix
        (M_A_B, 1.0, {"similarity": 1.0, "files": 1.0, "pred_files": 1.0, "no_patch": 0.0, "malformed": 0.0}),
        # near it, plus a file the fix leaves alone
        (
            M_A_C + N_A_B,
            10 / 21,
            {"similarity": 10 / 21, "files": 2.0, "pred_files": 2.0, "no_patch": 0.0, "malformed": 0.0},
        ),
        # no change
        ("", 0.0, {"similarity": 0.0, "files": 0.0, "pred_files": 0.0, "no_patch": 1.0, "malformed": 0.0}),
        # not a diff
        (
            "@@ -1 +1 @@\n-a\n+b\n",
            0.0,
            {"similarity": 0.0, "files": 0.0, "pred_files": 0.0, "no_patch": 0.0, "malformed": 1.0},
        ),
    ],
)
def test_patch_similarity_reward(patch: str, value: float, components: dict[str, float]) -> None:
    result = swe_patch_similarity_reward(swe_task(answer=M_A_B), Trajectory(), {"patch": patch})
    assert result.value == pytest.approx(value)
    assert dict(result.components) == pytest.approx({**components, "gold_files": 1.0})


@pytest.mark.parametrize(
    ("patch", "value"),
    [
        # SWE-RL's -1 for a format error: empty and malformed patches
        ("", -1.0),
        ("I fixed the bug.", -1.0),
        # a well-formed patch scores its similarity as before
        (M_A_C, 20 / 21),
    ],
)
def test_format_error_score_option(patch: str, value: float) -> None:
    reward = make_swe_patch_similarity_reward(format_error_score=-1.0)
    assert reward(swe_task(answer=M_A_B), Trajectory(), {"patch": patch}).value == pytest.approx(value)
    # a term the trainer can send to worker processes
    assert pickle.loads(pickle.dumps(reward))(swe_task(answer=M_A_B), Trajectory(), {"patch": patch}).value == (
        pytest.approx(value)
    )


@pytest.mark.parametrize("score", [float("nan"), float("inf")])
def test_format_error_score_must_be_finite(score: float) -> None:
    with pytest.raises(RewardConfigError, match="expected a finite format_error_score"):
        make_swe_patch_similarity_reward(score)


@pytest.mark.parametrize(
    ("answer", "evidence", "message"),
    [
        # the reference patch is missing, empty or not a diff: the task is malformed
        (None, {"patch": M_A_B}, r"expected task.answer to be the reference patch \(str\), got NoneType"),
        ("", {"patch": M_A_B}, "expected task 'toolz-1' to have a reference patch, got an empty one"),
        ("@@ -1 +1 @@\n-a\n+b\n", {"patch": M_A_B}, "expected task.answer to be a unified diff: line 1"),
        # the environment did not hand the agent's patch over
        (M_A_B, {}, r"expected evidence\['patch'\] with the agent's diff, got keys \[\]"),
        (M_A_B, {"patch": None}, r"to be a unified diff \(str\), got NoneType"),
    ],
)
def test_patch_similarity_reward_errors(answer: Any, evidence: dict, message: str) -> None:
    with pytest.raises(RewardComputationError, match=message):
        swe_patch_similarity_reward(swe_task(answer=answer), Trajectory(), evidence)
