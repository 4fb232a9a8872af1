"""The Docker sandbox's root helper (:mod:`agentgym_envs.sandbox.killer`): a reset's kill without an exec, the
fallback to a root exec when the helper is gone or silent, a new helper after a container restart, and no kill
at close."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from agentgym_envs.sandbox import SandboxLimits
from agentgym_envs.sandbox import docker as docker_module
from agentgym_envs.sandbox.docker import SANDBOX_USER, DockerSandbox
from agentgym_envs.sandbox.kernel_client import KernelProcess

pytestmark = pytest.mark.docker

NOBODY = SANDBOX_USER.split(":")[0]
LEFTOVERS = ("import subprocess\n"
             "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
             "subprocess.Popen(['sh', '-c', 'sleep 0.2; while :; do kill -STOP -1; sleep 0.02; done'], "
             "start_new_session=True)")
"""What an agent leaves behind: a sleeper, and (from 0.2 s on, once the cell answered) a loop that stops every
process of its user (a kill exec'd as that user, or the next kernel, would be stopped too: only root's gets
through)."""


@pytest.fixture
def sandbox(docker_backend: str, sandbox_limits: SandboxLimits) -> Iterator[DockerSandbox]:
    box = DockerSandbox(sandbox_limits)
    yield box
    box.close()


@pytest.fixture
def kill_execs(sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The root exec fallbacks the sandbox runs (recorded, then run)."""
    calls: list[str] = []
    real = sandbox._exec_status
    monkeypatch.setattr(sandbox, "_exec_status", lambda script, user: (calls.append(script), real(script, user))[1])
    return calls


def processes(sandbox: DockerSandbox) -> list[tuple[str, str]]:
    """(uid, command line) of every process in the container, from ``docker top``."""
    top = sandbox.container.top(ps_args="-o pid,uid,args")
    uid, args = top["Titles"].index("UID"), top["Titles"].index("COMMAND")
    return [(row[uid], row[args]) for row in top["Processes"]]


def helper_host_pids(sandbox: DockerSandbox) -> list[int]:
    """Host pids of the root helpers running in the container."""
    top = sandbox.container.top(ps_args="-o pid,uid,args")
    pid, uid, args = (top["Titles"].index(title) for title in ("PID", "UID", "COMMAND"))
    return [int(row[pid]) for row in top["Processes"] if row[uid] == "0" and "KILLER_SOURCE" in row[args]]


def leave_processes_and_reset(sandbox: DockerSandbox) -> None:
    """Leave :data:`LEFTOVERS`, and reset once the stop loop runs; no process of the user outlives the kill."""
    assert sandbox.run_code(LEFTOVERS).ok
    time.sleep(0.5)
    sandbox._drop_kernel()  # the reset's kill, before a new kernel (which kills its user's processes too) starts
    assert [args for uid, args in processes(sandbox) if uid == NOBODY] == []
    sandbox.reset()


def assert_only_the_kernel_left(sandbox: DockerSandbox) -> None:
    assert sandbox.run_code("6 * 7").output == "42\n"
    nobodys = [args for uid, args in processes(sandbox) if uid == NOBODY]
    assert len(nobodys) == 1 and "KERNEL_SOURCE" in nobodys[0], nobodys


def test_the_helper_kills_what_the_agent_left_without_an_exec(sandbox: DockerSandbox, kill_execs: list[str]):
    for _ in range(2):
        leave_processes_and_reset(sandbox)
        assert_only_the_kernel_left(sandbox)
    assert kill_execs == []  # had the helper left a process, the reset would have fallen back to the exec
    assert len(helper_host_pids(sandbox)) == 1


def test_a_killed_helper_falls_back_to_the_exec_and_is_started_again(sandbox: DockerSandbox,
                                                                      kill_execs: list[str]):
    assert sandbox.run_code("1").ok
    (helper,) = helper_host_pids(sandbox)
    os.kill(helper, signal.SIGKILL)  # as the memory limit's OOM kill would

    leave_processes_and_reset(sandbox)
    assert_only_the_kernel_left(sandbox)
    assert kill_execs == [docker_module.KILL_SCRIPT]

    leave_processes_and_reset(sandbox)  # the new helper kills; no second exec
    assert_only_the_kernel_left(sandbox)
    assert kill_execs == [docker_module.KILL_SCRIPT]


def test_a_helper_that_does_not_answer_falls_back_to_the_exec(sandbox: DockerSandbox, kill_execs: list[str],
                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(docker_module, "KILLER_TIMEOUT_S", 0.5)
    sandbox._stop_killer()
    sandbox._killer = KernelProcess(["sleep", "30"])  # reads nothing, answers nothing

    leave_processes_and_reset(sandbox)
    assert_only_the_kernel_left(sandbox)
    assert kill_execs == [docker_module.KILL_SCRIPT]
    assert len(helper_host_pids(sandbox)) == 1  # a real one again


def test_a_restarted_container_gets_a_new_helper(sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch):
    restarts: list[bool] = []
    restart = sandbox._restart_container
    monkeypatch.setattr(sandbox, "_restart_container", lambda: (restarts.append(True), restart())[1])
    with monkeypatch.context() as failing:  # the helper and the exec both fail: the container is restarted
        failing.setattr(sandbox, "_killer_kills", lambda: False)
        failing.setattr(sandbox, "_exec_status", lambda script, user: 1)
        leave_processes_and_reset(sandbox)
    assert restarts == [True]
    execs: list[str] = []
    monkeypatch.setattr(sandbox, "_exec_status", lambda script, user: execs.append(script))

    leave_processes_and_reset(sandbox)  # the restart killed the helper; a new one kills

    assert_only_the_kernel_left(sandbox)
    assert (restarts, execs) == ([True], [])


def test_close_kills_nothing_before_it_removes_the_container(sandbox: DockerSandbox, kill_execs: list[str],
                                                            monkeypatch: pytest.MonkeyPatch):
    kills: list[bool] = []
    monkeypatch.setattr(sandbox, "_killer_kills", lambda: kills.append(True) or True)
    assert sandbox.run_code("1").ok

    sandbox.close()

    assert (kills, kill_execs) == ([], [])
