"""Run a function in a persistent worker process under a wall-clock limit, from any thread.

A verifier fed with agent-written text can run for ever (``(10^{99})!``, ``(x+1)^{9999}``). A
``SIGALRM`` timer cannot bound it: signals reach only the main thread, and even there they wait
until one long C call (a big-integer product) returns. So the call runs in a separate Python
process; when it has not answered within the limit, that process is killed (SIGKILL) and a fresh
one is started for the next call. A worker is reused for every call that finishes in time, so the
cost of one call is a round trip through two pipes, not a process start.

Workers are plain ``python -c`` subprocesses, not :mod:`multiprocessing` children: ``spawn`` and
``forkserver`` import the parent's ``__main__`` module again in every child (a training script's
``import torch``, seconds and hundreds of MB per worker), ``fork`` is unsafe in a process that runs
threads, and :class:`concurrent.futures.ProcessPoolExecutor` cannot kill one worker without breaking
the calls running in the others.

Protocol, one JSON line each way: the worker writes ``{"ready": true}`` once its modules are
imported, then answers each ``{"fn": "module:name", "args": [...], "backstop_s": s}`` with
``{"result": ...}`` or ``{"error": "..."}``. Its real stdout carries only these lines (``print`` in
the called code goes to stderr). The worker also arms ``SIGALRM`` with the default action (end the
process) at ``backstop_s``, so that a worker whose parent died cannot spin for ever.
"""

from __future__ import annotations

import atexit
import importlib
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from numbers import Real
from typing import IO, Any

from rewards.errors import RewardConfigError, VerifierUnavailableError

BACKSTOP_GRACE_S = 10.0
"""The worker ends itself this long after a call's limit, should its parent not have killed it."""

_BOOT = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from rewards.timelimit import serve; serve(sys.argv[2:])"
)


class WorkerTimedOut(Exception):
    """The call ran past its limit; its worker was killed. Raised by :meth:`TimeLimitedWorkers.call`."""


class WorkerDied(Exception):
    """The worker process ended during the call (a crash, or the kernel's OOM killer)."""


class TimeLimitedWorkers:
    """Up to ``max_workers`` persistent worker processes that run calls under a wall-clock limit.

    Safe to share between threads: each call takes an idle worker (or starts one, or waits for one
    when ``max_workers`` are busy) and gives it back when the call finished in time. A pool
    inherited through ``fork`` must not be used in the child; make a new one there.

    Args:
        max_workers: Most workers alive at once (>= 1).
        preload: Modules every worker imports before it says it is ready, so that their import
            time does not count against the first call's limit.
        startup_timeout_s: How long a new worker may take to import ``preload``.

    Raises:
        RewardConfigError: On ``max_workers < 1`` or a bad ``startup_timeout_s``.

    Example:
        >>> workers = TimeLimitedWorkers(max_workers=1, preload=["math"])
        >>> workers.call("math:factorial", [5], timeout_s=5.0)
        120
        >>> workers.close()
    """

    def __init__(self, *, max_workers: int, preload: Sequence[str] = (), startup_timeout_s: float = 120.0) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise RewardConfigError(f"expected max_workers to be an int >= 1, got {max_workers!r}")
        _check_seconds("startup_timeout_s", startup_timeout_s)
        self.max_workers = max_workers
        self.preload = tuple(preload)
        self.startup_timeout_s = float(startup_timeout_s)
        self.pid = os.getpid()
        self._slots = threading.BoundedSemaphore(max_workers)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._alive: set[_Worker] = set()
        atexit.register(self.close)

    def call(self, fn: str, args: Sequence[Any], *, timeout_s: float) -> Any:
        """Run ``fn(*args)`` in a worker and return its result, or stop it after ``timeout_s`` seconds.

        The limit counts from the moment the worker received the call: waiting for a free worker
        and starting one do not count against it.

        Args:
            fn: ``"module:name"`` of a module-level function the worker can import.
            args: JSON-serializable arguments.
            timeout_s: The wall-clock limit of the call.

        Returns:
            The function's JSON-serializable result.

        Raises:
            WorkerTimedOut: When the call ran past ``timeout_s`` (its worker was killed).
            WorkerDied: When the worker process ended during the call.
            RuntimeError: When ``fn`` raised in the worker (the message carries its exception).
            VerifierUnavailableError: When no worker could be started.
        """
        _check_seconds("timeout_s", timeout_s)
        request = {"fn": fn, "args": list(args), "backstop_s": timeout_s + BACKSTOP_GRACE_S}
        with self._slots:
            worker = self._take()
            try:
                reply = worker.ask(request, timeout_s)
            except BaseException:  # timed out, died, or interrupted mid-call: its state is unknown
                self._discard(worker)
                raise
            self._give_back(worker)
        if "error" in reply:
            raise RuntimeError(f"expected a result from {fn} in a worker process, got {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        """End every worker (idle ones get end-of-input, then a kill if they linger)."""
        with self._lock:
            workers, self._idle, self._alive = list(self._alive), [], set()
        for worker in workers:
            worker.stop()

    @property
    def size(self) -> int:
        """How many workers are alive now."""
        with self._lock:
            return len(self._alive)

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        worker = _Worker.start(self.preload, self.startup_timeout_s)
        with self._lock:
            self._alive.add(worker)
        return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._alive:  # not closed meanwhile
                self._idle.append(worker)
                return
        worker.stop()

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._alive.discard(worker)
        worker.kill()


class _Worker:
    """One worker process and the pipes to it."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    @classmethod
    def start(cls, preload: Sequence[str], startup_timeout_s: float) -> _Worker:
        command = [sys.executable, "-c", _BOOT, json.dumps(sys.path), *preload]
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            raise VerifierUnavailableError(f"expected to start a verifier worker process, got {exc!r}") from exc
        worker = cls(process)
        try:
            ready = worker._read_line(startup_timeout_s)
        except (WorkerTimedOut, WorkerDied) as exc:
            worker.kill()
            raise VerifierUnavailableError(
                f"expected a verifier worker to import {list(preload)} within {startup_timeout_s:g} s, "
                f"got {type(exc).__name__} (exit code {process.returncode})"
            ) from exc
        if ready != {"ready": True}:
            worker.kill()
            raise VerifierUnavailableError(f'expected {{"ready": true}} from a new verifier worker, got {ready!r}')
        return worker

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one call and wait for its reply."""
        stdin = _pipe(self.process.stdin)
        try:
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
        except OSError as exc:  # the worker is gone: BrokenPipeError
            raise WorkerDied(f"expected a live worker, got {exc!r}") from exc
        return self._read_line(timeout_s)

    def _read_line(self, timeout_s: float) -> dict[str, Any]:
        stdout = _pipe(self.process.stdout)
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                raise WorkerTimedOut(f"no reply within {timeout_s:g} s")
        line = stdout.readline()
        if not line:
            self.process.wait()
            raise WorkerDied(f"the worker ended with exit code {self.process.returncode}")
        return json.loads(line)

    def kill(self) -> None:
        """SIGKILL the process and reap it."""
        self.process.kill()
        self.process.wait()
        _close_pipes(self.process)

    def stop(self) -> None:
        """Close its input so that it exits; kill it if it has not within a second."""
        _close_pipes(self.process)
        try:
            self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill()


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    if stream is None:  # never: both are always PIPE
        raise RuntimeError("expected a pipe to the worker, got None")
    return stream


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:  # BrokenPipeError flushing into a dead worker: nothing left to close
                continue


def _check_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < math.inf:
        raise RewardConfigError(f"expected {name} to be a positive, finite number of seconds, got {value!r}")


# --------------------------------------------------------------------------------- worker side


def serve(preload: Sequence[str]) -> None:
    """The worker's main loop: import ``preload``, say ready, then answer calls until end of input.

    Runs in the worker process (see the module docstring); never call it in the trainer's process.
    """
    replies = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print in the called code must not corrupt the replies
    for name in preload:
        importlib.import_module(name)
    _send(replies, {"ready": True})
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the backstop ends the process, even mid C call
    for line in sys.stdin.buffer:
        _send(replies, _answer(json.loads(line)))


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    module, _, name = request["fn"].partition(":")
    signal.setitimer(signal.ITIMER_REAL, request["backstop_s"])
    try:
        return {"result": getattr(importlib.import_module(module), name)(*request["args"])}
    except Exception as exc:  # reported to the caller, which raises it there
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _send(stream: IO[bytes], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()
