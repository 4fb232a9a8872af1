"""Errors raised by the ``rewards`` package.

    RewardError
    ├── RewardConfigError          bad weights, caps or parameters (also a ValueError)
    ├── RewardComputationError     a reward term raised or returned an unusable value; names the term
    ├── JudgeError                 an LLM judge backend failed, or its cache file is corrupt
    │   └── JudgeUnavailableError  the judge's service did not answer (also an InfrastructureError)
    └── VerifierUnavailableError   a verifier's worker process could not be started (also an InfrastructureError)

    tasks.errors.InfrastructureError
    ├── JudgeUnavailableError
    └── VerifierUnavailableError

A wrong answer is never an exception: it scores low, and so does an answer whose verification ran
past its time limit (the agent wrote it). These errors are for misconfiguration and for failures
that must be counted and surfaced instead of being scored as a silent 0. The two that are also
:class:`~tasks.errors.InfrastructureError` are faults the agent cannot cause (a judge endpoint that
refuses, times out, answers HTTP 5xx or garbage; a host that cannot start a process): the
environment ends such an episode as an infrastructure episode instead of scoring it, and
:class:`~rewards.composite.CompositeReward` lets them pass unwrapped. A corrupt judge cache file or
a judge that answers HTTP 4xx (wrong model name, bad key) stays a plain :class:`JudgeError`: that
is the user's to fix.
"""

from __future__ import annotations

from tasks.errors import InfrastructureError


class RewardError(Exception):
    """Base class of every error raised by ``rewards``."""


class RewardConfigError(RewardError, ValueError):
    """A reward was built with weights, caps or parameters it cannot use."""


class RewardComputationError(RewardError):
    """A reward term failed while scoring a trajectory; the message names the term."""


class JudgeError(RewardError):
    """An LLM judge backend could not produce replies, or the judge cache is unreadable."""


class JudgeUnavailableError(JudgeError, InfrastructureError):
    """The judge's service did not answer: connection refused, timed out, HTTP 5xx or 429, or a reply
    that is not JSON. The episode is an infrastructure episode, never scored."""


class VerifierUnavailableError(RewardError, InfrastructureError):
    """A verifier's worker process could not be started or did not come up in time (the host, not the
    agent's answer, is at fault)."""
