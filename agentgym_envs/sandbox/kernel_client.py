"""Host side of the persistent kernel, shared by every backend.

:class:`KernelProcess` speaks the line protocol of :mod:`agentgym_envs.sandbox.kernel` over a
child process's pipes (``docker exec -i``, ``bwrap`` or a plain ``python3``).
:class:`KernelSandbox` builds the whole :class:`~agentgym_envs.sandbox.base.Sandbox` protocol on
top of it; a backend only says how to start a kernel, how to kill everything in the sandbox and
whether the sandbox itself is still alive.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_envs.errors import SandboxCrashedError, SandboxError
from agentgym_envs.sandbox.base import ExecResult, SandboxLimits

HARD_TIMEOUT_GRACE_S = 2.0
"""Extra seconds the host waits past the kernel's own timer before it kills the kernel."""

SIGKILL_EXIT_CODES = {-signal.SIGKILL, 128 + signal.SIGKILL}


class KernelTimeout(SandboxError):
    """The kernel did not answer in time (user code ignored its own timer)."""


class KernelDied(SandboxError):
    """The kernel process ended; ``returncode`` says how."""

    def __init__(self, message: str, returncode: int | None) -> None:
        super().__init__(message)
        self.returncode = returncode


class KernelProcess:
    """One kernel child process and its request/reply stream.

    Args:
        argv: Command that starts the kernel (ends with ``python3 -c KERNEL_SOURCE CONFIG``).
        env: Environment of the child; None inherits the host's.
        pass_fds: Descriptors the child inherits (bubblewrap's bind sources).
    """

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
                 pass_fds: tuple[int, ...] = ()) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in kill(), lives with the process)
        self._proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=env, start_new_session=True, pass_fds=pass_fds,
        )
        self._buffer = b""
        self.pid = self._proc.pid

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """Wait for the kernel's hello line and return it."""
        return self._read_reply(time.monotonic() + timeout_s)

    def request(self, payload: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply.

        Raises:
            KernelTimeout: No reply within ``timeout_s``.
            KernelDied: The process ended before replying.
        """
        try:
            self._proc.stdin.write(json.dumps(payload).encode() + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise self._died() from exc
        return self._read_reply(time.monotonic() + timeout_s)

    def _read_reply(self, deadline: float) -> dict[str, Any]:
        fd = self._proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KernelTimeout("the kernel did not answer in time")
            if not poller.poll(remaining * 1000):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._died()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:  # something else wrote to the stream: the kernel is unusable
            message = f"garbled reply from the kernel: {line[:300]!r}; stderr: {self.stderr_tail()}"
            self.kill()
            raise KernelDied(message, None) from exc

    def _died(self) -> KernelDied:
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return KernelDied(f"kernel process ended (exit code {code}): {self.stderr_tail()}", code)

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last bytes the kernel (or the command that started it) wrote to stderr ("" once killed)."""
        if self._stderr.closed:  # a garbled reply kills the kernel before its caller asks for stderr
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace").strip()

    def alive(self) -> bool:
        """True while the process runs."""
        return self._proc.poll() is None

    def kill(self) -> None:
        """Kill the process (and its host-side process group) and release its pipes."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            stream.close()


def stopped_descendants(pid: int) -> list[int]:
    """Pids of the processes under host process ``pid`` (itself included) that are stopped (state T or t)."""
    stopped, pending = [], [pid]
    while pending:
        current = pending.pop()
        try:
            state = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()[0]
            children = [Path(task, "children").read_text().split() for task in Path(f"/proc/{current}/task").iterdir()]
        except (OSError, IndexError):
            continue  # gone in the meantime
        if state in ("T", "t"):
            stopped.append(current)
        pending += [int(child) for listed in children for child in listed]
    return stopped


class KernelSandbox(ABC):
    """The :class:`~agentgym_envs.sandbox.base.Sandbox` protocol over a persistent kernel.

    Subclasses implement :meth:`_spawn_kernel`, :meth:`_wipe` and :meth:`_infrastructure_alive`,
    and may override :meth:`_release`.
    """

    backend: str = "abstract"
    start_timeout_s: float = 30.0
    start_slots: threading.BoundedSemaphore = threading.BoundedSemaphore(max(4, 4 * (os.cpu_count() or 1)))
    """Kernels starting at once in this process. Hundreds of sandboxes resetting together on a small machine
    would otherwise all miss ``start_timeout_s`` (the clock only runs once a slot is held, so a start that
    waits is late, not failed)."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._kernel: KernelProcess | None = None
        self._closed = False

    # -- what a backend provides -------------------------------------------------------------
    @abstractmethod
    def _spawn_kernel(self) -> KernelProcess:
        """Start a kernel in a clean sandbox (empty work directory, no other process)."""

    @abstractmethod
    def _wipe(self) -> None:
        """Kill every process in the sandbox (the kernel included) and empty the work directory."""

    @abstractmethod
    def _infrastructure_alive(self) -> bool:
        """True when the sandbox itself (container, namespace host) still exists."""

    def _release(self) -> None:  # noqa: B027 (optional hook: backends without extra resources skip it)
        """Free what the sandbox holds beyond its processes (containers, directories)."""

    def _kernel_stalled(self) -> bool:
        """True when the kernel that missed its deadline is stopped or frozen rather than running a cell.

        Asked only after the host's hard timeout. A kernel stopped from outside (SIGSTOP, a frozen
        cgroup, a paused container) is an infrastructure fault; a kernel busy in a cell that ignores
        its timer is the agent's. Backends that cannot tell return False (the agent's timeout).
        """
        return False

    def kernel_config(self, *, workdir: str, nproc: int | None, may_kill_all: bool) -> str:
        """The JSON config string the kernel reads from its argv."""
        return json.dumps({
            "workdir": workdir, "nproc": nproc,
            "may_kill_all": may_kill_all, "memory_mb": self.limits.memory_mb,
            "disk_mb": self.limits.disk_mb, "output_bytes": self.limits.output_bytes,
        })

    # -- the protocol ------------------------------------------------------------------------
    def run_code(self, code: str, *, timeout_s: float | None = None) -> ExecResult:
        """Run ``code`` as a notebook cell; limits and crashes come back in the result."""
        timeout = timeout_s or self.limits.timeout_s
        started = time.perf_counter()
        kernel = self._ensure_kernel()
        try:
            reply = kernel.request({"op": "exec", "code": code, "timeout_s": timeout},
                                   timeout_s=timeout + HARD_TIMEOUT_GRACE_S)
        except KernelTimeout as exc:
            stalled = self._kernel_stalled()
            self._restart()
            if stalled:
                raise SandboxCrashedError(f"{self.backend} kernel stalled (stopped, not running the cell) and "
                                          "was restarted") from exc
            return ExecResult(
                output=f"TimeoutError: the code ran past the {timeout:g} s limit and did not stop "
                       "when interrupted; the kernel was restarted, so variables and imports are lost.",
                ok=False, limit="timeout", duration_s=time.perf_counter() - started, state_lost=True)
        except KernelDied as died:
            return self._after_kernel_death(died, time.perf_counter() - started)
        return self._exec_result(reply, timeout, time.perf_counter() - started)

    def _exec_result(self, reply: dict[str, Any], timeout: float, duration: float) -> ExecResult:
        if "output" not in reply:  # the kernel's own machinery failed, not the cell
            self._restart()
            raise SandboxCrashedError(f"{self.backend} kernel failed to run a cell: {reply.get('error')}")
        output = reply["output"]
        if reply["limit"] == "timeout":
            output += f"TimeoutError: execution stopped after the {timeout:g} s limit.\n"
        elif reply["limit"] == "pids":
            output += (f"The sandbox's process limit ({self.limits.pids}) was reached; "
                       "its other processes were killed.\n")
        elif reply["limit"] == "memory":
            output += f"The sandbox's memory limit ({self.limits.memory_mb} MB) was reached.\n"
        elif reply["limit"] == "disk":
            output += f"The sandbox's disk limit ({self.limits.disk_mb} MB) was reached.\n"
        return ExecResult(output=output, ok=reply["ok"], limit=reply["limit"],
                          truncated_bytes=reply["truncated_bytes"], duration_s=duration)

    def _after_kernel_death(self, died: KernelDied, duration: float) -> ExecResult:
        if not self._infrastructure_alive():
            self._kernel = None
            raise SandboxCrashedError(f"{self.backend} sandbox is gone: {died}") from died
        self._restart()
        if died.returncode in SIGKILL_EXIT_CODES:
            return ExecResult(
                output=f"The Python kernel was killed, most likely by the sandbox's memory limit "
                       f"({self.limits.memory_mb} MB); it was restarted, so variables and imports are lost.",
                ok=False, limit="memory", duration_s=duration, state_lost=True)
        return ExecResult(
            output=f"The Python kernel exited (exit code {died.returncode}); it was restarted, "
                   "so variables and imports are lost.",
            ok=False, duration_s=duration, state_lost=True)

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` relative to the work directory."""
        self._file_request({"op": "write", "path": path, "data_b64": base64.b64encode(data).decode()})

    def read_file(self, path: str, *, max_bytes: int = 1 << 20) -> bytes:
        """Read at most ``max_bytes`` of ``path`` relative to the work directory.

        Raises:
            FileNotFoundError: The file does not exist or cannot be read.
        """
        reply = self._file_request({"op": "read", "path": path, "max_bytes": max_bytes})
        return base64.b64decode(reply["data_b64"])

    def _file_request(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self._ensure_kernel().request(payload, timeout_s=self.start_timeout_s)
        except (KernelTimeout, KernelDied) as exc:
            raise SandboxCrashedError(f"{self.backend} sandbox failed a file request: {exc}") from exc
        if not reply["ok"]:
            raise FileNotFoundError(f"{payload['op']} {payload['path']!r} in the sandbox: {reply['error']}")
        return reply

    def reset(self) -> None:
        """Kill every process, empty the work directory and start a fresh kernel."""
        self._restart()

    def healthy(self) -> bool:
        """True when the sandbox exists and its kernel answers a ping."""
        if self._closed or not self._infrastructure_alive():
            return False
        try:
            return bool(self._ensure_kernel().request({"op": "ping"}, timeout_s=5.0)["ok"])
        except SandboxError:
            return False

    def close(self) -> None:
        """Kill everything; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._drop_kernel()
        self._release()

    # -- kernel lifecycle --------------------------------------------------------------------
    def _ensure_kernel(self) -> KernelProcess:
        if self._closed:
            raise SandboxError(f"{self.backend} sandbox is closed")
        if self._kernel is None or not self._kernel.alive():
            self._drop_kernel()
            self._kernel = self._start_kernel()
        return self._kernel

    def _start_kernel(self) -> KernelProcess:
        with self.start_slots:
            kernel = self._spawn_kernel()
            try:
                kernel.wait_ready(self.start_timeout_s)
            except SandboxError as exc:
                stderr = kernel.stderr_tail()
                kernel.kill()
                raise SandboxCrashedError(f"{self.backend} kernel did not start: {exc}; stderr: {stderr}") from exc
        return kernel

    def _restart(self) -> None:
        self._drop_kernel()
        self._kernel = self._start_kernel()

    def _drop_kernel(self) -> None:
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            kernel.kill()
        self._wipe()

    def __enter__(self) -> KernelSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
