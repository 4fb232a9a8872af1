"""The main job: tiny model, demonstrations, SFT warm-start, GRPO, held-out evaluation, before/after table.

On a CPU-only machine with no model hub:

1. build (or reuse) the tiny model and its locally trained tokenizer, pretrained to copy text
   (:mod:`trainers.pretrain`; built once and cached; a pretraining phase that misses its target stops
   the job with an error naming it);
2. play a demonstrator in the real environments on generated training tasks (none of them in the
   bundled dev or test split): PythonSandbox-v0 math (run the task's reference program in the sandbox,
   answer with its output; a careless one that in a share of the tasks answers at once with a number
   from the problem, see below) and, with ``--envs python search``, Search-v0 (search with the
   question, answer from the top result; only the solved episodes are kept);

then for each seed:

3. SFT warm-start on them (TRL ``SFTTrainer``, loss on agent tokens only);
4. evaluate on the held-out test split of each env;
5. GRPO from the warm-started model (TRL ``GRPOTrainer`` with the multi-turn ``rollout_func``; with
   several envs, rewards normalised per env);
6. evaluate again.

It prints a before/after table per env (mean and spread over seeds), writes ``results.json`` and a plot
of the training reward over GRPO steps to ``output_dir``. It exits 1 with the cause when a pretraining
phase misses its target, when most of a held-out evaluation's episodes end in infrastructure faults, or
when GRPO stops on them (:mod:`trainers.infra_guard`).

Why a careless demonstrator: SFT on a perfect one leaves GRPO nothing the tiny model can learn in a few
steps (from such a warm start it stayed flat, docs/main-job.md). Demonstrations of a mixed behaviour, tool use and
guessing, are the usual starting point of RL: imitation learns both, and the reward is what teaches the
model that running the program pays. ``--python_guess_rate 0`` gives the perfect demonstrator. Half the
demonstrations guess by default: with a quarter (and GRPO at lr 1e-4) the SFT model already ran the program
in most tasks and GRPO did not move its greedy success (-0.028 paired over three seeds); with half (lr 3e-4)
GRPO raised it in every seed on two kernel paths (docs/main-job.md).

Example:
    python -m trainers.pipeline                      # the embedded defaults
    python -m trainers.pipeline --seeds 0 --grpo_steps 5 --output_dir /tmp/quick
    python -m trainers.pipeline --envs python search
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from agentgym_envs.policies import Policy
from agentgym_envs.runner import Episode, scored, success_rate
from tasks import Task

if TYPE_CHECKING:
    from trainers.console import Report, SeedDisplay
    from trainers.pretrain import EchoPretraining
    from trainers.rollout import RolloutConfig

SEARCH_ENV = "agentrl/Search-v0"
PYTHON_ENV = "agentrl/PythonSandbox-v0"
COPY_TEMPLATES = ("modular_power", "digit_sum_power", "divisibility_count", "divisor_sum")
"""PythonSandbox math templates whose reference program only copies numbers from the problem."""


@dataclass
class PipelineConfig:
    """Settings of the main job (every field has a default: the embedded CPU recipe)."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "One full run per seed."})
    output_dir: str = field(default="runs/main", metadata={"help": "Where results, logs and the plot go."})
    envs: list[str] = field(default_factory=lambda: ["python"], metadata={
        "help": "Environments trained and evaluated on, side by side: python (PythonSandbox-v0 math), search."})
    python_templates: list[str] = field(default_factory=lambda: list(COPY_TEMPLATES), metadata={
        "help": "PythonSandbox math templates in play (tasks.MATH_TEMPLATES)."})
    python_train_tasks: int = field(default=1200, metadata={
        "help": "Generated PythonSandbox training tasks (none equal to a bundled dev or test task)."})
    python_guess_rate: float = field(default=0.5, metadata={
        "help": "Share of PythonSandbox demonstrations in which the demonstrator answers at once with a number "
                "from the problem instead of running the program (kept although wrong: imitation learns both)."})
    sandbox: str = field(default="bwrap", metadata={"help": "PythonSandbox backend: bwrap or docker."})
    search_families: list[str] = field(default_factory=lambda: ["single"], metadata={
        "help": "Search question families trained and evaluated on (single, bridge, comparison)."})
    search_train_tasks: int = field(default=2000, metadata={
        "help": "Generated Search training questions (the bundled dev and test questions are excluded)."})
    eval_split: str = field(default="test", metadata={"help": "Held-out bundled split to evaluate on."})
    eval_samples: int = field(default=4, metadata={"help": "Sampled episodes per held-out task (plus one greedy)."})
    sft_steps: int = field(default=600, metadata={
        "help": "SFT optimizer steps (cosine schedule). On one pretrained model, with batches of 8, 300 left SFT's "
                "loss at 0.22-0.30 in every seed, 600 took two seeds of three to 0.10 (docs/main-job.md)."})
    sft_learning_rate: float = field(default=2e-3, metadata={"help": "SFT learning rate."})
    sft_batch_size: int = field(default=16, metadata={
        "help": "Demonstrations per SFT step. With 8, one seed of three never made SFT's late drop in 1,200 steps "
                "on one pretrained model; with 16 it made it by step 260 (docs/main-job.md)."})
    grpo_steps: int = field(default=12, metadata={"help": "GRPO optimizer steps."})
    grpo_learning_rate: float = field(default=3e-4, metadata={"help": "GRPO learning rate."})
    group_size: int = field(default=8, metadata={"help": "Episodes per task in a GRPO group."})
    groups_per_step: int = field(default=8, metadata={"help": "Tasks per GRPO step."})
    max_tokens_per_turn: int = field(default=96, metadata={"help": "Most tokens generated in one turn."})
    max_turns: int = field(default=2, metadata={"help": "Most model turns per episode."})
    pretrain_seed: int = field(default=0, metadata={
        "help": "Seed of the tiny model's echo pretraining draws (trainers.pretrain; each seed builds and caches "
                "its own model; docs/pretraining.md shows which builds reach the pretraining's targets)."})
    agent_program: str | None = field(default=None, metadata={
        "help": "Train an agent program instead of agentrl's own rollout loop: 'module:function' of an "
                "AgentSession (e.g. trainers.agents.openai_sdk:tool_loop, docs/agent-programs.md). Its "
                "demonstrations are recorded through the policy endpoint with the demonstrator in the model's place, "
                "and it is evaluated and trained through the endpoint."})
    seed_workers: int = field(default=0, metadata={
        "help": "Seeds run side by side, one worker process each (0: up to two per CPU core, at most one per "
                "seed; 1: one after another in this process)."})

    def pretraining(self) -> EchoPretraining:
        """The echo pretraining of the tiny model the seeds start from."""
        from trainers.pretrain import EchoPretraining

        return EchoPretraining(seed=self.pretrain_seed)

    def workers(self) -> int:
        """How many seeds run at once.

        By default up to two per core: three seeds on two cores all at once keep both cores busy to the end,
        where two at a time would leave one core idle while the third seed runs alone.
        """
        if self.seed_workers < 0:
            raise ValueError(f"seed_workers: expected >= 0 (0 picks up to two per CPU core), got {self.seed_workers}")
        return max(1, min(len(self.seeds), self.seed_workers or 2 * (os.cpu_count() or 1)))


@dataclass
class Evaluation:
    """Held-out results of one model in one env: greedy and sampled success, mean turns, tool calls per
    episode, and the share of sampled episodes in which a tool's output held the gold answer (the agent
    got the tool to produce it; success then also needs it copied into the answer). Rates are over the
    episodes no infrastructure fault ended; ``infra_errors`` counts those that one did."""

    greedy_success: float
    sampled_success: float
    turns: float
    tool_calls: float
    answer_in_tool_output: float
    infra_errors: int = 0


@dataclass
class EnvJob:
    """One environment of the main job: its tasks, how its envs are made and how it is demonstrated."""

    env_id: str
    train: list[Task]
    held_out: list[Task]
    make_env: Callable[[Sequence[Task]], gym.Env]
    demonstrator: Callable[[], Policy]
    keep: Callable[[Episode, Policy], bool] = lambda episode, policy: episode.success
    """Which demonstrator episodes are learned from (default: the solved ones)."""


def env_jobs(config: PipelineConfig) -> dict[str, EnvJob]:
    """The configured environments, by env id."""
    builders = {"python": python_job, "search": search_job}
    unknown = set(config.envs) - set(builders)
    if unknown or not config.envs:
        raise ValueError(f"envs: expected one or more of {sorted(builders)}, got {config.envs}")
    jobs = [builders[name](config) for name in config.envs]
    return {job.env_id: job for job in jobs}


def python_job(config: PipelineConfig) -> EnvJob:
    """PythonSandbox-v0 math: generated tasks of the configured templates, every level each one serves.

    The demonstrator runs the task's reference program and answers with its output, except in a share
    ``python_guess_rate`` of the tasks, where it answers at once with a number from the problem
    (:class:`GuessingPolicy`). Its solved episodes and its guesses are kept.
    """
    from agentgym_envs.policies import PythonOraclePolicy
    from agentgym_envs.policies.guessing import GuessingPolicy
    from tasks import load_split
    from tasks.python_math import MATH_TEMPLATE_LEVELS, generate_math_tasks

    def held_out_template(task: Task) -> bool:
        return task.family == "math" and task.metadata["template"] in config.python_templates

    bundled = {task.prompt for split in ("dev", "test") for task in load_split("PythonSandbox", split)}
    per_template = -(-config.python_train_tasks // len(config.python_templates))
    generated = [task for index, template in enumerate(config.python_templates)
                 for task in generate_math_tasks(per_template, seed=777 + index, split=f"train-{template}",
                                                 template=template, difficulty=MATH_TEMPLATE_LEVELS[template])]
    return EnvJob(
        env_id=PYTHON_ENV,
        train=[task for task in generated if task.prompt not in bundled][:config.python_train_tasks],
        held_out=[task for task in load_split("PythonSandbox", config.eval_split) if held_out_template(task)],
        make_env=lambda tasks: _make(PYTHON_ENV, tasks, families=("math",), sandbox=config.sandbox),
        demonstrator=lambda: GuessingPolicy(PythonOraclePolicy(), config.python_guess_rate),
        keep=lambda episode, policy: episode.success or policy.guessed)


def search_job(config: PipelineConfig) -> EnvJob:
    """Search-v0: generated questions about the bundled world (no dev or test question among them).

    The demonstrator searches with the question and answers with what the top result shows; episodes
    where it does not show the answer are not kept.
    """
    from agentgym_envs.policies.search_lookup import SearchLookupPolicy
    from tasks import load_split
    from tasks.search import load_world

    held_out = {task.metadata["query"] for split in ("dev", "test") for task in load_split("Search", split)}
    families = tuple(config.search_families)
    train = load_world().questions(config.search_train_tasks, seed=12345, families=families,
                                   hops=1 if families == ("single",) else None, exclude=held_out)
    return EnvJob(
        env_id=SEARCH_ENV,
        train=train,
        held_out=[task for task in load_split("Search", config.eval_split) if task.family in families],
        make_env=lambda tasks: _make(SEARCH_ENV, tasks),
        demonstrator=lambda: SearchLookupPolicy(k=1),
        keep=lambda episode, policy: episode.success and policy.grounded)


def _make(env_id: str, tasks: Sequence[Task], **kwargs: Any) -> gym.Env:
    """``env_id`` over ``tasks`` with the task alone as the prompt (the tiny model needs no instructions)."""
    import agentgym_envs  # noqa: F401

    return gym.make(env_id, tasks=list(tasks), prompt_style="task", **kwargs)


def demonstrations(tokenizer, jobs: Mapping[str, EnvJob], config: PipelineConfig, *, progress: bool = True) -> list:
    """The demonstrator episodes each job keeps (:attr:`EnvJob.keep`) on its training tasks: in agentrl's own
    turn format, or, with ``config.agent_program``, recorded through that program
    (:mod:`trainers.agent_demonstrations`)."""
    from trainers.chat import ChatTokens
    from trainers.sft import collect_demonstrations

    episodes = []
    for job in jobs.values():
        policy, env = job.demonstrator(), job.make_env(job.train)
        keep = lambda episode, policy=policy, job=job: job.keep(episode, policy)  # noqa: E731
        try:
            if config.agent_program is None:
                episodes += collect_demonstrations(env, job.env_id, policy, job.train, ChatTokens(tokenizer),
                                                   progress=progress, keep=keep)
            else:
                from trainers.agent_client import load_agent_program
                from trainers.agent_demonstrations import collect_program_demonstrations

                episodes += collect_program_demonstrations(
                    load_agent_program(config.agent_program), env, job.env_id, policy, job.train, tokenizer,
                    rollout_config(config, temperature=0.0), keep=keep)
        finally:
            env.close()
    return episodes


def rollout_config(config: PipelineConfig, *, temperature: float) -> RolloutConfig:
    """The job's turn and token limits, sampling at ``temperature``."""
    from trainers.rollout import RolloutConfig

    return RolloutConfig(max_turns=config.max_turns, max_tokens_per_turn=config.max_tokens_per_turn,
                         temperature=temperature)




def warm_start(model, tokenizer, episodes: Sequence[Any], config: PipelineConfig, seed: int, output: Path,
               report: Report | None = None) -> None:
    """SFT on the demonstrations (TRL ``SFTTrainer``); progress to ``report`` (TRL's bar when None), TRL's log
    dictionaries also to ``output/sft/trainer_log.jsonl``."""
    from trainers.sft import AgentSFTConfig, train_sft

    args = AgentSFTConfig(
        output_dir=str(output / "sft"), max_steps=config.sft_steps, per_device_train_batch_size=config.sft_batch_size,
        learning_rate=config.sft_learning_rate, lr_scheduler_type="cosine", warmup_steps=10, logging_steps=10,
        report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=seed, max_length=2048,
        disable_tqdm=report is not None)
    train_sft(model, tokenizer, episodes, args, callbacks=_trainer_callbacks(report, "SFT", Path(args.output_dir)))


def evaluate(model, tokenizer, job: EnvJob, config: PipelineConfig, seed: int) -> Evaluation:
    """Greedy and sampled success on ``job``'s held-out tasks, through the rollout engine and the real env.

    The rules are :mod:`agentgym_envs.runner`'s, the same as ``benchmarks.evaluate``'s: an episode an
    infrastructure fault ended counts in no rate (and is counted in ``infra_errors``).
    """
    import torch

    from trainers.agent_client import load_agent_program
    from trainers.agent_program import AgentProgramRollout
    from trainers.generation import TransformersGenerator
    from trainers.rollout import EnvPool, RolloutEngine, group_requests

    generator = TransformersGenerator(model, tokenizer.pad_token_id)
    pool = EnvPool(lambda env_id: job.make_env(job.held_out))
    try:
        results = {}
        for label, temperature, samples in (("greedy", 0.0, 1), ("sampled", 1.0, config.eval_samples)):
            torch.manual_seed(seed)
            settings = rollout_config(config, temperature=temperature)
            requests = group_requests([(job.env_id, task) for task in job.held_out], samples, seed)
            if config.agent_program is None:
                results[label] = RolloutEngine(generator, tokenizer, pool, settings).run(requests)
            else:
                with AgentProgramRollout(generator, tokenizer, pool, load_agent_program(config.agent_program),
                                         settings) as engine:
                    results[label] = engine.run(requests)
    finally:
        pool.close()
    check_scored(job.env_id, [episode for episodes in results.values() for episode in episodes])
    sampled, tasks = scored(results["sampled"]), {task.id: task for task in job.held_out}
    return Evaluation(
        greedy_success=success_rate(results["greedy"]),
        sampled_success=success_rate(results["sampled"]),
        turns=float(np.mean([len(e.turns) for e in sampled])),
        tool_calls=float(np.mean([len(e.tool_calls) for e in sampled])),
        answer_in_tool_output=float(np.mean([answer_in_tool_output(e, tokenizer, tasks[e.task_id]) for e in sampled])),
        infra_errors=sum(e.infra_error for episodes in results.values() for e in episodes))


class EvaluationError(RuntimeError):
    """Too few held-out episodes were scored for a rate to mean anything (infrastructure faults ended the rest)."""


MAX_INFRA_SHARE = 0.5
"""Largest share of a held-out evaluation's episodes an infrastructure fault may end before the job stops."""


def check_scored(env_id: str, episodes: Sequence[Episode]) -> None:
    """Raise :class:`EvaluationError` when more than :data:`MAX_INFRA_SHARE` of ``episodes`` (all of them, at the
    least) were ended by an infrastructure fault, naming the first fault."""
    from trainers.infra_guard import INFRA_HINT, first_infra_error, infra_share

    if episodes and infra_share(episodes) <= MAX_INFRA_SHARE:
        return
    faults = sum(episode.infra_error for episode in episodes)
    raise EvaluationError(
        f"held-out evaluation of {env_id}: {faults} of {len(episodes)} episodes ended by an infrastructure fault, "
        f"so no success rate is reported. The first one said: {first_infra_error(episodes)}. To fix: {INFRA_HINT}.")


def answer_in_tool_output(episode: Episode, tokenizer, task: Task) -> bool:
    """Whether one of ``task``'s gold answers (:func:`rewards.gold_answers`) stands, as a whole word or
    number, in what the env returned during ``episode`` (its tokens with ``env_mask`` 0), not in what the
    model generated."""
    import itertools
    import re

    from rewards import gold_answers

    spans = itertools.groupby(zip(episode.completion_ids, episode.env_mask, strict=True), key=lambda pair: pair[1])
    returned = "\n".join(tokenizer.decode([token for token, _ in span]) for generated, span in spans if not generated)
    return any(re.search(rf"(?<!\w)(?<!\d\.){re.escape(answer)}(?!\w)(?!\.\d)", returned, re.IGNORECASE)
               for answer in gold_answers(task))


def reinforce(model, tokenizer, jobs: Mapping[str, EnvJob], config: PipelineConfig, seed: int,
              output: Path, report: Report | None = None) -> list[dict]:
    """GRPO on every job's training tasks (rewards normalised per env when there are several); TRL's log.
    Progress and the rollout monitor's alerts go to ``report`` (TRL's bar when None), TRL's log dictionaries
    also to ``output/grpo/trainer_log.jsonl``."""
    from trainers.console import alerts_to
    from trainers.grpo import AgentGRPOConfig, build_trainer

    args = AgentGRPOConfig(
        output_dir=str(output / "grpo"), max_steps=config.grpo_steps, learning_rate=config.grpo_learning_rate,
        per_device_train_batch_size=config.group_size * config.groups_per_step, num_generations=config.group_size,
        gradient_accumulation_steps=1, beta=0.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        temperature=1.0, max_turns=config.max_turns, max_tokens_per_turn=config.max_tokens_per_turn,
        logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=seed, envs=list(jobs),
        lr_scheduler_type="constant", warmup_steps=0, disable_tqdm=report is not None,
        agent_program=config.agent_program)
    trainer = build_trainer(args, model, tokenizer, tasks={env_id: job.train for env_id, job in jobs.items()},
                            env_factory=lambda env_id: jobs[env_id].make_env(jobs[env_id].train))
    for callback in _trainer_callbacks(report, "GRPO", Path(args.output_dir)):
        trainer.add_callback(callback)
    try:
        with alerts_to(report) if report is not None else contextlib.nullcontext():
            trainer.train()
    finally:
        trainer.rollouts.close()
    return trainer.state.log_history


def reward_curves(history: Sequence[Mapping[str, Any]], env_ids: Sequence[str]) -> dict[str, list[tuple[int, float]]]:
    """Mean raw training reward per env at each logged GRPO step (the monitor's ``reward/<env>/mean``)."""
    from trainers.monitoring import reward_metric

    return {env_id: [(entry["step"], entry[reward_metric(env_id)]) for entry in history
                     if reward_metric(env_id) in entry] for env_id in env_ids}


def run_seed(config: PipelineConfig, seed: int, jobs: Mapping[str, EnvJob], episodes: Sequence[Any],
             report: Report | None = None) -> dict[str, Any]:
    """SFT, evaluation, GRPO, evaluation for one seed; returns the evaluations per env, timings and reward curves.
    Progress goes to ``report`` (TRL's bars when None)."""
    import torch

    from trainers.pretrain import load_or_build_pretrained

    notify = report or (lambda phase, done, total: None)
    output = Path(config.output_dir) / f"seed-{seed}"
    model, tokenizer = load_or_build_pretrained(settings=config.pretraining())
    torch.manual_seed(seed)
    timings = {}
    started = time.perf_counter()
    warm_start(model, tokenizer, episodes, config, seed, output, report)
    timings["sft_s"] = time.perf_counter() - started
    notify("evaluating SFT", 0, None)
    before = {env_id: asdict(evaluate(model, tokenizer, job, config, seed)) for env_id, job in jobs.items()}
    started = time.perf_counter()
    history = reinforce(model, tokenizer, jobs, config, seed, output, report)
    timings["grpo_s"] = time.perf_counter() - started
    notify("evaluating SFT + GRPO", 0, None)
    after = {env_id: asdict(evaluate(model, tokenizer, job, config, seed)) for env_id, job in jobs.items()}
    notify("done", 1, 1)
    print(f"seed {seed}: SFT {before}\nseed {seed}: SFT + GRPO {after}", flush=True)
    return {"seed": seed, "sft": before, "grpo": after, "timings": timings,
            "reward_curves": reward_curves(history, list(jobs))}


def run_seeds(config: PipelineConfig, jobs: Mapping[str, EnvJob], episodes: Sequence[Any]) -> list[dict[str, Any]]:
    """:func:`run_seed` for every seed, in order of ``config.seeds``.

    With more than one worker (:meth:`PipelineConfig.workers`) the seeds run side by side in spawned
    processes that split the CPU cores between them: the tiny model is too small for several threads to
    keep a core each busy, so this is where a multi-core CPU's time goes furthest. The workers start with
    glibc's malloc keeping freed memory (:func:`worker_environment`).

    The console shows one live table, a row per seed with its phase, step and latest loss and reward
    (:class:`trainers.console.SeedDisplay`; when stdout is not a terminal, one line per phase change per
    seed). What a seed's run prints itself (TRL's log dictionaries, warnings) goes to
    ``<output_dir>/seed-<k>/console.log``, the trainers' log dictionaries also to ``trainer_log.jsonl`` in
    its ``sft`` and ``grpo`` folders.
    """
    from rich.console import Console

    from trainers.console import SeedDisplay, stdout_copy

    workers = config.workers()
    with stdout_copy() as stream:
        console = Console(file=stream)
        console.print(f"each seed's own output: {Path(config.output_dir) / 'seed-<k>'}/console.log, TRL's log "
                      "dictionaries: sft/ and grpo/trainer_log.jsonl beside it", markup=False, highlight=False,
                      soft_wrap=True)
        with SeedDisplay(config.seeds, console) as display:
            if workers == 1:
                return [_run_seed_here(config, seed, jobs, episodes, display) for seed in config.seeds]
            return _run_seeds_in_workers(config, episodes, display, workers)


FAILED = "failed"
"""The phase the display shows for a seed whose run raised."""


def _run_seed_here(config: PipelineConfig, seed: int, jobs: Mapping[str, EnvJob], episodes: Sequence[Any],
                   display: SeedDisplay) -> dict[str, Any]:
    """:func:`run_seed` in this process, its progress to ``display``, what it prints to its console log."""
    from trainers.console import SeedEvent, output_to

    def report(phase: str, done: int, total: int | None, metrics: Mapping[str, float] | None = None, *,
               alert: str | None = None) -> None:
        display.update(SeedEvent(seed, phase, done, total, metrics, alert))

    try:
        with output_to(seed_console_log(config, seed)):
            return run_seed(config, seed, jobs, episodes, report)
    except BaseException:
        display.update(SeedEvent(seed, FAILED, 0, None))
        raise


def _run_seeds_in_workers(config: PipelineConfig, episodes: Sequence[Any], display: SeedDisplay,
                          workers: int) -> list[dict[str, Any]]:
    """:func:`run_seed` for every seed in ``workers`` spawned processes; their events go to ``display``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    os.environ.update(worker_environment(os.environ))  # the spawned workers start with it
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(events, threads))
    with pool:
        futures = {seed: pool.submit(_run_seed_in_worker, config, seed, episodes) for seed in config.seeds}
        while not all(future.done() for future in futures.values()):
            _show_events(events, display, timeout=0.5)
            _show_failures(futures, display)
        _show_events(events, display, timeout=0.1)  # the last events may come after the results
        _show_failures(futures, display)
        return [future.result() for future in futures.values()]


def _show_events(events: Any, display: SeedDisplay, timeout: float) -> None:
    """Every event that arrives on ``events`` within ``timeout`` s of the one before, to ``display``."""
    import queue

    while True:
        try:
            display.update(events.get(timeout=timeout))
        except queue.Empty:
            return


def _show_failures(futures: Mapping[int, Any], display: SeedDisplay) -> None:
    """Marks the seeds whose run raised as failed on ``display`` (once each)."""
    from trainers.console import SeedEvent

    for seed, future in futures.items():
        if future.done() and future.exception() is not None and display.phase(seed) != FAILED:
            display.update(SeedEvent(seed, FAILED, 0, None))


def seed_console_log(config: PipelineConfig, seed: int) -> Path:
    """Where what ``seed``'s run prints goes: ``console.log`` in its folder (the one :func:`run_seed` writes to)."""
    return Path(config.output_dir) / f"seed-{seed}" / "console.log"


KEEP_FREED_MEMORY = "glibc.malloc.mmap_threshold=2147483648:glibc.malloc.trim_threshold=4294967296"
"""glibc malloc settings of the seed workers: freed memory stays in the process instead of going back to
the kernel. A training step allocates and frees buffers of hundreds of MB (attention, logits) on every
pass; by default glibc maps each one fresh and the kernel page-faults it in again. Measured on one seed's
12 GRPO steps: 396 s -> 350 s, peak memory 3.0 -> 3.7 GB (with TRL's CPU head in the loss, before the
agent-token head: 2 steps 72 s -> 43 s).
glibc reads it when a process starts: with one worker the seeds run in-process and, like the trainers'
own entry points, get it only when the process was started with it (docs/training.md)."""


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set for the seed workers: :data:`KEEP_FREED_MEMORY` unless ``environ`` already tunes
    glibc (``GLIBC_TUNABLES`` is read when a process starts, so it only reaches processes started later)."""
    return {} if "GLIBC_TUNABLES" in environ else {"GLIBC_TUNABLES": KEEP_FREED_MEMORY}


_worker_events: Any = None
"""In a seed worker process: the queue its progress goes to."""


def _start_worker(events: Any, threads: int) -> None:
    """Initializes a seed worker: where its progress goes, how many threads torch uses."""
    import torch

    global _worker_events
    _worker_events = events
    torch.set_num_threads(threads)


def _run_seed_in_worker(config: PipelineConfig, seed: int, episodes: Sequence[Any]) -> dict[str, Any]:
    """:func:`run_seed` in a worker: progress to the parent as :class:`trainers.console.SeedEvent` objects,
    what the run prints to its console log (:func:`seed_console_log`)."""
    from trainers.console import SeedEvent, output_to

    def report(phase: str, done: int, total: int | None, metrics: Mapping[str, float] | None = None, *,
               alert: str | None = None) -> None:
        _worker_events.put(SeedEvent(seed, phase, done, total, dict(metrics) if metrics else None, alert))

    with output_to(seed_console_log(config, seed)):
        return run_seed(config, seed, env_jobs(config), episodes, report)


def _step_callbacks(report: Report | None, phase: str) -> list:
    """A trainer callback that sends the start, each optimizer step and the latest loss and reward to ``report``
    (none when ``report`` is None)."""
    from trainers.console import StepReporter

    return [StepReporter(report, phase)] if report is not None else []


def _trainer_callbacks(report: Report | None, phase: str, output_dir: Path) -> list:
    """:func:`_step_callbacks` and a :class:`trainers.console.TrainerLogFile` to ``output_dir/trainer_log.jsonl``."""
    from trainers.console import TrainerLogFile

    return [*_step_callbacks(report, phase), TrainerLogFile(output_dir / "trainer_log.jsonl")]


def summary_rows(runs: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """Table rows: env, metric, SFT mean ± std, SFT+GRPO mean ± std, paired difference mean ± std."""
    from trainers.monitoring import short_env_id

    rows = []
    for env_id in runs[0]["sft"]:
        for metric in ("greedy_success", "sampled_success", "answer_in_tool_output", "turns", "tool_calls"):
            before = np.array([run["sft"][env_id][metric] for run in runs])
            after = np.array([run["grpo"][env_id][metric] for run in runs])
            rows.append((short_env_id(env_id), metric, _mean_std(before), _mean_std(after),
                         _mean_std(after - before, signed=True)))
    return rows


SUCCESS_METRICS = ("greedy_success", "sampled_success")


def learning_verdicts(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Per env and success metric, whether GRPO beat SFT beyond the SFT models' spread over the seeds.

    The paired gain (GRPO - SFT per seed, averaged) counts as beyond the spread when it is larger than the standard
    deviation of the SFT models' success over the seeds: what the warm start's seed alone moves the number by.
    With one seed there is no spread, and the line says so.
    """
    from trainers.monitoring import short_env_id

    lines = []
    for env_id in runs[0]["sft"]:
        for metric in SUCCESS_METRICS:
            before = np.array([run["sft"][env_id][metric] for run in runs])
            gains = np.array([run["grpo"][env_id][metric] for run in runs]) - before
            head = (f"{short_env_id(env_id)} {metric}: GRPO - SFT {gains.mean():+.3f} paired, up in "
                    f"{int((gains > 0).sum())} of {len(runs)} seeds")
            if len(runs) < 2:
                lines.append(f"{head}; one seed, no spread to compare with")
                continue
            spread = before.std(ddof=1)
            beyond = "beyond" if gains.mean() > spread else "NOT beyond"
            lines.append(f"{head}; {beyond} the SFT models' spread ({spread:.3f})")
    return lines


def _mean_std(values: np.ndarray, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{values.mean():{sign}.3f} ± {values.std(ddof=1) if len(values) > 1 else 0.0:.3f}"


def print_table(runs: Sequence[dict[str, Any]], jobs: Mapping[str, EnvJob]) -> None:
    """The before/after table."""
    from rich.console import Console
    from rich.table import Table

    from trainers.monitoring import short_env_id

    sizes = ", ".join(f"{short_env_id(env_id)} {len(job.held_out)}" for env_id, job in jobs.items())
    table = Table(title=f"Held-out tasks ({sizes}), {len(runs)} seed(s): mean ± std over seeds")
    for column in ("env", "metric", "SFT", "SFT + GRPO", "GRPO - SFT (paired)"):
        table.add_column(column)
    for row in summary_rows(runs):
        table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else 120).print(table)  # a log file gets whole metric names
    for line in learning_verdicts(runs):
        print(line, flush=True)


def save_plot(runs: Sequence[dict[str, Any]], path: Path) -> None:
    """Mean training reward over GRPO steps, one line per seed and env."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trainers.monitoring import short_env_id

    figure, axis = plt.subplots(figsize=(6, 4))
    for run in runs:
        for env_id, curve in run["reward_curves"].items():
            steps, rewards = zip(*curve, strict=True) if curve else ((), ())
            axis.plot(steps, rewards, marker="o", label=f"{short_env_id(env_id)}, seed {run['seed']}")
    axis.set_xlabel("GRPO step")
    axis.set_ylabel("mean episode reward (training)")
    axis.set_title("Reward over GRPO steps")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def pretrain_beside_demonstrations(config: PipelineConfig) -> list:
    """Build (or reuse) the pretrained tiny model while a worker process collects the demonstrations.

    The pretraining runs on one core (:func:`trainers.pretrain.one_torch_thread`) and the demonstrations
    need only the tokenizer, so on a fresh machine the two overlap. Returns the demonstrations.

    Raises:
        PretrainingError: A pretraining phase missed its target (the worker is stopped at once).
        Exception: Whatever stopped the worker (e.g. :class:`~trainers.infra_guard.TooManyInfraErrors`), raised
            within about a minute of it, the pretraining stopped with it.
    """
    import multiprocessing

    from tasks.progress import reported
    from trainers.pretrain import built_phases, load_or_build_pretrained, phases_summary, pretrained_dir, print_flushed
    from trainers.tiny_model import load_or_build_tiny_model

    load_or_build_tiny_model()  # the tokenizer, built before both sides read it
    settings = config.pretraining()
    cached = pretrained_dir(settings=settings)
    if (cached / "config.json").exists():
        print_flushed(f"echo pretraining: reusing {cached}")
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # leaving the block stops the worker
        collected = pool.apply_async(_demonstrations_in_worker, (config,))
        load_or_build_pretrained(settings=settings, progress=_stopping_if_failed(collected, print_flushed))
        print_flushed(f"echo pretraining: {phases_summary(built_phases(settings=settings))}")
        with reported("collecting the demonstrations", write=print_flushed):
            episodes = collected.get()
    print_flushed(f"demonstrations: {len(episodes)} episodes")
    return episodes


def _stopping_if_failed(work: Any, write: Callable[[str], None]) -> Callable[[str], None]:
    """A progress callback: ``write`` each line, then raise the error of ``work`` (an ``AsyncResult``) if it failed.

    The pretraining reports about every minute, so a demonstrations worker that failed stops the job that soon
    instead of after the whole pretraining (half an hour on a slow core).
    """
    def progress(line: str) -> None:
        write(line)
        if work.ready() and not work.successful():
            work.get()

    return progress


def _demonstrations_in_worker(config: PipelineConfig) -> list:
    from trainers.tiny_model import load_or_build_tiny_model

    _, tokenizer = load_or_build_tiny_model()
    return demonstrations(tokenizer, env_jobs(config), config, progress=False)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.pipeline [--seeds 0 1 2] [...]``: the whole main job."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' weight-loading bars, off the console
    from transformers import HfArgumentParser

    from trainers.infra_guard import TooManyInfraErrors
    from trainers.pretrain import PretrainingError, built_phases

    (config,) = HfArgumentParser(PipelineConfig).parse_args_into_dataclasses(args=argv)
    output = Path(config.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    jobs = env_jobs(config)
    try:
        episodes = pretrain_beside_demonstrations(config)
        runs = run_seeds(config, jobs, episodes)
    except (PretrainingError, EvaluationError, TooManyInfraErrors) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    print_table(runs, jobs)
    save_plot(runs, output / "reward.png")
    results = {"config": asdict(config), "held_out_tasks": {env_id: len(job.held_out) for env_id, job in jobs.items()},
               "pretraining": [asdict(phase) for phase in built_phases(settings=config.pretraining())],
               "demonstrations": len(episodes), "runs": runs, "learning": learning_verdicts(runs),
               "total_s": time.perf_counter() - started}
    (output / "results.json").write_text(json.dumps(results, indent=2))
    print(f"results: {output / 'results.json'}, plot: {output / 'reward.png'}, "
          f"total {results['total_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
