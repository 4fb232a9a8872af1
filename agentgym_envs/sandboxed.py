"""The base class of environments whose tools run the agent's code in a sandbox.

:class:`SandboxEnv` owns the sandbox's life: a clean one at every ``reset`` (the current one reset,
or a new one when it is gone or broken), borrowed from a shared
:class:`~agentgym_envs.sandbox.docker.DockerSandboxPool` when one is given, and released on
``close``. Its backend and limits go into the env's card. A subclass adds its tools (which reach
the sandbox through :attr:`SandboxEnv.sandbox`), through :meth:`SandboxEnv._prepare_sandbox`,
what a task puts into the sandbox before the agent's first turn (files, a repository), and through
:meth:`SandboxEnv._docker_image` the image its docker sandboxes run when the base image is not enough.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Unpack

from agentgym_envs.core import TextEnv, TextEnvOptions
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.sandbox import BACKENDS, KernelSandbox, SandboxLimits, open_sandbox
from tasks import Task

if TYPE_CHECKING:  # the docker SDK is imported only when the docker backend is used
    from agentgym_envs.sandbox.docker import DockerSandboxPool


class SandboxEnv(TextEnv):
    """A :class:`~agentgym_envs.core.TextEnv` with a sandbox per episode.

    Args:
        sandbox: Backend: ``"docker"`` (default), ``"bwrap"`` or ``"local"`` (debugging only).
        sandbox_limits: Limits of the sandbox (timeout, memory, pids, output, disk).
        sandbox_pool: A :class:`~agentgym_envs.sandbox.docker.DockerSandboxPool` to borrow a sandbox
            from, shared by many envs; the sandbox goes back to the pool on ``close()``.
        **options: Every env's options (:class:`~agentgym_envs.core.TextEnvOptions`: ``split``, ``splits_dir``,
            ``families``, ``tasks``, ``reward``, the limits, ``render_mode``, ``prompt_style``); see
            :class:`~agentgym_envs.core.TextEnv`.

    Raises:
        EnvConfigError: An unknown backend, or a pool given with another backend than ``"docker"``.
    """

    def __init__(self, *, sandbox: str = "docker", sandbox_limits: SandboxLimits | None = None,
                 sandbox_pool: DockerSandboxPool | None = None, **options: Unpack[TextEnvOptions]) -> None:
        if sandbox not in BACKENDS:
            raise EnvConfigError(f"sandbox: expected one of {BACKENDS}, got {sandbox!r}")
        if sandbox_pool is not None and sandbox != "docker":
            raise EnvConfigError(f"sandbox_pool: a pool holds docker sandboxes, got sandbox={sandbox!r}; "
                                 "pass sandbox='docker' or no pool")
        super().__init__(**options)
        self.backend = sandbox
        self.sandbox_limits = sandbox_pool.limits if sandbox_pool is not None else sandbox_limits or SandboxLimits()
        self._pool = sandbox_pool
        self._sandbox: KernelSandbox | None = None

    @property
    def sandbox(self) -> KernelSandbox:
        """The current episode's sandbox (the stress harness injects faults through it).

        Raises:
            EnvConfigError: No episode has started yet (call ``reset()`` first).
        """
        if self._sandbox is None:
            raise EnvConfigError("the sandbox is not started: call reset() first")
        return self._sandbox

    def _prepare_sandbox(self, task: Task) -> None:
        """Put what ``task`` needs into the fresh sandbox before the agent's first turn (nothing by default)."""

    def _docker_image(self) -> str | None:
        """The image of this env's docker sandboxes; None for the base image (the default).

        Asked when a docker sandbox is opened, so an env may build its image then (once). A sandbox borrowed
        from a pool must run this image.
        """
        return None

    def _begin_episode(self, task: Task) -> None:
        """A clean sandbox: the current one reset, or a new one when it is gone or broken; then the task's files."""
        if self._sandbox is not None and self._sandbox.healthy():
            self._sandbox.reset()
        else:
            self._release_sandbox()
            self._sandbox = self._open_sandbox()
        self._prepare_sandbox(task)

    def _open_sandbox(self) -> KernelSandbox:
        """A new sandbox of the env's backend (or one borrowed from its pool) running :meth:`_docker_image`.

        Raises:
            EnvConfigError: The pool's sandboxes run another image than this env needs.
        """
        image = self._docker_image() if self.backend == "docker" else None
        if self._pool is None:
            return open_sandbox(self.backend, self.sandbox_limits, image=image)
        sandbox = self._pool.acquire()
        if image is not None and sandbox.image != image:
            self._pool.release(sandbox)
            raise EnvConfigError(f"sandbox_pool: expected a pool of image {image!r} for {self.env_name}, got one of "
                                 f"{sandbox.image!r}; make it with DockerSandboxPool(image={image!r})")
        return sandbox

    def _sandbox_limits(self) -> tuple[str | None, Mapping[str, Any] | None]:
        return self.backend, dataclasses.asdict(self.sandbox_limits)

    def _release_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is None:
            return
        if self._pool is not None:
            self._pool.release(sandbox)
        else:
            sandbox.close()

    def close(self) -> None:
        """Close (or return to its pool) the sandbox; idempotent."""
        self._release_sandbox()
        super().close()
