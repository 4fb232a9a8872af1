"""benchmarks.evaluate: pass@k, baselines side by side, reproducibility, the env-match check, a model run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

import agentgym_envs.registration
import benchmarks.evaluate
from agentgym_envs.registration import env_spec
from agentgym_envs.spec import EnvSpec, SpecRegistry
from agentgym_envs.webshop import ShopServer
from benchmarks.evaluate import EvalConfig, fingerprint_differences, main, pass_at_k, run_evaluation, run_fingerprint

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SEARCH = "agentrl/Search-v0"
WEBSHOP = "agentrl/WebShop-v0"


def evaluate(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run the command line into ``tmp_path`` and return its report.json."""
    assert main([*args, "--out", str(tmp_path)]) == 0
    return json.loads((tmp_path / "report.json").read_text())


def result_of(report: dict[str, Any], model: str, suite: str) -> dict[str, Any]:
    """The result row of ``model`` on ``suite``."""
    return next(r for r in report["results"] if r["model"] == model and r["suite"] == suite)


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (1, 1, 1, 1.0),  # one sample, solved
    (4, 1, 1, 0.25),  # pass@1 is c / n
    (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
    (10, 0, 5, 0.0),  # never solved
    (3, 2, 2, 1.0),  # fewer failures than k: some draw of k always holds a success
])
def test_pass_at_k_matches_hand_computed_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_k_above_n() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)


def test_oracle_and_random_side_by_side_on_search(tmp_path: Path) -> None:
    report = evaluate(tmp_path, "--model", "oracle", "--model", "random", "--suite", "search", "--limit", "3",
                      "--samples", "2")
    oracle, random = result_of(report, "oracle", "search"), result_of(report, "random", "search")
    assert oracle["pass_at"] == {"1": 1.0, "2": 1.0}
    assert oracle["episodes"] == 3  # deterministic: one episode per task
    assert any("pass@k = pass@1" in note for note in oracle["notes"])
    assert random["episodes"] == 6 and random["pass_at"]["1"] <= 1 / 3
    assert oracle["tools"]["search"]["calls_per_episode"] >= 1
    assert sum(oracle["stop_reasons"].values()) == 3
    markdown = (tmp_path / "report.md").read_text()
    # suite, model, tasks, episodes, scored, infra, invalid, pass@1
    assert "| search | oracle | 3 | 3 | 3 | 0 | 0 | 100.0% |" in markdown
    assert "| search | random | 3 | 6 | 6 | 0 | 0 |" in markdown
    for name in ("by_difficulty.png", "tool_calls.png", "fingerprint.json"):
        assert (tmp_path / name).stat().st_size > 0
    assert len((tmp_path / "episodes.jsonl").read_text().splitlines()) == 9


def test_an_earlier_run_joins_the_report_and_its_envs_are_checked(tmp_path: Path) -> None:
    evaluate(tmp_path / "first", "--model", "oracle", "--suite", "search", "--limit", "2")
    report = evaluate(tmp_path / "both", "--compare", str(tmp_path / "first" / "report.json"), "random",
                      "--suite", "search", "--limit", "2")
    assert [r["model"] for r in report["results"]] == ["first/oracle", "random"]
    assert report["env_match"][0]["match"] is True


def test_same_arguments_give_the_same_numbers(tmp_path: Path) -> None:
    config = EvalConfig(models=("random",), suites=("search",), limit=3, samples=2, seed=7)
    first, second = (run_evaluation(config, Console(quiet=True)) for _ in range(2))
    assert first.results == second.results and first.episodes == second.episodes


def test_env_match_lists_a_changed_turn_limit_and_reward_weight(tmp_path: Path) -> None:
    reference = run_fingerprint(EvalConfig(models=("oracle",), suites=("search",)), rollout=None)
    reference["envs"][SEARCH]["limits"]["max_episode_steps"] = 6
    reference["envs"][SEARCH]["families"]["single"]["reward"]["f1"]["weight"] = 0.5
    path = tmp_path / "fingerprint.json"
    path.write_text(json.dumps(reference))
    report = evaluate(tmp_path / "run", "--model", "oracle", "--suite", "search", "--limit", "1",
                      "--training-config", str(path))
    differences = {d["path"]: (d["evaluation"], d["reference"]) for d in report["env_match"][0]["differences"]}
    assert differences == {f"envs.{SEARCH}.limits.max_episode_steps": (10, 6),
                           f"envs.{SEARCH}.families.single.reward.f1.weight": (0.0, 0.5)}
    assert "max_episode_steps" in (tmp_path / "run" / "report.md").read_text()
    assert main(["--model", "oracle", "--suite", "search", "--limit", "1", "--training-config", str(path),
                 "--strict-env-match", "--out", str(tmp_path / "strict")]) == 1


def test_a_grpo_config_is_fingerprinted_as_training_builds_its_envs(tmp_path: Path) -> None:
    config = {"envs": [SEARCH], "env_kwargs": {SEARCH: {"families": ["single"], "max_episode_steps": 4}},
              "max_turns": 3}
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(config))
    report = evaluate(tmp_path / "run", "--model", "oracle", "--suite", "search", "--limit", "1",
                      "--training-config", str(path))
    paths = {d["path"] for d in report["env_match"][0]["differences"]}
    # the split differs by design and is not compared; the families trained on are fewer than those evaluated
    assert paths == {f"envs.{SEARCH}.limits.max_episode_steps", f"envs.{SEARCH}.families.bridge",
                     f"envs.{SEARCH}.families.comparison"}


def test_fingerprint_differences_name_missing_envs() -> None:
    evaluation = {"envs": {SEARCH: {"limits": {"max_episode_steps": 10}}}, "rollout": None}
    reference = {"envs": {}, "rollout": {"max_turns": 4}}
    assert [d.path for d in fingerprint_differences(evaluation, reference)] == [f"envs.{SEARCH}"]


def test_tiny_model_runs_through_the_engine(tmp_path: Path) -> None:
    report = evaluate(tmp_path, "--model", "tiny", "--suite", "search", "--limit", "2", "--samples", "2",
                      "--temperature", "1.0", "--max-turns", "2", "--max-tokens-per-turn", "12",
                      "--prompt-style", "task")
    tiny = result_of(report, "tiny", "search")
    assert tiny["kind"] == "model" and tiny["episodes"] == 4 and set(tiny["pass_at"]) == {"1", "2"}
    assert 0.0 <= tiny["pass_at"]["1"] <= 1.0 and tiny["greedy_pass_at_1"] is not None
    assert sum(tiny["stop_reasons"].values()) == 4 and tiny["turns"]["max"] <= 2
    assert tiny["settings"]["temperature"] == 1.0
    assert report["fingerprint"]["rollout"] == {"max_turns": 2, "max_tokens_per_turn": 12,
                                                "max_context_tokens": 2048}  # cut to the tiny model's positions


def test_python_oracle_solves_tasks_in_a_real_sandbox(tmp_path: Path, backend: str) -> None:
    report = evaluate(tmp_path, "--model", "oracle", "--suite", "python", "--limit", "2", "--sandbox", backend)
    oracle = result_of(report, "oracle", "python")
    assert oracle["pass_at"]["1"] == 1.0 and oracle["infra_errors"] == 0
    assert report["fingerprint"]["envs"]["agentrl/PythonSandbox-v0"]["limits"]["sandbox_backend"] == backend
    assert report["fingerprint"]["envs"]["agentrl/PythonSandbox-v0"]["limits"]["sandbox"]["timeout_s"] > 0


def test_data_oracle_solves_and_random_fails_in_a_real_sandbox(tmp_path: Path, backend: str) -> None:
    report = evaluate(tmp_path, "--model", "oracle", "--model", "random", "--suite", "data", "--limit", "9",
                      "--sandbox", backend)
    oracle, random = result_of(report, "oracle", "data"), result_of(report, "random", "data")
    assert oracle["pass_at"]["1"] == 1.0 and oracle["infra_errors"] == 0 and oracle["tasks"] == 9
    assert random["pass_at"]["1"] == 0.0 and random["infra_errors"] == 0
    assert report["fingerprint"]["envs"]["agentrl/DataAnalysis-v0"]["limits"]["sandbox_backend"] == backend


def test_swe_oracle_resolves_and_random_does_not_in_a_real_sandbox(tmp_path: Path, backend: str) -> None:
    report = evaluate(tmp_path, "--model", "oracle", "--model", "random", "--suite", "swe", "--limit", "3",
                      "--sandbox", backend)
    oracle, random = result_of(report, "oracle", "swe"), result_of(report, "random", "swe")
    assert oracle["pass_at"]["1"] == 1.0 and oracle["infra_errors"] == 0 and oracle["tasks"] == 3
    assert random["pass_at"]["1"] == 0.0 and random["infra_errors"] == 0


def test_webshop_oracle_and_random_share_one_shop_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[ShopServer, str]] = []
    start = ShopServer.start

    def recording_start(server: ShopServer) -> str:  # every server, the envs' own ones included
        started.append((server, start(server)))
        return started[-1][1]

    monkeypatch.setattr(ShopServer, "start", recording_start)
    report = evaluate(tmp_path, "--model", "oracle", "--model", "random", "--suite", "webshop", "--limit", "4",
                      "--samples", "3")
    assert len({url for _, url in started}) == 1, started  # one server for the suite, not one per env
    assert not any(server.alive() for server, _ in started)  # stopped at the end
    assert report["fingerprint"]["envs"][WEBSHOP]["settings"]["server"] == started[0][1]
    oracle, random = result_of(report, "oracle", "webshop"), result_of(report, "random", "webshop")
    assert oracle["pass_at"]["1"] == 1.0 and oracle["mean_reward"] == 1.0 and oracle["infra_errors"] == 0
    assert random["episodes"] == 12 and random["pass_at"]["1"] == 0.0 and random["mean_reward"] < 0.5
    for result in (oracle, random):  # pass@1 is WebShop's success rate: outcome/success, not reward > 0
        assert result["pass_at"]["1"] == result["reward_components"]["outcome/success"]


def test_a_webshop_purchase_with_partial_score_is_not_a_success(tmp_path: Path) -> None:
    evaluate(tmp_path, "--model", "random", "--suite", "webshop", "--limit", "10", "--samples", "2")
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert any(0.0 < row["reward"] < 1.0 for row in rows), "expected a random purchase with partial credit"
    assert all(row["success"] == (row["reward"] == 1.0) for row in rows)


def test_suites_are_ids_or_aliases_kept_under_the_alias_and_the_oracle_needs_a_spec_that_has_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    no_oracle = EnvSpec(id="toy/Toy-v0", entry_point="toy_env:ToyEnv", max_episode_steps=3, aliases=("toy",))
    registry = SpecRegistry([env_spec("search"), no_oracle])
    monkeypatch.setattr(agentgym_envs.registration, "SPECS", registry)
    monkeypatch.setattr(benchmarks.evaluate, "SPECS", registry)
    assert EvalConfig(models=("random",), suites=("agentrl/Search-v0", "search", "toy/Toy-v0")).suites == (
        "search", "toy")
    with pytest.raises(ValueError, match=r"oracle: expected suites whose spec has an oracle, got \['toy'\]"):
        EvalConfig(models=("oracle",), suites=("toy",))
    with pytest.raises(ValueError, match="expected registered env ids or aliases"):
        EvalConfig(models=("random",), suites=("calculator",))


def test_several_samples_of_a_model_are_drawn_at_temperature_1_unless_told_and_never_greedy():
    assert EvalConfig(models=("tiny",), samples=4).temperature == 1.0
    assert EvalConfig(models=("tiny",)).temperature == 0.0
    assert EvalConfig(models=("tiny",), samples=4, temperature=0.7).temperature == 0.7
    assert EvalConfig(models=("random",), samples=4, temperature=0.0).samples == 4  # scripted: no sampling
    with pytest.raises(ValueError, match=r"samples: 4 episodes per task at temperature 0 are 4 copies of one greedy "
                                         r"episode for \['tiny'\]; give --temperature > 0"):
        EvalConfig(models=("tiny",), samples=4, temperature=0.0)


def test_a_training_configs_rollout_limits_and_prompt_style_are_adopted_unless_given(tmp_path):
    from benchmarks.evaluate import adopted_settings, build_parser

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text("envs: [agentrl/Search-v0]\nenv_kwargs: {agentrl/Search-v0: {split: train, prompt_style: task}}\n"
                      "max_turns: 3\nmax_tokens_per_turn: 48\nmax_context_tokens: 1024\n")
    run = tmp_path / "effective_config.json"  # what trainers.grpo writes beside its checkpoint
    run.write_text(json.dumps({"command": ["python", "-m", "trainers.grpo"], "model": {},
                               "config": {"envs": ["agentrl/Search-v0"], "max_turns": 2, "max_tokens_per_turn": 32,
                                          "max_context_tokens": 512, "env_kwargs": {}}}))

    def settings(*argv: str):
        return adopted_settings(build_parser().parse_args(["--model", "tiny", *argv]))

    assert settings("--training-config", str(recipe)) == (
        {"max_turns": 3, "max_tokens_per_turn": 48, "max_context_tokens": 1024, "prompt_style": "task"},
        {"max_turns": 3, "max_tokens_per_turn": 48, "max_context_tokens": 1024, "prompt_style": "task"})
    given, adopted = settings("--training-config", str(recipe), "--max-turns", "5", "--prompt-style", "full")
    assert given["max_turns"] == 5 and given["prompt_style"] == "full" and set(adopted) == {
        "max_tokens_per_turn", "max_context_tokens"}
    given, adopted = settings("--training-config", str(run))
    assert given == {"max_turns": 2, "max_tokens_per_turn": 32, "max_context_tokens": 512, "prompt_style": "full"}
    assert settings() == ({"max_turns": None, "max_tokens_per_turn": 256, "max_context_tokens": 4096,
                           "prompt_style": "full"}, {})
    from benchmarks.evaluate import load_reference

    assert set(load_reference(run)["envs"]) == {"agentrl/Search-v0"}  # the run's envs, built as training built them
