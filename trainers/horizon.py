"""Horizon curriculum: the turn limit of the rollouts as a function of the training step.

AgentGym-RL's ScalingInter-RL starts an agent on short interactions (it learns to answer before it learns
to explore) and lets the horizon grow over training. A schedule is written as comma-separated
``<turns>@<step>`` stages: ``"5@0,10@20,15@40"`` allows 5 turns from step 0, 10 from step 20 and 15 from
step 40 on. The context budget (``max_context_tokens``) still caps every episode whatever its turn limit.

Example:
    >>> schedule = HorizonSchedule.parse("5@0,10@20,15@40")
    >>> [schedule.max_turns(step) for step in (0, 19, 20, 100)]
    [5, 5, 10, 15]
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

__all__ = ["HorizonSchedule", "HorizonStage"]

FORMAT = "comma-separated '<turns>@<step>' stages starting at step 0, e.g. '5@0,10@20,15@40'"


@dataclass(frozen=True)
class HorizonStage:
    """From training step ``start`` on, episodes get at most ``max_turns`` turns."""

    start: int
    max_turns: int


@dataclass(frozen=True)
class HorizonSchedule:
    """Turn limit per training step: stages with strictly increasing starts, the first at step 0."""

    stages: tuple[HorizonStage, ...]

    def __post_init__(self) -> None:
        if not self.stages or self.stages[0].start != 0:
            raise ValueError(f"horizon schedule: expected a first stage at step 0 ({FORMAT}), got {self._text()!r}")
        starts = [stage.start for stage in self.stages]
        if any(later <= earlier for earlier, later in itertools.pairwise(starts)):
            raise ValueError(f"horizon schedule: expected strictly increasing steps ({FORMAT}), got {self._text()!r}")
        if any(stage.max_turns < 1 for stage in self.stages):
            raise ValueError(f"horizon schedule: expected turn limits >= 1 ({FORMAT}), got {self._text()!r}")

    @classmethod
    def parse(cls, text: str) -> HorizonSchedule:
        """Read ``"<turns>@<step>,..."``.

        Raises:
            ValueError: The text is not in that form, the first stage is not at step 0, the steps do not
                increase, or a turn limit is below 1.
        """
        stages = []
        for part in text.split(","):
            turns, at, start = part.strip().partition("@")
            if not at or not turns.strip().isdigit() or not start.strip().isdigit():
                raise ValueError(f"horizon schedule: expected {FORMAT}; got {text!r} (stage {part.strip()!r} is not "
                                 "'<turns>@<step>' with two non-negative integers)")
            stages.append(HorizonStage(start=int(start), max_turns=int(turns)))
        return cls(tuple(stages))

    def max_turns(self, step: int) -> int:
        """The turn limit at training step ``step`` (that of the last stage started at or before it)."""
        if step < 0:
            raise ValueError(f"horizon schedule: expected a step >= 0, got {step}")
        index = bisect.bisect_right([stage.start for stage in self.stages], step) - 1
        return self.stages[index].max_turns

    def _text(self) -> str:
        return ",".join(f"{stage.max_turns}@{stage.start}" for stage in self.stages)
