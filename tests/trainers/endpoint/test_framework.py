"""An agent framework nobody here wrote, trained through the endpoint: OpenAI's Agents SDK (``openai-agents``).

It is maintained by OpenAI, speaks Chat Completions through ``OpenAIChatCompletionsModel`` with a plain
``base_url``, and builds its own requests (its own tool schemas, its own history serialisation), so it checks that
the endpoint's history matching holds for a client that is not this project's.
"""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    Runner,
    StopAtTools,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

import agentgym_envs  # noqa: F401
from agentgym_envs.actions import answer_action, tool_call_action
from agentgym_envs.runner import EpisodeRequest
from tasks import load_split
from tests.trainers.endpoint.test_endpoint import RecordingGenerator, ScriptedGenerator, generated_spans
from trainers.agent_program import AgentProgramRollout, AgentSession
from trainers.generation import TransformersGenerator
from trainers.rollout import RolloutConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV_ID = "agentrl/Search-v0"
TASK = load_split("Search", "train")[0]
CONFIG = RolloutConfig(max_turns=4, max_tokens_per_turn=16)
set_tracing_disabled(True)  # no traces leave the machine


@function_tool
def search(context: RunContextWrapper[AgentSession], query: str) -> str:
    """Search the articles by keywords."""
    return context.context.call("search", {"query": query})


@function_tool
def answer(context: RunContextWrapper[AgentSession], answer: str) -> str:
    """Give the final answer."""
    return context.context.call("answer", {"answer": answer})


SEARCHER = Agent(name="searcher", tools=[search, answer], tool_use_behavior=StopAtTools(stop_at_tool_names=["answer"]))
"""A Search agent written with the Agents SDK: two function tools reaching the env through the run's context (the
episode's session), stopping at the answer."""


def agents_sdk_program(session: AgentSession) -> None:
    """Run :data:`SEARCHER` on the episode's route."""

    async def run() -> None:
        async with AsyncOpenAI(base_url=session.base_url, api_key=session.api_key, max_retries=0) as client:
            agent = SEARCHER.clone(model=OpenAIChatCompletionsModel(model=session.model, openai_client=client))
            await Runner.run(agent, session.prompt, context=session, max_turns=6)

    asyncio.run(run())  # closes its loop and the client (an unclosed one warns from a finaliser, at any moment)


def test_an_agents_sdk_program_calls_the_envs_tools_and_is_scored_with_its_history_matched(tiny, envs):
    _, tokenizer = tiny
    generator = ScriptedGenerator(tokenizer, [tool_call_action("search", query="birth year"), answer_action("1970")])
    with AgentProgramRollout(generator, tokenizer, envs, agents_sdk_program, CONFIG) as rollout:
        [episode] = rollout.run([EpisodeRequest(ENV_ID, TASK, 0, 0)])
        assert rollout.endpoint.errors == {}
        assert rollout.agent.stats["history_edits"] == 0  # the SDK's second request continued the record

    assert episode.stop_reason == "answered" and episode.success, episode.error
    assert [call["name"] for call in episode.tool_calls] == ["search"]
    assert generated_spans(episode) == generator.ids
    prompt = tokenizer.decode(episode.prompt_ids)
    assert '"name": "search"' in prompt and '"name": "answer"' in prompt  # the SDK's own tool schemas


def test_the_tiny_models_own_turns_through_the_agents_sdk_are_recorded_as_generated(tiny, envs):
    model, tokenizer = tiny
    recorder = RecordingGenerator(TransformersGenerator(model, tokenizer.pad_token_id))
    with AgentProgramRollout(recorder, tokenizer, envs, agents_sdk_program, CONFIG) as rollout:
        episodes = rollout.run([EpisodeRequest(ENV_ID, TASK, 0, seed) for seed in range(4)])
        assert rollout.endpoint.errors == {}

    # the untrained model answers in plain text: the SDK returns it as the final output, unanswered but scored
    assert all(e.stop_reason == "agent_ended" and e.scored for e in episodes)
    assert sorted(tuple(s) for e in episodes for s in generated_spans(e)) == sorted(
        tuple(turn.ids) for turn in recorder.turns)
