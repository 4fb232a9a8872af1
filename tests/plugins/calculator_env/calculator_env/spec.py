"""Calculator-v0's spec: what agentrl's tooling needs (registered through the ``agentrl.envs`` entry point)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_envs.actions import tool_call_action
from agentgym_envs.spec import EnvSpec, ProbeSettings, StressProfile


def oracle(seed: int):
    """The tools-only oracle."""
    from calculator_env.policies import CalculatorOracle

    return CalculatorOracle()


def probes(settings: ProbeSettings) -> Sequence[Any]:
    """Plays the exact-match probes (:mod:`calculator_env.probes`)."""
    from calculator_env.probes import run_probes

    return run_probes(settings)


def probe_catalogue() -> Sequence[Any]:
    """Lists the exact-match probes."""
    from calculator_env.probes import catalogue

    return catalogue()


SPEC = EnvSpec(
    id="calculator/Calculator-v0",
    entry_point="calculator_env.env:CalculatorEnv",
    max_episode_steps=8,
    aliases=("calculator",),
    oracle=oracle,
    stress=StressProfile(load_action=tool_call_action("calculate", expression="(12 + 30) * 7")),
    probes=probes,
    probe_catalogue=probe_catalogue,
    splits_dir=Path(__file__).parent / "data",
)
"""Calculator-v0's spec."""
