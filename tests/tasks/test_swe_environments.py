"""Environments derived from a repository's own metadata, and a user's overrides: table tests of hand-written
repositories in each packaging style."""

from __future__ import annotations

import pytest

from tasks.errors import TaskError
from tasks.swe.environments import Overrides, RepoEnvironment, derive_environment, metadata_files, package_root

PYPROJECT = b'''[project]
name = "demo"
dependencies = ["idna>=3", "tomli; python_version < '3.11'", "colorama; sys_platform == 'win32'"]
[project.optional-dependencies]
test = ["pytest>=7", "freezegun"]
docs = ["sphinx"]
[dependency-groups]
tests = ["hypothesis"]
'''
SETUP_CFG = b'''[metadata]
name = demo-cfg
[options]
install_requires =
    six
    # a comment
    attrs>=20
[options.extras_require]
testing =
    mock
'''
SETUP_PY = b'''from setuptools import setup
setup(name="demo-py", install_requires=["requests"], tests_require=["responses"],
      extras_require={"tests": ["pytest-mock"], "docs": ["sphinx"]})
'''
TOX = b"[testenv]\ndeps =\n    -rrequirements.txt\n    pytest-xdist\n    {env:EXTRA:}\n    .\n"


@pytest.mark.parametrize(("files", "requirements", "root", "name"), [
    # pyproject: runtime deps (markers that fail on Linux / CPython 3.11 dropped), the test extra and group
    ({"pyproject.toml": PYPROJECT, "src/demo/__init__.py": b""},
     ("idna>=3", "pytest>=7", "freezegun", "hypothesis"), "src", "demo"),
    # setup.cfg: install_requires and a 'testing' extra; a flat layout
    ({"setup.cfg": SETUP_CFG, "demo/__init__.py": b""}, ("six", "attrs>=20", "mock"), ".", "demo-cfg"),
    # setup.py's literal lists, test extras only
    ({"setup.py": SETUP_PY, "demo.py": b""}, ("requests", "responses", "pytest-mock"), ".", "demo-py"),
    # a test requirements file and tox's deps (references, substitutions and the project itself skipped)
    ({"requirements-test.txt": b"# pins\nfreezegun==1.5.1\n-e .\n", "tox.ini": TOX, "src/solo.py": b""},
     ("freezegun==1.5.1", "pytest-xdist"), "src", "lib"),
    # nothing to read: no requirements, the repository's name
    ({"lib/__init__.py": b""}, (), ".", "lib"),
])
def test_environments_are_derived_from_each_packaging_style(files, requirements, root, name):
    environment = derive_environment("me/lib", "1.2", files)
    assert (environment.requirements, environment.package_roots, environment.dist_name) == (requirements, (root,),
                                                                                            name)


def test_a_version_that_is_not_pep_440_gives_version_0_in_the_metadata():
    assert derive_environment("me/lib", "main", {}).dist_version == "0"
    assert derive_environment("me/lib", "2.0", {}).dist_version == "2.0"


def test_package_root_needs_a_package_directly_under_src():
    assert package_root(["src/deep/pkg/__init__.py", "setup.py"]) == "."  # not directly under src/


def test_overrides_replace_add_and_set_limits_per_instance(tmp_path):
    path = tmp_path / "overrides.yaml"
    path.write_text("repositories:\n  me/lib:\n    '*': {extra_requirements: [freezegun==1.5.1], memory_mb: 2048}\n"
                    "    '1.2': {package_roots: [lib]}\n"
                    "instances:\n  me__lib-1: {test_timeout_s: 300}\n")
    derived = derive_environment("me/lib", "1.2", {"requirements-test.txt": b"mock\n"})
    fixed = Overrides.read(path).apply(derived, "me__lib-1")
    assert fixed == RepoEnvironment(repo="me/lib", version="1.2", requirements=("mock", "freezegun==1.5.1"),
                                    package_roots=("lib",), dist_name="lib", dist_version="1.2", memory_mb=2048,
                                    test_timeout_s=300)
    assert fixed.build_key != derived.build_key  # what is installed changed
    limits_only = Overrides(instances={"me__lib-1": {"memory_mb": 4096}}).apply(derived, "me__lib-1")
    assert limits_only.build_key == derived.build_key  # limits do not rebuild the environment


@pytest.mark.parametrize(("text", "message"), [
    ("repos: {}\n", "expected keys 'repositories' and/or 'instances', got \\['repos'\\]"),
    ("repositories:\n  me/lib:\n    '*': {requirement: [x]}\n", "got unknown \\['requirement'\\]"),
    ("repositories:\n  me/lib:\n    '*': {requirements: x}\n", "requirements: expected a list of strings"),
    ("repositories:\n  me/lib:\n    '*': {package_roots: [../up]}\n", "expected folders inside the repository"),
    ("repositories:\n  me/lib:\n    '*': {test_runner: nose}\n",
     "test_runner: expected one of \\['pytest', 'unittest', 'django', 'sympy'\\]"),
    ("repositories:\n  me/lib:\n    '*': {python: bin/python}\n", "python: expected an absolute path"),
    ("repositories:\n  me/lib:\n    '*': {image: 'sweb:1', requirements: [x]}\n", "an environment with an image "
     "\\(sweb:1\\) installs nothing"),
    ("repositories:\n  me/lib:\n    '*': {pre_install: 'echo hi'}\n", "pre_install: expected a list of strings"),
])
def test_a_bad_override_file_says_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "overrides.yaml"
    path.write_text(text)
    with pytest.raises(TaskError, match=message):
        Overrides.read(path).apply(derive_environment("me/lib", "1.2", {}))


def test_an_environment_round_trips_through_its_dict():
    environment = derive_environment("me/lib", "1.2", {"pyproject.toml": PYPROJECT})
    assert RepoEnvironment.from_dict(environment.to_dict()) == environment


def test_metadata_files_are_what_derivation_reads_and_derive_alike(tmp_path):
    files = {"pyproject.toml": PYPROJECT, "src/demo/__init__.py": b"x = 1\n", "src/demo/core.py": b"",
             "src/notes.txt": b"", "tests/test_demo.py": b"", "requirements-test.txt": b"mock\n"}
    for path, data in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    read = metadata_files(tmp_path)
    assert sorted(read) == ["pyproject.toml", "requirements-test.txt", "src/demo/__init__.py"]
    assert derive_environment("me/lib", "1", read) == derive_environment("me/lib", "1", files)


def test_pre_install_comes_from_an_override_and_is_part_of_the_build_key(tmp_path):
    path = tmp_path / "overrides.yaml"
    path.write_text("repositories:\n  me/lib:\n    '*': {pre_install: ['echo configured > settings.txt']}\n")
    derived = derive_environment("me/lib", "1.2", {})
    fixed = Overrides.read(path).apply(derived)
    assert fixed.pre_install == ("echo configured > settings.txt",)
    assert fixed.build_key != derived.build_key  # another tree: built apart
    assert RepoEnvironment.from_dict(fixed.to_dict()) == fixed
