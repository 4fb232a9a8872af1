"""The ``docker`` backend: a persistent kernel in a locked-down container, and a warm pool of them.

Each container runs ``sleep infinity`` as root (out of reach of ``nobody``'s ``kill -1``) under
Docker's init as its main process, with no network,
a read-only root, size-limited tmpfs mounts for ``/work`` and ``/tmp``, every capability dropped
but root's CAP_KILL (``nobody`` holds none), and pids/memory/CPU limits. The kernel is started by a Docker exec as
user ``nobody`` and is then reached over that exec's stream, so a tool call costs a round trip on a socket, not a
new exec. The exec is made through the Docker API from this process (:mod:`~agentgym_envs.sandbox.docker_exec`: two
requests, the second's connection upgraded to the stream) rather than by the ``docker exec -i`` CLI, a Go binary
started per exec: a kernel's start took 142 and 104 ms with the CLI, 104 and 85 ms so (two runs, p50 of 20 each,
alternating, load 3 to 6 on 2 CPUs); a daemon reached over TCP or SSH still gets the CLI. A reset is one exec: a
root helper kept running in the container since it started (:mod:`~agentgym_envs.sandbox.killer`, reached over its
own exec stream like the kernel) kills every process of ``nobody`` (no process of ``nobody`` can stop it), then the
new kernel empties ``/work``, ``/tmp`` and Docker's ``/dev/shm`` before it serves
(:func:`~agentgym_envs.sandbox.kernel.wipe`; what is in them is ``nobody``'s, which root, holding no other
capability, may not touch). When the helper is gone or does not answer, the kill is a root exec of
:data:`KILL_SCRIPT` as before, and the helper is started again. The container itself is reused, unless that kill
fails too (a fork bomb holding every pid leaves no room for the ``exec``) or the kernel cannot empty the mounts:
then it is restarted, and a new helper started in it.
Every container carries :data:`~agentgym_envs.sandbox.labels.SANDBOX_LABEL` so that leftovers can be swept
(``python -m agentgym_envs.sandbox sweep``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import docker
import docker.errors
from docker.models.containers import Container

from agentgym_envs.errors import SandboxCrashedError, SandboxError, SandboxUnavailableError
from agentgym_envs.sandbox.base import SandboxLimits
from agentgym_envs.sandbox.docker_exec import DOCKER_ERRORS, DockerExecTransport, unix_socket_path
from agentgym_envs.sandbox.image import base_image_tag, image_exists
from agentgym_envs.sandbox.kernel import KERNEL_SOURCE
from agentgym_envs.sandbox.kernel_client import (
    KernelChannel,
    KernelDied,
    KernelProcess,
    KernelSandbox,
    KernelTimeout,
)
from agentgym_envs.sandbox.killer import KILLER_SOURCE
from agentgym_envs.sandbox.labels import SANDBOX_LABEL

SANDBOX_USER = "65534:65534"
OWNER_LABEL = "agentrl.owner-pid"
KILL_SCRIPT = (
    'nobody_pids() { for d in /proc/[0-9]*; do [ "$(stat -c %u "$d" 2>/dev/null)" = 65534 ] && echo "${d#/proc/}"; '
    "done; }; "
    'for attempt in 1 2 3 4 5 6 7 8 9 10; do pids=$(nobody_pids); [ -z "$pids" ] && exit 0; kill -9 $pids 2>/dev/null; '
    "sleep 0.05; done; "
    '[ -z "$(nobody_pids)" ]'
)
"""Run as root, whose only capability in the container is CAP_KILL: kill every process of ``nobody`` until
none is left (exit 1 if some survive). No process of ``nobody`` can signal it (another user, and ``nobody``
holds no capability), so a process the agent left behind cannot stop the reset. The processes are found in
``/proc`` with coreutils' ``stat``, not with procps' ``pkill``, which an image the user brings (a SWE-bench
instance image, Ubuntu without procps) may lack: there ``pkill``'s "not found" read as "none left". The fallback
of the root helper (:mod:`~agentgym_envs.sandbox.killer`), which does the same without an exec of its own."""
KILLER_TIMEOUT_S = 3.0
"""Seconds the host waits for the root helper's answer (a kill takes milliseconds, at most its 1 s budget) before
it takes the helper for lost and falls back to :data:`KILL_SCRIPT`. A paused container's helper never answers."""
WIPED_FOLDERS = ("/work", "/tmp", "/dev/shm")
"""The container's writable tmpfs mounts, which each kernel empties before it serves (after the root kill):
``/dev/shm`` too, Docker's own (sticky, writable by every user), whose files would otherwise outlive the episode."""

INFRA_EVENTS = ["kill", "die", "stop", "pause", "destroy"]
"""Container events only the daemon's clients cause (an OOM kill of the agent's process is an "oom" event)."""

_live: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
_removal_pending: set[Container] = set()
"""Containers whose removal failed (daemon down, API timeout): retried when the next sandbox is made and at
exit, so a failed removal is late rather than a leak."""
_removal_lock = threading.Lock()


def connect(timeout_s: float = 30.0) -> docker.DockerClient:
    """A client for the local Docker daemon.

    Raises:
        SandboxUnavailableError: No daemon answers; the message says how to start one.
    """
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except DOCKER_ERRORS as exc:
        raise SandboxUnavailableError(
            f"no Docker daemon answers ({exc}). As root on Debian run "
            "`python -m agentgym_envs.sandbox setup`; otherwise start dockerd yourself, or pass "
            "sandbox='bwrap'.") from exc
    return client


class DockerSandbox(KernelSandbox):
    """A persistent kernel in its own container.

    Args:
        limits: Resource limits, enforced by the container (cgroups, tmpfs sizes) and the
            kernel's rlimits.
        image: Image to run; defaults to the base image built by ``agentrl-sandbox build-image``.
        client: Docker client to use; one is made when omitted.
    """

    backend = "docker"

    def __init__(self, limits: SandboxLimits | None = None, *, image: str | None = None,
                 client: docker.DockerClient | None = None) -> None:
        super().__init__(limits)
        self._client = client or connect()
        self.image = image or base_image_tag()
        if not image_exists(self._client, self.image):
            raise SandboxUnavailableError(
                f"expected the sandbox image {self.image!r} in the local Docker daemon, found none: "
                "build it with `python -m agentgym_envs.sandbox build-image`.")
        retry_pending_removals()
        self.container = self._start_container()
        self._killer: KernelChannel | None = self._start_killer()
        self._dirty = False
        self._kernel_started_at = time.time()
        _live.add(self)

    def _start_container(self) -> Container:
        size = f"rw,exec,size={self.limits.disk_mb}m,uid=65534,gid=65534,mode=0700"
        memory = f"{self.limits.memory_mb + 256}m"  # the kernel's rlimit trips first; this is the backstop
        try:
            return self._client.containers.run(
                self.image, ["sleep", "infinity"], user="0:0", detach=True, init=True, network_mode="none",
                read_only=True, tmpfs={"/work": size, "/tmp": size}, working_dir="/work",
                pids_limit=self.limits.pids, mem_limit=memory, memswap_limit=memory,
                nano_cpus=int(self.limits.cpus * 1e9), cap_drop=["ALL"], cap_add=["KILL"],  # root's, for the wipe
                security_opt=["no-new-privileges"],
                labels={SANDBOX_LABEL: "1", OWNER_LABEL: str(os.getpid())},
            )
        except DOCKER_ERRORS as exc:
            raise SandboxUnavailableError(f"could not start a sandbox container: {exc}") from exc

    def _spawn_kernel(self) -> KernelChannel:
        config = self.kernel_config(workdir="/work", nproc=None, may_kill_all=True, wipe=WIPED_FOLDERS)
        self._dirty = True
        self._kernel_started_at = time.time()
        return self._exec(["python3", "-I", "-c", KERNEL_SOURCE, config], user=SANDBOX_USER, workdir="/work")

    def _start_killer(self) -> KernelChannel:
        """The root helper (:mod:`~agentgym_envs.sandbox.killer`), started without waiting for it: its first
        answer waits for its start. A helper whose exec fails ends at once, which its first request reads."""
        return self._exec(["python3", "-I", "-c", KILLER_SOURCE, SANDBOX_USER.split(":")[0]], user="0:0")

    def _exec(self, argv: list[str], *, user: str, workdir: str | None = None) -> KernelChannel:
        """``argv`` started in the container as ``user``, reached over its exec stream: a socket of this process
        (:mod:`~agentgym_envs.sandbox.docker_exec`), or the ``docker exec -i`` CLI's pipes for a daemon that is not
        reached over a unix socket."""
        socket_path = unix_socket_path(self._client.api)
        if socket_path is None:
            return KernelProcess(["docker", "exec", "-i", "-u", user, *(["-w", workdir] if workdir else []),
                                  self.container.id, *argv])
        return KernelChannel(DockerExecTransport(self._client.api, socket_path, self.container.id, argv, user=user,
                                                 workdir=workdir, timeout_s=self.start_timeout_s))

    def _stop_killer(self) -> None:
        killer, self._killer = self._killer, None
        if killer is not None:
            killer.kill()  # its stdin closes, so the helper in the container ends too (once the container runs)

    def _wipe(self) -> None:
        """Kill every process of the sandbox user as root; the next kernel empties the mounts as it starts.

        Root kills: a process of the sandbox user can stop every process of that user (kill -STOP -1 in a loop),
        a wipe exec'd as that user included, and a stopped exec jams the container for the daemon. Once root's
        kill is done no process of the user is left to refill the mounts, so the next kernel, the only one, empties
        them before it serves; one exec fewer than a separate wipe (a loaded daemon takes 0.1 to 0.2 s an exec).
        The kill is the root helper's, no exec at all; when the helper is gone or does not answer, a root exec of
        :data:`KILL_SCRIPT`, then a restart of the container; either way a new helper is started. A closed
        sandbox kills nothing: its container is removed, which ends every process in it.
        """
        if not self._dirty or self._closed:
            return
        if self._killer_kills():
            self._dirty = False
            return
        self._stop_killer()
        if self._exec_status(KILL_SCRIPT, user="0:0") == 0:
            self._dirty = False
            self._killer = self._start_killer()
        elif self._infrastructure_alive():
            self._restart_container()
            self._dirty = False
        # A paused or dead container (or a daemon that does not answer) stays dirty, with no helper: the next wipe
        # tries again once it runs; meanwhile the next start fails loudly, and close() removes it.

    def _killer_kills(self) -> bool:
        """True when the root helper answered that no process of the sandbox user is left."""
        if self._killer is None:
            return False
        try:
            return self._killer.request({"op": "kill"}, timeout_s=KILLER_TIMEOUT_S).get("ok") is True
        except (KernelTimeout, KernelDied):
            return False

    def _start_kernel(self) -> KernelChannel:
        """A kernel started into the container; if it cannot start (it could not empty the mounts, or it was
        killed doing so by the memory limit, whose room the agent's files in the tmpfs mounts take), the container
        is restarted, which empties them, and the kernel started again.

        Raises:
            SandboxCrashedError: The container is stopped or gone, or a kernel cannot start in a restarted one.
        """
        try:
            return super()._start_kernel()
        except SandboxCrashedError:
            if not self._infrastructure_alive():
                raise
        self._restart_container()
        return super()._start_kernel()

    def _exec_status(self, script: str, user: str) -> int | None:
        """Exit status of ``sh -c script`` run in the container as ``user``; None when Docker failed."""
        try:
            exit_code, _ = self.container.exec_run(["sh", "-c", script], user=user)
        except DOCKER_ERRORS:
            return None
        return exit_code

    def _restart_container(self) -> None:
        """Restart the container: every process dies (the root helper too, which is started again) and the tmpfs
        mounts come back empty."""
        self._stop_killer()
        try:
            self.container.restart(timeout=0)
        except DOCKER_ERRORS as exc:
            raise SandboxCrashedError(f"could not reset container {self.container.short_id}: {exc}") from exc
        self._killer = self._start_killer()

    def _infrastructure_fault(self) -> str | None:
        """A container that is paused, not running or gone, or a daemon that does not answer."""
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return f"container {self.container.short_id} is gone"
        except DOCKER_ERRORS as exc:
            return f"container {self.container.short_id} is out of reach: the Docker daemon does not answer ({exc})"
        if self.container.status != "running":
            return f"container {self.container.short_id} is {self.container.status}"
        return self._stopped_since_kernel_start()

    def _stopped_since_kernel_start(self) -> str | None:
        """A kill, stop, pause or death of the container since the kernel started, from the daemon's events.

        The container's status lags behind: a kernel that died because the container was killed a moment ago
        may see it still "running". An event is logged when the daemon is asked, before the kernel dies.
        """
        try:
            events = self._client.api.events(since=self._kernel_started_at, until=time.time(), decode=True,
                                             filters={"container": self.container.id, "event": INFRA_EVENTS})
            seen = [event.get("status") or event.get("Action") for event in events]
        except DOCKER_ERRORS as exc:
            return f"container {self.container.short_id} is out of reach: the Docker daemon does not answer ({exc})"
        return f"container {self.container.short_id} was sent {seen[0]}" if seen else None

    def _kernel_stopped(self) -> bool:
        """True when a process of the sandbox user is stopped (``docker top``)."""
        try:
            top = self.container.top(ps_args="-o pid,stat,uid")
        except DOCKER_ERRORS:
            return False
        stat, uid = top["Titles"].index("STAT"), top["Titles"].index("UID")
        return any(row[uid] == SANDBOX_USER.split(":")[0] and row[stat].startswith(("T", "t"))
                   for row in top["Processes"])

    def _release(self) -> None:
        _live.discard(self)
        self._stop_killer()
        try:
            _remove(self.container)
        except DOCKER_ERRORS as exc:
            with _removal_lock:
                _removal_pending.add(self.container)
            raise SandboxError(f"could not remove container {self.container.short_id} (retried later): "
                               f"{exc}") from exc


def _remove(container: Container) -> None:
    """Force-remove ``container``; one already gone counts as removed."""
    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True)


def retry_pending_removals() -> int:
    """Try again to remove the containers whose removal failed; returns how many are still pending."""
    with _removal_lock:
        pending = list(_removal_pending)
    for container in pending:
        try:
            _remove(container)
        except DOCKER_ERRORS:
            continue
        with _removal_lock:
            _removal_pending.discard(container)
    return len(_removal_pending)


class DockerSandboxPool:
    """A warm pool of Docker sandboxes shared by many environments in one process.

    ``acquire`` hands out a healthy, reset sandbox (replacing a dead one); ``release`` resets it
    and puts it back. ``close`` removes every container the pool made.

    Args:
        size: Containers started up front (in parallel); the pool grows on demand beyond it.
        limits: Limits of every sandbox.
        image: Image of every sandbox (default: the base image).

    Example:
        >>> pool = DockerSandboxPool(size=8)                      # doctest: +SKIP
        >>> env = gym.make("agentrl/PythonSandbox-v0", sandbox_pool=pool)  # doctest: +SKIP
    """

    def __init__(self, size: int = 4, limits: SandboxLimits | None = None, *, image: str | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._client = connect()
        self._image = image
        self._idle: queue.SimpleQueue[DockerSandbox] = queue.SimpleQueue()
        self._all: set[DockerSandbox] = set()
        self._lock = threading.Lock()
        self._closed = False
        with ThreadPoolExecutor(max_workers=min(max(size, 1), 16)) as workers:
            for sandbox in workers.map(lambda _: self._new(), range(size)):
                self._idle.put(sandbox)

    def _new(self) -> DockerSandbox:
        sandbox = DockerSandbox(self.limits, image=self._image, client=self._client)
        with self._lock:
            self._all.add(sandbox)
        return sandbox

    def acquire(self) -> DockerSandbox:
        """A healthy sandbox with a fresh kernel and an empty work directory."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        while True:
            try:
                sandbox = self._idle.get_nowait()
            except queue.Empty:
                return self._new()
            if sandbox.healthy():
                return sandbox
            self._discard(sandbox)

    def release(self, sandbox: DockerSandbox) -> None:
        """Reset ``sandbox`` and return it to the pool (or discard it when it is broken)."""
        try:
            sandbox.reset()
        except SandboxError:
            self._discard(sandbox)
            return
        self._idle.put(sandbox)

    def _discard(self, sandbox: DockerSandbox) -> None:
        with self._lock:
            self._all.discard(sandbox)
        with contextlib.suppress(SandboxError):  # already gone; sweep() catches anything left
            sandbox.close()

    def close(self) -> None:
        """Remove every container of the pool; idempotent."""
        self._closed = True
        with self._lock:
            sandboxes, self._all = list(self._all), set()
        with ThreadPoolExecutor(max_workers=16) as workers:
            list(workers.map(DockerSandbox.close, sandboxes))

    def __enter__(self) -> DockerSandboxPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def sweep(*, extra_labels: Sequence[str] = (), client: docker.DockerClient | None = None) -> int:
    """Force-remove every container carrying the sandbox label (and all of ``extra_labels``).

    Args:
        extra_labels: Further ``key`` or ``key=value`` labels a container must carry, e.g.
            ``f"{OWNER_LABEL}={pid}"`` for one process's containers.
        client: Docker client; one is made when omitted.

    Returns:
        How many containers were removed (ones already gone are not counted).
    """
    client = client or connect()
    removed = 0
    for container in client.containers.list(all=True, filters={"label": [SANDBOX_LABEL, *extra_labels]}):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            continue
        removed += 1
    return removed


@atexit.register
def _close_live_sandboxes() -> None:
    """Remove the containers of sandboxes nobody closed before the interpreter exits."""
    for sandbox in list(_live):
        with contextlib.suppress(SandboxError):
            sandbox.close()
    retry_pending_removals()
