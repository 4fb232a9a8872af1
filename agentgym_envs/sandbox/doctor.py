"""Check what this machine offers the sandbox backends, say how to fix what is missing, and pick one.

Example:
    >>> from agentgym_envs.sandbox import doctor
    >>> checks = doctor.run_checks()
    >>> doctor.render(checks)
    >>> doctor.recommended_backend(checks)
    'docker'
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentgym_envs.sandbox import system
from agentgym_envs.sandbox.image import base_image_tag

MIN_PYTHON = (3, 11)

# Names of the checks, as they appear in the table and as recommended_backend looks them up.
PYTHON = "python"
DOCKER_SDK = "docker SDK"
DOCKER_DAEMON = "docker daemon"
BASE_IMAGE = "base image"
BWRAP = "bwrap"
USER_NAMESPACES = "user namespaces"
DEBOOTSTRAP = "debootstrap"
ROOT = "root"
DEBIAN = "debian"


@dataclass(frozen=True)
class Check:
    """The outcome of one check.

    Attributes:
        name: What was checked (one of the module's name constants).
        ok: Whether it is usable.
        detail: What was found.
        fix: How to fix it when not ok (None when ok or when nothing needs doing).
    """

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def check_python() -> Check:
    """Check the interpreter version."""
    found = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    wanted = ".".join(map(str, MIN_PYTHON))
    return Check(PYTHON, ok, f"Python {found}", None if ok else f"use Python >= {wanted}")


def check_docker_sdk() -> Check:
    """Check that the ``docker`` Python package imports."""
    try:
        import docker
    except ImportError as exc:
        return Check(DOCKER_SDK, False, f"cannot import docker: {exc}", "pip install 'docker>=7.1'")
    return Check(DOCKER_SDK, True, f"docker {docker.__version__}")


def check_docker_daemon() -> Check:
    """Check that a Docker daemon answers."""
    if system.docker_daemon_reachable():
        return Check(DOCKER_DAEMON, True, "answers on the configured socket")
    return Check(DOCKER_DAEMON, False, "no daemon answers",
                 "python -m agentgym_envs.sandbox setup (as root on Debian), or see the commands it prints")


def check_base_image(tag: str | None = None) -> Check:
    """Check that the base image (``base_image_tag()`` by default) is in the daemon."""
    tag = tag or base_image_tag()
    fix = "python -m agentgym_envs.sandbox setup (as root)"
    if not system.docker_daemon_reachable():
        return Check(BASE_IMAGE, False, f"{tag}: cannot look, no Docker daemon", fix)
    import docker

    from agentgym_envs.sandbox.image import image_exists

    client = docker.from_env(timeout=10)
    try:
        found = image_exists(client, tag)
    finally:
        client.close()
    return Check(BASE_IMAGE, found, f"{tag} {'present' if found else 'missing'}", None if found else fix)


def check_bwrap() -> Check:
    """Check that ``bwrap`` is installed."""
    path = system.find_executable("bwrap")
    if path is None:
        return Check(BWRAP, False, "not installed", "apt-get install -y bubblewrap (as root)")
    return Check(BWRAP, True, path)


def check_user_namespaces() -> Check:
    """Check that bubblewrap can create the namespaces the bwrap backend uses."""
    ok, detail = system.bwrap_usable()
    if ok:
        return Check(USER_NAMESPACES, True, detail)
    fix = "install bubblewrap first" if system.find_executable("bwrap") is None else system.USERNS_FIX
    return Check(USER_NAMESPACES, False, detail, fix)


def check_debootstrap() -> Check:
    """Check that ``debootstrap`` (needed to build the base image) is installed."""
    path = system.find_executable("debootstrap")
    if path is None:
        return Check(DEBOOTSTRAP, False, "not installed (needed to build the base image)",
                     "apt-get install -y debootstrap (as root)")
    return Check(DEBOOTSTRAP, True, path)


def check_root() -> Check:
    """Check whether this process runs as root (needed to install, start dockerd, build the image)."""
    if system.is_root():
        return Check(ROOT, True, "running as root")
    return Check(ROOT, False, "not root: setup and build-image cannot install or start anything",
                 "run setup/build-image with sudo, or have an administrator do it")


def check_debian() -> Check:
    """Check whether this is a Debian-family system (where setup can apt-get install)."""
    if system.is_debian():
        return Check(DEBIAN, True, "Debian family, apt-get available")
    return Check(DEBIAN, False, "not Debian: setup cannot install packages",
                 "install docker (or bubblewrap) with this system's package manager")


ALL_CHECKS: tuple[Callable[[], Check], ...] = (
    check_python, check_docker_sdk, check_docker_daemon, check_base_image, check_bwrap,
    check_user_namespaces, check_debootstrap, check_root, check_debian,
)
"""Every check :func:`run_checks` runs, in table order."""


def run_checks() -> list[Check]:
    """Run every check in :data:`ALL_CHECKS` and return the outcomes in order."""
    return [check() for check in ALL_CHECKS]


def recommended_backend(checks: Sequence[Check]) -> str:
    """Pick the best backend the checks allow.

    Returns:
        ``"docker"`` when the daemon answers and the base image is present, else ``"bwrap"`` when
        bubblewrap can create namespaces, else ``"local"`` (no isolation; development only).
    """
    ok = {check.name for check in checks if check.ok}
    if {DOCKER_DAEMON, BASE_IMAGE} <= ok:
        return "docker"
    if {BWRAP, USER_NAMESPACES} <= ok:
        return "bwrap"
    return "local"


def render(checks: Sequence[Check], console: Console | None = None) -> None:
    """Print the checks as a table (what works, what is missing, how to fix) and the recommended backend.

    Args:
        checks: Outcomes from :func:`run_checks`.
        console: Where to print; a new stdout console when None.
    """
    console = console or Console()
    table = Table(title="agentrl sandbox doctor")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    table.add_column("how to fix", overflow="fold")
    for check in checks:
        status = "[green]ok[/green]" if check.ok else "[red]missing[/red]"
        table.add_row(check.name, status, Text(check.detail), Text(check.fix or ""))
    console.print(table)
    backend = recommended_backend(checks)
    note = " (no isolation: development only)" if backend == "local" else ""
    console.print(f"recommended backend: sandbox={backend!r}{note}")
