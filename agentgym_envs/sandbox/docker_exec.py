"""A kernel's stream over a Docker exec's socket, reached through the Docker API from this process.

``docker exec -i`` starts the CLI, a Go binary, for every exec: 20 to 40 ms of a kernel's start (104 to 142 ms
with it, 85 to 104 ms without, load 3 to 6 on 2 CPUs). This makes the same exec with two API requests instead:
``POST /containers/{id}/exec`` (docker-py), then ``POST /exec/{id}/start`` on a connection of its own to the
daemon's unix socket, upgraded to a raw stream (``Upgrade: tcp``), as the CLI does. The kernel's stdin is the stream
one way; its stdout and stderr come back the other way multiplexed (no TTY), each chunk behind an 8-byte header: the
stream (1 stdout, 2 stderr), three zero bytes, the payload's length as a big-endian 32-bit number.

The exec is made with ``AttachStdin``, whose end closes the process's stdin: closing the socket ends the kernel at
the end of its request stream, as the connection's end does when a ``docker exec`` client is killed. A kernel that
does not read (a hung cell) is killed by the sandbox's next root kill. The stream ends once the process has ended;
its exit status is then the exec's ``ExitCode`` (``GET /exec/{id}/json``).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Sequence

import docker
import docker.errors
import requests.exceptions

DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
"""What a Docker API call raises when it fails: the SDK's errors, and requests' own when the daemon's
socket is gone (a daemon restart), which the SDK does not wrap."""
FRAME_HEADER = 8
STDERR_STREAMS = (2, 3)
"""Frame types carrying stderr: 2, and 3, the daemon's own error stream (``stdcopy.Systemerr``)."""
STDERR_KEPT = 1 << 16
"""Bytes of the kernel's stderr kept (only the tail is ever reported)."""
RECEIVES_PER_CHECK = 16
"""Most reads :meth:`DockerExecTransport.running` makes to find the stream's end (a kernel writing without end
must not keep it reading)."""


def unix_socket_path(api: docker.APIClient) -> str | None:
    """The path of the daemon's unix socket ``api`` talks to; None for a daemon reached over TCP or SSH."""
    return getattr(api.get_adapter(api.base_url), "socket_path", None)


def demultiplex(raw: bytes) -> tuple[bytes, bytes, bytes]:
    """Split a multiplexed exec stream into (stdout, stderr, the rest): the rest is an incomplete last frame, to be
    completed by what comes next."""
    stdout, stderr, offset = [], [], 0
    while len(raw) - offset >= FRAME_HEADER:
        end = offset + FRAME_HEADER + int.from_bytes(raw[offset + 4:offset + FRAME_HEADER], "big")
        if len(raw) < end:
            break
        (stderr if raw[offset] in STDERR_STREAMS else stdout).append(raw[offset + FRAME_HEADER:end])
        offset = end
    return b"".join(stdout), b"".join(stderr), raw[offset:]


class DockerExecTransport:
    """One process started in a container by a Docker exec, and its socket (a
    :class:`~agentgym_envs.sandbox.kernel_client.KernelTransport`).

    A start the daemon refuses (a container that is paused, stopped or gone, a daemon that does not answer) does
    not raise: the transport has ended at once, with the daemon's answer as its stderr, as a ``docker exec`` that
    failed would have.

    Args:
        api: Low-level client of the daemon (``DockerClient.api``).
        socket_path: The daemon's unix socket (:func:`unix_socket_path`).
        container_id: Container to run in.
        argv: Command to run.
        user: ``uid:gid`` to run as.
        workdir: Working directory; None keeps the container's.
        timeout_s: Longest the start request may wait for the daemon.

    Example:
        >>> transport = DockerExecTransport(client.api, unix_socket_path(client.api), container.id,  # doctest: +SKIP
        ...                                 ["python3", "-c", KERNEL_SOURCE, config], user="65534:65534")
        >>> kernel = KernelChannel(transport)                                                     # doctest: +SKIP
    """

    def __init__(self, api: docker.APIClient, socket_path: str, container_id: str, argv: Sequence[str], *,
                 user: str, workdir: str | None = None, timeout_s: float = 30.0) -> None:
        self._api = api
        self._sock: socket.socket | None = None
        self._poller = select.poll()
        self._raw = b""  # received, not yet split into frames
        self._stdout: list[bytes] = []
        self._stderr = bytearray()
        self._ended = self._closed = False
        self.exec_id: str | None = None
        try:
            self.exec_id = api.exec_create(container_id, list(argv), stdin=True, user=user, workdir=workdir)["Id"]
            self._sock = self._start(socket_path, timeout_s)
        except (OSError, *DOCKER_ERRORS) as exc:  # OSError: the socket (gone, refused, timed out)
            self._fail(f"docker exec: {exc}")
            return
        if self._sock is not None:
            self._poller.register(self._sock.fileno(), select.POLLIN)

    def _start(self, socket_path: str, timeout_s: float) -> socket.socket | None:
        """Start the exec on a connection of its own, upgraded to its stream; None when the daemon refused."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout_s)
            sock.connect(socket_path)
            body = json.dumps({"Detach": False, "Tty": False}).encode()
            sock.sendall(f"POST /v{self._api.api_version}/exec/{self.exec_id}/start HTTP/1.1\r\nHost: docker\r\n"
                         f"Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionError(f"the daemon closed the connection after {head[:200]!r}")
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            status = head.split(b"\r\n", 1)[0]
            if status.split(b" ")[1:2] not in ([b"101"], [b"200"]):  # 200: a daemon that does not upgrade
                self._fail(f"docker exec: the daemon answered {status.decode(errors='replace')}: "
                           f"{self._error_message(sock, head, rest)}")
                sock.close()
                return None
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        self._raw = rest  # the stream's first bytes may have come with the answer's head
        return sock

    @staticmethod
    def _error_message(sock: socket.socket, head: bytes, body: bytes) -> str:
        """The ``message`` of an error answer's JSON body (read to its Content-Length), or its text."""
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                       if line.lower().startswith(b"content-length:")), None)
        while length is not None and len(body) < length and (chunk := sock.recv(length - len(body))):
            body += chunk
        try:
            return str(json.loads(body)["message"])
        except (ValueError, KeyError, TypeError):
            return body.decode("utf-8", "replace").strip()

    def _fail(self, message: str) -> None:
        self._stderr += message.encode()
        self._ended = True

    def write(self, data: bytes) -> None:
        """Send ``data`` to the process's stdin.

        Raises:
            ValueError: The transport was closed.
            OSError: The stream has ended (BrokenPipeError when it never started).
        """
        if self._closed:
            raise ValueError("write to a closed Docker exec stream")
        if self._sock is None:
            raise BrokenPipeError("the Docker exec did not start")
        self._sock.sendall(data)

    def read(self, timeout_s: float) -> bytes | None:
        """What the process wrote to stdout within ``timeout_s`` (b"" when nothing came); None once it ended."""
        if not self._stdout and not self._ended and self._poller.poll(max(timeout_s, 0) * 1000):
            self._receive()
        data, self._stdout = b"".join(self._stdout), []
        if data:
            return data
        return None if self._ended else b""

    def _receive(self) -> None:
        """Read once from the socket and split what came into stdout and stderr; at its end, mark it ended."""
        try:
            chunk = self._sock.recv(1 << 16)
        except OSError:  # reset by the daemon
            chunk = b""
        if not chunk:
            self._ended = True
            return
        stdout, stderr, self._raw = demultiplex(self._raw + chunk)
        if stdout:
            self._stdout.append(stdout)
        if stderr:
            self._stderr += stderr
            del self._stderr[:-STDERR_KEPT]

    def stderr_tail(self, limit: int) -> str:
        """The last ``limit`` bytes of the process's stderr, or of the daemon's refusal ("" once closed)."""
        return self._stderr[-limit:].decode("utf-8", "replace").strip()

    def running(self) -> bool:
        """True until the stream has ended (read without waiting; what came is kept for :meth:`read`)."""
        for _ in range(RECEIVES_PER_CHECK):
            if self._ended or not self._poller.poll(0):
                break
            self._receive()
        return not self._ended

    def wait(self, timeout_s: float) -> int | None:
        """The exec's exit status once its stream has ended and the daemon reports it done; None when that takes
        longer than ``timeout_s``, the exec never started, or the daemon does not say."""
        deadline = time.monotonic() + timeout_s
        while not self._ended:  # read to the end, which brings the rest of stderr
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if self._poller.poll(remaining * 1000):
                self._receive()
        while self.exec_id is not None:
            try:
                state = self._api.exec_inspect(self.exec_id)
            except DOCKER_ERRORS:
                return None
            if not state.get("Running"):
                return state.get("ExitCode")
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
        return None

    def close(self) -> None:
        """Close the stream, which closes the process's stdin; returns at once (no process on the host to wait
        for)."""
        if self._closed:
            return
        self._closed = self._ended = True
        self._stderr = bytearray()
        if self._sock is not None:
            self._poller.unregister(self._sock.fileno())
            with contextlib.suppress(OSError):  # shut down, not only closed: a forked host process holds the socket too
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
