"""One GRPO recipe per environment (trainers/configs/grpo_<env>_cpu.yaml), each read by the trainer's own parser,
with a context budget the tiny model can hold and that covers the episodes measured in its comments."""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path

import gymnasium as gym
import pytest
from trl import ModelConfig, TrlParser

import agentgym_envs  # noqa: F401
from agentgym_envs.registration import BUNDLED_SPECS, canonical_env_id
from trainers.grpo import AgentGRPOConfig
from trainers.tiny_model import TinyModelConfig

CONFIGS = Path(__file__).resolve().parents[2] / "trainers" / "configs"
RECIPES = sorted(CONFIGS.glob("grpo_*_cpu.yaml"))
MEASURED = re.compile(r"longest action ([\d,]+).*?whole episode ([\d,]+) / [\d,]+ / ([\d,]+)", re.DOTALL)


def parse(recipe: Path, tmp_path: Path) -> AgentGRPOConfig:
    config, _ = TrlParser((AgentGRPOConfig, ModelConfig)).parse_args_and_config(
        args=["--config", str(recipe), "--output_dir", str(tmp_path), "--report_to", "none"])
    return config


def test_every_bundled_env_has_one_recipe(tmp_path):
    trained = [canonical_env_id(parse(recipe, tmp_path).envs[0]) for recipe in RECIPES]
    bundled = sorted(import_module(name).SPEC.id for name in BUNDLED_SPECS)
    assert sorted(trained) == bundled and len(set(trained)) == len(trained)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.name)
def test_a_recipe_fits_its_measured_episodes_in_the_tiny_models_context(recipe, tmp_path):
    config = parse(recipe, tmp_path)
    text = recipe.read_text()
    assert f"python -m trainers.grpo --config trainers/configs/{recipe.name}" in text
    prose = " ".join(text.replace("#", " ").split())
    measured = MEASURED.search(prose)
    assert measured, f"{recipe.name}: expected the measured lengths in its comments"
    action, median, longest = (int(group.replace(",", "")) for group in measured.groups())
    assert action <= config.max_tokens_per_turn and median <= config.max_context_tokens
    assert config.max_context_tokens <= TinyModelConfig().max_positions
    # every measured episode fits, or the recipe says which do not and that the context_budget alert counts them
    assert longest <= config.max_context_tokens or "the context_budget alert counts" in prose
    (env_id,) = config.envs
    env = gym.make(env_id, **config.env_kwargs[env_id])  # the env it names is made as the trainer makes it
    try:
        assert config.max_turns <= env.spec.max_episode_steps
    finally:
        env.close()
