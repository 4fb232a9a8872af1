"""The environment a repository's tests run in, per (repository, version): what to install and how to run them.

SWE-bench's harness keeps one hand-written spec per (repo, version) (``MAP_REPO_VERSION_TO_SPECS``: the Python,
the packages, ``pip_packages`` pins, ``pre_install`` steps, how the repository is installed, the test command)
and builds one environment image per hash of its install script. Here the spec is *derived* from the
repository's own metadata, and a user's override file corrects or pins what the derivation gets wrong:

    ====================  ========================================================================================
    field                 derived from
    ====================  ========================================================================================
    ``requirements``      ``[project] dependencies`` and the test extras / dependency groups of ``pyproject.toml``
                          (``test``, ``tests``, ``testing``); ``install_requires`` and the test extras of
                          ``setup.cfg``; the literal ``install_requires`` / ``tests_require`` lists of
                          ``setup.py``; ``requirements*test*.txt``-style files; ``deps`` of tox's ``[testenv]``
    ``package_roots``     ``src`` when the packages live there (a ``src/`` layout), else the repository root
    ``dist_name``         the project's name (``pyproject.toml``, ``setup.cfg``, ``setup.py``, else the repo's)
    ``test_runner``       ``pytest`` (the guard reads its report); ``unittest``, ``django`` or ``sympy`` only by
                          an override (:mod:`tasks.swe.runners`: their runs are not tamper-checked)
    ``pre_install``       none: commands run once when the environment is built, by an override
    ``image``, ``python`` none: an instance's ``image`` (a SWE-bench image the user loaded into the local Docker)
                          runs its tests with that image's interpreter (:data:`IMAGE_PYTHON` unless set)
    ====================  ========================================================================================

Requirements whose environment marker does not hold on Linux with CPython 3.11 are left out. A pytest among them
is the one the tests run with, on both backends (the base image has pytest 7.2, a host may have 9, and they report
some tests differently), so the environment decides, not the backend; without one, the sandbox's own pytest runs
them.

The repository itself is installed *editable*: its package roots go on ``sys.path`` (a ``.pth`` file) and its
distribution metadata is written beside them, so ``importlib.metadata.version(name)`` answers and what the tests
import is what the agent edited (see :mod:`agentgym_envs.swe.environment`, which builds it).

Override file (YAML or JSON), by repository then version (``"*"`` for any), then by instance id::

    repositories:
      python-humanize/humanize:
        "*": {requirements: ["freezegun==1.5.1"], memory_mb: 2048}
    instances:
      python-humanize__humanize-1: {test_timeout_s: 300}

A repository's fields replace the derived ones (``requirements`` replaces the list; ``extra_requirements`` adds
to it); an instance's fields (``memory_mb``, ``test_timeout_s``) replace its environment's limits.

Example:
    >>> files = {"pyproject.toml": b'[project]\\nname = "demo"\\ndependencies = ["idna>=3"]\\n'
    ...          b'[project.optional-dependencies]\\ntest = ["pytest", "freezegun"]\\n', "src/demo/__init__.py": b""}
    >>> spec = derive_environment("me/demo", "1.0", files)
    >>> spec.requirements, spec.package_roots, spec.dist_name
    (('idna>=3', 'pytest', 'freezegun'), ('src',), 'demo')
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tasks.errors import TaskError

TEST_EXTRAS = ("test", "tests", "testing")
"""Names of the extras and dependency groups that hold a project's test dependencies."""

REQUIREMENT_FILES = ("requirements-test.txt", "requirements_test.txt", "test-requirements.txt",
                     "test_requirements.txt", "requirements-tests.txt", "requirements/test.txt",
                     "requirements/tests.txt", "requirements/testing.txt", "tests/requirements.txt")
"""Test requirement files looked for, relative to the repository's root."""

TEST_RUNNERS = ("pytest", "unittest", "django", "sympy")
"""Test runners an environment may name: ``pytest`` (tamper-checked by the guard), ``unittest`` and the
per-repository commands of :data:`~tasks.swe.runners.LOG_RUNNERS` (not tamper-checked)."""

IMAGE_PYTHON = "/opt/miniconda3/envs/testbed/bin/python"
"""The interpreter of SWE-bench's instance images (its conda env ``testbed``), used for an environment with an
``image`` and no ``python``."""

ENVIRONMENT_VERSION = 1
"""Bump when the build of an environment changes in a way its fields do not show (it is part of the hash)."""

_MARKER_ENV = {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
               "platform_machine": "x86_64", "platform_python_implementation": "CPython",
               "implementation_name": "cpython", "python_version": "3.11", "python_full_version": "3.11.2",
               "extra": ""}
"""Where a requirement's environment marker is evaluated: the sandbox's interpreter."""


@dataclass(frozen=True)
class RepoEnvironment:
    """How one (repository, version)'s tests are installed and run.

    Attributes:
        repo: ``owner/name``.
        version: The instances' ``version`` (``""`` when they have none).
        requirements: pip requirements installed for the tests (runtime and test dependencies), in order.
        package_roots: Folders of the repository, relative to its root, that go on ``sys.path`` (``"."`` for the
            root, ``"src"`` for a src layout).
        dist_name: The distribution the repository installs (its ``importlib.metadata`` name).
        dist_version: The version its metadata says (``version``, or ``0`` when none is known).
        test_runner: One of :data:`TEST_RUNNERS`: ``pytest`` (tamper-checked by the guard) or ``unittest``.
        memory_mb: The sandbox memory its suite needs (None: the env's default).
        test_timeout_s: The grading run's time limit (None: the env's default).
        pre_install: Shell commands run once when the environment is built, after pip, in its installed tree
            (in a sandbox, within its limits; SWE-bench's ``pre_install``); part of the build key.
        image: A Docker image in the local daemon to run the tests in, with the repository's interpreter
            (``docker load`` of a saved SWE-bench image); nothing is built or installed for it, and only the docker
            backend can run it.
        python: The interpreter in the sandbox that runs the tests and the agent's ``python`` (an absolute path;
            ``""``: the sandbox's own, or :data:`IMAGE_PYTHON` with an ``image``).
    """

    repo: str
    version: str = ""
    requirements: tuple[str, ...] = ()
    package_roots: tuple[str, ...] = (".",)
    dist_name: str = ""
    dist_version: str = "0"
    test_runner: str = "pytest"
    memory_mb: int | None = None
    test_timeout_s: float | None = None
    pre_install: tuple[str, ...] = ()
    image: str = ""
    python: str = ""

    def __post_init__(self) -> None:
        if self.test_runner not in TEST_RUNNERS:
            raise TaskError(f"{self.repo}: test_runner: expected one of {list(TEST_RUNNERS)}, got {self.test_runner!r}")
        bad = [root for root in self.package_roots if root.startswith("/") or ".." in root.split("/")]
        if bad:
            raise TaskError(f"{self.repo}: package_roots: expected folders inside the repository, got {bad}")
        if self.python and not self.python.startswith("/"):
            raise TaskError(f"{self.repo}: python: expected an absolute path in the sandbox, got {self.python!r}")
        if self.image and (self.requirements or self.pre_install):
            raise TaskError(f"{self.repo}: an environment with an image ({self.image}) installs nothing: expected no "
                            f"requirements and no pre_install, got {list(self.requirements)} and "
                            f"{list(self.pre_install)} (the image has its own environment)")

    @property
    def interpreter(self) -> str:
        """The interpreter that runs the tests (``""``: the sandbox's own)."""
        return self.python or (IMAGE_PYTHON if self.image else "")

    @property
    def build_key(self) -> str:
        """A 16-hex-digit hash of what the installed tree depends on (not the limits): one build per key."""
        recipe = {"requirements": list(self.requirements), "roots": list(self.package_roots),
                  "dist": [self.dist_name, self.dist_version], "version": ENVIRONMENT_VERSION}
        if self.pre_install:  # absent otherwise, so that the environments built before it keep their key
            recipe["pre_install"] = list(self.pre_install)
        return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples as lists)."""
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RepoEnvironment:
        """The inverse of :meth:`to_dict`.

        Raises:
            TaskError: An unknown field, or a field of the wrong kind.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise TaskError(f"environment: expected fields among {sorted(known)}, got unknown {unknown}")
        values = dict(data)
        for name in ("requirements", "package_roots", "pre_install"):
            if name in values:
                if isinstance(values[name], str) or not all(isinstance(item, str) for item in values[name]):
                    raise TaskError(f"environment {data.get('repo')}: {name}: expected a list of strings, got "
                                    f"{values[name]!r}")
                values[name] = tuple(values[name])
        return cls(**values)


# ------------------------------------------------------------------------------------------------ derivation


def derive_environment(repo: str, version: str, files: Mapping[str, bytes]) -> RepoEnvironment:
    """The environment of ``repo`` at ``version``, derived from its files (see the module docstring).

    Args:
        repo: ``owner/name``.
        version: The instances' version.
        files: The repository's files at the instance's commit (path -> bytes).
    """
    pyproject = _toml(files.get("pyproject.toml"))
    setup_cfg = _ini(files.get("setup.cfg"))
    requirements = [*_pyproject_requirements(pyproject), *_setup_cfg_requirements(setup_cfg),
                    *_setup_py_requirements(files.get("setup.py")), *_file_requirements(files),
                    *_tox_requirements(_ini(files.get("tox.ini")))]
    name = (pyproject.get("project", {}).get("name") or _cfg(setup_cfg, "metadata", "name")
            or _setup_py_name(files.get("setup.py")) or repo.rsplit("/", 1)[-1])
    return RepoEnvironment(repo=repo, version=version, requirements=tuple(_kept(requirements)),
                           package_roots=(package_root(files),), dist_name=str(name),
                           dist_version=_metadata_version(version))


METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", *REQUIREMENT_FILES)
"""The files :func:`derive_environment` reads."""


def metadata_files(folder: str | os.PathLike[str]) -> dict[str, bytes]:
    """What :func:`derive_environment` needs of a repository folder, without reading the whole tree: its
    :data:`METADATA_FILES` and the paths (empty contents) of the modules and packages directly under ``src/``."""
    root = Path(folder)
    files = {name: (root / name).read_bytes() for name in METADATA_FILES if (root / name).is_file()}
    src = root / "src"
    for entry in sorted(src.iterdir()) if src.is_dir() else []:
        if entry.is_file() and entry.suffix == ".py":
            files[f"src/{entry.name}"] = b""
        elif (entry / "__init__.py").is_file():
            files[f"src/{entry.name}/__init__.py"] = b""
    return files


def package_root(files: Iterable[str]) -> str:
    """``"src"`` when a package or module lives directly under ``src/`` (a src layout), else ``"."``."""
    for path in files:
        parts = path.split("/")
        if parts[0] == "src" and ((len(parts) == 3 and parts[2] == "__init__.py")
                                  or (len(parts) == 2 and parts[1].endswith(".py"))):
            return "src"
    return "."


def _metadata_version(version: str) -> str:
    """A PEP 440 version for the metadata: the instances' version when it is one, else ``0``."""
    return version if re.fullmatch(r"\d+(\.\d+)*([a-z]+\d*)?(\.post\d+)?(\.dev\d+)?", version) else "0"


VERSION_FILE_HEADER = "# written by agentrl: the version file the build backend derives from VCS metadata\n"
"""The first line of a version file :func:`vcs_version_files` writes."""


def vcs_version_files(files: Mapping[str, bytes], version: str) -> dict[str, bytes]:
    """The version files a VCS-versioned build backend would write, for those the tree lacks.

    hatch-vcs (``[tool.hatch.build.hooks.vcs] version-file``) and setuptools-scm (``[tool.setuptools_scm]
    version_file`` or ``write_to``) write a module such as ``src/pkg/_version.py`` from the git tags when the
    project is built or installed; the file is git-ignored, so a checkout or a folder at an instance's commit does
    not hold it, and a package that imports it fails at import. Here the repository is not installed (its roots
    go on ``sys.path``), so the file is written into the tree with ``version``, as ``pip install -e`` would.

    Args:
        files: The repository's files (path -> bytes).
        version: The version to write (the environment's ``dist_version``).

    Returns:
        Path -> contents of each version file that ``pyproject.toml`` names and ``files`` lacks.

    Raises:
        TaskError: The project's own template names a field other than ``version`` and ``version_tuple``.

    Example:
        >>> pyproject = b'[tool.hatch.build.hooks.vcs]\\nversion-file = "src/demo/_version.py"\\n'
        >>> written = vcs_version_files({"pyproject.toml": pyproject}, "4.12")
        >>> print(written["src/demo/_version.py"].decode().splitlines()[-1])
        __version_tuple__ = version_tuple = (4, 12)
    """
    tool = _toml(files.get("pyproject.toml")).get("tool", {})
    hatch = tool.get("hatch", {}).get("build", {}).get("hooks", {}).get("vcs", {})
    scm = tool.get("setuptools_scm", {})
    wanted = [(hatch.get("version-file"), hatch.get("template")),
              (scm.get("version_file") or scm.get("write_to"),
               scm.get("version_file_template") or scm.get("write_to_template"))]
    return {path: _version_file_text(path, template, version).encode() for path, template in wanted
            if isinstance(path, str) and path and path not in files}


def _version_file_text(path: str, template: str | None, version: str) -> str:
    version_tuple = tuple(int(part) if part.isdigit() else part for part in version.split("."))
    if template is None:
        template = ("{version}\n" if not path.endswith(".py") else
                    VERSION_FILE_HEADER + "__version__ = version = {version!r}\n"
                    "__version_tuple__ = version_tuple = {version_tuple!r}\n")
    try:
        return template.format(version=version, version_tuple=version_tuple)
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        raise TaskError(f"{path}: expected a version file template with the fields version and version_tuple, got "
                        f"{template!r} ({type(exc).__name__}: {exc}); write the file into the repository folder "
                        "yourself") from exc


def _toml(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _ini(data: bytes | None) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    if data:
        try:
            parser.read_string(data.decode("utf-8"))
        except (configparser.Error, UnicodeDecodeError):
            return configparser.ConfigParser(interpolation=None)
    return parser


def _cfg(parser: configparser.ConfigParser, section: str, key: str) -> str:
    return parser.get(section, key, fallback="").strip()


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def _pyproject_requirements(pyproject: Mapping[str, Any]) -> list[str]:
    project = pyproject.get("project", {})
    found = list(project.get("dependencies", []))
    extras = project.get("optional-dependencies", {})
    groups = pyproject.get("dependency-groups", {})
    for name in TEST_EXTRAS:
        found += extras.get(name, [])
        found += [item for item in groups.get(name, []) if isinstance(item, str)]
    return found


def _setup_cfg_requirements(parser: configparser.ConfigParser) -> list[str]:
    found = _lines(_cfg(parser, "options", "install_requires"))
    for name in TEST_EXTRAS:
        found += _lines(_cfg(parser, "options.extras_require", name))
    return found + _lines(_cfg(parser, "options", "tests_require"))


def _setup_py_requirements(data: bytes | None) -> list[str]:
    """The literal ``install_requires``, ``tests_require`` and test ``extras_require`` lists of a ``setup.py``."""
    found: list[str] = []
    for call in _setup_calls(data):
        for keyword in call.keywords:
            if keyword.arg in ("install_requires", "tests_require"):
                found += _literal_strings(keyword.value)
            elif keyword.arg == "extras_require" and isinstance(keyword.value, ast.Dict):
                for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value in TEST_EXTRAS:
                        found += _literal_strings(value)
    return found


def _setup_py_name(data: bytes | None) -> str:
    for call in _setup_calls(data):
        for keyword in call.keywords:
            if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return ""


def _setup_calls(data: bytes | None) -> list[ast.Call]:
    if not data:
        return []
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "setup"]


def _literal_strings(node: ast.expr) -> list[str]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return []
    return [item for item in value if isinstance(item, str)] if isinstance(value, list | tuple) else []


def _file_requirements(files: Mapping[str, bytes]) -> list[str]:
    found: list[str] = []
    for name in REQUIREMENT_FILES:
        if name in files:
            found += [line for line in _lines(files[name].decode("utf-8", "replace")) if not line.startswith("-")]
    return found


def _tox_requirements(parser: configparser.ConfigParser) -> list[str]:
    return [line for line in _lines(_cfg(parser, "testenv", "deps"))
            if not line.startswith("-") and "{" not in line and not line.startswith(".")]


def _kept(requirements: Iterable[str]) -> list[str]:
    """The requirements once each (by text), without those whose marker fails."""
    from packaging.requirements import InvalidRequirement, Requirement

    kept: dict[str, None] = {}
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(_MARKER_ENV):
            continue
        requirement.marker = None
        kept[str(requirement)] = None
    return list(kept)


# ------------------------------------------------------------------------------------------------ overrides


@dataclass(frozen=True)
class Overrides:
    """A user's corrections of derived environments (see the module docstring's file format).

    Attributes:
        repositories: ``repo -> version (or "*") -> fields``.
        instances: ``instance_id -> fields`` (``memory_mb``, ``test_timeout_s``).
    """

    repositories: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    instances: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | os.PathLike[str] | None) -> Overrides:
        """The overrides of a YAML or JSON file (none when ``path`` is None).

        Raises:
            TaskError: The file is not a mapping with ``repositories`` and/or ``instances``.
        """
        if path is None:
            return cls()
        import yaml

        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        unknown = sorted(set(data) - {"repositories", "instances"}) if isinstance(data, dict) else ["(not a mapping)"]
        if unknown:
            raise TaskError(f"{path}: expected keys 'repositories' and/or 'instances', got {unknown}")
        return cls(repositories=data.get("repositories") or {}, instances=data.get("instances") or {})

    def apply(self, environment: RepoEnvironment, instance_id: str = "") -> RepoEnvironment:
        """``environment`` with the repository's fields for its version (or ``"*"``), then the instance's.

        Raises:
            TaskError: An unknown field.
        """
        versions = self.repositories.get(environment.repo, {})
        chosen = {**versions.get("*", {}), **versions.get(environment.version, {})}
        chosen.update(self.instances.get(instance_id, {}))
        extra = chosen.pop("extra_requirements", [])
        if isinstance(extra, str) or not isinstance(extra, list):
            raise TaskError(f"{environment.repo}: extra_requirements: expected a list of strings, got {extra!r}")
        values = {**environment.to_dict(), **chosen}
        if extra and isinstance(values["requirements"], list):
            values["requirements"] = [*values["requirements"], *extra]
        return RepoEnvironment.from_dict(values)
