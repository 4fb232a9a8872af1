"""The main job: tiny model, demonstrations, SFT warm-start, GRPO, held-out evaluation, before/after table.

On a CPU-only machine with no model hub, for each seed:

1. build (or reuse) the tiny model and its locally trained tokenizer, pretrained to copy text
   (:mod:`trainers.pretrain`; built once, shared by the seeds);
2. play a demonstrator in the real Search-v0 environment on generated training questions (none of them
   in the bundled dev or test split) and keep the solved, grounded episodes;
3. SFT warm-start on them (TRL ``SFTTrainer``, loss on agent tokens only);
4. evaluate on the held-out test split;
5. GRPO from the warm-started model (TRL ``GRPOTrainer`` with the multi-turn ``rollout_func``);
6. evaluate again.

It prints a before/after table (mean and spread over seeds), writes ``results.json`` and a plot of
reward over GRPO steps to ``output_dir``.

Example:
    python -m trainers.pipeline                      # the embedded defaults
    python -m trainers.pipeline --seeds 0 --grpo_steps 20 --output_dir /tmp/quick
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ENV_ID = "agentrl/Search-v0"


@dataclass
class PipelineConfig:
    """Settings of the main job (every field has a default: the embedded CPU recipe)."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "One full run per seed."})
    output_dir: str = field(default="runs/main", metadata={"help": "Where results, logs and the plot go."})
    families: list[str] = field(default_factory=lambda: ["single"], metadata={
        "help": "Search question families trained and evaluated on (single, bridge, comparison)."})
    train_questions: int = field(default=2000, metadata={
        "help": "Generated training questions (the bundled dev and test questions are excluded)."})
    eval_split: str = field(default="test", metadata={"help": "Held-out bundled split to evaluate on."})
    eval_samples: int = field(default=4, metadata={"help": "Sampled episodes per held-out task (plus one greedy)."})
    sft_steps: int = field(default=100, metadata={"help": "SFT optimizer steps."})
    sft_learning_rate: float = field(default=2e-3, metadata={"help": "SFT learning rate."})
    grpo_steps: int = field(default=40, metadata={"help": "GRPO optimizer steps."})
    grpo_learning_rate: float = field(default=3e-4, metadata={"help": "GRPO learning rate."})
    group_size: int = field(default=8, metadata={"help": "Episodes per task in a GRPO group."})
    groups_per_step: int = field(default=4, metadata={"help": "Tasks per GRPO step."})
    max_tokens_per_turn: int = field(default=48, metadata={"help": "Most tokens generated in one turn."})
    max_turns: int = field(default=3, metadata={"help": "Most model turns per episode."})


@dataclass
class Evaluation:
    """Held-out results of one model: greedy success, sampled success, mean turns, tool calls per episode."""

    greedy_success: float
    sampled_success: float
    turns: float
    searches: float


def training_tasks(config: PipelineConfig) -> list:
    """Generated questions about the bundled world, excluding every dev and test question."""
    from tasks import load_split
    from tasks.search import load_world

    held_out = {task.metadata["query"] for split in ("dev", "test") for task in load_split("Search", split)}
    world = load_world()
    return world.questions(config.train_questions, seed=12345, families=tuple(config.families),
                           hops=1 if config.families == ["single"] else None, exclude=held_out)


def held_out_tasks(config: PipelineConfig) -> list:
    """The bundled split's questions of the configured families."""
    from tasks import load_split

    return [task for task in load_split("Search", config.eval_split) if task.family in config.families]


def make_env(tasks: Sequence[Any]):
    """Search-v0 over ``tasks`` with the question alone as the prompt (the tiny model needs no instructions)."""
    import gymnasium as gym

    import agentgym_envs  # noqa: F401

    return gym.make(ENV_ID, tasks=list(tasks), prompt_style="task")


def demonstrations(tokenizer, tasks: Sequence[Any]) -> list:
    """Solved, grounded episodes of the lookup demonstrator (search with the question, answer from the results)."""
    from agentgym_envs.policies.search_lookup import SearchLookupPolicy
    from trainers.chat import ChatTokens
    from trainers.sft import collect_demonstrations

    policy = SearchLookupPolicy(k=1)
    env = make_env(tasks)
    try:
        return collect_demonstrations(env, ENV_ID, policy, tasks, ChatTokens(tokenizer),
                                      keep=lambda result: result.reward >= 1.0 and policy.grounded, progress=True)
    finally:
        env.close()


def warm_start(model, tokenizer, episodes: Sequence[Any], config: PipelineConfig, seed: int, output: Path) -> None:
    """SFT on the demonstrations (TRL ``SFTTrainer``)."""
    from trl import SFTConfig

    from trainers.sft import train_sft

    args = SFTConfig(output_dir=str(output / "sft"), max_steps=config.sft_steps, per_device_train_batch_size=8,
                     learning_rate=config.sft_learning_rate, lr_scheduler_type="cosine", warmup_steps=10,
                     logging_steps=10, report_to=[], save_strategy="no", use_cpu=True, seed=seed, max_length=2048,
                     disable_tqdm=False)
    train_sft(model, tokenizer, episodes, args)


def evaluate(model, tokenizer, tasks: Sequence[Any], config: PipelineConfig, seed: int) -> Evaluation:
    """Greedy and sampled success on held-out tasks, through the rollout engine and the real env."""
    import torch

    from trainers.generation import TransformersGenerator
    from trainers.rollout import EnvPool, RolloutConfig, RolloutEngine, group_requests

    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    pool = EnvPool(lambda env_id: make_env(tasks))
    try:
        results = {}
        for label, temperature, samples in (("greedy", 0.0, 1), ("sampled", 1.0, config.eval_samples)):
            torch.manual_seed(seed)
            engine = RolloutEngine(generator, tokenizer, pool, RolloutConfig(
                max_turns=config.max_turns, max_tokens_per_turn=config.max_tokens_per_turn, temperature=temperature))
            results[label] = engine.run(group_requests([(ENV_ID, task) for task in tasks], samples, seed))
    finally:
        pool.close()
    sampled = results["sampled"]
    return Evaluation(
        greedy_success=float(np.mean([e.reward for e in results["greedy"]])),
        sampled_success=float(np.mean([e.reward for e in sampled])),
        turns=float(np.mean([len(e.turns) for e in sampled])),
        searches=float(np.mean([sum(c["name"] == "search" for c in e.tool_calls) for e in sampled])))


def reinforce(model, tokenizer, tasks: Sequence[Any], config: PipelineConfig, seed: int, output: Path) -> list[dict]:
    """GRPO on the training tasks; returns TRL's log history."""
    from trainers.grpo import AgentGRPOConfig, build_trainer

    args = AgentGRPOConfig(
        output_dir=str(output / "grpo"), max_steps=config.grpo_steps, learning_rate=config.grpo_learning_rate,
        per_device_train_batch_size=config.group_size * config.groups_per_step, num_generations=config.group_size,
        gradient_accumulation_steps=1, beta=0.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        temperature=1.0, max_turns=config.max_turns, max_tokens_per_turn=config.max_tokens_per_turn,
        logging_steps=5, report_to=[], save_strategy="no", use_cpu=True, seed=seed, envs=[ENV_ID],
        lr_scheduler_type="constant", warmup_steps=0, disable_tqdm=False)
    trainer = build_trainer(args, model, tokenizer, tasks={ENV_ID: list(tasks)},
                            env_factory=lambda env_id: make_env(tasks))
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    return trainer.state.log_history


def run_seed(config: PipelineConfig, seed: int, train: Sequence[Any], held_out: Sequence[Any]) -> dict[str, Any]:
    """Steps 1-6 for one seed; returns the evaluations, timings and GRPO's reward curve."""
    import torch

    from trainers.pretrain import load_or_build_pretrained

    output = Path(config.output_dir) / f"seed-{seed}"
    model, tokenizer = load_or_build_pretrained(progress=True)
    torch.manual_seed(seed)
    timings = {}
    started = time.perf_counter()
    episodes = demonstrations(tokenizer, train)
    warm_start(model, tokenizer, episodes, config, seed, output)
    timings["sft_s"] = time.perf_counter() - started
    before = evaluate(model, tokenizer, held_out, config, seed)
    started = time.perf_counter()
    history = reinforce(model, tokenizer, train, config, seed, output)
    timings["grpo_s"] = time.perf_counter() - started
    after = evaluate(model, tokenizer, held_out, config, seed)
    curve = [(entry["step"], entry["reward"]) for entry in history if "reward" in entry]
    return {"seed": seed, "demonstrations": len(episodes), "sft": asdict(before), "grpo": asdict(after),
            "timings": timings, "reward_curve": curve}


def summary_rows(runs: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Table rows: metric, SFT mean ± std, SFT+GRPO mean ± std, paired difference mean ± std."""
    rows = []
    for metric in ("greedy_success", "sampled_success", "turns", "searches"):
        before = np.array([run["sft"][metric] for run in runs])
        after = np.array([run["grpo"][metric] for run in runs])
        rows.append((metric, _mean_std(before), _mean_std(after), _mean_std(after - before, signed=True)))
    return rows


def _mean_std(values: np.ndarray, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{values.mean():{sign}.3f} ± {values.std(ddof=1) if len(values) > 1 else 0.0:.3f}"


def print_table(runs: Sequence[dict[str, Any]], held_out: int) -> None:
    """The before/after table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Search-v0 held-out ({held_out} tasks), {len(runs)} seed(s): mean ± std over seeds")
    for column in ("metric", "SFT", "SFT + GRPO", "GRPO - SFT (paired)"):
        table.add_column(column)
    for row in summary_rows(runs):
        table.add_row(*row)
    Console().print(table)


def save_plot(runs: Sequence[dict[str, Any]], path: Path) -> None:
    """Reward over GRPO steps, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for run in runs:
        steps, rewards = zip(*run["reward_curve"], strict=True) if run["reward_curve"] else ((), ())
        axis.plot(steps, rewards, marker="o", label=f"seed {run['seed']}")
    axis.set_xlabel("GRPO step")
    axis.set_ylabel("mean episode reward (training)")
    axis.set_title("Search-v0: reward over GRPO steps")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.pipeline [--seeds 0 1 2] [...]``: the whole main job."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from transformers import HfArgumentParser

    (config,) = HfArgumentParser(PipelineConfig).parse_args_into_dataclasses(args=argv)
    output = Path(config.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    train, held_out = training_tasks(config), held_out_tasks(config)
    started = time.perf_counter()
    runs = [run_seed(config, seed, train, held_out) for seed in config.seeds]
    print_table(runs, len(held_out))
    save_plot(runs, output / "reward.png")
    results = {"config": asdict(config), "held_out_tasks": len(held_out), "runs": runs,
               "total_s": time.perf_counter() - started}
    (output / "results.json").write_text(json.dumps(results, indent=2))
    print(f"results: {output / 'results.json'}, plot: {output / 'reward.png'}, "
          f"total {results['total_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
