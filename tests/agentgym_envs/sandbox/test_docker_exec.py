"""The Docker exec transport (:mod:`agentgym_envs.sandbox.docker_exec`): the stream's frames, a start that fails
saying why, a request that times out, a kill that ends the exec, and the CLI kept for daemons not on a unix socket."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agentgym_envs.sandbox import SandboxLimits
from agentgym_envs.sandbox import docker as docker_module
from agentgym_envs.sandbox.docker import SANDBOX_USER, DockerSandbox
from agentgym_envs.sandbox.docker_exec import DockerExecTransport, demultiplex, unix_socket_path
from agentgym_envs.sandbox.kernel_client import KernelChannel, KernelDied, KernelProcess, KernelTimeout


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


STREAM = frame(1, b'{"ok": true}\n') + frame(2, b"warning\n") + frame(1, b'{"ok"') + frame(3, b"daemon error")

DEMULTIPLEX_CASES = {
    # frames of both streams, in order; stream 3 (the daemon's own errors) counts as stderr
    "whole-stream": (STREAM, (b'{"ok": true}\n{"ok"', b"warning\ndaemon error", b"")),
    # a header cut short is kept for the next read
    "cut-in-a-header": (STREAM + frame(1, b"next")[:5], (b'{"ok": true}\n{"ok"', b"warning\ndaemon error",
                                                         frame(1, b"next")[:5])),
    # a payload cut short too, with its header
    "cut-in-a-payload": (frame(1, b"abc") + frame(1, b"defgh")[:10], (b"abc", b"", frame(1, b"defgh")[:10])),
    # an empty frame carries nothing
    "empty-frame": (frame(1, b"") + frame(2, b""), (b"", b"", b"")),
    # nothing yet
    "nothing": (b"", (b"", b"", b"")),
}


@pytest.mark.parametrize(("raw", "expected"), DEMULTIPLEX_CASES.values(), ids=DEMULTIPLEX_CASES.keys())
def test_demultiplex_splits_stdout_stderr_and_an_unfinished_frame(raw: bytes, expected: tuple[bytes, bytes, bytes]):
    assert demultiplex(raw) == expected


def test_demultiplex_byte_by_byte_gives_the_whole_stream():
    stdout, stderr, rest = b"", b"", b""
    for byte in STREAM:
        out, err, rest = demultiplex(rest + bytes([byte]))
        stdout, stderr = stdout + out, stderr + err
    assert (stdout, stderr, rest) == (b'{"ok": true}\n{"ok"', b"warning\ndaemon error", b"")


# --------------------------------------------------------------------------------------------- on a daemon


@pytest.fixture
def sandbox(docker_backend: str, sandbox_limits: SandboxLimits) -> Iterator[DockerSandbox]:
    box = DockerSandbox(sandbox_limits)
    yield box
    box.close()


def exec_channel(sandbox: DockerSandbox, code: str, user: str = SANDBOX_USER) -> KernelChannel:
    """``python3 -c code`` started in the sandbox's container over an exec socket."""
    api = sandbox._client.api
    return KernelChannel(DockerExecTransport(api, unix_socket_path(api), sandbox.container.id,
                                             ["python3", "-c", code], user=user, workdir="/tmp"))


def processes_running(sandbox: DockerSandbox, marker: str) -> list[str]:
    top = sandbox.container.top(ps_args="-o pid,args")
    args = top["Titles"].index("COMMAND")
    return [row[args] for row in top["Processes"] if marker in row[args]]


def started_marked_channel(sandbox: DockerSandbox, marker: str, body: str) -> KernelChannel:
    """A channel to a process that says it is ready, then runs ``body``; ``marker`` names it in the process list."""
    channel = exec_channel(sandbox, f"# {marker}\nimport sys, time\nprint('{{}}', flush=True)\n{body}")
    assert channel.wait_ready(30) == {}
    assert processes_running(sandbox, marker)
    return channel


ECHO = "import sys\nprint('{\"ok\": true}', flush=True)\nfor line in sys.stdin:\n    print(line, end='', flush=True)"
"""A stand-in kernel: a hello, then every request line back as its reply, until its stdin ends."""


@pytest.mark.docker
def test_requests_and_replies_over_the_socket(sandbox: DockerSandbox):
    channel = exec_channel(sandbox, ECHO)
    assert channel.wait_ready(30) == {"ok": True}
    big = "x" * 300_000  # several frames each way
    assert channel.request({"op": "echo", "data": big}, timeout_s=30) == {"op": "echo", "data": big}
    assert channel.alive()
    channel.kill()


@pytest.mark.docker
def test_a_start_that_fails_reports_its_stderr_and_exit_code(sandbox: DockerSandbox):
    channel = exec_channel(sandbox, "import sys\nsys.stderr.write('cannot start: reason given')\nsys.exit(5)")

    with pytest.raises(KernelDied, match=r"exit code 5.*cannot start: reason given") as died:
        channel.wait_ready(30)

    assert died.value.returncode == 5 and not channel.alive()
    assert "cannot start: reason given" in channel.stderr_tail()


@pytest.mark.docker
def test_a_start_the_daemon_refuses_reports_the_daemons_answer(sandbox: DockerSandbox):
    # the root helper's exec, started with the sandbox, must be running first: a pause while runc is still starting
    # an exec leaves runc frozen in the container's cgroup and the daemon stuck on the container until it is thawed
    assert sandbox._killer_kills()
    sandbox.container.pause()
    try:
        channel = exec_channel(sandbox, ECHO)
        with pytest.raises(KernelDied, match="paused") as died:
            channel.wait_ready(30)
    finally:
        sandbox.container.unpause()
    assert died.value.returncode is None and not channel.alive()
    with pytest.raises(KernelDied):  # a request to it is a death, not a hang
        channel.request({"op": "ping"}, timeout_s=30)


@pytest.mark.docker
def test_a_silent_process_times_out_and_kill_ends_the_exec(sandbox: DockerSandbox):
    marker = "silent-kernel-marker"
    channel = started_marked_channel(sandbox, marker, "sys.stdin.readline()\ntime.sleep(3600)")
    started = time.monotonic()

    with pytest.raises(KernelTimeout):
        channel.request({"op": "ping"}, timeout_s=0.5)

    assert 0.5 <= time.monotonic() - started < 5 and channel.alive()
    assert processes_running(sandbox, marker)
    channel.kill()
    assert not channel.alive()
    with pytest.raises(KernelDied):
        channel.request({"op": "ping"}, timeout_s=1)


@pytest.mark.docker
def test_kill_closes_the_stdin_so_the_process_ends(sandbox: DockerSandbox):
    marker = "reads-until-eof-marker"
    channel = started_marked_channel(sandbox, marker, "sys.stdin.read()\ntime.sleep(0.2)")

    channel.kill()

    deadline = time.monotonic() + 10
    while processes_running(sandbox, marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_running(sandbox, marker)
    assert sandbox._client.api.exec_inspect(channel.transport.exec_id)["ExitCode"] == 0


@pytest.mark.docker
def test_the_sandbox_talks_to_its_kernel_and_helper_over_sockets(sandbox: DockerSandbox):
    assert sandbox.run_code("6 * 7").output == "42\n"
    assert isinstance(sandbox._kernel.transport, DockerExecTransport)
    assert isinstance(sandbox._killer.transport, DockerExecTransport)


@pytest.mark.docker
def test_a_daemon_not_on_a_unix_socket_gets_the_cli(docker_backend: str, sandbox_limits: SandboxLimits,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(docker_module, "unix_socket_path", lambda api: None)
    box = DockerSandbox(sandbox_limits)
    try:
        assert box.run_code("6 * 7").output == "42\n"
        assert isinstance(box._kernel, KernelProcess) and isinstance(box._killer, KernelProcess)
        assert box.run_code("import subprocess\nsubprocess.Popen(['sleep', '100'])").ok
        box.reset()
        assert box.run_code("kept").ok is False
    finally:
        box.close()
