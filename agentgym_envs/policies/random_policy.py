"""A random agent: calls random tools with random arguments, then answers with a random word.

It knows the tools' names from the reset ``info["tools"]`` (OpenAI function schemas) and fills string
arguments with words drawn from the prompt and the observations, so its calls are well formed; it does
not read their results.
Its success rate is the floor a learned policy must beat.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from agentgym_envs.policies.base import answer_action, tool_call_action
from tasks import Task

WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


class RandomPolicy:
    """Random tool calls, then a random answer.

    Args:
        seed: Seed of the policy's own generator.
        max_tool_calls: Most tool calls before answering (uniform in 0..max_tool_calls).
    """

    name = "random"

    def __init__(self, seed: int = 0, max_tool_calls: int = 3) -> None:
        self.rng = np.random.default_rng(seed)
        self.max_tool_calls = max_tool_calls
        self._words: list[str] = []
        self._tools: list[Mapping[str, Any]] = []
        self._calls_left = 0

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Draw how many tool calls to make before answering."""
        self._words = WORD.findall(task.prompt) or ["x"]
        self._tools = [tool.get("function", tool) for tool in info.get("tools", [])]
        self._calls_left = int(self.rng.integers(self.max_tool_calls + 1))

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """A random tool call while calls are left, then an answer of one random word seen so far."""
        self._words.extend(WORD.findall(observation)[:200])
        if self._calls_left > 0 and self._tools:
            self._calls_left -= 1
            schema = self._tools[int(self.rng.integers(len(self._tools)))]
            return tool_call_action(schema["name"], **self._arguments(schema))
        self._calls_left = 0
        return answer_action(self._word())

    def _arguments(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        parameters = schema.get("parameters", {})
        arguments: dict[str, Any] = {}
        for name in parameters.get("required", []):
            kind = parameters.get("properties", {}).get(name, {}).get("type", "string")
            arguments[name] = int(self.rng.integers(1, 4)) if kind == "integer" else self._word()
        return arguments

    def _word(self) -> str:
        return self._words[int(self.rng.integers(len(self._words)))]
