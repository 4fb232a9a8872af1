"""GRPO trains an agent program through the policy endpoint: the plain openai-SDK tool loop, on TRL."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from trl import ModelConfig, TrlParser

import agentgym_envs  # noqa: F401
from tasks import load_split
from trainers.agent_program import WorkerPrograms
from trainers.agents.openai_sdk import tool_loop
from trainers.grpo import AgentGRPOConfig, build_trainer
from trainers.tiny_model import TinyModelConfig, load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:4]
TOOL_LOOP = "trainers.agents.openai_sdk:tool_loop"


def make_config(tmp_path, **overrides) -> AgentGRPOConfig:
    return AgentGRPOConfig(**{
        "output_dir": str(tmp_path), "per_device_train_batch_size": 4, "num_generations": 2, "max_steps": 2,
        "use_cpu": True, "report_to": [], "logging_steps": 1, "save_strategy": "no", "max_turns": 2,
        "max_tokens_per_turn": 8, "learning_rate": 1e-2, "filter_zero_variance_groups": False, "envs": [ENV_ID],
        "disable_tqdm": True, "agent_program": TOOL_LOOP, **overrides})


@pytest.mark.parametrize("agent_workers", [0, 4], ids=["threads", "worker-processes"])
def test_grpo_trains_the_openai_sdk_tool_loop_on_the_tokens_the_endpoint_recorded(tmp_path, agent_workers):
    model, tokenizer = load_or_build_tiny_model()
    trainer = build_trainer(make_config(tmp_path, agent_workers=agent_workers), model, tokenizer, tasks={ENV_ID: TASKS},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    counter = iter(range(1_000_000))
    trainer.rollouts._normalized = lambda episode: float(next(counter) % 2 == 0)  # a stand-in verifier: 1, 0, ...
    before = copy.deepcopy(trainer.model.state_dict())
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()

    changed = [name for name, value in trainer.model.state_dict().items() if not torch.equal(value, before[name])]
    assert len(changed) == len(before)
    assert trainer.rollouts.engine.endpoint.requests >= 8  # every turn went through the endpoint
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert all(record["agent/agent_error"] == 0 and record["agent/history_edits"] == 0 for record in records)
    assert all(record["episodes/gen_tokens_mean"] > 0 for record in records)
    if agent_workers:
        assert trainer.rollouts.engine.agent.program.pids == []  # the workers stopped with the rollouts


def test_the_recipe_trains_the_tool_loop_within_the_tiny_models_context(tmp_path):
    recipe = Path(__file__).resolve().parents[3] / "trainers" / "configs" / "agent_program_search_cpu.yaml"
    config, _ = TrlParser((AgentGRPOConfig, ModelConfig)).parse_args_and_config(
        args=["--config", str(recipe), "--output_dir", str(tmp_path), "--report_to", "none"])
    assert config.agent_program_fn() is tool_loop
    measured = re.search(r"longest action (\d+).*whole episode \d+ / \d+ / (\d+)", " ".join(
        recipe.read_text().replace("#", " ").split()))
    assert int(measured.group(1)) <= config.max_tokens_per_turn
    assert int(measured.group(2)) <= config.max_context_tokens <= TinyModelConfig().max_positions


def test_an_agent_program_that_cannot_be_imported_is_refused_at_start(tmp_path):
    with pytest.raises(ValueError, match=r"expected 'package\.module:function'"):
        make_config(tmp_path, agent_program="tool_loop")
    with pytest.raises(ValueError, match="cannot import it"):
        make_config(tmp_path, agent_program="trainers.agents.openai_sdk:no_such_loop")
    with pytest.raises(ValueError, match="expected one of them, got both"):
        make_config(tmp_path, agent_command="python -m trainers.agent_client " + TOOL_LOOP)
    command = make_config(tmp_path, agent_program=None, agent_command="python -m trainers.agent_client " + TOOL_LOOP)
    assert command.agent_program_fn().argv == ["python", "-m", "trainers.agent_client", TOOL_LOOP]


def test_agent_workers_runs_the_program_in_worker_processes_and_needs_a_program(tmp_path):
    workers = make_config(tmp_path, agent_workers=2).agent_program_fn()
    assert isinstance(workers, WorkerPrograms) and (workers.program, workers.workers) == (TOOL_LOOP, 2)
    with pytest.raises(ValueError, match="agent_workers: expected 0, or >= 1 with agent_program set"):
        make_config(tmp_path, agent_workers=-1)
    with pytest.raises(ValueError, match="agent_workers: expected 0, or >= 1 with agent_program set"):
        make_config(tmp_path, agent_program=None, agent_workers=2)
