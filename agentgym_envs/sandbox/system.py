"""Detect and fix the host set-up the sandbox backends need: a Docker daemon, bubblewrap, debootstrap.

Everything here talks only to the local machine (the Docker socket, ``/proc``, ``/etc``) and, when
it installs something, to the package mirrors apt is configured with. When a fix needs root or a
Debian-family system and this machine is neither, the error says the exact commands to run instead.

Example:
    >>> from agentgym_envs.sandbox import system
    >>> if not system.docker_daemon_reachable():
    ...     system.ensure_docker()  # installs docker.io and starts dockerd, or explains how
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from agentgym_envs.errors import SandboxUnavailableError

DOCKERD_ARGS: tuple[str, ...] = ("--bridge=none", "--iptables=false", "--ip6tables=false")
"""How agentrl starts ``dockerd``: no bridge and no firewall rules, since no container gets a network."""

DOCKERD_LOG = Path("/var/log/agentrl-dockerd.log")
"""Where the output of a ``dockerd`` started by :func:`ensure_docker` goes."""

DOCKERD_PIDFILE = Path("/var/run/docker.pid")
"""Where ``dockerd`` writes its pid (its default)."""

BWRAP_PROBE: tuple[str, ...] = (
    "bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true",
)
"""The smallest sandbox the bubblewrap backend needs: all namespaces over a read-only host root."""

_SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
_APT_TIMEOUT_S = 900.0


def is_root() -> bool:
    """Return True when this process runs with effective uid 0."""
    return os.geteuid() == 0


def is_debian(os_release: Path = Path("/etc/os-release")) -> bool:
    """Return True on Debian or a Debian derivative (Ubuntu, ...), where ``apt-get`` installs packages.

    Args:
        os_release: The os-release file to read (a parameter for tests).
    """
    fields = _read_os_release(os_release)
    family = {fields.get("ID", "")} | set(fields.get("ID_LIKE", "").split())
    return "debian" in family and shutil.which("apt-get") is not None


def _read_os_release(path: Path) -> dict[str, str]:
    """Parse an os-release file into a dict (quotes stripped); empty when it is missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def find_executable(name: str) -> str | None:
    """Find ``name`` on ``PATH`` or in the sbin directories a non-root ``PATH`` often lacks."""
    found = shutil.which(name)
    if found is not None:
        return found
    return shutil.which(name, path=os.pathsep.join(_SBIN_DIRS))


# --------------------------------------------------------------------------------------------- Docker


def docker_daemon_reachable(timeout_s: float = 3.0) -> bool:
    """Return True when a Docker daemon answers a ping on the configured socket (``DOCKER_HOST``).

    Args:
        timeout_s: How long to wait for the answer.
    """
    try:
        import docker
        import docker.errors
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=max(1, round(timeout_s)))
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, OSError):
        return False
    finally:
        client.close()


def ensure_docker(*, install: bool = True, start: bool = True, wait_s: float = 60.0) -> None:
    """Make a Docker daemon answer, installing and starting it when this is root on Debian.

    When no daemon answers: installs ``docker.io`` with apt (only if ``dockerd`` is missing), starts
    ``dockerd --bridge=none --iptables=false --ip6tables=false`` in its own session with its output in
    :data:`DOCKERD_LOG` (it outlives this process), and waits until it answers.

    Args:
        install: Allow ``apt-get install docker.io`` when ``dockerd`` is missing.
        start: Allow starting ``dockerd`` when it is installed but not running.
        wait_s: How long to wait for a started daemon to answer.

    Raises:
        SandboxUnavailableError: No daemon answers and this function may not or cannot fix that;
            the message gives the commands to run, or suggests ``sandbox='bwrap'``.
    """
    if docker_daemon_reachable():
        return
    blocker = _docker_blocker()
    if blocker is not None:
        raise SandboxUnavailableError(docker_instructions(blocker))
    if find_executable("dockerd") is None:
        if not install:
            raise SandboxUnavailableError(docker_instructions("dockerd is not installed"))
        apt_install(["docker.io"])
    pid = _running_dockerd_pid()
    if pid is None:
        if not start:
            raise SandboxUnavailableError(docker_instructions("dockerd is installed but not running"))
        pid = start_dockerd()
    _wait_for_docker(pid, wait_s)


def _docker_blocker() -> str | None:
    """Say why this process may not set Docker up itself, or None when it may."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return f"DOCKER_HOST={host} points at a daemon that does not answer, and it is not local"
    if not is_root():
        sock = Path(host.removeprefix("unix://") or "/var/run/docker.sock")
        if sock.exists() and not os.access(sock, os.R_OK | os.W_OK):
            return (f"a daemon socket exists at {sock} but this user may not use it "
                    "(add the user to the docker group: sudo usermod -aG docker $USER, then log in again)")
        return "no Docker daemon answers and this process is not root"
    if not is_debian():
        return "no Docker daemon answers and this is not a Debian-family system (no apt-get)"
    return None


def docker_instructions(reason: str) -> str:
    """Build the message that says how to get a Docker daemon by hand, or how to do without one.

    Args:
        reason: What is wrong, put first in the message.
    """
    dockerd = " ".join(["dockerd", *DOCKERD_ARGS])
    return (
        f"Docker is not usable: {reason}.\n"
        "To set it up on Debian/Ubuntu, run as root:\n"
        "    apt-get update && apt-get install -y docker.io\n"
        f"    setsid {dockerd} >{DOCKERD_LOG} 2>&1 < /dev/null &\n"
        "(or `systemctl start docker` where systemd manages it), then build the image with\n"
        "    python -m agentgym_envs.sandbox setup\n"
        "Or run without Docker: use sandbox='bwrap' (needs bubblewrap: apt-get install -y bubblewrap)."
    )


def _running_dockerd_pid() -> int | None:
    """Return the pid of a live ``dockerd`` from its pid file, or None."""
    try:
        pid = int(DOCKERD_PIDFILE.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    return pid if comm == "dockerd" else None


def start_dockerd() -> int:
    """Start ``dockerd`` detached: its own session, stdin from /dev/null, output appended to the log.

    The daemon is not tied to this process: it keeps running when the caller exits or is interrupted.

    Returns:
        The daemon's pid.

    Raises:
        SandboxUnavailableError: ``dockerd`` is not installed.
    """
    path = find_executable("dockerd")
    if path is None:
        raise SandboxUnavailableError(docker_instructions("dockerd is not installed"))
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([env.get("PATH", "/usr/bin:/bin"), *_SBIN_DIRS])
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(DOCKERD_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(path, [path, *DOCKERD_ARGS], env, file_actions=actions, setsid=True)


def _wait_for_docker(pid: int, wait_s: float) -> None:
    """Wait until the daemon answers; raise with the end of its log when it dies or takes too long."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if docker_daemon_reachable(timeout_s=2.0):
            return
        exit_code = _reap(pid)
        if exit_code is not None:
            raise SandboxUnavailableError(docker_instructions(
                f"dockerd exited with status {exit_code}; the end of {DOCKERD_LOG}:\n{_log_tail()}"))
        time.sleep(0.5)
    raise SandboxUnavailableError(docker_instructions(
        f"dockerd (pid {pid}) did not answer within {wait_s:.0f} s; "
        f"the end of {DOCKERD_LOG}:\n{_log_tail()}"))


def _reap(pid: int) -> int | None:
    """Return the exit status of our child ``pid`` if it has exited (reaping it), else None."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (started by someone else): look at /proc instead
        return None if Path(f"/proc/{pid}").exists() else -1
    return os.waitstatus_to_exitcode(status) if done else None


def _log_tail(lines: int = 20) -> str:
    """Return the last lines of :data:`DOCKERD_LOG`, or a note that it cannot be read."""
    try:
        text = DOCKERD_LOG.read_text(errors="replace")
    except OSError as exc:
        return f"(cannot read the log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------------------------- bubblewrap


def bwrap_usable(timeout_s: float = 10.0) -> tuple[bool, str]:
    """Check that bubblewrap can build the namespaces the bwrap backend uses.

    Returns:
        ``(ok, detail)``; on failure ``detail`` holds bwrap's error message.
    """
    path = find_executable("bwrap")
    if path is None:
        return False, "bwrap is not installed"
    try:
        proc = subprocess.run([path, *BWRAP_PROBE[1:]], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False, f"bwrap did not finish within {timeout_s:.0f} s"
    if proc.returncode != 0:
        return False, proc.stderr.strip() or f"bwrap exited with status {proc.returncode}"
    return True, f"{path}: namespaces (user, net, pid, ipc, uts, mount) usable"


USERNS_FIX = (
    "enable unprivileged user namespaces as root: sysctl -w kernel.unprivileged_userns_clone=1 "
    "(Debian), sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04+), "
    "sysctl -w user.max_user_namespaces=15000; inside a container, run it with --privileged "
    "or a seccomp profile that allows unshare/clone"
)
"""What to do when bubblewrap is installed but cannot create namespaces."""


def ensure_bwrap(*, install: bool = True) -> None:
    """Make sure bubblewrap is installed and can create namespaces here.

    Args:
        install: Allow ``apt-get install bubblewrap`` when it is missing (root on Debian only).

    Raises:
        SandboxUnavailableError: bwrap is missing and cannot be installed, or user namespaces are
            not available; the message says how to fix it.
    """
    _ensure_package("bwrap", "bubblewrap", install=install)
    ok, detail = bwrap_usable()
    if not ok:
        raise SandboxUnavailableError(
            f"bubblewrap cannot create namespaces here: {detail}\nTo fix: {USERNS_FIX}.")


def ensure_debootstrap(*, install: bool = True) -> None:
    """Make sure ``debootstrap`` (used to build the base image) is installed.

    Args:
        install: Allow ``apt-get install debootstrap`` when it is missing (root on Debian only).

    Raises:
        SandboxUnavailableError: It is missing and cannot be installed; the message says how.
    """
    _ensure_package("debootstrap", "debootstrap", install=install)


def ensure_chromium(*, install: bool = True) -> str:
    """Make sure Debian's ``chromium`` (the browser of WebShop-v0's browser mode) is installed.

    Playwright drives it through ``executable_path``; ``playwright install`` is not needed.

    Args:
        install: Allow ``apt-get install chromium`` when it is missing (root on Debian only).

    Returns:
        The path of the ``chromium`` executable.

    Raises:
        SandboxUnavailableError: It is missing and cannot be installed; the message says how.
    """
    _ensure_package("chromium", "chromium", install=install)
    return str(find_executable("chromium"))


def _ensure_package(executable: str, package: str, *, install: bool) -> None:
    """Install the Debian ``package`` providing ``executable`` when it is missing and allowed."""
    if find_executable(executable) is not None:
        return
    if install and is_root() and is_debian():
        apt_install([package])
        if find_executable(executable) is not None:
            return
    raise SandboxUnavailableError(
        f"{executable} is not installed. Install it as root: apt-get update && apt-get install -y {package}")


# ------------------------------------------------------------------------------------------------ apt


def apt_install(packages: Sequence[str]) -> None:
    """Run ``apt-get update`` and ``apt-get install -y --no-install-recommends <packages>``.

    Args:
        packages: Debian package names.

    Raises:
        SandboxUnavailableError: Not root, not Debian, or apt failed (its output is in the message).
    """
    if not (is_root() and is_debian()):
        raise SandboxUnavailableError(
            f"cannot install {' '.join(packages)}: expected root on a Debian-family system, got "
            f"uid {os.geteuid()} on {'Debian' if is_debian() else 'a non-Debian system'}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run_apt(["apt-get", "update"], env)
    _run_apt(["apt-get", "install", "-y", "--no-install-recommends", *packages], env)


def _run_apt(args: list[str], env: dict[str, str]) -> None:
    """Run one apt command; raise with the end of its output when it fails."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, env=env,
                              timeout=_APT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SandboxUnavailableError(
            f"`{' '.join(args)}` did not finish within {exc.timeout:.0f} s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise SandboxUnavailableError(f"`{' '.join(args)}` failed with status {proc.returncode}:\n{tail}")
