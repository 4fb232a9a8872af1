"""The WebShop server in a Docker container with no network, its browser inside, reached over a Unix socket.

For users who isolate or scale out: :class:`ShopContainer` runs ``python -m agentgym_envs.webshop.server`` in a
container of the WebShop image (the sandbox base image's Debian packages plus Debian's ``chromium``, built with
debootstrap like it: :func:`build_webshop_image`). The container has no network (``--network none``), a
read-only root, a tmpfs ``/tmp``, no capabilities, Docker's init, memory and pids limits, and the sandbox label
(``python -m agentgym_envs.sandbox sweep`` removes one a crashed run left behind). The server listens on a Unix
socket in a host folder bound into the container; the env's clients speak HTTP over that socket
(:meth:`ShopContainer.transport`). With ``browser=True`` the server owns the Chromium that shows its pages,
opening them on its own loopback port inside the container, and the env drives it through
:class:`~agentgym_envs.webshop.drivers.RemoteBrowserDriver`; no browser runs on the host.

Nothing is installed into the image for the server: the host's Python installation and this project are bound
read-only at their own paths, and the container runs the host's interpreter with the host's packages (aiohttp,
bm25s, Playwright and its driver). That assumes a host whose C library and system libraries are those of the
image's Debian suite (bookworm, as here); on another host the interpreter may not start, and :meth:`ShopContainer.start`
says so. The container runs as the host's user, who can read those folders; the BM25 index is built in, and
read from, the host's index cache (bound read-write), as a :class:`~agentgym_envs.webshop.service.ShopServer`'s is.

Example:
    >>> with ShopContainer("generated-v1") as shop:                                  # doctest: +SKIP
    ...     env = WebShopEnv(split="test", server=shop, mode="browser")
    ...     obs, info = env.reset(seed=0)
    ...     env.close()

Command line: ``python -m agentgym_envs.webshop.container build`` builds the image (root, minutes; cached by tag).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import docker
import docker.errors
import httpx
from docker.models.containers import Container

from agentgym_envs.errors import EnvConfigError, ImageBuildError, SandboxError
from agentgym_envs.sandbox.bwrap import SYSTEM_DIRS, python_prefixes
from agentgym_envs.sandbox.docker import DOCKER_ERRORS, OWNER_LABEL, connect
from agentgym_envs.sandbox.image import BASE_IMAGE_PACKAGES, DEFAULT_SUITE, build_image, image_exists, image_tag
from agentgym_envs.sandbox.labels import SANDBOX_LABEL
from agentgym_envs.sandbox.system import is_root
from agentgym_envs.webshop.errors import ShopUnavailableError
from agentgym_envs.webshop.service import SOURCE_ROOT, BrowserLocation, ShopService

logger = logging.getLogger(__name__)

WEBSHOP_IMAGE_REPOSITORY = "agentrl/webshop"
"""Repository name of the WebShop image; the tag is the recipe hash."""

WEBSHOP_IMAGE_PACKAGES: tuple[str, ...] = (*BASE_IMAGE_PACKAGES, "chromium", "dbus-x11", "libatomic1")
"""The base image's packages, Debian's ``chromium``, ``dbus-x11`` (chromium needs GTK, whose settings backend needs
some D-Bus session bus: a virtual package, which debootstrap cannot pick a provider of by itself) and ``libatomic1``
(Playwright's Node driver, from the host's ``playwright`` package, links it)."""

SHOP_URL = "http://shop"
"""The shop's base URL as the host's clients see it: the host name is not looked up, the Unix socket is dialled."""

SOCKET_DIR = "/run/agentrl-shop"
"""Where the host folder holding the socket is bound in the container."""

SOCKET_NAME = "shop.sock"

CONTAINER_LABEL_VALUE = "webshop"
"""The value of the sandbox label on a shop container (the sweep removes every value)."""

POLL_S = 0.05
"""How often :meth:`ShopContainer.start` asks whether the server answers."""

LOG_TAIL_LINES = 40
"""Lines of the container's output shown when it fails to start."""

TMPFS_OPTIONS = "rw,nosuid,nodev,size=1024m"
"""The container's ``/tmp`` (its ``HOME`` too): Chromium's profiles and caches."""

SHM_SIZE = "256m"
"""The container's ``/dev/shm``, where Chromium's processes share memory (Docker's default is 64 MB)."""

INTERPRETER_FAILED = (126, 127)
"""Exit statuses of a command that could not be executed (the host's Python does not run in the image)."""


def webshop_image_tag(suite: str = DEFAULT_SUITE) -> str:
    """The WebShop image's tag, ``agentrl/webshop:<recipe hash>``."""
    return image_tag(WEBSHOP_IMAGE_REPOSITORY, WEBSHOP_IMAGE_PACKAGES, suite)


def build_webshop_image(*, force: bool = False, suite: str = DEFAULT_SUITE, client: docker.DockerClient | None = None,
                        log: Callable[[str], object] = print) -> str:
    """Build the WebShop image by the base image's recipe (root, a Debian mirror), or return it when it exists.

    About two minutes and 1 GB (chromium and GTK are most of it); the tag is :func:`webshop_image_tag`.

    Args:
        force: Build even when the tag exists.
        suite: The Debian suite to bootstrap.
        client: Docker client; ``docker.from_env()`` with a long timeout when None.
        log: Called with one line per build step.

    Returns:
        The image's tag.

    Raises:
        ImageBuildError: Not root, or a build step failed (the message names it).
    """
    return build_image(WEBSHOP_IMAGE_PACKAGES, repository=WEBSHOP_IMAGE_REPOSITORY, force=force, suite=suite,
                       client=client, log=log)


class ShopContainer(ShopService):
    """The shop server (and, with ``browser=True``, its Chromium) in a container with no network.

    Args:
        catalogue: A bundled catalogue name (``"generated-v1"``) or a JSONL file of products (bound read-only).
        browser: Run a Chromium in the container for browser mode (driven through the shop's JSON API).
        image: The image to run; default :func:`webshop_image_tag`, built when missing (root, minutes).
        index_dir: Where the BM25 index lives (bound read-write); default: the host's index cache.
        memory_mb: The container's memory limit (server, index and browser).
        pids: The container's process and thread limit.
        browser_timeout_s: The limit of every browser operation in the container.
        startup_timeout_s: How long :meth:`start` waits for the server to answer.

    Raises:
        EnvConfigError: A limit or timeout that is not positive.

    Example:
        >>> shop = ShopContainer("generated-v1")          # doctest: +SKIP
        >>> shop.start()                                  # doctest: +SKIP
        'http://shop'
        >>> client = ShopClient(shop.url, transport=shop.transport())  # doctest: +SKIP
        >>> shop.stop()                                   # doctest: +SKIP
    """

    def __init__(self, catalogue: str, *, browser: bool = True, image: str | None = None,
                 index_dir: str | os.PathLike[str] | None = None, memory_mb: int = 4096, pids: int = 4096,
                 browser_timeout_s: float = 30.0, startup_timeout_s: float = 120.0) -> None:
        if min(memory_mb, pids, browser_timeout_s, startup_timeout_s) <= 0:
            raise EnvConfigError(f"expected memory_mb, pids, browser_timeout_s and startup_timeout_s > 0, got "
                                 f"{memory_mb}, {pids}, {browser_timeout_s} and {startup_timeout_s}")
        self.catalogue = catalogue
        self.browser = browser
        self.image = image
        self.index_dir = index_dir
        self.memory_mb = memory_mb
        self.pids = pids
        self.browser_timeout_s = browser_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self._lock = threading.Lock()
        self._docker: docker.DockerClient | None = None
        self._container: Container | None = None
        self._socket: Path | None = None
        self._removal: weakref.finalize | None = None

    # -- ShopService -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://shop``: the host name is not looked up, :meth:`transport` dials the socket.

        Raises:
            ShopUnavailableError: The container was not started, or was stopped.
        """
        self._running_socket()
        return SHOP_URL

    @property
    def browser_location(self) -> BrowserLocation | None:
        """``"shop"`` with ``browser=True`` (no browser outside can reach the shop), else None."""
        return "shop" if self.browser else None

    def transport(self) -> httpx.HTTPTransport:
        """A new transport over the container's Unix socket, for one ``httpx.Client``.

        Raises:
            ShopUnavailableError: The container was not started, or was stopped.
        """
        return httpx.HTTPTransport(uds=str(self._running_socket()))

    # -- the container ---------------------------------------------------------------------------
    @property
    def socket_path(self) -> Path | None:
        """The server's Unix socket on the host while the container runs, else None."""
        return self._socket

    @property
    def container_id(self) -> str | None:
        """The running container's id, else None."""
        return self._container.id if self._container is not None else None

    def alive(self) -> bool:
        """True while the container runs."""
        container = self._container
        if container is None:
            return False
        try:
            container.reload()
        except DOCKER_ERRORS:
            return False
        return container.status == "running"

    def start(self) -> str:
        """Start the container and wait until the server answers on its socket; a running one is left as it is.

        Returns:
            :attr:`url`.

        Raises:
            ShopUnavailableError: The container did not start, exited (the message carries its output, and says
                when the host's Python could not run in the image), or did not answer within
                ``startup_timeout_s``; nothing is left running.
            SandboxUnavailableError: No Docker daemon answers.
            ImageBuildError: The image is missing and cannot be built here (not root, or a build step failed).
        """
        with self._lock:
            if self._container is not None and self.alive():
                return SHOP_URL
            self._stop_locked()
            client = self._docker = connect()
            image = self._find_image(client)
            socket_dir = Path(tempfile.mkdtemp(prefix="agentrl-shop-"))
            try:
                container = self._run(client, image, socket_dir)
            except ShopUnavailableError:
                shutil.rmtree(socket_dir, ignore_errors=True)
                raise
            self._removal = weakref.finalize(self, _remove, container, socket_dir)
            try:
                _wait_until_answering(container, socket_dir / SOCKET_NAME, self.startup_timeout_s, image)
            except ShopUnavailableError:
                self._removal()
                raise
            self._container, self._socket = container, socket_dir / SOCKET_NAME
            return SHOP_URL

    def stop(self) -> None:
        """Remove the container (its server and browser die with it) and the socket's folder; idempotent.

        Raises:
            ShopUnavailableError: The daemon could not remove the container (``python -m agentgym_envs.sandbox
                sweep`` will).
        """
        with self._lock:
            self._stop_locked()

    def __enter__(self) -> ShopContainer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def _stop_locked(self) -> None:
        removal, self._removal = self._removal, None
        self._container = self._socket = None
        client, self._docker = self._docker, None
        try:
            if removal is not None:
                removal()
        finally:
            if client is not None:
                client.close()

    def _running_socket(self) -> Path:
        if self._socket is None:
            raise ShopUnavailableError("the shop container is not running: call start() first")
        return self._socket

    def _find_image(self, client: docker.DockerClient) -> str:
        """The image to run: the one named, or the WebShop image, built first when it is missing."""
        if self.image is not None:
            if not image_exists(client, self.image):
                raise ShopUnavailableError(f"expected the image {self.image!r} in the local Docker daemon, found none")
            return self.image
        tag = webshop_image_tag()
        if not image_exists(client, tag):
            if not is_root():
                raise ImageBuildError(f"expected the WebShop image {tag} in the local Docker daemon, found none; "
                                      "build it as root: python -m agentgym_envs.webshop.container build")
            logger.warning("building the WebShop image %s (minutes; once)", tag)
            build_webshop_image(log=logger.info)
        return tag

    def _run(self, client: docker.DockerClient, image: str, socket_dir: Path) -> Container:
        memory = f"{self.memory_mb}m"
        try:
            return client.containers.run(
                image, self._argv(), detach=True, init=True, network_mode="none", read_only=True,
                user=f"{os.getuid()}:{os.getgid()}", working_dir="/tmp", environment=self._environment(),
                tmpfs={"/tmp": TMPFS_OPTIONS}, shm_size=SHM_SIZE, volumes=self._volumes(socket_dir),
                mem_limit=memory, memswap_limit=memory, pids_limit=self.pids, cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                labels={SANDBOX_LABEL: CONTAINER_LABEL_VALUE, OWNER_LABEL: str(os.getpid())})
        except DOCKER_ERRORS as exc:
            raise ShopUnavailableError(f"could not start a shop container of {image}: {exc}") from exc

    def _argv(self) -> list[str]:
        argv = [sys.executable, "-m", "agentgym_envs.webshop.server", "--catalogue", self._catalogue_arg(),
                "--host", "127.0.0.1", "--port", "0", "--unix", f"{SOCKET_DIR}/{SOCKET_NAME}"]
        if self.index_dir is not None:
            argv += ["--index-dir", str(Path(self.index_dir).resolve())]
        if self.browser:
            argv += ["--browser", "--browser-timeout", str(self.browser_timeout_s)]
        return argv

    def _catalogue_arg(self) -> str:
        """The catalogue as the server in the container names it: a file by its absolute path (bound there)."""
        path = Path(self.catalogue)
        return str(path.resolve()) if path.is_file() else self.catalogue

    def _environment(self) -> dict[str, str]:
        from agentgym_envs.search.retriever import default_index_root

        return {"HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": str(SOURCE_ROOT), "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                # the server's default index root is then the host's, bound at its own path
                "XDG_CACHE_HOME": str(default_index_root().parent.parent)}

    def _volumes(self, socket_dir: Path) -> dict[str, dict[str, str]]:
        """The binds: the socket's folder; the host's Python and this project, read-only; the index, read-write."""
        from agentgym_envs.search.retriever import default_index_root

        index = Path(self.index_dir).resolve() if self.index_dir is not None else default_index_root()
        index.mkdir(parents=True, exist_ok=True)
        read_only = [*host_python_dirs(), str(SOURCE_ROOT)]
        if Path(self.catalogue).is_file():
            read_only.append(self._catalogue_arg())
        volumes = {path: {"bind": path, "mode": "ro"} for path in read_only}
        volumes[str(index)] = {"bind": str(index), "mode": "rw"}
        volumes[str(socket_dir)] = {"bind": SOCKET_DIR, "mode": "rw"}
        return volumes


def host_python_dirs() -> list[str]:
    """The folders of this interpreter's installation the container needs bound, i.e. those outside the system
    folders the image has itself (``/usr``, ...): a ``/usr`` Python is the image's own, of the same Debian suite."""
    return sorted(prefix for prefix in python_prefixes(sys.executable)
                  if not any(prefix == system or prefix.startswith(system + "/") for system in SYSTEM_DIRS))


def _wait_until_answering(container: Container, socket: Path, timeout_s: float, image: str) -> None:
    """Return once ``GET /api/health`` answers on ``socket``.

    Raises:
        ShopUnavailableError: The container exited, or nothing answered within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), timeout=5.0) as probe:
        while True:
            with contextlib.suppress(httpx.TransportError):
                if probe.get(f"{SHOP_URL}/api/health").status_code == 200:
                    return
            try:
                container.reload()
            except DOCKER_ERRORS as exc:
                raise ShopUnavailableError(f"the shop container {container.short_id} is out of reach: {exc}") from exc
            if container.status not in ("created", "running"):
                raise _exit_error(container, image)
            if time.monotonic() > deadline:
                raise ShopUnavailableError(f"the shop container {container.short_id} did not answer on {socket} "
                                           f"within {timeout_s} s; its output:\n{_output(container)}")
            time.sleep(POLL_S)


def _exit_error(container: Container, image: str) -> ShopUnavailableError:
    """Why the container exited before it answered: its status and output, and what a status of 126/127 means."""
    status = container.attrs.get("State", {}).get("ExitCode")
    message = (f"the shop container {container.short_id} exited with status {status} before it answered; "
               f"its output:\n{_output(container)}")
    if status in INTERPRETER_FAILED or "error while loading shared libraries" in message:
        message += (f"\nThe host's Python ({sys.executable}) did not run in the image {image}: the container runs "
                    f"the host's interpreter and packages, bound read-only, which needs a host of the image's "
                    f"Debian suite ({DEFAULT_SUITE}) and C library.")
    return ShopUnavailableError(message)


def _output(container: Container) -> str:
    try:
        return container.logs(tail=LOG_TAIL_LINES).decode(errors="replace").strip() or "(empty)"
    except DOCKER_ERRORS as exc:
        return f"(unreadable: {exc})"


def _remove(container: Container, socket_dir: Path) -> None:
    """Force-remove ``container`` (one already gone counts as removed) and the socket's folder."""
    try:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    except DOCKER_ERRORS as exc:
        raise ShopUnavailableError(f"could not remove the shop container {container.short_id} ({exc}); "
                                   "`python -m agentgym_envs.sandbox sweep` removes it") from exc
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


# -- command line -----------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentgym_envs.webshop.container build [--force]``: build the WebShop image; 1 when it cannot."""
    parser = argparse.ArgumentParser(prog="python -m agentgym_envs.webshop.container",
                                     description="The WebShop server's container image.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    build = commands.add_parser("build", help="build the WebShop image from Debian packages (root)")
    build.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    build.add_argument("--suite", default=DEFAULT_SUITE, help="Debian suite (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        connect().close()  # says how to start a daemon when none answers
        print(build_webshop_image(force=args.force, suite=args.suite))
    except SandboxError as exc:
        print(f"cannot build the WebShop image: {exc}", file=sys.stderr)
        return 1
    return 0


__all__ = ["SHOP_URL", "WEBSHOP_IMAGE_PACKAGES", "ShopContainer", "build_webshop_image", "webshop_image_tag"]

if __name__ == "__main__":
    sys.exit(main())
