"""PythonSandbox-v0's spec: math and code tasks solved with a ``python`` tool in a sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_envs.spec import (
    PYTHON_LOAD_ACTION,
    PYTHON_SPIN_ACTION,
    SANDBOX_FAULTS,
    EnvSpec,
    ProbeSettings,
    Relabeling,
    StressProfile,
    sandboxed,
)


def oracle(seed: int):
    """The reference oracle: runs the task's reference program, answers with its output."""
    from agentgym_envs.policies.python_oracle import PythonOraclePolicy

    return PythonOraclePolicy()


def probes(settings: ProbeSettings) -> Sequence[Any]:
    """PythonSandbox's reward-hacking probes (:mod:`agentgym_envs.python_sandbox.probes`)."""
    from agentgym_envs.python_sandbox.probes import run_probes

    return run_probes(settings)


def probe_catalogue() -> Sequence[Any]:
    """PythonSandbox's reward-hacking probes, unplayed (:func:`agentgym_envs.python_sandbox.probes.catalogue`)."""
    from agentgym_envs.python_sandbox.probes import catalogue

    return catalogue()


SPEC = EnvSpec(
    id="agentrl/PythonSandbox-v0",
    entry_point="agentgym_envs.python_sandbox:PythonSandboxEnv",
    max_episode_steps=12,
    aliases=("python",),
    oracle=oracle,
    oracle_sees_reference=True,
    stress=StressProfile(kwargs=sandboxed, load_action=PYTHON_LOAD_ACTION, spin_action=PYTHON_SPIN_ACTION,
                         faults=SANDBOX_FAULTS),
    probes=probes,
    probe_catalogue=probe_catalogue,
    relabeling=Relabeling(False, "no: math: a wrong answer to one problem is not the right answer to another generated "
                           "problem, and relabeling it as one would teach the model to be wrong. code: a failing "
                           "program is not a correct solution to another hidden-test suite."),
)
"""PythonSandbox-v0's spec."""
