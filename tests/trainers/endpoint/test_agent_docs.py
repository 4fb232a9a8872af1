"""docs/agent-programs.md shows the agent that trainers.agents.openai_sdk ships, line for line."""

from __future__ import annotations

import inspect
from pathlib import Path

from trainers.agents import openai_sdk

PAGE = Path(__file__).resolve().parents[3] / "docs" / "agent-programs.md"


def test_the_pages_agent_is_the_shipped_tool_loop():
    page = PAGE.read_text()
    agent = [inspect.getsource(openai_sdk.process_client), inspect.getsource(openai_sdk.tool_loop)]
    assert all(source in page for source in agent)
    assert f"MAX_REQUESTS = {openai_sdk.MAX_REQUESTS}\n" in page
    assert sum(len(source.splitlines()) for source in agent) <= 30  # the 30-line agent the page promises
