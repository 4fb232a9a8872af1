"""Progress lines for long first-time work (an sdist fetched from PyPI, a search index built), so that it never
runs in silence: a line when it starts, one about every minute while it runs, and one when it ends.

The lines go to stderr and are flushed at once, whether or not it is a terminal (a log file, a CI job and a
notebook see them too). Later runs, which reuse what the first one made, print nothing.

Example:
    >>> import time
    >>> with reported("building the index", write=print):
    ...     time.sleep(0.01)                                                              # doctest: +ELLIPSIS
    building the index ...
    building the index: done in 0.0 s
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PROGRESS_EVERY_S = 60.0
"""Seconds between two progress lines of one piece of work."""


def write_stderr(line: str) -> None:
    """Print ``line`` to stderr and flush it."""
    print(line, file=sys.stderr, flush=True)


@contextmanager
def reported(what: str, *, every_s: float = PROGRESS_EVERY_S,
             write: Callable[[str], None] = write_stderr) -> Iterator[None]:
    """Report the work done inside the ``with`` block: ``"<what> ..."`` at once, ``"<what>: still running,
    N s"`` about every ``every_s`` seconds (from a daemon thread, so a blocking call such as a subprocess needs
    nothing more), and ``"<what>: done in N s"`` or ``"<what>: failed after N s"`` at the end.

    Args:
        what: The work, as the lines name it (``"fetching the sdist of toolz==1.0.0 from PyPI"``).
        every_s: Seconds between two progress lines.
        write: Where the lines go (default: stderr, flushed).
    """
    started = time.monotonic()
    finished = threading.Event()

    def heartbeat() -> None:
        while not finished.wait(every_s):
            write(f"{what}: still running, {time.monotonic() - started:.0f} s")

    write(f"{what} ...")
    thread = threading.Thread(target=heartbeat, name="progress", daemon=True)
    thread.start()
    try:
        yield
    except BaseException:
        finished.set()
        thread.join()
        write(f"{what}: failed after {time.monotonic() - started:.1f} s")
        raise
    finished.set()
    thread.join()
    write(f"{what}: done in {time.monotonic() - started:.1f} s")


__all__ = ["PROGRESS_EVERY_S", "reported", "write_stderr"]
