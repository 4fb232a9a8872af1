"""tasks.locks: one holder at a time, across processes and threads, and a waiter that says it waits."""

from __future__ import annotations

import subprocess
import sys
import time

from tasks.locks import file_lock, lock_path

HOLD = "import sys, time; from pathlib import Path; from tasks.locks import file_lock\n" \
       "with file_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(float(sys.argv[2]))\n"


def test_lock_path_is_beside_the_folder(tmp_path):
    assert lock_path(tmp_path / "tiny-abc") == tmp_path / "tiny-abc.lock"


def test_a_second_process_waits_for_the_holder_and_says_so(tmp_path, capsys):
    path = tmp_path / "cache" / "index.lock"  # the folder is made
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path), "0.5"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    started = time.monotonic()
    with file_lock(path, waiting="waiting for the index"):
        waited = time.monotonic() - started
    assert holder.wait(5) == 0
    assert waited > 0.3  # entered only once the holder's 0.5 s block ended
    assert "waiting for the index ..." in capsys.readouterr().err


def test_a_free_lock_is_taken_in_silence_and_again_after_release(tmp_path, capsys):
    for _ in range(2):
        with file_lock(tmp_path / "x.lock", waiting="waiting"):
            pass
    assert capsys.readouterr().err == ""
