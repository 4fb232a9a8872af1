"""Plain records shared by every layer: a task, and the trajectory an agent produced on it.

These live in ``tasks`` (the leftmost layer) so that rewards, environments, relabelers and
trainers can all speak about the same objects without importing each other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.errors import TaskError


@dataclass(frozen=True)
class Task:
    """One thing to do.

    Attributes:
        id: Stable, unique id, e.g. ``"python-math/test/0007"``.
        env: Short name of the environment that runs it, e.g. ``"PythonSandbox"``.
        family: Task family inside the environment, e.g. ``"math"`` or ``"code"``.
        prompt: The text shown to the agent.
        answer: Gold answer(s) for the verifier; never shown to the agent.
        difficulty: Integer difficulty level (1 = easiest).
        metadata: Everything else the verifier or an oracle needs (hidden tests, reference
            solution, supporting documents). Never shown to the agent.
    """

    id: str
    env: str
    family: str
    prompt: str
    answer: Any
    difficulty: int = 1
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable dict (the on-disk form of bundled splits)."""
        return {
            "id": self.id,
            "env": self.env,
            "family": self.family,
            "prompt": self.prompt,
            "answer": self.answer,
            "difficulty": self.difficulty,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """Build a task from :meth:`to_dict` output."""
        return cls(
            id=data["id"],
            env=data["env"],
            family=data["family"],
            prompt=data["prompt"],
            answer=data["answer"],
            difficulty=int(data.get("difficulty", 1)),
            metadata=dict(data.get("metadata", {})),
        )

    def to_json(self) -> str:
        """One JSONL line, keys sorted so that files are byte-stable."""
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)


def read_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """The tasks of a JSONL file with one :meth:`Task.to_json` per line (blank lines skipped).

    For tasks made outside the bundled splits, e.g. by ``python -m tasks.webshop.original``; pass them to an env
    as ``tasks=``.

    Raises:
        TaskError: A line that is not a task, with the file and line number.
    """
    tasks = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                tasks.append(Task.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise TaskError(f"{path}:{number}: expected a task as JSON with keys id, env, family, prompt, "
                                f"answer, got {type(exc).__name__}: {exc}") from exc
    return tasks


@dataclass(frozen=True)
class Document:
    """One article of a retrieval corpus.

    Attributes:
        id: Stable document id, unique within its corpus.
        title: The article's title.
        text: The article's body, without the title.
    """

    id: str
    title: str
    text: str

    def to_dict(self) -> dict[str, str]:
        """The JSONL form: ``{"id", "title", "text"}``."""
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class ToolCall:
    """A tool call the agent made, as parsed from its action.

    Attributes:
        name: Tool name as written by the agent (may be unknown to the env).
        arguments: Parsed JSON arguments.
        known: Whether the environment has a tool of that name.
        ok: Whether the call ran and succeeded (False for invalid arguments, tool errors).
        infra_error: Whether a failure was the infrastructure's fault, not the agent's.
    """

    name: str
    arguments: Mapping[str, Any]
    known: bool = True
    ok: bool = True
    infra_error: bool = False


@dataclass(frozen=True)
class Turn:
    """One agent action and the observation the environment returned for it.

    Attributes:
        action: The raw action text.
        observation: The environment's reply.
        tool_calls: Tool calls parsed from the action, in order.
        format_errors: What was wrong with the action's format; empty when well formed.
        answer: The content of ``<answer>`` if the action gave one.
    """

    action: str
    observation: str
    tool_calls: tuple[ToolCall, ...] = ()
    format_errors: tuple[str, ...] = ()
    answer: str | None = None

    @property
    def well_formed(self) -> bool:
        """True when the action parsed without any format error."""
        return not self.format_errors


@dataclass(frozen=True)
class Trajectory:
    """A whole episode: the task prompt's turns, in order.

    Attributes:
        turns: The turns, in order.
        completion_tokens: Number of tokens the model generated, when a trainer knows it.
    """

    turns: tuple[Turn, ...] = ()
    completion_tokens: int | None = None

    @property
    def final_answer(self) -> str | None:
        """The answer given in the last turn that gave one, or None."""
        for turn in reversed(self.turns):
            if turn.answer is not None:
                return turn.answer
        return None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool call of the episode, in order."""
        return tuple(call for turn in self.turns for call in turn.tool_calls)
