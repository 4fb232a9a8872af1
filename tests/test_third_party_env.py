"""A third-party environment, installed from a folder, gets the project's tooling with no edit here.

``tests/plugins/calculator_env`` is a package of its own (the example of ``docs/adding-an-environment.md``): an env,
its oracle, its probes, its bundled splits and its spec, registered through the ``agentrl.envs`` entry point. It
is installed with pip into a folder put on ``PYTHONPATH``; every command then runs in a fresh process, as a user
would run it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tests" / "plugins" / "calculator_env"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment variables of a process that sees the package installed (by pip, from a copy of its folder)."""
    root = tmp_path_factory.mktemp("calculator")
    source = shutil.copytree(PACKAGE, root / "source")  # the build leaves its files next to the sources
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(root / "site"), str(source)], check=True, capture_output=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "site"), str(REPO)])}


def run(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` in the repository, with the package installed; fails the test with its output on error."""
    done = subprocess.run([sys.executable, *args], cwd=REPO, env=environment, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_the_installed_env_is_registered_and_passes_gymnasiums_checker(installed: dict[str, str]):
    script = ("import gymnasium as gym, agentgym_envs\n"
              "from gymnasium.utils.env_checker import check_env\n"
              "from agentgym_envs.registration import env_spec\n"
              "env = gym.make('calculator/Calculator-v0', split='test')\n"
              "check_env(env.unwrapped, skip_render_check=True)\n"
              "print(env_spec('calculator').id, len(env.unwrapped.tasks), env.unwrapped.tasks[0].id)\n")
    assert run(installed, "-c", script).stdout.split() == ["calculator/Calculator-v0", "10", "calculator/test/0000"]


def test_evaluate_plays_its_oracle_and_random_policy_from_its_spec(installed: dict[str, str], tmp_path: Path):
    run(installed, "-m", "benchmarks.evaluate", "--model", "oracle", "--model", "random", "--suite", "calculator",
        "--limit", "5", "--samples", "2", "--out", str(tmp_path))
    report = json.loads((tmp_path / "report.json").read_text())
    results = {result["model"]: result for result in report["results"]}
    assert {result["suite"] for result in results.values()} == {"calculator"}
    assert results["oracle"]["pass_at"]["1"] == 1.0 and results["oracle"]["tasks"] == 5
    assert results["random"]["pass_at"]["1"] < 1.0 and results["random"]["episodes"] == 10
    assert "calculator/Calculator-v0" in report["fingerprint"]["envs"]


def test_stress_loads_it_with_its_profile_and_finds_it_clean(installed: dict[str, str], tmp_path: Path):
    out = tmp_path / "stress.json"
    run(installed, "-m", "benchmarks.stress", "--env", "calculator", "--concurrency", "1,2", "--duration", "2",
        "--calls-per-episode", "2", "--json", str(out), "--check")
    report = json.loads(out.read_text())
    assert report["env_id"] == "calculator/Calculator-v0" and report["clean"]
    for level in report["levels"]:
        assert level["episodes"] >= level["concurrency"] and level["correct"] == level["episodes"]
        assert level["tool_calls"] == 3 * level["episodes"]  # two load calls, then the oracle's own


def test_stress_is_not_clean_when_the_oracle_runs_out_of_turns(installed: dict[str, str], tmp_path: Path):
    out = tmp_path / "stress.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.stress", "--env", "calculator", "--concurrency", "1",
                           "--duration", "1", "--calls-per-episode", "8", "--json", str(out), "--check"],
                          cwd=REPO, env=installed, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "ended unsolved outside any injected fault" in done.stdout
    (level,) = json.loads(out.read_text())["levels"]
    assert level["correct"] == 0 and level["unsolved"] == level["episodes"] > 0


def test_probes_play_its_own_probes_against_its_verifier(installed: dict[str, str], tmp_path: Path):
    out = tmp_path / "probes.json"
    run(installed, "-m", "benchmarks.probes", "--envs", "calculator", "--limit", "2", "--json", str(out))
    report = json.loads(out.read_text())
    records = report["episodes"]
    by_probe: dict[str, list[dict]] = {}
    for record in records:
        by_probe.setdefault(record["probe"], []).append(record)
    assert set(by_probe) == {"oracle", "several-numbers", "question-as-answer", "two-answer-blocks"}
    assert all(r["accepted"] and r["exercised"] for r in by_probe["oracle"]) and len(by_probe["oracle"]) == 2
    assert not any(r["accepted"] for name, rs in by_probe.items() if name != "oracle" for r in rs)
    (verifier,) = report["verifiers"]
    assert verifier["verifier"] == "calculator/exact-match" and verifier["fp_rate"] == 0.0


def test_the_docs_show_the_packages_files_as_they_are():
    doc = (REPO / "docs" / "adding-an-environment.md").read_text()
    shown = re.findall(r"<!-- file: (\S+) -->\n```\w+\n(.*?)```\n", doc, flags=re.DOTALL)
    assert {name for name, _ in shown} == {"calculator_env/env.py", "calculator_env/policies.py",
                                           "calculator_env/probes.py", "calculator_env/spec.py",
                                           "calculator_env/splits.py", "pyproject.toml"}
    for name, text in shown:
        assert text == (PACKAGE / name).read_text(), f"docs/adding-an-environment.md shows an old {name}"
