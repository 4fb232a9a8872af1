"""Stop a training run whose episodes are mostly infrastructure faults, naming the first fault.

An episode that an infrastructure fault ended (a Docker daemon that does not answer, a dead container, a
service that is down) is left out of the loss and of every rate (:attr:`~agentgym_envs.runner.Episode.scored`).
A run where most episodes end so learns nothing, and must not finish and save a checkpoint as if it had
trained. :class:`InfraErrorGuard` watches every rollout batch (a step) of GRPO and PPO and raises
:class:`TooManyInfraErrors` when

* every episode of one step ended by an infrastructure fault, or
* more than ``stop_share`` of the episodes of the last ``window`` steps did (judged once ``window`` steps
  have been played);

``stop_share`` 1.0 never stops. The error names the first fault's own message (e.g. the Docker daemon's
connection error) and says what to do. On several processes each process judges its own episodes; a process
that stops ends the launch.

Example:
    >>> guard = InfraErrorGuard(stop_share=0.5, window=3)
    >>> guard.observe(batch_of_episodes, step=0)  # doctest: +SKIP
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from agentgym_envs.runner import UNSCORED_AGENT_STOPS, Episode

INFRA_HINT = ("check the infrastructure: for a Docker sandbox, is the daemon running? "
              "`python -m agentgym_envs.sandbox doctor` shows what works and how to fix what does not")
"""What to do about infrastructure faults (shared by the trainers' stop, the monitor's alert and evaluation)."""

AGENT_HINT = ("the agent program crashed or hung (the first fault's message holds its traceback or stderr): fix "
              "the program, or raise agent_timeout_s if it is only slow")
"""What to do when the unscored episodes are an agent program's crashes or timeouts (``agent_error``,
``agent_timeout``)."""

INFRA_ERROR_STOP_SHARE_HELP = (
    "Stop training with an error naming the first infrastructure fault (e.g. a Docker daemon that does not answer) "
    "when every episode of one step ended by such a fault, or when more than this share of the episodes of the "
    "last infra_error_window steps did (the model is not saved). 1.0 never stops (the episodes are left out of the "
    "loss either way).")
INFRA_ERROR_WINDOW_HELP = "Steps (rollout batches) over which infra_error_stop_share is judged."

MESSAGE_CHARS = 500
"""Most characters of an infrastructure fault's message quoted in an error."""


class TooManyInfraErrors(RuntimeError):
    """Training stopped: too many of its episodes ended by an infrastructure fault (the message names the first)."""


def check_infra_error_settings(stop_share: float, window: int) -> None:
    """Raise ValueError unless ``0 <= stop_share <= 1`` and ``window >= 1``."""
    if not 0.0 <= stop_share <= 1.0:
        raise ValueError(f"infra_error_stop_share: expected 0 <= share <= 1 (1.0 never stops), got {stop_share}")
    if window < 1:
        raise ValueError(f"infra_error_window: expected >= 1 steps, got {window}")


def infra_error_message(episode: Episode) -> str:
    """What the infrastructure fault that hit ``episode`` said ("" when none did).

    The runner's record of a failed reset (:attr:`Episode.error`), else the line of the first infra turn's
    observation that reports the fault (the env writes the fault's message there), else that observation.
    """
    if episode.error:
        return _clip(episode.error)
    for turn in episode.turns:
        if turn.infra_error:
            lines = turn.observation.strip().splitlines() or [""]
            reported = [line for line in lines if "infrastructure error" in line.lower()]
            return _clip((reported or lines)[0])
    return ""


def first_infra_error(episodes: Sequence[Episode]) -> str:
    """The message of the first (in batch order) episode an infrastructure fault ended ("" when none did)."""
    for episode in episodes:
        if episode.infra_error:
            return infra_error_message(episode) or "(the episode recorded no message)"
    return ""


def infra_share(episodes: Sequence[Episode]) -> float:
    """Share of ``episodes`` that an infrastructure fault ended (0.0 for none)."""
    return sum(episode.infra_error for episode in episodes) / len(episodes) if episodes else 0.0


@dataclass(frozen=True)
class StepInfra:
    """How one step's episodes fared: how many, how many infrastructure faults ended, the first one's message and
    whether it was an agent program's crash or timeout."""

    step: int
    episodes: int
    infra: int
    first_error: str
    first_by_agent: bool = False

    @classmethod
    def of(cls, episodes: Sequence[Episode], step: int) -> StepInfra:
        """Count ``episodes``, the batch of ``step``."""
        first = next((episode for episode in episodes if episode.infra_error), None)
        return cls(step, len(episodes), sum(episode.infra_error for episode in episodes), first_infra_error(episodes),
                   first is not None and first.stop_reason in UNSCORED_AGENT_STOPS)


class InfraErrorGuard:
    """Raises :class:`TooManyInfraErrors` when too many of a run's episodes are infrastructure faults.

    Args:
        stop_share: Stop when more than this share of the last ``window`` steps' episodes are infrastructure
            faults (or every episode of one step is); 1.0 never stops.
        window: Steps the share is judged over.
    """

    def __init__(self, stop_share: float = 0.5, window: int = 3) -> None:
        check_infra_error_settings(stop_share, window)
        self.stop_share = stop_share
        self.window = window
        self._steps: deque[StepInfra] = deque(maxlen=window)

    def observe(self, episodes: Sequence[Episode], *, step: int) -> None:
        """Count the batch of ``step``; raise when the run must stop.

        Raises:
            TooManyInfraErrors: Every episode of this step, or more than ``stop_share`` of the window's, ended
                by an infrastructure fault; the message names the first fault and what to do.
        """
        counts = StepInfra.of(episodes, step)
        self._steps.append(counts)
        if self.stop_share >= 1.0:
            return
        if counts.episodes and counts.infra == counts.episodes:
            raise TooManyInfraErrors(self._message(
                f"every episode of step {step} ({counts.infra}) ended by an infrastructure fault", [counts]))
        infra, total = sum(s.infra for s in self._steps), sum(s.episodes for s in self._steps)
        if len(self._steps) == self.window and total and infra / total > self.stop_share:
            raise TooManyInfraErrors(self._message(
                f"{infra} of the {total} episodes of steps {self._steps[0].step}-{step} ({infra / total:.0%}) ended "
                f"by an infrastructure fault, more than infra_error_stop_share ({self.stop_share:.0%})",
                list(self._steps)))

    @staticmethod
    def _message(what: str, steps: Sequence[StepInfra]) -> str:
        faulted = next((s for s in steps if s.first_error), None)
        first = faulted.first_error if faulted is not None else "(no message recorded)"
        hint = AGENT_HINT if faulted is not None and faulted.first_by_agent else INFRA_HINT
        return (f"training stopped: {what}.\n  first fault: {first}\n  to fix: {hint}; or, to train on "
                "regardless (those episodes are left out of the loss), raise infra_error_stop_share (1.0 never stops)")


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."
