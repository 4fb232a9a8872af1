"""The ``local`` backend: a plain subprocess on the host. Development only: it isolates nothing."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import warnings
from pathlib import Path

from agentgym_envs.sandbox.base import SandboxLimits
from agentgym_envs.sandbox.kernel import KERNEL_SOURCE
from agentgym_envs.sandbox.kernel_client import KernelProcess, KernelSandbox


class UnsafeSandboxWarning(UserWarning):
    """Code is about to run on the host with no isolation."""


class LocalSandbox(KernelSandbox):
    """A kernel in a host subprocess with a private temporary work directory.

    It has the memory, file-size and timeout limits of the kernel's rlimits, but no network,
    filesystem or process isolation: agent code can read and change the host. Use it to debug an
    environment on a machine without Docker or bubblewrap, never for training on untrusted code.
    """

    backend = "local"

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        warnings.warn("sandbox='local' runs agent code on the host with no isolation; "
                      "use 'docker' or 'bwrap' for anything but debugging", UnsafeSandboxWarning,
                      stacklevel=2)
        super().__init__(limits)
        self._root = Path(tempfile.mkdtemp(prefix="agentrl-local-"))
        self._workdir = self._root / "work"
        self._workdir.mkdir()
        self._process_group: int | None = None

    def _spawn_kernel(self) -> KernelProcess:
        config = self.kernel_config(workdir=str(self._workdir), nproc=None, may_kill_all=False)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._workdir),
               "LANG": "C.UTF-8"}
        kernel = KernelProcess([sys.executable, "-I", "-c", KERNEL_SOURCE, config], env=env)
        self._process_group = kernel.pid  # the kernel leads its own session and process group
        return kernel

    def _wipe(self) -> None:
        if self._process_group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process_group, signal.SIGKILL)
            self._process_group = None
        self._workdir.mkdir(parents=True, exist_ok=True)  # code on the host may have deleted it
        for child in self._workdir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def _infrastructure_fault(self) -> str | None:
        """Never: the host process is the infrastructure, and what the code does to the host is its own doing."""
        return None

    def _release(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)
