"""Errors raised by ``agentgym_envs``.

    AgentgymError
    ├── EnvConfigError          bad constructor arguments or options (also a ValueError)
    ├── UnknownEnvError         an env id that is not registered; suggests the close match
    └── SandboxError            infrastructure faults: never the agent's fault, never scored
                                (also a tasks.InfrastructureError, the base every layer shares)
        ├── SandboxUnavailableError   the backend cannot run here (no daemon, no bwrap, no image)
        ├── SandboxCrashedError       a kernel, container or namespace died and could not be revived
        └── ImageBuildError           the sandbox base image could not be built

A malformed *action* is never an exception: it becomes an observation. These errors are for
programming mistakes and for infrastructure that is down.
"""

from __future__ import annotations

from tasks.errors import InfrastructureError


class AgentgymError(Exception):
    """Base class of every error raised by ``agentgym_envs``."""


class EnvConfigError(AgentgymError, ValueError):
    """An environment was built or reset with arguments it cannot use."""


class UnknownEnvError(AgentgymError, LookupError):
    """An environment id that is not registered."""


class SandboxError(AgentgymError, InfrastructureError):
    """An infrastructure fault in a sandbox (reported as ``infra_error``, never as a wrong answer)."""


class SandboxUnavailableError(SandboxError):
    """The requested sandbox backend cannot run on this machine; the message says how to fix it."""


class SandboxCrashedError(SandboxError):
    """A sandbox died (container gone, kernel killed) and could not be brought back."""


class ImageBuildError(SandboxError):
    """The base image could not be built; the message says which step failed and how to fix it."""
