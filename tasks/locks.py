"""A lock shared by processes (and threads) around first-time work on the cache: one builds, the others wait.

Two pytest workers, two trainers or two servers that need the same cached thing (a search index, the shop's
store, the tiny model, an SWE environment's tree) at the same time would otherwise both build it and collide
where the finished folder is renamed into place. :func:`file_lock` takes an exclusive ``flock`` on a lock file
next to it; the holder builds, every other caller blocks, then finds the work done.

``flock`` locks belong to an open file description, so two threads of one process that each enter
:func:`file_lock` exclude each other too.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> with file_lock(Path(tempfile.mkdtemp()) / "index.lock"):
    ...     pass  # build the index here, unless another process built it while this one waited
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.progress import PROGRESS_EVERY_S, reported


def lock_path(folder: Path) -> Path:
    """The lock file of ``folder``'s build: ``<folder>.lock``, beside it."""
    return folder.with_name(folder.name + ".lock")


@contextmanager
def file_lock(path: Path, *, waiting: str | None = None, every_s: float = PROGRESS_EVERY_S) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created with its folder if needed) for the ``with`` block.

    Args:
        path: The lock file (see :func:`lock_path`).
        waiting: When given, a caller that finds the lock held says so (:func:`~tasks.progress.reported`: at
            once, then every ``every_s`` seconds while it waits), so that it is not taken for a hung one.
        every_s: Seconds between two lines of ``waiting``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            else:
                with reported(waiting, every_s=every_s):
                    fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


__all__ = ["file_lock", "lock_path"]
