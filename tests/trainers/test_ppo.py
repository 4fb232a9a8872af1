"""PPO: turn-level GAE against hand-computed numbers, agent-token-only gradients, tiny training runs, config."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tasks import load_split
from trainers.ppo import VALUE_HEAD_FILE, PPOTrainer, episode_targets, make_engine, turn_gae
from trainers.ppo_config import PPOConfig
from trainers.rollout import Episode, RolloutEngine, TurnRecord, group_requests
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIG_YAML = Path(__file__).parents[2] / "trainers" / "configs" / "ppo_tiny_cpu.yaml"
SMALL = {"device": "cpu", "tasks_per_step": 2, "episodes_per_task": 2, "max_turns": 2, "max_tokens_per_turn": 8,
         "num_ppo_epochs": 1, "minibatch_size": 4}
"""Settings small enough for a CPU test: 4 episodes of at most 2 turns of 8 tokens."""


@pytest.fixture(scope="module")
def tiny():
    """The tiny model and tokenizer (tests train copies of the model)."""
    return load_or_build_tiny_model()


@pytest.fixture(scope="module")
def engine(tiny) -> Iterator[RolloutEngine]:
    """A rollout engine over Search-v0 train envs, generating with the tiny model."""
    model, tokenizer = tiny
    engine = make_engine(PPOConfig(**SMALL), model, tokenizer)
    yield engine
    engine.envs.close()


@pytest.fixture(scope="module")
def episodes(engine: RolloutEngine) -> list[Episode]:
    """Four real Search episodes, with outcome rewards 1, 0, 1, 0 set by hand (the untrained model never answers)."""
    tasks = load_split("Search", "train")[:2]
    rolled = engine.run(group_requests([("agentrl/Search-v0", task) for task in tasks], 2, seed=0))
    for index, episode in enumerate(rolled):
        episode.reward = float(index % 2 == 0)
    return rolled


def make_trainer(tiny, engine: RolloutEngine, **overrides) -> PPOTrainer:
    """A trainer on a fresh copy of the tiny model, with the shared engine (its updates take episodes directly)."""
    model, tokenizer = tiny
    return PPOTrainer(PPOConfig(**(SMALL | overrides)), copy.deepcopy(model), tokenizer, engine=engine, tasks=[])


@pytest.mark.parametrize(("rewards", "values", "gamma", "lam", "advantages", "returns"), [
    # three turns, outcome reward after the last: deltas 0.9*0.2-0.5, 0.9*0.4-0.2, 1-0.4, folded with gamma*lam=0.72
    ([0.0, 0.0, 1.0], [0.5, 0.2, 0.4], 0.9, 0.8, [0.10624, 0.592, 0.6], [0.60624, 0.792, 1.0]),
    # lambda 0 is one-step TD: A_0 = 0.5*0.6 - 0.3, A_1 = 1 - 0.6
    ([0.0, 1.0], [0.3, 0.6], 0.5, 0.0, [0.0, 0.4], [0.3, 1.0]),
    # a reward after every turn (the function is general): A_1 = 0.5 - 0.1, A_0 = 0.2 + 0.9*0.1 - 0.3 + 0.45*0.4
    ([0.2, 0.5], [0.3, 0.1], 0.9, 0.5, [0.17, 0.4], [0.47, 0.5]),
    # one turn: the advantage is the reward less the value
    ([1.0], [0.25], 0.95, 0.95, [0.75], [1.0]),
])
def test_turn_gae_matches_hand_computed_values(rewards, values, gamma, lam, advantages, returns) -> None:
    got_advantages, got_returns = turn_gae(rewards, values, gamma, lam)
    assert got_advantages == pytest.approx(advantages)
    assert got_returns == pytest.approx(returns)


def test_episode_targets_read_each_turns_first_token_value_and_broadcast_to_its_tokens() -> None:
    episode = Episode(env_id="agentrl/Search-v0", task_id="t", group=0, prompt_ids=[1, 2], reward=1.0)
    episode.turns = [TurnRecord(start=0, length=2, action="a", tools=(), after_tool_result=False, ok=True),
                     TurnRecord(start=5, length=3, action="b", tools=(), after_tool_result=True, ok=True)]
    episode.env_mask = [1, 1, 0, 0, 0, 1, 1, 1, 0]
    token_values = torch.tensor([0.5, 9.0, 0.2, 9.0, 9.0])  # turn values 0.5 and 0.2; the 9s must be ignored
    advantages, returns = episode_targets(episode, token_values, gamma=0.9, lam=0.8)
    # A_1 = 1 - 0.2 = 0.8; A_0 = 0.9*0.2 - 0.5 + 0.72*0.8 = 0.256
    assert advantages.tolist() == pytest.approx([0.256, 0.256, 0.8, 0.8, 0.8])
    assert returns.tolist() == pytest.approx([0.756, 0.756, 1.0, 1.0, 1.0])


def test_positions_of_env_mask_zero_tokens_get_exactly_zero_gradient(tiny, engine, episodes) -> None:
    trainer = make_trainer(tiny, engine)
    captured = []

    def keep_hidden_grad(module, inputs, output) -> None:
        if torch.is_grad_enabled():  # the update's training pass, not the no-grad scoring passes
            output.last_hidden_state.retain_grad()
            captured.append(output.last_hidden_state)

    handle = trainer.policy.model.get_decoder().register_forward_hook(keep_hidden_grad)
    head_before = trainer.policy.value_head.weight.detach().clone()
    metrics = trainer.update(episodes)
    handle.remove()

    (hidden,) = captured  # one minibatch of all four episodes, in order
    grad_norm = hidden.grad.norm(dim=-1)
    expected = torch.zeros_like(grad_norm, dtype=torch.bool)  # position t predicts token t+1
    for row, episode in enumerate(episodes):
        for index in (index for index, mask in enumerate(episode.env_mask) if mask):
            expected[row, len(episode.prompt_ids) - 1 + index] = True
    assert expected.sum() > 0 and (~expected).sum() > expected.sum()  # observations outnumber actions here
    assert torch.all(grad_norm[~expected] == 0)  # prompt, template, observation and padding positions
    assert torch.all(grad_norm[expected] > 0)  # every agent position is learned from
    assert all(math.isfinite(value) for value in metrics.values())
    assert metrics["value_loss"] > 0  # rewards 1, 0, 1, 0 against a value head that starts at zero
    assert not torch.equal(trainer.policy.value_head.weight, head_before)


def test_tiny_ppo_run_changes_parameters_and_saves(tiny, tmp_path: Path) -> None:
    model, tokenizer = tiny
    config = PPOConfig(**(SMALL | {"max_steps": 2, "minibatch_size": 2, "output_dir": str(tmp_path)}))
    trainer = PPOTrainer(config, copy.deepcopy(model), tokenizer, tasks=load_split("Search", "train")[:4])
    before = {name: parameter.detach().clone() for name, parameter in trainer.policy.model.named_parameters()}
    seen: list[int] = []
    try:
        history = trainer.train(on_update=lambda step, metrics: seen.append(step))
    finally:
        trainer.close()

    assert seen == [0, 1]
    for metrics in history:
        assert metrics["episodes"] == 4
        assert all(math.isfinite(value) for value in metrics.values()), metrics
        assert metrics["rollout_logprob_gap"] < 1e-3  # the trainer scores the ids exactly as they were sampled
    unchanged = [name for name, parameter in trainer.policy.model.named_parameters()
                 if torch.equal(parameter, before[name])]
    assert not unchanged
    saved = trainer.save()
    assert (saved / "model.safetensors").exists() and (saved / "tokenizer.json").exists()
    head = torch.load(saved / VALUE_HEAD_FILE)
    assert torch.equal(head["weight"], trainer.policy.value_head.weight)


def test_ppo_ewma_update_runs_with_a_proximal_policy_between_start_and_now(tiny, engine, episodes) -> None:
    trainer = make_trainer(tiny, engine, ppo_ewma=True, ewma_decay=0.75, minibatch_size=2)
    start = {name: parameter.detach().clone() for name, parameter in trainer.policy.model.named_parameters()}
    metrics = trainer.update(episodes)  # two minibatches: two optimiser steps

    assert all(math.isfinite(value) for value in metrics.values())
    assert metrics["behaviour_weight_max"] != 1.0  # at the second step the proximal policy is no longer the sampler
    for (name, average), current in zip(trainer.ewma.named_parameters(), trainer.policy.model.parameters(),
                                        strict=True):
        if not torch.equal(current, start[name]):
            assert not torch.equal(average, start[name]) and not torch.equal(average, current), name


def test_ppo_ewma_single_step_average_is_exact(tiny, engine, episodes) -> None:
    trainer = make_trainer(tiny, engine, ppo_ewma=True, ewma_decay=0.75)
    start = {name: parameter.detach().clone() for name, parameter in trainer.policy.model.named_parameters()}
    trainer.update(episodes)  # one minibatch, one epoch: one optimiser step
    for (name, average), current in zip(trainer.ewma.named_parameters(), trainer.policy.model.parameters(),
                                        strict=True):
        torch.testing.assert_close(average, 0.75 * start[name] + 0.25 * current)


def test_the_trainer_draws_its_tasks_from_the_splits_dir_the_envs_load(tiny, engine, tmp_path: Path) -> None:
    from tasks.splits import write_bundle

    mine = load_split("Search", "dev")[:3]
    write_bundle(tmp_path, "Search", {"train": mine})
    model, tokenizer = tiny
    config = PPOConfig(**SMALL, env_kwargs={"splits_dir": str(tmp_path)})
    trainer = PPOTrainer(config, copy.deepcopy(model), tokenizer, engine=engine)
    assert sorted(task.id for task in trainer.tasks) == sorted(task.id for task in mine)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"gamma": 0.0}, "PPOConfig.gamma"),
    ({"lam": 1.5}, "PPOConfig.lam"),
    ({"ewma_decay": 1.0}, "PPOConfig.ewma_decay"),
    ({"minibatch_size": 9, "tasks_per_step": 2, "episodes_per_task": 4}, "PPOConfig.minibatch_size"),
    ({"kl_coef": -0.1}, "PPOConfig.kl_coef"),
    ({"env_kwargs": {"split": "dev"}}, "PPOConfig.env_kwargs"),
    ({"env_kwargs": {"tasks": []}}, "PPOConfig.env_kwargs: expected no 'tasks' key"),
    ({"env_workers": "slurm"}, "PPOConfig.env_workers: expected 'local' or 'ray'"),
    ({"overlap_rollouts": True, "max_staleness": 0}, "PPOConfig.max_staleness"),
])
def test_config_rejects_bad_values_with_a_message_naming_the_field(overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        PPOConfig(**overrides)


def test_yaml_recipe_parses_and_command_line_overrides_it() -> None:
    from trl import TrlParser

    (config,) = TrlParser((PPOConfig,)).parse_args_and_config(
        args=["--config", str(CONFIG_YAML), "--max_steps", "7", "--ppo_ewma", "true"])
    assert config.max_steps == 7 and config.ppo_ewma  # from the command line
    assert config.device == "cpu" and config.gamma == 0.97  # from the YAML recipe
