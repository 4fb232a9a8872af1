"""GRPO on two processes through accelerate (TRL's own path), on the CPU with gloo; the multi-node recipe parses.

The two-process test launches ``tests/trainers/distributed_grpo_run.py`` with ``accelerate launch`` on loopback
and reads the JSON record each rank writes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_SCRIPT = Path(__file__).with_name("distributed_grpo_run.py")
MULTINODE = REPO / "trainers" / "configs" / "multinode"
LAUNCH_TIMEOUT_S = 240


def free_loopback_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_two_processes(output_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the script on two CPU processes with ``accelerate launch`` on loopback.

    ``--cpu`` is not used: with more than one process, accelerate's ``--cpu`` launcher starts a single process
    unless it is given an MPI host file; ``--multi_gpu`` picks its torchrun launcher, and the trainer's
    ``use_cpu=True`` keeps both processes on the CPU (accelerate then joins them with gloo).
    """
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_ip", "127.0.0.1", "--main_process_port", str(free_loopback_port()),
               str(RUN_SCRIPT), str(output_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the launcher's own session: it and the two ranks
        stdout, stderr = process.communicate()
        pytest.fail(f"accelerate launch ran past {LAUNCH_TIMEOUT_S} s (a rank hung?)\n--- stderr ---\n{stderr[-8000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 60)
def test_two_processes_play_different_tasks_and_end_with_the_same_synchronised_parameters(tmp_path):
    from trainers.tiny_model import load_or_build_tiny_model

    load_or_build_tiny_model()  # build and save it once here, not in both ranks at the same time
    result = launch_two_processes(tmp_path)
    assert result.returncode == 0, (f"a rank failed (exit {result.returncode})\n--- stderr ---\n"
                                    f"{result.stderr[-8000:]}\n--- stdout ---\n{result.stdout[-2000:]}")
    ranks = [json.loads((tmp_path / f"rank-{index}.json").read_text()) for index in range(2)]

    for index, rank in enumerate(ranks):
        assert (rank["process_index"], rank["num_processes"], rank["backend"]) == (index, 2, "gloo")
        assert rank["model_class"] == "DistributedDataParallel"
        assert rank["steps"] == 2
        assert len(rank["task_ids"]) == 2 * 4  # two steps of two groups of two episodes
        assert rank["task_ids"][::2] == rank["task_ids"][1::2]  # a group's two episodes play one task
    # Each rank draws its tasks from its own generator, seeded with (seed, process index).
    assert ranks[0]["task_ids"] != ranks[1]["task_ids"]

    # Both start from the same weights; training on different episodes, they end with the same, changed, weights:
    # DDP averaged their gradients before every optimiser step.
    assert ranks[0]["params_before"] == ranks[1]["params_before"]
    assert ranks[0]["params_after"] == ranks[1]["params_after"]
    assert ranks[0]["params_after"] != ranks[0]["params_before"]
    assert ranks[0]["changed_parameters"] == ranks[1]["changed_parameters"]
    assert len(ranks[0]["changed_parameters"]) == ranks[0]["parameter_count"]

    # The CPU output-head speed-up (trainers.scoring.label_scores) calls the model's decoder and head directly,
    # around DDP's forward, which is where DDP arms the all-reduce of the gradients that the backward pass
    # produces; so under several processes it steps aside and TRL's own head runs, on every loss of both ranks.
    for rank in ranks:
        assert rank["agent_token_head"] == [False] * rank["steps"]

    # Each process logs the episodes it played, one record per step, in its own file.
    logs = [tmp_path / "trainer" / "rollouts.jsonl", tmp_path / "trainer" / "rollouts.rank1.jsonl"]
    for log in logs:
        assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize(("name", "distributed_type", "zero_stage"),
                         [("accelerate_ddp.yaml", "MULTI_GPU", None), ("accelerate_zero2.yaml", "DEEPSPEED", 2),
                          ("accelerate_zero3.yaml", "DEEPSPEED", 3)])
def test_multinode_accelerate_configs_load_with_accelerates_loader(name, distributed_type, zero_stage):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(MULTINODE / name))  # raises on a key accelerate does not know
    assert config.distributed_type.value == distributed_type
    assert config.num_machines > 1 and config.num_processes % config.num_machines == 0
    assert config.deepspeed_config.get("zero_stage") == zero_stage


def test_multinode_grpo_recipe_parses_with_trls_parser():
    from trl import ModelConfig, TrlParser

    from trainers.grpo import AgentGRPOConfig

    parser = TrlParser((AgentGRPOConfig, ModelConfig))
    # bf16 is refused by transformers on a machine without a GPU; every other field is checked as written
    # (TrlParser raises on a key no dataclass knows).
    config, model_args = parser.parse_args_and_config(
        args=["--config", str(MULTINODE / "grpo_vllm_server_ray.yaml"), "--bf16", "false"])
    assert (config.use_vllm, config.vllm_mode, config.env_workers) == (True, "server", "ray")
    assert model_args.model_name_or_path
    # seed_process refuses a per-process batch that would split a group across processes
    assert config.per_device_train_batch_size % config.num_generations == 0
