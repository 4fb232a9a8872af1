"""Multi-turn rollout throughput: this project's rollout engine against TRL's own tool loop, side by side.

One tiny model, warm-started so that it really calls tools, plays the same Search-v0 tasks (the held-out
``test`` questions, ``G`` episodes each) through three loops, with the same sampling (temperature 1,
no top-k/top-p), the same per-turn token limit, the same stop tokens and the same turn limit:

    =======================  ==================================================================================
    row                      what is timed
    =======================  ==================================================================================
    engine-sequential        ``RolloutEngine.run`` with ``tool_workers=1``: env resets, batched generation
                             each round, then every episode's ``env.step`` one after another
    engine-concurrent        the same with ``tool_workers=32``: the round's ``env.step`` calls run in threads
    trl-environment-factory  TRL's ``GRPOTrainer`` built with ``environment_factory``, one batch of
                             ``_generate_and_score_completions`` timed from its start to the end of its
                             ``_generate`` (env pool, ``reset``, prompt rendering, generation, response parsing
                             and ``_tool_call_loop``); the scoring after it (rewards, advantages) is not timed
    =======================  ==================================================================================

Each row reports episodes, answered episodes, model turns, executed tool calls, generated (model) tokens, wall time and
the rates; per tool latency, the ratios of episodes/s: concurrent over sequential (B/A), sequential over TRL
(A/C) and concurrent over TRL (B/C). Each row keeps the median of ``--repeats`` timed runs. A and B sample
with the same seed and batches, so they normally generate the same tokens and B/A is the effect of
concurrent tools alone; C samples its own tokens and plays by its own rules (below), so compare its rates
and read its counts.

Slow tools: ``--tool-latency-ms 0,50`` runs every row once per latency. A non-zero latency wraps the env
in :class:`ToolLatency`, which sleeps that long per executed tool call after each ``step`` (``time.sleep``
releases the GIL, as a sandbox or a retrieval service call does). It models tools slower than the
in-process BM25 search (~2 ms), such as code in a sandbox; it is a model of latency, not a measured tool.
All environments share one in-process search index (thread-safe), built before any clock starts.

The warm start: the tiny model (:mod:`trainers.tiny_model`) fine-tuned for ``--sft-steps`` SFT steps on
lookup demonstrations (search with the question, answer from the results; :mod:`trainers.pipeline`),
cached under ``$AGENTRL_CACHE/bench`` (default ``~/.cache/agentrl/bench``). An untrained model rarely
emits a well-formed tool call, and a loop that calls no tools measures nothing of interest. The warm
model is still weak: some of its tool calls are malformed JSON. With the tokenizer that splits digit runs
off, 100 steps left every greedy query of four held-out questions looping past the turn limit (no tool
call); 200 steps give well-formed calls in three of them.

What TRL's loop needs from this model, and how it differs (TRL 1.16, transformers 5.17):

- A chat template that renders assistant ``tool_calls`` (TRL checks with ``supports_tool_calling``) and a
  ``response_template`` for ``parse_response``. The tiny template renders ``content`` only, so TRL gets a
  copy of the tokenizer whose template renders each call as ``<tool_call>{"name": ..., "arguments": ...}
  </tool_call>`` (the text the envs parse) and everything else as the tiny template does, with TRL's Qwen3
  ``response_template``. The template lists no tool schemas: the engine's prompts (``prompt_style="task"``)
  do not either, and the warm model never saw them.
- TRL ends a turn only at the model's EOS ids, and its ``max_new_tokens`` is the whole completion budget.
  The copy of the model it gets has ``generation_config.eos_token_id`` set to the engine's stop ids
  (``<|im_end|>``, ``</tool_call>``, ``</answer>``) and ``generation_kwargs={"max_new_tokens": ...}`` set to
  the per-turn limit. TRL then appends the tool turn right after ``</tool_call>`` (its tool suffix starts
  after an EOS), where the engine first closes the turn with ``<|im_end|>``: the contexts differ by that token.
- A turn whose tool call does not parse (bad JSON) is, for TRL, plain text without tool calls: the rollout
  ends there. The engine's env answers it with a format-error observation and the episode goes on. With a
  weak model TRL's rollouts are therefore shorter and answer less often (see ``answered`` and ``turns``);
  with the tiny model on CPU a batched ``generate`` costs about the same per decoding step whatever the batch,
  so wall time follows the number of generation rounds, and C's rates at 0 ms latency reflect less work.
- TRL runs the tools of a batch one rollout after another (async tools run concurrently only within one
  rollout's calls), so every call's latency is paid in turn, as in row A.

Example:
    python -m benchmarks.rollout_throughput                                  # 8 tasks x 4, latency 0 and 50 ms
    python -m benchmarks.rollout_throughput --tasks 2 --group 2 --tool-latency-ms 20 --json throughput.json
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.table import Table

from agentgym_envs.policies.base import tool_call_action  # (importing agentgym_envs registers the ids)
from agentgym_envs.search import Retriever
from tasks import Task

ENV_ID = "agentrl/Search-v0"
"""The environment every row plays (the warm start's demonstrator is Search's)."""

ROWS = ("engine-sequential", "engine-concurrent", "trl-environment-factory")
"""Every row, in display order: A, B, C."""

CONCURRENT_TOOL_WORKERS = 32
"""Threads running ``env.step`` in the concurrent row."""

TOOL_CALLING_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}"
    "{{- '<tool_call>' + {'name': call.function.name, 'arguments': call.function.arguments} | tojson"
    " + '</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""The tiny model's ChatML template plus assistant ``tool_calls`` rendered as Hermes ``<tool_call>`` JSON (for TRL)."""


@dataclass(frozen=True)
class Settings:
    """What every row shares.

    Attributes:
        tasks: Held-out Search questions played.
        group: Episodes per task.
        max_turns: Most model turns per episode (TRL: ``max_tool_calling_iterations = max_turns - 1``).
        max_tokens_per_turn: Most tokens generated in one turn.
        max_context_tokens: Token budget of prompt plus all turns (TRL: ``max_completion_length``, the budget
            after the prompt; the prompts are a few dozen tokens).
        sft_steps: Warm-start SFT steps.
        train_questions: Generated training questions the demonstrations are played on.
        seed: Seed of the warm start and of each row's sampling.
    """

    tasks: int = 8
    group: int = 4
    max_turns: int = 3
    max_tokens_per_turn: int = 48
    max_context_tokens: int = 1024
    sft_steps: int = 200
    train_questions: int = 400
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("tasks", "group", "max_turns", "max_tokens_per_turn", "sft_steps", "train_questions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Row:
    """What one loop did with the batch, and how fast.

    Attributes:
        name: One of :data:`ROWS`.
        tool_latency_ms: Latency added per tool call.
        episodes: Episodes played.
        answered: Episodes that ended with an ``<answer>``.
        turns: Model turns over all episodes.
        tool_calls: Tool calls executed.
        generated_tokens: Tokens the model generated (observation and template tokens excluded).
        wall_s: Timed wall-clock seconds.
        episodes_per_s: ``episodes / wall_s``.
        tokens_per_s: ``generated_tokens / wall_s``.
        tool_calls_per_s: ``tool_calls / wall_s``.
    """

    name: str
    tool_latency_ms: float
    episodes: int
    answered: int
    turns: int
    tool_calls: int
    generated_tokens: int
    wall_s: float
    episodes_per_s: float = 0.0
    tokens_per_s: float = 0.0
    tool_calls_per_s: float = 0.0

    @classmethod
    def measured(cls, name: str, latency_ms: float, episodes: int, answered: int, turns: int, tool_calls: int,
                 generated_tokens: int, wall_s: float) -> Row:
        """A row with its rates computed from the counts and the wall time."""
        return cls(name, latency_ms, episodes, answered, turns, tool_calls, generated_tokens, wall_s,
                   episodes / wall_s, generated_tokens / wall_s, tool_calls / wall_s)


@dataclass
class Report:
    """Everything one run measured.

    Attributes:
        rows: Measured rows, by latency then :data:`ROWS` order.
        ratios: Per latency (ms, as text), episodes/s ratios ``B/A``, ``A/C`` and ``B/C``.
        settings: The shared settings.
        repeats: Timed runs per row (the median is reported).
        warm_model: Where the warm-started model is cached.
        machine: CPU count, torch threads, platform and Python version.
    """

    rows: list[Row] = field(default_factory=list)
    ratios: dict[str, dict[str, float]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    warm_model: str = ""
    machine: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------- environment


class ToolLatency(gym.Wrapper):
    """Adds ``latency_s`` of sleep per tool call to each ``step``, modelling slower tools than the env's own.

    Args:
        env: The environment.
        latency_s: Seconds slept per tool call the step ran.
    """

    def __init__(self, env: gym.Env, latency_s: float) -> None:
        super().__init__(env)
        self.latency_s = latency_s

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the env, then sleep ``latency_s`` per tool call it made."""
        result = self.env.step(action)
        time.sleep(self.latency_s * len(result[4].get("tool_calls", ())))
        return result


@dataclass(frozen=True)
class Workload:
    """The tasks every row plays, and one search index shared by all their environments.

    Attributes:
        tasks: The questions.
        retriever: The in-process BM25 index (thread-safe; loaded once, not once per environment).
    """

    tasks: Sequence[Task]
    retriever: Retriever

    @classmethod
    def load(cls, count: int) -> Workload:
        """The first ``count`` single-hop questions of the held-out Search test split, and their index."""
        from agentgym_envs.search import BM25Retriever, resolve_corpus
        from agentgym_envs.search.env import DEFAULT_CORPUS
        from trainers.pipeline import PipelineConfig, search_job

        tasks = search_job(PipelineConfig(envs=["search"])).held_out
        if count > len(tasks):
            raise ValueError(f"tasks: expected at most {len(tasks)} (the held-out single-hop questions), got {count}")
        return cls(tasks[:count], BM25Retriever(resolve_corpus(DEFAULT_CORPUS)))

    def make_env(self, latency_ms: float) -> gym.Env:
        """Search-v0 over the tasks, the question alone as the prompt, slowed by ``latency_ms`` per tool call."""
        env = gym.make(ENV_ID, tasks=list(self.tasks), prompt_style="task", retriever=self.retriever)
        return ToolLatency(env, latency_ms / 1000.0) if latency_ms > 0 else env


# -------------------------------------------------------------------------------------- warm model


def warm_model_dir(settings: Settings) -> Path:
    """Where the warm-started model of ``settings`` is cached (keyed by the tiny model and the SFT recipe)."""
    from trainers.tiny_model import TinyModelConfig

    recipe = {"tiny": TinyModelConfig(seed=settings.seed).key(), "sft_steps": settings.sft_steps,
              "train_questions": settings.train_questions}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    root = Path(os.environ.get("AGENTRL_CACHE", Path.home() / ".cache" / "agentrl"))
    return root / "bench" / f"search-warm-{key}"


def load_warm_model(settings: Settings):
    """The tiny model warm-started on lookup demonstrations, built and cached the first time.

    Returns:
        ``(model, tokenizer)``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = warm_model_dir(settings)
    if not (directory / "config.json").exists():
        build_warm_model(settings, directory)
    return AutoModelForCausalLM.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)


def build_warm_model(settings: Settings, directory: Path) -> None:
    """SFT the tiny model on solved, grounded lookup demonstrations and save it to ``directory``."""
    import torch

    from trainers.pipeline import PipelineConfig, demonstrations, env_jobs, warm_start
    from trainers.tiny_model import TinyModelConfig, load_or_build_tiny_model, save_model_folder

    config = PipelineConfig(envs=["search"], search_train_tasks=settings.train_questions, sft_steps=settings.sft_steps)
    torch.manual_seed(settings.seed)
    model, tokenizer = load_or_build_tiny_model(TinyModelConfig(seed=settings.seed))
    with tempfile.TemporaryDirectory() as scratch:
        warm_start(model, tokenizer, demonstrations(tokenizer, env_jobs(config)), config, settings.seed,
                   Path(scratch))
    save_model_folder(model, tokenizer, directory)


# ------------------------------------------------------------------------------------- engine rows


def run_engine(model, tokenizer, workload: Workload, settings: Settings, latency_ms: float,
               tool_workers: int) -> Row:
    """Rows A and B: one ``RolloutEngine.run`` over every episode, timed whole."""
    import torch

    from trainers.generation import TransformersGenerator
    from trainers.rollout import EnvPool, RolloutConfig, RolloutEngine, group_requests

    config = RolloutConfig(max_turns=settings.max_turns, max_tokens_per_turn=settings.max_tokens_per_turn,
                           max_context_tokens=settings.max_context_tokens, tool_workers=tool_workers)
    pool = EnvPool(lambda env_id: workload.make_env(latency_ms))
    engine = RolloutEngine(TransformersGenerator(model, tokenizer.pad_token_id), tokenizer, pool, config)
    requests = group_requests([(ENV_ID, task) for task in workload.tasks], settings.group, settings.seed)
    try:
        pool.take(requests)  # build the envs before the clock starts (TRL's are built before too)
        torch.manual_seed(settings.seed)
        started = time.perf_counter()
        episodes = engine.run(requests)
        wall_s = time.perf_counter() - started
    finally:
        pool.close()
    name = "engine-sequential" if tool_workers == 1 else "engine-concurrent"
    return Row.measured(name, latency_ms, len(episodes), sum(e.terminated for e in episodes),
                        sum(len(e.turns) for e in episodes), sum(len(e.tool_calls) for e in episodes),
                        sum(sum(e.env_mask) for e in episodes), wall_s)


# ---------------------------------------------------------------------------------------- TRL row


class SearchTools:
    """A Search-v0 episode as TRL's ``environment_factory`` wants it: ``reset`` plus one public method per tool.

    Each tool call steps the wrapped env with the same ``<tool_call>`` action the engine's model would emit,
    so both loops run the same tool code, latency wrapper included.

    Args:
        workload: The tasks ``reset`` can be asked for (by id) and the search index.
        latency_ms: Latency added per tool call (see :class:`ToolLatency`).
    """

    def __init__(self, workload: Workload, latency_ms: float) -> None:
        self._env = workload.make_env(latency_ms)
        self._tasks = {task.id: task for task in workload.tasks}
        self.tool_calls = 0

    def reset(self, prompt: list[dict[str, str]], task_id: str) -> str:
        """Start an episode on ``task_id``; the question is appended to the (empty) user message."""
        observation, _ = self._env.reset(options={"task": self._tasks[task_id]})
        self.tool_calls = 0
        return observation

    def search(self, query: str, k: int = 3) -> str:
        """Search the article collection; returns ranked doc ids, titles and snippets.

        Args:
            query: Keywords to look for (names, places, dates).
            k: How many results to return.
        """
        return self._call(tool_call_action("search", query=query, k=k))

    def open(self, doc_id: str, page: int = 1) -> str:
        """Read an article by doc id, one page at a time.

        Args:
            doc_id: A doc id from the search results.
            page: Page of the article, from 1.
        """
        return self._call(tool_call_action("open", doc_id=doc_id, page=page))

    def _call(self, action: str) -> str:
        self.tool_calls += 1
        observation, *_ = self._env.step(action)
        return observation

    def _answer(self, content: str) -> float:
        """Step the env with the final answer (if the text holds one) and return its reward."""
        if "<answer>" not in content:
            return 0.0
        return self._env.step(content)[1]

    def _close(self) -> None:
        self._env.close()


def answer_reward(completions: list[list[dict[str, Any]]], environments: list[SearchTools],
                  **_: Any) -> list[float]:
    """TRL reward function: the env's verifier reward of each rollout's final answer (0 without one)."""
    return [env._answer(messages[-1].get("content") or "") for messages, env in zip(completions, environments,
                                                                                     strict=True)]


def trl_tokenizer(tokenizer):
    """A copy of ``tokenizer`` that TRL's tool loop accepts: tool-call template and Qwen3 response template."""
    from trl.chat_template_utils import qwen3_template

    copied = copy.deepcopy(tokenizer)
    copied.chat_template = TOOL_CALLING_TEMPLATE
    copied.response_template = qwen3_template
    return copied


def build_trl_trainer(model, tokenizer, tasks: Sequence[Task], settings: Settings,
                      environments: list[SearchTools], output_dir: str):
    """A ``GRPOTrainer`` with ``environment_factory`` whose batch is every episode of the benchmark.

    Args:
        model: The warm model (a copy is given to TRL, with the engine's stop ids as EOS ids).
        tokenizer: Its tokenizer (a copy with a tool-calling template is given to TRL).
        tasks: The tasks.
        settings: Shared settings.
        environments: One ready environment per episode; the factory hands them out (TRL builds its pool of
            instances inside the batch: the engine's are built before its clock starts, so TRL's are too).
        output_dir: TRL's output folder (nothing is saved).
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from trainers.rollout import stop_token_ids

    policy = copy.deepcopy(model)
    policy.generation_config.eos_token_id = stop_token_ids(tokenizer)
    ready = list(environments)
    args = GRPOConfig(
        output_dir=output_dir, per_device_train_batch_size=len(tasks) * settings.group,
        num_generations=settings.group, max_completion_length=settings.max_context_tokens,
        max_tool_calling_iterations=settings.max_turns - 1,
        generation_kwargs={"max_new_tokens": settings.max_tokens_per_turn}, temperature=1.0, top_p=1.0, top_k=0,
        use_cpu=True, report_to=[], save_strategy="no", seed=settings.seed, max_steps=1, disable_tqdm=True)
    return GRPOTrainer(model=policy, reward_funcs=answer_reward, args=args,
                       train_dataset=Dataset.from_list(trl_inputs(tasks, 1)),
                       processing_class=trl_tokenizer(tokenizer), environment_factory=ready.pop)


def trl_inputs(tasks: Sequence[Task], group: int) -> list[dict[str, Any]]:
    """Dataset rows, ``group`` consecutive rows per task: an empty user message (``reset`` fills it) and the task id."""
    return [{"prompt": [{"role": "user", "content": ""}], "task_id": task.id} for task in tasks for _ in range(group)]


def run_trl(model, tokenizer, workload: Workload, settings: Settings, latency_ms: float) -> Row:
    """Row C: one batch of TRL's own generation and tool loop over every episode."""
    import torch

    tasks = workload.tasks
    environments = [SearchTools(workload, latency_ms) for _ in range(len(tasks) * settings.group)]
    try:
        with tempfile.TemporaryDirectory() as output_dir:
            trainer = build_trl_trainer(model, tokenizer, tasks, settings, environments, output_dir)
            trainer.model.train()
            trainer._generate, captured = _timed(trainer._generate)
            torch.manual_seed(settings.seed)
            started = time.perf_counter()
            trainer._generate_and_score_completions(trl_inputs(tasks, settings.group))
    finally:
        for environment in environments:
            environment._close()
    _, _, tool_mask, completions, *_ = captured["output"]
    answered = sum("<answer>" in (messages[-1].get("content") or "") for messages in completions)
    turns = sum(message["role"] == "assistant" for messages in completions for message in messages)
    return Row.measured("trl-environment-factory", latency_ms, len(completions), answered, turns,
                        sum(environment.tool_calls for environment in trainer.environments),
                        sum(map(sum, tool_mask)), captured["finished"] - started)


def _timed(method: Callable[..., Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``method`` wrapped to record its output and the time it returned."""
    captured: dict[str, Any] = {}

    def wrapper(*args: Any) -> Any:
        captured["output"] = method(*args)
        captured["finished"] = time.perf_counter()
        return captured["output"]

    return wrapper, captured


# ------------------------------------------------------------------------------------------ runner


def run_benchmark(settings: Settings, latencies_ms: Sequence[float] = (0.0, 50.0),
                  rows: Sequence[str] = ROWS, repeats: int = 3) -> Report:
    """Warm-start (or load) the model and measure ``rows`` at each tool latency.

    Args:
        settings: Shared settings.
        latencies_ms: Latency added per tool call, one set of rows each.
        rows: Which of :data:`ROWS` to measure.
        repeats: Timed runs per row; the row keeps the run of median wall time (every run of a row samples
            with the same seed, so the runs differ in time only).
    """
    import torch

    report = Report(settings=asdict(settings), repeats=repeats, warm_model=str(warm_model_dir(settings)), machine={
        "cpus": str(os.cpu_count()), "torch_threads": str(torch.get_num_threads()),
        "platform": platform.platform(), "python": platform.python_version()})
    model, tokenizer = load_warm_model(settings)
    workload = Workload.load(settings.tasks)
    try:
        run_engine(model, tokenizer, workload, Settings(group=1, max_turns=1), 0.0, 1)  # warm-up, untimed
        for latency in latencies_ms:
            for name in rows:
                runs = [measure_row(name, model, tokenizer, workload, settings, latency) for _ in range(repeats)]
                report.rows.append(sorted(runs, key=lambda row: row.wall_s)[len(runs) // 2])
    finally:
        workload.retriever.close()
    report.ratios = ratios(report.rows)
    return report


def measure_row(name: str, model, tokenizer, workload: Workload, settings: Settings, latency_ms: float) -> Row:
    """Measure one row at one latency."""
    if name == "trl-environment-factory":
        return run_trl(model, tokenizer, workload, settings, latency_ms)
    workers = 1 if name == "engine-sequential" else CONCURRENT_TOOL_WORKERS
    return run_engine(model, tokenizer, workload, settings, latency_ms, workers)


def ratios(rows: Sequence[Row]) -> dict[str, dict[str, float]]:
    """Per latency, the episodes/s ratios B/A, A/C and B/C among the rows measured."""
    result: dict[str, dict[str, float]] = {}
    for latency in dict.fromkeys(row.tool_latency_ms for row in rows):
        rate = {row.name: row.episodes_per_s for row in rows if row.tool_latency_ms == latency}
        pairs = {"B/A": ("engine-concurrent", "engine-sequential"), "A/C": ("engine-sequential",
                 "trl-environment-factory"), "B/C": ("engine-concurrent", "trl-environment-factory")}
        result[f"{latency:g}"] = {label: rate[top] / rate[bottom] for label, (top, bottom) in pairs.items()
                                  if top in rate and bottom in rate}
    return result


# ------------------------------------------------------------------------------------------ report


def render(report: Report, console: Console) -> None:
    """Print the table and the ratios."""
    settings = report.settings
    title = (f"Rollout throughput on {ENV_ID}: {settings['tasks']} tasks x {settings['group']}, "
             f"<= {settings['max_turns']} turns of <= {settings['max_tokens_per_turn']} tokens, "
             f"median of {report.repeats} ({report.machine['cpus']} CPUs, {report.machine['torch_threads']} "
             "torch threads)")
    table = Table(title=title)
    columns = ("tool ms", "row", "episodes", "answered", "turns", "tool calls", "gen tokens", "wall s",
               "episodes/s", "tokens/s", "calls/s")
    for column in columns:
        table.add_column(column, justify="left" if column == "row" else "right", no_wrap=True)
    for row in report.rows:
        table.add_row(f"{row.tool_latency_ms:g}", row.name, str(row.episodes), str(row.answered), str(row.turns),
                      str(row.tool_calls), str(row.generated_tokens), f"{row.wall_s:.2f}", f"{row.episodes_per_s:.2f}",
                      f"{row.tokens_per_s:,.0f}", f"{row.tool_calls_per_s:.1f}")
    console.print(table)
    for latency, values in report.ratios.items():
        shown = ", ".join(f"{label} {value:.2f}x" for label, value in values.items())
        console.print(f"tool latency {latency} ms, episodes/s ratios: {shown}")
    console.print("A = engine-sequential, B = engine-concurrent, C = trl-environment-factory")


def write_json(report: Report, path: Path) -> None:
    """Write the report as JSON."""
    path.write_text(json.dumps(asdict(report), indent=2) + "\n")


def parse_latencies(text: str) -> list[float]:
    """``"0,50"`` -> ``[0.0, 50.0]``; each latency must be >= 0."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated milliseconds like 0,50, got {text!r}") from exc
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected one or more latencies >= 0 ms, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rollout_throughput",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=defaults.tasks, help="held-out Search questions played")
    parser.add_argument("--group", type=int, default=defaults.group, help="episodes per question")
    parser.add_argument("--max-turns", type=int, default=defaults.max_turns, help="most model turns per episode")
    parser.add_argument("--max-tokens-per-turn", type=int, default=defaults.max_tokens_per_turn,
                        help="most tokens generated per turn")
    parser.add_argument("--tool-latency-ms", type=parse_latencies, default=[0.0, 50.0], metavar="MS[,MS...]",
                        help="sleep added per tool call (models slow tools); one set of rows per value")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS), help="rows to measure")
    parser.add_argument("--sft-steps", type=int, default=defaults.sft_steps, help="warm-start SFT steps")
    parser.add_argument("--train-questions", type=int, default=defaults.train_questions,
                        help="generated questions the warm-start demonstrations are played on")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="warm-start and sampling seed")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row (the median is reported)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = build_parser().parse_args(argv)
    try:
        settings = Settings(tasks=args.tasks, group=args.group, max_turns=args.max_turns,
                            max_tokens_per_turn=args.max_tokens_per_turn, sft_steps=args.sft_steps,
                            train_questions=args.train_questions, seed=args.seed)
    except ValueError as exc:
        raise SystemExit(f"--{str(exc).replace('_', '-')}") from exc
    if args.repeats < 1:
        raise SystemExit(f"--repeats: expected >= 1, got {args.repeats}")
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    report = run_benchmark(settings, args.tool_latency_ms, args.rows, args.repeats)
    render(report, Console(width=None if sys.stdout.isatty() else 140))
    if args.json is not None:
        write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
