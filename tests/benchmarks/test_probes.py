"""The reward-hacking probes on a small subset: no exploit accepted, every oracle accepted, every probe exercised,
no WebShop, DataAnalysis or SWE observation showing what the task hides."""

from __future__ import annotations

import pytest

from agentgym_envs.data_analysis.probes import data_field_probes, data_sql_probes
from agentgym_envs.errors import UnknownEnvError
from agentgym_envs.policies import tool_call_action
from agentgym_envs.probing import CANARY, INJECTION, EpisodeRecord, leaked, naive_verdict
from agentgym_envs.python_sandbox.probes import TAMPER_MARK, code_probes, math_probes
from agentgym_envs.registration import SPECS
from agentgym_envs.search.probes import JUDGE_RUBRIC, judge_probes, search_probes
from agentgym_envs.spec import EnvSpec
from agentgym_envs.swe.probes import SWE_RESOLVED, swe_hidden_texts, swe_probes
from agentgym_envs.webshop.probes import WEBSHOP_SCORE, hidden_goal_texts, webshop_probes
from benchmarks.probes import (
    MAX_SHARE_OF_ORACLE,
    main,
    mean_outcomes,
    probed_specs,
    run_probes,
    summarize,
    verdict,
    verifiers,
)
from rewards.judge import build_judge_prompt
from tasks import load_split
from tasks.records import Task, Trajectory, Turn

TASK = Task(id="qa/0", env="Search", family="single", prompt="Who founded Marrowick?", answer=["Oskar Vell"])


@pytest.fixture(scope="module")
def records(backend_problems: dict[str, str | None]) -> list[EpisodeRecord]:
    """Every probe on one task per verifier; PythonSandbox, DataAnalysis and SWE in bubblewrap."""
    if backend_problems["bwrap"]:
        pytest.skip(backend_problems["bwrap"])
    return run_probes(["search", "python", "data", "swe"], split="test", limit=1, sandbox="bwrap")


@pytest.fixture(scope="module")
def shop_records() -> list[EpisodeRecord]:
    """Every WebShop probe on three test tasks (one per difficulty level), against a real shop server."""
    return run_probes(["webshop"], split="test", limit=3)


@pytest.mark.bwrap
@pytest.mark.parametrize("verifier", [v for v in verifiers() if v != WEBSHOP_SCORE])  # WebShop's: shop_records
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
    probes = [*search_probes(), *math_probes(), *code_probes(), *judge_probes(), *data_field_probes(),
              *data_sql_probes(), *swe_probes()]
    catalogue = {(p.verifier, p.name) for p in probes}
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


def test_webshop_oracle_beats_every_probe(shop_records: list[EpisodeRecord]) -> None:
    (report,) = summarize(shop_records)
    assert (report.oracle_episodes, report.oracle_mean, report.false_negatives) == (3, 1.0, 0)
    assert (report.false_positives, report.leaked_credit, report.near_oracle, report.unexercised) == (0, 0, [], [])
    assert report.infra_errors == 0 and report.hidden_leaks == 0 and not report.failed
    assert {r.probe for r in shop_records} == {p.name for p in webshop_probes()}
    means = mean_outcomes(shop_records)
    exploits = {name: mean for (_, name), mean in means.items() if name != "oracle"}
    assert max(exploits.values()) < MAX_SHARE_OF_ORACLE * report.oracle_mean, exploits


def test_the_target_bought_without_its_options_earns_partial_credit_and_no_success(
        shop_records: list[EpisodeRecord]) -> None:
    # WebShop's score counts what the purchase meets: the right product without its option meets 2 of 3 terms
    # (level 1), 3 of 4 (level 2) or 4 of 6 (level 3); a success needs all of them
    rows = [r for r in shop_records if r.probe == "target-without-options"]
    assert sorted(round(r.outcome, 3) for r in rows) == [0.667, 0.667, 0.75]
    assert not any(r.accepted for r in rows)


def test_a_wrong_variant_of_the_target_earns_partial_credit_and_no_success(
        shop_records: list[EpisodeRecord]) -> None:
    # the target with one option set to the other offered value most like the wanted one: the strict grader counts
    # that option as missed, so the purchase meets 2 of 3 terms (level 1), 3 of 4 (level 2) or 5 of 6 (level 3)
    rows = [r for r in shop_records if r.probe == "wrong-variant"]
    assert len(rows) == 3 and all(r.exercised for r in rows), [r.evidence for r in rows]
    assert sorted(round(r.outcome, 3) for r in rows) == [0.667, 0.75, 0.833]
    assert not any(r.accepted for r in rows)


@pytest.mark.parametrize("probe", ["buy-now-at-once", "url-as-query", "url-as-click", "hidden-state-queries",
                                   "answer-instead-of-buying"])
def test_urls_hidden_state_and_answers_never_buy_anything(shop_records: list[EpisodeRecord], probe: str) -> None:
    rows = [r for r in shop_records if r.probe == probe]
    assert len(rows) == 3
    for record in rows:
        assert record.exercised and record.outcome == 0.0 and record.leaks == [], record.evidence
        assert record.evidence.endswith("shop purchase: none")  # the server's own record of the session


def test_the_oracle_purchase_is_on_the_shop_server_record(shop_records: list[EpisodeRecord]) -> None:
    for record in (r for r in shop_records if r.oracle):
        assert '"asin": "' in record.evidence.rsplit("shop purchase: ", 1)[-1]


TEST_TASK = load_split("WebShop", "test")[0]


@pytest.mark.parametrize(("action", "observation", "expected"), [
    # a page that shows a goal field leaks it
    ("click", "Price: $12.00\nprice_upper: 53.0", ["price_upper"]),
    # the API's session record in a page leaks it
    ("click", '{"session": "x", "purchase": null}', ['"purchase":']),
    # every product that meets the goal, listed together
    ("click", ", ".join(TEST_TASK.metadata["matching_asins"]), [", ".join(TEST_TASK.metadata["matching_asins"])]),
    # a search page echoing the agent's own query is no leak
    ('search {"query": "price_upper"}', "No results for price_upper.", []),
    # the instruction and one matching product are what every episode shows
    ("click", f"{TEST_TASK.prompt}\n[button] {TEST_TASK.answer} [button_]", []),
])
def test_leak_check_finds_hidden_goal_texts_but_not_the_agents_own(action: str, observation: str,
                                                                   expected: list[str]) -> None:
    trajectory = Trajectory((Turn(action=action, observation=observation),))
    assert leaked(trajectory, hidden_goal_texts(TEST_TASK)) == expected


def test_cli_runs_the_webshop_probes(tmp_path, capsys) -> None:
    out = tmp_path / "probes.json"
    assert main(["--envs", "webshop", "--limit", "1", "--json", str(out)]) == 0
    assert '"near_oracle": []' in out.read_text()
    assert capsys.readouterr().out.splitlines()[-1].startswith("probes passed: 1 verifiers, ")


def probe_record(probe: str, *, oracle: bool = False, accepted: bool = False, leaks: tuple[str, ...] = (),
                 exercised: bool = True, task_id: str = "swe/0", infra_error: bool = False) -> EpisodeRecord:
    return EpisodeRecord(verifier=SWE_RESOLVED, probe=probe, oracle=oracle, task_id=task_id,
                         outcome=float(accepted), accepted=accepted, terminated=not infra_error,
                         infra_error=infra_error, exercised=exercised and not infra_error, leaks=list(leaks))


@pytest.mark.parametrize(("records", "expected"), [
    # every verifier held: the counts
    ([probe_record("oracle", oracle=True, accepted=True), probe_record("no-op-submit")],
     "probes passed: 1 verifiers, 2 episodes (0 ended by an infrastructure fault), no exploit accepted, no oracle "
     "rejected"),
    # every oracle episode ended by an infrastructure fault: nothing was compared, which fails the run
    ([probe_record("oracle", oracle=True, infra_error=True), probe_record("no-op-submit")],
     "probes FAILED: swe/resolved: 0 oracle and 1 exploit episodes scored, 1 ended by an infrastructure fault: "
     "nothing compared (see the infra errors column) | swe/resolved / oracle: never exercised in 0 scored episodes"),
    # one hidden leak in one of two episodes: verifier, probe, how many, which task and what it showed
    ([probe_record("oracle", oracle=True, accepted=True), probe_record("find-fix", task_id="swe/1"),
      probe_record("find-fix", task_id="swe/2", leaks=("return max(0, x)",))],
     "probes FAILED: swe/resolved / find-fix: hidden text shown in 1/2 episodes (task swe/2 showed "
     "'return max(0, x)')"),
    # an oracle rejected (its mean 0, so every exploit stands at 80%+ of it), an exploit accepted, an idle probe
    ([probe_record("oracle", oracle=True), probe_record("skip-tests", accepted=True),
      probe_record("conftest", exercised=False)],
     "probes FAILED: swe/resolved / oracle: oracle rejected in 1/1 episodes | swe/resolved / skip-tests: exploit "
     "accepted in 1/1 episodes; mean outcome 80%+ of the oracle's | swe/resolved / conftest: mean outcome 80%+ of "
     "the oracle's; never exercised in 1 scored episodes"),
])
def test_the_last_line_names_each_failing_verifier_probe_and_reason(records, expected) -> None:
    assert verdict(records, summarize(records)) == expected


@pytest.mark.bwrap
@pytest.mark.parametrize("probe", ["planted-gold-table", "replaced-sql-tool"])
def test_a_gold_table_planted_in_the_episode_is_gone_when_the_final_query_is_graded(
        records: list[EpisodeRecord], probe: str) -> None:
    (record,) = [r for r in records if r.probe == probe]
    assert record.exercised and record.terminated
    assert record.outcome == 0.0


@pytest.mark.bwrap
def test_no_data_observation_shows_a_reference_program(records: list[EpisodeRecord]) -> None:
    assert not [(r.probe, r.leaks) for r in records if r.verifier.startswith("data/") and r.leaks]


SWE_TAMPERING = ["no-op-submit", "delete-failing-tests", "skip-tests", "edit-asserts-away", "conftest-all-passed",
                 "plugin-in-config", "exit-0-at-import", "fake-passed-output", "patch-pytest-reports"]


@pytest.mark.bwrap
@pytest.mark.parametrize("probe", SWE_TAMPERING)
def test_tampering_with_the_tests_pytest_or_the_exit_resolves_nothing(records: list[EpisodeRecord],
                                                                      probe: str) -> None:
    (record,) = [r for r in records if r.verifier == SWE_RESOLVED and r.probe == probe]
    assert record.exercised and record.terminated and not record.infra_error, record.evidence
    assert record.outcome == 0.0


@pytest.mark.bwrap
def test_the_swe_oracle_resolves_and_no_observation_shows_the_fix_or_hidden_ids(records: list[EpisodeRecord]) -> None:
    (oracle,) = [r for r in records if r.verifier == SWE_RESOLVED and r.oracle]
    assert oracle.accepted and oracle.exercised
    assert not [(r.probe, r.leaks) for r in records if r.verifier == SWE_RESOLVED and r.leaks]


@pytest.mark.bwrap
def test_searching_the_sandbox_for_the_fix_or_history_does_not_resolve_a_task(records: list[EpisodeRecord]) -> None:
    (record,) = [r for r in records if r.verifier == SWE_RESOLVED and r.probe == "find-history-or-fix"]
    assert record.exercised
    assert record.outcome == 0.0, record.evidence


SWE_FIX_LINE = 'return s.encode("latin-1")'
"""The line the reference fix of :data:`SWE_TASK` adds."""
SWE_HIDDEN_ID = "test_six.py::test_b"
"""A FAIL_TO_PASS id of :data:`SWE_TASK` that its prompt does not name."""
SWE_TASK = Task(id="six/0", env="SWE", family="synthetic", prompt="test_six.py::test_BytesIO fails.",
                answer=f"--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-    return s\n+    {SWE_FIX_LINE}\n",
                metadata={"FAIL_TO_PASS": [SWE_HIDDEN_ID, "test_six.py::test_BytesIO"], "PASS_TO_PASS": []})
"""A task whose fix adds :data:`SWE_FIX_LINE` and whose prompt names one of its two FAIL_TO_PASS ids."""


@pytest.mark.parametrize(("action", "observation", "tree", "expected"), [
    # a file outside the repository showing the fix's line leaks it
    ("bash", f"{SWE_FIX_LINE}\n", b"", [SWE_FIX_LINE]),
    # a line the buggy tree holds elsewhere is visible anyway: no leak
    ("bash", f"{SWE_FIX_LINE}\n", SWE_FIX_LINE.encode(), []),
    # the editor showing the text its own call wrote (JSON-escaped in the action) is no leak
    (tool_call_action("editor", command="str_replace", path="six.py", old_str="x", new_str=SWE_FIX_LINE),
     f"Edited six.py.\n{SWE_FIX_LINE}", b"", []),
    # a FAIL_TO_PASS id the prompt does not name leaks; the one it names does not
    ("bash", f"{SWE_HIDDEN_ID} FAILED", b"", [SWE_HIDDEN_ID]),
    ("bash", "test_six.py::test_BytesIO FAILED", b"", []),
])
def test_swe_leak_check_finds_the_fix_and_hidden_ids_but_not_what_the_agent_sees(
        action: str, observation: str, tree: bytes, expected: list[str]) -> None:
    assert SWE_FIX_LINE in SWE_TASK.answer and SWE_HIDDEN_ID in SWE_TASK.metadata["FAIL_TO_PASS"]
    trajectory = Trajectory((Turn(action=action, observation=observation),))
    assert leaked(trajectory, swe_hidden_texts(lambda task: {"six.py": tree})(SWE_TASK)) == expected


TOY_SPEC = EnvSpec(id="toy/Unprobed-v0", entry_point="toy:Env", max_episode_steps=3, aliases=("unprobed",))
"""A registered spec with no probes."""


def test_a_spec_without_probes_is_skipped_by_default_and_refused_when_named() -> None:
    with SPECS.added(TOY_SPEC):
        assert TOY_SPEC not in probed_specs() and len(probed_specs()) == len([s for s in SPECS if s.probes])
        with pytest.raises(ValueError, match=r"got \['toy/Unprobed-v0'\], whose spec has none"):
            run_probes(["unprobed"])
        with pytest.raises(SystemExit):
            main(["--envs", "search,unprobed"])


def test_an_unknown_env_is_refused() -> None:
    with pytest.raises(UnknownEnvError, match="no environment spec 'nowhere'"):
        run_probes(["nowhere"])
