"""The root helper that kills every process of the sandbox user, kept running in each Docker sandbox.

This file is shipped into the container as the source of ``python3 -I -c`` (see :data:`KILLER_SOURCE`), run as
root by a Docker exec once per container start, so it uses the standard library only. The host talks to it
over the exec's stdin/stdout, one JSON object per line, as it talks to the kernel:

    host → killer   {"op": "kill"}
    killer → host   {"ok": true} once no process of the user is left, else {"ok": false, "left": [pids]}

A reset so needs no ``docker exec`` of its own for the kill (a loaded daemon takes 0.1 to 0.2 s an exec). Only
the host holds the stream; the sandbox user can neither signal nor trace a root process (another user, no
capability), so no process the agent left behind, a ``kill -STOP -1`` loop included, can stop the kill. The helper
forks nothing, so a fork bomb holding every pid of the container cannot stop it either.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

KILL_BUDGET_S = 1.0
"""Longest one kill request keeps killing (a fork bomb may fork between two rounds) before it reports survivors."""


def processes_of(uid: int) -> list[int]:
    """Pids of the processes whose ``/proc/<pid>`` belongs to ``uid`` (zombies not yet reaped included)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
            except OSError:  # gone in the meantime
                continue
    return found


def kill_all(uid: int, budget_s: float = KILL_BUDGET_S) -> list[int]:
    """SIGKILL every process of ``uid`` until none is left or ``budget_s`` ran out; returns those left."""
    deadline = time.monotonic() + budget_s
    while True:
        left = processes_of(uid)
        if not left or time.monotonic() > deadline:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # gone in the meantime
                continue
        time.sleep(0.005)


def main() -> None:
    """Entry point: ``python3 -I -c KILLER_SOURCE UID``; answers until the host closes the stream."""
    uid = int(sys.argv[1])
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "kill":
            left = kill_all(uid)
            reply = {"ok": not left, "left": left[:20]}
        else:
            reply = {"ok": False, "error": f"expected op kill, got {request.get('op')!r}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

KILLER_SOURCE = Path(__file__).read_text(encoding="utf-8") if "__file__" in globals() else ""
"""This module's source, sent to the container as ``python3 -I -c`` code."""
