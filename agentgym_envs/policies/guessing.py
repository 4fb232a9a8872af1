"""A careless demonstrator: sometimes it answers at once with a guess instead of using its tools.

Demonstrations rarely come from a perfect agent. An untrained or weak model often answers a question it
should compute or look up with a number it just read. Wrapping an oracle in :class:`GuessingPolicy`
gives demonstrations of such a mixed behaviour: imitation learns both the tool use and the guessing, and
only a reward can tell the model which of the two pays.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from agentgym_envs.policies.base import Policy, answer_action
from tasks import Task

NUMBER = re.compile(r"-?\d+")


class GuessingPolicy:
    """Acts as ``policy``, except that in a share ``rate`` of the episodes it answers at once with a number
    drawn from the task's statement (its first paragraph, the part without the answer instructions).

    Args:
        policy: The demonstrator followed when not guessing.
        rate: Share of episodes answered with a guess, in [0, 1].
        seed: Seed of the policy's own generator.

    Attributes:
        guessed: Whether the current episode is a guess.
    """

    name = "guessing"

    def __init__(self, policy: Policy, rate: float, seed: int = 0) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"GuessingPolicy: expected a rate in [0, 1], got {rate}")
        self.policy, self.rate, self._rng = policy, rate, random.Random(seed)
        self.guessed = False
        self._numbers: list[str] = []

    def begin(self, task: Task, prompt: str, info: Mapping[str, Any]) -> None:
        """Draw whether this episode is a guess; start the wrapped policy either way."""
        self._numbers = NUMBER.findall(task.prompt.split("\n\n")[0])
        self.guessed = bool(self._numbers) and self._rng.random() < self.rate
        self.policy.begin(task, prompt, info)

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """The guess when guessing, otherwise the wrapped policy's action."""
        if self.guessed:
            return answer_action(self._rng.choice(self._numbers))
        return self.policy.act(observation, info)
