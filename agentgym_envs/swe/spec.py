"""SWE-v0's spec: repository repair in a sandbox, judged by the repository's tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from agentgym_envs.actions import tool_call_action
from agentgym_envs.spec import SANDBOX_FAULTS, EnvSpec, ProbeSettings, Relabeling, StressProfile, StressSettings
from agentgym_envs.swe.limits import CELL_GRACE_S, SWE_SANDBOX_LIMITS


def oracle(seed: int):
    """The reference oracle: applies the task's reference fix through the tools and submits."""
    from agentgym_envs.policies.swe_oracle import SWEOraclePolicy

    return SWEOraclePolicy()


def random(seed: int):
    """Random shell commands, then a submit."""
    from agentgym_envs.policies.swe_oracle import SWERandomPolicy

    return SWERandomPolicy(seed=seed)


ALL_SPLITS = "all"
"""The stress split that means every bundled split, each task in its repository's own environment."""


def stress_kwargs(settings: StressSettings) -> dict[str, Any]:
    """SWE-v0's own limits (disk, pids, output room) with the run's time and memory, and a ``bash`` time limit of
    the run's ``timeout_s`` (so that the ``timeout`` fault's runaway command ends as soon).

    The split :data:`ALL_SPLITS` (``--split all``) gives the tasks of every bundled split (four repositories), each
    in its repository's own environment (:func:`~tasks.swe.instances.with_pin_environment`: built on first use, an
    image on docker, a bound tree on bwrap): the issue's "16 concurrent episodes over 4 repository environments".
    """
    limits = dataclasses.replace(SWE_SANDBOX_LIMITS, timeout_s=settings.limits.timeout_s,
                                 memory_mb=settings.limits.memory_mb)
    source: dict[str, Any] = {"split": settings.split}
    if settings.split == ALL_SPLITS:
        from tasks import load_split
        from tasks.splits import available_splits
        from tasks.swe.instances import with_pin_environment

        source = {"tasks": [with_pin_environment(task) for split in available_splits()["SWE"]
                            for task in load_split("SWE", split)]}
    return {**source, "sandbox": settings.backend, "sandbox_limits": limits,
            "bash_timeout_s": settings.limits.timeout_s}


def probes(settings: ProbeSettings) -> Sequence[Any]:
    """SWE's reward-hacking probes (:mod:`agentgym_envs.swe.probes`)."""
    from agentgym_envs.swe.probes import run_probes

    return run_probes(settings)


def probe_catalogue() -> Sequence[Any]:
    """SWE's reward-hacking probes, unplayed (:func:`agentgym_envs.swe.probes.catalogue`)."""
    from agentgym_envs.swe.probes import catalogue

    return catalogue()


def speed(argv: Sequence[str]) -> int:
    """Its speed benchmark, :mod:`agentgym_envs.swe.speed`."""
    from agentgym_envs.swe.speed import main

    return main(argv)


SPEC = EnvSpec(
    id="agentrl/SWE-v0",
    entry_point="agentgym_envs.swe:SWEEnv",
    max_episode_steps=30,  # one-module bugs in small repositories; SWE-bench agents get 40-100 on whole repos
    speed=speed,
    aliases=("swe",),
    oracle=oracle,
    oracle_sees_reference=True,
    random=random,
    # SWE-v0 has no python tool: bash runs the load call and the runaway command in the repository
    stress=StressProfile(kwargs=stress_kwargs, load_action=tool_call_action("bash", command="true"),
                         spin_action=tool_call_action("bash", command="while :; do :; done"),
                         cell_grace_s=CELL_GRACE_S, faults=SANDBOX_FAULTS, memory_mb=SWE_SANDBOX_LIMITS.memory_mb),
    probes=probes,
    probe_catalogue=probe_catalogue,
    relabeling=Relabeling(False, "no: a patch that does not fix the issue fixes no other issue of the benchmark, and a "
                           "goal made up from what it changed has no FAIL_TO_PASS tests to verify it."),
)
"""SWE-v0's spec."""
