"""SWE-v0's sandbox limits (imported by its spec without importing the env)."""

from agentgym_envs.sandbox.base import SandboxLimits

SWE_SANDBOX_LIMITS = SandboxLimits(timeout_s=60.0, memory_mb=1024, pids=128, disk_mb=128, output_bytes=32_768)
"""The default limits: room for a repository, its suite and the agent's commands; output room for the head and
tail of a command (10 kB, at most three bytes per byte once decoded)."""
CELL_GRACE_S = 15.0
"""Seconds a ``bash`` cell may take beyond the command's own limit (reading, killing, reporting)."""
