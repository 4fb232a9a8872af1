"""Demonstrations of an agent program: the demonstrator answers the program's requests through the endpoint."""

from __future__ import annotations

import gymnasium as gym

import agentgym_envs  # noqa: F401
from agentgym_envs.policies.search_lookup import SearchLookupPolicy
from tasks import load_split
from tests.trainers.endpoint.test_endpoint import generated_spans
from trainers.agent_demonstrations import collect_program_demonstrations
from trainers.agents.openai_sdk import tool_loop
from trainers.chat import ChatTokens
from trainers.rollout import RolloutConfig
from trainers.sft import collect_demonstrations, sft_dataset

ENV_ID = "agentrl/Search-v0"
TASKS = load_split("Search", "train")[:8]
CONFIG = RolloutConfig(max_turns=3, max_tokens_per_turn=96, temperature=0.0)


def test_the_tool_loops_demonstrations_are_the_demonstrators_actions_in_the_programs_conversation(tokenizer):
    env = gym.make(ENV_ID, split="train")
    try:
        through_program = collect_program_demonstrations(tool_loop, env, ENV_ID, SearchLookupPolicy(k=1), TASKS,
                                                         tokenizer, CONFIG, keep=lambda episode: True)
        in_process = collect_demonstrations(env, ENV_ID, SearchLookupPolicy(k=1), TASKS, ChatTokens(tokenizer),
                                            keep=lambda episode: True)
    finally:
        env.close()

    assert len(through_program) == len(TASKS)
    assert [e.reward for e in through_program] == [e.reward for e in in_process]  # the same play, scored alike
    assert any(e.success for e in through_program)
    chat = ChatTokens(tokenizer)
    for program, scripted in zip(through_program, in_process, strict=True):
        assert [t.action for t in program.turns] == [t.action for t in scripted.turns]
        assert generated_spans(program) == [chat.action_ids(turn.action) for turn in program.turns]
        assert '"name": "answer"' in tokenizer.decode(program.prompt_ids)  # the program offered its tools
    rows = sft_dataset(through_program)
    assert [sum(mask) for mask in rows["assistant_masks"]] == [sum(e.env_mask) for e in through_program]
