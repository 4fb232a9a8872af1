"""A server process for the serving tests."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping

import httpx


class Served:
    """A server process on a free loopback port: ``python -m agentgym_envs.serve env_id --port <free> *args``, in the
    environment ``env`` (default: this process's)."""

    def __init__(self, env_id: str, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.env_id, self.args = env_id, args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # A file, not a pipe: a server that lives for the whole test session must never block on a full pipe.
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (open while the server runs; stop closes it)
        self.process = subprocess.Popen([sys.executable, "-m", "agentgym_envs.serve", env_id, "--port",
                                         str(self.port), *args], stderr=self.log, text=True,
                                        env=None if env is None else dict(env))
        deadline = time.monotonic() + 120  # a start takes ~25 s, more on a loaded machine
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"the server exited: {self.log.read()}")
            try:
                if httpx.get(f"{self.url}/health", headers=self.headers(args)).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the server did not answer /health within 120 s")

    @staticmethod
    def headers(args: tuple[str, ...]) -> dict[str, str]:
        return {"X-API-Key": args[args.index("--token") + 1]} if "--token" in args else {}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
