"""SWE-v0 on an instance whose ``image`` is a Docker image the user loaded, as with a saved SWE-bench image.

No registry is reachable, so the test makes such an image itself: agentrl's base image with the repository at
``/testbed`` (a ``src/`` layout, buggy at its base commit) and its own interpreter at another path, a venv at
``/opt/testbed-env`` that holds a dependency the base image lacks (``calcdep``) and an editable install of
``/testbed`` (a ``.pth``, as ``pip install -e .`` writes one). The image goes through ``docker save`` and
``docker load``, then the instance file names it: the env reads the tree from the image's ``/testbed``, runs the
tests with the venv's interpreter (without it ``calcdep`` does not import) and the agent's edits ahead of the
image's install of ``/testbed``: the fix resolves, no change does not.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_envs.errors import EnvConfigError
from agentgym_envs.policies.base import tool_call_action
from agentgym_envs.swe import SWEEnv
from agentgym_envs.swe.__main__ import main
from tasks.swe.instances import load_swebench
from tests.agentgym_envs.swe.conftest import CLAMP_BUG

IMAGE = "agentrl-test/sweb.eval.calc-1:latest"
VENV_PYTHON = "/opt/testbed-env/bin/python"
TESTS = b'''from calcdep import LIMIT

from calc import clamp


def test_clamp_high():
    assert clamp(11, 0, LIMIT) == LIMIT


def test_clamp_low():
    assert clamp(-1, 0, LIMIT) == 0
'''
TREE = {"src/calc/__init__.py": b"from calc.ops import add, clamp, mul\n", "src/calc/ops.py": CLAMP_BUG,
        "tests/test_ops.py": TESTS, "setup.cfg": b"[metadata]\nname = calc\n"}
FIX = ("diff --git a/src/calc/ops.py b/src/calc/ops.py\n--- a/src/calc/ops.py\n+++ b/src/calc/ops.py\n"
       "@@ -7,4 +7,4 @@ def mul(a, b):\n \n \n def clamp(x, lo, hi):\n-    return max(lo, min(x, hi - 1))\n"
       "+    return max(lo, min(x, hi))\n")
INSTANCE = {"instance_id": "calc__calc-1", "repo": "calc/calc", "base_commit": "abc123", "image": IMAGE,
            "problem_statement": "clamp(11, 0, 10) gives 9", "patch": FIX, "test_patch": "", "version": "1.0",
            "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp_high"]),
            "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp_low"])}
SETUP = ("python3 -m venv --without-pip --system-site-packages /opt/testbed-env && "
         "mv /stage/calcdep.py /opt/testbed-env/lib/python3.11/site-packages/ && "
         "echo /testbed/src > /opt/testbed-env/lib/python3.11/site-packages/__editable__.calc-1.0.pth && "
         "mv /stage/testbed /testbed && rm -r /stage && rm /usr/bin/pkill /usr/bin/pgrep")
"""What the image's build does: the venv (pytest from the system's site), its dependency and its editable install;
and no procps' pkill (SWE-bench's Ubuntu images lack it: the sandbox's reset must not need it)."""


def _archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data in {**{f"stage/testbed/{p}": d for p, d in TREE.items()},
                           "stage/calcdep.py": b"LIMIT = 10\n"}.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build_swebench_like_image(tag: str) -> None:
    """Build ``tag`` from the base image (a container that runs :data:`SETUP` with no network, committed)."""
    import docker

    from agentgym_envs.sandbox.image import build_base_image

    client = docker.from_env()
    container = client.containers.create(build_base_image(client=client), ["sh", "-c", SETUP], network_mode="none",
                                         user="0:0")
    try:
        container.put_archive("/", _archive())
        container.start()
        assert container.wait(timeout=120)["StatusCode"] == 0, container.logs()
        repository, _, version = tag.rpartition(":")
        container.commit(repository=repository, tag=version)
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def loaded_image(tmp_path_factory: pytest.TempPathFactory, backend_problems: dict[str, str | None]) -> Iterator[str]:
    """The image built, saved to a file, removed and loaded back (``docker load -i``), as a user would have it."""
    from tests.conftest import require_backend

    require_backend("docker", backend_problems)
    saved = tmp_path_factory.mktemp("image") / "calc-1.tar"
    build_swebench_like_image(IMAGE)
    subprocess.run(["docker", "save", IMAGE, "-o", str(saved)], check=True, timeout=300)
    subprocess.run(["docker", "rmi", IMAGE], check=True, capture_output=True, timeout=120)
    subprocess.run(["docker", "load", "-i", str(saved)], check=True, capture_output=True, timeout=300)
    try:
        yield IMAGE
    finally:
        subprocess.run(["docker", "rmi", "-f", IMAGE], capture_output=True, timeout=120)


@pytest.fixture
def instance_file(tmp_path: Path) -> Path:
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps(INSTANCE) + "\n")
    return path


@pytest.fixture
def overrides(tmp_path: Path) -> Path:
    """The image's interpreter is not SWE-bench's conda one: an override names it."""
    path = tmp_path / "overrides.yaml"
    path.write_text(f"repositories:\n  calc/calc:\n    '*': {{python: {VENV_PYTHON}}}\n")
    return path


def _episode(env: SWEEnv, commands: list[str]) -> tuple[float, dict, list[str]]:
    env.reset(seed=0)
    outputs = []
    for command in commands:
        obs, *_ = env.step(tool_call_action("bash", command=command))
        outputs.append(obs)
    _, reward, terminated, _, info = env.step(tool_call_action("submit"))
    assert terminated
    return reward, info, outputs


@pytest.mark.docker
def test_an_instance_in_a_loaded_image_runs_with_its_interpreter_and_grades(loaded_image, instance_file,
                                                                             overrides):
    (task,) = load_swebench(instance_file)  # no repository: the tree is the image's /testbed
    assert task.metadata["environment"]["image"] == IMAGE
    env = SWEEnv(sandbox="docker", tasks=[task])  # SWE-bench's conda interpreter is not in this image
    try:
        with pytest.raises(EnvConfigError, match=r"expected the environment.s interpreter /opt/miniconda3/.*set "
                                                 r"'python'"):
            env.reset(seed=0)
    finally:
        env.close()
    assert main(["validate", str(instance_file), "--sandbox", "docker", "--overrides", str(overrides)]) == 0
    env = SWEEnv(sandbox="docker", tasks=load_swebench(instance_file, overrides=overrides))
    try:
        reward, info, (where,) = _episode(env, ["python -c 'import calc, calcdep, sys; print(calc.__file__, "
                                                "sys.executable)'"])
        assert "/work/testbed/src/calc/__init__.py" in where and VENV_PYTHON in where  # the agent's tree, the venv
        assert reward == 0.0 and info["grading"]["valid"], info["grading"]
        reward, info, _ = _episode(env, ["sed -i 's/hi - 1/hi/' src/calc/ops.py"])
        assert reward == 1.0, info["grading"]
        assert info["grading"]["runner"] == "pytest" and info["grading"]["tamper_checked"]
    finally:
        env.close()


@pytest.mark.docker
def test_an_absent_image_says_to_load_it(instance_file, docker_backend):
    absent = {**INSTANCE, "image": "agentrl-test/never-loaded:1"}
    instance_file.write_text(json.dumps(absent) + "\n")
    with pytest.raises(EnvConfigError, match=r"docker load -i FILE.tar.*or drop the instance's 'image'"):
        SWEEnv(sandbox="docker", tasks=load_swebench(instance_file))


def test_bwrap_cannot_run_a_docker_image(instance_file):
    with pytest.raises(EnvConfigError, match="bwrap cannot run a Docker image"):
        SWEEnv(sandbox="bwrap", tasks=load_swebench(instance_file))


def test_an_instance_with_neither_repository_nor_image_is_refused_at_load(instance_file):
    instance_file.write_text(json.dumps({**INSTANCE, "image": ""}) + "\n")
    with pytest.raises(Exception, match="expected where the repository of calc__calc-1 is"):
        load_swebench(instance_file)


@pytest.mark.docker
def test_a_reset_kills_what_the_agent_left_in_an_image_without_procps(loaded_image):
    from agentgym_envs.sandbox.docker import KILL_SCRIPT, DockerSandbox

    sandbox = DockerSandbox(image=loaded_image)
    try:
        sandbox.run_code("import os, signal, subprocess\n"
                         "left = subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
                         "stopped = subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
                         "os.kill(stopped.pid, signal.SIGSTOP)")
        assert sandbox._exec_status(KILL_SCRIPT, user="0:0") == 0
        _, output = sandbox.container.exec_run(["sh", "-c", "for d in /proc/[0-9]*; do stat -c %u $d; done"],
                                               user="0:0")
        assert "65534" not in output.decode().split()  # the kernel, the leftover and the stopped one: all gone
        sandbox.reset()
        assert sandbox.run_code("print(6 * 7)").output.strip() == "42"
    finally:
        sandbox.close()
