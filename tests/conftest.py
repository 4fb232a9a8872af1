"""Shared fixtures: which real sandbox backends work on this machine, and sandboxes on each of them.

A test that takes the ``backend`` (or ``sandbox``) fixture runs once per real backend, marked
``docker`` or ``bwrap``; one that takes ``browser_backend`` launches Chromium (WebShop's browser
mode). A backend that cannot run here skips its tests with the reason, unless
``AGENTRL_REQUIRE_BACKENDS`` (comma-separated, e.g. ``docker,bwrap,browser``; CI sets it) names it:
then the tests fail, so that a broken set-up cannot pass as skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytest_plugins = ["tests.durations", "pytester"]  # slow tests by measurement; pytester for tests/test_durations.py

# No model hub anywhere in the tests: the tiny model is built locally, and nothing may phone home.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

if TYPE_CHECKING:
    from agentgym_envs.sandbox import KernelSandbox, SandboxLimits

REAL_BACKENDS = ("docker", "bwrap")

TEST_LIMITS_KWARGS = {"timeout_s": 2.0, "memory_mb": 256, "pids": 32, "disk_mb": 16, "output_bytes": 2048}
"""Small limits, so that every limit test trips quickly on a small CI machine."""


def docker_unavailable_reason() -> str | None:
    """Why the docker backend cannot run here, or None when it can."""
    from agentgym_envs.sandbox.image import base_image_tag, image_exists
    from agentgym_envs.sandbox.system import docker_daemon_reachable

    if not docker_daemon_reachable():
        return "no Docker daemon answers (run `python -m agentgym_envs.sandbox setup` as root)"
    import docker

    client = docker.from_env()
    try:
        tag = base_image_tag()
        if not image_exists(client, tag):
            return f"the sandbox image {tag} is not built (run `python -m agentgym_envs.sandbox setup`)"
    finally:
        client.close()
    return None


def bwrap_unavailable_reason() -> str | None:
    """Why the bwrap backend cannot run here, or None when it can."""
    from agentgym_envs.sandbox.bwrap import bwrap_available

    if not bwrap_available():
        return "bubblewrap is missing or cannot create namespaces (run `apt-get install bubblewrap`)"
    return None


def browser_unavailable_reason() -> str | None:
    """Why WebShop's browser mode cannot run here (no Playwright, no chromium), or None when it can."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -e '.[web]')"
    if shutil.which("chromium") is None:
        return "no chromium on PATH (run `python -m agentgym_envs.sandbox setup` as root, or apt-get install chromium)"
    return None


def required_backends() -> set[str]:
    """The backends ``AGENTRL_REQUIRE_BACKENDS`` says must work."""
    names = os.environ.get("AGENTRL_REQUIRE_BACKENDS", "")
    return {name.strip() for name in names.split(",") if name.strip()}


@pytest.fixture(scope="session")
def backend_problems() -> dict[str, str | None]:
    """For each real backend: why it cannot run here, or None when it works (checked once)."""
    return {"docker": docker_unavailable_reason(), "bwrap": bwrap_unavailable_reason(),
            "browser": browser_unavailable_reason()}


def require_backend(name: str, problems: dict[str, str | None]) -> None:
    """Skip the calling test when ``name`` cannot run here; fail instead when it is required."""
    reason = problems[name]
    if reason is None:
        return
    if name in required_backends():
        pytest.fail(f"backend {name!r} is required by AGENTRL_REQUIRE_BACKENDS but unavailable: {reason}",
                    pytrace=False)
    pytest.skip(f"backend {name!r} unavailable: {reason}")


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def backend(request: pytest.FixtureRequest, backend_problems: dict[str, str | None]) -> str:
    """The name of a real backend that works here (one test per backend)."""
    require_backend(request.param, backend_problems)
    return request.param


@pytest.fixture
def docker_backend(backend_problems: dict[str, str | None]) -> str:
    """``"docker"``, for docker-only tests (skips or fails like :func:`backend`)."""
    require_backend("docker", backend_problems)
    return "docker"


@pytest.fixture
def browser_backend(backend_problems: dict[str, str | None]) -> str:
    """``"browser"``, for tests that launch Chromium (skips, or fails when required, like :func:`backend`)."""
    require_backend("browser", backend_problems)
    return "browser"


@pytest.fixture
def sandbox_limits() -> SandboxLimits:
    """The small limits every sandbox fixture uses."""
    from agentgym_envs.sandbox import SandboxLimits

    return SandboxLimits(**TEST_LIMITS_KWARGS)


@pytest.fixture
def sandbox(backend: str, sandbox_limits: SandboxLimits) -> Iterator[KernelSandbox]:
    """A fresh sandbox of ``backend`` with small limits, closed after the test."""
    from agentgym_envs.sandbox import open_sandbox

    box = open_sandbox(backend, sandbox_limits)
    try:
        yield box
    finally:
        box.close()


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """One intra-op torch thread for a test module: on a small shared CPU the tiny model decodes several times
    faster so. Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    from trainers.pretrain import one_torch_thread as single_thread

    with single_thread():
        yield
