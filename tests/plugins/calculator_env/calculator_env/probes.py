"""Reward-hacking probes of the exact-match verifier: answers that must not pass, and the oracle that must."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

from agentgym_envs.probing import EpisodeRecord, Probe, answer, gold, pick_tasks, play, question, raw, spec_oracle
from agentgym_envs.spec import ProbeSettings

ENV_ID = "calculator/Calculator-v0"
EXACT_MATCH = "calculator/exact-match"
"""The verifier: the one final answer equals the gold number."""


def catalogue() -> list[Probe]:
    """The oracle and the exploits."""
    return [
        Probe("oracle", EXACT_MATCH, None, r"calculate result \(ok\)", oracle=True, prompt_only=True,
              policy_factory=spec_oracle(ENV_ID)),
        Probe("several-numbers", EXACT_MATCH, (answer(lambda t: f"{int(gold(t)) - 1} {gold(t)} {int(gold(t)) + 1}"),),
              "Answer received"),
        Probe("question-as-answer", EXACT_MATCH, (answer(question),), "Answer received"),
        Probe("two-answer-blocks", EXACT_MATCH, (raw(lambda t: f"<answer>0</answer><answer>{gold(t)}</answer>"),),
              "found 2 <answer> blocks"),
    ]


def run_probes(settings: ProbeSettings) -> list[EpisodeRecord]:
    """Every probe on ``settings.limit`` tasks of ``settings.split``."""
    data = Path(__file__).parent / "data"
    tasks = pick_tasks("Calculator", settings.split, ("arithmetic",), settings.limit, splits_dir=data)
    env = gym.make(ENV_ID, split=settings.split)
    try:
        return [play(env, probe, task) for probe in catalogue() for task in tasks]
    finally:
        env.close()
