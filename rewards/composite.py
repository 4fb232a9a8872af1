"""Weighted sums of reward terms, with per-term caps and every component logged.

Outcome verifiers carry the weight; shaping terms (format, tool use, length) get a much
smaller weight and a cap, so that no amount of shaping can outscore a correct answer. A term
with weight 0 is computed and logged but contributes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from types import MappingProxyType
from typing import Any

from rewards.base import RewardFn, RewardResult
from rewards.errors import RewardComputationError, RewardConfigError
from tasks.errors import InfrastructureError
from tasks.records import Task, Trajectory


@dataclass(frozen=True)
class Term:
    """One named, weighted and optionally capped reward function.

    Attributes:
        name: Component name in logs; non-empty, without ``/`` (used for nested components).
        fn: The reward function.
        weight: Multiplier of the clipped value in the sum; 0 means "logged only".
        cap: ``(low, high)`` bounds applied to the raw value before weighting, or None.

    Raises:
        RewardConfigError: On an empty name, a non-finite weight or a cap with low > high.
    """

    name: str
    fn: RewardFn
    weight: float = 1.0
    cap: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not isinstance(self.weight, Real) or not math.isfinite(self.weight):
            raise RewardConfigError(f"expected a finite weight for term {self.name!r}, got {self.weight!r}")
        if self.cap is not None:
            _check_cap(self.name, self.cap)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise RewardConfigError(f"expected a non-empty term name, got {name!r}")
    if "/" in name:
        raise RewardConfigError(f"expected a term name without '/', got {name!r}")


def _check_cap(name: str, cap: tuple[float, float]) -> None:
    if len(cap) != 2:
        raise RewardConfigError(f"expected cap=(low, high) for term {name!r}, got {cap!r}")
    low, high = cap
    if not low <= high:  # also rejects NaN bounds
        raise RewardConfigError(f"expected cap low <= high for term {name!r}, got {cap!r}")


class CompositeReward:
    """A weighted sum of capped reward terms.

    ``value = sum(term.weight * clip(raw_value, term.cap))``; ``components[name]`` is the clipped
    raw value of each term (weight-0 terms included), and the components of a term that returned
    a :class:`RewardResult` appear as ``"name/sub"``.

    Args:
        terms: The terms; names must be unique and at least one weight must be non-zero.

    Raises:
        RewardConfigError: On no terms, duplicate names or all weights zero.

    Example:
        >>> from rewards import exact_match_reward, format_reward
        >>> reward = CompositeReward([
        ...     Term("correct", exact_match_reward, weight=1.0),
        ...     Term("format", format_reward, weight=0.1, cap=(0.0, 1.0)),
        ... ])
        >>> dict(reward.weights)
        {'correct': 1.0, 'format': 0.1}
    """

    def __init__(self, terms: Sequence[Term]) -> None:
        self._terms = tuple(terms)
        _check_terms(self._terms)

    @property
    def terms(self) -> tuple[Term, ...]:
        """The terms, in order."""
        return self._terms

    @property
    def weights(self) -> Mapping[str, float]:
        """Term name to weight, read-only."""
        return MappingProxyType({term.name: float(term.weight) for term in self._terms})

    def __call__(self, task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
        """Score a trajectory with every term.

        Raises:
            InfrastructureError: Unchanged, when a term raises one (a judge service that does not
                answer): the environment ends the episode as an infrastructure episode.
            RewardComputationError: When a term raises anything else or returns a value that is not
                a finite number; the message names the term.
        """
        total = 0.0
        components: dict[str, float] = {}
        for term in self._terms:
            result = _evaluate(term, task, trajectory, evidence)
            clipped = _clip(result.value, term.cap)
            components[term.name] = clipped
            components.update({f"{term.name}/{key}": value for key, value in result.components.items()})
            total += term.weight * clipped
        return RewardResult(value=total, components=components)

    def __repr__(self) -> str:
        parts = ", ".join(f"{term.name}={term.weight:g}" for term in self._terms)
        return f"CompositeReward({parts})"


def _check_terms(terms: tuple[Term, ...]) -> None:
    if not terms:
        raise RewardConfigError("expected at least one Term, got none")
    if not all(isinstance(term, Term) for term in terms):
        kinds = sorted({type(term).__name__ for term in terms if not isinstance(term, Term)})
        raise RewardConfigError(f"expected Term instances, got {', '.join(kinds)}")
    names = [term.name for term in terms]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise RewardConfigError(f"expected unique term names, got duplicates {duplicates}")
    if all(term.weight == 0 for term in terms):
        raise RewardConfigError(f"expected at least one non-zero weight, got all zero for {names}")


def _evaluate(term: Term, task: Task, trajectory: Trajectory, evidence: Mapping[str, Any]) -> RewardResult:
    try:
        raw = term.fn(task, trajectory, evidence)
    except InfrastructureError:
        raise  # not the agent's doing and not a bug in the term: the env makes it an infra episode
    except Exception as exc:  # re-raised with the term's name: a failing term is never a silent 0
        raise RewardComputationError(f"reward term {term.name!r} raised {type(exc).__name__}: {exc}") from exc
    result = raw if isinstance(raw, RewardResult) else RewardResult(value=raw)
    return RewardResult(value=_finite(term.name, result.value), components=_numbers(term.name, result))


def _finite(name: str, value: object) -> float:
    if isinstance(value, Real) and math.isfinite(value):
        return float(value)
    raise RewardComputationError(f"expected reward term {name!r} to return a finite number, got {value!r}")


def _numbers(name: str, result: RewardResult) -> dict[str, float]:
    bad = {key: value for key, value in result.components.items() if not isinstance(value, Real)}
    if bad:
        raise RewardComputationError(f"expected numeric components from reward term {name!r}, got {bad!r}")
    return {str(key): float(value) for key, value in result.components.items()}


def _clip(value: float, cap: tuple[float, float] | None) -> float:
    if cap is None:
        return value
    low, high = cap
    return min(max(value, low), high)
