"""The Search-v0 server the serving tests share (a server start costs ~25 s here: openenv-core's and the openreward
SDK's imports), started once per test session: the command of ``docs/serving.md``'s examples, on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agentgym_envs.serve.served import Served

SEARCH = "agentrl/Search-v0"
SHARED_SERVER_ARGS = ("--env-kwargs", '{"split": "test"}')
"""``python -m agentgym_envs.serve agentrl/Search-v0 --port P`` and these."""


@pytest.fixture(scope="session")
def search_server() -> Iterator[Served]:
    """Search-v0 on its test split."""
    pytest.importorskip("openenv")
    pytest.importorskip("openreward")
    served = Served(SEARCH, *SHARED_SERVER_ARGS)
    yield served
    served.stop()
