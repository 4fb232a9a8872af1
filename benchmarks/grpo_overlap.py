"""GRPO step time with and without off-policy overlap, side by side, and what the overlap costs in staleness.

Two GRPO runs per tool latency on Search-v0, from the same warm-started tiny model (the one
:mod:`benchmarks.rollout_throughput` builds and caches, so that episodes really call tools), with the same
tasks, seed and settings:

    ==========  =========================================================================================
    run         how the rollouts of step k are made
    ==========  =========================================================================================
    sync        ``overlap_rollouts: false``: played at the start of step k by the policy being trained
    overlap     ``overlap_rollouts: true``: played in a background thread while step k-1 trains, by a
                snapshot of the policy one optimizer step old (step 0's are played at its start); TRL's
                importance-sampling correction (``token_truncate``, cap 3) reweights the stale tokens
    ==========  =========================================================================================

A 2-step run, untimed, warms the process up first (the first run paid several seconds per step for it).
Each run reports the wall time of every optimizer step (TRL's step, from the start of its rollouts to
the end of its optimizer step: a callback's ``on_step_begin`` to ``on_step_end``), their median over the
steps after the first (step 0 has no overlap and pays one-off costs), the mean staleness, and the
monitor's sampler-vs-trainer statistics (:func:`trainers.monitoring.mismatch_statistics`): the p99 of the
per-token importance ratio (the largest over the steps) and its effective sample size (the mean; 1 = on
policy), with TRL's own ``sampling/importance_sampling_ratio/max``. Per tool latency: the ratio of the sync
run's median step time to the overlap run's (above 1: the overlap is faster). Tool latency
(``--tool-latency 0,50``, ms per executed tool call) is :class:`benchmarks.rollout_throughput.ToolLatency`.

What to expect: the overlap hides the rollouts behind the update only where they do not compete for the
same compute. On a CPU, generation and training share the cores, and the asynchronous engine already runs
tools while it generates, so the step time changes little (on a 2-core machine: 0.86x to 1.19x over
repeated runs, within the noise of a shared machine); it is meant for a generator with its own device or
for rollouts dominated by waiting (slow tools, sandboxes). The staleness it costs shows in the IS ratio's
p99 and ESS either way.

Example:
    python -m benchmarks.grpo_overlap                          # 12 steps of 4 x 4 episodes; 0 and 50 ms tools
    python -m benchmarks.grpo_overlap --steps 3 --tool-latency 50 --json overlap.json
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from transformers import TrainerCallback

from benchmarks.rollout_throughput import (
    ENV_ID,
    ToolLatency,
    ToolLatencyModel,
    Workload,
    load_warm_model,
    parse_latencies,
)
from benchmarks.rollout_throughput import Settings as WarmModelSettings

RUNS = ("sync", "overlap")


@dataclass(frozen=True)
class Settings:
    """What both runs share.

    Attributes:
        steps: GRPO optimizer steps per run.
        groups: Tasks (groups) per step.
        group: Episodes per task (``num_generations``).
        max_turns: Most model turns per episode.
        max_tokens_per_turn: Most tokens generated in one turn.
        learning_rate: Constant learning rate (large enough that the policy moves between steps).
        seed: Seed of the runs (tasks, sampling, latency draws) and of the warm model.
    """

    steps: int = 12
    groups: int = 4
    group: int = 4
    max_turns: int = 3
    max_tokens_per_turn: int = 48
    learning_rate: float = 3e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "groups", "group", "max_turns", "max_tokens_per_turn"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.group < 2:
            raise ValueError(f"group: expected >= 2 (GRPO compares the episodes of a group), got {self.group}")


@dataclass
class Run:
    """One GRPO run's measurements.

    Attributes:
        name: ``sync`` or ``overlap``.
        tool_latency: Its tool latency label (ms, or ``lognormal:MS``).
        step_s: Wall time of each optimizer step, in order.
        median_step_s: Median of ``step_s`` after the first step.
        train_s: TRL's whole ``train()`` call.
        steps: Optimizer steps completed.
        changed_parameters: Share of the policy's parameter tensors that changed over the run.
        staleness_mean: Mean ``rollout/staleness`` (0 for the sync run).
        is_ratio_p99: Largest per-step p99 of the per-token importance ratio trainer/sampler (monitor).
        ess: Mean per-step effective sample size of those ratios (monitor; 1 = on policy).
        trl_is_ratio_max: Largest ``sampling/importance_sampling_ratio/max`` TRL logged (None: TRL's correction
            was off).
        reward_mean: Mean raw reward of the run's episodes.
    """

    name: str
    tool_latency: str
    step_s: list[float]
    median_step_s: float
    train_s: float
    steps: int
    changed_parameters: float
    staleness_mean: float
    is_ratio_p99: float
    ess: float
    trl_is_ratio_max: float | None
    reward_mean: float


@dataclass
class Report:
    """Everything measured, and the settings and machine it was measured with."""

    settings: dict[str, Any]
    machine: dict[str, Any]
    runs: list[Run]
    speedups: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step (``on_step_begin`` to ``on_step_end``)."""

    def __init__(self) -> None:
        self.step_s: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        """Start the clock."""
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        """Stop it."""
        self.step_s.append(time.perf_counter() - self._start)


def grpo_config(settings: Settings, output_dir: str, *, overlap: bool):
    """The run's :class:`~trainers.grpo.AgentGRPOConfig` (CPU, float32, no reporting, a log every step)."""
    from trainers.grpo import AgentGRPOConfig

    return AgentGRPOConfig(
        output_dir=output_dir, envs=[ENV_ID], per_device_train_batch_size=settings.groups * settings.group,
        num_generations=settings.group, max_steps=settings.steps, learning_rate=settings.learning_rate,
        lr_scheduler_type="constant", loss_type="dapo", beta=0.0, max_turns=settings.max_turns,
        max_tokens_per_turn=settings.max_tokens_per_turn, max_context_tokens=1024, use_cpu=True, bf16=False,
        report_to=[], logging_steps=1, save_strategy="no", disable_tqdm=True, seed=settings.seed,
        overlap_rollouts=overlap, vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=3.0)


def shaped_reward():
    """Exact match, plus F1 at 0.5 and format and tool use at 0.1: the weak warm model rarely answers exactly, and
    without partial credit its groups would carry no GRPO signal (the policy would not move, and the overlap's
    staleness would not show)."""
    from agentgym_envs.search.env import REQUIRED_TOOLS
    from rewards import CompositeReward, Term, exact_match_reward, f1_reward, format_reward, make_tool_shaping_reward

    return CompositeReward([
        Term("outcome", exact_match_reward, weight=1.0), Term("f1", f1_reward, weight=0.5),
        Term("format", format_reward, weight=0.1),
        Term("tool_use", make_tool_shaping_reward(required_tools=REQUIRED_TOOLS["single"]), weight=0.1)])


def env_factory(workload: Workload, latency: ToolLatencyModel, seed: int) -> Callable[[str], Any]:
    """Search-v0 envs over the workload's tasks (question-only prompts, :func:`shaped_reward`, the shared index),
    each slowed by its own seeded latency draws."""
    import gymnasium as gym

    counter = itertools.count()

    def make(env_id: str) -> gym.Env:
        env = gym.make(env_id, tasks=list(workload.tasks), prompt_style="task", retriever=workload.retriever,
                       reward=shaped_reward())
        return ToolLatency(env, latency.sampler(f"{seed}:{next(counter)}")) if latency.median_ms > 0 else env

    return make


def run_grpo(name: str, model, tokenizer, workload: Workload, settings: Settings,
             latency: ToolLatencyModel) -> Run:
    """Train a copy of ``model`` for ``settings.steps`` GRPO steps, with (``overlap``) or without overlap."""
    import torch

    from trainers.grpo import build_trainer

    policy = copy.deepcopy(model)
    before = {key: value.clone() for key, value in policy.state_dict().items()}
    torch.manual_seed(settings.seed)
    with tempfile.TemporaryDirectory() as output_dir:
        config = grpo_config(settings, output_dir, overlap=name == "overlap")
        trainer = build_trainer(config, policy, tokenizer, tasks={ENV_ID: list(workload.tasks)},
                                env_factory=env_factory(workload, latency, settings.seed))
        timer = StepTimer()
        trainer.add_callback(timer)
        start = time.perf_counter()
        try:
            trainer.train()
        finally:
            trainer.rollouts.close()
        train_s = time.perf_counter() - start
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    changed = sum(not torch.equal(value, before[key]) for key, value in policy.state_dict().items())
    return Run(name=name, tool_latency=latency.label, step_s=timer.step_s,
               median_step_s=statistics.median(timer.step_s[1:] or timer.step_s), train_s=train_s,
               steps=trainer.state.global_step, changed_parameters=changed / len(before),
               staleness_mean=_mean(logs, "rollout/staleness", default=0.0),
               is_ratio_p99=max(entry["mismatch/ratio_p99"] for entry in logs), ess=_mean(logs, "mismatch/ess"),
               trl_is_ratio_max=max((entry["sampling/importance_sampling_ratio/max"] for entry in logs
                                     if "sampling/importance_sampling_ratio/max" in entry), default=None),
               reward_mean=_mean(logs, f"reward/{ENV_ID.split('/')[-1]}/mean"))


def _mean(logs: Sequence[dict[str, Any]], key: str, default: float | None = None) -> float:
    values = [entry[key] for entry in logs if key in entry]
    if not values and default is None:
        raise KeyError(f"expected {key!r} in the training logs, found it in none")
    return statistics.fmean(values) if values else default


def train_tasks(warm: WarmModelSettings) -> list:
    """The generated single-hop questions the warm start was trained on: it answers some of them, so groups have
    reward variance and the policy moves (on the Search train split it answered none, and GRPO had no signal)."""
    from trainers.pipeline import PipelineConfig, env_jobs

    return list(env_jobs(PipelineConfig(envs=["search"], search_train_tasks=warm.train_questions))[ENV_ID].train)


def run_benchmark(settings: Settings, latencies: Sequence[ToolLatencyModel] = (ToolLatencyModel(0.0),),
                  on_run: Callable[[Run], None] | None = None) -> Report:
    """Both runs per latency on the warm model; returns the report."""
    import torch

    from agentgym_envs.search import BM25Retriever, resolve_corpus
    from agentgym_envs.search.env import DEFAULT_CORPUS

    start = time.perf_counter()
    warm = WarmModelSettings(seed=settings.seed)
    model, tokenizer = load_warm_model(warm)
    workload = Workload(train_tasks(warm), BM25Retriever(resolve_corpus(DEFAULT_CORPUS)))
    run_grpo("sync", model, tokenizer, workload, dataclasses.replace(settings, steps=2), latencies[0])  # warm-up
    runs = []
    for latency in latencies:
        for name in RUNS:
            runs.append(run_grpo(name, model, tokenizer, workload, settings, latency))
            if on_run is not None:
                on_run(runs[-1])
    machine = {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
               "torch": torch.__version__}
    return Report(settings=asdict(settings), machine=machine, runs=runs, speedups=speedups(runs),
                  wall_s=time.perf_counter() - start)


def speedups(runs: Sequence[Run]) -> dict[str, float]:
    """Per tool latency, the sync run's median step time over the overlap run's."""
    medians = {(run.tool_latency, run.name): run.median_step_s for run in runs}
    return {latency: medians[latency, "sync"] / medians[latency, "overlap"]
            for latency, name in medians if name == "sync" and (latency, "overlap") in medians}


def render(report: Report, console: Console) -> None:
    """Print the runs and the speed-ups."""
    settings = report.settings
    table = Table(title=f"GRPO on {ENV_ID}: {settings['steps']} steps of {settings['groups']} x {settings['group']} "
                        f"episodes, <= {settings['max_turns']} turns of <= {settings['max_tokens_per_turn']} tokens "
                        f"({report.machine['cpus']} CPUs, {report.machine['torch_threads']} torch threads)")
    for column in ("tool ms", "run", "step s (each)", "median s", "train s", "staleness", "IS p99", "ESS",
                   "TRL IS max", "changed", "reward"):
        table.add_column(column, justify="left" if column in ("tool ms", "run", "step s (each)") else "right")
    for run in report.runs:
        table.add_row(run.tool_latency, run.name, " ".join(f"{value:.2f}" for value in run.step_s),
                      f"{run.median_step_s:.2f}", f"{run.train_s:.1f}", f"{run.staleness_mean:.2f}",
                      f"{run.is_ratio_p99:.3f}", f"{run.ess:.4f}",
                      "-" if run.trl_is_ratio_max is None else f"{run.trl_is_ratio_max:.3f}",
                      f"{run.changed_parameters:.0%}", f"{run.reward_mean:.3f}")
    console.print(table)
    for latency, ratio in report.speedups.items():
        console.print(f"tool latency {latency} ms: sync / overlap median step time = {ratio:.2f}x")
    console.print(f"whole run {report.wall_s:.0f} s")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grpo_overlap", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=defaults.steps, help="GRPO optimizer steps per run")
    parser.add_argument("--groups", type=int, default=defaults.groups, help="tasks (groups) per step")
    parser.add_argument("--group", type=int, default=defaults.group, help="episodes per task")
    parser.add_argument("--max-turns", type=int, default=defaults.max_turns, help="most model turns per episode")
    parser.add_argument("--max-tokens-per-turn", type=int, default=defaults.max_tokens_per_turn,
                        help="most tokens generated per turn")
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate, help="constant learning rate")
    parser.add_argument("--tool-latency", type=parse_latencies, default=parse_latencies("0,50"), metavar="L[,L...]",
                        help="latency added per tool call, one pair of runs per value: MS or lognormal:MS")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="run and warm-model seed")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    warnings.filterwarnings("ignore", message=".*while copying the environment spec")  # the task list in its kwargs
    args = build_parser().parse_args(argv)
    try:
        settings = Settings(steps=args.steps, groups=args.groups, group=args.group, max_turns=args.max_turns,
                            max_tokens_per_turn=args.max_tokens_per_turn, learning_rate=args.learning_rate,
                            seed=args.seed)
    except ValueError as exc:
        raise SystemExit(f"--{str(exc).replace('_', '-')}") from exc
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    report = run_benchmark(settings, args.tool_latency, on_run=lambda run: print(
        f"[{time.strftime('%H:%M:%S')}] {run.tool_latency} ms {run.name}: median step {run.median_step_s:.2f} s",
        file=sys.stderr, flush=True))
    render(report, Console(width=None if sys.stdout.isatty() else 200))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
