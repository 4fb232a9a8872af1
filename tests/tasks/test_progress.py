"""Progress lines of long first-time work: a start line, one about every ``every_s``, an end line, also on failure."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tasks.progress import reported


def test_a_start_line_heartbeats_and_an_end_line():
    lines: list[str] = []
    with reported("indexing", every_s=0.05, write=lines.append):
        time.sleep(0.28)
    assert lines[0] == "indexing ..." and lines[-1].startswith("indexing: done in 0.")
    beats = lines[1:-1]
    assert 3 <= len(beats) <= 6 and all(line.startswith("indexing: still running, ") for line in beats)


def test_work_that_fails_says_so_and_the_error_goes_on():
    lines: list[str] = []
    with pytest.raises(OSError, match="disk full"), reported("fetching", every_s=10.0, write=lines.append):
        raise OSError("disk full")
    assert lines[0] == "fetching ..." and lines[1].startswith("fetching: failed after ") and len(lines) == 2


def test_lines_reach_a_pipe_at_once_when_stderr_is_not_a_terminal():
    """The start line is readable while the work still runs: flushed, not held in a pipe's buffer."""
    code = ("import time\nfrom tasks.progress import reported\n"
            "with reported('building', every_s=60.0):\n    time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr is not None and child.stderr.readline() == "building ...\n"
    finally:
        child.kill()
        child.wait()
