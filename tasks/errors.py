"""Errors raised by the ``tasks`` package.

    TaskError
    ├── UnknownTaskError      a task id, family or split that does not exist
    └── SplitIntegrityError   a bundled split file changed without its manifest

    InfrastructureError       the base of every infrastructure fault in every layer

:class:`InfrastructureError` lives here, in the bottom layer, so that every layer above can raise
and catch the same one: a sandbox that died (``agentgym_envs``), a judge endpoint that does not
answer (``rewards``), a retrieval service that is down. It means "nothing the agent's own code can
cause": an episode it ends is left out of the loss and of every evaluation rate, never scored.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class InfrastructureError(Exception):
    """A fault the agent's own code cannot cause: a dead or paused container, a frozen cgroup, a daemon or
    service that does not answer. Whatever the agent's processes do to themselves is the agent's outcome and
    is never reported as this error."""


class TaskError(Exception):
    """Base class of every error raised by ``tasks``."""


class UnknownTaskError(TaskError, KeyError):
    """A task id, family or split name that does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SplitIntegrityError(TaskError):
    """A bundled benchmark split no longer matches the checksum in its manifest."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A ``"; did you mean 'x'?"`` suffix naming the choice closest to ``name``; ``""`` if none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
