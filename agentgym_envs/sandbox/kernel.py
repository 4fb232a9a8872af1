"""The persistent Python kernel that runs *inside* a sandbox.

This file is shipped into the sandbox as the source of ``python3 -c`` (see
:data:`KERNEL_SOURCE`), so it uses the standard library only and must run on the sandbox's own
Python. The host talks to it over the process's stdin/stdout, one JSON object per line:

    host → kernel   {"op": "exec", "code": "...", "timeout_s": 10}
                    {"op": "write", "path": "a.txt", "data_b64": "..."}
                    {"op": "read", "path": "a.txt", "max_bytes": 1048576}
                    {"op": "ping"}
    kernel → host   {"ok": true, ...} (one reply per request; the first line is a hello)

User code runs in one namespace that persists across requests, like a notebook: the value of a
trailing expression is printed. Its stdout and stderr (including those of child processes) go to
a pipe drained by a thread that keeps only the head and the tail of each cell's output, so an
endless print loop costs neither memory nor disk, and nothing the code prints reaches the
protocol stream.
Limits come from rlimits set at start-up, from an interval timer per execution, and from the
backend (cgroups on Docker, namespaces on bubblewrap).
"""

from __future__ import annotations

import ast
import base64
import contextlib
import errno
import json
import os
import resource
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


class CellTimeout(BaseException):
    """Raised inside user code when the execution's wall-clock budget runs out."""


def apply_rlimits(config: dict) -> None:
    """Set the per-process limits every child of the kernel inherits."""
    memory = config["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    file_size = config["disk_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if config.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (config["nproc"], config["nproc"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write raises EFBIG instead


def open_protocol() -> tuple[object, object]:
    """Move the protocol to private descriptors; fd 0 becomes /dev/null."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return proto_in, proto_out


class HeadTail:
    """The first and last ``limit // 2`` bytes of a stream, and how many bytes came in all."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        """Append bytes to the stream."""
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail = (self.tail + data)[-self.half:]

    def render(self) -> tuple[bytes, int]:
        """Head, a notice of the cut when there is one, and tail; and how many bytes were cut."""
        cut = self.total - len(self.head) - len(self.tail)
        if not cut:
            return bytes(self.head + self.tail), 0
        return bytes(self.head) + f"\n... [{cut} bytes of output cut] ...\n".encode() + bytes(self.tail), cut


class OutputCapture:
    """fds 1 and 2 write into a pipe; a thread keeps the head and tail of what each cell printed.

    A cell's output ends at a random marker the kernel writes after the cell, so output that
    background processes write later goes to the next cell.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self.read_fd = read_fd
        self.done = threading.Condition()
        self.marker = b""
        self.result: tuple[bytes, int] | None = None
        self.buffer = HeadTail(limit)
        threading.Thread(target=self.pump, daemon=True).start()
        # the kernel's own streams live as long as the kernel: no context manager can own them
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)  # noqa: SIM115

    def pump(self) -> None:
        """Drain the pipe forever; at the marker, hand the cell's output to the waiting kernel."""
        pending = b""
        while chunk := os.read(self.read_fd, 1 << 16):
            with self.done:
                data = pending + chunk
                if self.marker and self.marker in data:
                    before, _, after = data.partition(self.marker)
                    self.buffer.add(before)
                    self.result = self.buffer.render()
                    self.marker, pending = b"", b""
                    self.buffer = HeadTail(self.limit)
                    self.buffer.add(after)
                    self.done.notify_all()
                    continue
                keep = len(self.marker) - 1 if self.marker else 0  # a marker may be split across reads
                pending = data[len(data) - keep:] if keep else b""
                self.buffer.add(data[:len(data) - keep] if keep else data)

    def finish_cell(self, timeout_s: float = 10.0) -> tuple[str, int]:
        """Mark the end of the cell's output and wait until the pump has read up to it."""
        sys.stdout.flush()
        sys.stderr.flush()
        marker = f"\x00agentrl-end-{os.urandom(8).hex()}\x00".encode()
        with self.done:
            self.marker, self.result = marker, None
        os.write(1, marker)
        with self.done:
            self.done.wait_for(lambda: self.result is not None, timeout_s)
            output, cut = self.result or (b"[output lost: the capture did not finish]", 0)
        return output.decode("utf-8", "replace"), cut


def compile_cell(code: str) -> tuple[object, object | None]:
    """Compile a cell; a trailing expression is compiled apart so that its value can be shown."""
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, "<cell>", "exec")
    return body, (compile(last, "<cell>", "eval") if last is not None else None)


def on_alarm(signum: int, frame: object) -> None:
    """Interval-timer handler: abort the running cell."""
    raise CellTimeout()


def classify(exc: BaseException) -> str | None:
    """Map an exception to the limit it signals, if any."""
    if isinstance(exc, CellTimeout):
        return "timeout"
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
        return "pids"
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        return "disk"
    return None


def format_user_traceback(exc: BaseException) -> str:
    """The traceback without the kernel's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def kill_other_processes(budget_s: float = 1.0) -> None:
    """Kill every process this user may signal except the kernel itself, and reap its own children.

    Repeated until none of this user's is left (:func:`other_processes`), because a fork bomb may fork between two
    rounds. ``kill(-1)``'s status cannot end the loop: on Docker root's processes make it succeed every round.
    """
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not reap_children() and not other_processes():
            return
        time.sleep(0.01)


def wipe(folders: list[str]) -> None:
    """Leave ``folders`` (the sandbox's writable mounts) empty, or exit when they cannot be emptied.

    Run by a kernel started as the sandbox's user before it serves (Docker: after root killed every process of
    that user, so nothing can refill them), and only there: other processes of the user are killed first all the
    same, which on the local backend would be the host user's. Folders the code made read-only are made writable
    first (``chmod -R u+rwx``, which leaves symbolic links' targets alone), or their contents would outlive the
    episode; ``find -delete`` empties trees of any depth.
    """
    kill_every_other_process()
    if not any(os.listdir(folder) for folder in folders):
        return
    import subprocess  # only here: every kernel start (bwrap's too) would pay for the import

    script = 'chmod -R u+rwx "$@" 2>/dev/null; find "$@" -mindepth 1 -delete'
    subprocess.run(["sh", "-c", script, "wipe", *folders], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   check=False)  # stderr is the host's: it reads why a kernel did not start
    left = {folder: sorted(os.listdir(folder))[:5] for folder in folders if os.listdir(folder)}
    if left:
        sys.exit(f"agentrl kernel: could not empty {left}")


def kill_every_other_process(attempts: int = 10) -> None:
    """Kill every process of this user but this one until none is left; exit when some survive."""
    for _ in range(attempts):
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not other_processes():
            return
        time.sleep(0.05)
    sys.exit(f"agentrl kernel: processes of its user survive: {other_processes()}")


def other_processes() -> list[int]:
    """Pids of the processes of this user but this one and init (which ``kill(-1)`` spares: bwrap's, of this
    user), from the owners of ``/proc/<pid>``: ``kill(-1)``'s status cannot tell, as it succeeds while any process
    but init exists, even one it may not signal (root's)."""
    others = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, os.getpid()):
            with contextlib.suppress(OSError):  # gone in the meantime
                if os.stat(f"/proc/{name}").st_uid == os.getuid():
                    others.append(int(name))
    return others


def reap_children() -> bool:
    """Reap every child that has exited; True while some child is still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


class Kernel:
    """The request loop and the persistent namespace."""

    def __init__(self, config: dict, capture: OutputCapture) -> None:
        self.config = config
        self.capture = capture
        self.pid = os.getpid()
        self.namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}

    def run_cell(self, code: str, timeout_s: float) -> dict:
        """Execute one cell and describe what happened."""
        error: BaseException | None = None
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            body, last = compile_cell(code)
            exec(body, self.namespace)
            if last is not None:
                value = eval(last, self.namespace)
                if value is not None:
                    print(repr(value))
        except BaseException as exc:  # the cell's exception is the result, whatever it is
            error = exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if os.getpid() != self.pid:  # a fork of the kernel returned here: it must not serve
            os._exit(0)
        return self.describe(error)

    def describe(self, error: BaseException | None) -> dict:
        """Build the reply for a finished cell."""
        limit = classify(error) if error is not None else None
        if error is not None and not isinstance(error, CellTimeout):
            sys.stderr.write(format_user_traceback(error))
        if limit in ("pids", "timeout") and self.config.get("may_kill_all"):
            kill_other_processes()  # a runaway cell takes its background processes with it
        output, cut = self.capture.finish_cell()
        if limit is None and cut:
            limit = "output"
        return {"ok": error is None, "output": output, "limit": limit, "truncated_bytes": cut}

    def resolve(self, relative: str) -> Path:
        """A path inside the work directory (the host is trusted; this guards mistakes)."""
        root = Path(self.config["workdir"]).resolve()
        path = (root / relative).resolve()
        if root != path and root not in path.parents:
            raise ValueError(f"expected a path inside {root}, got {relative!r}")
        return path

    def handle(self, request: dict) -> dict:
        """Dispatch one request."""
        op = request.get("op")
        if op == "exec":
            return self.run_cell(request["code"], float(request["timeout_s"]))
        if op == "write":
            path = self.resolve(request["path"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(request["data_b64"]))
            return {"ok": True}
        if op == "read":
            with open(self.resolve(request["path"]), "rb") as handle:
                data = handle.read(int(request["max_bytes"]))
            return {"ok": True, "data_b64": base64.b64encode(data).decode()}
        if op == "ping":
            return {"ok": True}
        return {"ok": False, "error": f"expected op exec|write|read|ping, got {op!r}"}

    def serve(self, proto_in: object, proto_out: object) -> None:
        """Answer requests until the host closes the stream."""
        self.reply(proto_out, {"ok": True, "pid": self.pid, "python": sys.version.split()[0]})
        for line in proto_in:
            try:
                reply = self.handle(json.loads(line))
            except (OSError, ValueError, KeyError) as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            self.reply(proto_out, reply)

    @staticmethod
    def reply(proto_out: object, payload: dict) -> None:
        """Write one reply line."""
        proto_out.write(json.dumps(payload).encode() + b"\n")
        proto_out.flush()


def main() -> None:
    """Entry point: ``python3 -c KERNEL_SOURCE CONFIG_JSON``."""
    config = json.loads(sys.argv[1])
    if config.get("wipe"):  # Docker's; a bwrap namespace's mounts start empty, the local backend wipes itself
        wipe(config["wipe"])
    os.environ.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    os.chdir(config["workdir"])
    apply_rlimits(config)
    signal.signal(signal.SIGALRM, on_alarm)
    proto_in, proto_out = open_protocol()
    Kernel(config, OutputCapture(config["output_bytes"])).serve(proto_in, proto_out)


if __name__ == "__main__":
    main()

KERNEL_SOURCE = Path(__file__).read_text(encoding="utf-8") if "__file__" in globals() else ""
"""This module's source, sent to the sandbox as ``python3 -c`` code."""
