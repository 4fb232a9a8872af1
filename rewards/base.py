"""The reward contract: a function of (task, trajectory, evidence) and the result it returns.

``evidence`` is what the environment gathered in its sandbox for the verifier (hidden test
results, the purchased item, ...); the agent never touches it. A reward function either returns
a plain float or a :class:`RewardResult` whose ``components`` are logged next to the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rewards.errors import RewardComputationError
from tasks.records import Task, Trajectory


@dataclass(frozen=True)
class RewardResult:
    """A scalar reward and the named parts it was computed from.

    Attributes:
        value: The reward.
        components: Named numbers worth logging (sub-scores, counts); they do not have to sum
            to ``value``.

    Example:
        >>> RewardResult(0.5, {"passed": 1.0, "total": 2.0}).value
        0.5
    """

    value: float
    components: Mapping[str, float] = field(default_factory=dict)


class RewardFn(Protocol):
    """A reward function: ``fn(task, trajectory, evidence) -> RewardResult | float``.

    Reward functions are pure and deterministic (the LLM judge is the one exception that does
    I/O). Parameterized terms are built by small factories (``make_*``) that return one.
    """

    def __call__(
        self, task: Task, trajectory: Trajectory, evidence: Mapping[str, Any], /
    ) -> RewardResult | float:
        """Score ``trajectory`` on ``task`` given the environment's ``evidence``."""
        ...


def required_evidence(evidence: Mapping[str, Any], key: str, expected: type | tuple[type, ...], *, holding: str,
                      form: str) -> Any:
    """``evidence[key]``, checked to be there and of the ``expected`` type.

    Args:
        evidence: What the environment gathered.
        key: The item a reward needs.
        expected: Its type(s).
        holding: What the item holds, for the error (e.g. "the agent's diff").
        form: What it must be, for the error (e.g. "a unified diff (str)").

    Raises:
        RewardComputationError: The item is missing (the error lists the keys there are) or of another type.
    """
    if key not in evidence:
        raise RewardComputationError(f"expected evidence[{key!r}] with {holding}, got keys {sorted(evidence)}")
    value = evidence[key]
    if not isinstance(value, expected):
        raise RewardComputationError(f"expected evidence[{key!r}] to be {form}, got {type(value).__name__}")
    return value
