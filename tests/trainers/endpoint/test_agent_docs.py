"""docs/agent-programs.md shows the agent that trainers.agents.openai_sdk ships, line for line."""

from __future__ import annotations

import inspect
from pathlib import Path

from trainers.agents import openai_sdk

PAGE = Path(__file__).resolve().parents[3] / "docs" / "agent-programs.md"


def test_the_pages_agent_is_the_shipped_tool_loop():
    page = PAGE.read_text()
    assert inspect.getsource(openai_sdk.tool_loop) in page
    assert f"MAX_REQUESTS = {openai_sdk.MAX_REQUESTS}\n" in page
    assert len(inspect.getsource(openai_sdk.tool_loop).splitlines()) <= 30  # the 30-line agent the page promises
