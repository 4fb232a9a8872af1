"""``agentrl-sandbox`` (or ``python -m agentgym_envs.sandbox``): set up, check and clean the sandbox host.

Commands:
    setup        make Docker answer (root on Debian: install docker.io, start dockerd), check
                 bubblewrap, build the base image, the data image (DataAnalysis-v0: the base image
                 plus pinned numpy, pandas, pyarrow, duckdb wheels) and the WebShop image (its server
                 and Chromium in a container: ShopContainer); falls back to bwrap when Docker cannot
                 be had.
                 Also installs Debian's chromium (WebShop-v0's browser mode) when it is missing.
    build-image  build the base image from Debian packages (``--force`` to rebuild).
    doctor       show what works, what is missing and how to fix it; exit 1 when neither Docker
                 nor bubblewrap is usable.
    sweep        remove every container labelled ``agentrl.sandbox`` and the bwrap backend's stale
                 pids cgroups (leftovers of crashed runs).

Example:
    $ sudo agentrl-sandbox setup
    $ agentrl-sandbox doctor
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agentgym_envs.errors import SandboxError
from agentgym_envs.sandbox import doctor, system
from agentgym_envs.sandbox.cgroup import sweep_cgroups
from agentgym_envs.sandbox.data_image import build_data_image
from agentgym_envs.sandbox.image import DEFAULT_SUITE, build_base_image
from agentgym_envs.sandbox.labels import SANDBOX_LABEL
from agentgym_envs.webshop.container import build_webshop_image


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``agentrl-sandbox``."""
    parser = argparse.ArgumentParser(prog="agentrl-sandbox",
                                     description="Set up, check and clean the agentrl sandbox host.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    commands.add_parser("setup", help="install/start Docker and bubblewrap, build the base, data and WebShop "
                                                 "images, install chromium")
    build = commands.add_parser("build-image", help="build the base image from Debian packages")
    build.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    build.add_argument("--suite", default=DEFAULT_SUITE, help="Debian suite (default: %(default)s)")
    commands.add_parser("doctor", help="show what works, what is missing and how to fix it")
    commands.add_parser("sweep", help=f"remove every container labelled {SANDBOX_LABEL}")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``agentrl-sandbox`` with ``argv`` (``sys.argv[1:]`` when None) and return the exit status."""
    args = build_parser().parse_args(argv)
    handlers = {"setup": cmd_setup, "build-image": cmd_build_image, "doctor": cmd_doctor, "sweep": cmd_sweep}
    return handlers[args.command](args)


def cmd_setup(args: argparse.Namespace) -> int:
    """Set up Docker and its image when possible, bubblewrap in any case; 0 when a real backend works."""
    docker_ok = _try("Docker", system.ensure_docker)
    bwrap_ok = _try("bubblewrap", system.ensure_bwrap)
    if docker_ok:
        docker_ok = _try("base image", build_base_image)
    if docker_ok:
        _try("data image (DataAnalysis-v0)", build_data_image)
        _try("WebShop image (ShopContainer)", build_webshop_image)
    if _try("chromium (WebShop-v0 browser mode)", system.ensure_chromium):
        print(f"browser: {system.find_executable('chromium')}")
    if docker_ok:
        print("ready: sandbox='docker'" + (" (sandbox='bwrap' works too)" if bwrap_ok else ""))
        return 0
    if bwrap_ok:
        print("Docker is not set up; falling back to sandbox='bwrap', which works here.")
        return 0
    print("neither Docker nor bubblewrap is usable; only sandbox='local' (no isolation) remains. "
          "Fix one of the problems above.")
    return 1


def cmd_build_image(args: argparse.Namespace) -> int:
    """Build (or find) the base image; 1 with the reason when it cannot be built."""
    try:
        system.ensure_docker()
        print(build_base_image(force=args.force, suite=args.suite))
    except SandboxError as exc:
        print(f"cannot build the base image: {exc}")
        return 1
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print the doctor's table; 1 when neither Docker nor bubblewrap is usable."""
    checks = doctor.run_checks()
    doctor.render(checks)
    return 0 if doctor.recommended_backend(checks) in ("docker", "bwrap") else 1


def cmd_sweep(args: argparse.Namespace) -> int:
    """Remove every container carrying :data:`SANDBOX_LABEL` and the bwrap backend's stale cgroups."""
    print(f"removed {sweep_cgroups()} stale pids cgroup(s) of the bwrap backend")
    if not system.docker_daemon_reachable():
        print("no Docker daemon answers: no container to sweep")
        return 0
    from agentgym_envs.sandbox.docker import sweep

    print(f"removed {sweep()} container(s) labelled {SANDBOX_LABEL}")
    return 0


def _try(what: str, step: Callable[[], object]) -> bool:
    """Run a set-up step; print its error and return False when it raises a :class:`SandboxError`."""
    try:
        step()
    except SandboxError as exc:
        print(f"{what}: {exc}")
        return False
    return True
