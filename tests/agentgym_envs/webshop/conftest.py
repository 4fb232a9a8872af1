"""Shared fixtures of the WebShop tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentgym_envs.webshop import ShopServer


@pytest.fixture(scope="module")
def shop() -> Iterator[ShopServer]:
    """A shop server of the bundled catalogue, shared by a module's envs (a module may define its own ``shop``)."""
    with ShopServer("generated-v1") as server:
        yield server
