"""The main job's task selection and reporting (the training itself is covered by test_grpo/test_sft)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tasks import load_split
from trainers.pipeline import (
    KEEP_FREED_MEMORY,
    PYTHON_ENV,
    SEARCH_ENV,
    PipelineConfig,
    env_jobs,
    reward_curves,
    summary_rows,
    worker_environment,
)


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


def test_python_job_demonstrator_guesses_at_the_configured_rate_and_keeps_guesses_and_solved_episodes():
    job = env_jobs(PipelineConfig(python_train_tasks=200, python_guess_rate=0.25))[PYTHON_ENV]
    policy = job.demonstrator()
    guesses = 0
    for task in job.train:
        policy.begin(task, task.prompt, {})
        guesses += policy.guessed
    assert 0.15 < guesses / len(job.train) < 0.35
    guessing, acting = SimpleNamespace(guessed=True), SimpleNamespace(guessed=False)
    assert job.keep(SimpleNamespace(reward=0.0), guessing) and job.keep(SimpleNamespace(reward=1.0), acting)
    assert not job.keep(SimpleNamespace(reward=0.0), acting)


def test_search_job_excludes_dev_and_test_questions():
    job = env_jobs(PipelineConfig(envs=["search"], search_train_tasks=100))[SEARCH_ENV]
    bundled = {task.metadata["query"] for split in ("dev", "test") for task in load_split("Search", split)}
    assert len(job.train) == 100 and not {task.metadata["query"] for task in job.train} & bundled
    assert job.held_out and all(task.family == "single" for task in job.held_out)


def test_unknown_env_is_a_clear_error():
    with pytest.raises(ValueError, match="expected one or more of"):
        env_jobs(PipelineConfig(envs=["webshop"]))


def test_seed_workers_one_per_seed_at_most_and_never_below_one():
    assert PipelineConfig(seeds=[0, 1, 2], seed_workers=1).workers() == 1
    assert PipelineConfig(seeds=[0, 1, 2], seed_workers=8).workers() == 3
    assert PipelineConfig(seeds=[4], seed_workers=0).workers() == 1


def test_seed_workers_default_to_two_per_core(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert PipelineConfig(seeds=[0, 1, 2]).workers() == 3
    assert PipelineConfig(seeds=list(range(10))).workers() == 4
    with pytest.raises(ValueError, match="seed_workers: expected >= 0"):
        PipelineConfig(seed_workers=-1).workers()


def test_seed_workers_keep_freed_memory_unless_glibc_is_already_tuned():
    assert worker_environment({}) == {"GLIBC_TUNABLES": KEEP_FREED_MEMORY}
    assert worker_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}) == {}


def test_a_spawned_process_starts_with_the_tunable_in_effect():
    """glibc reads the settings when a process starts: in a child started with them a freed 256 MB block stays
    in the process, so allocating it again costs (almost) no page faults."""
    import subprocess
    import sys

    probe = ("import resource, numpy as np\n"
             "a = np.ones(1 << 25); del a\n"
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
             "for _ in range(5):\n    a = np.ones(1 << 25); del a\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)")
    faults = {}
    for label, extra in (("default", {}), ("tuned", worker_environment({}))):
        env = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"} | extra
        faults[label] = int(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                           check=True).stdout)
    assert faults["tuned"] * 10 < faults["default"]


def test_step_callbacks_forward_each_optimizer_step_and_are_absent_without_a_reporter():
    from types import SimpleNamespace

    from trainers.pipeline import _step_callbacks

    assert _step_callbacks(None, "SFT") == []  # no reporter: TRL's own progress bar stays on
    seen = []
    (callback,) = _step_callbacks(lambda *event: seen.append(event), "GRPO")
    callback.on_step_end(None, SimpleNamespace(global_step=3, max_steps=8), None)
    assert seen == [("GRPO", 3, 8)]


def test_reward_curves_and_paired_summary():
    history = [{"step": 1, "reward/PythonSandbox-v0/mean": 0.25}, {"step": 1, "loss": 0.1},
               {"step": 2, "reward/PythonSandbox-v0/mean": 0.5}]
    assert reward_curves(history, [PYTHON_ENV]) == {PYTHON_ENV: [(1, 0.25), (2, 0.5)]}
    def evaluation(success: float) -> dict[str, float]:
        return {"greedy_success": success, "sampled_success": success, "answer_in_tool_output": 0.5,
                "turns": 2.0, "tool_calls": 1.0}

    runs = [{"sft": {PYTHON_ENV: evaluation(before)}, "grpo": {PYTHON_ENV: evaluation(after)}}
            for before, after in ((0.1, 0.3), (0.2, 0.3))]
    rows = {(env, metric): rest for env, metric, *rest in summary_rows(runs)}
    assert rows[("PythonSandbox-v0", "greedy_success")] == ["0.150 ± 0.071", "0.300 ± 0.000", "+0.150 ± 0.071"]


def test_answer_in_tool_output_looks_at_env_tokens_only_and_whole_numbers():
    from tasks import Task
    from trainers.pipeline import answer_in_tool_output
    from trainers.rollout import Episode
    from trainers.tiny_model import load_or_build_tiny_model

    _, tokenizer = load_or_build_tiny_model()
    task = Task(id="t", env="PythonSandbox", family="math", prompt="?", answer="289")

    def episode(*parts: tuple[str, bool]) -> Episode:
        result = Episode(env_id=PYTHON_ENV, task_id="t", group=0, prompt_ids=[])
        for text, generated in parts:
            result.append(tokenizer.encode(text, add_special_tokens=False), generated=generated)
        return result

    call, answer = ('<tool_call>{"name": "python"}</tool_call>', True), ("<answer>289</answer>", True)
    assert answer_in_tool_output(episode(call, ("[python result (ok)]\n289\n", False), answer), tokenizer, task)
    assert answer_in_tool_output(episode(call, ("it is 289.", False)), tokenizer, task)
    assert not answer_in_tool_output(episode(call, ("[python result (ok)]\n2890\n", False), answer), tokenizer, task)
    assert not answer_in_tool_output(episode(call, ("[python result (ok)]\n289.5\n", False)), tokenizer, task)
    assert not answer_in_tool_output(episode(("print(289)", True), ("[python result (ok)]\n1\n", False), answer),
                                     tokenizer, task)
