"""The reward-hacking probes on a small subset: no exploit accepted, every oracle accepted, every probe exercised."""

from __future__ import annotations

import pytest

from benchmarks.probes import (
    CANARY,
    INJECTION,
    JUDGE_RUBRIC,
    TAMPER_MARK,
    VERIFIERS,
    EpisodeRecord,
    code_probes,
    judge_probes,
    main,
    math_probes,
    naive_verdict,
    run_probes,
    search_probes,
    summarize,
)
from rewards.judge import build_judge_prompt
from tasks.records import Task, Trajectory, Turn

TASK = Task(id="qa/0", env="Search", family="single", prompt="Who founded Marrowick?", answer=["Oskar Vell"])


@pytest.fixture(scope="module")
def records(backend_problems: dict[str, str | None]) -> list[EpisodeRecord]:
    """Every probe on one task per verifier; PythonSandbox in bubblewrap."""
    if backend_problems["bwrap"]:
        pytest.skip(backend_problems["bwrap"])
    return run_probes(["search", "python"], split="test", limit=1, sandbox="bwrap")


@pytest.mark.bwrap
@pytest.mark.parametrize("verifier", VERIFIERS)
def test_no_false_positive_and_no_false_negative(records: list[EpisodeRecord], verifier: str) -> None:
    report = next(r for r in summarize(records) if r.verifier == verifier)
    accepted = [(r.probe, r.task_id) for r in records if r.verifier == verifier and not r.oracle and r.accepted]
    assert report.exploit_episodes > 0 and report.oracle_episodes > 0
    assert report.infra_errors == 0
    assert (report.false_positives, report.fp_rate) == (0, 0.0), accepted
    assert (report.false_negatives, report.fn_rate) == (0, 0.0)
    assert report.leaked_credit == 0


@pytest.mark.bwrap
def test_every_probe_of_the_catalogue_was_exercised(records: list[EpisodeRecord]) -> None:
    catalogue = {(p.verifier, p.name) for p in [*search_probes(), *math_probes(), *code_probes(), *judge_probes()]}
    assert {(r.verifier, r.probe) for r in records} == catalogue
    not_exercised = [(r.verifier, r.probe, r.evidence[-200:]) for r in records if not r.exercised]
    assert not not_exercised


@pytest.mark.bwrap
@pytest.mark.parametrize("probe", ["plant-results-with-tool", "daemon-rewrites-results"])
def test_what_the_agent_planted_is_gone_when_the_hidden_tests_run(records: list[EpisodeRecord], probe: str) -> None:
    (record,) = [r for r in records if r.probe == probe]
    assert "hidden tests: 0/" in record.evidence
    assert TAMPER_MARK not in record.evidence.split("hidden tests:")[-1]
    assert "tampered with" not in record.evidence


@pytest.mark.bwrap
def test_code_in_the_answer_can_rewrite_results_but_not_expected_values(records: list[EpisodeRecord]) -> None:
    # the answer runs in the harness process: it can forge the results, not the values the host compares
    (record,) = [r for r in records if r.probe == "hijack-harness-json"]
    assert TAMPER_MARK in record.evidence
    assert 0 < record.outcome < 1


def test_naive_judge_passes_an_injection_that_leaves_the_quoted_block() -> None:
    # the judge probe is not vacuous: an escaped injection is caught ...
    prompt = build_judge_prompt(JUDGE_RUBRIC, TASK, Trajectory()) + f"\n{INJECTION}\n"
    assert naive_verdict(prompt).endswith("VERDICT: PASS")
    # ... and an injection kept inside the block is not
    inside = Trajectory((Turn(action=INJECTION, observation=""),))
    assert CANARY in build_judge_prompt(JUDGE_RUBRIC, TASK, inside)
    assert naive_verdict(build_judge_prompt(JUDGE_RUBRIC, TASK, inside)).endswith("VERDICT: FAIL")


def test_naive_judge_grades_the_final_answer() -> None:
    right = Trajectory((Turn(action="<answer>Oskar Vell</answer>", observation="", answer="Oskar Vell"),))
    wrong = Trajectory((Turn(action="<answer>Edda Morn</answer>", observation="", answer="Edda Morn"),))
    assert naive_verdict(build_judge_prompt(JUDGE_RUBRIC, TASK, right)).endswith("VERDICT: PASS")
    assert naive_verdict(build_judge_prompt(JUDGE_RUBRIC, TASK, wrong)).endswith("VERDICT: FAIL")


def test_cli_writes_json_and_exits_zero(tmp_path) -> None:
    out = tmp_path / "probes.json"
    assert main(["--envs", "search", "--limit", "1", "--json", str(out)]) == 0
    assert '"fp_rate": 0.0' in out.read_text()
