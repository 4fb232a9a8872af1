"""One shop server for every WebShop-v0 env of a run (:class:`SharedShop`), the env spec's shared service.

Evaluation and the stress harness start it before they make their envs and pass :meth:`SharedShop.env_kwargs`
to each, so that a run starts one server instead of one per env; the stress harness also stalls and restarts
it (its ``service-stall`` and ``service-restart`` faults).
"""

from __future__ import annotations

import os
import signal
import time
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from agentgym_envs.webshop.service import ShopClient, ShopServer


class SharedShop:
    """A shop server of the catalogue a split's tasks were written for, started at once.

    Its port is kept from the first start, so that a restarted server answers at the URL the envs hold.
    Envs reach it by its URL (not the :class:`ShopServer`: ``env.spec`` deep-copies the kwargs, which a server
    cannot be).

    Args:
        split: The bundled split whose tasks name the catalogue to serve.
    """

    def __init__(self, split: str) -> None:
        from agentgym_envs.webshop.env import WebShopEnv

        env = WebShopEnv(split=split)  # reads the tasks' catalogue; starts no server
        self.server = ShopServer(env.catalogue)
        env.close()
        self.url = self.server.start()
        self.server.port = urlsplit(self.url).port or 0

    def env_kwargs(self) -> dict[str, Any]:
        """What an env needs to use this server: its URL."""
        return {"server": self.url}

    def sessions(self) -> int:
        """Live sessions on the server (``GET /api/health``)."""
        with ShopClient(self.url) as client:
            return int(client.health()["sessions"])

    def stall(self, margin_s: float) -> str:
        """SIGSTOP the server for ``margin_s`` longer than an env waits for a reply, then SIGCONT it (blocks
        meanwhile)."""
        from agentgym_envs.webshop.env import SHOP_TIMEOUT_S

        seconds = SHOP_TIMEOUT_S + margin_s
        pid = self._pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"stopped the shop server (pid {pid}) for {seconds:g} s"

    def restart(self, wait_s: float = 10.0) -> str:
        """SIGKILL the server and start it again on the same port (its sessions are lost).

        Raises:
            RuntimeError: The killed process was still there after ``wait_s``.
        """
        pid, killed = self._pid(), time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        while self.server.alive():  # start() would take a dying server for a running one
            if time.perf_counter() - killed > wait_s:
                raise RuntimeError(f"shop restart: expected pid {pid} gone after SIGKILL, got it alive {wait_s} s on")
            time.sleep(0.01)
        self.server.start()
        return (f"killed the shop server (pid {pid}); pid {self.server.pid} answered at the same URL after "
                f"{time.perf_counter() - killed:.1f} s")

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self.server.stop()

    def __enter__(self) -> SharedShop:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _pid(self) -> int:
        pid = self.server.pid
        if pid is None:
            raise RuntimeError("shop fault: expected a running shop server, got none")
        return pid
