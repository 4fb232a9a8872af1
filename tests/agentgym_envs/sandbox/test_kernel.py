"""The kernel's pure parts, the local backend, and the sandbox factory's argument checks.

These need no Docker and no bubblewrap, so they run everywhere.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.sandbox import SandboxLimits, kernel, open_sandbox
from agentgym_envs.sandbox.kernel import CellTimeout, HeadTail, classify, compile_cell
from agentgym_envs.sandbox.local import UnsafeSandboxWarning

# ---------------------------------------------------------------------------------------- factory


def test_misspelled_backend_suggests_the_close_match():
    with pytest.raises(EnvConfigError, match=r"expected one of docker, bwrap, local, got 'dockr'; "
                                             r"did you mean 'docker'\?"):
        open_sandbox("dockr")


def test_unknown_backend_without_close_match_lists_the_choices():
    with pytest.raises(EnvConfigError) as raised:
        open_sandbox("firecracker")
    assert "expected one of docker, bwrap, local, got 'firecracker'" in str(raised.value)
    assert "did you mean" not in str(raised.value)


def test_image_only_applies_to_docker():
    expected = "image='x' only applies to sandbox='docker', got sandbox='bwrap'"
    with pytest.raises(EnvConfigError, match=expected):
        open_sandbox("bwrap", image="x")


# ----------------------------------------------------------------------------------------- limits


LIMIT_ERRORS = [
    ({"timeout_s": 0}, "SandboxLimits.timeout_s: expected > 0, got 0"),
    ({"memory_mb": 64}, "SandboxLimits.memory_mb: expected >= 128, got 64"),
    ({"pids": 2}, "SandboxLimits.pids: expected >= 8, got 2"),
    ({"cpus": -1.0}, "SandboxLimits.cpus: expected > 0, got -1.0"),
    ({"output_bytes": 10}, "SandboxLimits.output_bytes: expected >= 256, got 10"),
    ({"disk_mb": 0}, "SandboxLimits.disk_mb: expected >= 1, got 0"),
]


@pytest.mark.parametrize(("kwargs", "message"), LIMIT_ERRORS, ids=[next(iter(k)) for k, _ in LIMIT_ERRORS])
def test_limit_validation_says_expected_and_got(kwargs: dict, message: str):
    with pytest.raises(EnvConfigError) as raised:
        SandboxLimits(**kwargs)
    assert str(raised.value) == message
    assert isinstance(raised.value, ValueError)  # EnvConfigError is also a ValueError


def test_limits_at_their_minimums_are_accepted():
    limits = SandboxLimits(timeout_s=0.1, memory_mb=128, pids=8, cpus=0.1, output_bytes=256, disk_mb=1)
    assert (limits.memory_mb, limits.pids) == (128, 8)


# ------------------------------------------------------------------------------------ kernel parts


def test_compile_cell_splits_off_a_trailing_expression():
    body, last = compile_cell("x = 2\nx * 21")
    namespace: dict = {}
    exec(body, namespace)
    assert eval(last, namespace) == 42


def test_compile_cell_without_trailing_expression_has_nothing_to_show():
    _, last = compile_cell("x = 1\nif x:\n    x")
    assert last is None


CLASSIFIED = [
    (CellTimeout(), "timeout"),                                  # the kernel's own timer
    (MemoryError(), "memory"),                                   # RLIMIT_AS
    (OSError(errno.EAGAIN, "fork"), "pids"),                     # fork or clone refused
    (OSError(errno.ENOSPC, "full"), "disk"),                     # tmpfs full
    (OSError(errno.EFBIG, "big"), "disk"),                       # RLIMIT_FSIZE
    (OSError(errno.ENOENT, "missing"), None),                    # an ordinary error
    (ValueError("x"), None),                                     # the agent's own mistake
]


@pytest.mark.parametrize(("exc", "limit"), CLASSIFIED, ids=[repr(e) for e, _ in CLASSIFIED])
def test_classify_maps_exceptions_to_limits(exc: BaseException, limit: str | None):
    assert classify(exc) == limit


def test_head_tail_keeps_head_and_tail_and_counts_the_cut():
    capture = HeadTail(512)
    for chunk in (b"H" * 600, b"T" * 100, b"T" * 500):  # chunk boundaries do not matter
        capture.add(chunk)
    output, cut = capture.render()
    output = output.decode()
    assert cut == 1200 - 512
    assert output.startswith("H" * 256) and output.endswith("T" * 256)
    assert f"[{cut} bytes of output cut]" in output


def test_head_tail_under_the_limit_is_untouched():
    capture = HeadTail(512)
    capture.add(b"hel")
    capture.add(b"lo\n" + b"x" * 500)
    assert capture.render() == (b"hello\n" + b"x" * 500, 0)


def fill(folder: Path, outside: Path) -> None:
    """What an agent leaves in a mount: nested files, a folder made read-only, a link to a file outside."""
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "b" / "deep.txt").write_text("x")
    (folder / "a" / "top.txt").write_text("x")
    (folder / "a").chmod(0o500)
    (folder / "link").symlink_to(outside)


@pytest.fixture
def no_kill(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """``kernel.kill_every_other_process`` recorded, not run: on the host it would kill every process of the user."""
    calls: list[bool] = []
    monkeypatch.setattr(kernel, "kill_every_other_process", lambda: calls.append(True))
    return calls


def test_wipe_kills_then_empties_read_only_folders_and_leaves_link_targets(tmp_path: Path, no_kill: list[bool]):
    work, temp, outside = tmp_path / "work", tmp_path / "tmp", tmp_path / "outside.txt"
    work.mkdir()
    temp.mkdir()
    outside.write_text("kept")
    outside.chmod(0o400)
    fill(work, outside)
    (temp / "t.txt").write_text("x")

    kernel.wipe([str(work), str(temp)])

    assert no_kill == [True]
    assert (os.listdir(work), os.listdir(temp)) == ([], [])
    assert (outside.read_text(), outside.stat().st_mode & 0o777) == ("kept", 0o400)  # the link's target untouched


def test_wipe_exits_saying_what_it_could_not_empty(tmp_path: Path, no_kill: list[bool],
                                                   monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "stuck.txt").write_text("x")
    monkeypatch.setattr("subprocess.run", lambda *args, **kwargs: None)  # a find that deletes nothing

    with pytest.raises(SystemExit, match=r"could not empty .*stuck\.txt"):
        kernel.wipe([str(tmp_path)])


# ------------------------------------------------------------------------------------ local backend


def test_local_backend_warns_and_runs_code():
    with pytest.warns(UnsafeSandboxWarning, match="no isolation"):
        sandbox = open_sandbox("local", SandboxLimits(timeout_s=5))
    try:
        assert sandbox.backend == "local"
        assert sandbox.run_code("x = 6 * 7").ok
        assert sandbox.run_code("x").output == "42\n"  # state persists
        sandbox.write_file("a.txt", b"data")
        assert sandbox.run_code("open('a.txt').read()").output == "'data'\n"
        sandbox.reset()
        assert "NameError" in sandbox.run_code("x").output
    finally:
        sandbox.close()


def test_local_backend_reports_a_timeout():
    with pytest.warns(UnsafeSandboxWarning):
        sandbox = open_sandbox("local", SandboxLimits(timeout_s=5))
    try:
        result = sandbox.run_code("while True:\n    pass", timeout_s=0.5)
        assert (result.ok, result.limit) == (False, "timeout")
        assert sandbox.run_code("1 + 1").output == "2\n"
    finally:
        sandbox.close()


def test_local_close_removes_its_work_directory():
    with pytest.warns(UnsafeSandboxWarning):
        sandbox = open_sandbox("local")
    sandbox.run_code("open('f', 'w').write('x')")
    workdir = Path(sandbox.run_code("import os\nprint(os.getcwd())").output.strip())
    assert workdir.is_dir()
    sandbox.close()
    assert not workdir.exists()
