"""Building a per-repository environment: the tree (editable install, lock), the image, and a failed build that
names the package."""

from __future__ import annotations

import json

import pytest

from agentgym_envs.errors import ImageBuildError
from agentgym_envs.swe.environment import LOCK_FILE, PTH_FILE, environment_tree, pip_failure
from tasks.swe.environments import RepoEnvironment


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "agentrl" / "wheels"


def test_a_tree_without_requirements_is_the_editable_install_alone(cache):
    environment = RepoEnvironment("me/demo-lib", "1.2", package_roots=("src",), dist_name="demo-lib",
                                  dist_version="1.2")
    tree = environment_tree(environment)
    assert tree == cache / f"swe-env-{environment.build_key}-py311"
    assert (tree / PTH_FILE).read_text() == "/work/testbed/src\n"
    assert (tree / "demo_lib-1.2.dist-info" / "METADATA").read_text() == ("Metadata-Version: 2.1\nName: demo-lib\n"
                                                                         "Version: 1.2\n")
    assert json.loads((tree / LOCK_FILE).read_text()) == []
    assert environment_tree(environment) == tree  # cached: built once per key


def test_requirements_are_installed_and_locked_with_their_hashes(cache):
    tree = environment_tree(RepoEnvironment("me/lib", requirements=("six==1.17.0",), package_roots=(".",)))
    assert (tree / "six.py").is_file() and (tree / PTH_FILE).read_text() == "/work/testbed\n"
    (locked,) = json.loads((tree / LOCK_FILE).read_text())
    assert (locked["name"], locked["version"], len(locked["sha256"])) == ("six", "1.17.0", 64)


def test_a_failed_build_names_the_package_and_why(cache):
    environment = RepoEnvironment("me/lib", "1.0", requirements=("six==1.17.0", "agentrl-no-such-package==1.0"))
    with pytest.raises(ImageBuildError, match=r"the environment of me/lib 1.0 could not be built: "
                                              r"agentrl-no-such-package==1.0: no release matches"):
        environment_tree(environment)
    assert not list(cache.glob("swe-env-*"))  # no half tree left behind


@pytest.mark.parametrize(("output", "package", "why"), [
    ("ERROR: Could not find a version that satisfies the requirement foo==9 (from versions: 1.0)\n"
     "ERROR: No matching distribution found for foo==9", "foo==9", "no release matches (misspelt, or no wheel"),
    ("  error: subprocess-exited-with-error\nERROR: Failed to build cbar", "cbar", "its sdist did not build"),
    ("ERROR: Cannot install a==1 and b==2 because these package versions have conflicting dependencies.",
     "a==1 and b==2", "conflicting dependencies"),
    ("ERROR: something new", "(unknown package)", "ERROR: something new"),
])
def test_pip_failures_are_read_for_the_package_and_the_reason(output, package, why):
    found, reason = pip_failure(output)
    assert found == package and reason.startswith(why)
