"""What serving an env costs: per-step overhead over in-process, and many concurrent sessions on one server.

One server process (``python -m agentgym_envs.serve``, loopback), measured from this process:

- **Per-step overhead**: the same Search-v0 ``search`` step, timed in process (``env.step``) and over the server
  (an OpenEnv WebSocket ``step`` with openenv-core's own client, and an MCP ``call_tool`` step); p50 and p99 of
  each, the server's p50 minus the in-process p50 (the target: at most 2 ms) and their ratio.
- **Sessions**: ``--sessions`` WebSocket sessions opened at once, each reset (which makes its env) and stepped once,
  then held idle: errors counted, the server's resident memory before and with them open (memory per idle
  session), then all closed; twice, so that a leak shows as growth from the first wave's end to the second's
  (thread pools and the allocator keep what the first wave warmed); a new session is still served at the end.

Example:
    python -m benchmarks.serving                         # 300 timed steps, 256 sessions
    python -m benchmarks.serving --steps 100 --sessions 32 --json serving.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ENV_ID = "agentrl/Search-v0"
ACTION = '<tool_call>{"name": "search", "arguments": {"query": "river festival organizer"}}</tool_call>'
OVERHEAD_TARGET_MS = 2.0


@dataclass
class Report:
    """The measurements (milliseconds; bytes for memory)."""

    steps: int
    sessions: int
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    overhead_ms: dict[str, float] = field(default_factory=dict)
    ratio: dict[str, float] = field(default_factory=dict)
    session_errors: list[str] = field(default_factory=list)
    server: dict[str, float] = field(default_factory=dict)

    @property
    def target_met(self) -> bool:
        """The WebSocket step's p50 overhead is within :data:`OVERHEAD_TARGET_MS`."""
        return self.overhead_ms.get("websocket", float("inf")) <= OVERHEAD_TARGET_MS


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(max_sessions: int) -> tuple[subprocess.Popen, str]:
    """The server process and its URL, once it answers ``/health``."""
    import httpx

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "agentgym_envs.serve", ENV_ID, "--port", str(port),
                                "--max-sessions", str(max_sessions)])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("the server did not answer /health within 120 s")


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50 and p99 of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)
    return {"p50": 1000 * statistics.median(ordered), "p99": 1000 * ordered[min(len(ordered) - 1,
                                                                               int(0.99 * len(ordered)))]}


def timed_steps(step: Callable[[], Any], reset: Callable[[], Any], count: int) -> list[float]:
    """``count`` timed calls of ``step``; ``reset`` (untimed) before the first and whenever an episode ends."""
    reset()
    samples = []
    while len(samples) < count:
        started = time.perf_counter()
        done = step()
        samples.append(time.perf_counter() - started)
        if done:
            reset()
    return samples


def in_process_samples(count: int) -> list[float]:
    """The step in process."""
    import gymnasium as gym

    import agentgym_envs  # noqa: F401

    env = gym.make(ENV_ID)
    try:
        def step() -> bool:
            _, _, terminated, truncated, _ = env.step(ACTION)
            return terminated or truncated

        return timed_steps(step, lambda: env.reset(seed=0), count)
    finally:
        env.close()


def websocket_samples(url: str, count: int, action: dict[str, Any]) -> list[float]:
    """The step over the server's WebSocket, with openenv-core's client."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=url).sync() as client:
        return timed_steps(lambda: client.step(action).done, lambda: client.reset(seed=0), count)


async def hold_sessions(url: str, count: int, measure: Callable[[], dict[str, float]]) -> tuple[list[str],
                                                                                              dict[str, float]]:
    """Open ``count`` sessions at once, reset and step each, measure the server while they are idle, close them."""
    from websockets.asyncio.client import connect

    errors: list[str] = []
    sockets = []

    async def open_one(index: int) -> None:
        try:
            socket_ = await connect(url.replace("http", "ws") + "/ws", max_size=None, open_timeout=120)
            sockets.append(socket_)
            for message in ({"type": "reset", "data": {"seed": index}}, {"type": "step", "data": {"content": ACTION}}):
                await socket_.send(json.dumps(message))
                answer = json.loads(await asyncio.wait_for(socket_.recv(), timeout=300))
                if answer["type"] == "error":
                    errors.append(answer["data"]["message"])
                    return
        except Exception as exc:  # every failure is counted and reported
            errors.append(f"{type(exc).__name__}: {exc}")

    await asyncio.gather(*(open_one(index) for index in range(count)))
    measured = measure()
    await asyncio.gather(*(socket_.close() for socket_ in sockets))
    return errors, measured


def server_figures(pid: int) -> dict[str, float]:
    """The server process's resident memory (bytes) and threads."""
    import psutil

    process = psutil.Process(pid)
    return {"rss": float(process.memory_info().rss), "threads": float(process.num_threads())}


def run_benchmark(steps: int, sessions: int) -> Report:
    """Start a server, measure, stop it."""
    os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    report = Report(steps=steps, sessions=sessions)
    process, url = start_server(max_sessions=sessions + 1)
    try:
        call = {"type": "call_tool", "tool_name": "search", "arguments": {"query": "river festival organizer"}}
        samples = {"in-process": in_process_samples(steps),
                   "websocket": websocket_samples(url, steps, {"content": ACTION}),
                   "mcp call_tool": websocket_samples(url, steps, call)}
        report.latency_ms = {name: percentiles(values) for name, values in samples.items()}
        base = report.latency_ms["in-process"]["p50"]
        for name in ("websocket", "mcp call_tool"):
            report.overhead_ms[name] = report.latency_ms[name]["p50"] - base
            report.ratio[name] = report.latency_ms[name]["p50"] / base
        time.sleep(1.0)
        before = server_figures(process.pid)
        waves = []
        for _ in range(2):  # a leak grows from one wave to the next; pools warmed by the first wave do not
            errors, held = asyncio.run(hold_sessions(url, sessions, lambda: server_figures(process.pid)))
            time.sleep(2.0)  # the server closes the sessions' envs
            waves.append((errors, held, server_figures(process.pid)))
        (errors, held, after), (second_errors, _, after_second) = waves
        report.session_errors = errors + second_errors
        report.server = {"rss_before_mb": before["rss"] / 2**20, "rss_with_sessions_mb": held["rss"] / 2**20,
                         "rss_after_mb": after["rss"] / 2**20, "rss_after_second_wave_mb": after_second["rss"] / 2**20,
                         "threads_before": before["threads"], "threads_with_sessions": held["threads"],
                         "threads_after": after["threads"], "threads_after_second_wave": after_second["threads"],
                         "rss_per_idle_session_kb": (held["rss"] - before["rss"]) / max(sessions, 1) / 1024,
                         "served_after": float(bool(websocket_samples(url, 1, {"content": ACTION})))}
    finally:
        process.terminate()
        process.wait(timeout=30)
    return report


def render(report: Report) -> None:
    """Print the figures and the targets."""
    print(f"{ENV_ID}: the same search step, {report.steps} timed steps per row (ms)")
    for name, values in report.latency_ms.items():
        extra = (f"  overhead {report.overhead_ms[name]:+.2f} ms, ratio {report.ratio[name]:.2f}x"
                 if name in report.overhead_ms else "")
        print(f"  {name:<14} p50 {values['p50']:7.2f}  p99 {values['p99']:7.2f}{extra}")
    verdict = "PASS" if report.target_met else "FAIL"
    print(f"target: server overhead <= {OVERHEAD_TARGET_MS} ms at p50 (websocket step): "
          f"{report.overhead_ms.get('websocket', float('nan')):.2f} ms {verdict}")
    server = report.server
    print(f"{report.sessions} concurrent sessions: {len(report.session_errors)} errors"
          + (f" (first: {report.session_errors[0]})" if report.session_errors else ""))
    print(f"  server memory {server['rss_before_mb']:.0f} MB before, {server['rss_with_sessions_mb']:.0f} MB with "
          f"the sessions open ({server['rss_per_idle_session_kb']:.0f} KB per idle session), "
          f"{server['rss_after_mb']:.0f} MB after they closed, {server['rss_after_second_wave_mb']:.0f} MB after a "
          "second wave")
    print(f"  server threads {server['threads_before']:.0f} before, {server['threads_with_sessions']:.0f} with the "
          f"sessions, {server['threads_after']:.0f} after, {server['threads_after_second_wave']:.0f} after a second "
          f"wave; a new session served after: {bool(server['served_after'])}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; status 1 when a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="timed steps per row")
    parser.add_argument("--sessions", type=int, default=256, help="concurrent sessions held at once")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures to PATH")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.sessions < 1:
        raise SystemExit("--steps and --sessions: expected >= 1")
    report = run_benchmark(args.steps, args.sessions)
    render(report)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
    leaked = report.server["threads_after_second_wave"] > report.server["threads_after"]
    return 1 if not report.target_met or report.session_errors or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
