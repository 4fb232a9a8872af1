"""The Docker sandbox pool and the container lifecycle: reset on release, replacing dead sandboxes,
crashes as infrastructure errors, and no labelled container left behind."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from agentgym_envs.errors import SandboxCrashedError, SandboxError
from agentgym_envs.sandbox import SandboxLimits
from agentgym_envs.sandbox.docker import OWNER_LABEL, DockerSandbox, DockerSandboxPool, connect, sweep
from agentgym_envs.sandbox.labels import SANDBOX_LABEL

pytestmark = pytest.mark.docker

OURS = f"{OWNER_LABEL}={os.getpid()}"
"""Label filter for this test process's containers (other processes may share the daemon)."""


@pytest.fixture
def client(docker_backend: str) -> Iterator[docker.DockerClient]:
    """A Docker client (skips, or fails under AGENTRL_REQUIRE_BACKENDS, when docker is unavailable)."""
    client = connect()
    yield client
    client.close()


@pytest.fixture
def pool(client: docker.DockerClient, sandbox_limits: SandboxLimits) -> Iterator[DockerSandboxPool]:
    """A pool of one warm sandbox, closed after the test."""
    pool = DockerSandboxPool(size=1, limits=sandbox_limits)
    yield pool
    pool.close()


def container_exists(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


def our_containers(client: docker.DockerClient) -> list[str]:
    """Ids of containers with the sandbox label made by this process."""
    return [c.id for c in client.containers.list(all=True, filters={"label": [SANDBOX_LABEL, OURS]})]


def test_release_resets_state_for_the_next_acquire(pool: DockerSandboxPool):
    first = pool.acquire()
    assert first.run_code("secret = 42\nopen('notes.txt', 'w').write('x')").ok
    pool.release(first)

    again = pool.acquire()
    assert again is first  # warm reuse: the same container, not a new one
    assert "NameError" in again.run_code("secret").output
    assert again.run_code("import os\nos.listdir('.')").output == "[]\n"


def test_acquire_replaces_a_sandbox_whose_container_was_killed(pool: DockerSandboxPool,
                                                               client: docker.DockerClient):
    sandbox = pool.acquire()
    dead_id = sandbox.container.id
    pool.release(sandbox)
    client.containers.get(dead_id).kill()

    replacement = pool.acquire()

    assert replacement.container.id != dead_id
    assert replacement.healthy()
    assert replacement.run_code("6 * 7").output == "42\n"
    assert not container_exists(client, dead_id), "the dead container should be removed"


def test_container_killed_mid_call_is_an_infrastructure_error(client: docker.DockerClient,
                                                              sandbox_limits: SandboxLimits):
    sandbox = DockerSandbox(sandbox_limits, client=client)
    try:
        assert sandbox.run_code("1").ok
        killer = threading.Timer(0.5, client.containers.get(sandbox.container.id).kill)
        killer.start()
        with pytest.raises(SandboxCrashedError):
            sandbox.run_code("import time\ntime.sleep(30)", timeout_s=10)
        killer.join()
        assert not sandbox.healthy()
    finally:
        sandbox.close()
    assert not container_exists(client, sandbox.container.id)


def test_release_of_a_crashed_sandbox_does_not_return_it_to_the_pool(pool: DockerSandboxPool,
                                                                     client: docker.DockerClient):
    sandbox = pool.acquire()
    client.containers.get(sandbox.container.id).kill()
    pool.release(sandbox)

    replacement = pool.acquire()

    assert replacement is not sandbox
    assert replacement.run_code("1 + 1").output == "2\n"


def test_pool_close_removes_every_container(client: docker.DockerClient, sandbox_limits: SandboxLimits):
    pool = DockerSandboxPool(size=2, limits=sandbox_limits)
    held = [pool.acquire(), pool.acquire(), pool.acquire()]  # the third grows the pool
    pool.release(held[0])
    ids = [sandbox.container.id for sandbox in held]
    assert all(container_exists(client, container_id) for container_id in ids)

    pool.close()

    assert not [container_id for container_id in ids if container_exists(client, container_id)]
    assert our_containers(client) == []
    pool.close()  # idempotent


def test_sweep_removes_containers_nobody_closed(client: docker.DockerClient, sandbox_limits: SandboxLimits):
    leftovers = [DockerSandbox(sandbox_limits, client=client) for _ in range(2)]
    assert set(our_containers(client)) >= {sandbox.container.id for sandbox in leftovers}

    removed = sweep(extra_labels=[OURS], client=client)

    assert removed >= 2
    assert our_containers(client) == []
    for sandbox in leftovers:
        sandbox.close()  # closing a swept sandbox is quiet


def test_closed_sandbox_refuses_work(client: docker.DockerClient, sandbox_limits: SandboxLimits):
    sandbox = DockerSandbox(sandbox_limits, client=client)
    sandbox.close()
    sandbox.close()  # idempotent
    assert not sandbox.healthy()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.run_code("1")


def test_a_removal_that_fails_is_retried_not_leaked(client: docker.DockerClient, sandbox_limits: SandboxLimits,
                                                    monkeypatch: pytest.MonkeyPatch):
    import requests.exceptions

    from agentgym_envs.sandbox.docker import retry_pending_removals

    sandbox = DockerSandbox(sandbox_limits, client=client)
    container = sandbox.container

    def daemon_gone(**kwargs):
        raise requests.exceptions.ConnectionError("connection refused")  # as while dockerd restarts

    monkeypatch.setattr(container, "remove", daemon_gone)
    with pytest.raises(SandboxError, match="retried later"):
        sandbox.close()
    assert container_exists(client, container.id)
    assert retry_pending_removals() == 1  # still failing: still pending, not forgotten
    monkeypatch.undo()  # the daemon answers again
    DockerSandbox(sandbox_limits, client=client).close()  # making a sandbox retries pending removals
    assert not container_exists(client, container.id)
    assert retry_pending_removals() == 0
