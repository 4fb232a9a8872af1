"""The main job's task selection and reporting (the training itself is covered by test_grpo/test_sft)."""

from __future__ import annotations

import pytest

from tasks import load_split
from trainers.pipeline import PYTHON_ENV, SEARCH_ENV, PipelineConfig, env_jobs, reward_curves, summary_rows


def test_python_job_trains_on_generated_tasks_only_and_holds_out_the_bundled_split():
    config = PipelineConfig(python_train_tasks=40, python_templates=["modular_power", "digit_sum_power"])
    job = env_jobs(config)[PYTHON_ENV]
    bundled = {task.prompt for split in ("dev", "test") for task in load_split("PythonSandbox", split)}
    assert len(job.train) == 40
    assert len({task.id for task in job.train}) == 40
    assert not {task.prompt for task in job.train} & bundled
    assert {task.metadata["template"] for task in job.train} == {"modular_power", "digit_sum_power"}
    expected = [task for task in load_split("PythonSandbox", "test")
                if task.family == "math" and task.metadata["template"] in config.python_templates]
    assert [task.id for task in job.held_out] == [task.id for task in expected] and expected


def test_search_job_excludes_dev_and_test_questions():
    job = env_jobs(PipelineConfig(envs=["search"], search_train_tasks=100))[SEARCH_ENV]
    bundled = {task.metadata["query"] for split in ("dev", "test") for task in load_split("Search", split)}
    assert len(job.train) == 100 and not {task.metadata["query"] for task in job.train} & bundled
    assert job.held_out and all(task.family == "single" for task in job.held_out)


def test_unknown_env_is_a_clear_error():
    with pytest.raises(ValueError, match="expected one or more of"):
        env_jobs(PipelineConfig(envs=["webshop"]))


def test_reward_curves_and_paired_summary():
    history = [{"step": 1, "reward/PythonSandbox-v0/mean": 0.25}, {"step": 1, "loss": 0.1},
               {"step": 2, "reward/PythonSandbox-v0/mean": 0.5}]
    assert reward_curves(history, [PYTHON_ENV]) == {PYTHON_ENV: [(1, 0.25), (2, 0.5)]}
    runs = [{"sft": {PYTHON_ENV: {"greedy_success": b, "sampled_success": b, "turns": 2.0, "tool_calls": 1.0}},
             "grpo": {PYTHON_ENV: {"greedy_success": a, "sampled_success": a, "turns": 2.0, "tool_calls": 1.0}}}
            for b, a in ((0.1, 0.3), (0.2, 0.3))]
    rows = {(env, metric): rest for env, metric, *rest in summary_rows(runs)}
    assert rows[("PythonSandbox-v0", "greedy_success")] == ["0.150 ± 0.071", "0.300 ± 0.000", "+0.150 ± 0.071"]
