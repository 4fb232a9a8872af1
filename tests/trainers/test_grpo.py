"""GRPO on TRL with the multi-turn rollout_func: action masking in the real loss, a tiny run, config checks."""

from __future__ import annotations

import copy
import json
import math

import gymnasium as gym
import pytest
import torch

import agentgym_envs  # noqa: F401
from tasks import load_split
from trainers.grpo import SLOT_PREFIX, AgentGRPOConfig, EnvironmentRollouts, build_trainer
from trainers.monitoring import episode_metrics
from trainers.rollout import Episode
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:4]


def make_config(tmp_path, **overrides) -> AgentGRPOConfig:
    settings = {"output_dir": str(tmp_path), "per_device_train_batch_size": 4, "num_generations": 2,
                "max_steps": 2, "use_cpu": True, "report_to": [], "logging_steps": 1, "save_strategy": "no",
                "max_turns": 2, "max_tokens_per_turn": 8, "learning_rate": 1e-2, "filter_zero_variance_groups": False,
                "envs": [ENV_ID], "disable_tqdm": True, **overrides}
    return AgentGRPOConfig(**settings)


def make_trainer(tmp_path, **overrides):
    """A trainer on a fresh tiny model whose episodes get rewards 1, 0, 1, 0, ... (the untrained model never
    answers, so the verifier would give every episode 0 and GRPO no signal: a stand-in for the verifier)."""
    model, tokenizer = load_or_build_tiny_model()
    trainer = build_trainer(make_config(tmp_path, **overrides), model, tokenizer, tasks={ENV_ID: TASKS},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    counter = iter(range(1_000_000))
    trainer.rollouts._normalized = lambda episode: float(next(counter) % 2 == 0)
    return trainer


def loss_mask(inputs) -> torch.Tensor:
    """Per completion token, whether TRL's loss may see it (1) or not (0)."""
    return inputs["completion_mask"] * inputs["tool_mask"]


def predicting_rows(output: torch.Tensor, inputs) -> torch.Tensor:
    """The final hidden states at the positions that predict the completion tokens (one row per token).

    TRL scores completions with transformers' fused LM head (log-probs straight from the final hidden
    states), so the last hidden state at a position is all that position's logits depend on.
    """
    width = inputs["completion_ids"].shape[1]
    return output[:, -width - 1:-1]


def test_env_tokens_get_exactly_zero_gradient_and_their_logits_do_not_change_the_loss(tmp_path):
    trainer = make_trainer(tmp_path)
    final_norm = trainer.model.model.norm
    try:
        rows = [{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)]
        torch.manual_seed(0)
        inputs = trainer._generate_and_score_completions(rows)
        mask = loss_mask(inputs)
        assert (mask == 0).any() and (mask == 1).any()  # observations and actions are both present
        captured = {}

        def keep_hidden(module, args, output):
            output.retain_grad()
            captured["hidden"] = output

        handle = final_norm.register_forward_hook(keep_hidden)
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        handle.remove()
        per_position = predicting_rows(captured["hidden"].grad, inputs).abs().sum(-1)
        assert torch.all(per_position[mask == 0] == 0)  # observation / template tokens: exactly zero gradient
        assert torch.all(per_position[mask == 1] > 0)  # every model token takes part in the loss

        def scramble_env_positions(module, args, output):
            noisy = output.clone()
            rows_ = predicting_rows(noisy, inputs)
            rows_[mask == 0] += 50 * torch.randn_like(rows_[mask == 0])  # a view: writes into noisy
            return noisy

        handle = final_norm.register_forward_hook(scramble_env_positions)
        with torch.no_grad():
            scrambled = trainer.compute_loss(trainer.model, inputs)
        handle.remove()
        assert torch.equal(scrambled.detach(), loss.detach())
    finally:
        trainer.rollouts.close()


@pytest.mark.parametrize("overrides", [
    {},
    # overlap: TRL's importance-sampling correction, with old logprobs (agent tokens only, 0 elsewhere) in the batch
    {"overlap_rollouts": True, "vllm_importance_sampling_mode": "token_truncate"},
])
def test_on_cpu_the_head_runs_on_agent_tokens_only_and_the_loss_and_gradient_match_trls_head(tmp_path, overrides):
    trainer = make_trainer(tmp_path, bf16=False, **overrides)  # float32: the heads differ only by summation order
    try:
        rows = [{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)]
        torch.manual_seed(0)
        inputs = trainer._generate_and_score_completions(rows)
        assert ("old_per_token_logps" in inputs) == bool(overrides)
        if overrides:  # the first batch is on policy: old logprobs are the sampling ones, and 0 off the agent's tokens
            agent = loss_mask(inputs).bool()
            old = inputs["old_per_token_logps"]
            assert torch.allclose(old[agent], inputs["sampling_per_token_logps"][agent], atol=1e-4)
            assert torch.all(old[~agent] == 0)
        head_rows = []
        handle = trainer.model.get_output_embeddings().register_forward_hook(
            lambda module, args, output: head_rows.append(args[0].shape[0]))

        def loss_and_gradient():
            trainer.model.zero_grad()
            loss = trainer.compute_loss(trainer.model, inputs)
            loss.backward()
            return loss.detach(), torch.cat([p.grad.flatten() for p in trainer.model.parameters()])

        agent_loss, agent_gradient = loss_and_gradient()
        agent_head_rows, head_rows[:] = list(head_rows), []
        trainer._scores_agent_tokens_only = lambda model, inputs: False  # TRL's own fused head
        full_loss, full_gradient = loss_and_gradient()
        handle.remove()
        # one row per agent token (the forward pass and its recomputation in the backward pass)
        assert agent_head_rows == [int(loss_mask(inputs).sum())] * 2
        assert torch.allclose(agent_loss, full_loss, atol=1e-6)
        assert torch.allclose(agent_gradient, full_gradient, rtol=1e-4, atol=1e-7)
        assert agent_gradient.abs().sum() > 0
    finally:
        trainer.rollouts.close()


def test_a_tiny_grpo_run_changes_the_parameters_and_logs_the_rollout_metrics(tmp_path):
    trainer = make_trainer(tmp_path, beta=0.04, epsilon_high=0.28)
    before = copy.deepcopy(trainer.model.state_dict())
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    changed = [name for name, value in trainer.model.state_dict().items() if not torch.equal(value, before[name])]
    assert len(changed) == len(before)  # every tensor moved
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"rewards/env_reward/mean", "rewards/outcome/mean", "episodes/turns_mean", "mismatch/ess",
            "groups/zero_variance", "rollout/max_turns"} <= logged
    # the untrained model never answers: every reward term is logged as 0, not None (no episode reported it)
    terms = [entry[f"rewards/{name}/mean"] for entry in trainer.state.log_history
             for name in ("outcome", "f1", "format", "tool_use") if "rewards/outcome/mean" in entry]
    assert len(terms) == 8 and set(terms) == {0.0}
    # no overlap by default: on-policy rollouts, no staleness, and TRL's vLLM-only importance sampling stays off
    assert not {"rollout/staleness", "sampling/importance_sampling_ratio/mean"} & logged
    assert trainer.rollouts.snapshot is None
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all("episodes/gen_tokens_mean" in record for record in records)


def test_zero_variance_groups_are_dropped_from_the_loss(tmp_path):
    trainer = make_trainer(tmp_path, filter_zero_variance_groups=True)
    trainer.rollouts._normalized = lambda episode: 1.0  # every group all-equal
    try:
        rows = [{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)]
        inputs = trainer._generate_and_score_completions(rows)
    finally:
        trainer.rollouts.close()
    assert int(inputs["tool_mask"].sum()) == 0


def test_config_checks_say_how_to_fix(tmp_path):
    with pytest.raises(ValueError, match="env_kwargs: expected keys among envs"):
        make_config(tmp_path, env_kwargs={"agentrl/Other-v0": {}})
    with pytest.raises(ValueError, match=r"env_workers: expected one of \('local', 'ray'\), got 'docker'"):
        make_config(tmp_path, env_workers="docker")
    config = make_config(tmp_path, env_kwargs=json.dumps({ENV_ID: {"families": ["single"]}}))
    assert config.env_kwargs == {ENV_ID: {"families": ["single"]}}
    assert config.rollout_config().max_tokens_per_turn == 8


def test_envs_given_alone_override_a_recipe_written_for_another_env(tmp_path):
    """``--envs data`` with a Search recipe's env_kwargs: the alias becomes the id, Search's kwargs are dropped
    with a warning naming them, and the trained env's own kwargs are kept."""
    with pytest.warns(UserWarning, match=r"env_kwargs: \['agentrl/Search-v0'\] not among envs"):
        config = make_config(tmp_path, envs=["data"], env_kwargs={ENV_ID: {"families": ["single"]}})
    assert config.envs == ["agentrl/DataAnalysis-v0"] and config.env_kwargs == {}
    config = make_config(tmp_path, envs=["search"], env_kwargs={"search": {"families": ["single"]}})
    assert config.envs == [ENV_ID] and config.env_kwargs == {ENV_ID: {"families": ["single"]}}


def test_an_episode_whose_sandbox_failed_at_reset_reaches_trl_masked_out(tmp_path):
    from agentgym_envs.errors import SandboxCrashedError

    class ResetFails(gym.Wrapper):
        def reset(self, **kwargs):
            raise SandboxCrashedError("container is gone")

    model, tokenizer = load_or_build_tiny_model()  # infra_error_stop_share 1.0: the batch is kept, never stopped on
    trainer = build_trainer(make_config(tmp_path, infra_error_stop_share=1.0), model, tokenizer, tasks={ENV_ID: TASKS},
                            env_factory=lambda env_id: ResetFails(gym.make(env_id, split="train")))
    try:
        inputs = trainer._generate_and_score_completions([{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)])
    finally:
        trainer.rollouts.close()
    assert int(inputs["tool_mask"].sum()) == 0  # nothing of a failed episode is learned from


def completion_logps(model, inputs) -> torch.Tensor:
    """Per episode, the summed log-probability of its loss-visible completion tokens under ``model``."""
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    width = inputs["completion_ids"].shape[1]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention).logits[:, -width - 1:-1]
    token_logps = logits.log_softmax(-1).gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)
    return (token_logps * loss_mask(inputs)).sum(-1)


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_a_gradient_step_on_the_loss_favours_the_episodes_with_positive_advantage(tmp_path, loss_type):
    trainer = make_trainer(tmp_path, loss_type=loss_type)
    try:
        rows = [{"prompt": f"{SLOT_PREFIX}{i // 2}"} for i in range(4)]
        torch.manual_seed(0)
        inputs = trainer._generate_and_score_completions(rows)
    finally:
        trainer.rollouts.close()
    advantages = inputs["advantages"]
    best = advantages[0].item()
    assert advantages.tolist() == pytest.approx([best, -best, best, -best])
    assert advantages[0] > 0  # rewards 1, 0 per group: the first episode of each is the better one
    before = completion_logps(trainer.model, inputs)
    trainer.compute_loss(trainer.model, inputs).backward()
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter -= 1e-3 * parameter.grad
    change = completion_logps(trainer.model, inputs) - before
    # first order: sum_i A_i * change_i = lr * |gradient|^2 > 0; a flipped sign or a lost mask makes it fall
    assert float((advantages * change).sum()) > 0
    assert change[advantages > 0].mean() > change[advantages < 0].mean()


def make_trainer_with_rewards(tmp_path, rewards: list[float | None], **overrides):
    """A trainer whose batch of episodes gets ``rewards`` in order; None: an infrastructure fault, which still
    reports reward components (as a crashed env's last step may), so that their blanking is tested too."""
    model, tokenizer = load_or_build_tiny_model()
    trainer = build_trainer(make_config(tmp_path, **overrides), model, tokenizer, tasks={ENV_ID: TASKS},
                            env_factory=lambda env_id: gym.make(env_id, split="train"))
    engine = trainer.rollouts._engine(trainer)
    play = engine.run

    def play_with_rewards(requests, **kwargs):
        episodes = play(requests, **kwargs)
        for episode, reward in zip(episodes, rewards, strict=True):
            episode.infra_error = reward is None
            episode.reward = 0.0 if reward is None else reward
            episode.reward_components = {"outcome": episode.reward, "format": 1.0}
        return episodes

    engine.run = play_with_rewards
    return trainer


STD_1_0_1 = math.sqrt(1 / 3)  # sample std (Bessel, as TRL's nanstd) of the scored rewards 1, 0, 1
EPS = 1e-4  # TRL adds it to the std


@pytest.mark.parametrize(("num_generations", "scale_rewards", "rewards", "expected"), [
    # one group of 4, the fault left out: mean 2/3 and std sqrt(1/3) over [1, 0, 1]
    # (counted as 0 it would give mean 1/2 and +-0.866)
    (4, "group", [1.0, 0.0, None, 1.0],
     [(1 / 3) / (STD_1_0_1 + EPS), (-2 / 3) / (STD_1_0_1 + EPS), 0.0, (1 / 3) / (STD_1_0_1 + EPS)]),
    # no scaling: reward minus the scored members' mean 2/3
    (4, "none", [1.0, 0.0, None, 1.0], [1 / 3, -2 / 3, 0.0, 1 / 3]),
    # two groups of 2 and the std of the batch's scored rewards [1, 0, 1]; group [1, fault]: one scored episode,
    # its own mean, advantage 0; group [0, 1]: mean 1/2
    (2, "batch", [1.0, None, 0.0, 1.0], [0.0, 0.0, -0.5 / (STD_1_0_1 + EPS), 0.5 / (STD_1_0_1 + EPS)]),
])
def test_an_infra_episode_stays_out_of_its_groups_baseline_and_gets_advantage_zero(
        tmp_path, num_generations, scale_rewards, rewards, expected):
    trainer = make_trainer_with_rewards(tmp_path, rewards, num_generations=num_generations,
                                        scale_rewards=scale_rewards)
    try:
        rows = [{"prompt": f"{SLOT_PREFIX}{i // num_generations}"} for i in range(4)]
        torch.manual_seed(0)
        inputs = trainer._generate_and_score_completions(rows)  # TRL's own rewards-to-advantages path
        loss = trainer.compute_loss(trainer.model, inputs)
    finally:
        trainer.rollouts.close()
    assert inputs["advantages"].tolist() == pytest.approx(expected, abs=1e-6)
    faults = [i for i, reward in enumerate(rewards) if reward is None]
    assert int(inputs["tool_mask"][faults].sum()) == 0  # and nothing of it reaches the loss
    assert torch.isfinite(loss)  # no NaN from the unscorable row leaks into the loss


def episodes_with(groups: list[list[float | None]], env_id: str = ENV_ID) -> list[Episode]:
    """Episodes of consecutive groups with these rewards (None: an infrastructure fault, reported as 0.0)."""
    return [Episode(env_id=env_id, task_id=f"task-{group}", group=group, prompt_ids=[1],
                    reward=0.0 if reward is None else reward, infra_error=reward is None)
            for group, rewards in enumerate(groups) for reward in rewards]


def test_the_zero_variance_filter_and_metric_leave_infra_episodes_out(tmp_path):
    groups = [[1.0, 1.0, None, 1.0],  # scored rewards all equal (the fault counted as 0 would look informative)
              [1.0, None, None, None],  # one scored episode: its advantage is 0 anyway
              [1.0, 0.0, None, 1.0],  # signal: only the fault is dropped
              [0.0, 0.0, 0.0, 0.0]]  # plain zero variance
    episodes = episodes_with(groups)
    filtering = EnvironmentRollouts(make_config(tmp_path, filter_zero_variance_groups=True), {ENV_ID: TASKS})
    assert filtering._masked_out(episodes, filtering._env_rewards(episodes)) == {0, 1, 2, 3, 4, 5, 6, 7, 10,
                                                                                 12, 13, 14, 15}
    keeping = EnvironmentRollouts(make_config(tmp_path), {ENV_ID: TASKS})
    assert keeping._masked_out(episodes, keeping._env_rewards(episodes)) == {2, 5, 6, 7, 10}  # the faults only
    assert episode_metrics(episodes)["groups/zero_variance"] == 0.75


def test_per_env_normalisation_divides_a_whole_batch_by_the_statistics_from_before_it(tmp_path):
    other = "agentrl/Other-v0"
    rollouts = EnvironmentRollouts(make_config(tmp_path), {ENV_ID: TASKS, other: TASKS})
    first = episodes_with([[0.0, 2.0]]) + episodes_with([[5.0]], env_id=other)
    assert rollouts._env_rewards(first) == [0.0, 2.0, 5.0]  # no statistics before the first batch: unchanged
    batch = episodes_with([[1.0, 3.0, None]]) + episodes_with([[4.0]], env_id=other)
    rewards = rollouts._env_rewards(batch)
    # ENV_ID's statistics before this batch: 0, 2 (std sqrt(2)), the same for both; other's: one value only
    assert rewards[:2] == pytest.approx([1 / math.sqrt(2), 3 / math.sqrt(2)])
    assert rewards[2:] == [None, 4.0]
    stats = rollouts.reward_stats[ENV_ID]
    # afterwards: 0, 2, 1, 3 (the fault never counts): mean 1.5, std sqrt(5/3)
    assert (stats.count, stats.mean, stats.std) == (4, pytest.approx(1.5), pytest.approx(math.sqrt(5 / 3)))
    assert rollouts._env_rewards(episodes_with([[1.0]])) == pytest.approx([1 / math.sqrt(5 / 3)])


def test_each_process_draws_its_own_tasks_deterministically(tmp_path):
    tasks = {ENV_ID: load_split("Search", "train")}
    prompts = [f"{SLOT_PREFIX}{i // 2}" for i in range(16)]  # 8 groups of 2

    def drawn(process_index: int) -> list[str]:
        rollouts = EnvironmentRollouts(make_config(tmp_path), tasks)
        rollouts.seed_process(process_index, num_processes=2)
        return [request.task.id for request in rollouts._requests(prompts)]

    assert drawn(0) == drawn(0) and drawn(1) == drawn(1)  # deterministic per process
    assert drawn(0) != drawn(1)


def test_several_processes_need_whole_groups_on_each(tmp_path):
    rollouts = EnvironmentRollouts(make_config(tmp_path), {ENV_ID: TASKS})
    rollouts.config.per_device_train_batch_size = 3  # groups of 2 would straddle two processes
    with pytest.raises(ValueError, match="expected a multiple of num_generations"):
        rollouts.seed_process(0, num_processes=2)
    rollouts.seed_process(0, num_processes=1)  # one process holds every group whole
    assert rollouts.rng is not None


@pytest.mark.timeout(300)
def test_env_workers_ray_builds_remote_envs_on_a_local_cluster(tmp_path):
    ray = pytest.importorskip("ray")
    from agentgym_envs.ray_workers import RemoteEnv
    from trainers.grpo import default_env_factory

    config = make_config(tmp_path, env_workers="ray", env_kwargs={ENV_ID: {"split": "train"}})
    try:
        env = default_env_factory(config)(ENV_ID)  # joins (here: starts) a loopback-only cluster first
        try:
            assert isinstance(env, RemoteEnv)
            observation, _ = env.reset(seed=0)
            assert observation and env.actor_id is not None  # played in an actor
        finally:
            env.close()
    finally:
        ray.shutdown()


def test_help_shows_agentrls_options_first_and_trls_on_request(capsys):
    from trainers.grpo import main

    assert main(["--help"]) == 0
    short = capsys.readouterr().out
    assert short.index("agentrl options:") < short.index("--envs") < short.index("common TRL options:")
    assert "--filter_zero_variance_groups" in short and "--no_filter_zero_variance_groups" in short
    assert "--adam_beta1" not in short and "python -m trainers.grpo --help-trl" in short
    assert len(short.splitlines()) < 250
    assert main(["--help-trl"]) == 0
    full = capsys.readouterr().out
    assert "--adam_beta1" in full and "--envs" in full


def test_a_run_shorter_than_logging_steps_logs_its_steps_with_the_generated_lengths(tmp_path):
    """Every group has equal rewards and is dropped from the loss (its env_mask zeroed), and the run's 2 steps
    are fewer than logging_steps: the steps are still logged, with the lengths the model generated, not 0."""
    trainer = make_trainer(tmp_path, logging_steps=10, filter_zero_variance_groups=True)
    trainer.rollouts._normalized = lambda episode: 1.0  # every group all-equal: all dropped from the loss
    try:
        trainer.train()
    finally:
        trainer.rollouts.close()
    (logged,) = [entry for entry in trainer.state.log_history if "completions/mean_length" in entry]
    assert 0 < logged["completions/mean_length"] <= logged["completions/max_length"]
    assert logged["completions/mean_length"] == pytest.approx(logged["episodes/gen_tokens_mean"])
    assert logged["groups/zero_variance"] == 1.0
