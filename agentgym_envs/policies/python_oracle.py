"""An oracle for PythonSandbox-v0 that replays each task's reference solution through the tool.

Math: run the reference program with the ``python`` tool and answer with the last line it printed.
Code: answer with the reference solution's source. It reads ``task.metadata`` (it is a reference
oracle, not a tools-only one): a source of demonstrations and a load generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentgym_envs.policies.base import answer_action, tool_call_action
from tasks import Task


class PythonOraclePolicy:
    """Solves PythonSandbox tasks from their reference solutions."""

    name = "oracle"

    def __init__(self) -> None:
        self._task: Task | None = None
        self._ran = False

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Remember the task; the first action runs its reference solution."""
        if "reference_solution" not in task.metadata:
            raise ValueError(f"PythonOraclePolicy: expected a task with metadata['reference_solution'], "
                             f"got task {task.id!r} without one")
        self._task, self._ran = task, False

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """Run the reference solution, then answer from its output (math) or with its source (code)."""
        assert self._task is not None, "call begin() first"
        source = self._task.metadata["reference_solution"]
        if not self._ran:
            self._ran = True
            return tool_call_action("python", code=source)
        if self._task.family == "math":
            lines = observation.strip().splitlines()
            return answer_action(lines[-1].strip() if lines else "")
        return answer_action(f"```python\n{source}```")
