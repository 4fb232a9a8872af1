"""The ``bwrap`` backend: Linux namespaces through bubblewrap, for machines without Docker.

Each kernel runs in fresh user, pid, network, ipc, uts and mount namespaces. The root is a
tmpfs holding read-only binds of the system directories (``/usr``, ``/etc`` and the Python
installation that runs the kernel, under ``/opt/agentrl-python`` when it lives in ``/tmp`` or ``/work``
on the host) and nothing else of the host: home directories, the
project and other sandboxes are not there. ``/work`` and ``/tmp`` are private size-limited
tmpfs mounts. A reset kills the namespace (every process in it dies with its pid 1) and starts
a new one, so nothing survives an episode.

Processes are capped by ``RLIMIT_NPROC`` for an unprivileged host user, and by a pids cgroup
when the host runs as root (root is exempt from the rlimit). That cgroup (or its twin in the v1
freezer hierarchy) is what an operator freezes to stop a sandbox from outside: a frozen cgroup is
an infrastructure fault; a process of the sandbox stopping itself or its kernel is the agent's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
import weakref
from pathlib import Path

from agentgym_envs.errors import SandboxCrashedError, SandboxUnavailableError
from agentgym_envs.sandbox.base import SandboxLimits
from agentgym_envs.sandbox.cgroup import SandboxCgroup, freezer_root, pids_controller_root
from agentgym_envs.sandbox.kernel import KERNEL_SOURCE
from agentgym_envs.sandbox.kernel_client import KernelProcess, KernelSandbox, stopped_descendants

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
SANDBOX_OWN_DIRS = ("/tmp", "/work")
"""The sandbox's private tmpfs mounts: nothing of the host may be bound inside them."""
RELOCATED_PYTHON_ROOT = "/opt/agentrl-python"
"""Where a Python prefix that lives under one of :data:`SANDBOX_OWN_DIRS` on the host is bound instead."""
SANDBOX_UID = 65534
"""The user id code sees inside the namespace (``nobody``, as in the Docker image)."""


def python_prefixes(python: str) -> set[str]:
    """The installation folders ``python`` needs: the prefix its (resolved) executable lives in, and for the running
    interpreter also ``sys.prefix`` and ``sys.base_prefix`` (a virtual environment and the installation it is made
    from), e.g. ``{"/usr/local"}``."""
    prefixes = {sys.base_prefix, sys.prefix} if python == sys.executable else set()
    prefixes.add(str(Path(python).resolve().parent.parent))
    return prefixes


def bwrap_available() -> bool:
    """True when ``bwrap`` exists and can create the namespaces this backend needs."""
    binary = shutil.which("bwrap")
    if binary is None:
        return False
    probe = [binary, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


class BwrapSandbox(KernelSandbox):
    """A persistent kernel in bubblewrap namespaces.

    Args:
        limits: Resource limits; ``cpus`` is not enforced (there is no CPU controller).
        python: Interpreter that runs the kernel; its installation is bound read-only. Defaults
            to the interpreter running this code, so the sandbox sees the same packages.
    """

    backend = "bwrap"
    start_timeout_s = 15.0

    def __init__(self, limits: SandboxLimits | None = None, *, python: str | None = None) -> None:
        binary = shutil.which("bwrap")
        if binary is None:
            raise SandboxUnavailableError(
                "bubblewrap is not installed: expected a `bwrap` binary on PATH. On Debian run "
                "`apt-get install bubblewrap` (or `python -m agentgym_envs.sandbox setup` as root).")
        super().__init__(limits)
        self._bwrap = binary
        self._python = python or sys.executable
        self._cgroup = self._make_cgroup()
        # a sandbox dropped without close() must not leave its cgroup behind
        self._finalizer = weakref.finalize(self, self._cgroup.remove) if self._cgroup else None

    @property
    def cgroup(self) -> SandboxCgroup | None:
        """The cgroup holding every process of the sandbox (None unless the host runs as root)."""
        return self._cgroup

    def _make_cgroup(self) -> SandboxCgroup | None:
        """A pids cgroup, freezable where the host allows, when running as root (where RLIMIT_NPROC does not
        apply)."""
        if os.geteuid() != 0:
            return None
        root = pids_controller_root()
        if root is None:
            warnings.warn("bwrap sandbox: running as root without a writable pids cgroup, so the "
                          "process limit is not enforced", RuntimeWarning, stacklevel=3)
            return None
        return SandboxCgroup(root, self.limits.pids, freezer=freezer_root(root))

    def _bind_sources(self) -> list[tuple[str, str]]:
        """Host path and path in the sandbox of the system directories and the Python installation.

        A Python prefix under ``/tmp`` or ``/work`` (a virtual environment made there) is bound under
        :data:`RELOCATED_PYTHON_ROOT` instead of at its own path, where it would sit inside the sandbox's own
        ``/tmp`` or ``/work`` for the agent's code to find (and walk). A virtual environment still finds its
        base installation: that is bound at its own path, where its ``pyvenv.cfg`` says it is.
        """
        sources = [(path, path) for path in SYSTEM_DIRS if os.path.lexists(path)]
        for index, prefix in enumerate(sorted(python_prefixes(self._python))):
            if any(prefix == s or prefix.startswith(s + "/") for s, _ in sources):
                continue
            private = any(prefix == d or prefix.startswith(d + "/") for d in SANDBOX_OWN_DIRS)
            sources.append((prefix, f"{RELOCATED_PYTHON_ROOT}/{index}" if private else prefix))
        return sources

    def _sandbox_path(self, host_path: str) -> str:
        """Where ``host_path``, a file of a bound directory, is seen inside the sandbox."""
        for source, target in self._bind_sources():
            if host_path == source or host_path.startswith(source + "/"):
                return target + host_path[len(source):]
        return host_path

    def _bwrap_argv(self) -> list[str]:
        size = str(self.limits.disk_mb * 1024 * 1024)
        argv = [self._bwrap, "--unshare-all", "--die-with-parent", "--new-session",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
                "--proc", "/proc", "--dev", "/dev",
                "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/work",
                "--chdir", "/work", "--clearenv"]
        for source, target in self._bind_sources():
            if os.path.islink(source):
                argv += ["--symlink", os.readlink(source), target]
            else:
                argv += ["--ro-bind", source, target]
        path = f"{Path(self._sandbox_path(self._python)).parent}:/usr/local/bin:/usr/bin:/bin"
        for name, value in (("PATH", path), ("HOME", "/work"), ("LANG", "C.UTF-8"),
                            ("PYTHONDONTWRITEBYTECODE", "1")):
            argv += ["--setenv", name, value]
        return argv

    def python_argv(self, *args: str) -> list[str]:
        """The command that runs the sandbox's Python with ``args`` in a fresh namespace like the kernel's
        (same binds, environment and limits' mounts; no cgroup), e.g. ``python_argv("-c", "print(1)")``."""
        return [*self._bwrap_argv(), "--", self._sandbox_path(self._python), "-I", *args]

    def _spawn_kernel(self) -> KernelProcess:
        fault = self._infrastructure_fault()
        if fault is not None:  # a kernel started into a frozen cgroup would only hang until start_timeout_s
            raise SandboxCrashedError(f"bwrap sandbox {fault}: cannot start a kernel")
        nproc = None if self._cgroup else self.limits.pids
        config = self.kernel_config(workdir="/work", nproc=nproc, may_kill_all=True)
        argv = self.python_argv("-c", KERNEL_SOURCE, config)
        if self._cgroup is not None:
            argv = self._cgroup.wrap(argv)
        return KernelProcess(argv, env={"PATH": "/usr/bin:/bin"})

    def _wipe(self) -> None:
        # The kernel's bwrap is already killed: the namespace's pid 1 died with it, taking every
        # process and tmpfs inside. The cgroup sweep catches anything that escaped the namespace.
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def _infrastructure_fault(self) -> str | None:
        """A frozen cgroup; the namespace itself dies only with its kernel, which is the agent's to kill."""
        if self._cgroup is not None and self._cgroup.frozen():
            return f"is frozen from outside (cgroup {self._cgroup.freezer_path})"
        return None

    def _kernel_stopped(self) -> bool:
        """True when a process of the kernel's namespace is stopped."""
        return self._kernel is not None and bool(stopped_descendants(self._kernel.pid))
