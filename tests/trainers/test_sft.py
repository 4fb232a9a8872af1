"""SFT warm-start: demonstrations encoded as the engine would record them, loss on agent tokens only."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from trl import SFTConfig, TrlParser

import agentgym_envs  # noqa: F401
from agentgym_envs.policies.search_lookup import SearchLookupPolicy
from tasks import load_split
from trainers.chat import ChatTokens
from trainers.sft import AgentSFTTrainer, WarmStartConfig, collect_demonstrations, sft_dataset, train_sft
from trainers.tiny_model import load_or_build_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIGS = Path(__file__).parents[2] / "trainers" / "configs"
TASKS = [task for task in load_split("Search", "train") if task.family == "single"][:12]


@pytest.fixture(scope="module")
def demonstrations():
    _, tokenizer = load_or_build_tiny_model()
    env = gym.make("agentrl/Search-v0", tasks=TASKS, prompt_style="task")
    policy = SearchLookupPolicy(k=1)
    try:
        episodes = collect_demonstrations(env, "agentrl/Search-v0", policy, TASKS, ChatTokens(tokenizer),
                                          keep=lambda result: result.reward >= 1.0 and policy.grounded)
    finally:
        env.close()
    return tokenizer, episodes


def test_only_the_actions_are_marked_as_agent_tokens(demonstrations):
    tokenizer, episodes = demonstrations
    assert episodes  # the lookup demonstrator solves most single-hop questions
    for episode in episodes:
        learned = [token for token, mask in zip(episode.completion_ids, episode.env_mask, strict=True) if mask]
        actions = [token for turn in episode.turns
                   for token in episode.completion_ids[turn.start:turn.start + turn.length]]
        assert learned == actions
        text = tokenizer.decode(learned)
        assert text.startswith("<tool_call>") and text.endswith("</answer>")
        assert "[search result" not in text  # the observation is context, never a target


def test_sft_dataset_masks_the_prompt_and_observations(demonstrations):
    _, episodes = demonstrations
    rows = sft_dataset(episodes)
    for row, episode in zip(rows, episodes, strict=True):
        assert row["input_ids"] == episode.prompt_ids + episode.completion_ids
        assert sum(row["assistant_masks"]) == sum(episode.env_mask)
        assert row["assistant_masks"][:len(episode.prompt_ids)] == [0] * len(episode.prompt_ids)


def test_sft_lowers_the_loss_on_the_actions_and_changes_the_model(demonstrations, tmp_path):
    tokenizer, episodes = demonstrations
    model, _ = load_or_build_tiny_model()
    before = copy.deepcopy(model.state_dict())
    args = SFTConfig(output_dir=str(tmp_path), max_steps=12, per_device_train_batch_size=4, learning_rate=3e-3,
                     logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, max_length=1024,
                     disable_tqdm=True)
    output = train_sft(model, tokenizer, episodes, args)
    assert output.training_loss > 0
    assert any(not torch.equal(value, before[name]) for name, value in model.state_dict().items())
    with pytest.raises(ValueError, match="max_length"):
        train_sft(model, tokenizer, episodes, SFTConfig(output_dir=str(tmp_path), max_length=8, use_cpu=True,
                                                        report_to=[]))


def test_on_cpu_the_head_runs_on_the_learned_tokens_only_and_loss_gradient_and_metrics_match_trls(
        demonstrations, tmp_path):
    tokenizer, episodes = demonstrations
    model, _ = load_or_build_tiny_model()
    args = SFTConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, report_to=[], use_cpu=True,
                     max_length=1024, bf16=False)  # float32: the two heads may differ only by summation order
    trainer = AgentSFTTrainer(model=model, args=args, train_dataset=sft_dataset(episodes), processing_class=tokenizer)
    inputs = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    model.train()
    head_rows = []
    handle = model.get_output_embeddings().register_forward_hook(
        lambda module, args, output: head_rows.append(args[0].shape[0]))

    def loss_gradient_and_metrics():
        model.zero_grad()
        loss = trainer.compute_loss(model, dict(inputs))
        loss.backward()
        metrics = {name: trainer._metrics["train"][name][-1] for name in ("entropy", "mean_token_accuracy")}
        return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()]), metrics

    ours = loss_gradient_and_metrics()
    our_head_rows, head_rows[:] = list(head_rows), []
    trainer._scores_labels_only = lambda inputs, return_outputs: False  # TRL's own fused head
    trls = loss_gradient_and_metrics()
    handle.remove()
    learned = int((inputs["labels"][:, 1:] != -100).sum())
    assert 0 < learned < inputs["labels"][:, 1:].numel() // 2  # most positions are context
    assert our_head_rows == [learned] * 2  # the forward pass and its recomputation in the backward pass
    assert torch.allclose(ours[0], trls[0], atol=1e-6)
    assert torch.allclose(ours[1], trls[1], rtol=1e-4, atol=1e-7)
    assert ours[2] == pytest.approx(trls[2], abs=1e-5)


def test_the_bundled_recipes_parse():
    warm, args = TrlParser((WarmStartConfig, SFTConfig)).parse_args_and_config(
        args=["--config", str(CONFIGS / "sft_tiny_cpu.yaml"), "--max_steps", "3"])
    assert warm.demonstrator == "lookup" and warm.env_kwargs["prompt_style"] == "task" and args.max_steps == 3
    with pytest.raises(ValueError, match=r"expected a policy of agentrl/Search-v0.s spec among \[.oracle., .random., "
                                         r".lookup.\]"):
        WarmStartConfig(demonstrator="teacher")
