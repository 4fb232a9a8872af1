"""A lookup demonstrator for Search-v0: search with the question, answer with what the results show.

It knows the gold answer (it reads ``task.answer`` and the aliases), so it is a demonstrator, not a
tools-only oracle: it searches with the question's own words and answers with the first form of the
gold answer that the returned snippets contain, or with the gold answer when none does (such an
episode is not grounded in what the tools returned; :attr:`grounded` says so, and demonstration
collectors drop it). Its episodes are two turns long: the shortest behaviour a small model can learn
first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentgym_envs.policies.base import answer_action, tool_call_action
from tasks import Task


class SearchLookupPolicy:
    """Search with the question, then answer from the snippets.

    Args:
        k: Results to ask for.
    """

    name = "lookup"

    def __init__(self, k: int = 3) -> None:
        self.k = k
        self._task: Task | None = None
        self._searched = False
        self.grounded = False

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Remember the question and its gold answers."""
        if not task.answer:
            raise ValueError(f"SearchLookupPolicy: expected a task with a gold answer, got {task.id!r} without one")
        self._task, self._searched, self.grounded = task, False, False

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """First a search with the question text, then the answer."""
        assert self._task is not None, "call begin() first"
        if not self._searched:
            self._searched = True
            return tool_call_action("search", query=self._task.prompt, k=self.k)
        forms = [*self._task.answer, *self._task.metadata.get("aliases", ())]
        shown = [form for form in forms if form in observation]
        self.grounded = bool(shown)
        return answer_action(shown[0] if shown else forms[0])
