"""A local model path that does not exist is an error naming it (the trainers here; evaluation in tests/benchmarks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import is_offline_mode

from trainers.grpo import main as grpo_main
from trainers.model_path import ModelNotFoundError, check_model_path
from trainers.ppo import load_policy

GRPO_RECIPE = Path(__file__).parents[2] / "trainers" / "configs" / "grpo_search_cpu.yaml"


@pytest.mark.parametrize("missing", [
    "./runs/no-such-checkpoint",  # relative, explicit
    "../no-such-checkpoint",  # relative to the parent
    "/nonexistent/checkpoint",  # absolute
    "~/no-such-agentrl-checkpoint",  # home
    "runs/grpo/checkpoint-5",  # two slashes: no hub id has them
    "my checkpoint",  # a space: no hub id has one
])
def test_a_missing_local_path_is_an_error_naming_it(missing):
    with pytest.raises(ModelNotFoundError, match="expected an existing local folder") as raised:
        check_model_path(missing)
    assert repr(missing) in str(raised.value)


def test_offline_a_hub_id_outside_the_cache_is_an_error_naming_it():
    assert is_offline_mode()  # the tests run with HF_HUB_OFFLINE set (tests/conftest.py)
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE is set") as raised:
        check_model_path("agentrl-tests/no-such-model")
    assert "'agentrl-tests/no-such-model'" in str(raised.value)


def test_the_tiny_model_and_existing_folders_pass(tmp_path):
    check_model_path("tiny")
    check_model_path(str(tmp_path))
    check_model_path(f"{tmp_path}/../{tmp_path.name}")


def test_the_trainers_refuse_a_missing_path_before_loading():
    missing = "./runs/no-such-checkpoint"
    with pytest.raises(SystemExit, match=r"error: model: expected an existing local folder, got './runs/no-such"):
        grpo_main(["--config", str(GRPO_RECIPE), "--model_name_or_path", missing])
    with pytest.raises(ModelNotFoundError, match="no-such-checkpoint"):
        load_policy(missing)
