"""DataAnalysis-v0's spec: questions about data files, answered with ``python`` and ``sql`` in a sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_envs.spec import (
    PYTHON_LOAD_ACTION,
    PYTHON_SPIN_ACTION,
    SANDBOX_FAULTS,
    EnvSpec,
    ProbeSettings,
    StressProfile,
    sandboxed,
)


def oracle(seed: int):
    """The reference oracle: runs the task's reference analysis, answers its fields."""
    from agentgym_envs.policies.data_analysis_oracle import DataAnalysisOraclePolicy

    return DataAnalysisOraclePolicy()


def random(seed: int):
    """Random python and sql calls, then a made-up answer in the task's format."""
    from agentgym_envs.policies.data_analysis_oracle import DataAnalysisRandomPolicy

    return DataAnalysisRandomPolicy(seed=seed)


def probes(settings: ProbeSettings) -> Sequence[Any]:
    """DataAnalysis's reward-hacking probes (:mod:`agentgym_envs.data_analysis.probes`)."""
    from agentgym_envs.data_analysis.probes import run_probes

    return run_probes(settings)


def probe_catalogue() -> Sequence[Any]:
    """DataAnalysis's reward-hacking probes, unplayed (:func:`agentgym_envs.data_analysis.probes.catalogue`)."""
    from agentgym_envs.data_analysis.probes import catalogue

    return catalogue()


def benchmark_metrics(tasks: Sequence[Any], episodes: Sequence[Any]) -> Any:
    """DABench's ABQ, PSAQ and UASQ of episodes on tasks made from DABench's files
    (:func:`agentgym_envs.data_analysis.dabench.benchmark_metrics`)."""
    from agentgym_envs.data_analysis.dabench import benchmark_metrics as dabench_metrics

    return dabench_metrics(tasks, episodes)


def speed(argv: Sequence[str]) -> int:
    """Its speed benchmark, :mod:`agentgym_envs.data_analysis.speed`."""
    from agentgym_envs.data_analysis.speed import main

    return main(argv)


SPEC = EnvSpec(
    id="agentrl/DataAnalysis-v0",
    entry_point="agentgym_envs.data_analysis:DataAnalysisEnv",
    max_episode_steps=20,  # DA-Code's and DSBench's step limit
    speed=speed,
    aliases=("data",),
    oracle=oracle,
    oracle_sees_reference=True,
    random=random,
    # the oracle imports pandas and pyarrow, which do not load under 512 MB of address space (the kernel's rlimit)
    stress=StressProfile(kwargs=sandboxed, load_action=PYTHON_LOAD_ACTION, spin_action=PYTHON_SPIN_ACTION,
                         faults=SANDBOX_FAULTS, memory_mb=1024),
    probes=probes,
    probe_catalogue=probe_catalogue,
    benchmark_metrics=benchmark_metrics,
)
"""DataAnalysis-v0's spec."""
