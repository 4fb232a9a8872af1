"""Who is at fault: what the agent's code does to its own kernel is the agent's outcome, never an infra error.

An infrastructure fault (``SandboxError``) is left out of the loss and of every evaluation rate, so a cell
that could make its own episode one would escape any penalty. Every self-inflicted stop, kill or broken
stream below must come back as ``ok=False`` in the observation, with the kernel restarted and the sandbox
answering the next call, on both real backends. What only the infrastructure can do (pause, kill or remove
the container, a daemon that does not answer, freeze the cgroup) must still raise ``SandboxCrashedError``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from agentgym_envs.errors import SandboxCrashedError
from agentgym_envs.python_sandbox.hidden_tests import RESULTS_FILE, run_hidden_tests
from agentgym_envs.sandbox import KernelSandbox, SandboxLimits
from agentgym_envs.sandbox.cgroup import FREEZER_V1_ROOT, SandboxCgroup, is_cgroup_v2, pids_controller_root

FIND_PROTOCOL = """\
import sys as _sys
_frame = _sys._getframe()
while "proto_out" not in _frame.f_locals:
    _frame = _frame.f_back
REQUESTS, REPLIES = _frame.f_locals["proto_in"].fileno(), _frame.f_locals["proto_out"].fileno()
"""
"""A cell prefix that finds the kernel's protocol descriptors in its own stack, as agent code can."""

STOPPED = ("timeout", "kernel was stopped")
KILLED = ("memory", "killed (SIGKILL)")
EXITED = (None, "exited (exit code")
STREAM = (None, "reply stream was closed or written to")
UNREPORTED = (None, "could not report the cell's result")

SELF_INFLICTED = {
    # the kernel stops itself
    "sigstop-self": (None, "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)", STOPPED),
    # the kernel stops its own process group
    "sigstop-process-group": (None, "import os, signal\nos.killpg(0, signal.SIGSTOP)", STOPPED),
    # a child shell stops its parent, the kernel
    "child-stops-parent": (None, "import subprocess\nsubprocess.run(['sh', '-c', 'kill -STOP $PPID'])", STOPPED),
    # a child stops every process of the user (the kernel included: kill -1 spares only the caller)
    "kill-stop-minus-1": (None, "import subprocess\nsubprocess.run(['sh', '-c', 'kill -STOP -1'])", STOPPED),
    # forked children of the kernel stop everything they can, then exit
    "forks-stop-all": (None, "import os, signal, time\nfor _ in range(4):\n    if os.fork() == 0:\n"
                             "        os.kill(-1, signal.SIGSTOP)\n        os._exit(0)\ntime.sleep(5)", STOPPED),
    # a background process left by an earlier cell stops the kernel during a later one
    "leftover-stops-kernel": ("import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.5; kill -STOP -1'], "
                              "start_new_session=True)", "import time\ntime.sleep(5)", STOPPED),
    # a background loop keeps stopping every process (it must not stop the restarted kernel)
    "leftover-stop-loop": ("import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.5; while :; do "
                           "kill -STOP -1; sleep 0.1; done'], start_new_session=True)", "import time\ntime.sleep(5)",
                           STOPPED),
    # the kernel kills itself
    "sigkill-self": (None, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", KILLED),
    # a background process left by an earlier cell keeps killing everything
    "leftover-kill-loop": ("import subprocess\nsubprocess.Popen(['sh', '-c', 'while :; do sleep 0.5; kill -9 -1; "
                           "done'], start_new_session=True)", "import time\ntime.sleep(5)", KILLED),
    # the kernel terminates itself
    "sigterm-self": (None, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", EXITED),
    # the kernel exits without unwinding (sys.exit is only an exception in the cell)
    "os-exit": (None, "import os\nos._exit(3)", EXITED),
    # the kernel closes its reply stream
    "close-reply-stream": (None, FIND_PROTOCOL + "import os\nos.close(REPLIES)", EXITED),
    # the kernel closes its request stream: the cell ends, the kernel dies reading the next request
    "close-request-stream": (FIND_PROTOCOL + "import os\nos.close(REQUESTS)", "6 * 7", EXITED),
    # the same, but the kernel lingers while exiting, so the next request is written into the closed pipe
    "close-request-stream-and-linger": (FIND_PROTOCOL + "import atexit, os, time\natexit.register(time.sleep, 1.0)\n"
                                        "os.close(REQUESTS)", "6 * 7", EXITED),
    # the cell writes something that is not JSON to the reply stream
    "garble-reply-stream": (None, FIND_PROTOCOL + "import os\nos.write(REPLIES, b'garbage\\n')", STREAM),
    # the cell writes JSON that is not a reply
    "not-a-reply": (None, FIND_PROTOCOL + "import os\nos.write(REPLIES, b'[1, 2]\\n')", STREAM),
    # the cell forges a reply that is not a cell's result
    "forged-incomplete-reply": (None, FIND_PROTOCOL + "import os\nos.write(REPLIES, b'{\"ok\": true}\\n')",
                                UNREPORTED),
    # the cell closes the kernel's stdout and stderr, so the kernel cannot collect the output
    "close-stdout-and-stderr": (None, "import os\nos.close(1)\nos.close(2)", UNREPORTED),
}


def assert_answers_with_state_lost(sandbox: KernelSandbox) -> None:
    """The next call works on a restarted kernel (variables set before are gone)."""
    follow_up = sandbox.run_code("6 * 7")
    assert (follow_up.ok, follow_up.output) == (True, "42\n"), follow_up
    assert "NameError" in sandbox.run_code("kept").output


@pytest.mark.parametrize(("earlier", "cell", "expected"), SELF_INFLICTED.values(), ids=SELF_INFLICTED.keys())
def test_self_inflicted_stop_is_the_agents_outcome(sandbox: KernelSandbox, earlier: str | None, cell: str,
                                                  expected: tuple[str | None, str]):
    assert sandbox.run_code("kept = 'state'").ok
    if earlier is not None:
        assert sandbox.run_code(earlier).ok

    result = sandbox.run_code(cell)  # raises SandboxCrashedError if counted as the infrastructure's

    limit, words = expected
    assert (result.ok, result.limit, result.state_lost) == (False, limit, True), result
    assert words in result.output and "restarted" in result.output, result.output
    assert sandbox.healthy()
    assert_answers_with_state_lost(sandbox)


def test_a_kernel_killed_between_cells_is_reported_not_replaced_unnoticed(sandbox: KernelSandbox):
    # a process left behind kills the kernel after its cell returned: the next cell must say the state is
    # gone, not run on a fresh kernel as if nothing happened (whatever the timing, as close-request-stream)
    assert sandbox.run_code("kept = 'state'").ok
    assert sandbox.run_code("import os, subprocess\nsubprocess.Popen(['sh', '-c', f'sleep 0.2; kill -9 {os.getpid()}'],"
                            " start_new_session=True)").ok
    time.sleep(2.0)

    result = sandbox.run_code("6 * 7")

    assert (result.ok, result.limit, result.state_lost) == (False, "memory", True), result
    assert "killed (SIGKILL)" in result.output and "restarted" in result.output, result.output
    assert_answers_with_state_lost(sandbox)


HARMLESS = {
    # SIGTSTP to an orphaned process group (the kernel's) is discarded by Linux
    "sigtstp-self": "import os, signal\nos.kill(os.getpid(), signal.SIGTSTP)",
    # SIGTSTP from a child to its parent, the kernel: discarded for the same reason
    "child-tstp-parent": "import subprocess\nsubprocess.run(['sh', '-c', 'kill -TSTP $PPID'])",
    # kill(-1) from the kernel itself spares the caller; nothing else runs
    "kernel-kill-stop-minus-1": "import os, signal\ntry:\n    os.kill(-1, signal.SIGSTOP)\n"
                                "except ProcessLookupError:\n    pass",
}


@pytest.mark.parametrize("cell", HARMLESS.values(), ids=HARMLESS.keys())
def test_stop_signals_that_do_not_stop_the_kernel_keep_its_state(sandbox: KernelSandbox, cell: str):
    assert sandbox.run_code("kept = 'state'").ok
    result = sandbox.run_code(cell)
    assert (result.ok, result.state_lost) == (True, False), result
    assert sandbox.run_code("kept").output == "'state'\n"


# --------------------------------------------------------------------------- file requests, hidden tests


LEFTOVER_STOPS_ALL = ("import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; kill -STOP -1'], "
                      "start_new_session=True)")
LEFTOVER_KILLS_ALL = ("import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; kill -9 -1'], "
                      "start_new_session=True)")


def test_read_after_a_leftover_stopped_the_kernel_is_a_missing_file(sandbox: KernelSandbox):
    sandbox.file_timeout_s = 2.0  # a stopped kernel is only found by its silence
    sandbox.write_file("a.txt", b"data")
    assert sandbox.run_code(LEFTOVER_STOPS_ALL).ok
    time.sleep(1.0)

    with pytest.raises(FileNotFoundError, match="restarted with an empty work directory"):
        sandbox.read_file("a.txt")

    assert sandbox.run_code("6 * 7").output == "42\n"


def test_write_after_a_leftover_killed_the_kernel_lands_in_a_fresh_one(sandbox: KernelSandbox):
    assert sandbox.run_code(LEFTOVER_KILLS_ALL).ok
    time.sleep(1.0)

    sandbox.write_file("a.txt", b"data")

    assert sandbox.read_file("a.txt") == b"data"
    assert sandbox.run_code("open('a.txt').read()").output == "'data'\n"


def test_healthy_restarts_a_kernel_a_leftover_stopped(sandbox: KernelSandbox):
    assert sandbox.run_code(LEFTOVER_STOPS_ALL).ok
    time.sleep(1.0)
    assert sandbox.healthy()
    assert sandbox.run_code("6 * 7").output == "42\n"


TWO_TESTS = [{"args": [1], "expected": 2}, {"args": [2], "expected": 4}]

BROKEN_SOLUTIONS = {
    # the solution stops its own process: the harness times out, no results
    "stops-itself": "def double(x):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGSTOP)",
    # the solution leaves a process that stops the kernel, and waits for it (a loaded machine may start the
    # leftover late: returning at once would let the harness finish first and pass, by timing alone)
    "leftover-stops-kernel": "def double(x):\n    import subprocess, time\n    subprocess.Popen(['sh', '-c', "
                             "'while :; do kill -STOP -1; done'], start_new_session=True)\n    time.sleep(30)\n"
                             "    return 2 * x",
    # the solution kills its kernel
    "kills-itself": "def double(x):\n    import os\n    os._exit(0)",
    # the solution makes the harness write bytes that are not UTF-8 into the results file
    "garbles-results": "import json\njson.dump = lambda obj, handle: handle.buffer.write(b'\\xff')\n"
                       "def double(x):\n    return 2 * x",
}


@pytest.mark.parametrize("solution", BROKEN_SOLUTIONS.values(), ids=BROKEN_SOLUTIONS.keys())
def test_hidden_tests_of_a_self_breaking_solution_fail_without_infra_error(sandbox: KernelSandbox, solution: str):
    sandbox.file_timeout_s = 2.0
    evidence = run_hidden_tests(sandbox, f"```python\n{solution}\n```", "double", TWO_TESTS, per_test_timeout_s=1.0)
    assert evidence.results == (False, False)
    assert evidence.error
    assert sandbox.healthy()
    with pytest.raises(FileNotFoundError):  # the next episode's reset starts clean
        sandbox.reset()
        sandbox.read_file(RESULTS_FILE)


# ----------------------------------------------------------------------- real infrastructure faults


@pytest.fixture
def docker_sandbox(docker_backend: str, sandbox_limits: SandboxLimits) -> Iterator[KernelSandbox]:
    """A docker sandbox (skips, or fails under AGENTRL_REQUIRE_BACKENDS, when docker is unavailable)."""
    from agentgym_envs.sandbox.docker import DockerSandbox

    box = DockerSandbox(sandbox_limits)
    try:
        yield box
    finally:
        with contextlib.suppress(docker.errors.APIError):  # a test may have left it paused
            box.container.unpause()
        box.close()


SLEEPS = "import time\ntime.sleep(30)"


@pytest.mark.docker
def test_paused_container_is_an_infrastructure_fault(docker_sandbox: KernelSandbox):
    container = docker_sandbox.container
    assert docker_sandbox.run_code("kept = 1").ok
    pauser = threading.Timer(0.5, container.pause)
    pauser.start()

    with pytest.raises(SandboxCrashedError, match="is paused"):
        docker_sandbox.run_code(SLEEPS, timeout_s=2)
    pauser.join()
    assert not docker_sandbox.healthy()

    container.unpause()
    docker_sandbox.reset()
    assert docker_sandbox.healthy()
    assert docker_sandbox.run_code("6 * 7").output == "42\n"


@pytest.mark.docker
def test_container_removed_mid_call_is_an_infrastructure_fault(docker_sandbox: KernelSandbox):
    assert docker_sandbox.run_code("1").ok
    remover = threading.Timer(0.5, lambda: docker_sandbox.container.remove(force=True))
    remover.start()

    with pytest.raises(SandboxCrashedError, match=r"container \w+ (is gone|is removing|is exited|was sent)"):
        docker_sandbox.run_code(SLEEPS, timeout_s=10)
    remover.join()
    assert not docker_sandbox.healthy()


UNEMPTIABLE = ("/work", "/tmp", "/dev/shm", "/etc")
"""Folders the kernel is told to empty, one of them on the read-only root: its start fails as if it could not
empty its mounts."""


@pytest.mark.docker
def test_a_kernel_that_cannot_empty_its_mounts_never_serves(docker_sandbox: KernelSandbox,
                                                           monkeypatch: pytest.MonkeyPatch):
    from agentgym_envs.sandbox import docker as docker_module

    restarts = []
    restart = docker_sandbox._restart_container
    monkeypatch.setattr(docker_sandbox, "_restart_container", lambda: (restarts.append(1), restart()))
    monkeypatch.setattr(docker_module, "WIPED_FOLDERS", UNEMPTIABLE)

    with pytest.raises(SandboxCrashedError, match="could not empty"):
        docker_sandbox.reset()
    assert len(restarts) == 1  # the container was restarted once, and the kernel failed again there


@pytest.mark.docker
def test_a_kernel_that_cannot_empty_its_mounts_gets_a_restarted_container(docker_sandbox: KernelSandbox,
                                                                         monkeypatch: pytest.MonkeyPatch):
    from agentgym_envs.sandbox import docker as docker_module

    assert docker_sandbox.run_code("open('/tmp/left.txt', 'w').write('x')\nkept = 1").ok
    restart = docker_sandbox._restart_container

    def restart_then_empty_only_the_mounts() -> None:
        monkeypatch.setattr(docker_module, "WIPED_FOLDERS", ("/work", "/tmp", "/dev/shm"))
        restart()

    monkeypatch.setattr(docker_sandbox, "_restart_container", restart_then_empty_only_the_mounts)
    monkeypatch.setattr(docker_module, "WIPED_FOLDERS", UNEMPTIABLE)

    docker_sandbox.reset()  # not an infrastructure fault: the container was restarted, which emptied the mounts

    listing = docker_sandbox.run_code("import os\nos.listdir('/tmp')")
    assert (listing.ok, listing.output) == (True, "[]\n")
    assert "NameError" in docker_sandbox.run_code("kept").output


@pytest.fixture
def silent_daemon(tmp_path: Path) -> Iterator[docker.DockerClient]:
    """A client whose daemon socket accepts connections and never answers (a hung dockerd)."""
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    client = docker.DockerClient(base_url=f"unix://{path}", timeout=1, version="1.41")  # no version probe
    yield client
    client.close()
    server.close()


@pytest.mark.docker
def test_daemon_that_does_not_answer_is_an_infrastructure_fault(docker_sandbox: KernelSandbox,
                                                                silent_daemon: docker.DockerClient):
    container = docker_sandbox.container
    real = container.client, container.collection
    assert docker_sandbox.run_code("kept = 1").ok  # a kernel is running when the daemon hangs
    container.pause()  # the exec stream hangs, as it does when dockerd hangs
    container.client, container.collection = silent_daemon, silent_daemon.containers
    try:
        with pytest.raises(SandboxCrashedError, match="daemon does not answer"):
            docker_sandbox.run_code("1", timeout_s=1)
    finally:
        container.client, container.collection = real


FREEZERS = [
    pytest.param(FREEZER_V1_ROOT, id="v1-freezer"),  # cgroup v1: a twin cgroup in the freezer hierarchy
    pytest.param(Path("/sys/fs/cgroup/unified"), id="v2-hybrid"),  # v2 mounted beside v1 (hybrid hosts)
    pytest.param(Path("/sys/fs/cgroup"), id="v2"),  # cgroup v2 only: the pids cgroup itself freezes
]


@pytest.fixture(params=FREEZERS)
def cgroup(request: pytest.FixtureRequest) -> Iterator[SandboxCgroup]:
    """A sandbox cgroup frozen through one kind of freezer (skips the kinds this host lacks)."""
    pids_root = pids_controller_root()
    root: Path = request.param
    usable = (root / "cgroup.procs").exists() and os.access(root, os.W_OK)
    if pids_root is None or not usable or (root != FREEZER_V1_ROOT and not is_cgroup_v2(root)):
        pytest.skip(f"no writable pids cgroup or freezer at {root} (needs root)")
    group = SandboxCgroup(pids_root, 16, freezer=root)
    yield group
    group.remove()


def counter_value(path: Path) -> int:
    return int(path.read_text() or 0) if path.exists() else 0


def test_cgroup_freeze_stops_its_processes_and_thaw_resumes_them(cgroup: SandboxCgroup, tmp_path: Path):
    out = tmp_path / "count"
    loop = f"i=0; while :; do i=$((i+1)); echo $i > {out}.new; mv {out}.new {out}; sleep 0.02; done"
    process = subprocess.Popen(cgroup.wrap(["/bin/sh", "-c", loop]))
    try:
        time.sleep(0.3)
        assert counter_value(out) > 0 and not cgroup.frozen()

        cgroup.freeze()
        time.sleep(0.5)  # freezing takes effect asynchronously (on v2, once every process reached a safe point)
        frozen_at = counter_value(out)
        time.sleep(0.3)
        assert cgroup.frozen() and counter_value(out) == frozen_at

        cgroup.thaw()
        time.sleep(0.3)
        assert not cgroup.frozen() and counter_value(out) > frozen_at
        cgroup.freeze()
        cgroup.remove()  # kills and removes a frozen cgroup too
        assert process.wait(timeout=5) != 0 and not any(d.exists() for d in cgroup.directories)
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def bwrap_cgroup_sandbox(backend: str, sandbox_limits: SandboxLimits) -> Iterator[KernelSandbox]:
    """A bwrap sandbox whose cgroup can be frozen (skips unless bwrap runs here as root with a freezer)."""
    from agentgym_envs.sandbox.bwrap import BwrapSandbox

    box = BwrapSandbox(sandbox_limits)
    if box.cgroup is None or box.cgroup.freezer_path is None:
        box.close()
        pytest.skip("the bwrap sandbox has no freezable cgroup here (needs root and a freezer)")
    try:
        yield box
    finally:
        box.cgroup.thaw()
        box.close()


@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=pytest.mark.bwrap)], indirect=True)
def test_frozen_cgroup_is_an_infrastructure_fault(bwrap_cgroup_sandbox: KernelSandbox):
    sandbox = bwrap_cgroup_sandbox
    assert sandbox.run_code("kept = 1").ok
    freezer = threading.Timer(0.5, sandbox.cgroup.freeze)
    freezer.start()

    with pytest.raises(SandboxCrashedError, match="is frozen from outside"):
        sandbox.run_code(SLEEPS, timeout_s=2)
    freezer.join()
    assert not sandbox.healthy()
    with pytest.raises(SandboxCrashedError, match="is frozen from outside"):
        sandbox.reset()

    sandbox.cgroup.thaw()
    sandbox.reset()
    assert sandbox.healthy()
    assert sandbox.run_code("6 * 7").output == "42\n"
