"""docs/agent-programs.md shows the agent that trainers.agents.openai_sdk ships, line for line."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

from trainers.agents import openai_sdk

PAGE = Path(__file__).resolve().parents[3] / "docs" / "agent-programs.md"


def test_the_pages_agent_is_the_shipped_tool_loop():
    page = PAGE.read_text()
    agent = [inspect.getsource(openai_sdk.process_client), inspect.getsource(openai_sdk.tool_loop)]
    assert all(source in page for source in agent)
    assert f"MAX_REQUESTS = {openai_sdk.MAX_REQUESTS}\n" in page
    assert sum(len(source.splitlines()) for source in agent) <= 30  # the 30-line agent the page promises


def test_episodes_derive_their_client_from_the_processs_one(monkeypatch):
    shared = openai_sdk.process_client()
    made = []
    monkeypatch.setattr(openai_sdk.openai, "OpenAI", lambda *args, **kwargs: made.append(kwargs))
    for episode in ("a", "b"):  # an episode already over: the loop makes its client and returns
        session = SimpleNamespace(base_url=f"http://127.0.0.1:9/episodes/{episode}/v1", api_key=episode, done=True,
                                  prompt="task", model="m", tools=[])
        openai_sdk.tool_loop(session)
    assert made == [] and openai_sdk.process_client() is shared
    derived = shared.with_options(base_url=session.base_url, api_key=session.api_key)
    assert derived._client is shared._client and str(derived.base_url).startswith(session.base_url)
