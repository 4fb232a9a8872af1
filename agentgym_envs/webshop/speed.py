"""WebShop-v0 speed: the text mode and the browser mode side by side, on one shop server.

Prints, in one run:

* the latency of one env step (p50 / p99) in each mode, over the tools-only oracle's episodes, and the
  ratio browser / text;
* episodes per second at 1, 8 and 32 concurrent episodes in each mode (one env per episode, all
  sharing the server; in browser mode one Chromium, one context per episode; envs made and warmed
  before the clock starts), with the infrastructure errors counted;
* the browser's memory: its processes' proportional set size (shared pages counted once) with one context
  open and with 32 (per context: the difference over 31);
* what was left behind after closing: shop sessions, browser contexts, Chromium processes.

Targets (issue "WebShop-v0"): text-mode step p50 under 5 ms; 32 concurrent browser episodes on a
2-core machine with no infrastructure error and nothing leaked.

Example:
    python -m benchmarks.speed webshop
    python -m benchmarks.speed webshop --concurrency 1,8,32 --episodes 64 --json webshop_speed.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import psutil

from agentgym_envs.policies import ScriptedAgent, prompt_only
from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy
from agentgym_envs.runner import EnvPool, EpisodeRequest, EpisodeRunner
from agentgym_envs.webshop import ShopServer, WebShopEnv
from tasks import Task, load_split

MODES = ("text", "browser")


@dataclass(frozen=True)
class StepLatency:
    """Step latency of one mode, in milliseconds."""

    mode: str
    steps: int
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Throughput:
    """Episodes per second of one mode at one concurrency."""

    mode: str
    concurrency: int
    episodes: int
    seconds: float
    episodes_per_s: float
    infra_errors: int
    successes: int


def step_latency(mode: str, tasks: Sequence[Task], server: ShopServer, browser: Any) -> StepLatency:
    """Time every ``step`` of the oracle's episodes on ``tasks`` in one env of ``mode``."""
    env = WebShopEnv(tasks=tasks, server=server, mode=mode, browser=browser)
    times = []
    try:
        for task in tasks:
            policy = WebShopOraclePolicy()
            observation, info = env.reset(seed=0, options={"task": task})
            policy.begin(prompt_only(task), observation, info)
            done = False
            while not done:
                action = policy.act(observation, info)
                started = time.perf_counter()
                observation, _, terminated, truncated, info = env.step(action)
                times.append(time.perf_counter() - started)
                done = terminated or truncated
    finally:
        env.close()
    milliseconds = np.array(times) * 1000
    return StepLatency(mode, len(times), float(np.percentile(milliseconds, 50)), float(np.percentile(milliseconds, 99)))


def throughput(mode: str, concurrency: int, tasks: Sequence[Task], episodes: int, server: ShopServer,
               browser: Any) -> Throughput:
    """Play ``episodes`` oracle episodes, ``concurrency`` at a time, and time them.

    The envs are made and warmed by one untimed batch first, so that the rate is the steady state of a
    training run (which keeps its envs), not env start-up.
    """
    pool = EnvPool(lambda env_id: WebShopEnv(tasks=tasks, server=server, mode=mode, browser=browser))
    runner = EpisodeRunner(pool, workers=concurrency)
    agent = ScriptedAgent(lambda request: WebShopOraclePolicy(), shown=prompt_only)
    try:
        runner.run(agent, _requests(tasks, 0, concurrency))
        played = []
        started = time.perf_counter()
        for first in range(0, episodes, concurrency):
            played += runner.run(agent, _requests(tasks, first, min(first + concurrency, episodes)))
        seconds = time.perf_counter() - started
    finally:
        pool.close()
    return Throughput(mode, concurrency, len(played), seconds, len(played) / seconds,
                      sum(not episode.scored for episode in played), sum(episode.success for episode in played))


def _requests(tasks: Sequence[Task], first: int, end: int) -> list[EpisodeRequest]:
    return [EpisodeRequest("agentrl/WebShop-v0", tasks[i % len(tasks)], group=i, seed=i) for i in range(first, end)]


def browser_memory_mb(browser: Any, contexts: int, server: ShopServer) -> float:
    """Memory (PSS) of the browser's processes with ``contexts`` contexts open, each on a results page."""
    from agentgym_envs.webshop import ShopClient

    drivers = [browser.new_driver() for _ in range(contexts)]
    with ShopClient(server.url) as shop:
        sessions = [shop.create_session("memory probe") for _ in drivers]
        try:
            for driver, session in zip(drivers, sessions, strict=True):
                driver.open(shop.start_url(session))
                driver.search("henley")
            return _chromium_pss_mb()
        finally:
            for driver, session in zip(drivers, sessions, strict=True):
                driver.close()
                shop.delete_session(session)


def _chromium_pss_mb() -> float:
    """Proportional set size of the Chromium processes: shared pages counted once, split among their users."""
    return sum(p.memory_full_info().pss for p in chromium_processes()) / 2**20


def chromium_processes(root: psutil.Process | None = None) -> list[psutil.Process]:
    """The live Chromium processes under ``root`` (this process by default); exited ones and zombies are left out."""
    found = []
    for process in (root or psutil.Process()).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "chrom" in process.name().lower() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def leftovers(server: ShopServer, browser: Any) -> dict[str, int]:
    """What remains open after every env closed: shop sessions and browser contexts."""
    from agentgym_envs.webshop import ShopClient

    with ShopClient(server.url) as shop:
        sessions = int(shop.health()["sessions"])
    return {"shop_sessions": sessions, "browser_contexts": browser.open_contexts if browser is not None else 0}


def run(concurrency: Sequence[int], episodes: int, latency_tasks: int) -> dict[str, Any]:
    """Every measurement of the module docstring, in one run."""
    from agentgym_envs.webshop.browser import BrowserPool

    tasks = load_split("WebShop", "test")
    report: dict[str, Any] = {"latency": [], "throughput": [], "memory_mb": {}, "leftovers": {}}
    with ShopServer("generated-v1") as server:
        browser = BrowserPool()
        try:
            for mode in MODES:
                pool = browser if mode == "browser" else None
                report["latency"].append(asdict(step_latency(mode, tasks[:latency_tasks], server, pool)))
                for level in concurrency:
                    result = throughput(mode, level, tasks, max(episodes, level), server, pool)
                    report["throughput"].append(asdict(result))
            one, many = browser_memory_mb(browser, 1, server), browser_memory_mb(browser, 32, server)
            report["memory_mb"] = {"1_context": one, "32_contexts": many, "per_context": (many - one) / 31}
            report["leftovers"] = leftovers(server, browser)
        finally:
            browser.close()
    report["leftovers"]["chromium_processes"] = len(chromium_processes())
    return report


def render(report: dict[str, Any]) -> str:
    """The report as plain-text tables."""
    latency = {row["mode"]: row for row in report["latency"]}
    lines = ["step latency (oracle episodes)", f"{'mode':<8} {'steps':>6} {'p50 ms':>8} {'p99 ms':>8} {'ratio':>7}"]
    base = latency["text"]["p50_ms"]
    lines += [f"{mode:<8} {row['steps']:>6} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['p50_ms'] / base:>6.1f}x"
              for mode, row in latency.items()]
    lines += ["", "episodes per second",
              f"{'mode':<8} {'conc':>5} {'episodes':>9} {'ep/s':>7} {'infra':>6} {'success':>8}"]
    lines += [f"{row['mode']:<8} {row['concurrency']:>5} {row['episodes']:>9} {row['episodes_per_s']:>7.2f} "
              f"{row['infra_errors']:>6} {row['successes']:>8}" for row in report["throughput"]]
    memory = report["memory_mb"]
    lines += ["", f"browser memory (PSS): {memory['1_context']:.0f} MB with 1 context, "
              f"{memory['32_contexts']:.0f} MB with 32, {memory['per_context']:.1f} MB per context",
              "left behind: " + ", ".join(f"{key} {value}" for key, value in report["leftovers"].items())]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed webshop", description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated concurrent episodes (default 1,8,32)")
    parser.add_argument("--episodes", type=int, default=64, help="episodes per mode and concurrency (at least it)")
    parser.add_argument("--latency-tasks", type=int, default=20, help="oracle episodes timed step by step per mode")
    parser.add_argument("--json", default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.concurrency.split(",")]
    if any(level < 1 for level in levels) or args.episodes < 1:
        parser.error(f"expected positive concurrency levels and episodes, got {levels} and {args.episodes}")
    report = run(levels, args.episodes, args.latency_tasks)
    print(render(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=2)
    return 0 if _targets_met(report) else 1


def _targets_met(report: dict[str, Any]) -> bool:
    text = next(row for row in report["latency"] if row["mode"] == "text")
    infra = sum(row["infra_errors"] for row in report["throughput"])
    return text["p50_ms"] < 5.0 and infra == 0 and not any(report["leftovers"].values())


if __name__ == "__main__":
    raise SystemExit(main())
