"""The data image: the sandbox base image plus pinned pip wheels of the analysis stack.

numpy, pandas, pyarrow and duckdb, and for DABench's questions (tests, regressions, plots, spreadsheets) scipy,
scikit-learn, statsmodels, matplotlib (no display anywhere, so it draws with Agg) and openpyxl.

DataAnalysis-v0's sandboxes need the same analysis stack as the host, so that the docker backend computes what
the bwrap and local backends (which run the host's Python) compute. Debian's packages are older, so the wheels
come from PyPI: the host fetches them with ``pip install --target <cache> --only-binary=:all: --no-deps`` for
CPython 3.11 on manylinux x86_64 (the image's Python), once, into a cache folder; removes their test suites,
headers and scripts; and compiles their bytecode with unchecked-hash ``.pyc`` files (valid whatever the
files' times, since the image's root is read-only and nothing may compile there). The image is then built
with no network anywhere: ``docker create`` from the base image, ``put_archive`` of the tree into
:data:`SITE_PACKAGES` (ahead of Debian's own numpy and pandas on ``sys.path``), ``commit``. No container
ever runs during the build but the smoke test, with ``--network none``.

The tag is a hash of the base image's tag, the pins and the build steps (:func:`data_image_tag`), so changing a
pin gives a new image. :data:`DATA_IMAGE_WHEELS` is the whole dependency closure, pinned to the versions this
project's host environment has; a change there must change both.

Example:
    >>> from agentgym_envs.sandbox.data_image import build_data_image
    >>> tag = build_data_image()  # cached: returns at once when the image exists     # doctest: +SKIP
"""

from __future__ import annotations

import compileall
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentgym_envs.errors import ImageBuildError
from agentgym_envs.sandbox.image import base_image_tag, build_base_image, image_exists
from agentgym_envs.sandbox.labels import IMAGE_RECIPE_LABEL, SANDBOX_LABEL

if TYPE_CHECKING:
    import docker

DATA_IMAGE_REPOSITORY = "agentrl/data"
"""Repository name of the data image; the tag is the recipe hash."""

DATA_IMAGE_WHEELS: tuple[str, ...] = (
    "numpy==2.4.6",
    "pandas==3.1.1",
    "pyarrow==26.0.1",
    "duckdb==2.0.1",
    "scipy==1.17.1",
    "scikit-learn==1.9.1",
    "statsmodels==0.15.0",
    "matplotlib==3.11.2",
    "openpyxl==3.1.5",
    "python-dateutil==2.9.0.post0",
    "six==1.17.0",
    "joblib==1.6.0",
    "cloudpickle==3.1.3",
    "threadpoolctl==3.8.0",
    "narwhals==2.29.0",
    "patsy==1.0.3",
    "formulaic==1.2.2",
    "interface-meta==2.0.1",
    "wrapt==2.1.2",
    "typing-extensions==4.16.0",
    "packaging==26.2",
    "contourpy==1.3.3",
    "cycler==0.12.1",
    "fonttools==4.68.0",
    "kiwisolver==1.5.1",
    "pillow==12.3.0",
    "pyparsing==3.3.2",
    "et-xmlfile==2.0.0",
)
"""Every distribution installed: the first nine (:data:`ANALYSIS_MODULES`) and their closure on Linux (pandas
and matplotlib need dateutil, which needs six; scikit-learn joblib, cloudpickle, threadpoolctl and narwhals;
statsmodels patsy, formulaic and its own needs, and packaging; matplotlib its drawing libraries; openpyxl
et-xmlfile). Time zones come from the image's ``/usr/share/zoneinfo``."""

ANALYSIS_MODULES: tuple[tuple[str, str], ...] = (
    ("numpy", "numpy"), ("pandas", "pandas"), ("pyarrow", "pyarrow"), ("duckdb", "duckdb"), ("scipy", "scipy"),
    ("sklearn", "scikit-learn"), ("statsmodels", "statsmodels"), ("matplotlib", "matplotlib"),
    ("openpyxl", "openpyxl"),
)
"""``(module, distribution)`` of what the agent's code imports: the smoke test imports each from the image."""

SITE_PACKAGES = "/usr/local/lib/python3.11/dist-packages"
"""Where the wheels go in the image: on Debian's ``sys.path`` ahead of ``/usr/lib/python3/dist-packages``."""

PIP_TARGET_ARGS: tuple[str, ...] = (
    "--only-binary=:all:", "--no-deps", "--no-compile", "--python-version", "3.11", "--implementation", "cp",
    "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
)
"""The wheels of the image's interpreter (CPython 3.11 on glibc x86_64), whatever the host runs."""

PRUNED_DIRS: tuple[str, ...] = ("tests", "include", "bin")
"""Folders removed from the installed tree: test suites and C headers (never imported), console scripts
(whose ``#!`` names the host's interpreter)."""

DATA_RECIPE_VERSION = 1
"""Bump when the build steps change in a way the hashed fields do not show."""

SMOKE_TEST = """
import importlib, json, os, sys
os.environ["MPLCONFIGDIR"] = "/tmp/mpl"
modules = json.loads(sys.argv[2])
loaded = [importlib.import_module(name) for name, _ in modules]
assert all(m.__file__.startswith(sys.argv[1]) for m in loaded), "not the image's wheels"
import duckdb, pandas, pyarrow.parquet as pq, scipy.stats, sklearn.linear_model, statsmodels.api, openpyxl
import matplotlib.pyplot as plt
pandas.DataFrame({"x": [1.5, 2.5]}).to_parquet("/tmp/smoke.parquet")
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
total = con.execute("select sum(x) from read_parquet('/tmp/smoke.parquet')").fetchone()[0]
assert total == 4.0 and pq.read_table("/tmp/smoke.parquet").num_rows == 2, total
assert 0 < scipy.stats.ttest_ind([1, 2, 3, 4], [2, 3, 4, 9]).pvalue < 1
assert round(sklearn.linear_model.LinearRegression().fit([[0], [1], [2]], [1, 3, 5]).coef_[0], 6) == 2
assert round(statsmodels.api.OLS([1, 3, 5], statsmodels.api.add_constant([0, 1, 2])).fit().params[1], 6) == 2
plt.plot([1, 2]); plt.savefig("/tmp/smoke.png")
assert plt.get_backend().lower() == "agg", plt.get_backend()
book = openpyxl.Workbook(); book.active["A1"] = 1; book.save("/tmp/smoke.xlsx")
assert pandas.read_excel("/tmp/smoke.xlsx", header=None).iloc[0, 0] == 1
print(" ".join(f"{distribution}=={module.__version__}" for (_, distribution), module in zip(modules, loaded)))
"""
"""Run in the new image as ``nobody`` with no network: import :data:`ANALYSIS_MODULES` from
:data:`SITE_PACKAGES`, write a Parquet file with pandas and read it with duckdb and pyarrow, run a t-test, two
regressions, an Agg plot and a spreadsheet round trip; prints the versions."""

logger = logging.getLogger(__name__)

_known_images: set[str] = set()
_build_lock = threading.Lock()


def data_image_tag(base_tag: str | None = None) -> str:
    """The data image's tag, ``agentrl/data:<hash of the base tag, the pins and the build steps>``.

    Args:
        base_tag: The base image it is built from; :func:`~agentgym_envs.sandbox.image.base_image_tag` when None.
    """
    recipe = {"base": base_tag or base_image_tag(), "wheels": list(DATA_IMAGE_WHEELS), "pip": list(PIP_TARGET_ARGS),
              "site": SITE_PACKAGES, "pruned": list(PRUNED_DIRS), "version": DATA_RECIPE_VERSION}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return f"{DATA_IMAGE_REPOSITORY}:{digest}"


def wheel_cache_root() -> Path:
    """``$XDG_CACHE_HOME/agentrl/wheels``, by default ``~/.cache/agentrl/wheels``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "agentrl" / "wheels"


def installed_wheels(*, log: Callable[[str], object] = print) -> Path:
    """The installed, pruned and compiled tree of :data:`DATA_IMAGE_WHEELS`, fetched with pip when not cached.

    The tree is made in a temporary sibling folder and renamed into place, so an interrupted fetch leaves no
    half tree behind.

    Raises:
        ImageBuildError: pip failed (no index reachable, a pin with no wheel for the image's platform).
    """
    key = hashlib.sha256(json.dumps([DATA_IMAGE_WHEELS, PIP_TARGET_ARGS, PRUNED_DIRS, DATA_RECIPE_VERSION])
                         .encode()).hexdigest()[:12]
    tree = wheel_cache_root() / f"site-{key}"
    if tree.is_dir():
        return tree
    tree.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=tree.parent))
    try:
        log(f"pip: fetching {', '.join(DATA_IMAGE_WHEELS)} ...")
        _pip_install(staging)
        _prune(staging)
        _compile(staging)
        staging.rename(tree)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tree


def _pip_install(target: Path) -> None:
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target",
            str(target), *PIP_TARGET_ARGS, *DATA_IMAGE_WHEELS]
    proc = subprocess.run(args, capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise ImageBuildError(f"`{' '.join(args)}` failed with status {proc.returncode}:\n"
                              f"{(proc.stdout + proc.stderr).strip()[-3000:]}")


def _prune(tree: Path) -> None:
    """Remove the :data:`PRUNED_DIRS` folders anywhere in ``tree`` (outermost first)."""
    for path in sorted((p for p in tree.rglob("*") if p.name in PRUNED_DIRS and p.is_dir() and not p.is_symlink()),
                       key=lambda p: len(p.parts)):
        if path.exists():
            shutil.rmtree(path)


def _compile(tree: Path) -> None:
    """Byte-compile ``tree`` as if it lay in :data:`SITE_PACKAGES`, with ``.pyc`` files that skip the source check."""
    ok = compileall.compile_dir(str(tree), ddir=SITE_PACKAGES, quiet=2, workers=0,
                                invalidation_mode=compileall.py_compile.PycInvalidationMode.UNCHECKED_HASH)
    if not ok:
        raise ImageBuildError(f"byte-compiling the wheels in {tree} failed")


def build_data_image(*, force: bool = False, client: docker.DockerClient | None = None,
                     log: Callable[[str], object] = print) -> str:
    """Build the data image (the base image first, when it is missing), or return it when it exists.

    Needs a Docker daemon and, the first time, a PyPI index for pip (the wheels are cached); the base image
    needs root to build. About a minute once the wheels are cached.

    Args:
        force: Build even when the tag exists (the old image loses the tag).
        client: Docker client; ``docker.from_env()`` with a long timeout when None.
        log: Called with one line per build step.

    Returns:
        The tag of the image (:func:`data_image_tag`).

    Raises:
        ImageBuildError: A build step failed; the message names it.
    """
    import docker

    client = client or docker.from_env(timeout=600)
    base = build_base_image(client=client, log=log)
    tag = data_image_tag(base)
    if not force and image_exists(client, tag):
        return tag
    started = time.monotonic()
    tree = installed_wheels(log=log)
    log(f"adding {tree} to {base} as {tag} ...")
    _commit_with_tree(client, base, tree, tag)
    versions = smoke_test(client, tag)
    size_mb = client.images.get(tag).attrs.get("Size", 0) / 1e6
    log(f"built {tag} ({versions}) in {time.monotonic() - started:.0f} s ({size_mb:.0f} MB)")
    return tag


def _commit_with_tree(client: docker.DockerClient, base: str, tree: Path, tag: str, site: str = SITE_PACKAGES) -> None:
    """``docker create`` from ``base``, put ``tree`` at ``site``, commit as ``tag``; no container runs."""
    import docker.errors

    repository, _, version = tag.rpartition(":")
    container = client.containers.create(base, ["python3"], network_mode="none", labels={SANDBOX_LABEL: "build"})
    try:
        with tempfile.TemporaryFile() as archive:
            _write_archive(archive, tree, site)
            archive.seek(0)
            if not container.put_archive("/", archive):
                raise ImageBuildError(f"docker refused the archive of {tree} for {tag}")
        container.commit(repository=repository, tag=version, message=f"agentrl image: {tree.name} at {site}",
                         changes=[f"LABEL {IMAGE_RECIPE_LABEL}={version}"])
    except docker.errors.DockerException as exc:
        raise ImageBuildError(f"building {tag} from {base} failed: {exc}") from exc
    finally:
        container.remove(force=True)


def _write_archive(archive: object, tree: Path, site: str = SITE_PACKAGES) -> None:
    """A tar of ``tree`` under ``site``, owned by root and readable by everyone."""
    def owned_by_root(member: tarfile.TarInfo) -> tarfile.TarInfo:
        member.uid = member.gid = 0
        member.uname = member.gname = "root"
        member.mode = (member.mode | 0o444 | (0o111 if member.isdir() or member.mode & 0o100 else 0)) & 0o755
        return member

    with tarfile.open(fileobj=archive, mode="w") as tar:  # docker makes the missing parent folders
        tar.add(tree, arcname=site.lstrip("/"), filter=owned_by_root)


def smoke_test(client: docker.DockerClient, tag: str) -> str:
    """Run :data:`SMOKE_TEST` in ``tag`` as nobody with no network; remove the image if it fails.

    Returns:
        The versions it printed, e.g. ``"numpy==2.4.6 pandas==3.1.1 pyarrow==26.0.1 duckdb==2.0.1 ..."``.
    """
    import docker.errors

    try:
        output = client.containers.run(tag, ["python3", "-I", "-c", SMOKE_TEST, SITE_PACKAGES,
                                             json.dumps(ANALYSIS_MODULES)], user="65534:65534",
                                       network_mode="none", remove=True, labels={SANDBOX_LABEL: "smoke-test"})
    except docker.errors.DockerException as exc:
        client.images.remove(tag, force=True)
        raise ImageBuildError(f"the new image {tag} failed its smoke test: {exc}") from exc
    return output.decode().strip()


def ensure_data_image(client: docker.DockerClient | None = None) -> str:
    """The data image's tag, built first when the daemon lacks it (checked once per process; thread-safe).

    Args:
        client: Docker client to look for the image with; :func:`~agentgym_envs.sandbox.docker.connect` when None.

    Raises:
        SandboxUnavailableError: No Docker daemon answers.
        ImageBuildError: The image is missing and cannot be built here.
    """
    from agentgym_envs.sandbox.docker import connect

    tag = data_image_tag()
    if tag in _known_images:
        return tag
    with _build_lock:
        if not image_exists(client or connect(), tag):
            logger.warning("building the data image %s (a minute or two; once)", tag)
            build_data_image(log=logger.info)  # its own client, with a timeout long enough for the commit
        _known_images.add(tag)
    return tag
