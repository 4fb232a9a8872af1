"""Multi-turn rollout throughput: this project's rollout engines against TRL's own tool loop, side by side.

One tiny model, warm-started so that it really calls tools, plays the same Search-v0 tasks (held-out
questions, ``G`` episodes each; default 32 x 8 = 256 episodes) through each row's loop, with the same
sampling (temperature 1, no top-k/top-p), the same per-turn token limit, the same stop tokens and the same
turn limit:

    =======================  ==================================================================================
    row                      what is timed
    =======================  ==================================================================================
    engine-async             ``RolloutEngine.run`` with ``schedule="async"`` and ``cache_prefixes=True``
                             (the engine's defaults): whichever episodes wait for a turn are generated
                             together while the other episodes' tools run (32 tool threads), and each
                             episode's KV cache is kept between its turns
    engine-async-nocache     the same with ``cache_prefixes=False``: every turn re-encodes its whole context
    engine-rounds            ``schedule="rounds"``, ``cache_prefixes=False`` (the engine before issue 22):
                             every running episode generates one turn, then every env steps (32 threads),
                             then the next round
    trl-environment-factory  TRL's ``GRPOTrainer`` built with ``environment_factory``, one batch of
                             ``_generate_and_score_completions`` timed from its start to the end of its
                             ``_generate`` (env pool, ``reset``, prompt rendering, generation, response parsing
                             and ``_tool_call_loop``); the scoring after it (rewards, advantages) is not timed
    =======================  ==================================================================================

``engine-rounds`` is the round-synchronous schedule of the engine before issue 22 on the generator of today
(its own decode loop, rows leaving the batch as they finish), not the generator of then (``model.generate``,
with which the issue measured 0.70x TRL's episodes/s at 0 ms on 32 episodes).

Each row reports episodes, answered episodes, model turns, executed tool calls, generated (model) tokens, wall
time, the process's CPU time and the rates, and how the model was driven: generation calls, contexts per call
(the batches the scheduler formed; TRL: rows per ``model.generate``), the seconds spent generating and (engine
rows) the tokens the generator fed to the model (prefill and decode: what prefix reuse saves). Per tool latency the
ratios of episodes/s and of generated tokens/s: async/rounds, async/trl, rounds/trl, and async/nocache
(prefix reuse alone) and nocache/rounds (scheduling alone). The issue's targets are printed with pass/fail:
async/trl episodes/s >= 1.5 at 0 ms and >= 2 under heavy-tailed tools. Each row keeps the median of
``--repeats`` timed runs; the repeats of a latency are interleaved over the rows (row A, B, C, D, then again),
so that load from other processes falls on every row alike.

Torch threads: one by default (``--threads``; 0 leaves torch's own choice). The model shares the CPUs with the
tool threads and, on a shared machine, with other jobs; torch's threads meet at every operation, so when
another process holds one of the cores every operation waits for it. On this 2-core machine shared with
other sessions, torch's default (2 threads) took 14.7 s for the engine-rounds batch in one run and 86.8 s for
the same batch (same tokens, 3 generation calls) a few minutes later; with one thread, the runs of a row stay
within about 25% of each other.

Measured here (2-core CPU shared with other sessions, one torch thread, median of 3; episodes/s, and in
brackets generated tokens/s; the last two columns are of episodes/s; a second run 25 minutes later gave
async/trl 1.67x, 5.06x and 7.48x):

    ============  ============  =============  ===========  =============  ============  ==========
    tool latency  engine-async  engine-rounds  TRL          async/trl      async/rounds  rounds/trl
    ============  ============  =============  ===========  =============  ============  ==========
    0 ms          76 (2,886)    70 (2,643)     43 (1,504)   1.77x (1.92x)  1.09x         1.63x
    50 ms         86 (3,245)    64 (2,442)     16 (578)     5.19x (5.62x)  1.33x         3.91x
    lognormal:50  78 (2,957)    59 (2,240)     11 (388)     7.04x (7.62x)  1.32x         5.34x
    ============  ============  =============  ===========  =============  ============  ==========

Where the time goes: generation is ~90% of every engine row's wall time (``gen s``). The tools are a small part
of the work here: 195 tool calls over 256 episodes, run by 32 threads, sleep about 0.5 s in all at
``lognormal:50`` against ~3 s of generation, so the async schedule can gain at most that over rounds (rounds
pays the slowest call of each of its 3 rounds; async forms 4-5 generation calls instead of 3 and hides most of
it). At 0 ms the async schedule forms the very batches of rounds (256, 256 and 28 contexts: every step returns
within the 10 ms batch window), so async/rounds is prefix reuse alone there. With slower tools
(``lognormal:200``, one run) async/rounds was 1.49x and async/trl 16x. TRL pays every call in turn (195 x 50 ms
= 9.8 s at 50 ms), which is where most of async/trl comes from under latency. At 0 ms, the engine's generator
needs ~3.3 CPU s where TRL's ``model.generate`` needs ~5.7 for 16% fewer turns. Prefix reuse feeds 28% fewer
tokens (43k instead of 60k) and saves 1-12% of the time at 0 ms (three runs): with contexts of a few hundred
tokens and 48-token turns on a tiny model, decoding, not re-encoding, is the cost; it matters more with long
contexts and large models. Under latency, async/nocache measured 1.18-1.34x in three full runs (1.09x in one
separate check), with the same batches: the async schedule's mixed-turn batches (e.g. 256, 7, 91, 171 and 15
contexts at 50 ms against 256, 256 and 28 at 0 ms) pad only 9% more prefill tokens without reuse, so why reuse
gains more there is not established.

Tool latency (``--tool-latency 0,50,lognormal:50``, one set of rows per value): ``0`` adds nothing; ``50`` adds
a fixed 50 ms per executed tool call; ``lognormal:50`` draws each call's latency from a lognormal with median
50 ms and p99 10x the median (sigma = ln 10 / 2.326 = 0.99; mean 1.63x the median), from a seeded generator
per environment (so episode ``i`` of every engine row sees the same draws for its ``k``-th call as long as
both rows made the same calls before). :class:`ToolLatency` sleeps after each ``step`` (``time.sleep``
releases the GIL, as a sandbox or a retrieval service call does). It models tools slower than the in-process
BM25 search (~2 ms), such as code in a sandbox; it is a model of latency, not a measured tool. All
environments share one in-process search index (thread-safe), built before any clock starts.

The tasks: the 25 single-hop questions of the Search ``test`` split, then those of ``dev`` (50 in all; the
warm start was trained on single-hop lookups generated from the bundled world, none of them a dev or test
question). The default 32 tasks are the 25 test questions and the first 7 dev ones.

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
  TRL runs with ``bf16=False`` (its default is True), so that every row computes in float32.
- A turn whose tool call does not parse (bad JSON) is, for TRL, plain text without tool calls: the rollout
  ends there. The engine's env answers it with a format-error observation and the episode goes on. With a
  weak model TRL's rollouts are therefore shorter and answer less often (see ``answered``, ``turns`` and
  ``gen tokens``): its episodes/s reflect less work per episode; generated tokens/s compares the work done.
- TRL generates every rollout's turn in one ``model.generate`` over the whole batch (all 256 rows at once,
  re-encoding each context every turn); the engine's generator splits a call into batches of
  ``--batch-size`` contexts (64, its default; 256 measured the same here, within noise).
- TRL runs the tools of a batch one rollout after another (async tools run concurrently only within one
  rollout's calls), so every call's latency is paid in turn.

On a GPU, ``--device cuda`` moves the model there (TRL then runs with ``use_cpu=False``); the envs and the
search index stay on the CPU.

Example:
    python -m benchmarks.rollout_throughput                        # 32 tasks x 8; 0 ms, 50 ms, lognormal:50
    python -m benchmarks.rollout_throughput --tasks 2 --group 2 --tool-latency lognormal:20 --json rt.json
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import itertools
import json
import math
import os
import platform
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.table import Table

from agentgym_envs.policies.base import tool_call_action  # (importing agentgym_envs registers the ids)
from agentgym_envs.search import Retriever
from tasks import Task
from tasks.locks import file_lock, lock_path

ENV_ID = "agentrl/Search-v0"
"""The environment every row plays (the warm start's demonstrator is Search's)."""

TRL_ROW = "trl-environment-factory"
"""TRL's own tool loop."""

ENGINE_ROWS: dict[str, tuple[str, bool]] = {
    "engine-async": ("async", True),
    "engine-async-nocache": ("async", False),
    "engine-rounds": ("rounds", False),
}
"""Each engine row's ``(RolloutConfig.schedule, RolloutConfig.cache_prefixes)``."""

ROWS = (*ENGINE_ROWS, TRL_ROW)
"""Every row, in display order."""

TOOL_WORKERS = 32
"""Threads running ``env.step`` in every engine row."""

RATIOS: dict[str, tuple[str, str]] = {
    "async/rounds": ("engine-async", "engine-rounds"),
    "async/trl": ("engine-async", TRL_ROW),
    "rounds/trl": ("engine-rounds", TRL_ROW),
    "async/nocache": ("engine-async", "engine-async-nocache"),
    "nocache/rounds": ("engine-async-nocache", "engine-rounds"),
}
"""Each ratio's ``(numerator row, denominator row)``."""

LOGNORMAL_SIGMA = math.log(10) / NormalDist().inv_cdf(0.99)
"""Sigma of the heavy-tailed latency: its p99 is 10x its median (~0.99)."""

HELD_OUT_SPLITS = ("test", "dev")
"""Where the benchmark's questions come from, in order (single-hop questions only)."""


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
        batch_size: Most contexts per batch of the engine's generator (TRL generates the whole batch at once).
        sft_steps: Warm-start SFT steps.
        train_questions: Generated training questions the demonstrations are played on.
        seed: Seed of the warm start, of each row's sampling and of the tool latencies.
        device: Where the model runs (``cpu``, ``cuda``).
    """

    tasks: int = 32
    group: int = 8
    max_turns: int = 3
    max_tokens_per_turn: int = 48
    max_context_tokens: int = 1024
    batch_size: int = 64
    sft_steps: int = 200
    train_questions: int = 400
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("tasks", "group", "max_turns", "max_tokens_per_turn", "batch_size", "sft_steps",
                     "train_questions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Row:
    """What one loop did with the batch, and how fast.

    Attributes:
        name: One of :data:`ROWS`.
        tool_latency: The latency added per tool call (:attr:`ToolLatencyModel.label`).
        episodes: Episodes played.
        answered: Episodes that ended with an ``<answer>``.
        turns: Model turns over all episodes.
        tool_calls: Tool calls executed.
        generated_tokens: Tokens the model generated (observation and template tokens excluded).
        wall_s: Timed wall-clock seconds.
        cpu_s: CPU seconds the process used meanwhile, all threads. Sleeping tools use none, so with one torch
            thread and 0 ms tools it is close to ``wall_s``; far below, the process waited for CPUs that other
            processes held (a noisy measurement).
        generation_calls: Calls to the generator (engine) or to ``model.generate`` (TRL).
        generation_contexts: Contexts over all those calls.
        generation_s: Seconds spent in those calls.
        fed_tokens: Tokens the engine's generator fed to the model (prefill and decode; 0 for TRL).
        reused_tokens: Context tokens the engine's generator took from an episode's KV cache instead.
        episodes_per_s: ``episodes / wall_s``.
        tokens_per_s: ``generated_tokens / wall_s``.
        tool_calls_per_s: ``tool_calls / wall_s``.
        contexts_per_call: ``generation_contexts / generation_calls``: the batches the loop formed.
    """

    name: str
    tool_latency: str
    episodes: int
    answered: int
    turns: int
    tool_calls: int
    generated_tokens: int
    wall_s: float
    cpu_s: float = 0.0
    generation_calls: int = 0
    generation_contexts: int = 0
    generation_s: float = 0.0
    fed_tokens: int = 0
    reused_tokens: int = 0
    episodes_per_s: float = 0.0
    tokens_per_s: float = 0.0
    tool_calls_per_s: float = 0.0
    contexts_per_call: float = 0.0

    @classmethod
    def measured(cls, name: str, latency: str, episodes: int, answered: int, turns: int, tool_calls: int,
                 generated_tokens: int, wall_s: float, *, cpu_s: float = 0.0, meter: GenerationMeter | None = None,
                 fed_tokens: int = 0, reused_tokens: int = 0) -> Row:
        """A row with its rates computed from the counts, the wall time and the generation ``meter``."""
        meter = meter or GenerationMeter()
        return cls(name, latency, episodes, answered, turns, tool_calls, generated_tokens, wall_s, cpu_s, meter.calls,
                   meter.contexts, meter.seconds, fed_tokens, reused_tokens, episodes / wall_s,
                   generated_tokens / wall_s, tool_calls / wall_s, meter.contexts / meter.calls if meter.calls else 0.0)


@dataclass(frozen=True)
class Target:
    """A ratio the issue asks for, at the latencies it applies to.

    Attributes:
        ratio: One of :data:`RATIOS` (of episodes/s).
        heavy_tailed: Applies to the lognormal latencies if True, to 0 ms if False.
        at_least: The ratio asked for.
    """

    ratio: str
    heavy_tailed: bool
    at_least: float

    def applies(self, latency: ToolLatencyModel) -> bool:
        """Whether the target is checked at ``latency``."""
        return latency.lognormal if self.heavy_tailed else latency == ToolLatencyModel(0.0)


TARGETS = (Target("async/trl", heavy_tailed=False, at_least=1.5), Target("async/trl", heavy_tailed=True, at_least=2.0))
"""Issue 22: >= 1.5x TRL's loop at 0 ms and >= 2x under heavy-tailed tools (episodes/s)."""


@dataclass
class Report:
    """Everything one run measured.

    Attributes:
        rows: Measured rows, by latency then :data:`ROWS` order.
        ratios: Per latency label, per ratio of :data:`RATIOS`, ``{"episodes": ..., "tokens": ...}``: the
            ratios of episodes/s and of generated tokens/s.
        targets: Per :data:`TARGETS` entry and applicable latency: the ratio measured and whether it passed.
        settings: The shared settings.
        repeats: Timed runs per row (the median is reported).
        wall_s: Wall time of the whole run (warm start or load, warm-up and every timed run).
        warm_model: Where the warm-started model is cached.
        machine: CPU count, torch threads, device, platform and Python version.
    """

    rows: list[Row] = field(default_factory=list)
    ratios: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    wall_s: float = 0.0
    warm_model: str = ""
    machine: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ latency


@dataclass(frozen=True)
class ToolLatencyModel:
    """Latency added per tool call: a fixed ``median_ms``, or lognormal around it (p99 = 10x the median).

    Attributes:
        median_ms: The fixed latency, or the lognormal's median.
        lognormal: Draw each call's latency (heavy-tailed) instead of a fixed one.
    """

    median_ms: float
    lognormal: bool = False

    def __post_init__(self) -> None:
        if not self.median_ms >= 0 or (self.lognormal and self.median_ms == 0):
            raise ValueError(f"tool latency: expected a median >= 0 ms (> 0 for lognormal), got {self.median_ms}")

    @property
    def label(self) -> str:
        """``"50"`` or ``"lognormal:50"``: what :meth:`parse` reads back."""
        return f"lognormal:{self.median_ms:g}" if self.lognormal else f"{self.median_ms:g}"

    @classmethod
    def parse(cls, text: str) -> ToolLatencyModel:
        """``"50"`` (fixed ms) or ``"lognormal:50"`` (median ms)."""
        kind, _, value = text.strip().rpartition(":")
        if kind not in ("", "lognormal"):
            raise ValueError(f"tool latency: expected MS or lognormal:MS, got {text!r}")
        try:
            median_ms = float(value)
        except ValueError as exc:
            raise ValueError(f"tool latency: expected MS or lognormal:MS, got {text!r}") from exc
        return cls(median_ms, lognormal=kind == "lognormal")

    def sampler(self, seed: str) -> LatencySampler:
        """Draws of this latency, in seconds, from a generator seeded with ``seed``."""
        return LatencySampler(self, seed)


class LatencySampler:
    """Seconds of latency per tool call, drawn from a seeded generator; safe to call from several threads.

    Args:
        model: What to draw.
        seed: The generator's seed (e.g. the run seed and the env's index), so that the draws are reproducible.
    """

    def __init__(self, model: ToolLatencyModel, seed: str) -> None:
        self.model = model
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        """One tool call's latency in seconds."""
        median_s = self.model.median_ms / 1000.0
        if not self.model.lognormal:
            return median_s
        with self._lock:
            return self._random.lognormvariate(math.log(median_s), LOGNORMAL_SIGMA)


class ToolLatency(gym.Wrapper):
    """Sleeps after each ``step`` for one latency draw per tool call the step ran, modelling slower tools.

    Args:
        env: The environment.
        latency: Draws one tool call's latency in seconds.
    """

    def __init__(self, env: gym.Env, latency: Callable[[], float]) -> None:
        super().__init__(env)
        self.latency = latency

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the env, then sleep one draw per tool call it made."""
        result = self.env.step(action)
        time.sleep(sum(self.latency() for _ in result[4].get("tool_calls", ())))
        return result


# ------------------------------------------------------------------------------------------ workload


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
        """The first ``count`` single-hop questions of :data:`HELD_OUT_SPLITS`, and their index."""
        from agentgym_envs.search import BM25Retriever, resolve_corpus
        from agentgym_envs.search.env import DEFAULT_CORPUS
        from tasks import load_split

        tasks = [task for split in HELD_OUT_SPLITS for task in load_split("Search", split) if task.family == "single"]
        if count > len(tasks):
            raise ValueError(f"tasks: expected at most {len(tasks)} (the held-out single-hop questions of "
                             f"{' and '.join(HELD_OUT_SPLITS)}), got {count}")
        return cls(tasks[:count], BM25Retriever(resolve_corpus(DEFAULT_CORPUS)))

    def make_env(self, latency: ToolLatencyModel, seed: str) -> gym.Env:
        """Search-v0 over the tasks, the question alone as the prompt, slowed by ``latency`` drawn with ``seed``."""
        env = gym.make(ENV_ID, tasks=list(self.tasks), prompt_style="task", retriever=self.retriever)
        return ToolLatency(env, latency.sampler(seed)) if latency.median_ms > 0 else env


def env_seed(settings: Settings, index: int) -> str:
    """The latency seed of the ``index``-th env a row builds (the env of episode ``index``)."""
    return f"{settings.seed}:{index}"


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
    """The tiny model warm-started on lookup demonstrations, built and cached the first time (one process builds;
    another that needs it meanwhile waits for it).

    Returns:
        ``(model, tokenizer)``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = warm_model_dir(settings)
    if not (directory / "config.json").exists():
        with file_lock(lock_path(directory), waiting=f"waiting for another process to build the warm model in "
                                                     f"{directory}"):
            if not (directory / "config.json").exists():  # not built while this one waited
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
        warm_start(model, tokenizer, demonstrations(tokenizer, env_jobs(config), config), config, settings.seed,
                   Path(scratch))
    save_model_folder(model, tokenizer, directory)


# ------------------------------------------------------------------------------------- engine rows


@dataclass
class GenerationMeter:
    """Generation calls, the contexts they carried and the seconds they took.

    Attributes:
        calls: Calls so far.
        contexts: Contexts (batch rows) over all calls.
        seconds: Wall-clock seconds inside the calls.
    """

    calls: int = 0
    contexts: int = 0
    seconds: float = 0.0

    def timed(self, method: Callable[..., Any], batch_size: Callable[..., int]) -> Callable[..., Any]:
        """``method`` counted: ``batch_size(*args, **kwargs)`` is how many contexts a call carries."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1
                self.contexts += batch_size(*args, **kwargs)

        return wrapper


class MeteredGenerator:
    """A :class:`~trainers.generation.Generator` that counts its ``generate`` calls in a :class:`GenerationMeter`.

    Args:
        generator: The generator doing the work.
    """

    def __init__(self, generator) -> None:
        self.generator = generator
        self.meter = GenerationMeter()
        self.generate = self.meter.timed(generator.generate, lambda contexts, *_, **__: len(contexts))

    def release(self, keys: Iterable[Any]) -> None:
        """Forget the cached prefixes of ``keys``."""
        self.generator.release(keys)


def run_engine(name: str, model, tokenizer, workload: Workload, settings: Settings,
               latency: ToolLatencyModel) -> Row:
    """An engine row (:data:`ENGINE_ROWS`): one ``RolloutEngine.run`` over every episode, timed whole."""
    import torch

    from trainers.generation import TransformersGenerator
    from trainers.rollout import EnvPool, RolloutConfig, RolloutEngine, group_requests

    schedule, cache_prefixes = ENGINE_ROWS[name]
    config = RolloutConfig(max_turns=settings.max_turns, max_tokens_per_turn=settings.max_tokens_per_turn,
                           max_context_tokens=settings.max_context_tokens, tool_workers=TOOL_WORKERS,
                           schedule=schedule, cache_prefixes=cache_prefixes)
    built = itertools.count()
    pool = EnvPool(lambda env_id: workload.make_env(latency, env_seed(settings, next(built))))
    transformers = TransformersGenerator(model, tokenizer.pad_token_id, batch_size=settings.batch_size,
                                         cache_prefixes=cache_prefixes)
    generator = MeteredGenerator(transformers)
    engine = RolloutEngine(generator, tokenizer, pool, config)
    requests = group_requests([(ENV_ID, task) for task in workload.tasks], settings.group, settings.seed)
    try:
        pool.take(requests)  # build the envs before the clock starts (TRL's are built before too)
        torch.manual_seed(settings.seed)
        started, cpu_started = time.perf_counter(), time.process_time()
        episodes = engine.run(requests)
        wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        pool.close()
    return Row.measured(name, latency.label, len(episodes), sum(e.terminated for e in episodes),
                        sum(len(e.turns) for e in episodes), sum(len(e.tool_calls) for e in episodes),
                        sum(sum(e.env_mask) for e in episodes), wall_s, cpu_s=cpu_s, meter=generator.meter,
                        fed_tokens=transformers.fed_tokens, reused_tokens=transformers.reused_tokens)


# ---------------------------------------------------------------------------------------- TRL row


class SearchTools:
    """A Search-v0 episode as TRL's ``environment_factory`` wants it: ``reset`` plus one public method per tool.

    Each tool call steps the wrapped env with the same ``<tool_call>`` action the engine's model would emit,
    so both loops run the same tool code, latency wrapper included.

    Args:
        workload: The tasks ``reset`` can be asked for (by id) and the search index.
        latency: Latency added per tool call (see :class:`ToolLatency`).
        seed: Seed of the latency draws.
    """

    def __init__(self, workload: Workload, latency: ToolLatencyModel, seed: str) -> None:
        self._env = workload.make_env(latency, seed)
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
    from trainers.trl_environment import tool_calling_tokenizer

    policy = copy.deepcopy(model)
    policy.generation_config.eos_token_id = stop_token_ids(tokenizer)
    ready = list(environments)
    args = GRPOConfig(
        output_dir=output_dir, per_device_train_batch_size=len(tasks) * settings.group,
        num_generations=settings.group, max_completion_length=settings.max_context_tokens,
        max_tool_calling_iterations=settings.max_turns - 1,
        generation_kwargs={"max_new_tokens": settings.max_tokens_per_turn}, temperature=1.0, top_p=1.0, top_k=0,
        use_cpu=settings.device == "cpu", bf16=False, report_to=[], save_strategy="no", seed=settings.seed,
        max_steps=1, disable_tqdm=True)
    return GRPOTrainer(model=policy, reward_funcs=answer_reward, args=args,
                       train_dataset=Dataset.from_list(trl_inputs(tasks, 1)),
                       processing_class=tool_calling_tokenizer(tokenizer, list_tools=False),
                       environment_factory=ready.pop)


def trl_inputs(tasks: Sequence[Task], group: int) -> list[dict[str, Any]]:
    """Dataset rows, ``group`` consecutive rows per task: an empty user message (``reset`` fills it) and the task id."""
    return [{"prompt": [{"role": "user", "content": ""}], "task_id": task.id} for task in tasks for _ in range(group)]


def run_trl(model, tokenizer, workload: Workload, settings: Settings, latency: ToolLatencyModel) -> Row:
    """TRL's row: one batch of TRL's own generation and tool loop over every episode."""
    import torch

    tasks = workload.tasks
    episodes = len(tasks) * settings.group
    # TRL's pool takes one env per rollout, in rollout order, from the factory (``list.pop``): reversed, so
    # that rollout i gets the env seeded as the engine's env of episode i.
    environments = [SearchTools(workload, latency, env_seed(settings, index)) for index in reversed(range(episodes))]
    meter = GenerationMeter()
    try:
        with tempfile.TemporaryDirectory() as output_dir:
            trainer = build_trl_trainer(model, tokenizer, tasks, settings, environments, output_dir)
            trainer.model.train()
            trainer.model.generate = meter.timed(trainer.model.generate, lambda **inputs: len(inputs["input_ids"]))
            trainer._generate, captured = _timed(trainer._generate)
            torch.manual_seed(settings.seed)
            started, cpu_started = time.perf_counter(), time.process_time()
            trainer._generate_and_score_completions(trl_inputs(tasks, settings.group))
    finally:
        for environment in environments:
            environment._close()
    _, _, tool_mask, completions, *_ = captured["output"]
    answered = sum("<answer>" in (messages[-1].get("content") or "") for messages in completions)
    turns = sum(message["role"] == "assistant" for messages in completions for message in messages)
    return Row.measured(TRL_ROW, latency.label, len(completions), answered, turns,
                        sum(environment.tool_calls for environment in trainer.environments),
                        sum(map(sum, tool_mask)), captured["finished"] - started,
                        cpu_s=captured["cpu_finished"] - cpu_started, meter=meter)


def _timed(method: Callable[..., Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``method`` wrapped to record its output and the (wall and CPU) time it returned."""
    captured: dict[str, Any] = {}

    def wrapper(*args: Any) -> Any:
        captured["output"] = method(*args)
        captured["finished"], captured["cpu_finished"] = time.perf_counter(), time.process_time()
        return captured["output"]

    return wrapper, captured


# ------------------------------------------------------------------------------------------ runner


def run_benchmark(settings: Settings, latencies: Sequence[ToolLatencyModel] = (ToolLatencyModel(0.0),),
                  rows: Sequence[str] = ROWS, repeats: int = 3,
                  on_row: Callable[[Row], None] | None = None) -> Report:
    """Warm-start (or load) the model and measure ``rows`` at each tool latency.

    Args:
        settings: Shared settings.
        latencies: Latency added per tool call, one set of rows each.
        rows: Which of :data:`ROWS` to measure.
        repeats: Timed runs per row, interleaved over the rows; the row keeps the run of median wall time (every
            run of a row samples with the same seed, so the runs differ in time only).
        on_row: Called with every timed run as it ends (progress).
    """
    import torch

    started = time.perf_counter()
    report = Report(settings=asdict(settings), repeats=repeats, warm_model=str(warm_model_dir(settings)), machine={
        "cpus": str(os.cpu_count()), "torch_threads": str(torch.get_num_threads()), "device": device_name(settings),
        "platform": platform.platform(), "python": platform.python_version()})
    model, tokenizer = load_warm_model(settings)
    model.to(settings.device)
    workload = Workload.load(settings.tasks)
    try:
        run_engine("engine-async", model, tokenizer, workload, Settings(group=1, max_turns=1),  # warm-up, untimed
                   ToolLatencyModel(0.0))
        for latency in latencies:
            runs: dict[str, list[Row]] = {name: [] for name in rows}
            for _ in range(repeats):
                for name in rows:
                    runs[name].append(measure_row(name, model, tokenizer, workload, settings, latency))
                    if on_row is not None:
                        on_row(runs[name][-1])
            report.rows += [sorted(measured, key=lambda row: row.wall_s)[len(measured) // 2]
                            for measured in runs.values()]
    finally:
        workload.retriever.close()
    report.ratios = ratios(report.rows)
    report.targets = check_targets(report.ratios, latencies)
    report.wall_s = time.perf_counter() - started
    return report


def device_name(settings: Settings) -> str:
    """The device the model runs on, in words (the GPU's name on CUDA)."""
    import torch

    if settings.device.startswith("cuda"):
        return f"{settings.device} ({torch.cuda.get_device_name(torch.device(settings.device))})"
    return settings.device


def measure_row(name: str, model, tokenizer, workload: Workload, settings: Settings,
                latency: ToolLatencyModel) -> Row:
    """Measure one row at one latency."""
    if name == TRL_ROW:
        return run_trl(model, tokenizer, workload, settings, latency)
    return run_engine(name, model, tokenizer, workload, settings, latency)


def ratios(rows: Sequence[Row]) -> dict[str, dict[str, dict[str, float]]]:
    """Per latency, each ratio of :data:`RATIOS` whose two rows were measured: of episodes/s and of tokens/s."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    for latency in dict.fromkeys(row.tool_latency for row in rows):
        measured = {row.name: row for row in rows if row.tool_latency == latency}
        result[latency] = {label: {"episodes": measured[top].episodes_per_s / measured[bottom].episodes_per_s,
                                   "tokens": measured[top].tokens_per_s / measured[bottom].tokens_per_s}
                           for label, (top, bottom) in RATIOS.items() if top in measured and bottom in measured}
    return result


def check_targets(measured: dict[str, dict[str, dict[str, float]]],
                  latencies: Sequence[ToolLatencyModel]) -> list[dict[str, Any]]:
    """Each of :data:`TARGETS` at each latency it applies to whose ratio was measured, passed or not."""
    return [{"ratio": target.ratio, "tool_latency": latency.label, "at_least": target.at_least,
             "measured": measured[latency.label][target.ratio]["episodes"],
             "passed": measured[latency.label][target.ratio]["episodes"] >= target.at_least}
            for target in TARGETS for latency in latencies
            if target.applies(latency) and target.ratio in measured.get(latency.label, {})]


# ------------------------------------------------------------------------------------------ report


def render(report: Report, console: Console) -> None:
    """Print the rows, the ratios and the targets."""
    console.print(rows_table(report))
    console.print(ratios_table(report))
    for target in report.targets:
        verdict = "PASS" if target["passed"] else "FAIL"
        console.print(f"target {target['ratio']} episodes/s >= {target['at_least']:g}x at tool latency "
                      f"{target['tool_latency']} ms: {target['measured']:.2f}x {verdict}")
    console.print(f"whole run {report.wall_s:.0f} s (warm model load or build, warm-up, every timed run)")


def rows_table(report: Report) -> Table:
    """The measured rows."""
    settings, machine = report.settings, report.machine
    table = Table(title=f"Rollout throughput on {ENV_ID}: {settings['tasks']} tasks x {settings['group']}, "
                        f"<= {settings['max_turns']} turns of <= {settings['max_tokens_per_turn']} tokens, "
                        f"median of {report.repeats} ({machine['cpus']} CPUs, {machine['torch_threads']} torch "
                        f"threads, {machine['device']})")
    columns = ("tool ms", "row", "episodes", "answered", "turns", "tool calls", "gen tokens", "wall s", "cpu s",
               "episodes/s", "tokens/s", "calls/s", "gen calls", "ctx/call", "gen s", "fed tokens")
    for column in columns:
        table.add_column(column, justify="left" if column in ("row", "tool ms") else "right", no_wrap=True)
    for row in report.rows:
        table.add_row(row.tool_latency, row.name, str(row.episodes), str(row.answered), str(row.turns),
                      str(row.tool_calls), str(row.generated_tokens), f"{row.wall_s:.2f}", f"{row.cpu_s:.1f}",
                      f"{row.episodes_per_s:.2f}",
                      f"{row.tokens_per_s:,.0f}", f"{row.tool_calls_per_s:.1f}", str(row.generation_calls),
                      f"{row.contexts_per_call:.1f}", f"{row.generation_s:.2f}",
                      f"{row.fed_tokens}" if row.name != TRL_ROW else "-")
    return table


def ratios_table(report: Report) -> Table:
    """Per latency, each ratio of episodes/s and of generated tokens/s."""
    labels = list(dict.fromkeys(label for values in report.ratios.values() for label in values))
    table = Table(title="Ratios per tool latency: episodes/s (generated tokens/s)")
    table.add_column("tool ms", no_wrap=True)
    for label in labels:
        table.add_column(label, justify="right", no_wrap=True)
    for latency, values in report.ratios.items():
        table.add_row(latency, *(f"{values[label]['episodes']:.2f}x ({values[label]['tokens']:.2f}x)"
                                 if label in values else "-" for label in labels))
    return table


def write_json(report: Report, path: Path) -> None:
    """Write the report as JSON."""
    path.write_text(json.dumps(asdict(report), indent=2) + "\n")


def parse_latencies(text: str) -> list[ToolLatencyModel]:
    """``"0,50,lognormal:50"`` -> fixed 0 ms, fixed 50 ms, lognormal with median 50 ms."""
    try:
        values = [ToolLatencyModel.parse(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (e.g. 0,50,lognormal:50)") from exc
    if not values:
        raise argparse.ArgumentTypeError(f"expected one or more latencies like 0,50,lognormal:50, got {text!r}")
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
    parser.add_argument("--tool-latency", type=parse_latencies, default=parse_latencies("0,50,lognormal:50"),
                        metavar="L[,L...]", help="latency added per tool call, one set of rows per value: MS "
                        "(fixed) or lognormal:MS (median MS, p99 10x the median, seeded per env)")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS), help="rows to measure")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size,
                        help="most contexts per batch of the engine's generator")
    parser.add_argument("--device", default=defaults.device, help="where the model runs: cpu or cuda")
    parser.add_argument("--sft-steps", type=int, default=defaults.sft_steps, help="warm-start SFT steps")
    parser.add_argument("--train-questions", type=int, default=defaults.train_questions,
                        help="generated questions the warm-start demonstrations are played on")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="warm-start, sampling and latency seed")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row (the median is reported)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1; 0: torch's own choice); see the module docstring")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    return parser


def print_progress(row: Row) -> None:
    """One line on stderr per timed run."""
    print(f"[{time.strftime('%H:%M:%S')}] {row.tool_latency} ms {row.name}: {row.episodes} episodes in "
          f"{row.wall_s:.1f} s, {row.cpu_s:.1f} CPU s ({row.episodes_per_s:.2f}/s, {row.tokens_per_s:,.0f} "
          "tokens/s)", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = build_parser().parse_args(argv)
    try:
        settings = Settings(tasks=args.tasks, group=args.group, max_turns=args.max_turns,
                            max_tokens_per_turn=args.max_tokens_per_turn, batch_size=args.batch_size,
                            sft_steps=args.sft_steps, train_questions=args.train_questions, seed=args.seed,
                            device=args.device)
    except ValueError as exc:
        raise SystemExit(f"--{str(exc).replace('_', '-')}") from exc
    if args.repeats < 1:
        raise SystemExit(f"--repeats: expected >= 1, got {args.repeats}")
    if args.threads < 0:
        raise SystemExit(f"--threads: expected >= 0 (0: torch's own choice), got {args.threads}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    report = run_benchmark(settings, args.tool_latency, args.rows, args.repeats, on_row=print_progress)
    render(report, Console(width=None if sys.stdout.isatty() else 200))
    if args.json is not None:
        write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
