"""SWE-v0's sandbox limits (imported by its spec without importing the env)."""

from agentgym_envs.sandbox.base import SandboxLimits

SWE_SANDBOX_LIMITS = SandboxLimits(timeout_s=60.0, memory_mb=1024, pids=128, disk_mb=128, output_bytes=32_768)
"""The default limits: room for a repository, its suite and the agent's commands; output room for the head and
tail of a command (10 kB, at most three bytes per byte once decoded).

``memory_mb`` caps address space. Measured on ~600-test suites in their environments (more-itertools 10.5.0, 664
tests; humanize 4.9.0 with freezegun, 550 tests): both run whole in 128 MB on docker and bwrap, in 4 to 12 s. What
needs room is threads (8 MB of stack each, with glibc's arenas capped at 2: ``MALLOC_ARENA_MAX``), so 1024 MB
leaves room for 64 threads and a suite's data. An environment (``memory_mb``, ``test_timeout_s`` in
:class:`~tasks.swe.environments.RepoEnvironment` or an override file) or an instance sets its own."""
CELL_GRACE_S = 15.0
"""Seconds a ``bash`` cell may take beyond the command's own limit (reading, killing, reporting)."""
