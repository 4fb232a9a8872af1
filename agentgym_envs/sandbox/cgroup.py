"""A cgroup per sandbox, for backends that have no container runtime to make one.

Root is exempt from ``RLIMIT_NPROC``, so when the host runs as root the bubblewrap backend caps
processes with the cgroup ``pids`` controller instead (v1 or v2, whichever the host mounts). The
same cgroup (on v2) or a twin in the v1 ``freezer`` hierarchy can be frozen from outside; a frozen
sandbox is an infrastructure fault, something the code inside cannot do to itself (the cgroup
files are not in its namespace).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from itertools import count
from pathlib import Path

CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))
FREEZER_V1_ROOT = Path("/sys/fs/cgroup/freezer")
_names = count()


def pids_controller_root() -> Path | None:
    """The writable directory under which pids cgroups can be made, or None."""
    for root in CGROUP_ROOTS:
        if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
            continue
        controllers = root / "cgroup.subtree_control"
        if root.name == "pids" or (controllers.exists() and "pids" in controllers.read_text().split()):
            return root
    return None


def is_cgroup_v2(directory: Path) -> bool:
    """True when ``directory`` belongs to a cgroup v2 hierarchy (every v2 cgroup has ``cgroup.controllers``)."""
    return (directory / "cgroup.controllers").exists()


def freezer_root(pids_root: Path) -> Path | None:
    """Where a sandbox's freezable cgroup goes, or None when the host cannot freeze one.

    On cgroup v2 every cgroup can be frozen, so it is ``pids_root`` itself; on v1 it is the ``freezer``
    hierarchy when it is mounted and writable.
    """
    if is_cgroup_v2(pids_root):
        return pids_root
    if (FREEZER_V1_ROOT / "cgroup.procs").exists() and os.access(FREEZER_V1_ROOT, os.W_OK):
        return FREEZER_V1_ROOT
    return None


def sweep_cgroups() -> int:
    """Remove the empty cgroups left by agentrl processes that are no longer running.

    Returns:
        How many cgroups were removed.
    """
    pids_root = pids_controller_root()
    roots = {pids_root, freezer_root(pids_root)} - {None} if pids_root is not None else set()
    removed = 0
    for path in (path for root in roots for path in root.glob("agentrl-*-*")):
        owner = int(path.name.split("-")[1])
        if Path(f"/proc/{owner}").exists() or (path / "cgroup.procs").read_text().strip():
            continue
        with contextlib.suppress(OSError):
            path.rmdir()
            removed += 1
    return removed


class SandboxCgroup:
    """The cgroup of one sandbox: caps the processes of everything started through :meth:`wrap`, and can
    be frozen from outside.

    Args:
        root: A directory returned by :func:`pids_controller_root`.
        max_pids: Most processes and threads at once.
        freezer: A directory returned by :func:`freezer_root`, or None when the host cannot freeze.

    Example:
        >>> cgroup = SandboxCgroup(root, 64, freezer=freezer_root(root))   # doctest: +SKIP
        >>> cgroup.freeze(); cgroup.frozen()                               # doctest: +SKIP
        True
    """

    def __init__(self, root: Path, max_pids: int, *, freezer: Path | None = None) -> None:
        name = f"agentrl-{os.getpid()}-{next(_names)}"
        self.path = root / name
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_pids))
        self.freezer_path: Path | None = None
        if freezer is not None:
            self.freezer_path = self.path if freezer == root else freezer / name
            self.freezer_path.mkdir(exist_ok=True)

    @property
    def directories(self) -> list[Path]:
        """The cgroup directories every process of the sandbox is in (one on v2, two on v1 with a freezer)."""
        return [self.path] if self.freezer_path in (None, self.path) else [self.path, self.freezer_path]

    def wrap(self, argv: list[str]) -> list[str]:
        """A command line that joins this cgroup (each of :attr:`directories`) and then runs ``argv``."""
        join = ('for procs; do [ "$procs" = -- ] && break; echo $$ > "$procs" || exit 125; shift; done; '
                'shift; exec "$@"')
        return ["/bin/sh", "-c", join, "sh", *(str(d / "cgroup.procs") for d in self.directories), "--", *argv]

    def freeze(self) -> None:
        """Freeze every process of the sandbox (what an operator or a scheduler does from outside).

        Raises:
            RuntimeError: The host cannot freeze this cgroup (no freezer).
        """
        self._write_freezer(frozen=True)

    def thaw(self) -> None:
        """Let the processes run again; a removed cgroup counts as thawed."""
        with contextlib.suppress(FileNotFoundError):
            self._write_freezer(frozen=False)

    def frozen(self) -> bool:
        """True when the cgroup is frozen or freezing, by itself or through an ancestor."""
        if self.freezer_path is None:
            return False
        try:
            if is_cgroup_v2(self.freezer_path):
                events = (self.freezer_path / "cgroup.events").read_text().split("\n")
                return (self.freezer_path / "cgroup.freeze").read_text().strip() == "1" or "frozen 1" in events
            return (self.freezer_path / "freezer.state").read_text().strip() != "THAWED"
        except FileNotFoundError:  # removed with its sandbox
            return False

    def _write_freezer(self, *, frozen: bool) -> None:
        if self.freezer_path is None:
            raise RuntimeError(f"expected a freezer for cgroup {self.path}, got none (no cgroup v2 and no "
                               f"writable {FREEZER_V1_ROOT})")
        if is_cgroup_v2(self.freezer_path):
            (self.freezer_path / "cgroup.freeze").write_text("1" if frozen else "0")
        else:
            (self.freezer_path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup until it is empty (a frozen v1 cgroup keeps them until thawed)."""
        for _ in range(100):
            pids = (self.path / "cgroup.procs").read_text().split()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)

    def remove(self) -> None:
        """Kill what is left and delete the cgroup (thawed first: a frozen process cannot die)."""
        if self.path.exists():
            self.kill_all()
            self.thaw()
        for directory in reversed(self.directories):
            for _ in range(50):  # a killed process leaves the cgroup once it is reaped: wait a moment
                if not directory.exists():
                    break
                if directory == self.path:
                    self.kill_all()
                with contextlib.suppress(OSError):
                    directory.rmdir()
                    break
                time.sleep(0.02)
