"""An environment's ``pre_install`` commands: run once when it is built (not at reset), in a sandbox of the
building backend (no network, its limits), their changes kept in the tree; a failed one names itself, its exit
code and its output."""

from __future__ import annotations

import pytest

from agentgym_envs.errors import ImageBuildError
from agentgym_envs.swe.environment import environment_tree
from tasks.swe.environments import RepoEnvironment
from tests.conftest import require_backend


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def builder(request, backend_problems, tmp_path, monkeypatch) -> str:
    """The backend the pre_install commands run in, with a fresh build cache."""
    require_backend(request.param, backend_problems)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return request.param


def _environment(*commands: str) -> RepoEnvironment:
    return RepoEnvironment("me/lib", "1.0", pre_install=commands, dist_name="lib")


def test_pre_install_runs_once_at_build_and_its_changes_stay(builder):
    environment = _environment("echo configured > settings.txt", "mkdir -p data && printf 'x' > data/x.bin",
                               "rm agentrl-lock.json")
    logged: list[str] = []
    tree = environment_tree(environment, backend=builder, log=logged.append)
    assert (tree / "settings.txt").read_text() == "configured\n" and (tree / "data/x.bin").read_bytes() == b"x"
    assert not (tree / "agentrl-lock.json").exists()  # a removal is kept too
    assert (tree / "agentrl-testbed.pth").exists()  # the editable install was written before the commands ran
    assert sum("pre_install" in line for line in logged) == 3
    assert environment_tree(environment, backend=builder, log=logged.append) == tree
    assert sum("pre_install" in line for line in logged) == 3  # cached: not run again


@pytest.mark.parametrize(("command", "message"), [
    # a command that fails: its exit code and its output in the message
    ("echo 'no such thing' >&2; exit 3", r"pre_install command .*exit 3.* exited with 3; its output: no such thing"),
    # the sandbox has no network: a download fails (and so names itself)
    ("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
     r"(?s)pre_install command .*socket.* exited with 1; its output: .*(OSError|unreachable)"),
])
def test_a_failed_pre_install_command_stops_the_build_naming_it(builder, command, message):
    with pytest.raises(ImageBuildError, match=message):
        environment_tree(_environment("true", command), backend=builder)
