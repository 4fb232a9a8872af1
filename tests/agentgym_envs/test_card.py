"""Every registered env publishes a card that matches what its episodes actually show, and nothing private is read."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from agentgym_envs import EnvCard, describe
from agentgym_envs.registration import registered_ids, sandbox_kwargs
from tasks.splits import bundle_manifest

ANSWER = "<answer>42</answer>"


@pytest.fixture(params=registered_ids())
def made(request: pytest.FixtureRequest) -> gym.Env:
    env = gym.make(request.param, split="test", **sandbox_kwargs(request.param, "bwrap"))
    yield env
    env.close()


def test_the_card_describes_the_registered_env_without_a_reset(made: gym.Env) -> None:
    card = describe(made)
    assert isinstance(card, EnvCard)
    assert card.env_id == made.spec.id and card.limits.max_episode_steps == made.spec.max_episode_steps
    assert set(card.families) == set(made.unwrapped.families)
    assert sum(family.tasks for family in card.families.values()) == card.source.tasks == len(made.unwrapped.tasks)
    for family in card.families.values():
        assert set(family.required_tools) <= set(card.tool_names)  # a required tool the env lacks is a typo
        assert [term.weight for term in family.reward if term.name == "outcome"] == [1.0]
    manifest = bundle_manifest(card.env_name)
    assert card.source.split == "test" and card.source.split_sha256 == manifest["splits"]["test"]["sha256"]
    assert json.loads(json.dumps(card.to_dict()))["env_id"] == card.env_id


def test_the_card_matches_what_an_episode_shows(made: gym.Env) -> None:
    card = describe(made)
    _, info = made.reset(seed=0)
    assert info["tools"] == [dict(tool) for tool in card.tools]
    *_, terminated, _, info = made.step(ANSWER)
    assert terminated
    family = card.families[made.unwrapped.task.family]
    reported = {name.split("/")[0] for name in info["reward_components"]}  # "outcome/verifier_timeout" is outcome's
    assert reported == {term.name for term in family.reward}


def test_a_sandbox_env_card_carries_its_backend_and_limits() -> None:
    env = gym.make("agentrl/PythonSandbox-v0", sandbox="bwrap")
    try:
        limits = describe(env).limits
    finally:
        env.close()
    assert limits.sandbox_backend == "bwrap" and limits.sandbox["timeout_s"] == env.unwrapped.sandbox_limits.timeout_s
    search = gym.make("agentrl/Search-v0")
    try:
        assert describe(search).limits.sandbox_backend is None and describe(search).limits.sandbox is None
    finally:
        search.close()


def test_a_changed_reward_weight_shows_in_the_card() -> None:
    from rewards import CompositeReward, Term, exact_match_reward, f1_reward

    reward = CompositeReward([Term("outcome", exact_match_reward), Term("f1", f1_reward, weight=0.25, cap=(0, 1))])
    env = gym.make("agentrl/Search-v0", reward=reward)
    try:
        card = describe(env)
    finally:
        env.close()
    assert card.reward_component_names() == ("outcome", "f1")
    f1 = card.families["bridge"].reward[1]
    assert (f1.weight, f1.cap, f1.fn) == (0.25, (0, 1), "rewards.text.f1_reward")


def test_describe_refuses_an_env_without_a_card() -> None:
    with pytest.raises(TypeError, match="expected an agentrl environment"):
        describe(gym.make("CartPole-v1"))
