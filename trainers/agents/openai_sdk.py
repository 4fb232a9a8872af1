"""The plain ``openai``-SDK tool loop: ask the model, run the tools it calls, stop at its answer.

This is the agent of docs/agent-programs.md, line for line; ``--agent_program trainers.agents.openai_sdk:tool_loop``
trains it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import openai

if TYPE_CHECKING:  # a program's process needs no torch and no envs: the session is an AgentSession or its remote twin
    from trainers.agent_program import AgentSession

MAX_REQUESTS = 16
"""Most chat completions per episode (the env's turn limit usually ends it first)."""


@functools.cache
def process_client() -> openai.OpenAI:
    """This process's one client: making one costs 20-40 ms (httpx loads the CA bundle), deriving an episode's from
    it with ``with_options`` a fraction of a millisecond, and the episodes share its connections."""
    return openai.OpenAI(base_url="http://127.0.0.1/v1", api_key="-", max_retries=0)


def tool_loop(session: AgentSession) -> None:
    """Play one episode: the env's tools are offered to the model, each call it makes is run and its result sent
    back, and a reply without tool calls is taken as the final answer."""
    client = process_client().with_options(base_url=session.base_url, api_key=session.api_key)
    messages = [{"role": "user", "content": session.prompt}]
    for _ in range(MAX_REQUESTS):
        if session.done:
            return
        reply = client.chat.completions.create(model=session.model, messages=messages, tools=session.tools)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            session.answer(message.content or "")
            continue
        for call in message.tool_calls:
            result = session.call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def text_loop(session: AgentSession) -> None:
    """Play one episode in agentrl's own protocol over OpenAI's API: no tools offered, the model's text handed to
    the env as its action, each observation sent back as a tool message. Through the endpoint it plays exactly the
    episodes of the in-process rollout engine (the same ids, masks and logprobs)."""
    client = process_client().with_options(base_url=session.base_url, api_key=session.api_key)
    play_text(session, lambda messages: client.chat.completions.create(
        model=session.model, messages=messages).choices[0].message.content)


def play_text(session: AgentSession, complete: Callable[[list[dict]], str]) -> None:
    """:func:`text_loop`'s episode with any client: ``complete`` sends the messages and returns the reply's text."""
    messages = [{"role": "user", "content": session.prompt}]
    for _ in range(MAX_REQUESTS):
        text = complete(messages)
        messages.append({"role": "assistant", "content": text})
        observation = session.step(text)
        if session.done:
            return
        messages.append({"role": "tool", "content": observation})
