"""Checkpoint and baseline evaluation on the bundled suites: pass@k, rewards, tools, turns, and an env-match check.

Each model is played on the bundled split of every suite, through the same environments training uses:

    ==========  =============================================================================================
    --model     what plays
    ==========  =============================================================================================
    oracle      the scripted oracle of the suite (Search and WebShop: tools-only, shown the question or the
                instruction alone; Python: replays the task's reference solution; Data: runs the task's
                reference analysis through the tools; SWE: applies the reference fix with the editor, then
                submits). Deterministic: one episode per task, pass@k = pass@1.
    random      random well-formed tool calls, then a random word as the answer (WebShop: WebShop's random
                baseline, a search then random clicks; Data: every answer field filled with a value seen in
                the episode); the floor to beat; seeded per episode, so
                ``--samples`` episodes per task give a real pass@k.
    tiny        the tiny default model (built locally), through the rollout engine.
    <path|id>   a local checkpoint folder or a hub id, through the rollout engine.
    <report>    a ``report.json`` of an earlier run: its results join this report, and its environment
                fingerprint is checked against this run's.
    ==========  =============================================================================================

Models get ``--samples`` episodes per task at ``--temperature`` (pass@1 and the unbiased pass@k estimator of
Chen et al. 2021 from them) and, when sampling, one greedy episode per task as well (greedy pass@1). Episodes
that an infrastructure fault ended are left out of every rate and counted on their own, with the first fault's
message: each result counts its episodes as scored, infra (ended by an infrastructure fault) and invalid (scored
episodes whose verifier run was invalid, e.g. SWE-v0's hidden test run errored or timed out: unsolved, the
agent's outcome, counted apart from wrong answers and per reason, read from the final step's ``info["grading"]``:
``memory``, ``timeout``, ``collection_error``, ...; each invalid episode's reason is in ``episodes.jsonl``). A
rate with no scored episode to compute it from is ``n/a`` (null in ``report.json``), never 0, and the command exits
with status 1 naming the first fault when any model scored nothing on a suite.

Per suite and model the report gives: pass@1, pass@k, greedy pass@1, mean reward and the mean of each reward
component (an unanswered episode scores 0 on each), pass@1 and mean reward by difficulty, tool calls per episode
and the agent's failure rate per tool, the turn distribution and the stop reasons. An episode is solved when its
``outcome`` is 1 (:attr:`agentgym_envs.runner.Episode.success`): on WebShop that is a purchase scored 1.0
(``outcome/success``), so pass@1 is WebShop's success rate and the mean reward its score (x100 in its papers).

``--tasks FILE`` plays the tasks of a JSONL file (``tasks.Task``) instead of the bundled split, on one suite: for
example DABench's questions, written by ``python -m tasks.data_analysis dabench``. When the suite's spec scores its
episodes as the public benchmark the tasks came from (``EnvSpec.benchmark_metrics``), the report adds that
benchmark's own metrics (DataAnalysis on DABench: ABQ, PSAQ and UASQ, per concept and per number of concepts, of
the greedy episodes when a model was sampled).

A suite whose envs reach a service (WebShop's shop server) gets one instance of it for the whole run, shared by
every env of the suite (its spec's ``service``), and stopped at the end.

``--remote URL`` plays the suite on an agentrl server (``python -m agentgym_envs.serve ID``) through the client env
``agentrl/Remote-v0`` instead of in process: the tasks, the card (so the fingerprint) and every step come from the
server; the split, the prompt style and the sandbox are the server's (``--split`` and ``--prompt-style`` must name
the ones it serves). One suite, the env the server serves, whose spec is registered here for its policies (a
reference oracle, which reads the task's hidden metadata, is refused: a server never sends it).

Env match: every report carries a fingerprint of each environment (id, turn limit, tool schemas, action and
observation limits, sandbox limits, reward terms with weights, caps and functions, data manifest hash and
generator versions, prompt style) and of the rollout limits. ``--training-config`` takes a GRPO or PPO config
(YAML or JSON; the envs are built from it as training builds them), a run's ``effective_config.json``, a
``fingerprint.json`` or a ``report.json``, and lists every difference. From a config it also adopts the rollout
limits and the prompt style (:data:`ADOPTED`) that the command line does not give, and says so. The split itself
(and its hash and size) is not compared: training and evaluation use different splits by design.

Outputs, under ``--out`` (default ``runs/eval/<models>__<suites>__<split>``): ``report.json``, ``report.md``,
``fingerprint.json``, ``by_difficulty.png``, ``tool_calls.png`` and ``episodes.jsonl`` (one line per episode).
Same arguments, same numbers: scripted policies exactly, models through ``torch.manual_seed`` before every
generation batch.

Example:
    python -m benchmarks.evaluate --model oracle --model random --suite search,python --split test
    python -m benchmarks.evaluate --model oracle --model random --suite webshop --split test
    python -m benchmarks.evaluate --model oracle --model random --suite data --split test
    python -m benchmarks.evaluate --model oracle --model random --suite swe --split test
    python -m benchmarks.evaluate --model oracle --model random --suite data --tasks data/dabench/tasks.jsonl
    python -m benchmarks.evaluate --model oracle --model random --suite search --remote http://127.0.0.1:8000
    python -m benchmarks.evaluate --model runs/grpo --suite search --samples 8 --temperature 1.0 --k 1 4 8 \\
        --training-config trainers/configs/ppo_tiny_cpu.yaml
    python -m benchmarks.evaluate --compare runs/eval/a/report.json runs/eval/b/report.json --suite search
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentgym_envs import describe  # importing the package registers the agentrl/... ids
from agentgym_envs.policies import Policy, ScriptedAgent
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.registration import REMOTE_ID, SPECS, env_spec, sandbox_kwargs
from agentgym_envs.remote.env import served_description
from agentgym_envs.runner import EnvPool, Episode, EpisodeRequest, EpisodeRunner, group_requests, scored
from agentgym_envs.spec import EnvSpec
from tasks import Task, read_tasks
from trainers.infra_guard import INFRA_HINT, first_infra_error
from trainers.model_path import check_model_path

BASELINES = ("oracle", "random")

FINGERPRINT_VERSION = 2
"""2: the fingerprint of an env is its card (:class:`agentgym_envs.EnvCard`)."""
NOT_COMPARED = frozenset({"split", "split_sha256", "tasks", "tasks_sha256", "server"})
"""Fingerprint keys that differ between training and evaluation by design: the split, and where a service runs
(WebShop's ``settings.server``: a server of its own, a shared one or a URL)."""

ROLLOUT_LIMITS = ("max_turns", "max_tokens_per_turn", "max_context_tokens")
ABSENT = "(absent)"
INVALID_COMPONENT = "invalid"
"""The reward component (``invalid`` or ``<term>/invalid``) that is 1.0 when an episode's verifier run was invalid."""
GRADING_INFO = "grading"
"""The key of the final step's ``info`` where an env says how its verifier run went: a mapping with ``valid`` and
``reason`` (SWE-v0's :func:`~agentgym_envs.swe.env.grading_info`); any env may use it."""
UNKNOWN_REASON = "unknown"
"""The reason counted for an invalid run whose env named none."""


# ---------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how.

    Attributes:
        models: ``oracle``, ``random``, ``tiny``, checkpoint folders, hub ids or earlier ``report.json`` files.
        suites: Registered env ids or their aliases (:mod:`agentgym_envs.spec`); each is kept under its
            :func:`suite_name`.
        split: Bundled split.
        limit: Evaluate only the first ``limit`` tasks of each suite's split (None: all).
        samples: Episodes per task (n of pass@k).
        temperature: Sampling temperature of models (0: greedy; None: 1 with several samples per task, else 0).
            Several samples of a model at temperature 0 would be the same episode: refused.
        k: The k of pass@k (each <= ``samples``); pass@1 is always reported.
        seed: Base seed of env resets, random policies and model sampling.
        sandbox: Backend of the envs that run agent code, PythonSandbox and DataAnalysis (``docker``, ``bwrap``,
            ``local``).
        prompt_style: ``full`` (instructions and tools in the prompt) or ``task`` (the task text only).
        max_turns: Most model turns per episode (None: the env's turn limit).
        max_tokens_per_turn: Most tokens a model generates in one turn.
        max_context_tokens: Token budget of a model episode (cut to the model's position limit).
        batch_size: Model episodes in flight together (one env each).
        device: Torch device of models (None: cuda when available, else cpu).
        training_config: GRPO/PPO config, ``fingerprint.json`` or ``report.json`` to check the envs against.
        remote: The URL of an agentrl server to play the (one) suite on through ``agentrl/Remote-v0``; None: in
            process. The server must serve the suite's env on ``split`` with ``prompt_style``.
        tasks_file: A JSONL file of tasks to play on the (one) suite instead of the bundled ``split``; None: the
            split.
    """

    models: tuple[str, ...]
    suites: tuple[str, ...] = ("search",)
    split: str = "test"
    limit: int | None = None
    samples: int = 1
    temperature: float | None = None
    k: tuple[int, ...] = ()
    seed: int = 0
    sandbox: str = "docker"
    prompt_style: str = "full"
    max_turns: int | None = None
    max_tokens_per_turn: int = 256
    max_context_tokens: int = 4096
    batch_size: int = 32
    device: str | None = None
    training_config: str | None = None
    remote: str | None = None
    tasks_file: str | None = None

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("models: expected at least one (--model oracle, --model runs/ckpt, ...), got none")
        unknown = [suite for suite in self.suites if suite not in SPECS]
        if unknown or not self.suites:
            raise ValueError(f"suites: expected registered env ids or aliases among {SPECS.names()}, got "
                             f"{list(self.suites)}")
        object.__setattr__(self, "suites", tuple(suite_name(spec) for spec in SPECS.resolve(self.suites)))
        without_oracle = [suite for suite in self.suites if env_spec(suite).oracle is None]
        if "oracle" in self.models and without_oracle:
            raise ValueError(f"models: oracle: expected suites whose spec has an oracle, got {without_oracle} "
                             "with none")
        if self.samples < 1 or self.batch_size < 1 or (self.limit is not None and self.limit < 1):
            raise ValueError(f"samples, batch_size and limit: expected >= 1, got {self.samples}, {self.batch_size}, "
                             f"{self.limit}")
        too_large = [k for k in self.k if not 1 <= k <= self.samples]
        if too_large:
            raise ValueError(f"k: expected values in 1..samples ({self.samples}), got {too_large}; raise --samples")
        if self.temperature is None:
            object.__setattr__(self, "temperature", 1.0 if self.samples > 1 else 0.0)
        if self.temperature < 0:
            raise ValueError(f"temperature: expected >= 0 (0 = greedy), got {self.temperature}")
        models = [spec for spec in self.models if spec not in BASELINES and not is_report_file(spec)]
        if self.temperature == 0 and self.samples > 1 and models:
            raise ValueError(f"samples: {self.samples} episodes per task at temperature 0 are {self.samples} copies "
                             f"of one greedy episode for {models}; give --temperature > 0 (the default with --samples "
                             "> 1 is 1) or --samples 1")
        for spec in self.models:
            if spec not in BASELINES and not is_report_file(spec):
                check_model_path(spec)
        if self.remote is not None:
            check_remote(self)
        if self.tasks_file is not None and (len(self.suites) != 1 or self.remote is not None):
            raise ValueError(f"tasks_file: expected one suite played in process, got suites {list(self.suites)}"
                             + (f" and --remote {self.remote}" if self.remote else ""))
        if self.tasks_file is not None and env_spec(self.suites[0]).service is not None:
            raise ValueError(f"tasks_file: {self.suites[0]}'s envs share a service started for the bundled split "
                             "(WebShop: the split's catalogue), which would not serve these tasks; play them with "
                             "gym.make and the env's own options (WebShop: tasks= and catalogue=, docs/webshop.md)")

    @property
    def ks(self) -> tuple[int, ...]:
        """The k values reported: 1, the requested ones, and ``samples``, sorted."""
        return tuple(sorted({1, self.samples, *self.k}))


def check_remote(config: EvalConfig) -> None:
    """Check that the server at ``config.remote`` serves the one suite as ``config`` would make it in process.

    Raises:
        ValueError: Several suites, another env, split or prompt style than the server's, a reference oracle, or
            no agentrl server at the URL; the message says what to give instead.
    """
    if len(config.suites) != 1:
        raise ValueError(f"suites: --remote plays one suite (the env the server serves), got {list(config.suites)}")
    suite = config.suites[0]
    if "oracle" in config.models and env_spec(suite).oracle_sees_reference:
        raise ValueError(f"models: oracle: {suite}'s oracle reads the task's reference solution, which a server "
                         "never sends; evaluate it in process, or play random or a model on the server")
    served = served_description(config.remote)
    if served.env_id != env_spec(suite).id:
        raise ValueError(f"suites: the server at {config.remote} serves {served.env_id}, not {env_spec(suite).id}; "
                         f"give --suite {served.env_id}")
    if served.split != config.split or served.card.prompt_style != config.prompt_style:
        raise ValueError(f"split and prompt_style: the server at {config.remote} serves split {served.split!r} in "
                         f"prompt style {served.card.prompt_style!r}, not {config.split!r} and "
                         f"{config.prompt_style!r}; give --split {served.split} --prompt-style "
                         f"{served.card.prompt_style}, or serve it with --env-kwargs "
                         f"'{{\"split\": \"{config.split}\", \"prompt_style\": \"{config.prompt_style}\"}}'")


def suite_name(spec: EnvSpec) -> str:
    """How reports name the suite of ``spec``: its first alias (``search``), else its id."""
    return spec.aliases[0] if spec.aliases else spec.id


# ---------------------------------------------------------------------------------------------- pass@k


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    Args:
        n: Episodes played on the task.
        c: Episodes that solved it.
        k: Attempts allowed.

    Raises:
        ValueError: ``k`` is not in ``1..n`` or ``c`` not in ``0..n``.

    Example:
        >>> pass_at_k(4, 1, 2)
        0.5
    """
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass_at_k: expected 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


# ---------------------------------------------------------------------------------------------- episodes


def episode_row(episode: Episode, model: str, suite: str) -> dict[str, Any]:
    """One line of ``episodes.jsonl``."""
    return {"model": model, "suite": suite, "task_id": episode.task_id, "difficulty": episode.difficulty,
            "seed": episode.seed, "success": episode.success, "reward": episode.reward, "turns": len(episode.turns),
            "tool_calls": len(episode.tool_calls), "stop_reason": episode.stop_reason,
            "invalid_reason": invalid_reason(episode) if episode.scored else ""}


# ---------------------------------------------------------------------------------------------- players


@dataclass(frozen=True)
class Baseline:
    """A scripted policy for one suite.

    Attributes:
        make: Builds the policy from an episode's seed.
        sees_reference: The policy reads the task's metadata (a reference oracle); otherwise it is shown the
            prompt only.
        deterministic: Every episode of a task is the same, so one per task is played.
    """

    make: Callable[[int], Policy]
    sees_reference: bool
    deterministic: bool


def baseline(name: str, suite: str) -> Baseline:
    """The scripted policy ``name`` (``oracle`` or ``random``) of ``suite``'s spec."""
    spec = env_spec(suite)
    if name == "oracle" and spec.oracle is not None:
        return Baseline(spec.oracle, sees_reference=spec.oracle_sees_reference,
                        deterministic=spec.oracle_deterministic)
    if name == "random":
        return Baseline(spec.random, sees_reference=False, deterministic=False)
    raise ValueError(f"baseline: expected oracle or random of a suite that has it, got {name!r} for {suite!r}")


SuiteKwargs = Mapping[str, Mapping[str, Any]]
"""Per suite, the env kwargs that reach its shared service (none for a suite without one)."""


@contextmanager
def shared_services(config: EvalConfig) -> Iterator[SuiteKwargs]:
    """Start the shared service of every suite of ``config`` whose spec has one (WebShop's shop server, of the
    catalogue the split's tasks were written for); stop them all when the block ends."""
    with ExitStack() as stack:
        shared = {}
        for suite in config.suites:
            start = env_spec(suite).service
            if start is not None and config.remote is None:  # a server runs its own
                service = start(config.split)
                stack.callback(service.close)
                shared[suite] = service.env_kwargs()
        yield shared


def make_env(suite: str, config: EvalConfig, shared: SuiteKwargs | None = None) -> gym.Env:
    """The evaluation env of ``suite``: the bundled split, the prompt style, the sandbox for PythonSandbox, and
    the suite's shared service (``shared``, from :func:`shared_services`; None: the env starts what it needs); with
    ``config.remote``, the client env of the server there."""
    if config.remote is not None:
        return gym.make(REMOTE_ID, url=config.remote)
    env_id = env_spec(suite).id
    source = {"tasks": read_tasks(config.tasks_file)} if config.tasks_file else {"split": config.split}
    return gym.make(env_id, **source, prompt_style=config.prompt_style,
                    **sandbox_kwargs(env_id, config.sandbox), **(shared or {}).get(suite, {}))


def suite_tasks(env: gym.Env, config: EvalConfig) -> list[Task]:
    """The tasks evaluated: the split in file order, the first ``limit`` of them."""
    tasks = list(env.unwrapped.tasks)
    return tasks[: config.limit] if config.limit else tasks


def play_scripted(name: str, suite: str, env: gym.Env, requests: Sequence[EpisodeRequest],
                  advance: Callable[[int], None]) -> list[Episode]:
    """Play the scripted policy ``name`` on every request, one after another, in one env."""
    policy_kind = baseline(name, suite)
    agent = ScriptedAgent(lambda request: policy_kind.make(request.seed),
                          shown=None if policy_kind.sees_reference else prompt_only)
    runner = EpisodeRunner(EnvPool(lambda _: env), workers=1)
    episodes = []
    for request in requests:
        episodes += runner.run(agent, [request])
        advance(1)
    return episodes


class ModelPlayer:
    """A causal LM played through the rollout engine, its envs kept open per suite.

    Args:
        spec: ``tiny``, a checkpoint folder or a hub id.
        config: The evaluation settings.
        shared: The suites' shared services (:func:`shared_services`).
    """

    def __init__(self, spec: str, config: EvalConfig, shared: SuiteKwargs) -> None:
        import torch

        from trainers.generation import TransformersGenerator
        from trainers.tiny_model import load_model

        self.config = config
        self.shared = shared
        device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model, self.tokenizer = load_model(spec)
        self.model.to(device)
        self.generator = TransformersGenerator(self.model, self.tokenizer.pad_token_id, batch_size=config.batch_size)
        positions = getattr(self.model.config, "max_position_embeddings", None) or config.max_context_tokens
        self.max_context_tokens = min(config.max_context_tokens, positions)

    def play(self, suite: str, requests: Sequence[EpisodeRequest], temperature: float, turn_limit: int,
             advance: Callable[[int], None]) -> list[Episode]:
        """Roll out every request in batches of ``batch_size``, seeding torch before each batch."""
        import torch

        from trainers.rollout import RolloutConfig, RolloutEngine

        rollout = RolloutConfig(max_turns=self.config.max_turns or turn_limit,
                                max_tokens_per_turn=self.config.max_tokens_per_turn,
                                max_context_tokens=self.max_context_tokens,
                                min_turn_tokens=min(8, self.config.max_tokens_per_turn), temperature=temperature,
                                tool_workers=self.config.batch_size)
        pool = EnvPool(lambda env_id: make_env(suite, self.config, self.shared))
        engine = RolloutEngine(self.generator, self.tokenizer, pool, rollout)
        episodes: list[Episode] = []
        try:
            for index, start in enumerate(range(0, len(requests), self.config.batch_size)):
                batch = requests[start:start + self.config.batch_size]
                torch.manual_seed(self.config.seed + index)
                episodes += engine.run(batch)
                advance(len(batch))
        finally:
            pool.close()
        return episodes

    def rollout_settings(self, temperature: float) -> dict[str, Any]:
        """The limits (``max_turns`` None: the env's turn limit) and sampling this model was evaluated under."""
        return {"max_turns": self.config.max_turns, "max_tokens_per_turn": self.config.max_tokens_per_turn,
                "max_context_tokens": self.max_context_tokens, "temperature": temperature}


# ---------------------------------------------------------------------------------------------- summaries


@dataclass
class SuiteResult:
    """The numbers of one model on one suite (JSON keys are strings, so that a loaded report equals a fresh one).

    Attributes:
        model: The model's label.
        suite: The suite name.
        env_id: The environment's registry id.
        kind: ``scripted`` or ``model``.
        tasks: Tasks evaluated.
        episodes: Episodes played (infrastructure faults included).
        samples_per_task: Episodes per task (n of pass@k).
        pass_at: ``{"1": ..., "k": ...}``, over episodes free of infrastructure faults (None: none scored).
        greedy_pass_at_1: Greedy pass@1 (models sampled at a temperature > 0 only; None also when none scored).
        mean_reward: Mean final reward of the scored episodes (None: none scored).
        reward_components: Mean of each reward component.
        by_difficulty: Per difficulty: ``tasks``, ``pass@1``, ``mean_reward``.
        tools: Per tool: ``calls_per_episode``, ``failure_rate`` (the agent's failures, over calls not hit by
            an infrastructure fault), ``infra_failures``.
        turns: ``mean``, ``median``, ``max`` actions per episode.
        turn_histogram: Episodes per number of turns.
        stop_reasons: Episodes per stop reason.
        infra_errors: Episodes an infrastructure fault ended (left out of every rate).
        scored: Episodes counted in the rates (``episodes - infra_errors``).
        invalid: Scored episodes whose verifier run was invalid (a reward component :data:`INVALID_COMPONENT`
            is 1; e.g. SWE-v0's hidden test run errored or timed out); they count as unsolved.
        invalid_reasons: The invalid episodes per reason (:func:`invalid_reason`), most frequent first.
        first_infra_error: The message of the first infrastructure fault ("" when none).
        settings: Sampling and limits (``temperature``, rollout limits for models).
        notes: Anything a reader must know to read the numbers.
        benchmark: The public benchmark's own metrics of the episodes (:class:`agentgym_envs.spec.BenchmarkMetrics`
            as a dict; empty when the suite's spec gives none for these tasks).
    """

    model: str
    suite: str
    env_id: str
    kind: str
    tasks: int
    episodes: int
    samples_per_task: int
    pass_at: dict[str, float | None]
    greedy_pass_at_1: float | None
    mean_reward: float | None
    reward_components: dict[str, float]
    by_difficulty: dict[str, dict[str, float]]
    tools: dict[str, dict[str, float]]
    turns: dict[str, float]
    turn_histogram: dict[str, int]
    stop_reasons: dict[str, int]
    infra_errors: int
    scored: int
    invalid: int
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    first_infra_error: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    benchmark: dict[str, Any] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0


def per_task_counts(outcomes: Sequence[Episode]) -> dict[str, tuple[int, int]]:
    """``task_id -> (n, c)``: scored episodes and solved ones (infrastructure faults left out)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for outcome in scored(outcomes):
        counts[outcome.task_id][0] += 1
        counts[outcome.task_id][1] += outcome.success
    return {task_id: (n, c) for task_id, (n, c) in counts.items()}


def mean_pass_at_k(outcomes: Sequence[Episode], k: int) -> float | None:
    """pass@k averaged over the tasks with at least ``k`` scored episodes; None when no task has that many."""
    scores = [pass_at_k(n, c, k) for n, c in per_task_counts(outcomes).values() if n >= k]
    return _mean(scores) if scores else None


def is_invalid_component(name: str) -> bool:
    """Whether the reward component ``name`` says that the verifier run was invalid (:data:`INVALID_COMPONENT`)."""
    return name == INVALID_COMPONENT or name.endswith(f"/{INVALID_COMPONENT}")


def invalid_run(episode: Episode) -> bool:
    """Whether the episode's verifier run was invalid (any :func:`is_invalid_component` component is 1)."""
    return any(is_invalid_component(name) and value >= 1.0 for name, value in episode.reward_components.items())


def invalid_reason(episode: Episode) -> str:
    """Why the episode's verifier run was invalid: the ``reason`` of its final ``info[GRADING_INFO]``
    (:data:`GRADING_INFO`), else :data:`UNKNOWN_REASON`; ``""`` for a valid run."""
    if not invalid_run(episode):
        return ""
    grading = episode.final_info.get(GRADING_INFO)
    reason = grading.get("reason") if isinstance(grading, Mapping) else None
    return str(reason) if reason else UNKNOWN_REASON


def invalid_reason_counts(outcomes: Sequence[Episode]) -> dict[str, int]:
    """The invalid episodes per :func:`invalid_reason`, most frequent first."""
    reasons = Counter(reason for reason in map(invalid_reason, outcomes) if reason)
    return dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0])))


def reward_component_means(outcomes: Sequence[Episode]) -> dict[str, float]:
    """Mean of each component over the episodes (an episode without the component scores 0 on it)."""
    names = sorted({name for outcome in outcomes for name in outcome.reward_components})
    return {name: _mean([o.reward_components.get(name, 0.0) for o in outcomes]) for name in names}


def difficulty_table(outcomes: Sequence[Episode]) -> dict[str, dict[str, float]]:
    """Per difficulty level: tasks, pass@1 and mean reward."""
    levels: dict[int, list[Episode]] = defaultdict(list)
    for outcome in outcomes:
        levels[outcome.difficulty].append(outcome)
    return {str(level): {"tasks": len({o.task_id for o in group}), "pass@1": mean_pass_at_k(group, 1),
                         "mean_reward": _mean([o.reward for o in group])}
            for level, group in sorted(levels.items())}


def tool_table(outcomes: Sequence[Episode]) -> dict[str, dict[str, float]]:
    """Per tool: calls per episode, the agent's failure rate, and calls an infrastructure fault failed."""
    calls: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for outcome in outcomes:
        for call in outcome.tool_calls:
            calls[call["name"]].append((bool(call["ok"]), bool(call["infra_error"])))
    table = {}
    for name, results in sorted(calls.items()):
        agent = [ok for ok, infra in results if not infra]
        table[name] = {"calls_per_episode": len(results) / len(outcomes),
                       "failure_rate": _mean([not ok for ok in agent]),
                       "infra_failures": sum(infra for _, infra in results)}
    return table


def turn_statistics(outcomes: Sequence[Episode]) -> tuple[dict[str, float], dict[str, int]]:
    """Mean, median and max turns, and the histogram of turns per episode."""
    turns = [len(outcome.turns) for outcome in outcomes]
    stats = {"mean": _mean(turns), "median": float(statistics.median(turns)), "max": float(max(turns))}
    return stats, {str(count): number for count, number in sorted(Counter(turns).items())}


def summarize(model: str, suite: str, kind: str, outcomes: Sequence[Episode], *, samples: int,
              ks: Sequence[int], greedy: Sequence[Episode] | None = None,
              settings: Mapping[str, Any] | None = None, notes: Sequence[str] = (),
              tasks: Sequence[Task] = ()) -> SuiteResult:
    """Reduce one model's episodes on one suite to a :class:`SuiteResult`.

    Args:
        model: The model's label.
        suite: The suite.
        kind: ``scripted`` or ``model``.
        outcomes: The sampled episodes (``samples`` per task).
        samples: Episodes per task.
        ks: The k values of pass@k; with one episode per task (a deterministic policy) pass@k is pass@1.
        greedy: The greedy episodes, when sampled at a temperature > 0.
        settings: Sampling and limits, reported as they are.
        notes: Extra notes.
        tasks: The tasks played, for the suite spec's ``benchmark_metrics`` (of the greedy episodes when given).
    """
    valid = scored(outcomes)
    score_as_benchmark = env_spec(suite).benchmark_metrics
    benchmark = score_as_benchmark(tasks, greedy or outcomes) if score_as_benchmark and tasks else None
    turns, histogram = turn_statistics(outcomes)
    rewards = [o.reward for o in valid]
    return SuiteResult(
        model=model, suite=suite, env_id=env_spec(suite).id, kind=kind, tasks=len({o.task_id for o in outcomes}),
        episodes=len(outcomes), samples_per_task=samples,
        pass_at={str(k): mean_pass_at_k(valid, min(k, samples)) for k in ks},
        greedy_pass_at_1=mean_pass_at_k(greedy, 1) if greedy is not None else None,
        mean_reward=_mean(rewards) if rewards else None, reward_components=reward_component_means(valid),
        by_difficulty=difficulty_table(valid), tools=tool_table(outcomes), turns=turns, turn_histogram=histogram,
        stop_reasons=dict(sorted(Counter(o.stop_reason for o in outcomes).items())),
        infra_errors=len(outcomes) - len(valid), scored=len(valid), invalid=sum(map(invalid_run, valid)),
        invalid_reasons=invalid_reason_counts(valid),
        first_infra_error=first_infra_error(outcomes), settings=dict(settings or {}), notes=list(notes),
        benchmark=asdict(benchmark) if benchmark else {})


# ---------------------------------------------------------------------------------------------- fingerprints


def env_fingerprint(env: gym.Env) -> dict[str, Any]:
    """What must match between training and evaluation for one env: its card (no reset needed: no sandbox
    starts), with tools and reward terms keyed by name so that a difference names the term."""
    card = describe(env).to_dict()
    card["tools"] = {tool["function"]["name"]: tool for tool in card["tools"]}
    for family in card["families"].values():
        family["reward"] = {term.pop("name"): term for term in family["reward"]}
    return card


def run_fingerprint(config: EvalConfig, rollout: Mapping[str, Any] | None,
                    shared: SuiteKwargs | None = None) -> dict[str, Any]:
    """The fingerprint of this evaluation: every suite's env (with its shared service, as evaluated), and the
    rollout limits a model was played under."""
    envs = {}
    for suite in config.suites:
        env = make_env(suite, config, shared)
        try:
            envs[env_spec(suite).id] = env_fingerprint(env)
        finally:
            env.close()
    return {"fingerprint_version": FINGERPRINT_VERSION, "envs": envs,
            "rollout": {key: rollout[key] for key in ROLLOUT_LIMITS} if rollout else None}


def training_fingerprint(training: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint of the envs a GRPO (``envs``, ``env_kwargs`` per id) or PPO (``env_id``, ``split``,
    ``env_kwargs``) config trains on, built as the trainer builds them.

    Raises:
        ValueError: The config names no environment.
    """
    if "envs" in training:
        env_ids = list(training["envs"])
        per_env = training.get("env_kwargs") or {}
        per_env = json.loads(per_env) if isinstance(per_env, str) else per_env
    elif "env_id" in training:
        env_ids = [training["env_id"]]
        per_env = {training["env_id"]: {"split": training.get("split", "train"), **training.get("env_kwargs", {})}}
    else:
        raise ValueError(f"training config: expected 'envs' (GRPO) or 'env_id' (PPO), got keys {sorted(training)}")
    envs = {}
    for env_id in env_ids:
        kwargs = dict(per_env.get(env_id, {}))
        env = gym.make(env_id, **kwargs)
        try:
            envs[env_id] = env_fingerprint(env)
        finally:
            env.close()
    rollout = {key: training[key] for key in ROLLOUT_LIMITS if key in training}
    return {"fingerprint_version": FINGERPRINT_VERSION, "envs": envs, "rollout": rollout or None}


def load_reference(path: Path) -> dict[str, Any]:
    """A fingerprint from a ``fingerprint.json``, a ``report.json`` or a training config (YAML or JSON)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: expected a mapping (config, fingerprint or report), got {type(data).__name__}")
    if "fingerprint_version" in data:
        return dict(data)
    if "fingerprint" in data:
        return dict(data["fingerprint"])
    return training_fingerprint(training_settings_of(data))


ADOPTED = ("max_turns", "max_tokens_per_turn", "max_context_tokens", "prompt_style")
"""The settings evaluation takes from ``--training-config`` unless the command line gives them."""


def training_settings_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A training config's settings: the mapping itself, or a run's ``effective_config.json``'s ``config``."""
    return data["config"] if "command" in data and isinstance(data.get("config"), Mapping) else data


def adoptable_settings(path: Path) -> dict[str, Any]:
    """The :data:`ADOPTED` settings a training config (or a run's ``effective_config.json``) sets: its rollout
    limits, and the prompt style its envs' kwargs agree on. A fingerprint or report sets none."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, Mapping) or "fingerprint_version" in data or "fingerprint" in data:
        return {}
    training = training_settings_of(data)
    settings = {key: training[key] for key in ROLLOUT_LIMITS if training.get(key) is not None}
    per_env = training.get("env_kwargs") or {}
    per_env = json.loads(per_env) if isinstance(per_env, str) else per_env
    styles = {kwargs.get("prompt_style") for kwargs in per_env.values() if isinstance(kwargs, Mapping)} - {None}
    if len(styles) == 1:
        settings["prompt_style"] = styles.pop()
    return settings


@dataclass(frozen=True)
class Difference:
    """One fingerprint entry that differs: its dotted path and both values."""

    path: str
    evaluation: Any
    reference: Any


def fingerprint_differences(evaluation: Any, reference: Any, path: str = "") -> list[Difference]:
    """Every difference between two fingerprints, as dotted paths (keys of :data:`NOT_COMPARED` skipped).

    The rollout limits are compared where both sides give them (a training config may leave them to defaults);
    an env in only one of the two is a difference.
    """
    if path == "rollout" and (evaluation is None or reference is None):
        return []
    if not (isinstance(evaluation, Mapping) and isinstance(reference, Mapping)):
        return [] if evaluation == reference else [Difference(path, evaluation, reference)]
    keys = sorted(set(evaluation) | set(reference))
    if path == "rollout":
        keys = [key for key in keys if key in evaluation and key in reference]
    differences = []
    for key in keys:
        if key in NOT_COMPARED or key == "fingerprint_version":
            continue
        child = f"{path}.{key}" if path else str(key)
        differences += fingerprint_differences(evaluation.get(key, ABSENT), reference.get(key, ABSENT), child)
    return differences


def env_match(fingerprint: Mapping[str, Any], reference: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The env-match check against one reference: its source and every difference."""
    differences = fingerprint_differences(fingerprint, reference)
    return {"reference": source, "match": not differences, "differences": [asdict(d) for d in differences]}


# ---------------------------------------------------------------------------------------------- the run


@dataclass
class Report:
    """One evaluation: its settings, the results of every model on every suite, and the env-match checks.

    Attributes:
        config: The :class:`EvalConfig`, as a dict.
        results: One per (model, suite), models in the order given.
        fingerprint: This run's environment fingerprint.
        env_match: One check per reference (training config, earlier reports).
        episodes: One row per episode played in this run (``episodes.jsonl``, not in ``report.json``).
    """

    config: dict[str, Any]
    results: list[SuiteResult]
    fingerprint: dict[str, Any]
    env_match: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)


def is_report_file(spec: str) -> bool:
    """The model spec names an earlier run's ``report.json``."""
    return spec.endswith(".json") and Path(spec).is_file()


def model_label(spec: str) -> str:
    """A short name: the baseline's name, ``tiny``, a checkpoint folder's name, or the hub id."""
    if spec in (*BASELINES, "tiny") or not Path(spec).exists():
        return spec
    return Path(spec).resolve().name


@contextmanager
def progress_bar(console: Console) -> Iterator[Progress]:
    """A rich progress display: one bar per (model, suite) run."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        yield progress


Evaluated = list[tuple[SuiteResult, list[dict[str, Any]]]]
"""Per suite: the model's result and its episode rows."""


def evaluate_scripted(name: str, label: str, config: EvalConfig, progress: Progress, shared: SuiteKwargs) -> Evaluated:
    """Play the scripted baseline ``name`` on every suite."""
    results = []
    for suite in config.suites:
        env = make_env(suite, config, shared)
        try:
            tasks = suite_tasks(env, config)
            kind = baseline(name, suite)
            samples = 1 if kind.deterministic else config.samples
            requests = group_requests([(env_spec(suite).id, task) for task in tasks], samples, config.seed)
            bar = progress.add_task(f"{label} · {suite}", total=len(requests))
            outcomes = play_scripted(name, suite, env, requests, functools.partial(progress.advance, bar))
        finally:
            env.close()
        notes = ["deterministic policy: one episode per task, so pass@k = pass@1"] if kind.deterministic else []
        if kind.sees_reference:
            notes.append("reference oracle: replays the task's reference solution (reads task metadata)")
        result = summarize(label, suite, "scripted", outcomes, samples=samples, ks=config.ks, notes=notes,
                           tasks=tasks)
        results.append((result, [episode_row(episode, label, suite) for episode in outcomes]))
    return results


def evaluate_model(spec: str, label: str, config: EvalConfig, progress: Progress, shared: SuiteKwargs) -> Evaluated:
    """Play a model on every suite: sampled episodes, and greedy ones too when sampling at a temperature."""
    player = ModelPlayer(spec, config, shared)
    results = []
    for suite in config.suites:
        env = make_env(suite, config, shared)
        tasks, turn_limit = suite_tasks(env, config), describe(env).limits.max_episode_steps
        env.close()
        pairs = [(env_spec(suite).id, task) for task in tasks]
        requests = group_requests(pairs, config.samples, config.seed)
        greedy_requests = group_requests(pairs, 1, config.seed) if config.temperature > 0 else []
        bar = progress.add_task(f"{label} · {suite}", total=len(requests) + len(greedy_requests))
        advance = functools.partial(progress.advance, bar)
        sampled = player.play(suite, requests, config.temperature, turn_limit, advance)
        greedy = player.play(suite, greedy_requests, 0.0, turn_limit, advance) if greedy_requests else None
        result = summarize(label, suite, "model", sampled, samples=config.samples, ks=config.ks, greedy=greedy,
                           settings=player.rollout_settings(config.temperature), tasks=tasks)
        results.append((result, [episode_row(episode, label, suite) for episode in sampled]))
    return results


def load_run(path: Path, label: str, config: EvalConfig) -> tuple[list[SuiteResult], dict[str, Any]]:
    """The results (of this run's suites, models prefixed with ``label``) and the fingerprint of a ``report.json``.

    Raises:
        ValueError: The file is not a report of this module.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not {"results", "fingerprint", "config"} <= set(data):
        raise ValueError(f"{path}: expected a report.json of benchmarks.evaluate, got keys {sorted(data)}")
    results = [SuiteResult(**with_counts(result)) for result in data["results"] if result["suite"] in config.suites]
    for result in results:
        result.model = f"{label}/{result.model}"
        result.notes.append(f"loaded from {path} (split {data['config']['split']})")
    return results, data["fingerprint"]


def with_counts(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result of ``report.json`` with the scored and invalid counts, derived for a report written before they
    were (scored: episodes less infra errors; invalid: the invalid component's mean over the scored episodes)."""
    upgraded = dict(result)
    upgraded.setdefault("scored", result["episodes"] - result["infra_errors"])
    shares = [mean for name, mean in result["reward_components"].items() if is_invalid_component(name)]
    upgraded.setdefault("invalid", round(upgraded["scored"] * max(shares, default=0.0)))
    return upgraded


def unique_labels(specs: Sequence[str]) -> list[str]:
    """One label per model spec (an earlier report by its folder's name); repeats get ``#2``, ``#3``..."""
    labels = [Path(spec).parent.name if is_report_file(spec) else model_label(spec) for spec in specs]
    seen: Counter[str] = Counter()
    unique = []
    for label in labels:
        seen[label] += 1
        unique.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return unique


def run_evaluation(config: EvalConfig, console: Console) -> Report:
    """Evaluate every model of ``config`` on every suite and check the envs against the references.

    The suites' shared services (:func:`shared_services`) run from the first episode to the fingerprint. The
    fingerprint's rollout limits are those the first model played here ran under (effective values: the
    context budget is cut to the model's position limit); None when only scripted policies played.

    Returns:
        The report (nothing written yet: see :func:`write_outputs`).
    """
    references = {config.training_config: load_reference(Path(config.training_config))} \
        if config.training_config else {}
    results: list[SuiteResult] = []
    episodes: list[dict[str, Any]] = []
    rollout: dict[str, Any] | None = None
    with shared_services(config) as shared, progress_bar(console) as progress:
        for spec, label in zip(config.models, unique_labels(config.models), strict=True):
            if is_report_file(spec):
                loaded, references[spec] = load_run(Path(spec), label, config)
                results += loaded
                continue
            if spec in BASELINES:
                played = evaluate_scripted(spec, label, config, progress, shared)
            else:
                played = evaluate_model(spec, label, config, progress, shared)
                rollout = rollout or played[0][0].settings
            results += [result for result, _ in played]
            episodes += [row for _, rows in played for row in rows]
        fingerprint = run_fingerprint(config, rollout, shared)
    checks = [env_match(fingerprint, reference, source) for source, reference in references.items()]
    return Report(config=asdict(config), results=results, fingerprint=fingerprint, env_match=checks,
                  episodes=episodes)


# ---------------------------------------------------------------------------------------------- rendering


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


NOT_SCORED = "n/a"
"""What a rate or mean shows when no episode was scored to compute it from."""


def _rate(value: float | None, result: SuiteResult) -> str:
    """A rate of ``result``: ``n/a`` when it scored no episode, ``-`` when not measured."""
    return NOT_SCORED if result.scored == 0 else _pct(value)


def _mean_reward(result: SuiteResult) -> str:
    return NOT_SCORED if result.mean_reward is None else f"{result.mean_reward:.3f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table: one row per (suite, model)."""
    ks = [k for k in map(str, sorted({int(k) for r in report.results for k in r.pass_at})) if k != "1"]
    header = ["suite", "model", "tasks", "episodes", "scored", "infra", "invalid", "pass@1",
              *[f"pass@{k}" for k in ks], "greedy pass@1", "mean reward", "mean turns"]
    rows = []
    for r in sorted(report.results, key=lambda r: r.suite):
        rows.append([r.suite, r.model, str(r.tasks), str(r.episodes), str(r.scored), str(r.infra_errors),
                     str(r.invalid), _rate(r.pass_at["1"], r), *[_rate(r.pass_at.get(k), r) for k in ks],
                     _rate(r.greedy_pass_at_1, r), _mean_reward(r), f"{r.turns['mean']:.2f}"])
    return header, rows


def infra_lines(results: Sequence[SuiteResult]) -> list[str]:
    """One line per (suite, model) with infrastructure faults: how many, and the first one's message."""
    return [f"{r.model} · {r.suite}: {r.infra_errors} of {r.episodes} episodes ended by an infrastructure fault "
            f"(left out of every rate); the first: {r.first_infra_error}" for r in results if r.infra_errors]


def invalid_lines(results: Sequence[SuiteResult]) -> list[str]:
    """One line per (suite, model) with invalid verifier runs: how many, and how many per reason."""
    return [f"{r.model} · {r.suite}: {r.invalid} of {r.scored} scored episodes had an invalid verifier run "
            f"(unsolved, not a wrong answer): " + ", ".join(f"{reason} {count}" for reason, count in
                                                              r.invalid_reasons.items())
            for r in results if r.invalid]


def unscored_results(report: Report) -> list[SuiteResult]:
    """The (suite, model) results with no scored episode: their rates measure nothing."""
    return [r for r in report.results if r.scored == 0]


def components_section(results: Sequence[SuiteResult]) -> str:
    """Mean reward terms per (suite, model) (their sub-components, ``term/part``, are in ``report.json``)."""
    names = sorted({name for r in results for name in r.reward_components if "/" not in name})
    rows = [[r.suite, r.model, *[f"{r.reward_components[n]:.3f}" if n in r.reward_components else "-" for n in names]]
            for r in results]
    return markdown_table(["suite", "model", *names], rows)


def difficulty_section(results: Sequence[SuiteResult]) -> str:
    """pass@1 (tasks) per difficulty level, per (suite, model)."""
    levels = sorted({int(level) for r in results for level in r.by_difficulty})
    rows = []
    for r in results:
        cells = [f"{_pct(r.by_difficulty[str(d)]['pass@1'])} ({r.by_difficulty[str(d)]['tasks']:.0f})"
                 if str(d) in r.by_difficulty else "-" for d in levels]
        rows.append([r.suite, r.model, *cells])
    return markdown_table(["suite", "model", *[f"difficulty {d}" for d in levels]], rows)


def tools_section(results: Sequence[SuiteResult]) -> str:
    """Calls per episode and failure rate per tool, per (suite, model)."""
    rows = [[r.suite, r.model, name, f"{stats['calls_per_episode']:.2f}", _pct(stats["failure_rate"]),
             f"{stats['infra_failures']:.0f}"] for r in results for name, stats in r.tools.items()]
    return markdown_table(["suite", "model", "tool", "calls / episode", "agent failure rate", "infra failures"], rows)


def turns_section(results: Sequence[SuiteResult]) -> str:
    """Turn statistics and stop reasons per (suite, model)."""
    reasons = sorted({reason for r in results for reason in r.stop_reasons})
    rows = [[r.suite, r.model, f"{r.turns['mean']:.2f}", f"{r.turns['median']:.0f}", f"{r.turns['max']:.0f}",
             *[str(r.stop_reasons.get(reason, 0)) for reason in reasons]] for r in results]
    return markdown_table(["suite", "model", "mean turns", "median", "max", *reasons], rows)


def env_match_section(report: Report) -> str:
    """The env-match checks, with every difference."""
    if not report.env_match:
        return "No reference given (`--training-config`); this run's fingerprint is in `fingerprint.json`."
    parts = []
    for check in report.env_match:
        if check["match"]:
            parts.append(f"- `{check['reference']}`: **match** (tools, limits, rewards, data versions)")
            continue
        parts.append(f"- `{check['reference']}`: **{len(check['differences'])} difference(s)**\n")
        rows = [[f"`{d['path']}`", f"`{json.dumps(d['evaluation'])}`", f"`{json.dumps(d['reference'])}`"]
                for d in check["differences"]]
        parts.append(markdown_table(["entry", "evaluation", "reference"], rows))
    return "\n".join(parts)


def render_markdown(report: Report) -> str:
    """The whole report as Markdown."""
    config = report.config
    results = sorted(report.results, key=lambda r: r.suite)
    notes = [f"- {r.model} · {r.suite}: {note}" for r in results for note in r.notes]
    notes += [f"- {line}" for line in infra_lines(results)]
    notes += [f"- {line}" for line in invalid_lines(results)]
    header, rows = summary_rows(report)
    sections = [
        f"# Evaluation: {', '.join(config['suites'])} · split `{config['split']}`",
        f"samples per task {config['samples']}, temperature {config['temperature']}, seed {config['seed']}, "
        f"prompt style `{config['prompt_style']}`" + (f", first {config['limit']} tasks" if config["limit"] else "")
        + (f", played on the server at {config['remote']}" if config.get("remote") else "")
        + (f", tasks from `{config['tasks_file']}` (not the split)" if config.get("tasks_file") else ""),
        "## Summary", markdown_table(header, rows),
        "Rates leave out episodes an infrastructure fault ended (`infra`), and are n/a when no episode was "
        "scored; `invalid`: scored episodes whose verifier run was invalid (unsolved); pass@k is the unbiased "
        "estimator of Chen et al. (2021).",
        "## Reward components (means; an unanswered episode scores 0; sub-components in report.json)",
        components_section(results),
        "## pass@1 by difficulty (tasks)", difficulty_section(results),
        "## Tool use", tools_section(results),
        "## Turns and stop reasons", turns_section(results),
        "## Environment match", env_match_section(report),
    ]
    sections += [f"## {r.benchmark['benchmark']}'s metrics · {r.model} · {r.suite}\n\n```\n"
                 + "\n".join(r.benchmark["lines"]) + "\n```" for r in results if r.benchmark]
    if notes:
        sections += ["## Notes", "\n".join(notes)]
    return "\n\n".join(sections) + "\n"


def render_console(report: Report, console: Console) -> None:
    """The summary table and the env-match verdicts, on the terminal."""
    header, rows = summary_rows(report)
    table = Table(title=f"Evaluation on split {report.config['split']!r}")
    for column in header:
        table.add_column(column, justify="left" if column in ("suite", "model") else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in infra_lines(report.results):
        console.print(f"[yellow]infrastructure faults[/yellow] {escape(line)}")
    for line in invalid_lines(report.results):
        console.print(f"[yellow]invalid runs[/yellow] {escape(line)}")
    for r in report.results:
        if r.benchmark:
            console.print(f"{escape(r.benchmark['benchmark'])}'s metrics · {escape(r.model)} · {r.suite}")
            console.print(escape("\n".join(f"  {line}" for line in r.benchmark["lines"])))
    for check in report.env_match:
        if check["match"]:
            console.print(f"[green]env match[/green] with {check['reference']}")
            continue
        console.print(f"[yellow]env mismatch[/yellow] with {check['reference']}:")
        for d in check["differences"]:
            console.print(f"  {d['path']}: evaluation {d['evaluation']!r}, reference {d['reference']!r}")


def save_bar_plot(results: Sequence[SuiteResult], path: Path, groups: Callable[[SuiteResult], Mapping[str, float]],
                  ylabel: str, title: str) -> None:
    """Grouped bars, one panel per suite, one bar colour per model, one group per key of ``groups(result)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = sorted({r.suite for r in results})
    figure, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.6), squeeze=False)
    for axis, suite in zip(axes[0], suites, strict=True):
        mine = [r for r in results if r.suite == suite]
        keys = sorted({key for r in mine for key in groups(r)})
        width = 0.8 / max(len(mine), 1)
        for index, result in enumerate(mine):
            values = [groups(result).get(key, 0.0) for key in keys]
            axis.bar([x + index * width for x in range(len(keys))], values, width, label=result.model)
        axis.set_xticks([x + width * (len(mine) - 1) / 2 for x in range(len(keys))], keys)
        axis.set_title(f"{suite}: {title}")
        axis.set_ylabel(ylabel)
        axis.set_ylim(0, max(axis.get_ylim()[1], 1e-9) * 1.25)  # headroom for the legend
        axis.legend(fontsize="small", loc="upper left", ncol=len(mine))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_outputs(report: Report, out: Path) -> list[Path]:
    """Write ``report.json``, ``report.md``, ``fingerprint.json``, the plots and ``episodes.jsonl`` to ``out``.

    Returns:
        The paths written.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in ("report.json", "report.md", "fingerprint.json", "by_difficulty.png",
                                     "tool_calls.png", "episodes.jsonl")]
    payload = asdict(report)
    rows = payload.pop("episodes")
    paths[0].write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(render_markdown(report), encoding="utf-8")
    paths[2].write_text(json.dumps(report.fingerprint, indent=2) + "\n", encoding="utf-8")
    save_bar_plot(report.results, paths[3], lambda r: {f"d{k}": v["pass@1"] for k, v in r.by_difficulty.items()},
                  "pass@1", "pass@1 by difficulty")
    save_bar_plot(report.results, paths[4], lambda r: {k: v["calls_per_episode"] for k, v in r.tools.items()},
                  "calls per episode", "tool calls")
    paths[5].write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return paths


# ---------------------------------------------------------------------------------------------- command line


def default_out(config: EvalConfig) -> Path:
    """``runs/eval/<models>__<suites>__<split>`` (``<tasks file stem>`` for ``--tasks``): the same arguments name
    the same folder."""
    models = "_vs_".join(unique_labels(config.models))
    name = f"{models}__{'-'.join(config.suites)}__{Path(config.tasks_file).stem if config.tasks_file else config.split}"
    return Path("runs") / "eval" / re.sub(r"[^A-Za-z0-9._-]+", "-", name)


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evaluate", description=__doc__.splitlines()[0])
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", action="append", help="oracle, random, tiny, a checkpoint folder, a hub id or an "
                                                      "earlier report.json; repeat to put several side by side")
    who.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two models or runs side by side")
    parser.add_argument("--suite", default="search",
                        help=f"comma-separated registered env ids or aliases, among {', '.join(SPECS.names())}")
    parser.add_argument("--split", default="test", help="bundled split")
    parser.add_argument("--tasks", help="instead of the split: a JSONL file of tasks for the one suite (DABench's: "
                                        "python -m tasks.data_analysis dabench)")
    parser.add_argument("--limit", type=int, help="only the first N tasks of each suite")
    parser.add_argument("--samples", type=int, default=1, help="episodes per task (n of pass@k)")
    parser.add_argument("--temperature", type=float, help="model sampling temperature (0: greedy; default: 1 with "
                                                          "--samples > 1, else 0)")
    parser.add_argument("--k", type=int, nargs="+", default=[], help="k values of pass@k (default: 1 and --samples)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of resets, random policies and sampling")
    parser.add_argument("--sandbox", default="docker", choices=("docker", "bwrap", "local"),
                        help="sandbox backend of PythonSandbox and DataAnalysis")
    def adopted(name: str) -> str:
        default = EvalConfig.__dataclass_fields__[name].default
        return f" (default: the training config's, else {'the env limit' if default is None else default})"

    parser.add_argument("--prompt-style", choices=("full", "task"), help="env prompt style" + adopted("prompt_style"))
    parser.add_argument("--max-turns", type=int, help="most model turns per episode" + adopted("max_turns"))
    parser.add_argument("--max-tokens-per-turn", type=int,
                        help="most tokens per model turn" + adopted("max_tokens_per_turn"))
    parser.add_argument("--max-context-tokens", type=int,
                        help="token budget of a model episode" + adopted("max_context_tokens"))
    parser.add_argument("--batch-size", type=int, default=32, help="model episodes in flight together")
    parser.add_argument("--device", help="torch device of models (default: cuda when available)")
    parser.add_argument("--training-config", help="GRPO/PPO config, a run's effective_config.json, fingerprint.json or "
                                                  "report.json to check the evaluation envs against; a config's "
                                                  "rollout limits and prompt style are adopted unless given here")
    parser.add_argument("--remote", metavar="URL", help="play the suite on the agentrl server at URL (python -m "
                        "agentgym_envs.serve ID) through agentrl/Remote-v0 instead of in process")
    parser.add_argument("--out", type=Path, help="output folder (default: runs/eval/<models>__<suites>__<split>)")
    parser.add_argument("--strict-env-match", action="store_true",
                        help="exit with status 1 when an env-match check finds a difference")
    return parser


def adopted_settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The :data:`ADOPTED` settings of a run: given on the command line, else the training config's, else
    :class:`EvalConfig`'s defaults; and those taken from the training config."""
    from_training = adoptable_settings(Path(args.training_config)) if args.training_config else {}
    adopted = {name: from_training[name] for name in ADOPTED
               if getattr(args, name) is None and name in from_training}
    defaults = {name: EvalConfig.__dataclass_fields__[name].default for name in ADOPTED}
    settings = {name: getattr(args, name) if getattr(args, name) is not None else adopted.get(name, defaults[name])
                for name in ADOPTED}
    return settings, adopted


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """The :class:`EvalConfig` of parsed arguments (its checks raise with how to fix the value)."""
    settings, _ = adopted_settings(args)
    return EvalConfig(models=tuple(args.compare or args.model), suites=tuple(s for s in args.suite.split(",") if s),
                      split=args.split, limit=args.limit, samples=args.samples, temperature=args.temperature,
                      k=tuple(args.k), seed=args.seed, sandbox=args.sandbox, batch_size=args.batch_size,
                      device=args.device, training_config=args.training_config, remote=args.remote,
                      tasks_file=args.tasks, **settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate, print the summary, write the outputs; status 1 when a model scored no episode on a suite (the
    error names the first infrastructure fault), or with --strict-env-match and a difference."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
        _, adopted = adopted_settings(args)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    console = Console()
    if adopted:
        console.print(f"adopted from {args.training_config}: "
                      + ", ".join(f"{name}={value}" for name, value in adopted.items()))
    report = run_evaluation(config, console)
    render_console(report, console)
    paths = write_outputs(report, args.out or default_out(config))
    console.print(f"wrote {', '.join(str(path) for path in paths)}")
    unscored = unscored_results(report)
    report_unscored(unscored, Console(stderr=True))
    mismatch = not all(check["match"] for check in report.env_match)
    return 1 if unscored or (args.strict_env_match and mismatch) else 0


def report_unscored(results: Sequence[SuiteResult], console: Console) -> None:
    """Say which (suite, model) scored no episode, the first infrastructure fault of each, and what to do."""
    for r in results:
        console.print(f"[red]error[/red]: {escape(r.model)} · {r.suite}: no episode was scored ({r.episodes} "
                      f"played, {r.infra_errors} ended by an infrastructure fault), so its rates are n/a; the "
                      f"first fault: {escape(r.first_infra_error or '(none recorded)')}")
    if results:
        console.print(f"to fix: {escape(INFRA_HINT)}")


if __name__ == "__main__":
    sys.exit(main())
