"""Host side of the persistent kernel, shared by every backend.

:class:`KernelChannel` speaks the line protocol of :mod:`agentgym_envs.sandbox.kernel` over a
:class:`KernelTransport`: a child process's pipes (:class:`KernelProcess`: ``bwrap``, a plain ``python3``) or a
Docker exec's socket (:mod:`~agentgym_envs.sandbox.docker_exec`, no process on the host).
:class:`KernelSandbox` builds the whole :class:`~agentgym_envs.sandbox.base.Sandbox` protocol on
top of it; a backend only says how to start a kernel, how to kill everything in the sandbox and
what, if anything, stops the sandbox itself from outside.

Who is at fault when the kernel does not answer:

    ======================================================  ====================================
    what happened                                           reported as
    ======================================================  ====================================
    container paused, killed or removed; Docker daemon      ``SandboxCrashedError`` (infra)
    not answering; cgroup frozen; a fresh kernel that
    cannot start in a wiped sandbox
    the kernel, its process group or its children stopped  ``ExecResult(ok=False, limit="timeout",
    (SIGSTOP, ``kill -STOP -1``), including by processes    state_lost=True)``, kernel restarted
    left over from earlier cells
    the kernel killed or exited, its reply stream closed,   ``ExecResult(ok=False, state_lost=True)``,
    garbled or forged, its output descriptors closed        kernel restarted
    ======================================================  ====================================

Everything in the second and third rows is within reach of the code the agent runs (it runs *in*
the kernel), so it must be the agent's outcome: an infrastructure fault is left out of the loss
and of every rate, and would let a policy escape any penalty. Only states the sandbox's own
processes cannot reach (the container's state, the daemon, the cgroup files) count as faults of
the infrastructure.
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
from typing import Any, Protocol

from agentgym_envs.errors import SandboxCrashedError, SandboxError
from agentgym_envs.sandbox.base import ExecResult, SandboxLimits

HARD_TIMEOUT_GRACE_S = 2.0
"""Extra seconds the host waits past the kernel's own timer before it kills the kernel."""

SIGKILL_EXIT_CODES = {-signal.SIGKILL, 128 + signal.SIGKILL}
KILL_WAIT_S = 5.0
"""How long :meth:`PipeTransport.close` waits for the killed process to end. A process in a frozen v1 cgroup
does not die until the cgroup is thawed, and the host must not hang on it."""
LIMITS = (None, "timeout", "memory", "output", "pids", "disk")
"""The values of a well-formed exec reply's ``limit``."""


class KernelTimeout(SandboxError):
    """The kernel did not answer in time (user code ignored its own timer)."""


class KernelDied(SandboxError):
    """The kernel process ended; ``returncode`` says how."""

    def __init__(self, message: str, returncode: int | None) -> None:
        super().__init__(message)
        self.returncode = returncode


class KernelTransport(Protocol):
    """How the host reaches one kernel: its stdin, its stdout and stderr, and how it ended.

    :class:`PipeTransport` is a child process's pipes (``bwrap``, a plain ``python3``, the ``docker exec`` CLI);
    :class:`~agentgym_envs.sandbox.docker_exec.DockerExecTransport` is a Docker exec's socket, with no process
    on the host.
    """

    def write(self, data: bytes) -> None:
        """Send ``data`` to the kernel's stdin.

        Raises:
            OSError: The stream is closed (the kernel ended or was killed).
            ValueError: The transport was closed.
        """

    def read(self, timeout_s: float) -> bytes | None:
        """What the kernel wrote to stdout within ``timeout_s`` (b"" when nothing came); None once it ended."""

    def stderr_tail(self, limit: int) -> str:
        """The last ``limit`` bytes the kernel (or what started it) wrote to stderr ("" once closed)."""

    def running(self) -> bool:
        """True while the kernel runs (its stream is open), without waiting."""

    def wait(self, timeout_s: float) -> int | None:
        """The kernel's exit status once it ended; None when it did not end within ``timeout_s`` or its status
        is lost."""

    def close(self) -> None:
        """End the kernel and release the stream (waits at most :data:`KILL_WAIT_S`)."""


class PipeTransport:
    """A kernel child process's pipes; its stderr goes to a temporary file.

    Args:
        argv: Command that starts the kernel.
        env: Environment of the child; None inherits the host's.
        pass_fds: Descriptors the child inherits (bubblewrap's bind sources).
    """

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
                 pass_fds: tuple[int, ...] = ()) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close(), lives with the process)
        self._proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=env, start_new_session=True, pass_fds=pass_fds,
        )
        self._poller = select.poll()
        self._poller.register(self._proc.stdout.fileno(), select.POLLIN)
        self.pid = self._proc.pid

    def write(self, data: bytes) -> None:
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def read(self, timeout_s: float) -> bytes | None:
        if not self._poller.poll(timeout_s * 1000):
            return b""
        return os.read(self._proc.stdout.fileno(), 1 << 16) or None

    def stderr_tail(self, limit: int) -> str:
        if self._stderr.closed:  # a garbled reply kills the kernel before its caller asks for stderr
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace").strip()

    def running(self) -> bool:
        return self._proc.poll() is None

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Kill the process (and its host-side process group) and release its pipes.

        A process that is frozen ends when it is thawed and is reaped then by :mod:`subprocess`.
        """
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self.wait(KILL_WAIT_S)
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            # a request whose write found the pipe closed is still buffered: closing flushes it into the
            # same closed pipe (BrokenPipeError), and closes the descriptor anyway
            with contextlib.suppress(BrokenPipeError):
                stream.close()


class KernelChannel:
    """The kernel's request/reply line protocol over a :class:`KernelTransport`.

    Args:
        transport: The started kernel's stream; the channel owns it.
    """

    def __init__(self, transport: KernelTransport) -> None:
        self.transport = transport
        self._buffer = b""

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """Wait for the kernel's hello line and return it."""
        return self._read_reply(time.monotonic() + timeout_s)

    def request(self, payload: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply.

        Raises:
            KernelTimeout: No reply within ``timeout_s``.
            KernelDied: The kernel ended before replying.
        """
        try:
            self.transport.write(json.dumps(payload).encode() + b"\n")
        except (OSError, ValueError) as exc:
            raise self.death() from exc
        return self._read_reply(time.monotonic() + timeout_s)

    def _read_reply(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KernelTimeout("the kernel did not answer in time")
            chunk = self.transport.read(remaining)
            if chunk is None:
                raise self.death()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError) as exc:  # something else wrote to the stream: the kernel is unusable
            raise self._garbled(line) from exc
        if not isinstance(reply, dict):
            raise self._garbled(line)
        return reply

    def _garbled(self, line: bytes) -> KernelDied:
        """Kill the kernel whose reply stream carried ``line``, which is not a reply."""
        message = f"garbled reply from the kernel: {line[:300]!r}; stderr: {self.stderr_tail()}"
        self.kill()
        return KernelDied(message, None)

    def death(self) -> KernelDied:
        """How the kernel ended, as the error its caller raises (waits up to 5 s for it to end)."""
        code = self.transport.wait(5.0)
        return KernelDied(f"kernel process ended (exit code {code}): {self.stderr_tail()}", code)

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last bytes the kernel (or the command that started it) wrote to stderr ("" once killed)."""
        return self.transport.stderr_tail(limit)

    def alive(self) -> bool:
        """True while the kernel runs."""
        return self.transport.running()

    def kill(self) -> None:
        """End the kernel and release its stream (see the transport's ``close``)."""
        self.transport.close()


class KernelProcess(KernelChannel):
    """A kernel child process (``bwrap``, a plain ``python3``) and its request/reply stream over its pipes.

    Args:
        argv: Command that starts the kernel (ends with ``python3 -c KERNEL_SOURCE CONFIG``).
        env: Environment of the child; None inherits the host's.
        pass_fds: Descriptors the child inherits (bubblewrap's bind sources).
    """

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
                 pass_fds: tuple[int, ...] = ()) -> None:
        transport = PipeTransport(argv, env=env, pass_fds=pass_fds)
        super().__init__(transport)
        self.pid = transport.pid


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


def well_formed_exec_reply(reply: dict[str, Any]) -> bool:
    """True when ``reply`` has the shape of the kernel's answer to an ``exec`` request."""
    return (isinstance(reply.get("ok"), bool) and isinstance(reply.get("output"), str)
            and reply.get("limit") in LIMITS and type(reply.get("truncated_bytes")) is int)


def well_formed_file_reply(op: str, reply: dict[str, Any]) -> bool:
    """True when ``reply`` has the shape of the kernel's answer to a ``write`` or ``read`` request."""
    if reply.get("ok") is False:
        return isinstance(reply.get("error"), str)
    if reply.get("ok") is not True or op != "read":
        return reply.get("ok") is True
    try:
        base64.b64decode(reply.get("data_b64"), validate=True)
    except (TypeError, ValueError):
        return False
    return True


class KernelSandbox(ABC):
    """The :class:`~agentgym_envs.sandbox.base.Sandbox` protocol over a persistent kernel.

    Subclasses implement :meth:`_spawn_kernel`, :meth:`_wipe` and :meth:`_infrastructure_fault`,
    and may override :meth:`_kernel_stopped` and :meth:`_release`.
    """

    backend: str = "abstract"
    start_timeout_s: float = 30.0
    file_timeout_s: float = 30.0
    """Seconds a file request may take; a kernel that misses it in a sandbox that runs was broken by the code
    that ran in it."""
    start_slots: threading.BoundedSemaphore = threading.BoundedSemaphore(max(4, 4 * (os.cpu_count() or 1)))
    """Kernels starting at once in this process. Hundreds of sandboxes resetting together on a small machine
    would otherwise all miss ``start_timeout_s`` (the clock only runs once a slot is held, so a start that
    waits is late, not failed)."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._kernel: KernelChannel | None = None
        self._closed = False

    # -- what a backend provides -------------------------------------------------------------
    @abstractmethod
    def _spawn_kernel(self) -> KernelChannel:
        """Start a kernel in a clean sandbox (empty work directory, no other process)."""

    @abstractmethod
    def _wipe(self) -> None:
        """Kill every process in the sandbox (the kernel included) and empty the work directory (or leave that to
        the next kernel, which then empties it before it serves: :meth:`kernel_config`'s ``wipe``)."""

    @abstractmethod
    def _infrastructure_fault(self) -> str | None:
        """What stops the sandbox itself, seen from outside; None when it can run code.

        Only states that the sandbox's own processes cannot bring about count: a container that is
        paused, stopped or gone, a daemon that does not answer, a frozen cgroup. The text completes
        "<backend> sandbox ...". Asked after the kernel failed to answer, and by :meth:`healthy`.
        """

    def _infrastructure_alive(self) -> bool:
        """True when nothing stops the sandbox itself (see :meth:`_infrastructure_fault`)."""
        return self._infrastructure_fault() is None

    def _kernel_stopped(self) -> bool:
        """True when a process of the sandbox is stopped (SIGSTOP and the like).

        Only words the observation of a timeout: a process stopped from inside the sandbox is the
        agent's doing whichever it is. Backends that cannot tell return False.
        """
        return False

    def _release(self) -> None:  # noqa: B027 (optional hook: backends without extra resources skip it)
        """Free what the sandbox holds beyond its processes (containers, directories)."""

    def kernel_config(self, *, workdir: str, nproc: int | None, may_kill_all: bool,
                      wipe: Sequence[str] = ()) -> str:
        """The JSON config string the kernel reads from its argv; ``wipe``: folders it empties before it serves,
        after killing every other process of its user (:func:`~agentgym_envs.sandbox.kernel.wipe`)."""
        return json.dumps({
            "workdir": workdir, "nproc": nproc, "wipe": list(wipe),
            "may_kill_all": may_kill_all, "memory_mb": self.limits.memory_mb,
            "disk_mb": self.limits.disk_mb, "output_bytes": self.limits.output_bytes,
        })

    # -- the protocol ------------------------------------------------------------------------
    def run_code(self, code: str, *, timeout_s: float | None = None) -> ExecResult:
        """Run ``code`` as a notebook cell; limits and crashes come back in the result.

        Whatever the code does to its kernel (stops it, kills it, closes or garbles its reply stream)
        comes back as ``ok=False`` with the kernel restarted (``state_lost=True``).

        Raises:
            SandboxCrashedError: The sandbox itself is stopped or gone (a paused or dead container, a
                frozen cgroup, a daemon that does not answer), or a fresh kernel cannot start.
        """
        timeout = timeout_s or self.limits.timeout_s
        started = time.perf_counter()
        try:
            reply = self._ensure_kernel().request({"op": "exec", "code": code, "timeout_s": timeout},
                                                  timeout_s=timeout + HARD_TIMEOUT_GRACE_S)
        except KernelTimeout as exc:
            return self._after_kernel_timeout(exc, timeout, started)
        except KernelDied as died:
            return self._after_kernel_death(died, started)
        if not well_formed_exec_reply(reply):
            return self._after_broken_reply(reply, started)
        return self._exec_result(reply, timeout, time.perf_counter() - started)

    def _exec_result(self, reply: dict[str, Any], timeout: float, duration: float) -> ExecResult:
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

    def _raise_if_infrastructure_fault(self, cause: SandboxError) -> None:
        """Raise :class:`SandboxCrashedError` when the sandbox itself is stopped or gone.

        The kernel is dropped, not restarted: the next call or reset starts a fresh one once the
        sandbox runs again.
        """
        fault = self._infrastructure_fault()
        if fault is None:
            return
        self._drop_kernel()
        raise SandboxCrashedError(f"{self.backend} sandbox {fault}; its kernel could not answer: {cause}") from cause

    def _after_kernel_timeout(self, timeout_error: KernelTimeout, timeout: float, started: float) -> ExecResult:
        self._raise_if_infrastructure_fault(timeout_error)
        stopped = self._kernel_stopped()
        self._restart()
        if stopped:
            output = (f"TimeoutError: the Python kernel was stopped (SIGSTOP or the like, sent by code in the "
                      f"sandbox) and did not answer within the {timeout:g} s limit; it was restarted, so "
                      "variables and imports are lost.")
        else:
            output = (f"TimeoutError: the code ran past the {timeout:g} s limit and did not stop when "
                      "interrupted; the kernel was restarted, so variables and imports are lost.")
        return ExecResult(output=output, ok=False, limit="timeout", duration_s=time.perf_counter() - started,
                          state_lost=True)

    def _after_kernel_death(self, died: KernelDied, started: float) -> ExecResult:
        self._raise_if_infrastructure_fault(died)
        self._restart()
        duration = time.perf_counter() - started
        if died.returncode in SIGKILL_EXIT_CODES:
            return ExecResult(
                output=f"The Python kernel was killed (SIGKILL), most likely by the sandbox's memory limit "
                       f"({self.limits.memory_mb} MB) or by code in the sandbox; it was restarted, so variables "
                       "and imports are lost.",
                ok=False, limit="memory", duration_s=duration, state_lost=True)
        if died.returncode is None:
            return ExecResult(
                output="The Python kernel's reply stream was closed or written to by code in the sandbox; the "
                       "kernel was restarted, so variables and imports are lost.",
                ok=False, duration_s=duration, state_lost=True)
        return ExecResult(
            output=f"The Python kernel exited (exit code {died.returncode}); it was restarted, "
                   "so variables and imports are lost.",
            ok=False, duration_s=duration, state_lost=True)

    def _after_broken_reply(self, reply: dict[str, Any], started: float) -> ExecResult:
        """The kernel answered, but not with a cell's result: the cell broke the kernel's own machinery
        (closed its output descriptors, wrote to its reply stream). The stream may be out of step too."""
        self._restart()
        error = reply.get("error") if isinstance(reply.get("error"), str) else f"reply {json.dumps(reply)[:200]}"
        return ExecResult(
            output=f"The Python kernel could not report the cell's result ({error}); it was restarted, "
                   "so variables and imports are lost.",
            ok=False, duration_s=time.perf_counter() - started, state_lost=True)

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` relative to the work directory.

        A kernel that code in the sandbox broke (stopped, killed, its stream garbled) is restarted, which
        empties the work directory, and the write is made through the fresh kernel.

        Raises:
            SandboxCrashedError: The sandbox itself is stopped or gone, or a fresh kernel failed the write.
        """
        payload = {"op": "write", "path": path, "data_b64": base64.b64encode(data).decode()}
        if self._file_request(payload) is None and self._file_request(payload) is None:
            raise SandboxCrashedError(f"{self.backend} sandbox: a fresh kernel failed to write {path!r}")

    def read_file(self, path: str, *, max_bytes: int = 1 << 20) -> bytes:
        """Read at most ``max_bytes`` of ``path`` relative to the work directory.

        Raises:
            FileNotFoundError: The file does not exist or cannot be read, or code in the sandbox broke the
                kernel (which is restarted, with an empty work directory).
            SandboxCrashedError: The sandbox itself is stopped or gone.
        """
        reply = self._file_request({"op": "read", "path": path, "max_bytes": max_bytes})
        if reply is None:
            raise FileNotFoundError(f"read {path!r} in the sandbox: its kernel was stopped, killed or garbled by "
                                    "code running there and was restarted with an empty work directory")
        return base64.b64decode(reply["data_b64"])

    def _file_request(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Send a file request; None when code in the sandbox broke the kernel (then restarted).

        Raises:
            FileNotFoundError: The kernel could not do it (no such file, a path outside the work directory).
            SandboxCrashedError: The sandbox itself is stopped or gone, or a fresh kernel cannot start.
        """
        try:
            reply = self._ensure_kernel().request(payload, timeout_s=self.file_timeout_s)
        except (KernelTimeout, KernelDied) as exc:
            self._raise_if_infrastructure_fault(exc)
            self._restart()
            return None
        if not well_formed_file_reply(payload["op"], reply):
            self._restart()
            return None
        if not reply["ok"]:
            raise FileNotFoundError(f"{payload['op']} {payload['path']!r} in the sandbox: {reply['error']}")
        return reply

    def reset(self) -> None:
        """Kill every process, empty the work directory and start a fresh kernel."""
        self._restart()

    def healthy(self) -> bool:
        """True when the sandbox runs and its kernel (restarted if code in the sandbox broke it) answers."""
        if self._closed or not self._infrastructure_alive():
            return False
        try:
            if self._answers_ping():
                return True
            self._restart()
            return self._answers_ping()
        except SandboxError:
            return False

    def _answers_ping(self) -> bool:
        try:
            return self._ensure_kernel().request({"op": "ping"}, timeout_s=5.0).get("ok") is True
        except (KernelTimeout, KernelDied):
            return False

    def close(self) -> None:
        """Kill everything; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._drop_kernel()
        self._release()

    # -- kernel lifecycle --------------------------------------------------------------------
    def _ensure_kernel(self) -> KernelChannel:
        """The running kernel, started if there is none.

        Raises:
            KernelDied: The kernel ended after its last reply (a cell closed its request stream, a process it
                left behind killed it). Its state is gone, so the caller reports that as it reports a death
                during its own request, rather than a fresh kernel standing in for it unnoticed.
        """
        if self._closed:
            raise SandboxError(f"{self.backend} sandbox is closed")
        if self._kernel is not None and not self._kernel.alive():
            raise self._kernel.death()
        if self._kernel is None:
            self._kernel = self._start_kernel()
        return self._kernel

    def _start_kernel(self) -> KernelChannel:
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
