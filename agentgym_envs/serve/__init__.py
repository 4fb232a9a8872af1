"""Serve any registered agentrl env to other trainers: OpenEnv's protocol (with the env's tools on its MCP surface)
and ORS's, one env per session, on loopback unless told otherwise.

    python -m agentgym_envs.serve agentrl/Search-v0 --port 8000
    python -m agentgym_envs.serve agentrl/PythonSandbox-v0 --env-kwargs '{"sandbox": "bwrap"}' --max-sessions 32

Needs the ``serve`` extra (``pip install -e ".[serve]"``: openenv-core, openreward). See ``docs/serving.md``.
"""

from agentgym_envs.serve.session import (
    EpisodeSession,
    ServeConfig,
    ServedEnv,
    SessionClosedError,
    SessionLimitError,
    SessionSlots,
    StepOutcome,
)

__all__ = ["EpisodeSession", "ServeConfig", "ServedEnv", "SessionClosedError", "SessionLimitError", "SessionSlots",
           "StepOutcome"]
