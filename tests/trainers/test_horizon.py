"""Horizon curriculum: the schedule's text form and lookup, and GRPO and PPO runs whose turn limit grows on schedule."""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401
from tasks import load_split
from tests.trainers.test_grpo import ENV_ID, TASKS, make_config
from trainers.grpo import build_trainer
from trainers.horizon import HorizonSchedule, HorizonStage
from trainers.ppo import PPOTrainer
from trainers.ppo_config import PPOConfig
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize(("text", "stages"), [
    ("5@0,10@20,15@40", ((0, 5), (20, 10), (40, 15))),  # the ScalingInter-RL shape
    (" 3 @ 0 ", ((0, 3),)),  # one stage, spaces tolerated
    ("8@0,4@10", ((0, 8), (10, 4))),  # a shrinking horizon is allowed too
])
def test_a_schedule_parses_into_its_stages(text, stages):
    assert HorizonSchedule.parse(text).stages == tuple(HorizonStage(start, turns) for start, turns in stages)


def test_the_limit_at_a_step_is_that_of_the_last_stage_started():
    schedule = HorizonSchedule.parse("5@0,10@20,15@40")
    assert [schedule.max_turns(step) for step in (0, 1, 19, 20, 39, 40, 10_000)] == [5, 5, 5, 10, 10, 15, 15]
    with pytest.raises(ValueError, match="expected a step >= 0"):
        schedule.max_turns(-1)


@pytest.mark.parametrize(("text", "message"), [
    ("", "is not '<turns>@<step>'"),  # nothing
    ("5", "stage '5' is not"),  # no step
    ("5@0;10@20", "is not '<turns>@<step>'"),  # wrong separator
    ("five@0", "stage 'five@0' is not"),  # not a number
    ("5@-1", "is not '<turns>@<step>'"),  # negative step
    ("5@1,10@20", "expected a first stage at step 0"),  # nothing says the limit before step 1
    ("5@0,10@20,15@20", "expected strictly increasing steps"),
    ("5@0,10@20,15@10", "expected strictly increasing steps"),
    ("0@0", "expected turn limits >= 1"),
])
def test_a_malformed_schedule_says_what_was_expected(text, message):
    with pytest.raises(ValueError, match=message) as raised:
        HorizonSchedule.parse(text)
    assert "<turns>@<step>" in str(raised.value)  # every message shows the expected form


def test_configs_reject_a_malformed_schedule_and_default_to_max_turns(tmp_path):
    with pytest.raises(ValueError, match="horizon schedule"):
        make_config(tmp_path, max_turns_schedule="5@3")
    with pytest.raises(ValueError, match="horizon schedule"):
        PPOConfig(max_turns_schedule="5@0,x@3")
    assert make_config(tmp_path, max_turns=3).max_turns_at(50) == 3
    assert PPOConfig(max_turns=2, max_turns_schedule="1@0,4@5").max_turns_at(5) == 4


def test_grpo_plays_each_step_within_its_scheduled_turn_limit_and_logs_it(tmp_path):
    model, tokenizer = load_or_build_tiny_model()
    config = make_config(tmp_path, max_steps=3, max_turns=4, max_turns_schedule="1@0,2@2")
    trainer = build_trainer(config, model, tokenizer, tasks={ENV_ID: TASKS},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [record["rollout/max_turns"] for record in records] == [1, 1, 2]
    # the untrained model never answers: its episodes play to the limit, so the turns show the limit was applied
    assert [record["episodes/turns_max"] for record in records] == [1, 1, 2]
    assert all(record["episodes/stop/max_turns"] == 1.0 for record in records)
    logged = [entry["rollout/max_turns"] for entry in trainer.state.log_history if "rollout/max_turns" in entry]
    assert logged == [1, 1, 2]  # in TRL's logs (TensorBoard, trackio, ...) too


def test_a_long_horizon_still_stops_at_the_context_budget(tmp_path):
    model, tokenizer = load_or_build_tiny_model()
    config = make_config(tmp_path, max_steps=1, max_turns_schedule="30@0", max_context_tokens=800)  # prompt: ~500
    trainer = build_trainer(config, model, tokenizer, tasks={ENV_ID: TASKS},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    engine = trainer.rollouts._engine(trainer)
    played = []
    run = engine.run
    engine.run = lambda requests, **kwargs: played.extend(run(requests, **kwargs)) or played[-len(requests):]
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    assert played and {episode.stop_reason for episode in played} == {"context"}  # never the 30 turns
    for episode in played:
        last = episode.turns[-1]
        assert 1 <= len(episode.turns) < 30
        # the generated tokens stay within the budget (the template's end-of-turn tokens follow the last turn)
        assert len(episode.prompt_ids) + last.start + last.length <= 800


def test_ppo_plays_each_update_within_its_scheduled_turn_limit_and_reports_it():
    model, tokenizer = load_or_build_tiny_model()
    config = PPOConfig(device="cpu", max_steps=3, tasks_per_step=2, episodes_per_task=1, max_turns=4,
                       max_turns_schedule="1@0,2@2", max_tokens_per_turn=8, num_ppo_epochs=1, minibatch_size=2)
    trainer = PPOTrainer(config, copy.deepcopy(model), tokenizer, tasks=load_split("Search", "train")[:4])
    turns: list[int] = []
    run = trainer.engine.run

    def recording_run(requests, **kwargs):
        episodes = run(requests, **kwargs)
        turns.append(max(len(episode.turns) for episode in episodes))
        return episodes

    trainer.engine.run = recording_run
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert [metrics["rollout/max_turns"] for metrics in history] == [1, 1, 2]
    assert turns == [1, 1, 2]  # the untrained model plays to the limit
