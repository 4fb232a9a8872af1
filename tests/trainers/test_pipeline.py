"""The main job's task selection and reporting (the training itself is covered by test_grpo/test_sft)."""

from __future__ import annotations

import json
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
    learning_verdicts,
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
    assert job.keep(SimpleNamespace(success=False), guessing) and job.keep(SimpleNamespace(success=True), acting)
    assert not job.keep(SimpleNamespace(success=False), acting)


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


@pytest.mark.parametrize(("pairs", "verdict"), [
    # SFT 0.0 / 0.2 / 0.1 (std 0.100); gains +0.2 / +0.1 / +0.3: mean +0.200 > 0.100
    (((0.0, 0.2), (0.2, 0.3), (0.1, 0.4)),
     "+0.200 paired, up in 3 of 3 seeds; beyond the SFT models' spread (0.100)"),
    # SFT 0.0 / 0.4 / 0.2 (std 0.200); gains +0.1 / 0 / +0.2: mean +0.100 < 0.200
    (((0.0, 0.1), (0.4, 0.4), (0.2, 0.4)),
     "+0.100 paired, up in 2 of 3 seeds; NOT beyond the SFT models' spread (0.200)"),
    # a loss in every seed is never beyond
    (((0.3, 0.1), (0.3, 0.2), (0.3, 0.2)),
     "-0.133 paired, up in 0 of 3 seeds; NOT beyond the SFT models' spread (0.000)"),
    (((0.1, 0.5),), "+0.400 paired, up in 1 of 1 seeds; one seed, no spread to compare with"),
])
def test_learning_verdicts_compare_the_paired_gain_with_the_sft_models_spread(pairs, verdict):
    def evaluation(success: float) -> dict[str, float]:
        return {"greedy_success": success, "sampled_success": 0.5}

    runs = [{"sft": {PYTHON_ENV: evaluation(before)}, "grpo": {PYTHON_ENV: evaluation(after)}}
            for before, after in pairs]
    greedy, sampled = learning_verdicts(runs)
    assert greedy == f"PythonSandbox-v0 greedy_success: GRPO - SFT {verdict}"
    assert sampled.startswith("PythonSandbox-v0 sampled_success: GRPO - SFT +0.000 paired, up in 0 of")


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


class FakeClock:
    """Seconds that a test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_board_announces_each_phase_once_with_a_summary_of_the_one_that_ended():
    from trainers.console import SeedBoard, SeedEvent

    clock = FakeClock()
    board = SeedBoard([0, 1], clock)
    lines = []
    for now, event in ((0, SeedEvent(0, "SFT", 0, 4)), (1, SeedEvent(0, "SFT", 1, 4)),
                       (2, SeedEvent(0, "SFT", 4, 4, {"loss": 1.23456})), (3, SeedEvent(1, "SFT", 0, 4)),
                       (5, SeedEvent(0, "evaluating SFT", 0, None)), (9, SeedEvent(0, "GRPO", 0, 2)),
                       (10, SeedEvent(0, "GRPO", 2, 2, {"loss": 0.01, "reward": 0.25})),
                       (12, SeedEvent(0, "evaluating SFT + GRPO", 0, None)), (15, SeedEvent(0, "done", 1, 1))):
        clock.now = now
        lines.append(board.update(event))
    assert [line for line in lines if line is not None] == [
        "[      0s] seed 0: SFT, 4 steps",
        "[      3s] seed 1: SFT, 4 steps",
        "[      5s] seed 0: evaluating SFT (SFT: 4/4 steps, loss 1.235, 5s)",
        "[      9s] seed 0: GRPO, 2 steps",
        "[     12s] seed 0: evaluating SFT + GRPO (GRPO: 2/2 steps, loss 0.01, reward 0.25, 3s)",
        "[     15s] seed 0: done",
    ]
    assert lines.count(None) == 3  # steps within a phase print nothing
    clock.now = 20
    assert board.rows() == [("0", "done", "", "0.01", "0.25", "5s"), ("1", "SFT", "0/4", "", "", "17s")]


def test_display_off_a_terminal_prints_one_line_per_phase_change_and_no_table():
    import io

    from rich.console import Console

    from trainers.console import SeedDisplay, SeedEvent

    stream = io.StringIO()
    with SeedDisplay([3], Console(file=stream), clock=FakeClock()) as display:
        assert display.live is None
        for step in range(5):
            display.update(SeedEvent(3, "SFT", step, 4))
        display.update(SeedEvent(3, "done", 1, 1))
    assert stream.getvalue().splitlines() == ["[      0s] seed 3: SFT, 4 steps",
                                              "[      0s] seed 3: done (SFT: 4/4 steps, 0s)"]


def test_display_on_a_terminal_draws_the_table():
    import io

    from rich.console import Console

    from trainers.console import SeedDisplay, SeedEvent

    stream = io.StringIO()
    with SeedDisplay([0, 1], Console(file=stream, force_terminal=True, width=100), clock=FakeClock()) as display:
        display.update(SeedEvent(1, "GRPO", 3, 12, {"reward": 0.375}))
    drawn = stream.getvalue()
    assert "3/12" in drawn and "0.375" in drawn and "waiting" in drawn
    assert "seed 1: GRPO" not in drawn  # no plain lines on a terminal


def test_trainer_log_file_writes_each_log_dictionary_and_prints_nothing(tmp_path, capsys):
    from trainers.console import TrainerLogFile

    path = tmp_path / "grpo" / "trainer_log.jsonl"
    path.parent.mkdir()
    path.write_text('{"step": 99}\n')  # from an earlier run: started afresh
    callback = TrainerLogFile(path)
    callback.on_train_begin(None, SimpleNamespace(global_step=0), None)
    for step, logs in ((1, {"loss": 0.5, "reward": 0.25}), (2, {"loss": 0.25, "learning_rate": 1e-4})):
        callback.on_log(None, SimpleNamespace(global_step=step), None, logs=logs)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"step": 1, "loss": 0.5, "reward": 0.25}, {"step": 2, "loss": 0.25, "learning_rate": 1e-4}]
    assert capsys.readouterr() == ("", "")


def test_step_reporter_sends_the_start_and_the_shown_metrics_only():
    from trainers.console import StepReporter

    seen = []
    reporter = StepReporter(lambda *event: seen.append(event), "SFT")
    reporter.on_train_begin(None, SimpleNamespace(global_step=0, max_steps=300), None)
    reporter.on_log(None, SimpleNamespace(global_step=10, max_steps=300), None,
                    logs={"loss": 2.5, "grad_norm": 1.0, "learning_rate": 1e-3})
    reporter.on_log(None, SimpleNamespace(global_step=300, max_steps=300), None, logs={"train_runtime": 9.0})
    assert seen == [("SFT", 0, 300), ("SFT", 10, 300, {"loss": 2.5})]


def test_output_to_takes_python_and_child_process_output_off_the_console(tmp_path, capfd):
    import subprocess
    import sys

    from trainers.console import output_to

    path = tmp_path / "seed-0" / "console.log"
    with output_to(path):
        print("{'loss': 1.0}")
        print("a bar", file=sys.stderr)
        subprocess.run(["echo", "from a child"], check=True)
    print("back")
    assert capfd.readouterr().out == "back\n"
    assert path.read_text().splitlines() == ["{'loss': 1.0}", "a bar", "from a child"]


def test_a_seed_run_in_process_reports_to_the_display_and_prints_to_its_log(tmp_path, monkeypatch, capfd):
    import io

    from rich.console import Console

    from trainers import pipeline
    from trainers.console import SeedDisplay

    def fake_run_seed(config, seed, jobs, episodes, report):
        report("SFT", 0, 2)
        print({"loss": 1.5})  # what TRL's PrinterCallback does
        report("SFT", 2, 2, {"loss": 1.5})
        report("done", 1, 1)
        return {"seed": seed}

    monkeypatch.setattr(pipeline, "run_seed", fake_run_seed)
    config = PipelineConfig(seeds=[7], output_dir=str(tmp_path))
    stream = io.StringIO()
    with SeedDisplay([7], Console(file=stream), clock=FakeClock()) as display:
        assert pipeline._run_seed_here(config, 7, {}, [], display) == {"seed": 7}
    assert capfd.readouterr() == ("", "")
    assert (tmp_path / "seed-7" / "console.log").read_text() == "{'loss': 1.5}\n"
    assert stream.getvalue().splitlines() == ["[      0s] seed 7: SFT, 2 steps",
                                              "[      0s] seed 7: done (SFT: 2/2 steps, loss 1.5, 0s)"]


def test_trainer_callbacks_always_log_to_the_file_and_report_only_with_a_reporter(tmp_path):
    from trainers.console import StepReporter, TrainerLogFile
    from trainers.pipeline import _trainer_callbacks

    (log_file,) = _trainer_callbacks(None, "SFT", tmp_path)
    assert isinstance(log_file, TrainerLogFile) and log_file.path == tmp_path / "trainer_log.jsonl"
    reporter, log_file = _trainer_callbacks(lambda *event: None, "GRPO", tmp_path)
    assert isinstance(reporter, StepReporter) and isinstance(log_file, TrainerLogFile)


class _Captured(Exception):
    """Carries the training config a monkeypatched trainer was handed."""

    def __init__(self, config) -> None:
        super().__init__("captured")
        self.config = config


def test_the_main_job_trains_in_float32_even_where_the_cpu_computes_bfloat16(tmp_path, monkeypatch):
    # TRL's default would train in bfloat16 on a CPU with AMX and in float32 elsewhere: two recipes. The tiny model
    # costs float32 nothing (SFT: 68-71 s for 300 steps against 74 s in bfloat16 on an AMX Xeon).
    import trainers.grpo
    import trainers.sft
    from trainers.pipeline import reinforce, warm_start

    def capture(*args, **kwargs):
        raise _Captured(args[3] if len(args) > 3 else args[0])

    monkeypatch.setattr(trainers.sft, "train_sft", capture)
    monkeypatch.setattr(trainers.grpo, "build_trainer", capture)
    with pytest.raises(_Captured) as sft:
        warm_start(None, None, [], PipelineConfig(sft_steps=2), 0, tmp_path)
    with pytest.raises(_Captured) as grpo:
        reinforce(None, None, {}, PipelineConfig(grpo_steps=2), 0, tmp_path)
    assert sft.value.config.bf16 is False and grpo.value.config.bf16 is False


def test_sft_takes_the_configured_batch_size(tmp_path, monkeypatch):
    # batches of 8 left one seed of three without SFT's late drop on the AVX512 model; the default is 16
    import trainers.sft
    from trainers.pipeline import warm_start

    def capture(*args, **kwargs):
        raise _Captured(args[3])

    monkeypatch.setattr(trainers.sft, "train_sft", capture)
    for config, expected in ((PipelineConfig(), 16), (PipelineConfig(sft_batch_size=4), 4)):
        with pytest.raises(_Captured) as sft:
            warm_start(None, None, [], config, 0, tmp_path)
        assert sft.value.config.per_device_train_batch_size == expected


def test_warm_start_logs_trls_dictionaries_to_the_seed_folder_and_reports_each_step(tmp_path):
    import gymnasium as gym

    import agentgym_envs  # noqa: F401
    from agentgym_envs.policies.search_lookup import SearchLookupPolicy
    from trainers.chat import ChatTokens
    from trainers.pipeline import warm_start
    from trainers.pretrain import one_torch_thread
    from trainers.sft import collect_demonstrations
    from trainers.tiny_model import load_or_build_tiny_model

    model, tokenizer = load_or_build_tiny_model()
    tasks = [task for task in load_split("Search", "train") if task.family == "single"][:4]
    env = gym.make(SEARCH_ENV, tasks=tasks, prompt_style="task")
    try:
        episodes = collect_demonstrations(env, SEARCH_ENV, SearchLookupPolicy(k=1), tasks, ChatTokens(tokenizer))
    finally:
        env.close()
    seen = []
    with one_torch_thread():
        warm_start(model, tokenizer, episodes, PipelineConfig(sft_steps=2), 0, tmp_path,
                   lambda *event: seen.append(event))
    assert seen[:3] == [("SFT", 0, 2), ("SFT", 1, 2), ("SFT", 2, 2)]
    logged = [json.loads(line) for line in (tmp_path / "sft" / "trainer_log.jsonl").read_text().splitlines()]
    assert logged[-1]["step"] == 2 and "train_loss" in logged[-1]


def test_board_off_a_terminal_reports_progress_within_a_long_phase_about_every_minute():
    from trainers.console import SeedBoard, SeedEvent

    clock = FakeClock()
    board = SeedBoard([0], clock, progress_every_s=60)
    lines = []
    for now, step in ((0, 0), (30, 1), (61, 2), (90, 3), (125, 4)):
        clock.now = now
        lines.append(board.update(SeedEvent(0, "GRPO", step, 12, {"reward": 0.5} if step == 3 else None)))
    assert lines == ["[      0s] seed 0: GRPO, 12 steps", None, "[     61s] seed 0: GRPO, 2/12 steps, 61s", None,
                     "[    125s] seed 0: GRPO, 4/12 steps, reward 0.5, 125s"]
    clock.now = 130
    assert board.update(SeedEvent(0, "evaluating SFT + GRPO", 0, None)) is not None
    clock.now = 400
    assert board.update(SeedEvent(0, "evaluating SFT + GRPO", 0, None)) is None  # no steps to report


def _episode(infra_error: bool, error: str = ""):
    from agentgym_envs.runner import Episode

    return Episode(env_id=PYTHON_ENV, task_id="t", group=0, seed=None, infra_error=infra_error, error=error)


@pytest.mark.parametrize(("faults", "episodes", "stops"), [
    (0, 4, False),  # nothing went wrong
    (2, 4, False),  # half: still scored enough to report
    (3, 4, True),   # most episodes ended by a fault: no rate
    (0, 0, True),   # nothing played at all
])
def test_a_held_out_evaluation_mostly_ended_by_infrastructure_faults_stops_the_job_naming_the_first(
        faults, episodes, stops):
    from trainers.pipeline import EvaluationError, check_scored

    played = [_episode(index < faults, "reset failed: no Docker daemon answers" if index < faults else "")
              for index in range(episodes)]
    if not stops:
        check_scored(PYTHON_ENV, played)
        return
    with pytest.raises(EvaluationError) as failure:
        check_scored(PYTHON_ENV, played)
    assert f"{faults} of {episodes} episodes" in str(failure.value)
    assert ("no Docker daemon answers" in str(failure.value)) == bool(faults)
    assert "sandbox doctor" in str(failure.value)


def test_a_pretraining_phase_that_misses_its_target_stops_the_main_job_at_once(tmp_path, monkeypatch, capsys):
    import time

    from trainers import pipeline
    from trainers.pretrain import EchoPretraining

    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path / "cache"))
    failing = EchoPretraining(random_target=1.0, random_max_steps=3, batch_size=4, window=2)
    monkeypatch.setattr(PipelineConfig, "pretraining", lambda self: failing)
    started = time.monotonic()
    assert pipeline.main(["--output_dir", str(tmp_path / "run")]) == 1
    assert time.monotonic() - started < 120  # the demonstrations' worker was stopped, not waited for
    error = capsys.readouterr().err
    assert "phase 'random strings' reached copy accuracy" in error and "expected 1" in error
    assert not (tmp_path / "run" / "results.json").exists()


def test_the_monitors_alerts_reach_the_console_as_lines_off_a_terminal_and_above_the_table_on_one():
    import io
    import logging

    from rich.console import Console

    from trainers.console import SeedDisplay, SeedEvent, alerts_to

    for terminal in (False, True):
        stream = io.StringIO()
        with SeedDisplay([0], Console(file=stream, force_terminal=terminal, width=200), clock=FakeClock()) as display:
            display.update(SeedEvent(0, "GRPO", 1, 12))
            with alerts_to(lambda *event, alert=None: display.update(SeedEvent(0, *event, alert=alert))):
                logging.getLogger("trainers.monitoring").warning("rollout alert (%s): %s", "zero_variance_streak",
                                                                 "warm-start it")
            logging.getLogger("trainers.monitoring").warning("after the block: not forwarded")
            assert display.phase(0) == "GRPO"  # an alert is no phase
        shown = stream.getvalue()
        assert "seed 0: rollout alert (zero_variance_streak): warm-start it" in shown
        assert "not forwarded" not in shown


def _worker_that_fails() -> None:
    raise RuntimeError("the demonstrations worker failed")


def test_a_failed_demonstrations_worker_stops_the_pretraining_at_its_next_progress_line():
    import multiprocessing

    from trainers.pipeline import _stopping_if_failed

    lines = []
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        work = pool.apply_async(_worker_that_fails)
        progress = _stopping_if_failed(work, lines.append)
        work.wait(60)
        with pytest.raises(RuntimeError, match="the demonstrations worker failed"):
            progress("echo pretraining, random strings: step 54, copy accuracy 0.070, 60 s")
        succeeding = _stopping_if_failed(pool.apply_async(len, ([1, 2],)), lines.append)
        succeeding("a line while the worker runs or after it succeeded")
    assert lines == ["echo pretraining, random strings: step 54, copy accuracy 0.070, 60 s",
                     "a line while the worker runs or after it succeeded"]
