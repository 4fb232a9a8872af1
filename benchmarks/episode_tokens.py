"""Episode lengths in tokens: what context budget (``max_context_tokens``) and turn budget (``max_tokens_per_turn``)
an env's episodes need.

Plays a scripted policy (the env's oracle by default) on the first tasks of a split, through the one episode runner
and :class:`trainers.sft.DemonstrationAgent`, so each episode is tokenized exactly as a rollout is (the prompt
rendered once, each action, each observation wrapped in the chat template's tool-response turn), with the tiny
model's tokenizer or any other. Prints per env: the prompt, the longest action, the longest observation, the
turns, the whole episode (prompt plus completion: what ``max_context_tokens`` bounds), as median and maximum, and
the share of the policy's episodes that it solved (an unsolved one may be shorter than a solving one).

Example:
    python -m benchmarks.episode_tokens --envs search python --tasks 20 --prompt-style task
    python -m benchmarks.episode_tokens --envs data --sandbox bwrap --json lengths.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rich.console import Console
from rich.table import Table

from agentgym_envs.policies import ScriptedAgent
from agentgym_envs.registration import canonical_env_id, env_spec, make, runs_agent_code, sandbox_kwargs
from agentgym_envs.runner import EnvPool, Episode, EpisodeRequest, EpisodeRunner


@dataclass(frozen=True)
class EpisodeTokens:
    """Token counts of one env's episodes under one policy (medians and maxima over the episodes).

    Attributes:
        env_id: The env.
        policy: The scripted policy played.
        episodes: How many were played (infrastructure episodes left out).
        solved: The share the policy solved.
        turns_p50, turns_max: Agent turns per episode.
        prompt_p50, prompt_max: Prompt tokens (instructions, tools, task, chat template).
        action_max: The longest action, in tokens: what ``max_tokens_per_turn`` must allow.
        observation_max: The longest wrapped observation, in tokens.
        context_p50, context_max: Prompt plus completion: what ``max_context_tokens`` must allow.
        context_p90: Its 90th percentile (nearest rank).
    """

    env_id: str
    policy: str
    episodes: int
    solved: float
    turns_p50: float
    turns_max: int
    prompt_p50: float
    prompt_max: int
    action_max: int
    observation_max: int
    context_p50: float
    context_p90: int
    context_max: int


def measure(env_id: str, *, policy: str = "oracle", split: str = "train", tasks: int = 20,
            prompt_style: str = "full", families: Sequence[str] | None = None, sandbox: str | None = None,
            tokenizer=None) -> EpisodeTokens:
    """Play ``policy`` on the first ``tasks`` tasks of ``split`` and count the tokens of each episode.

    Args:
        env_id: A registered id or alias.
        policy: A scripted policy of the env's spec (``oracle``, ``random``, or one of its own).
        split: The bundled split.
        tasks: How many of its tasks (the first ones).
        prompt_style: ``"full"`` (instructions and tool list in the prompt) or ``"task"`` (the task alone).
        families: Only tasks of these families (None: all of the env's).
        sandbox: The sandbox backend of an env that runs agent code (None: the env's default).
        tokenizer: A ``transformers`` tokenizer with a chat template (None: the tiny model's).
    """
    from trainers.chat import ChatTokens
    from trainers.sft import DemonstrationAgent

    env_id = canonical_env_id(env_id)
    if tokenizer is None:
        from trainers.tiny_model import load_or_build_tiny_model

        tokenizer = load_or_build_tiny_model()[1]
    kwargs: dict = {"split": split, "prompt_style": prompt_style}
    if families is not None:
        kwargs["families"] = list(families)
    if sandbox is not None and runs_agent_code(env_id):
        kwargs.update(sandbox_kwargs(env_id, sandbox))
    env = make(env_id, **kwargs)
    try:
        chosen = list(env.unwrapped.tasks)[:tasks]
        spec = env_spec(env_id)
        agent = DemonstrationAgent(ChatTokens(tokenizer),
                                   ScriptedAgent(lambda request: spec.policy(policy, seed=request.seed or 0)))
        runner = EpisodeRunner(EnvPool(lambda _: env), workers=1)
        played = [runner.run(agent, [EpisodeRequest(env_id=env_id, task=task, group=0, seed=index)])[0]
                  for index, task in enumerate(chosen)]
    finally:
        env.close()
    return summarize(env_id, policy, played)


def summarize(env_id: str, policy: str, episodes: Sequence[Episode]) -> EpisodeTokens:
    """The counts of :class:`EpisodeTokens` over the scored ones of ``episodes`` (infrastructure faults left out).

    Raises:
        ValueError: No episode was scored (every one hit an infrastructure fault).
    """
    faults = [episode for episode in episodes if not episode.scored]
    episodes = [episode for episode in episodes if episode.scored]
    if not episodes:
        first = faults[0].error or faults[0].final_info.get("error") if faults else "no episode was played"
        raise ValueError(f"{env_id}: expected scored episodes, got none; the first infrastructure fault: {first}")
    actions = [run for episode in episodes for run in _runs(episode.env_mask, 1)]
    observations = [run for episode in episodes for run in _runs(episode.env_mask, 0)]
    turns = [len(episode.turns) for episode in episodes]
    prompts = [len(episode.prompt_ids) for episode in episodes]
    contexts = [episode.context_length for episode in episodes]
    return EpisodeTokens(env_id=env_id, policy=policy, episodes=len(episodes),
                         solved=sum(episode.success for episode in episodes) / len(episodes),
                         turns_p50=statistics.median(turns), turns_max=max(turns),
                         prompt_p50=statistics.median(prompts), prompt_max=max(prompts),
                         action_max=max(actions, default=0), observation_max=max(observations, default=0),
                         context_p50=statistics.median(contexts), context_p90=_nearest_rank(contexts, 0.9),
                         context_max=max(contexts))


def _nearest_rank(values: Sequence[int], share: float) -> int:
    """The nearest-rank percentile: the smallest value with at least ``share`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _runs(mask: Sequence[int], value: int) -> list[int]:
    """Lengths of the maximal runs of ``value`` in ``mask`` (the actions are runs of 1, observations of 0)."""
    runs, length = [], 0
    for bit in (*mask, None):
        if bit == value:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def table(rows: Sequence[EpisodeTokens]) -> Table:
    """The measurements as a table."""
    out = Table(title="Episode lengths in tokens (p50 / max)")
    for column in ("env", "policy", "episodes", "solved", "turns", "prompt", "longest action",
                   "longest observation", "episode (prompt + completion), p50 / p90 / max"):
        out.add_column(column)
    for row in rows:
        out.add_row(row.env_id, row.policy, str(row.episodes), f"{row.solved:.0%}",
                    f"{row.turns_p50:g} / {row.turns_max}", f"{row.prompt_p50:g} / {row.prompt_max}",
                    str(row.action_max), str(row.observation_max),
                    f"{row.context_p50:g} / {row.context_p90} / {row.context_max}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each env and print the table (and the JSON with ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.episode_tokens", description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", required=True, help="registered ids or aliases")
    parser.add_argument("--policy", default="oracle", help="the scripted policy played (default: oracle)")
    parser.add_argument("--split", default="train", help="bundled split (default: train)")
    parser.add_argument("--tasks", type=int, default=20, help="tasks per env, the split's first (default: 20)")
    parser.add_argument("--prompt-style", choices=("full", "task"), default="full")
    parser.add_argument("--families", help="comma-separated task families (default: all of each env's)")
    parser.add_argument("--sandbox", choices=("docker", "bwrap", "local"), default=None,
                        help="sandbox backend of the envs that run agent code (default: each env's)")
    parser.add_argument("--json", metavar="PATH", help="also write the measurements to PATH")
    args = parser.parse_args(argv)
    console = Console(width=160)
    rows, failed = [], []
    for env_id in args.envs:
        try:
            rows.append(measure(env_id, policy=args.policy, split=args.split, tasks=args.tasks,
                                prompt_style=args.prompt_style, sandbox=args.sandbox,
                                families=args.families.split(",") if args.families else None))
        except ValueError as exc:  # every episode of the env hit an infrastructure fault: the others still count
            failed.append(str(exc))
    console.print(table(rows))
    for message in failed:
        console.print(f"[red]not measured:[/red] {message}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([asdict(row) for row in rows], out, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
