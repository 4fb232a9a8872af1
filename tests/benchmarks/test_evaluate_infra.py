"""benchmarks.evaluate never prints a rate from zero scored episodes: scored / infra / invalid counts, n/a rates,
status 1 naming the first infrastructure fault (a real unreachable Docker daemon), and missing model paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from agentgym_envs.runner import Episode
from benchmarks.evaluate import main, summarize, with_counts

REPO = Path(__file__).parents[2]
UNREACHABLE_DOCKER = "unix:///nonexistent/docker.sock"
"""A Docker daemon address where nothing answers: the Docker SDK fails to connect, as with the daemon down."""


def test_with_the_docker_daemon_down_nothing_is_scored_and_the_command_fails_naming_the_daemon(tmp_path):
    command = [sys.executable, "-m", "benchmarks.evaluate", "--model", "oracle", "--suite", "search,data",
               "--limit", "2", "--out", str(tmp_path)]
    environment = {**os.environ, "DOCKER_HOST": UNREACHABLE_DOCKER, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    done = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "error" in done.stderr and "oracle · data: no episode was scored" in done.stderr
    assert "no Docker daemon answers" in done.stderr and "python -m agentgym_envs.sandbox doctor" in done.stderr
    results = {r["suite"]: r for r in json.loads((tmp_path / "report.json").read_text())["results"]}
    data, search = results["data"], results["search"]
    assert (data["episodes"], data["scored"], data["infra_errors"], data["invalid"]) == (2, 0, 2, 0)
    assert data["pass_at"] == {"1": None} and data["mean_reward"] is None  # not 0.0
    assert "no Docker daemon answers" in data["first_infra_error"]
    assert (search["scored"], search["pass_at"]["1"]) == (2, 1.0)  # the suite that needs no Docker is scored
    data_row = next(line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("| data"))
    assert data_row.split(" | ")[4:8] == ["0", "2", "0", "n/a"]  # scored, infra, invalid, pass@1
    console_row = next(line for line in done.stdout.splitlines() if "│ data" in line)
    assert "n/a" in console_row and "0.0%" not in console_row


def episode(task: str, reward: float, components: dict[str, float], *, infra: bool = False) -> Episode:
    return Episode(env_id="agentrl/SWE-v0", task_id=task, group=0, reward=reward, reward_components=components,
                   terminated=not infra, infra_error=infra, stop_reason="infra_error" if infra else "answered")


def test_invalid_verifier_runs_are_counted_among_the_scored_episodes():
    outcomes = [episode("a", 1.0, {"outcome": 1.0, "outcome/invalid": 0.0}),
                episode("b", 0.0, {"outcome": 0.0, "outcome/invalid": 1.0}),  # the hidden test run errored
                episode("c", 0.0, {}, infra=True)]
    result = summarize("m", "swe", "scripted", outcomes, samples=1, ks=(1,))
    assert (result.episodes, result.scored, result.infra_errors, result.invalid) == (3, 2, 1, 1)
    assert result.pass_at == {"1": 0.5}
    older = {key: value for key, value in asdict(result).items() if key not in ("scored", "invalid")}
    assert with_counts(older) == asdict(result)  # a report.json written before the counts gets the same ones


def test_a_missing_checkpoint_path_is_an_error_naming_it_before_anything_runs():
    with pytest.raises(SystemExit, match=r"error: model: expected an existing local folder, got './runs/no-such"):
        main(["--model", "oracle", "--model", "./runs/no-such-checkpoint", "--suite", "search"])
