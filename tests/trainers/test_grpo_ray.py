"""GRPO steps with the envs in Ray actors on a local cluster (loopback only): the episodes run in the actors,
and an actor killed mid-episode is an infrastructure fault that training survives and that is replaced."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agentgym_envs.ray_workers import RemoteEnv, connect_ray
from tasks import load_split
from tests.agentgym_envs.test_ray_workers import kill
from trainers.grpo import AgentGRPOConfig, build_trainer
from trainers.tiny_model import load_or_build_tiny_model

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.timeout(300)]

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:4]


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    """A local cluster for the module, shut down at its end."""
    connect_ray(num_cpus=2)
    yield
    ray.shutdown()


class FirstStepKills(RemoteEnv):
    """A remote Search env; the first step any of them takes kills its own actor first (a real ``ray.kill``).

    Every env made is kept on the class, and each env keeps the (actor id, actor pid) of each episode it played.
    """

    armed: ClassVar[bool] = True
    made: ClassVar[list[FirstStepKills]] = []
    killed: ClassVar[list[str]] = []

    def __init__(self, env_id: str) -> None:
        super().__init__(env_id, {"split": "train"})
        self.history: list[tuple[str, int]] = []
        FirstStepKills.made.append(self)

    def reset(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(**kwargs)
        self.history.append((self.actor_id, ray.get(self.actor.pid.remote())))
        return observation, info

    def step(self, action: str):
        if FirstStepKills.armed:
            FirstStepKills.armed = False
            FirstStepKills.killed.append(kill(self))
        return super().step(action)


def test_grpo_trains_on_envs_in_ray_actors_and_survives_a_killed_actor(tmp_path) -> None:
    config = AgentGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, max_steps=2,
                             use_cpu=True, report_to=[], logging_steps=1, save_strategy="no", max_turns=2,
                             max_tokens_per_turn=8, learning_rate=1e-2, filter_zero_variance_groups=False,
                             envs=[ENV_ID], disable_tqdm=True)
    model, tokenizer = load_or_build_tiny_model()
    trainer = build_trainer(config, model, tokenizer, tasks={ENV_ID: TASKS}, env_factory=FirstStepKills)
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()

    assert trainer.state.global_step == 2
    episodes = [played for env in FirstStepKills.made for played in env.history]
    assert len(episodes) == 8 and os.getpid() not in {pid for _, pid in episodes}  # all ran in actor processes
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [record["episodes/infra_error"] for record in records] == [0.25, 0.0]  # 1 of 4 episodes, then none
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"rewards/env_reward/mean", "episodes/infra_error"} <= logged

    [killed] = FirstStepKills.killed
    [victim] = [env for env in FirstStepKills.made if env.history and env.history[0][0] == killed]
    assert len(victim.history) == 2 and victim.history[1][0] != killed  # its step-2 episode ran on a fresh actor
