"""TRL's environment_factory for any registered id, checked with TRL's own GRPOTrainer and tool-schema code."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.actions import ANSWER_TOOL, tool_call_action
from tasks import load_split
from trainers.tiny_model import load_or_build_tiny_model
from trainers.trl_environment import (
    EPISODE_OVER,
    close_environments,
    environment_factory,
    environment_reward,
    task_dataset,
    tool_calling_tokenizer,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SEARCH = "agentrl/Search-v0"
TASK = load_split("Search", "test")[0]


def test_the_methods_are_the_env_tools_with_their_schemas_and_answer():
    from transformers.utils import get_json_schema

    factory = environment_factory(SEARCH, split="test")
    env = gym.make(SEARCH, split="test")
    _, info = env.reset(seed=0)
    env.close()
    for tool in info["tools"]:
        function = tool["function"]
        schema = get_json_schema(getattr(factory, function["name"]))["function"]
        assert schema["description"] == function["description"]
        assert schema["required"] == function["parameters"]["required"] if "required" in schema else True
        for argument, expected in function["parameters"]["properties"].items():
            assert schema["parameters"]["properties"][argument]["type"] == expected["type"]
            assert schema["parameters"]["properties"][argument]["description"] == expected["description"]
    assert get_json_schema(factory.answer)["function"]["parameters"]["required"] == ["answer"]


def test_tool_calls_step_the_env_and_the_reward_is_the_verifiers():
    factory = environment_factory(SEARCH, split="test")
    tools, env = factory(), gym.make(SEARCH, split="test")
    try:
        prompt = tools.reset(task_id=TASK.id)
        assert prompt == env.reset(options={"task": TASK.id})[0]
        assert tools.search(query=TASK.prompt) == env.step(tool_call_action("search", query=TASK.prompt))[0]
        assert tools.search(query=TASK.prompt, k=None) == env.step(tool_call_action("search", query=TASK.prompt))[0]
        answer = TASK.answer[0]
        tools.answer(answer=answer)
        _, reward, terminated, _, info = env.step(f"<answer>{answer}</answer>")
        assert terminated and tools.finished and tools.reward == reward > 0
        assert tools.reward_components == info["reward_components"]
        assert tools.search(query="more") == EPISODE_OVER
        assert environment_reward([[{"role": "assistant", "content": ""}]], [tools]) == [reward]
    finally:
        env.close()
        factory.close_all()


def test_a_text_answer_is_scored_by_the_reward_function_and_an_unanswered_episode_gets_zero():
    factory = environment_factory(SEARCH, split="test")
    answered, silent = factory(), factory()
    answered.reset(task_id=TASK.id)
    silent.reset(task_id=TASK.id)
    completions = [[{"role": "assistant", "content": f"<answer>{TASK.answer[0]}</answer>"}],
                   [{"role": "assistant", "content": "I do not know."}]]
    rewards = environment_reward(completions, [answered, silent])
    assert rewards[0] > 0 and rewards[1] == 0.0
    factory.close_all()
    assert answered._env is None and silent._env is None


def test_the_tokenizer_renders_plain_turns_as_the_tiny_template_and_parses_env_actions():
    from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

    _, tokenizer = load_or_build_tiny_model()
    copied = tool_calling_tokenizer(tokenizer, list_tools=False)
    assert supports_tool_calling(copied) and is_chat_template_prefix_preserving(copied)
    assert not supports_tool_calling(tokenizer)  # why TRL needs the copy
    messages = [{"role": "user", "content": "How many people live in Maemton?"}]
    prompt = copied.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt == tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    action = '<tool_call>{"name": "search", "arguments": {"query": "Maemton", "k": 1}}</tool_call>'
    prompt_ids = copied.encode(prompt, add_special_tokens=False)
    parsed = parse_response(copied, copied.encode(action, add_special_tokens=False), prefix=prompt_ids)
    assert parsed["tool_calls"] == [{"type": "function",
                                     "function": {"name": "search", "arguments": {"query": "Maemton", "k": 1}}}]
    rendered = copied.apply_chat_template([*messages, {"role": "assistant", "content": "", "tool_calls":
                                                       parsed["tool_calls"]}], tokenize=False)
    assert action in rendered  # the call goes back into the context as the env's own action text


def test_the_tokenizer_lists_the_tools_when_asked():
    _, tokenizer = load_or_build_tiny_model()
    factory = environment_factory(SEARCH, split="test")
    rendered = tool_calling_tokenizer(tokenizer).apply_chat_template(
        [{"role": "user", "content": "?"}], tools=[factory.search, factory.answer], tokenize=False)
    assert '"name": "search"' in rendered and f'"name": "{ANSWER_TOOL}"' in rendered


def tool_calls(environments, **_):
    """Logged only (weight 0): the tool calls each rollout made through the factory's methods."""
    return [float(environment.tool_calls) for environment in environments]


def length_parity(completions, **_):
    """A stand-in with variance (an untrained model never answers, so the verifier alone gives GRPO no signal)."""
    return [float(len(str(messages)) % 2) for messages in completions]


def train_two_steps(model, tokenizer, factory, dataset, output_dir, extra_reward):
    """TRL's GRPOTrainer on ``factory`` for 2 steps, turns ending at the env's stop tags (as the engine's do);
    the verifier's reward, ``extra_reward`` (weight 1) and the tool calls (logged only)."""
    from trl import GRPOConfig, GRPOTrainer

    from trainers.rollout import stop_token_ids

    model.generation_config.eos_token_id = stop_token_ids(tokenizer)
    args = GRPOConfig(output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=2, max_steps=2,
                      max_completion_length=256, max_tool_calling_iterations=2, learning_rate=1e-2,
                      generation_kwargs={"max_new_tokens": 48}, use_cpu=True, bf16=False, report_to=[],
                      save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0, reward_weights=[1.0, 1.0, 0.0])
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    trainer = GRPOTrainer(model=model, processing_class=tool_calling_tokenizer(tokenizer, list_tools=False),
                          args=args, train_dataset=dataset, environment_factory=factory,
                          reward_funcs=[environment_reward, extra_reward, tool_calls],
                          callbacks=[close_environments(factory)])
    trainer.train()
    assert trainer.state.global_step == 2
    logged = [entry for entry in trainer.state.log_history if "rewards/environment_reward/mean" in entry]
    assert len(logged) == 2  # the env's verifier scored every batch
    assert any(not (parameter == before[name]).all() for name, parameter in model.named_parameters())
    assert len(factory.instances) >= 4 and all(instance._env is None for instance in factory.instances)  # closed
    return logged


def test_grpo_trainer_trains_two_steps_on_search_through_the_factory(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from benchmarks.rollout_throughput import Settings, load_warm_model

    # The warm-started tiny model calls tools (built and cached the first time: minutes; shared with the
    # rollout-throughput and GRPO-overlap benchmarks).
    model, tokenizer = load_warm_model(Settings())
    factory = environment_factory(SEARCH, split="test", prompt_style="task")
    logged = train_two_steps(model, tokenizer, factory, task_dataset(SEARCH, count=4, split="test"), tmp_path,
                             length_parity)
    assert sum(entry["rewards/tool_calls/mean"] for entry in logged) > 0  # TRL ran tool calls through the methods


@pytest.mark.bwrap
def test_grpo_trainer_trains_two_steps_on_a_sandboxed_env_through_the_factory(tmp_path, monkeypatch,
                                                                               backend_problems):
    from tests.conftest import require_backend

    require_backend("bwrap", backend_problems)
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    env_id = "agentrl/PythonSandbox-v0"
    model, tokenizer = load_or_build_tiny_model()
    factory = environment_factory(env_id, sandbox="bwrap", split="test")
    train_two_steps(model, tokenizer, factory, task_dataset(env_id, count=2, sandbox="bwrap", split="test"),
                    tmp_path, length_parity)
