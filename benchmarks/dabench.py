"""Play InfiAgent-DABench's questions in DataAnalysis-v0 and report DABench's own metrics.

Usage::

    python -m tasks.data_analysis dabench --questions da-dev-questions.jsonl --labels da-dev-labels.jsonl \\
        --data-dir da-dev-tables --out data/dabench/tasks.jsonl
    python -m benchmarks.dabench --tasks data/dabench/tasks.jsonl --questions da-dev-questions.jsonl \\
        --labels da-dev-labels.jsonl --model runs/ckpt --sandbox docker --out runs/dabench

One episode per question, graded with ``grader="dabench"``; each final answer becomes a DABench response
(``responses.jsonl``: ``id``, ``response``, the format DABench's ``eval_closed_form.py`` reads), scored by
:func:`~tasks.data_analysis.dabench_eval.score_responses`: ABQ, PSAQ, UASQ, per concept and per number of
concepts (``metrics.json``), printed as DABench prints them. ``--model`` is ``random`` (the env's random policy,
shown the prompt only), ``tiny`` (the bundled tiny model), a checkpoint folder or a hub id.

An episode that an infrastructure fault ended (a dead sandbox) gives no response: it is counted, the first
fault is named, and the command exits 1, since DABench would silently leave such a question out of its
denominators.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym_envs.data_analysis.dabench import dabench_responses
from agentgym_envs.policies import ScriptedAgent
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.registration import env_spec, sandbox_kwargs
from agentgym_envs.runner import EnvPool, Episode, EpisodeRequest, EpisodeRunner, group_requests
from tasks import Task, read_tasks
from tasks.data_analysis.dabench_eval import DabenchMetrics, metrics_lines, score_responses
from trainers.infra_guard import INFRA_HINT, first_infra_error

ENV_ID = "agentrl/DataAnalysis-v0"


@dataclass(frozen=True)
class ModelSettings:
    """How a model is rolled out (greedy: DABench's numbers are one answer per question).

    Attributes:
        max_tokens_per_turn: Most tokens generated in one turn.
        max_context_tokens: Token budget of an episode (cut to the model's position limit).
        batch_size: Episodes in flight together (one env each).
        device: Torch device (None: cuda when available, else cpu).
    """

    max_tokens_per_turn: int = 512
    max_context_tokens: int = 8192
    batch_size: int = 8
    device: str | None = None


def dabench_tasks(path: Path, limit: int | None = None) -> list[Task]:
    """The tasks of ``path`` (written by ``python -m tasks.data_analysis dabench``), the first ``limit`` of them.

    Raises:
        ValueError: A task without ``metadata["dabench_id"]`` (not made from DABench's files by this project).
    """
    tasks = read_tasks(path)[:limit] if limit else read_tasks(path)
    foreign = [task.id for task in tasks if "dabench_id" not in task.metadata]
    if foreign:
        raise ValueError(f"{path}: expected tasks written by `python -m tasks.data_analysis dabench` (with "
                         f"metadata['dabench_id']), got {len(foreign)} without, e.g. {foreign[0]!r}")
    return tasks


def play_random(tasks: Sequence[Task], make_env: Any, seed: int) -> list[Episode]:
    """One episode per task of the env's random policy, shown the prompt only."""
    random_policy = env_spec(ENV_ID).random
    agent = ScriptedAgent(lambda request: random_policy(request.seed), shown=prompt_only)
    runner = EpisodeRunner(EnvPool(make_env), workers=1)
    episodes = []
    for request in group_requests([(ENV_ID, task) for task in tasks], 1, seed):
        episodes += runner.run(agent, [request])
    return episodes


def play_model(spec: str, tasks: Sequence[Task], make_env: Any, seed: int, settings: ModelSettings) -> list[Episode]:
    """One greedy episode per task of the model ``spec``, through the rollout engine."""
    import torch

    from trainers.generation import TransformersGenerator
    from trainers.rollout import RolloutConfig, RolloutEngine
    from trainers.tiny_model import load_model

    model, tokenizer = load_model(spec)
    model.to(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    positions = getattr(model.config, "max_position_embeddings", None) or settings.max_context_tokens
    rollout = RolloutConfig(max_turns=env_spec(ENV_ID).max_episode_steps,
                            max_tokens_per_turn=settings.max_tokens_per_turn,
                            max_context_tokens=min(settings.max_context_tokens, positions),
                            min_turn_tokens=min(8, settings.max_tokens_per_turn), temperature=0.0,
                            tool_workers=settings.batch_size)
    pool = EnvPool(make_env)
    engine = RolloutEngine(TransformersGenerator(model, tokenizer.pad_token_id, batch_size=settings.batch_size),
                           tokenizer, pool, rollout)
    requests: list[EpisodeRequest] = group_requests([(ENV_ID, task) for task in tasks], 1, seed)
    episodes = []
    try:
        for start in range(0, len(requests), settings.batch_size):
            torch.manual_seed(seed + start)
            episodes += engine.run(requests[start:start + settings.batch_size])
    finally:
        pool.close()
    return episodes


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dabench", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, required=True, help="tasks JSONL of `python -m tasks.data_analysis "
                                                                  "dabench`")
    parser.add_argument("--questions", type=Path, required=True, help="DABench's questions JSONL (concepts)")
    parser.add_argument("--labels", type=Path, required=True, help="DABench's labels JSONL")
    parser.add_argument("--model", required=True, help="random, tiny, a checkpoint folder or a hub id")
    parser.add_argument("--sandbox", default="docker", choices=("docker", "bwrap", "local"), help="sandbox backend")
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--seed", type=int, default=0, help="reset seeds and the random policy's")
    parser.add_argument("--max-tokens-per-turn", type=int, default=ModelSettings.max_tokens_per_turn)
    parser.add_argument("--max-context-tokens", type=int, default=ModelSettings.max_context_tokens)
    parser.add_argument("--batch-size", type=int, default=ModelSettings.batch_size)
    parser.add_argument("--device", help="torch device (default: cuda when available)")
    parser.add_argument("--out", type=Path, required=True, help="folder for responses.jsonl and metrics.json")
    return parser


def run(args: argparse.Namespace) -> tuple[DabenchMetrics, int]:
    """Play, write ``responses.jsonl`` and ``metrics.json``; the metrics and the infrastructure faults."""
    tasks = dabench_tasks(args.tasks, args.limit)

    def make_env(_: str) -> gym.Env:
        return gym.make(ENV_ID, tasks=tasks, grader="dabench", **sandbox_kwargs(ENV_ID, args.sandbox))

    if args.model == "random":
        episodes = play_random(tasks, make_env, args.seed)
    else:
        settings = ModelSettings(args.max_tokens_per_turn, args.max_context_tokens, args.batch_size, args.device)
        episodes = play_model(args.model, tasks, make_env, args.seed, settings)
    answered = dabench_responses(tasks, episodes)
    played = {response["id"] for response in answered}
    labels = [label for label in _read_jsonl(args.labels) if label["id"] in played]
    concepts = {question["id"]: question["concepts"] for question in _read_jsonl(args.questions)}
    metrics = score_responses(labels, answered, concepts)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in answered), encoding="utf-8")
    (args.out / "metrics.json").write_text(json.dumps(asdict(metrics), indent=2) + "\n", encoding="utf-8")
    infra = [episode for episode in episodes if episode.infra_error]
    if infra:
        print(f"error: {len(infra)} of {len(episodes)} episodes ended in an infrastructure fault and were not "
              f"scored; the first: {first_infra_error(infra)}; {INFRA_HINT}", file=sys.stderr)
    return metrics, len(infra)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; 1 when an infrastructure fault ended an episode, 2 on bad input."""
    args = _parser().parse_args(argv)
    try:
        metrics, infra_errors = run(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(metrics_lines(metrics)))
    print(f"wrote {args.out / 'responses.jsonl'} and {args.out / 'metrics.json'}")
    return 1 if infra_errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
