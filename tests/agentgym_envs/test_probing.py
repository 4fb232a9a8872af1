"""The env-independent parts of the reward-hacking probes: a probe plays a script or a policy of the env's own."""

from __future__ import annotations

import pytest

from agentgym_envs.policies import PythonOraclePolicy
from agentgym_envs.probing import Probe, ScriptPolicy, answer, fixed, spec_oracle
from agentgym_envs.registration import SPECS
from agentgym_envs.spec import EnvSpec


def test_a_probe_plays_its_script_or_its_policy_factory() -> None:
    scripted = Probe("empty", "toy/verifier", (answer(fixed("")),), "Answer received")
    oracle = Probe("oracle", "toy/verifier", None, "ok", oracle=True, policy_factory=spec_oracle("python"))
    assert isinstance(scripted.policy(), ScriptPolicy)
    assert isinstance(oracle.policy(), PythonOraclePolicy)  # PythonSandbox-v0's spec's oracle


@pytest.mark.parametrize(("steps", "factory", "given"), [
    # a probe with nothing to play
    (None, None, "neither"),
    # a script and a policy: which one plays would be a guess
    ((answer(fixed("")),), spec_oracle("python"), "both"),
])
def test_a_probe_needs_exactly_one_of_steps_and_policy_factory(steps, factory, given: str) -> None:
    with pytest.raises(ValueError, match=f"got {given}"):
        Probe("p", "toy/verifier", steps, "x", policy_factory=factory)


def test_the_oracle_of_a_spec_without_one_is_an_error_that_names_it() -> None:
    spec = EnvSpec(id="toy/NoOracle-v0", entry_point="toy:Env", max_episode_steps=3)
    with SPECS.added(spec), pytest.raises(ValueError, match="toy/NoOracle-v0: expected a spec with an oracle"):
        spec_oracle(spec.id)(0)
