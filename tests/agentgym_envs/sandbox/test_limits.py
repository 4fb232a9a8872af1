"""Every limit and isolation promise of the sandbox, checked on each real backend (docker, bwrap).

Each limit test asserts two things: the observation says clearly what happened (``ExecResult.limit``
and words in ``.output``), and the sandbox is usable for the next tool call (with its state kept
whenever the kernel survived).
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentgym_envs.sandbox import KernelSandbox, SandboxLimits
from agentgym_envs.sandbox.base import ExecResult

LIST_PROCESSES = """\
import json as _json, os as _os
def _agentrl_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\\0", b" ").decode(errors="replace")[:40]
    except OSError:
        return None
_agentrl_found = [_agentrl_cmdline(p) for p in _os.listdir("/proc") if p.isdigit()]
print("\\nPROCESSES=" + _json.dumps([c for c in _agentrl_found if c is not None]))
"""
"""A cell that prints the (cut) command line of every process in the sandbox; zombies show as ''."""


def processes_inside(sandbox: KernelSandbox) -> list[str]:
    """The command lines of every process the sandbox's /proc shows (kernel included).

    Background processes may write into the same output (a dying fork bomb's shells print errors), even
    onto the same line, so the list is found by its prefix and read as the first JSON value after it.
    """
    result = sandbox.run_code(LIST_PROCESSES)
    assert result.ok, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("PROCESSES="))
    listed, _ = json.JSONDecoder().raw_decode(line.removeprefix("PROCESSES="))
    return listed


def host_pids_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (a /proc scan, no psutil)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


def eventually(check: Callable[[], bool], timeout_s: float = 3.0) -> bool:
    """Poll ``check`` until it holds or ``timeout_s`` passes (zombies take a moment to be reaped)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


FORK_FAILURE = re.compile(r"^(sh: \d+: )*Cannot fork$|fork: retry|Resource temporarily unavailable")


def own_output(result: ExecResult) -> str:
    """A cell's output without the last words of a dying fork bomb's shells, which write into the shared
    output after their cell has ended and so may reach the next cell."""
    return "".join(line for line in result.output.splitlines(keepends=True) if not FORK_FAILURE.search(line))


def assert_usable(sandbox: KernelSandbox, *, state_kept: bool) -> None:
    """The next tool call works, and ``kept`` (set before the limit) survived or not."""
    follow_up = sandbox.run_code("6 * 7")
    assert follow_up.ok and own_output(follow_up) == "42\n", follow_up
    kept = sandbox.run_code("kept")
    if state_kept:
        assert own_output(kept) == "'state'\n", f"state lost although the kernel survived: {kept}"
    else:
        assert "NameError" in kept.output, kept


def assert_no_stray_processes(sandbox: KernelSandbox, baseline: list[str]) -> None:
    """The sandbox holds as many processes as before the test's code ran, and can start a new one."""
    current: list[str] = []
    quiet_polls = 0

    def settled_at_baseline() -> bool:
        # One listing can miss a fork bomb: the processes it lists may die before their command lines are
        # read while new ones are born, so the sandbox counts as settled after several quiet listings in a row.
        nonlocal quiet_polls
        current[:] = processes_inside(sandbox)
        quiet_polls = quiet_polls + 1 if len(current) <= len(baseline) else 0
        return quiet_polls >= 4

    assert eventually(settled_at_baseline, timeout_s=6.0), f"stray processes: before {baseline}, after {current}"
    spawned = sandbox.run_code("import subprocess\nsubprocess.run(['true']).returncode")
    assert spawned.ok and own_output(spawned) == "0\n", f"cannot start a process after the limit: {spawned}"


@pytest.fixture
def primed(sandbox: KernelSandbox) -> KernelSandbox:
    """The sandbox with a variable set, to see whether state survives a limit."""
    assert sandbox.run_code("kept = 'state'").ok
    return sandbox


# ------------------------------------------------------------------------------------ wall clock


def test_busy_loop_stops_at_timeout_and_keeps_state(primed: KernelSandbox):
    result = primed.run_code("while True:\n    pass", timeout_s=1)
    assert (result.ok, result.limit, result.state_lost) == (False, "timeout", False)
    assert "TimeoutError" in result.output and "1 s limit" in result.output
    assert 0.9 < result.duration_s < 2.5
    assert_usable(primed, state_kept=True)


def test_timeout_kills_background_processes_without_spending_the_kill_budget(primed: KernelSandbox):
    baseline = processes_inside(primed)
    cell = "import subprocess\nsubprocess.Popen(['sleep', '1000'], start_new_session=True)\nwhile True:\n    pass"
    result = primed.run_code(cell, timeout_s=0.5)
    assert (result.ok, result.limit) == (False, "timeout")
    # the kill loop ends once none is left: on docker root's processes once kept it going for its whole 1 s
    assert result.duration_s < 1.4, result.duration_s
    assert processes_inside(primed) == baseline


SWALLOWS_INTERRUPT = {
    # catches the timer's exception and carries on
    "except-baseexception": "while True:\n    try:\n        while True:\n            pass\n"
                            "    except BaseException:\n        pass",
    # ignores the timer's signal altogether
    "sigalrm-ignored": "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass",
}


@pytest.mark.parametrize("code", SWALLOWS_INTERRUPT.values(), ids=SWALLOWS_INTERRUPT.keys())
def test_code_that_swallows_the_interrupt_is_hard_killed(primed: KernelSandbox, code: str):
    baseline = processes_inside(primed)
    result = primed.run_code(code, timeout_s=1)
    assert (result.ok, result.limit, result.state_lost) == (False, "timeout", True)
    assert "restarted" in result.output and "lost" in result.output, result.output
    assert_usable(primed, state_kept=False)
    assert_no_stray_processes(primed, baseline)


# ---------------------------------------------------------------------------------------- memory


ALLOCATIONS = {
    "bytearray": "blob = bytearray(512 * 1024 * 1024)",
    "list": "blob = [0] * (64 * 1024 * 1024)",
    "bytes-in-loop": "blobs = []\nwhile True:\n    blobs.append(b'x' * (16 * 1024 * 1024))",
}


@pytest.mark.parametrize("code", ALLOCATIONS.values(), ids=ALLOCATIONS.keys())
def test_memory_limit_is_reported_and_state_kept(primed: KernelSandbox, code: str):
    result = primed.run_code(code)
    assert (result.ok, result.limit) == (False, "memory")
    assert "MemoryError" in result.output or "memory limit" in result.output
    assert f"memory limit ({primed.limits.memory_mb} MB)" in result.output
    assert_usable(primed, state_kept=not result.state_lost)


# ------------------------------------------------------------------------------------- processes


FORK_BOMBS = {
    "os-fork": "import os\nwhile True:\n    os.fork()",
    "popen": "import subprocess\nprocs = [subprocess.Popen(['sleep', '100']) for _ in range(200)]",
    # children are forks of the kernel that swallow the error and keep forking
    "fork-swallowing-errors": "import os, time\nwhile True:\n    try:\n        os.fork()\n"
                              "    except OSError:\n        time.sleep(0.01)",
}


@pytest.mark.parametrize("code", FORK_BOMBS.values(), ids=FORK_BOMBS.keys())
def test_fork_bomb_hits_pids_limit_and_leaves_no_process(primed: KernelSandbox, code: str):
    baseline = processes_inside(primed)
    result = primed.run_code(code)
    assert not result.ok
    assert result.limit in ("pids", "timeout"), result
    if result.limit == "pids":
        assert f"process limit ({primed.limits.pids})" in result.output
    assert_no_stray_processes(primed, baseline)
    assert_usable(primed, state_kept=not result.state_lost)


def test_shell_fork_bomb_dies_out(primed: KernelSandbox):
    baseline = processes_inside(primed)
    primed.run_code("import subprocess\nsubprocess.run(['sh', '-c', 'f() { f | f & }; f'])")
    assert_no_stray_processes(primed, baseline)
    assert_usable(primed, state_kept=True)


# ---------------------------------------------------------------------------------------- output


def test_output_past_limit_is_cut_and_says_how_much(primed: KernelSandbox):
    limit = primed.limits.output_bytes
    result = primed.run_code("print('<' + 'a' * 100_000 + '>')")
    assert result.limit == "output"
    assert result.truncated_bytes == 100_003 - 2 * (limit // 2)  # head and tail of limit/2 are kept
    assert f"[{result.truncated_bytes} bytes of output cut]" in result.output
    assert result.output.startswith("<aaa") and result.output.rstrip().endswith("aaa>")
    assert len(result.output.encode()) < limit + 100
    assert_usable(primed, state_kept=True)


def test_endless_print_loop_comes_back_cut_and_next_call_is_clean(primed: KernelSandbox):
    """An agent's ``while True: print(...)`` writes far more than the disk holds."""
    result = primed.run_code("while True:\n    print('x' * 1000)")
    assert not result.ok
    assert result.limit in ("output", "timeout", "disk"), result
    assert len(result.output.encode()) < primed.limits.output_bytes + 300
    follow_up = primed.run_code("kept")
    assert follow_up.output == "'state'\n", f"the last call's output leaked into the next: {follow_up}"


# ------------------------------------------------------------------------------------------ disk


DISK_FILLS = {
    "many-files-in-work": "for i in range(64):\n    with open(f'f{i}', 'wb') as out:\n"
                          "        out.write(b'x' * 1024 * 1024)",
    "one-file-in-work": "with open('big', 'wb') as out:\n    for _ in range(64):\n"
                        "        out.write(b'x' * 1024 * 1024)",
    "tmp": "with open('/tmp/big', 'wb') as out:\n    for _ in range(64):\n"
           "        out.write(b'x' * 1024 * 1024)",
}


@pytest.mark.parametrize("code", DISK_FILLS.values(), ids=DISK_FILLS.keys())
def test_disk_fill_is_reported_and_sandbox_stays_usable(primed: KernelSandbox, code: str):
    result = primed.run_code(code)
    assert (result.ok, result.limit) == (False, "disk")
    assert f"disk limit ({primed.limits.disk_mb} MB)" in result.output
    assert_usable(primed, state_kept=True)


def test_disk_limit_caps_total_bytes_written(primed: KernelSandbox):
    primed.run_code(DISK_FILLS["many-files-in-work"])
    total = primed.run_code("import os\nsum(os.path.getsize(f) for f in os.listdir('.'))")
    assert int(total.output) <= primed.limits.disk_mb * 1024 * 1024


# ------------------------------------------------------------------------------------- isolation


def host_ipv4_addresses() -> list[str]:
    """The host's own IPv4 addresses other than loopback (from /proc/net/fib_trie)."""
    addresses = set()
    lines = Path("/proc/net/fib_trie").read_text().splitlines()
    for previous, line in itertools.pairwise(lines):
        if "/32 host LOCAL" in line:
            address = previous.split()[-1]
            if not address.startswith("127."):
                addresses.add(address)
    return sorted(addresses)


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    """A TCP listener on every host address; the test checks nobody connected."""
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


def test_no_network_egress_to_the_host(sandbox: KernelSandbox, host_listener: socket.socket):
    port = host_listener.getsockname()[1]
    for address in ["127.0.0.1", *host_ipv4_addresses()]:
        result = sandbox.run_code(
            f"import socket\nsocket.create_connection(({address!r}, {port}), timeout=1)\nprint('connected')")
        assert not result.ok and "connected\n" not in result.output, f"{address}: {result.output}"
        assert "Connection refused" in result.output or "unreachable" in result.output, result.output
    with pytest.raises(BlockingIOError):
        host_listener.accept()


def test_only_loopback_interface_exists(sandbox: KernelSandbox):
    result = sandbox.run_code("import socket\nsorted(name for _, name in socket.if_nameindex())")
    assert result.output == "['lo']\n"


@pytest.fixture
def host_secrets(tmp_path: Path) -> Iterator[tuple[str, list[Path]]]:
    """A secret written to a file in the host's /tmp and one in the home directory."""
    secret = f"agentrl-secret-{uuid.uuid4().hex}"
    name = f"agentrl-test-{uuid.uuid4().hex}"  # not the secret: error messages repeat the path
    paths = [tmp_path / "secret.txt", Path("/tmp") / f"{name}.txt", Path.home() / f".{name}"]
    for path in paths:
        path.write_text(secret)
    yield secret, paths
    for path in paths:
        path.unlink(missing_ok=True)


def test_host_files_are_not_readable(sandbox: KernelSandbox, host_secrets: tuple[str, list[Path]]):
    secret, paths = host_secrets
    for path in paths:
        result = sandbox.run_code(f"print(open({str(path)!r}).read())")
        assert not result.ok and secret not in result.output, f"{path} was readable: {result.output}"
        assert "FileNotFoundError" in result.output or "PermissionError" in result.output
    listing = sandbox.run_code("import os\nos.listdir('/tmp')")
    assert secret not in listing.output


def test_system_files_are_readable(sandbox: KernelSandbox):
    result = sandbox.run_code("open('/etc/passwd').read().splitlines()[0].split(':')[0]")
    assert result.output == "'root'\n"


def test_code_runs_as_unprivileged_user(sandbox: KernelSandbox):
    assert sandbox.run_code("import os\nos.getuid()").output == "65534\n"


# ------------------------------------------------------------------------------ episode boundary


def test_reset_kills_background_processes(sandbox: KernelSandbox):
    marker = f"1000.{uuid.uuid4().int % 10**12:012d}"  # `sleep` adds up its arguments; this one is unique
    started = sandbox.run_code(
        f"import subprocess\np = subprocess.Popen(['sleep', '{marker}'], start_new_session=True)")
    assert started.ok, started.output
    # Popen returns when the child is forked; under load it may not have exec'd `sleep` yet
    assert eventually(lambda: any(marker in cmd for cmd in processes_inside(sandbox)))
    assert host_pids_with(marker), "the background process should be visible on the host before reset"

    sandbox.reset()

    assert not any(marker in cmd for cmd in processes_inside(sandbox))
    assert eventually(lambda: not host_pids_with(marker)), f"left on the host: {host_pids_with(marker)}"


def test_close_leaves_no_process_on_the_host(backend: str, sandbox_limits: SandboxLimits):
    from agentgym_envs.sandbox import open_sandbox

    marker = f"1000.{uuid.uuid4().int % 10**12:012d}"
    sandbox = open_sandbox(backend, sandbox_limits)
    try:
        started = sandbox.run_code(f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'])")
        assert started.ok, started.output
        # Popen returns once the child is forked; it shows the marker only after its exec, later under load
        assert eventually(lambda: host_pids_with(marker)), "the process should be visible on the host"
    finally:
        sandbox.close()
    assert eventually(lambda: not host_pids_with(marker)), f"left on the host: {host_pids_with(marker)}"


# --------------------------------------------------------------------------------- notebook state


def test_variables_imports_and_files_persist_across_calls(sandbox: KernelSandbox):
    assert sandbox.run_code("import json as j\ncount = 41\ndef bump(n):\n    return n + 1").ok
    assert sandbox.run_code("with open('notes.txt', 'w') as out:\n    out.write('kept')").ok
    sandbox.write_file("data/in.txt", b"from host")

    assert sandbox.run_code("j.dumps(bump(count))").output == "'42'\n"
    assert sandbox.read_file("notes.txt") == b"kept"
    assert sandbox.run_code("open('data/in.txt').read()").output == "'from host'\n"


def test_reset_clears_variables_imports_and_files(sandbox: KernelSandbox):
    sandbox.run_code("import json as j\ncount = 41\nopen('notes.txt', 'w').write('x')")
    sandbox.write_file("in.txt", b"from host")

    sandbox.reset()

    for name in ("count", "j"):
        assert f"NameError: name '{name}' is not defined" in sandbox.run_code(name).output
    assert sandbox.run_code("import os\nos.listdir('.')").output == "[]\n"
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("notes.txt")


LEFTOVERS = """\
import os, signal, subprocess
os.makedirs('ro/deep')
open('ro/deep/f.txt', 'w').write('x')
for folder in ('ro/deep', 'ro'):
    os.chmod(folder, 0o500)
os.makedirs('/tmp/d')
open('/tmp/d/t.txt', 'w').write('x')
if os.access('/dev/shm', os.W_OK):
    open('/dev/shm/left', 'w').write('x')
subprocess.Popen(['sleep', '{marker}'], start_new_session=True)
os.kill(subprocess.Popen(['sleep', '{marker}'], start_new_session=True).pid, signal.SIGSTOP)
subprocess.Popen(['sh', '-c', ': {marker}; sleep 0.2; while :; do kill -STOP -1; sleep 0.05; done'],
                 start_new_session=True)
"""
"""What an agent may leave at a reset: a folder it made read-only, files in /tmp and /dev/shm, a running process, a
stopped one, and one that keeps stopping every process of the user (the kernel, and whatever the reset runs as that
user)."""


def test_reset_leaves_no_process_and_empty_mounts(sandbox: KernelSandbox):
    marker = f"1000.{uuid.uuid4().int % 10**12:012d}"
    assert sandbox.run_code(LEFTOVERS.format(marker=marker)).ok
    assert eventually(lambda: len(host_pids_with(marker)) == 3), "the leftovers should be running"

    sandbox.reset()

    assert not any(marker in cmd for cmd in processes_inside(sandbox))
    listing = sandbox.run_code("import os\nos.listdir('/work'), os.listdir('/tmp'), 'left' in os.listdir('/dev/shm')")
    assert (listing.ok, listing.output) == (True, "([], [], False)\n")
    assert eventually(lambda: not host_pids_with(marker)), f"left on the host: {host_pids_with(marker)}"


DISPLAYS = {
    "trailing-name": ("x = 6 * 7\nx", "42\n"),             # the trailing expression's repr is shown
    "repr-not-str": ("'text'", "'text'\n"),                # repr, as in a notebook, not str
    "only-the-last": ("1\n2", "2\n"),                      # earlier expressions are not shown
    "none-hidden": ("None", ""),                            # None shows nothing
    "assignment": ("y = 3", ""),                            # a statement shows nothing
    "print-first": ("print('p')\n3", "p\n3\n"),            # printed output comes before the value
    "inside-a-block": ("for i in range(2):\n    i", ""),   # an expression inside a block is not shown
}


@pytest.mark.parametrize(("code", "shown"), DISPLAYS.values(), ids=DISPLAYS.keys())
def test_trailing_expression_is_displayed(sandbox: KernelSandbox, code: str, shown: str):
    result = sandbox.run_code(code)
    assert (result.ok, result.output) == (True, shown)


def test_exception_comes_back_as_traceback_without_kernel_frames(sandbox: KernelSandbox):
    result = sandbox.run_code("def f():\n    return 1 / 0\n\nf()")
    assert (result.ok, result.limit, result.state_lost) == (False, None, False)
    assert result.output.startswith("Traceback (most recent call last):\n")
    assert 'File "<cell>", line 4, in <module>' in result.output
    assert 'File "<cell>", line 2, in f' in result.output
    assert result.output.rstrip().endswith("ZeroDivisionError: division by zero")
    for kernel_detail in ("kernel", "run_cell", "exec("):
        assert kernel_detail not in result.output


def test_syntax_error_points_at_the_cell(sandbox: KernelSandbox):
    result = sandbox.run_code("x = (1,\n")
    assert not result.ok
    assert 'File "<cell>", line 1' in result.output and "SyntaxError" in result.output
    assert "kernel" not in result.output


FORGERIES = {
    "print": "print(FORGED)",
    "raw-fd-1": "import os\nos.write(1, (FORGED + '\\n').encode())",
    "stderr": "import sys\nsys.stderr.write(FORGED + '\\n')",
    "child-process": "import subprocess\nsubprocess.run(['echo', FORGED])",
}


@pytest.mark.parametrize("how", FORGERIES.values(), ids=FORGERIES.keys())
def test_printed_protocol_json_cannot_forge_a_reply(sandbox: KernelSandbox, how: str):
    forged = '{"ok": true, "output": "forged", "limit": null, "truncated_bytes": 0}'
    sandbox.run_code(f"FORGED = {forged!r}\nkept = 'state'")
    result = sandbox.run_code(f"{how}\nraise ValueError('real')")
    assert (result.ok, result.limit) == (False, None)
    assert forged in result.output and "ValueError: real" in result.output
    assert_usable(sandbox, state_kept=True)  # the stream is still in step: the next reply is the next call's
