"""The environment: arithmetic questions answered with a ``calculate`` tool, scored by exact match."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Unpack

from agentgym_envs import TextEnv, Tool, ToolResult
from agentgym_envs.core import TextEnvOptions
from rewards import CompositeReward, RewardFn, Term, exact_match_reward, format_reward
from tasks import Task

OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod}
"""The operators ``calculate`` evaluates (integers only)."""
CALCULATE_SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}},
                    "required": ["expression"], "additionalProperties": False}


def evaluate(expression: str) -> int:
    """The value of an integer expression of ``+ - * // %`` and parentheses.

    Raises:
        ValueError: Anything else (names, calls, floats, a division by zero), saying what was expected.
    """
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            try:
                return OPERATORS[type(node.op)](value(node.left), value(node.right))
            except ZeroDivisionError as error:
                raise ValueError("division by zero") from error
        raise ValueError(f"expected integers, + - * // % and parentheses, got {ast.unparse(node)!r}")

    try:
        return value(ast.parse(expression, mode="eval").body)
    except SyntaxError as error:
        raise ValueError(f"expected an arithmetic expression, got {expression!r}") from error


class CalculatorEnv(TextEnv):
    """Answer an arithmetic question; the ``calculate`` tool evaluates an integer expression."""

    env_name: ClassVar[str] = "Calculator"
    task_families: ClassVar[tuple[str, ...]] = ("arithmetic",)
    required_tools: ClassVar[Mapping[str, tuple[str, ...]]] = {"arithmetic": ("calculate",)}

    def __init__(self, **options: Unpack[TextEnvOptions]) -> None:
        super().__init__(**options)
        self._tools = (Tool("calculate", "Evaluate an integer expression (+ - * // % and parentheses).",
                            CALCULATE_SCHEMA, self._calculate),)

    @property
    def tools(self) -> Sequence[Tool]:
        """``calculate``."""
        return self._tools

    def default_reward(self, family: str) -> RewardFn:
        """Exact match of the answer; format logged at weight 0."""
        return CompositeReward([Term("outcome", exact_match_reward), Term("format", format_reward, weight=0.0)])

    def _begin_episode(self, task: Task) -> None:
        """Nothing to prepare: the tool keeps no state."""

    def _calculate(self, expression: str) -> ToolResult:
        try:
            return ToolResult(str(evaluate(expression)))
        except ValueError as error:
            return ToolResult(f"error: {error}", ok=False)
