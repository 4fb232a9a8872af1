"""GRPO overlap benchmark: a tiny run of both modes through the command line, the speed-up ratio, settings checks."""

from __future__ import annotations

import json

import pytest

from benchmarks.grpo_overlap import Run, Settings, main, speedups

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore:.*while copying the environment spec")  # gym.make with a task list in kwargs
def test_both_runs_train_and_the_report_holds_their_step_times_staleness_and_importance_ratios(tmp_path):
    # Builds and caches the warm-started model the first time (minutes; shared with benchmarks.rollout_throughput),
    # then about 40 s.
    path = tmp_path / "overlap.json"
    main(["--steps", "2", "--groups", "2", "--group", "3", "--tool-latency", "0", "--json", str(path)])
    report = json.loads(path.read_text())
    assert report["settings"]["steps"] == 2 and report["machine"]["cpus"] >= 1
    runs = {run["name"]: run for run in report["runs"]}
    assert [(run["tool_latency"], run["name"]) for run in report["runs"]] == [("0", "sync"), ("0", "overlap")]
    for run in runs.values():
        assert run["steps"] == 2 and len(run["step_s"]) == 2 and min(run["step_s"]) > 0, run
        assert run["changed_parameters"] > 0, run  # it trained
        assert run["median_step_s"] == run["step_s"][1] and run["train_s"] >= sum(run["step_s"])
        assert 0 < run["ess"] <= 1 and run["is_ratio_p99"] > 0
    assert runs["sync"]["staleness_mean"] == 0 and runs["sync"]["trl_is_ratio_max"] is None  # TRL's IS off
    assert runs["overlap"]["staleness_mean"] == 0.5  # step 0 on policy, step 1 one step stale
    assert runs["overlap"]["trl_is_ratio_max"] is not None
    assert report["speedups"]["0"] == pytest.approx(runs["sync"]["median_step_s"] / runs["overlap"]["median_step_s"])


def run(name: str, latency: str, median_s: float) -> Run:
    return Run(name=name, tool_latency=latency, step_s=[median_s], median_step_s=median_s, train_s=median_s, steps=1,
               changed_parameters=1.0, staleness_mean=0.0, is_ratio_p99=1.0, ess=1.0, trl_is_ratio_max=None,
               reward_mean=0.0)


def test_speedup_is_sync_over_overlap_median_step_time_per_latency():
    runs = [run("sync", "0", 3.0), run("overlap", "0", 2.0), run("sync", "50", 4.0), run("overlap", "50", 1.0),
            run("sync", "lognormal:50", 1.0)]  # no overlap run at this latency: no ratio
    assert speedups(runs) == {"0": 1.5, "50": 4.0}


@pytest.mark.parametrize(("overrides", "message"), [
    ({"steps": 0}, "steps: expected >= 1"),
    ({"group": 1}, "group: expected >= 2"),
])
def test_settings_reject_sizes_that_cannot_run(overrides, message):
    with pytest.raises(ValueError, match=message):
        Settings(**overrides)
