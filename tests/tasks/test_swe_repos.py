"""The pinned repositories: fetched with pip into a cache, checked by sha256, read as path -> bytes.

Fetching uses the real PyPI through pip (cached in the user's cache folder, so it downloads once); the tests
skip, saying so, only when PyPI cannot be reached.
"""

from __future__ import annotations

import dataclasses
import shutil
import urllib.request
from pathlib import Path

import pytest

from tasks.errors import UnknownTaskError
from tasks.swe.__main__ import main
from tasks.swe.repos import (
    CACHE_ENV,
    PINS,
    RepoError,
    cache_folder,
    fetch_sdist,
    folder_files,
    is_test_file,
    library_files,
    pin,
    pin_environment,
    repository_files,
    sha256_of,
)


def pypi_reachable() -> bool:
    try:
        urllib.request.urlopen("https://pypi.org/simple/six/", timeout=10).close()
    except OSError:
        return False
    return True


needs_pypi = pytest.mark.skipif(not pypi_reachable(), reason="PyPI cannot be reached to fetch the pinned sdists")


def test_pins_are_complete() -> None:
    assert len(PINS) >= 12
    for name, spec in PINS.items():
        assert spec.name == name and len(spec.sha256) == 64
        assert spec.license in ("MIT", "BSD-3-Clause", "Apache-2.0")
        assert spec.source_folders and spec.test_paths and spec.suite_seconds < 5 and spec.tests_passed > 50
        assert spec.requirement == f"{name}=={spec.version}" and spec.repo == f"pypi/{name}"
        # an environment's requirements are pinned, so that every build installs the same packages
        assert all("==" in requirement for requirement in spec.requirements), spec.requirements
    assert sum(bool(spec.requirements) for spec in PINS.values()) >= 3
    assert sum(folder.startswith("src/") for spec in PINS.values() for folder in spec.source_folders) >= 3


@needs_pypi
@pytest.mark.parametrize(("name", "requirements", "roots"), [
    ("toolz", (), (".",)),  # derived: coverage, pycodestyle and pytest, unpinned; the pin's () replaces them
    ("isodate", (), ("src",)),  # a src layout, no dependency
    ("face", ("boltons==26.2.0",), (".",)),  # a runtime dependency
    ("funcy", ("whatever==0.7",), (".",)),  # a test-only dependency
    ("humanize", ("freezegun==1.5.5", "python-dateutil==2.9.0.post0"), ("src",)),  # both
])
def test_a_pins_environment_is_derived_with_its_own_requirements(name: str, requirements: tuple[str, ...],
                                                                 roots: tuple[str, ...]) -> None:
    spec = PINS[name]
    environment = pin_environment(spec, repository_files(spec))
    assert (environment.repo, environment.version, environment.dist_version) == (spec.repo, spec.version,
                                                                                  spec.version)
    assert environment.requirements == requirements and environment.package_roots == roots
    assert environment.dist_name.lower() == name and environment.test_runner == "pytest"


def test_unknown_pin() -> None:
    with pytest.raises(UnknownTaskError, match="did you mean 'toolz'"):
        pin("tolz")


def test_cache_folder_override(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert cache_folder() == tmp_path
    monkeypatch.delenv(CACHE_ENV)
    assert cache_folder() == Path.home() / ".cache" / "agentrl" / "swe" / "sdists"


@needs_pypi
@pytest.mark.parametrize("name", sorted(PINS))
def test_every_pin_fetches_and_has_its_suite_and_library(name: str) -> None:
    spec = PINS[name]
    archive = fetch_sdist(spec)
    assert sha256_of(archive) == spec.sha256 and archive.parent == cache_folder()
    assert Path(__file__).resolve().parents[2] not in archive.resolve().parents  # never inside this repository
    files = repository_files(spec)
    assert all(not path.startswith(("/", f"{name}-")) for path in files)  # the sdist's top folder is stripped
    for test_path in spec.test_paths:
        assert test_path in files or any(path.startswith(test_path + "/") for path in files), test_path
    library = library_files(files, spec.source_folders, spec.test_paths)
    assert library and all(not is_test_file(path) for path in library)
    assert all(path.endswith(".py") for path in library)


@needs_pypi
def test_a_wrong_pin_fails_with_a_clear_message(tmp_path) -> None:
    wrong = dataclasses.replace(PINS["six"], sha256="0" * 64)
    with pytest.raises(RepoError, match=r"expected sha256 0{64} for the sdist of six==1\.17\.0, got ff70335d"):
        fetch_sdist(wrong, cache=tmp_path)
    assert not any(tmp_path.glob("*.tar.gz"))  # nothing unverified is kept


@needs_pypi
def test_a_version_that_does_not_exist_fails_with_pips_reason(tmp_path) -> None:
    missing = dataclasses.replace(PINS["six"], version="0.0.0.404")
    with pytest.raises(RepoError, match=r"expected pip to download the sdist of six==0\.0\.0\.404, got exit code"):
        fetch_sdist(missing, cache=tmp_path)


@needs_pypi
def test_a_corrupted_cache_entry_is_fetched_again_and_the_fetch_says_so(tmp_path, capsys) -> None:
    spec = PINS["six"]
    shutil.copy(fetch_sdist(spec), tmp_path / "six-1.17.0.tar.gz")
    (tmp_path / "six-1.17.0.tar.gz").write_bytes(b"tampered")
    capsys.readouterr()
    assert sha256_of(fetch_sdist(spec, cache=tmp_path)) == spec.sha256
    lines = capsys.readouterr().err.splitlines()  # on stderr, flushed, terminal or not
    assert lines[0] == f"fetching the sdist of six==1.17.0 from PyPI (once; kept in {tmp_path}) ..."
    assert " done in " in lines[-1]
    fetch_sdist(spec, cache=tmp_path)  # cached: silent
    assert capsys.readouterr().err == ""


def test_folder_files_skips_caches_and_vcs(tmp_path) -> None:
    for path in ("pkg/mod.py", "pkg/__pycache__/mod.cpython-311.pyc", ".git/HEAD", "tests/test_mod.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    assert sorted(folder_files(tmp_path)) == ["pkg/mod.py", "tests/test_mod.py"]
    with pytest.raises(RepoError, match="not a folder"):
        folder_files(tmp_path / "missing")


@pytest.mark.parametrize(("path", "library"), [
    ("pkg/core.py", True),
    ("pkg/tests/test_core.py", False),  # a test file under the package
    ("pkg/testing/helpers.py", False),  # a test-support folder
    ("pkg/conftest.py", False),
    ("pkg/core_test.py", False),
    ("pkg/data.txt", False),  # not Python
    ("other/core.py", False),  # not under the source folders
    ("pkg/suite/check.py", False),  # under the suite's test paths
])
def test_library_files(path: str, library: bool) -> None:
    assert (path in library_files({path: b""}, ["pkg"], ["pkg/suite"])) == library


@needs_pypi
def test_cli_fetch(capsys) -> None:
    assert main(["fetch", "--pin", "six"]) == 0
    assert f"six==1.17.0: {cache_folder() / 'six-1.17.0.tar.gz'}" in capsys.readouterr().out
