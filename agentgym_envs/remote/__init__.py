"""A Gymnasium env backed by any OpenEnv server (``agentrl/Remote-v0``); see :mod:`agentgym_envs.remote.env`."""

from agentgym_envs.remote.env import RemoteEnv

__all__ = ["RemoteEnv"]
