"""The environment's scripted policies: a tools-only oracle."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentgym_envs.actions import answer_action, tool_call_action
from tasks import Task

QUESTION = re.compile(r"What is (?P<expression>[-+*/%() \d]+)\?")


class CalculatorOracle:
    """Reads the expression from the prompt, calls ``calculate`` on it, answers with what the tool said."""

    name = "calculator-oracle"

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Find the question's expression."""
        found = QUESTION.search(prompt)
        self._expression = found["expression"].strip() if found else "0"
        self._asked = False

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """First the tool call, then the answer."""
        if not self._asked:
            self._asked = True
            return tool_call_action("calculate", expression=self._expression)
        return answer_action(observation.strip().splitlines()[-1])
