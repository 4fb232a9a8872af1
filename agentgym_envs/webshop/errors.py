"""Errors raised by the WebShop environment and its shop server.

    AgentgymError                     (agentgym_envs.errors)
    ├── ShopUnavailableError          the shop server did not start, does not answer, or answers garbage
    │                                 (also a tasks.InfrastructureError)
    └── BrowserUnavailableError       the browser crashed, timed out, or could not reach the shop
                                      (also a tasks.InfrastructureError)

An unavailable shop is infrastructure: the episode it ends is reported as ``infra_error`` and never
scored. A bad click or a page the agent asked for wrongly is not an error: it is the shop's error page.
"""

from __future__ import annotations

from agentgym_envs.errors import AgentgymError
from tasks.errors import InfrastructureError


class ShopUnavailableError(AgentgymError, InfrastructureError):
    """The shop server could not be started or reached, or sent a reply that is not what its API promises."""


class BrowserUnavailableError(AgentgymError, InfrastructureError):
    """The browser crashed, disconnected or timed out, or a navigation failed (no answer, or HTTP 5xx)."""
