"""Per-repository environments built here, with no image registry: a repository's dependencies and its editable
install, as a read-only tree at :data:`ENV_SITE` in the sandbox.

A :class:`~tasks.swe.environments.RepoEnvironment` (derived from the repository's metadata, corrected by a user's
overrides) becomes one installed tree per :attr:`~tasks.swe.environments.RepoEnvironment.build_key`, built the way
the data image is (:mod:`agentgym_envs.sandbox.data_image`): pip on the host installs the requirements with their
dependencies into a staging folder (``pip install --target``, wheels from PyPI, built where only an sdist exists;
for another interpreter than the sandbox's, CPython 3.11 manylinux wheels only), pip's report becomes the lock
(``agentrl-lock.json``: each distribution's name, version and sha256), and the repository's *editable* install is
written: ``agentrl-testbed.pth`` puts its package roots (``/work/testbed/src`` for a src layout) on ``sys.path``,
and a ``<name>-<version>.dist-info`` answers ``importlib.metadata``; so what the tests import is what the agent
edited. The tree is byte-compiled and renamed into the cache (``~/.cache/agentrl/wheels/swe-env-<key>-py<version>``)
once, for the interpreter that will run it: the image's CPython 3.11 (docker), the host's (bwrap).

Then, per backend:

- docker: the tree is layered onto the base image at :data:`ENV_SITE` as ``agentrl/swe-env:<hash>`` (the hash
  of the base image's tag and the build key), with no container run and no network;
- bwrap: the tree is bound read-only at :data:`ENV_SITE` (:class:`EnvironmentBwrapSandbox`).

The grading run's bootstrap adds :data:`ENV_SITE` as a site folder ahead of the interpreter's own (after pytest
and the guard are imported), and the ``bash`` tool's commands get it and the package roots on ``PYTHONPATH``.

An environment's ``pre_install`` commands (SWE-bench's) run once per build, after pip, with ``bash`` in a
sandbox of the backend that builds it (its limits: :data:`PRE_INSTALL_LIMITS`, no network) whose work directory
holds the installed tree as ``site/`` (the commands' working directory); the tree is read back from it (regular
files; modes and symlinks are not kept). A command that fails stops the build, naming the command, its exit code
and its output.

An environment with an ``image`` (a SWE-bench instance image the user loaded: ``/testbed`` and its own
interpreter) is not built: the docker backend runs that image (:func:`require_local_image` says what to do when
it is absent), the repository is shipped to ``/work/testbed`` as for every task (from the user's folder, or the
image's own ``/testbed``: :func:`image_testbed_tree`), and the tests and the agent's ``python`` run the image's
interpreter with the repository's package roots ahead of the image's install of ``/testbed``. bwrap cannot run a
Docker image.

Example:
    >>> from tasks.swe.environments import RepoEnvironment
    >>> spec = RepoEnvironment("python-humanize/humanize", "4.9", ("freezegun==1.5.1",), ("src",), "humanize")
    >>> tree = environment_tree(spec)            # pip, once per build key            # doctest: +SKIP
    >>> tag = environment_image(spec)            # docker: agentrl/swe-env:<hash>      # doctest: +SKIP
"""

from __future__ import annotations

import compileall
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentgym_envs.errors import EnvConfigError, ImageBuildError
from agentgym_envs.sandbox.base import SandboxLimits
from agentgym_envs.sandbox.bwrap import BwrapSandbox
from agentgym_envs.sandbox.data_image import PIP_TARGET_ARGS, _commit_with_tree, wheel_cache_root
from agentgym_envs.sandbox.image import base_image_tag, build_base_image, image_exists
from agentgym_envs.sandbox.kernel_client import KernelSandbox
from agentgym_envs.swe.testing import CACHE_DIRS, ENV_SITE, PTH_FILE, TESTBED, prepare_tree, read_tree
from tasks.locks import file_lock
from tasks.swe.environments import RepoEnvironment

if TYPE_CHECKING:
    import docker

logger = logging.getLogger(__name__)


ENV_IMAGE_REPOSITORY = "agentrl/swe-env"
"""Repository name of the per-repository images; the tag is :func:`environment_image_tag`'s hash."""

SANDBOX_WORKDIR = "/work"
"""The sandbox's work directory on both real backends (the testbed is ``/work/testbed``)."""

LOCK_FILE = "agentrl-lock.json"
"""The file of the tree that records what pip installed: name, version and sha256 of each distribution."""

IMAGE_PYTHON = (3, 11)
"""The base image's interpreter (docker). bwrap runs the host's, so its tree is built for the host's version."""

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def environment_tree(environment: RepoEnvironment, *, python: tuple[int, int] = IMAGE_PYTHON,
                     log: Callable[[str], object] = logger.info, backend: str = "docker") -> Path:
    """The installed tree of ``environment`` (see the module docstring) for CPython ``python``, built when not
    cached: natively for the host's version (sdists built where needed), wheels only for the image's; its
    ``pre_install`` commands run in a sandbox of ``backend``. One process or thread builds it (under the lock file
    ``.<tree>.lock`` beside it); another that needs it meanwhile waits, then uses that one.

    Raises:
        ImageBuildError: pip failed; the message names the package and why (:func:`pip_failure`), or
            ``python`` is neither the host's nor the image's version, or a ``pre_install`` command failed (the
            message names it, with its exit code and output).
    """
    key = f"{environment.build_key}-py{python[0]}{python[1]}"
    tree = wheel_cache_root() / f"swe-env-{key}"
    with file_lock(tree.with_name(f".{tree.name}.lock"), waiting=f"waiting for another process to build {tree.name}"):
        if tree.is_dir():
            return tree
        tree.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=tree.parent))
        try:
            lock = _pip_install(environment, staging, python, log) if environment.requirements else []
            (staging / LOCK_FILE).write_text(json.dumps(lock, indent=1) + "\n", encoding="utf-8")
            _write_editable_install(environment, staging)
            if environment.pre_install:
                run_pre_install(environment, staging, backend, log)
            compileall.compile_dir(str(staging), ddir=ENV_SITE, quiet=2, workers=0,
                                   invalidation_mode=compileall.py_compile.PycInvalidationMode.UNCHECKED_HASH)
            staging.rename(tree)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return tree


def _pip_install(environment: RepoEnvironment, target: Path, python: tuple[int, int],
                 log: Callable[[str], object]) -> list[dict[str, str]]:
    """pip-install the requirements into ``target`` for ``python``; the lock read from pip's report."""
    report = target.parent / f"{target.name}.report.json"
    if python not in (sys.version_info[:2], IMAGE_PYTHON):
        raise ImageBuildError(f"expected a tree for the host's Python {sys.version_info[0]}.{sys.version_info[1]} "
                              f"or the image's {IMAGE_PYTHON[0]}.{IMAGE_PYTHON[1]}, got {python}")
    cross = () if python == sys.version_info[:2] else PIP_TARGET_ARGS
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
            "--target", str(target), "--report", str(report), *cross, *environment.requirements]
    log(f"{environment.repo} {environment.version}: pip install {' '.join(environment.requirements)}")
    try:
        proc = subprocess.run(args, capture_output=True, text=True, check=False, timeout=1800)
        if proc.returncode != 0:
            package, why = pip_failure(proc.stdout + proc.stderr)
            raise ImageBuildError(f"the environment of {environment.repo} {environment.version} could not be built: "
                                  f"{package}: {why} (pip exited with {proc.returncode}; fix it in an override "
                                  f"file: --overrides, 'requirements' of {environment.repo})")
        installed = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    finally:
        report.unlink(missing_ok=True)
    return [{"name": item["metadata"]["name"], "version": item["metadata"]["version"],
             "sha256": item.get("download_info", {}).get("archive_info", {}).get("hashes", {}).get("sha256", "")}
            for item in installed]


_PIP_PATTERNS = (
    (r"No matching distribution found for ([^\s]+)", "no release matches (misspelt, or no wheel for Python 3.11 "
                                                     "on Linux)"),
    (r"Could not find a version that satisfies the requirement ([^\s]+)", "no release matches"),
    (r"Failed to build ([^\s]+)", "its sdist did not build"),
    (r"Cannot install ([^\n]+?) because these package versions have conflicting dependencies",
     "conflicting dependencies"),
    (r"Invalid requirement: '?([^'\n]+)'?", "not a valid requirement"),
)


def pip_failure(output: str) -> tuple[str, str]:
    """The package a failed pip install names, and why (pip's own last error line when no pattern matches).

    Example:
        >>> pip_failure("ERROR: No matching distribution found for nosuchpkg==9.9")[0]
        'nosuchpkg==9.9'
    """
    for pattern, why in _PIP_PATTERNS:
        match = re.search(pattern, output)
        if match:
            return match.group(1), why
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    return "(unknown package)", (errors[-1] if errors else output.strip()[-300:])


def _write_editable_install(environment: RepoEnvironment, tree: Path) -> None:
    """The ``.pth`` of the package roots and the repository's distribution metadata."""
    roots = [f"{SANDBOX_WORKDIR}/{TESTBED}" + ("" if root == "." else f"/{root.strip('/')}")
             for root in environment.package_roots]
    (tree / PTH_FILE).write_text("".join(f"{root}\n" for root in roots), encoding="utf-8")
    name = re.sub(r"[-_.]+", "_", environment.dist_name or environment.repo.rsplit("/", 1)[-1])
    info = tree / f"{name}-{environment.dist_version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {environment.dist_name}\n"
                                   f"Version: {environment.dist_version}\n", encoding="utf-8")
    (info / "INSTALLER").write_text("agentrl\n", encoding="utf-8")
    (info / "direct_url.json").write_text(json.dumps({"url": f"file://{roots[0]}", "dir_info": {"editable": True}}),
                                          encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")


def environment_image_tag(environment: RepoEnvironment, base_tag: str | None = None) -> str:
    """``agentrl/swe-env:<hash of the base image's tag and the build key>``."""
    recipe = f"{base_tag or base_image_tag()}\n{environment.build_key}\n{ENV_SITE}"
    return f"{ENV_IMAGE_REPOSITORY}:{hashlib.sha256(recipe.encode()).hexdigest()[:16]}"


def environment_image(environment: RepoEnvironment, *, client: docker.DockerClient | None = None,
                      log: Callable[[str], object] = logger.info) -> str:
    """The docker image of ``environment`` (the base image with its tree at :data:`ENV_SITE`), built when missing.

    Raises:
        ImageBuildError: The tree or the image could not be built; the message says which package and why.
        SandboxUnavailableError: No Docker daemon answers.
    """
    import docker as docker_sdk

    client = client or docker_sdk.from_env(timeout=600)
    base = build_base_image(client=client, log=log)
    tag = environment_image_tag(environment, base)
    with _lock(tag):
        if image_exists(client, tag):
            return tag
        tree = environment_tree(environment, python=IMAGE_PYTHON, log=log)
        log(f"{environment.repo} {environment.version}: layering {tree.name} onto {base} as {tag}")
        _commit_with_tree(client, base, tree, tag, site=ENV_SITE)
    return tag


def host_environment_tree(environment: RepoEnvironment, *, log: Callable[[str], object] = logger.info) -> Path:
    """:func:`environment_tree` for the host's interpreter, which the bwrap backend runs."""
    return environment_tree(environment, python=sys.version_info[:2], log=log, backend="bwrap")


PRE_INSTALL_LIMITS = SandboxLimits(timeout_s=300.0, memory_mb=2048, pids=128, disk_mb=512, output_bytes=65_536)
"""The sandbox limits ``pre_install`` commands run under (each command: ``timeout_s``)."""

PRE_INSTALL_FOLDER = "site"
"""The installed tree's folder in the ``pre_install`` sandbox's work directory: the commands' working directory."""


def run_pre_install(environment: RepoEnvironment, tree: Path, backend: str,
                    log: Callable[[str], object] = logger.info) -> None:
    """Run ``environment.pre_install`` with ``bash`` in a fresh sandbox holding ``tree``, and write the tree back.

    Raises:
        ImageBuildError: A command exited non-zero or passed its time limit (naming it, with its output), or the
            tree could not be shipped or read back.
    """
    from agentgym_envs.sandbox import open_sandbox
    from agentgym_envs.swe.tools import CellError, run_bash, setup_shell

    before = {path.relative_to(tree).as_posix(): path.read_bytes() for path in sorted(tree.rglob("*"))
              if path.is_file() and not path.is_symlink()}
    sandbox = open_sandbox(backend, PRE_INSTALL_LIMITS)
    try:
        prepare_tree(sandbox, before, folder=PRE_INSTALL_FOLDER)
        setup_shell(sandbox)
        for command in environment.pre_install:
            log(f"{environment.repo} {environment.version}: pre_install: {command}")
            try:
                run = run_bash(sandbox, command, timeout_s=PRE_INSTALL_LIMITS.timeout_s, head_bytes=2000,
                               tail_bytes=2000, folder=PRE_INSTALL_FOLDER)
            except CellError as exc:
                raise ImageBuildError(_pre_install_failure(environment, command, "broke the sandbox's shell",
                                                           str(exc))) from exc
            if run.exit_code != 0:
                ended = "passed its time limit" if run.exit_code is None else f"exited with {run.exit_code}"
                raise ImageBuildError(_pre_install_failure(environment, command, ended, run.output))
        after = read_tree(sandbox, folder=PRE_INSTALL_FOLDER)
    finally:
        sandbox.close()
    _write_back(tree, before, after)


def _pre_install_failure(environment: RepoEnvironment, command: str, ended: str, output: str) -> str:
    return (f"the environment of {environment.repo} {environment.version} could not be built: its pre_install "
            f"command {command!r} {ended}; its output: {output.strip()[-1500:]} (fix it in an override file: "
            f"'pre_install' of {environment.repo})")


def _write_back(tree: Path, before: dict[str, bytes], after: dict[str, bytes]) -> None:
    """Make ``tree`` hold ``after``: files removed, changed and added as the commands left them."""
    for path in before.keys() - after.keys():
        (tree / path).unlink()
    for path, data in after.items():
        if before.get(path) != data and not set(path.split("/")) & CACHE_DIRS:
            target = tree / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


# ------------------------------------------------------------------------------------------------ local images

TESTBED_IN_IMAGE = "/testbed"
"""Where a SWE-bench instance image holds the repository."""


def require_local_image(image: str, *, client: docker.DockerClient | None = None) -> None:
    """Check that ``image`` is in the local Docker daemon.

    Raises:
        EnvConfigError: It is not; the message says what to do (``docker load``, or drop the field).
        SandboxUnavailableError: No Docker daemon answers.
    """
    from agentgym_envs.sandbox.docker import connect

    client = client or connect()
    if not image_exists(client, image):
        raise EnvConfigError(
            f"expected the image {image!r} (an instance's 'image', or load_swebench's image=) in the local Docker "
            f"daemon, found none: load the saved image with `docker load -i FILE.tar` (made by `docker save "
            f"{image} -o FILE.tar` where it was built), or drop the instance's 'image' and pass its repository "
            "folder (repository=) so that the environment is derived from its metadata and built here")


def image_testbed_tree(image: str, *, client: docker.DockerClient | None = None) -> dict[str, bytes]:
    """The repository in ``image`` at :data:`TESTBED_IN_IMAGE` (path -> bytes; ``.git`` and caches left out),
    read from a created container that never runs.

    Raises:
        EnvConfigError: The image is absent (:func:`require_local_image`) or has no ``/testbed``.
    """
    import tarfile

    import docker.errors

    from agentgym_envs.sandbox.docker import connect
    from agentgym_envs.sandbox.labels import SANDBOX_LABEL

    client = client or connect()
    require_local_image(image, client=client)
    container = client.containers.create(image, ["true"], network_mode="none", labels={SANDBOX_LABEL: "build"})
    try:
        with tempfile.TemporaryFile() as archive:
            try:
                chunks, _ = container.get_archive(TESTBED_IN_IMAGE)
            except docker.errors.NotFound as exc:
                raise EnvConfigError(f"expected the repository at {TESTBED_IN_IMAGE} in the image {image!r} (as "
                                     "SWE-bench's images have it), found none: pass its folder (repository=)") from exc
            for chunk in chunks:
                archive.write(chunk)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                return {name.split("/", 1)[1]: tar.extractfile(member).read() for member in tar.getmembers()
                        if member.isfile() and "/" in (name := member.name)
                        and not {".git", *CACHE_DIRS} & set(name.split("/")[1:])
                        and not name.endswith(".pyc")}
    finally:
        container.remove(force=True)


class EnvironmentBwrapSandbox(BwrapSandbox):
    """A :class:`~agentgym_envs.sandbox.bwrap.BwrapSandbox` with an environment's tree bound read-only at
    :data:`ENV_SITE`.

    Args:
        tree: The installed tree (:func:`host_environment_tree`).
        limits: The sandbox's limits.
    """

    def __init__(self, tree: Path, limits: SandboxLimits | None = None) -> None:
        self.tree = tree
        super().__init__(limits)

    def _bind_sources(self) -> list[tuple[str, str]]:
        return [*super()._bind_sources(), (str(self.tree), ENV_SITE)]


def environment_sandbox(backend: str, environment: RepoEnvironment, limits: SandboxLimits | None = None, *,
                        log: Callable[[str], object] = logger.info) -> KernelSandbox:
    """A sandbox with ``environment``: its image on docker (a local image it names, else its built one), its tree
    bound on bwrap; built first when not cached.

    Raises:
        EnvConfigError: A backend other than docker and bwrap.
        ImageBuildError: The environment could not be built (which package, and why).
        SandboxUnavailableError: The backend does not work here.
    """
    from agentgym_envs.sandbox import open_sandbox

    if backend == "bwrap":
        return EnvironmentBwrapSandbox(host_environment_tree(environment, log=log), limits)
    if backend == "docker":
        return open_sandbox("docker", limits, image=environment.image or environment_image(environment, log=log))
    raise EnvConfigError(f"task environments need sandbox='docker' or 'bwrap', got {backend!r}")
