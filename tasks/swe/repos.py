"""The real repositories SWE tasks are made from: small pure-Python PyPI packages pinned by version and sha256.

Each pin (:data:`PINS`) is a package whose source distribution ships its test suite, and whose suite passed
here, in a few seconds, when run from the unpacked sdist as

    python -m pytest -q -p no:cacheprovider -c <an empty ini file> --rootdir . <spec.test_paths>

with the sandbox's own pytest and nothing installed but the pin's ``requirements`` (its runtime and test
dependencies, pinned) and the package itself. The empty config matters: some packages' own pytest config asks
for plugins the image lacks (parse's ``addopts`` asks for pytest-cov). Nothing here runs a test suite: the
numbers in the pins are what was measured when they were chosen.

A pin's tests run in its own per-repository environment (:func:`pin_environment`): the one
:func:`~tasks.swe.environments.derive_environment` derives from the sdist's metadata (a ``src/`` layout's package
root, the distribution's name and version for ``importlib.metadata``), with the pin's ``requirements`` in place of
the derived list, which names test tooling unpinned (toolz's ``coverage``, ``pycodestyle`` and ``pytest``).

Sdists are fetched with ``pip download`` into a cache outside the repository (:func:`cache_folder`), checked
against their pinned sha256 on every use, and never committed. :func:`repository_files` gives a pin's
source tree as a plain mapping, the same form :func:`folder_files` reads from a user's own checkout.

Example:
    >>> spec = PINS["toolz"]
    >>> spec.source_folders, spec.test_paths
    (('toolz',), ('toolz/tests',))
    >>> files = repository_files(spec)  # doctest: +SKIP
    >>> sorted(library_files(files, spec.source_folders, spec.test_paths))[:2]  # doctest: +SKIP
    ['toolz/__init__.py', 'toolz/_signatures.py']
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tasks.errors import TaskError, UnknownTaskError, did_you_mean
from tasks.progress import reported
from tasks.swe.environments import RepoEnvironment, derive_environment

CACHE_ENV = "AGENTRL_SWE_CACHE"
"""Environment variable naming the sdist cache folder; the default is ``~/.cache/agentrl/swe/sdists``."""
SKIPPED_PARTS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".venv"})
"""Folder names whose contents are never part of a repository's files."""


class RepoError(TaskError):
    """A pinned repository could not be fetched, or is not what its pin says."""


@dataclass(frozen=True)
class RepoSpec:
    """A pinned PyPI package whose sdist is a repository with a test suite.

    Attributes:
        name: The PyPI project name.
        version: The exact version.
        sha256: The sdist's sha256 (hex), as PyPI lists it.
        license: The SPDX license identifier.
        source_folders: The library code that bugs are planted in: package folders or single modules,
            relative to the repository root. Test files under them are never mutated.
        test_paths: What to hand pytest to run the whole suite, relative to the repository root.
        suite_seconds: Wall time of the whole suite measured here when the pin was chosen (Python 3.11, 2
            cores; process start included; pytest 7.2.1 for the first six pins, the host's pytest 9.0 for the
            later ones).
        tests_passed: How many tests passed in that run (the rest were skipped).
        requirements: What pip installs into the pin's environment for its suite: its runtime and test
            dependencies, each pinned with ``==`` (:func:`pin_environment`); pytest itself is the sandbox's.
    """

    name: str
    version: str
    sha256: str
    license: str
    source_folders: tuple[str, ...]
    test_paths: tuple[str, ...]
    suite_seconds: float
    tests_passed: int
    requirements: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        """The pip requirement, e.g. ``"toolz==1.2.0"``."""
        return f"{self.name}=={self.version}"

    @property
    def repo(self) -> str:
        """The repository's name in SWE-bench's ``repo`` field, e.g. ``"pypi/toolz"``."""
        return f"pypi/{self.name}"


PINS: dict[str, RepoSpec] = {
    spec.name: spec
    for spec in (
        RepoSpec("toolz", "1.2.0", "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
                 "BSD-3-Clause", ("toolz",), ("toolz/tests",), suite_seconds=0.65, tests_passed=187),
        RepoSpec("inflection", "0.5.1", "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
                 "MIT", ("inflection",), ("test_inflection.py",), suite_seconds=0.32, tests_passed=455),
        RepoSpec("six", "1.17.0", "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
                 "MIT", ("six.py",), ("test_six.py",), suite_seconds=0.33, tests_passed=198),
        RepoSpec("tabulate", "0.10.0", "e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d",
                 "MIT", ("tabulate",), ("test",), suite_seconds=1.0, tests_passed=280),
        RepoSpec("parse", "1.22.4", "706d458feed5a81b02768d3156e8070baf6cee7d150a3a3c0cd43101a875c3b5",
                 "MIT", ("parse",), ("tests",), suite_seconds=0.28, tests_passed=109),
        RepoSpec("boltons", "26.2.0", "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
                 "BSD-3-Clause", ("boltons",), ("tests",), suite_seconds=2.3, tests_passed=519),
        RepoSpec("humanize", "4.9.0", "582a265c931c683a7e9b8ed9559089dea7edcf6cc95be39a3cbc2c5d5ac2bcfa", "MIT",
                 ("src/humanize",), ("tests",), suite_seconds=1.3, tests_passed=550,
                 requirements=("freezegun==1.5.5", "python-dateutil==2.9.0.post0")),
        RepoSpec("freezegun", "1.5.5", "ac7742a6cc6c25a2c35e9292dfd554b897b517d2dec26891a2e8debf205cb94a",
                 "Apache-2.0", ("freezegun",), ("tests",), suite_seconds=1.6, tests_passed=141,
                 requirements=("python-dateutil==2.9.0.post0",)),
        RepoSpec("face", "26.0.1", "8183d94bc248baaea855a9f8445f97a22a9988908e60abddccc6e251da77c4c6",
                 "BSD-3-Clause", ("face",), ("face/test",), suite_seconds=0.46, tests_passed=66,
                 requirements=("boltons==26.2.0",)),
        RepoSpec("python-slugify", "9.2.0", "cee32948083476013804de1667724fb1362dacb71e47b1d5d92adf8db6ee3298",
                 "MIT", ("slugify",), ("tests",), suite_seconds=1.3, tests_passed=140,
                 requirements=("text-unidecode==1.3",)),
        RepoSpec("funcy", "2.1", "8979feb3de7120afd1d00e5a8eae810c1942e4bfbc91697151e9ee1e49f79284",
                 "BSD-3-Clause", ("funcy",), ("tests",), suite_seconds=0.76, tests_passed=219,
                 requirements=("whatever==0.7",)),
        RepoSpec("isodate", "0.7.2", "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
                 "BSD-3-Clause", ("src/isodate",), ("tests",), suite_seconds=0.53, tests_passed=280),
        RepoSpec("semver", "3.1.2", "bea193552413194252d33ff26ce0962b76669bd1c6fb17e8e203ac37f072feaf",
                 "BSD-3-Clause", ("src/semver",), ("tests",), suite_seconds=1.0, tests_passed=515),
        RepoSpec("simpleeval", "1.0.8", "b417f869c11f2de034eb919820a825f35d12ce99f63a43971947ce73679eb9ba",
                 "MIT", ("simpleeval.py",), ("tests",), suite_seconds=0.65, tests_passed=160),
        RepoSpec("addict", "2.4.0", "b3b2210e0e067a281f5646c8c5db92e99b7231ea8b0eb5f74dbdf9e259d4e494",
                 "MIT", ("addict",), ("test_addict.py",), suite_seconds=0.40, tests_passed=128),
        RepoSpec("schema", "0.7.8", "e86cc08edd6fe6e2522648f4e47e3a31920a76e82cce8937535422e310862ab5",
                 "MIT", ("schema",), ("test_schema.py",), suite_seconds=0.61, tests_passed=118),
        RepoSpec("sqlparse", "0.6.1", "ca722573f848ff2d30e40ea30f53a104b7dea7635ea9285891263eb2c58fb6e7",
                 "BSD-3-Clause", ("sqlparse",), ("tests",), suite_seconds=4.3, tests_passed=537),
    )
}
"""The pinned repositories by PyPI name: the first six dependency-free with the package at the root; humanize,
isodate and semver have a ``src/`` layout; humanize (freezegun), freezegun (python-dateutil), face (boltons),
python-slugify (text-unidecode) and funcy (whatever, a test-only dependency) need packages installed."""


def pin(name: str) -> RepoSpec:
    """The pin of a package by name.

    Raises:
        UnknownTaskError: No such pin, with the closest name.
    """
    if name not in PINS:
        raise UnknownTaskError(f"expected a pinned repository in {sorted(PINS)}, got {name!r}"
                               f"{did_you_mean(name, PINS)}")
    return PINS[name]


def pin_environment(spec: RepoSpec, files: Mapping[str, bytes]) -> RepoEnvironment:
    """The environment a pin's tests run in: derived from its sdist's metadata (package root, distribution name,
    version), with the pin's ``requirements`` in place of the derived ones.

    Args:
        spec: The pin.
        files: Its source tree (:func:`repository_files`).

    Example:
        >>> files = {"src/demo/__init__.py": b"", "pyproject.toml": b'[project]\\nname = "demo"\\n'}
        >>> spec = RepoSpec("demo", "1.0", "", "MIT", ("src/demo",), ("tests",), 0.0, 0, ("idna==3.10",))
        >>> environment = pin_environment(spec, files)
        >>> environment.repo, environment.requirements, environment.package_roots, environment.dist_version
        ('pypi/demo', ('idna==3.10',), ('src',), '1.0')
    """
    derived = derive_environment(spec.repo, spec.version, files)
    return dataclasses.replace(derived, requirements=spec.requirements)


def cache_folder() -> Path:
    """Where fetched sdists are kept: ``$AGENTRL_SWE_CACHE`` or ``~/.cache/agentrl/swe/sdists``."""
    override = os.environ.get(CACHE_ENV)
    return Path(override) if override else Path.home() / ".cache" / "agentrl" / "swe" / "sdists"


def sha256_of(path: Path) -> str:
    """The sha256 (hex) of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_sdist(spec: RepoSpec, *, cache: Path | None = None) -> Path:
    """The path of a pin's sdist in the cache, downloading it with pip first if it is not there.

    A cached file is checked against the pin's sha256 on every call; one that does not match is fetched again.

    Args:
        spec: The pin.
        cache: The cache folder; :func:`cache_folder` when ``None``.

    Returns:
        ``<cache>/<name>-<version>.tar.gz``, whose sha256 is ``spec.sha256``.

    Raises:
        RepoError: pip could not download it (its output's tail quoted), or the download's sha256 is not the pin's.
    """
    folder = cache or cache_folder()
    target = folder / f"{spec.name}-{spec.version}.tar.gz"
    if target.is_file() and sha256_of(target) == spec.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as scratch:
        with reported(f"fetching the sdist of {spec.requirement} from PyPI (once; kept in {folder})"):
            download = _pip_download(spec, Path(scratch))
        digest = sha256_of(download)
        if digest != spec.sha256:
            raise RepoError(f"expected sha256 {spec.sha256} for the sdist of {spec.requirement}, got {digest} "
                            f"({download.name} from pip): the pin or the index is wrong")
        download.replace(target)
    return target


def _pip_download(spec: RepoSpec, folder: Path) -> Path:
    """Download a pin's sdist (no dependencies, no wheel) into an empty folder and return the file."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--quiet", "--dest", str(folder), spec.requirement]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RepoError(f"expected pip to download the sdist of {spec.requirement}, got exit code "
                        f"{result.returncode}: {(result.stderr or result.stdout).strip()[-500:]}")
    downloads = [path for path in folder.iterdir() if path.name.endswith((".tar.gz", ".zip"))]
    if len(downloads) != 1:
        names = sorted(path.name for path in downloads)
        raise RepoError(f"expected pip to write one sdist for {spec.requirement}, got {names}")
    return downloads[0]


def repository_files(spec: RepoSpec, *, cache: Path | None = None) -> dict[str, bytes]:
    """A pin's source tree (its sdist with the top folder stripped) as POSIX path -> bytes.

    Regular files only, all of them (toolz's suite reads its version from the sdist's ``toolz.egg-info``).

    Raises:
        RepoError: The download failed or does not match the pin, or the archive holds an unsafe path.
    """
    archive = fetch_sdist(spec, cache=cache)
    files: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            path = _inner_path(member.name, archive)
            if member.isfile() and path is not None and _kept(path):
                files[path] = _read_member(tar, member)
    return dict(sorted(files.items()))


def _inner_path(name: str, archive: Path) -> str | None:
    """A member's path below the sdist's top folder; ``None`` for the top folder itself."""
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts:
        raise RepoError(f"expected relative paths inside {archive.name}, got {name!r}")
    return "/".join(parts[1:]) or None


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    stream = tar.extractfile(member)
    return stream.read() if stream is not None else b""


def _kept(path: str) -> bool:
    """Whether a path is part of a repository's files (not in a cache or VCS folder)."""
    return not any(part in SKIPPED_PARTS for part in path.split("/")[:-1])


def folder_files(folder: str | os.PathLike[str]) -> dict[str, bytes]:
    """A repository on this machine (e.g. a user's checkout) as POSIX path -> bytes, like :func:`repository_files`.

    Raises:
        RepoError: ``folder`` is not a folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise RepoError(f"expected a repository folder, got {str(folder)!r}, which is not a folder")
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and _kept(relative):
            files[relative] = path.read_bytes()
    return files


def is_test_file(path: str) -> bool:
    """Whether a path is test code by pytest's naming (``test_*.py``, ``*_test.py``, ``conftest.py``) or sits
    in a ``test``/``tests``/``testing`` folder."""
    parts = path.split("/")
    name = parts[-1]
    return (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
            or any(part in ("test", "tests", "testing") for part in parts[:-1]))


def library_files(files: Mapping[str, bytes], source_folders: Sequence[str],
                  test_paths: Sequence[str] = ()) -> dict[str, bytes]:
    """The Python files bugs may be planted in: under ``source_folders``, and neither under ``test_paths`` nor
    test code by :func:`is_test_file`.

    Args:
        files: A repository's files (:func:`repository_files`, :func:`folder_files`).
        source_folders: Package folders or modules, relative to the root (a pin's ``source_folders``).
        test_paths: The suite's paths (a pin's ``test_paths``).
    """
    return {path: data for path, data in files.items() if path.endswith(".py") and _under(path, source_folders)
            and not _under(path, test_paths) and not is_test_file(path)}


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in prefixes)

