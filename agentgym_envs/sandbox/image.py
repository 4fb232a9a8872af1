"""Build the sandbox base image (and images like it) from Debian packages, with no image registry.

The recipe: ``debootstrap --variant=minbase --include=<packages>`` into a temporary
directory, from the Debian mirror this machine's apt already uses; then strip apt caches, docs and
locales; then stream ``tar -c`` of the tree into ``docker import``. The tag is a hash of the recipe,
so a changed package list or build step gives a new tag and the old image is never reused by
mistake. Code in the image runs as ``nobody`` (uid 65534) in ``/work``.

:func:`build_base_image` builds ``agentrl/base`` from :data:`BASE_IMAGE_PACKAGES`; :func:`build_image` builds
another repository from another package list with the same steps (WebShop's server image adds ``chromium``:
:mod:`agentgym_envs.webshop.container`).

Where a registry is reachable, the ``Dockerfile`` next to this module builds an equivalent image:
``docker build -t agentrl/base:dockerfile agentgym_envs/sandbox`` (then pass that tag as ``image``).

Example:
    >>> from agentgym_envs.sandbox.image import build_base_image
    >>> tag = build_base_image()  # cached: returns at once when the image exists
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentgym_envs.errors import ImageBuildError
from agentgym_envs.sandbox.labels import IMAGE_RECIPE_LABEL, SANDBOX_LABEL
from agentgym_envs.sandbox.system import ensure_debootstrap, is_root
from tasks.progress import reported

if TYPE_CHECKING:
    import docker

IMAGE_REPOSITORY = "agentrl/base"
"""Repository name of the base image; the tag is the recipe hash."""

BASE_IMAGE_PACKAGES: tuple[str, ...] = (
    "python3",
    "python3-numpy",
    "python3-pandas",
    "python3-sympy",
    "python3-pytest",
    "procps",
    "patch",
    "git",
)
"""Debian packages installed on top of ``minbase``: enough for data analysis and coding tasks."""

SANDBOX_UID = 65534
"""uid of ``nobody``, the user code runs as inside the image."""

IMAGE_CHANGES: tuple[str, ...] = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV HOME=/work",
    "ENV LANG=C.UTF-8",
    "ENV PYTHONDONTWRITEBYTECODE=1",
    "ENV PYTHONUNBUFFERED=1",
    "ENV MPLBACKEND=Agg",
    f"USER {SANDBOX_UID}:{SANDBOX_UID}",
    "WORKDIR /work",
    'CMD ["python3"]',
)
"""Dockerfile instructions applied on import (``docker import --change``)."""

CLEAN_PATHS: tuple[str, ...] = (
    "var/cache/apt", "var/lib/apt/lists", "var/cache/debconf", "var/log", "usr/share/man",
    "usr/share/info", "usr/share/locale", "usr/share/lintian", "usr/share/linda", "debootstrap",
    "tmp", "var/tmp", "dev", "run",
)
"""Directories of the rootfs whose *contents* are removed before import (docs are handled apart)."""

TEST_DIRS_PRUNED_IN: tuple[str, ...] = ("numpy", "pandas", "sympy", "mpmath")
"""Packages under ``dist-packages`` whose own ``tests`` directories (~110 MB, never imported) are removed."""

RECIPE_VERSION = 1
"""Bump when the build steps change in a way the hashed fields do not show."""

DEFAULT_SUITE = "bookworm"

SMOKE_TEST = "import numpy, pandas, sympy, pytest; print('ok')"
"""Run in the fresh image, as ``nobody`` with no network, before the build counts as done."""




# ------------------------------------------------------------------------------------------------ tag


def recipe_hash(packages: Sequence[str] = BASE_IMAGE_PACKAGES, suite: str = DEFAULT_SUITE) -> str:
    """Return a 12-hex-digit hash of everything that determines the image's contents.

    Args:
        packages: The Debian packages installed.
        suite: The Debian suite (``bookworm``, ...).
    """
    recipe = {
        "packages": sorted(packages),
        "suite": suite,
        "changes": list(IMAGE_CHANGES),
        "clean": list(CLEAN_PATHS),
        "pruned_tests": list(TEST_DIRS_PRUNED_IN),
        "version": RECIPE_VERSION,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def base_image_tag(packages: Sequence[str] = BASE_IMAGE_PACKAGES, suite: str = DEFAULT_SUITE) -> str:
    """Return the base image's full tag, ``agentrl/base:<recipe hash>``.

    Args:
        packages: The Debian packages installed.
        suite: The Debian suite.
    """
    return image_tag(IMAGE_REPOSITORY, packages, suite)


def image_tag(repository: str, packages: Sequence[str], suite: str = DEFAULT_SUITE) -> str:
    """Return the full tag of an image built by :func:`build_image`, ``<repository>:<recipe hash>``.

    Args:
        repository: The image's repository name, e.g. ``"agentrl/webshop"``.
        packages: The Debian packages installed.
        suite: The Debian suite.
    """
    return f"{repository}:{recipe_hash(packages, suite)}"


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    """Return True when the daemon behind ``client`` has an image called ``tag``."""
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


# --------------------------------------------------------------------------------------------- mirror


def debian_mirror(suite: str = DEFAULT_SUITE, apt_dir: Path = Path("/etc/apt")) -> str:
    """Return the Debian mirror URL this machine's apt uses for ``suite``.

    Reads deb822 ``*.sources`` files (``URIs:``/``Suites:``) and one-line ``sources.list`` entries
    (``deb [opts] URL suite components``); disabled entries and ``deb-src`` are skipped.

    Args:
        suite: The suite to look for (exactly, so ``bookworm-security`` does not count).
        apt_dir: The apt configuration directory (a parameter for tests).

    Raises:
        ImageBuildError: No entry for ``suite`` is configured.
    """
    for uri, suites in _apt_sources(apt_dir):
        if suite in suites and uri.split(":", 1)[0] in ("http", "https", "file", "ftp"):
            return uri.rstrip("/")
    raise ImageBuildError(
        f"expected an apt source for Debian suite {suite!r} in {apt_dir}/sources.list or "
        f"{apt_dir}/sources.list.d/*.sources, got none. Add one, e.g. a file "
        f"{apt_dir}/sources.list.d/debian.sources with\n"
        f"    Types: deb\n    URIs: <your Debian mirror URL>\n    Suites: {suite}\n    Components: main")


def _apt_sources(apt_dir: Path) -> Iterable[tuple[str, list[str]]]:
    """Yield ``(uri, suites)`` of every enabled binary (``deb``) source, in apt's file order."""
    one_line = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if path.is_file():
            yield from parse_one_line_sources(path.read_text(encoding="utf-8", errors="replace"))
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        yield from parse_deb822_sources(path.read_text(encoding="utf-8", errors="replace"))


def parse_one_line_sources(text: str) -> list[tuple[str, list[str]]]:
    """Parse one-line apt sources into ``(uri, [suite])`` pairs for ``deb`` lines.

    Args:
        text: The contents of a ``sources.list`` file.
    """
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)  # drop [arch=amd64 signed-by=...] options
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "deb":
            entries.append((fields[1], [fields[2]]))
    return entries


def parse_deb822_sources(text: str) -> list[tuple[str, list[str]]]:
    """Parse deb822 apt sources into ``(uri, suites)`` pairs, one per URI of each enabled deb stanza.

    Args:
        text: The contents of a ``*.sources`` file.
    """
    entries = []
    for stanza in _deb822_stanzas(text):
        if "deb" not in stanza.get("types", "").split() or stanza.get("enabled", "yes").lower() == "no":
            continue
        suites = stanza.get("suites", "").split()
        entries.extend((uri, suites) for uri in stanza.get("uris", "").split())
    return entries


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    """Split deb822 text into stanzas of lower-cased field names to values (continuations joined)."""
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, ""
        elif line.startswith("#"):
            continue
        elif line[0] in " \t" and key:
            current[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


# ---------------------------------------------------------------------------------------------- build


def build_base_image(*, tag: str | None = None, force: bool = False, suite: str = DEFAULT_SUITE,
                     packages: Sequence[str] = BASE_IMAGE_PACKAGES,
                     client: docker.DockerClient | None = None,
                     log: Callable[[str], object] = print) -> str:
    """Build the base image with debootstrap and ``docker import``, or return it when it exists.

    Needs root (debootstrap does), a Docker daemon, and network access to the Debian mirror apt
    uses. About a minute on a fast link.

    Args:
        tag: Image tag; :func:`base_image_tag` when None.
        force: Build even when the tag exists (the old image loses the tag).
        suite: Debian suite to bootstrap.
        packages: Debian packages to include.
        client: Docker client; ``docker.from_env()`` when None.
        log: Called with one line per build step.

    Returns:
        The tag of the image.

    Raises:
        ImageBuildError: A build step failed; the message names it and shows its output.
    """
    return build_image(packages, repository=IMAGE_REPOSITORY, tag=tag, force=force, suite=suite, client=client,
                       log=log)


def build_image(packages: Sequence[str], *, repository: str, tag: str | None = None, force: bool = False,
                suite: str = DEFAULT_SUITE, client: docker.DockerClient | None = None,
                log: Callable[[str], object] = print) -> str:
    """Build an image of ``packages`` by the base image's recipe, or return it when it exists.

    Args:
        packages: Debian packages to include (the smoke test imports numpy, pandas, sympy and pytest, so
            :data:`BASE_IMAGE_PACKAGES` belong in every list).
        repository: The image's repository name; the tag is :func:`image_tag` of it when ``tag`` is None.
        tag: Image tag.
        force: Build even when the tag exists (the old image loses the tag).
        suite: Debian suite to bootstrap.
        client: Docker client; ``docker.from_env()`` when None.
        log: Called with one line per build step.

    Returns:
        The tag of the image.

    Raises:
        ImageBuildError: Not root, or a build step failed; the message names it and shows its output.

    Example:
        >>> build_image((*BASE_IMAGE_PACKAGES, "chromium"), repository="agentrl/webshop")  # doctest: +SKIP
        'agentrl/webshop:0123456789ab'
    """
    import docker

    tag = tag or image_tag(repository, packages, suite)
    client = client or docker.from_env(timeout=600)
    if not force and image_exists(client, tag):
        log(f"image {tag} exists (cached); use force=True / --force to rebuild")
        return tag
    if not is_root():
        raise ImageBuildError("debootstrap needs root: run `python -m agentgym_envs.sandbox setup` as root, or build "
                              "from the Dockerfile where a registry is reachable")
    ensure_debootstrap()
    mirror = debian_mirror(suite)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="agentrl-rootfs-"))
    try:
        rootfs = workdir / "rootfs"
        with reported(f"debootstrap {suite} from {mirror} with {len(packages)} extra packages", write=log):
            run_debootstrap(rootfs, suite, mirror, packages)
        log("stripping apt caches, docs and locales ...")
        slim_rootfs(rootfs)
        log(f"importing into Docker as {tag} ...")
        import_rootfs(client, rootfs, tag, recipe_hash(packages, suite))
    finally:
        _remove_workdir(workdir)
    smoke_test(client, tag)
    size_mb = client.images.get(tag).attrs.get("Size", 0) / 1e6
    log(f"built {tag} in {time.monotonic() - started:.0f} s ({size_mb:.0f} MB)")
    return tag


def run_debootstrap(rootfs: Path, suite: str, mirror: str, packages: Sequence[str]) -> None:
    """Run ``debootstrap --variant=minbase --include=...`` into ``rootfs``; raise with its log on failure."""
    args = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", suite, str(rootfs), mirror]
    proc = subprocess.run(args, capture_output=True, text=True, check=False, timeout=1800,
                          env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if proc.returncode != 0:
        detail = _tail(proc.stdout + proc.stderr)
        log_file = rootfs / "debootstrap" / "debootstrap.log"
        if log_file.is_file():
            detail += f"\n--- {log_file} ---\n" + _tail(log_file.read_text(errors="replace"))
        raise ImageBuildError(f"`{' '.join(args)}` failed with status {proc.returncode}:\n{detail}")
    passwd = (rootfs / "etc" / "passwd").read_text()
    if not re.search(rf"^nobody:[^:]*:{SANDBOX_UID}:", passwd, flags=re.MULTILINE):
        raise ImageBuildError(f"expected user nobody with uid {SANDBOX_UID} in the rootfs, got none")


def slim_rootfs(rootfs: Path) -> None:
    """Empty :data:`CLEAN_PATHS`, drop docs (but copyright files) and test suites, create ``/work``."""
    for rel in CLEAN_PATHS:
        _empty_dir(rootfs / rel)
    _prune_test_dirs(rootfs / "usr" / "lib" / "python3" / "dist-packages")
    doc = rootfs / "usr" / "share" / "doc"
    if doc.is_dir():
        for path in sorted(doc.rglob("*"), reverse=True):
            if path.is_symlink() or path.is_file():
                if path.name != "copyright":
                    path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "var" / "tmp").chmod(0o1777)
    work = rootfs / "work"
    work.mkdir(exist_ok=True)
    os.chown(work, SANDBOX_UID, SANDBOX_UID)


def _prune_test_dirs(dist_packages: Path) -> None:
    """Remove the ``tests`` directories inside the packages named in :data:`TEST_DIRS_PRUNED_IN`."""
    for package in TEST_DIRS_PRUNED_IN:
        root = dist_packages / package
        if not root.is_dir():
            continue
        found = sorted((p for p in root.rglob("tests") if p.is_dir() and not p.is_symlink()),
                       key=lambda p: len(p.parts))
        removed: list[Path] = []
        for path in found:
            if not any(path.is_relative_to(parent) for parent in removed):
                shutil.rmtree(path)
                removed.append(path)


def _empty_dir(path: Path) -> None:
    """Remove everything inside ``path`` (not following symlinks), keeping ``path`` itself."""
    if path.is_symlink() or not path.is_dir():
        return
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def import_rootfs(client: docker.DockerClient, rootfs: Path, tag: str, recipe: str) -> None:
    """Stream ``tar -C rootfs -c .`` into the daemon's image import, tagged and labelled."""
    import docker.errors

    repository, _, version = tag.rpartition(":")
    changes = [*IMAGE_CHANGES, f"LABEL {IMAGE_RECIPE_LABEL}={recipe}"]
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        answer = client.api.import_image(src=tar.stdout, repository=repository, tag=version,
                                         changes=changes, stream_src=True)
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"docker import of {rootfs} failed: {exc}") from exc
    finally:
        tar.stdout.close()
        tar_err = tar.stderr.read().decode(errors="replace")
        tar.stderr.close()
        status = tar.wait()
    if status != 0:
        raise ImageBuildError(f"tar of {rootfs} failed with status {status}: {_tail(tar_err)}")
    if '"error"' in answer or not image_exists(client, tag):
        raise ImageBuildError(f"docker import did not create {tag}; the daemon said: {_tail(answer)}")


def smoke_test(client: docker.DockerClient, tag: str) -> None:
    """Run :data:`SMOKE_TEST` in the image as nobody with no network; remove the image if it fails."""
    import docker.errors

    try:
        client.containers.run(tag, ["python3", "-c", SMOKE_TEST], user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                              network_mode="none", remove=True, labels={SANDBOX_LABEL: "smoke-test"})
    except docker.errors.DockerException as exc:
        client.images.remove(tag, force=True)
        raise ImageBuildError(f"the new image {tag} failed its smoke test ({SMOKE_TEST!r}): {exc}") from exc


def _remove_workdir(workdir: Path) -> None:
    """Remove the build directory, refusing to when something is still mounted inside it."""
    prefix = str(workdir.resolve()) + "/"
    mounted = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
               if line.split()[4].startswith(prefix)]
    for point in sorted(mounted, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)
    still = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
             if line.split()[4].startswith(prefix)]
    if still:
        raise ImageBuildError(f"left {workdir} in place: {', '.join(still)} still mounted; "
                              "unmount them and remove it by hand")
    shutil.rmtree(workdir)


def _tail(text: str, lines: int = 30) -> str:
    """Return the last ``lines`` lines of ``text``."""
    return "\n".join(text.strip().splitlines()[-lines:])
