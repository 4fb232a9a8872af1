"""Shared fixtures of the policy endpoint's tests: the tiny model and a pool of Search-v0 envs, per module."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401
from trainers.rollout import EnvPool
from trainers.tiny_model import load_or_build_tiny_model


@pytest.fixture(scope="module")
def tiny():
    """The tiny model and its tokenizer."""
    return load_or_build_tiny_model()


@pytest.fixture(scope="module")
def tokenizer(tiny):
    """The tiny model's tokenizer."""
    return tiny[1]


@pytest.fixture(scope="module")
def envs():
    """Envs on the bundled train split, closed after the module."""
    pool = EnvPool(lambda env_id: gym.make(env_id, split="train"))
    yield pool
    pool.close()
