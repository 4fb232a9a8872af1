"""WebShop-v0 with the shop in a container (ShopContainer): no network, the browser inside it, a Unix socket between.

The path is tested once, on one container for the module: the oracle succeeds in text and browser mode through it
and sees exactly what it sees on a host server; no browser starts on the host; closing an env leaves no browser
context; a dead container is an infrastructure fault; stop() leaves no container and no socket.
The first run builds the WebShop image (root, a Debian mirror; about two minutes), later ones find it by its tag.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest

from agentgym_envs.policies import run_episode, tool_call_action
from agentgym_envs.policies.base import prompt_only
from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy
from agentgym_envs.sandbox.docker import OWNER_LABEL
from agentgym_envs.sandbox.labels import SANDBOX_LABEL
from agentgym_envs.webshop import ShopServer, WebShopEnv
from agentgym_envs.webshop.container import CONTAINER_LABEL_VALUE, ShopContainer
from agentgym_envs.webshop.errors import ShopUnavailableError
from agentgym_envs.webshop.speed import chromium_processes
from tasks import load_split

pytestmark = [pytest.mark.docker, pytest.mark.browser]
TASKS = load_split("WebShop", "test")[:6]
OUR_CONTAINERS = {"label": [f"{SANDBOX_LABEL}={CONTAINER_LABEL_VALUE}", f"{OWNER_LABEL}={os.getpid()}"]}


def shop_containers() -> list[str]:
    """Ids of the shop containers this process started that the daemon still has."""
    client = docker.from_env()
    try:
        return [container.id for container in client.containers.list(all=True, filters=OUR_CONTAINERS)]
    finally:
        client.close()


@pytest.fixture(scope="module")
def started() -> Iterator[list[ShopContainer]]:
    """Holds the module's container once a test has started it; stops it at the end and checks nothing is left."""
    holder: list[ShopContainer] = []
    yield holder
    for container in holder:
        container.stop()
        assert container.container_id is None
    assert shop_containers() == []


@pytest.fixture
def shop(docker_backend, browser_backend, started) -> ShopContainer:
    """The module's ShopContainer(browser=True), started by the first test that needs it."""
    if not started:
        container = ShopContainer("generated-v1")
        container.start()
        started.append(container)
    return started[0]


@pytest.fixture(scope="module")
def host_shop() -> Iterator[ShopServer]:
    server = ShopServer("generated-v1")
    server.start()
    yield server
    server.stop()


def play(env: WebShopEnv) -> list[tuple[list[str], float, bool]]:
    """Each episode of the oracle on TASKS: its observations, reward and success."""
    played = []
    for i, task in enumerate(TASKS):
        episode = run_episode(env, WebShopOraclePolicy(), task, seed=i, shown_task=prompt_only(task))
        played.append(([env._prompt, *(turn.observation for turn in episode.turns)], episode.reward, episode.success))
    return played


def browser_contexts(shop: ShopContainer) -> int:
    with httpx.Client(transport=shop.transport()) as client:
        return client.get(f"{shop.url}/api/browsers").json()["contexts"]


def test_the_container_has_no_network_and_runs_the_shop_and_its_browser(shop):
    client = docker.from_env()
    try:
        container = client.containers.get(shop.container_id)
        processes = " ".join(" ".join(row) for row in container.top()["Processes"])
        swept = {found.id for found in client.containers.list(all=True, filters={"label": [SANDBOX_LABEL]})}
    finally:
        client.close()
    assert container.attrs["HostConfig"]["NetworkMode"] == "none"
    assert container.attrs["HostConfig"]["ReadonlyRootfs"] is True
    assert container.id in swept  # what `python -m agentgym_envs.sandbox sweep` removes after a crashed run
    assert "agentgym_envs.webshop.server" in processes and "chromium" in processes


def test_the_oracle_sees_what_it_sees_on_a_host_server_in_text_and_browser_mode(shop, host_shop):
    host_chromium_before = _host_chromium()
    envs = [WebShopEnv(split="test", server=host_shop), WebShopEnv(split="test", server=shop),
            WebShopEnv(split="test", server=shop, mode="browser")]
    try:
        on_host, text, browser = (play(env) for env in envs)
        assert browser_contexts(shop) == 1  # the browser env's last episode
    finally:
        for env in envs:
            env.close()
    assert all(success for _, _, success in on_host)
    assert text == on_host
    assert browser == on_host
    assert browser_contexts(shop) == 0
    assert _host_chromium() == host_chromium_before  # the browser ran in the container


def test_the_accessibility_tree_comes_from_the_containers_browser(shop):
    env = WebShopEnv(split="test", server=shop, mode="browser", observation="aria")
    try:
        prompt, _ = env.reset(seed=0)
        assert '- textbox "Search"' in prompt and '- button "Search"' in prompt
    finally:
        env.close()
    assert browser_contexts(shop) == 0


def test_a_dead_container_is_an_infrastructure_fault_and_stop_leaves_nothing(docker_backend):
    shop = ShopContainer("generated-v1", browser=False)
    shop.start()
    env = WebShopEnv(split="test", server=shop)
    try:
        env.reset(seed=0)
        socket, container_id = shop.socket_path, shop.container_id
        client = docker.from_env()
        try:
            client.containers.get(container_id).kill()
        finally:
            client.close()
        *_, info = env.step(tool_call_action("search", query="shirt"))
        assert info["infra_error"]
        assert not shop.alive()
    finally:
        env.close()
        shop.stop()
    assert not socket.exists()
    assert container_id not in shop_containers()


def test_a_python_that_does_not_run_in_the_image_is_named_in_the_error(docker_backend, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(Path(sys.executable).with_name("no-such-python")))
    before = shop_containers()
    shop = ShopContainer("generated-v1", browser=False)
    with pytest.raises(ShopUnavailableError, match=r"exited with status 127(.|\n)*The host's Python .* did not run"):
        shop.start()
    assert shop.container_id is None
    assert shop_containers() == before


def _host_chromium() -> set[int]:
    """The chromium processes this test process started on the host."""
    return {process.pid for process in chromium_processes()}
