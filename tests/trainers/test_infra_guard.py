"""Training stops on infrastructure faults: the threshold rules, the first fault's message, GRPO and PPO with a
Docker daemon that does not answer (a real unreachable socket, not a stand-in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.grpo import AgentGRPOConfig
from trainers.infra_guard import InfraErrorGuard, TooManyInfraErrors, first_infra_error, infra_error_message
from trainers.ppo import PPOTrainer
from trainers.ppo_config import PPOConfig
from trainers.rollout import Episode, TurnRecord
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REPO = Path(__file__).parents[2]
UNREACHABLE_DOCKER = "unix:///nonexistent/docker.sock"
"""A Docker daemon address where nothing answers: the Docker SDK fails to connect, as with the daemon down."""
SANDBOXED_ENV = "agentrl/PythonSandbox-v0"


def batch(infra: int, total: int, message: str = "reset failed: no Docker daemon answers") -> list[Episode]:
    """``total`` episodes of which the first ``infra`` were ended by an infrastructure fault at reset."""
    return [Episode(env_id=SANDBOXED_ENV, task_id=f"t{i}", group=i, infra_error=i < infra,
                    stop_reason="infra_error" if i < infra else "answered", error=message if i < infra else "")
            for i in range(total)]


@pytest.mark.parametrize(("steps", "stop_share", "window", "stops_at"), [
    ([(4, 4)], 0.5, 3, 0),  # a whole step of faults stops at once, before the window is full
    ([(0, 4), (3, 4), (4, 4)], 0.5, 3, 2),  # the all-fault step stops, whatever came before
    ([(3, 4), (3, 4), (3, 4)], 0.5, 3, 2),  # 75% over a full window of 3 steps > 50%
    ([(3, 4), (3, 4)], 0.5, 3, None),  # 75%, but the window is not full yet
    ([(2, 4), (2, 4), (2, 4)], 0.5, 3, None),  # exactly half is not more than half
    ([(1, 4), (1, 4), (5, 8), (3, 4)], 0.5, 3, 3),  # the window slides: steps 0-2 hold 7 of 16, steps 1-3 9 of 16
    ([(3, 4), (0, 4), (0, 4), (0, 4)], 0.5, 3, None),  # an early bad step leaves the window again
    ([(1, 4)], 0.2, 1, 0),  # window 1: 25% > 20%
    ([(4, 4), (4, 4)], 1.0, 3, None),  # share 1.0 never stops, not even for a whole step of faults
    ([(0, 0), (0, 4)], 0.5, 1, None),  # an empty batch is no fault
])
def test_the_guard_stops_when_a_step_or_the_window_is_mostly_infrastructure_faults(steps, stop_share, window,
                                                                                   stops_at):
    guard = InfraErrorGuard(stop_share=stop_share, window=window)
    stopped = None
    for step, (infra, total) in enumerate(steps):
        try:
            guard.observe(batch(infra, total), step=step)
        except TooManyInfraErrors:
            stopped = step
            break
    assert stopped == stops_at


def test_the_error_names_the_first_fault_and_what_to_do():
    guard = InfraErrorGuard()
    guard.observe(batch(1, 4, message="first: the daemon is gone"), step=0)
    guard.observe(batch(3, 4, message="second"), step=1)
    with pytest.raises(TooManyInfraErrors) as raised:
        guard.observe(batch(3, 4, message="third"), step=2)
    message = str(raised.value)
    assert "7 of the 12 episodes of steps 0-2" in message and "first fault: first: the daemon is gone" in message
    assert "python -m agentgym_envs.sandbox doctor" in message and "raise infra_error_stop_share" in message


def test_a_run_stopped_by_crashing_agent_programs_says_to_fix_the_program_not_the_infrastructure():
    crashed = [Episode(env_id=SANDBOXED_ENV, task_id=f"t{i}", group=i, infra_error=True, stop_reason="agent_error",
                       error="the agent program raised:\nKeyError: 'choices'") for i in range(4)]
    with pytest.raises(TooManyInfraErrors) as raised:
        InfraErrorGuard().observe(crashed, step=0)
    message = str(raised.value)
    assert "KeyError: 'choices'" in message and "fix the program" in message and "doctor" not in message


def test_the_fault_message_comes_from_the_reset_error_or_the_infra_turns_observation():
    reset = Episode(env_id=SANDBOXED_ENV, task_id="t", group=0, infra_error=True, error="reset failed: no daemon")
    assert infra_error_message(reset) == "reset failed: no daemon"
    stepped = Episode(env_id=SANDBOXED_ENV, task_id="t", group=0, infra_error=True)
    stepped.turns = [TurnRecord(action="a", observation="[python result (ok)]\n4"),
                     TurnRecord(action="b", infra_error=True, observation="[python result (error)]\nInfrastructure "
                                "error while running python (not your fault): container vanished\nmore")]
    assert infra_error_message(stepped) == ("Infrastructure error while running python (not your fault): "
                                            "container vanished")
    assert first_infra_error([*batch(0, 2), stepped, reset]) == infra_error_message(stepped)
    assert first_infra_error(batch(0, 3)) == ""


def test_configs_check_the_infra_settings(tmp_path):
    with pytest.raises(ValueError, match=r"infra_error_stop_share: expected 0 <= share <= 1"):
        AgentGRPOConfig(output_dir=str(tmp_path), max_steps=1, use_cpu=True, report_to=[], infra_error_stop_share=2.0)
    with pytest.raises(ValueError, match="infra_error_window: expected >= 1"):
        PPOConfig(infra_error_window=0)


def test_grpo_with_the_docker_daemon_down_exits_non_zero_naming_it_and_saves_no_model(tmp_path):
    output = tmp_path / "run"
    env_kwargs = f'{{"{SANDBOXED_ENV}": {{"sandbox": "docker"}}}}'
    command = [sys.executable, "-m", "trainers.grpo", "--config", "trainers/configs/grpo_search_cpu.yaml",
               "--envs", SANDBOXED_ENV, "--env_kwargs", env_kwargs, "--max_steps", "5",
               "--per_device_train_batch_size", "4", "--num_generations", "2", "--max_tokens_per_turn", "8",
               "--output_dir", str(output), "--report_to", "none", "--disable_tqdm", "true"]
    environment = {**os.environ, "DOCKER_HOST": UNREACHABLE_DOCKER, "HF_HUB_OFFLINE": "1",
                   "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "training stopped: every episode of step 0" in done.stderr
    assert "no Docker daemon answers" in done.stderr  # the fault's own message
    assert "python -m agentgym_envs.sandbox doctor" in done.stderr
    assert "rollout alert (infra_errors)" in done.stderr  # the monitor said so first
    assert not (output / "model.safetensors").exists()
    effective = json.loads((output / "effective_config.json").read_text())  # written when the run started
    assert effective["config"]["envs"] == [SANDBOXED_ENV] and effective["command"][-1] == "true"


def test_ppo_with_the_docker_daemon_down_stops_at_the_first_update(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    config = PPOConfig(env_id=SANDBOXED_ENV, env_kwargs={"sandbox": "docker"}, device="cpu", max_steps=3,
                       tasks_per_step=2, episodes_per_task=1, max_turns=1, max_tokens_per_turn=8, minibatch_size=2)
    trainer = PPOTrainer(config, *load_or_build_tiny_model())
    try:
        with pytest.raises(TooManyInfraErrors, match=r"(?s)every episode of step 0 .*no Docker daemon answers"):
            trainer.train()
    finally:
        trainer.close()


def test_demonstrations_with_the_docker_daemon_down_stop_within_the_first_episodes_naming_it(monkeypatch):
    import gymnasium as gym

    import agentgym_envs  # noqa: F401
    from agentgym_envs.policies.python_oracle import PythonOraclePolicy
    from tasks import load_split
    from trainers.chat import ChatTokens
    from trainers.sft import INFRA_JUDGED_AFTER, collect_demonstrations

    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    tasks = load_split("PythonSandbox", "dev")[:40]
    env = gym.make(SANDBOXED_ENV, tasks=tasks, sandbox="docker")
    _, tokenizer = load_or_build_tiny_model()
    try:
        with pytest.raises(TooManyInfraErrors) as failure:
            collect_demonstrations(env, SANDBOXED_ENV, PythonOraclePolicy(), tasks, ChatTokens(tokenizer))
    finally:
        env.close()
    message = str(failure.value)
    assert f"{INFRA_JUDGED_AFTER} of the first {INFRA_JUDGED_AFTER} episodes (of 40)" in message  # stopped early
    assert "no Docker daemon answers" in message and "sandbox doctor" in message


@pytest.mark.parametrize(("faults", "played", "total", "stops"), [
    (8, 8, 40, True),    # every one of the first eight
    (5, 8, 40, True),    # most of them
    (4, 8, 40, False),   # half: enough left to learn from
    (7, 7, 40, False),   # not judged before the eighth episode
    (3, 3, 3, True),     # a list shorter than eight is judged at its end
    (6, 10, 10, True),   # faults early, then episodes that played: still most of them
])
def test_demonstrations_stop_once_most_episodes_so_far_were_infrastructure_faults(faults, played, total, stops):
    from trainers.sft import stop_if_mostly_infra

    faulted = [Episode(env_id=SANDBOXED_ENV, task_id=f"t{index}", group=0, infra_error=True,
                       error="reset failed: no Docker daemon answers") for index in range(faults)]
    if not stops:
        stop_if_mostly_infra(SANDBOXED_ENV, faulted, played, total)
        return
    with pytest.raises(TooManyInfraErrors, match=f"{faults} of the first {played} episodes \\(of {total}\\)"):
        stop_if_mostly_infra(SANDBOXED_ENV, faulted, played, total)
