"""Every registered id goes through Gymnasium's checker and a same-seed determinism test, on both real backends."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym_envs
from agentgym_envs.errors import UnknownEnvError
from agentgym_envs.registration import registered_ids, runs_agent_code, sandbox_kwargs

SCRIPTED_ACTIONS = [
    '<tool_call>{"name": "python", "arguments": {"code": "x = 21 * 2\\nprint(x)"}}</tool_call>',
    "not an action at all",
    '<tool_call>{"name": "pyhton", "arguments": {}}</tool_call>',
    "<answer>42</answer>",
]


def test_every_id_is_registered_on_import():
    assert registered_ids(), "no agentrl ids registered"
    for env_id in registered_ids():
        assert env_id in gym.registry
        assert env_id.startswith("agentrl/") and env_id.endswith("-v0")


def test_module_prefixed_make_form_works():
    env = gym.make("agentgym_envs:agentrl/PythonSandbox-v0", sandbox="bwrap")  # no sandbox until reset
    try:
        assert env.spec.id == "agentrl/PythonSandbox-v0"
        assert env.spec.max_episode_steps is not None  # turn limits come as truncation
    finally:
        env.close()


def test_mistyped_id_suggests_the_close_match():
    with pytest.raises(UnknownEnvError, match=r"did you mean 'agentrl/PythonSandbox-v0'"):
        agentgym_envs.make("agentrl/PythonSandbx-v0")
    with pytest.raises(UnknownEnvError, match=r"did you mean 'agentrl/PythonSandbox-v0'"):
        agentgym_envs.make("pythonsandbox-v0")


def test_only_envs_that_run_agent_code_take_a_sandbox():
    assert runs_agent_code("agentrl/PythonSandbox-v0") and not runs_agent_code("agentrl/Search-v0")
    assert sandbox_kwargs("agentrl/PythonSandbox-v0", "bwrap") == {"sandbox": "bwrap"}
    assert sandbox_kwargs("agentrl/Search-v0", "bwrap") == {}
    with pytest.raises(TypeError, match="sandbox"):  # an env that runs no code refuses the argument
        gym.make("agentrl/Search-v0", sandbox="bwrap")
    with pytest.raises(UnknownEnvError, match="did you mean"):
        runs_agent_code("agentrl/Serch-v0")


@pytest.mark.parametrize("env_id", registered_ids())
def test_check_env_passes(env_id, backend):
    env = gym.make(env_id, **sandbox_kwargs(env_id, backend))
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def _rollout(env_id: str, backend: str, seed: int) -> list[str]:
    env = gym.make(env_id, **sandbox_kwargs(env_id, backend))
    try:
        observation, info = env.reset(seed=seed)
        transcript = [observation, json.dumps(info["tools"], sort_keys=True)]
        for action in SCRIPTED_ACTIONS:
            observation, reward, terminated, truncated, _ = env.step(action)
            transcript.append(f"{observation}|{reward}|{terminated}|{truncated}")
            if terminated or truncated:
                break
        return transcript
    finally:
        env.close()


@pytest.mark.parametrize("env_id", registered_ids())
def test_same_seed_same_episode(env_id, backend):
    first = _rollout(env_id, backend, seed=123)
    assert first == _rollout(env_id, backend, seed=123)
    assert first[0] != _rollout(env_id, backend, seed=7)[0]  # the seed picks the task
