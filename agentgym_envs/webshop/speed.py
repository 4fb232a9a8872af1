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

With ``--scale N`` it measures the shop at WebShop's scale instead (:func:`scale`): it writes N products
in WebShop's file formats (the bundled catalogue copied under new asins and names, one item in 100
with a human instruction), converts them with ``python -m tasks.webshop.original`` in a child process
(wall time and peak RSS), starts the shop server on the result twice, building its store (products in
SQLite, BM25 index: :mod:`~agentgym_envs.webshop.store`) and then opening it (wall time and the server's
peak RSS each; the store's size on disk), and times searches over HTTP (results pages of distinct
queries, p50 / p95 / p99). Target (issue 33): the conversion of WebShop's 1.18M products under 2 GB
peak RSS.

Example:
    python -m benchmarks.speed webshop
    python -m benchmarks.speed webshop --concurrency 1,8,32 --episodes 64 --json webshop_speed.json
    python -m benchmarks.speed webshop --scale 100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from agentgym_envs.policies import ScriptedAgent, prompt_only
from agentgym_envs.policies.webshop_oracle import WebShopOraclePolicy
from agentgym_envs.runner import EnvPool, EpisodeRequest, EpisodeRunner
from agentgym_envs.webshop import ShopClient, ShopServer, WebShopEnv
from agentgym_envs.webshop.server import results_url
from tasks import Task, load_split
from tasks.webshop import DEFAULT_CATALOGUE, load_catalogue
from tasks.webshop.original import write_original_format

MODES = ("text", "browser")
WEBSHOP_PRODUCTS = 1_181_436
"""Products in WebShop's whole ``items_shuffle.json``."""


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


@dataclass(frozen=True)
class ScaleReport:
    """The shop at a catalogue of ``products`` products (see :func:`scale`); times in seconds, memory in MiB."""

    products: int
    items_mb: float
    convert_s: float
    convert_peak_rss_mb: float
    tasks: int
    index_build_s: float
    index_build_peak_rss_mb: float
    index_mb: float
    index_load_s: float
    server_rss_mb: float
    searches: int
    search_p50_ms: float
    search_p95_ms: float
    search_p99_ms: float


def scale(count: int, *, searches: int = 200, workdir: Path | None = None) -> ScaleReport:
    """Convert, index and search a catalogue of ``count`` products in WebShop's format.

    Args:
        count: Products to write, convert and serve.
        searches: Distinct queries timed against the server.
        workdir: Where the files go (a temporary folder, removed after, when None).
    """
    with tempfile.TemporaryDirectory(dir=workdir) as folder:
        root = Path(folder)
        products = load_catalogue(DEFAULT_CATALOGUE)
        files = write_original_format(root / "webshop", products, count)
        items_mb = files["items"].stat().st_size / 2**20
        out = root / "converted"
        convert_s, convert_rss = _run_measured([
            sys.executable, "-m", "tasks.webshop.original", "--items", str(files["items"]),
            "--attributes", str(files["attributes"]), "--instructions", str(files["human"]), "--human",
            "--out", str(out)])
        tasks = sum(1 for _ in (out / "tasks.jsonl").open(encoding="utf-8"))
        catalogue, index = str(out / "catalogue.jsonl"), root / "index"
        build_s, build_rss, _, _ = _serve(catalogue, index, [])
        index_mb = sum(path.stat().st_size for path in index.iterdir()) / 2**20
        queries = _queries(products, searches)
        load_s, _, rss, times = _serve(catalogue, index, queries)
    p50, p95, p99 = (float(np.percentile(np.array(times) * 1000, q)) for q in (50, 95, 99))
    return ScaleReport(count, items_mb, convert_s, convert_rss, tasks, build_s, build_rss, index_mb, load_s, rss,
                       len(times), p50, p95, p99)


def _run_measured(argv: list[str]) -> tuple[float, float]:
    """Run a child process to its end: its wall time (s) and peak RSS (MiB).

    Raises:
        RuntimeError: The child failed (with the end of its output).
    """
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               cwd=Path(__file__).resolve().parents[2])
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed with exit status {process.returncode}: {errors[-2000:]}")
    return time.perf_counter() - started, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def _serve(catalogue: str, index: Path, queries: Sequence[str]) -> tuple[float, float, float, list[float]]:
    """Start a server (building its index when ``index`` is empty), search ``queries`` over HTTP, stop it.

    Returns:
        Start-up seconds, the server's peak RSS (MiB), its RSS after the searches (MiB), each search's seconds.
    """
    server = ShopServer(catalogue, index_dir=index, startup_timeout_s=3600.0)
    started = time.perf_counter()
    server.start()
    try:
        startup = time.perf_counter() - started
        times = []
        with ShopClient(server.url) as shop, httpx.Client(timeout=60.0) as http:
            session = shop.create_session("scale benchmark")
            for query in queries:
                begun = time.perf_counter()
                http.get(server.url + results_url(session, query, 1)).raise_for_status()
                times.append(time.perf_counter() - begun)
        assert server.pid is not None
        status = Path(f"/proc/{server.pid}/status").read_text()
        peak, now = (_status_mb(status, key) for key in ("VmHWM", "VmRSS"))
    finally:
        server.stop()
    return startup, peak, now, times


def _status_mb(status: str, key: str) -> float:
    line = next(line for line in status.splitlines() if line.startswith(f"{key}:"))
    return int(line.split()[1]) / 1024


def _queries(products: Sequence[Any], count: int) -> list[str]:
    """``count`` distinct queries (a type and one of its attributes), so that no search hits the server's cache."""
    pairs = sorted({f"{p.product_type} {attribute}" for p in products for attribute in p.attributes})
    return [pairs[i * len(pairs) // count] for i in range(min(count, len(pairs)))]


def render_scale(reports: Sequence[ScaleReport]) -> str:
    """The scale reports as a table and, from the smallest and the largest, what WebShop's 1.18M products need.

    The estimate is linear through the two (so it counts each product's cost, not the fixed cost of the
    interpreter and the libraries); with one report it is left out.
    """
    lines = [f"{'products':>9} {'items MiB':>9} {'convert s':>9} {'conv RSS':>8} {'tasks':>6} {'build s':>8} "
             f"{'build RSS':>9} {'disk MiB':>8} {'load s':>7} {'srv RSS':>8} {'search p50':>10} {'p95':>6} "
             f"{'p99 ms':>7}"]
    lines += [f"{r.products:>9,} {r.items_mb:>9.0f} {r.convert_s:>9.1f} {r.convert_peak_rss_mb:>8.0f} {r.tasks:>6} "
              f"{r.index_build_s:>8.1f} {r.index_build_peak_rss_mb:>9.0f} {r.index_mb:>8.0f} {r.index_load_s:>7.1f} "
              f"{r.server_rss_mb:>8.0f} {r.search_p50_ms:>10.1f} {r.search_p95_ms:>6.1f} {r.search_p99_ms:>7.1f}"
              for r in reports]
    lines.append("(RSS: peak resident memory in MiB of the converter, of the server building its store, and of "
                 "the server after opening it and searching; disk: the store's products and index; search: "
                 "results pages over HTTP, distinct queries)")
    small, large = min(reports, key=lambda r: r.products), max(reports, key=lambda r: r.products)
    if small.products == large.products:
        return "\n".join(lines)

    def at_full(field: str) -> float:
        low, high = getattr(small, field), getattr(large, field)
        return high + (high - low) / (large.products - small.products) * (WEBSHOP_PRODUCTS - large.products)

    lines.append(f"at WebShop's {WEBSHOP_PRODUCTS:,} products (linear through {small.products:,} and "
                 f"{large.products:,}): conversion {at_full('convert_s') / 60:.0f} min and "
                 f"{at_full('convert_peak_rss_mb') / 1024:.2f} GiB peak RSS; index build "
                 f"{at_full('index_build_s') / 60:.0f} min and {at_full('index_build_peak_rss_mb') / 1024:.1f} GiB; "
                 f"server {at_full('server_rss_mb') / 1024:.1f} GiB")
    return "\n".join(lines)


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
    parser.add_argument("--scale", default=None, metavar="N[,N...]",
                        help="instead: convert, index and search catalogues of N products in WebShop's format "
                             "(two sizes or more give an estimate for WebShop's 1.18M)")
    args = parser.parse_args(argv)
    if args.scale is not None:
        return _main_scale(parser, args)
    levels = [int(level) for level in args.concurrency.split(",")]
    if any(level < 1 for level in levels) or args.episodes < 1:
        parser.error(f"expected positive concurrency levels and episodes, got {levels} and {args.episodes}")
    report = run(levels, args.episodes, args.latency_tasks)
    print(render(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=2)
    return 0 if _targets_met(report) else 1


def _main_scale(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        counts = [int(count) for count in args.scale.split(",")]
    except ValueError:
        counts = []
    if not counts or any(count < 1 for count in counts):
        parser.error(f"--scale: expected positive numbers of products separated by commas, got {args.scale!r}")
    reports = [scale(count) for count in counts]
    print(render_scale(reports))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump([asdict(report) for report in reports], file, indent=2)
    return 0


def _targets_met(report: dict[str, Any]) -> bool:
    text = next(row for row in report["latency"] if row["mode"] == "text")
    infra = sum(row["infra_errors"] for row in report["throughput"])
    return text["p50_ms"] < 5.0 and infra == 0 and not any(report["leftovers"].values())


if __name__ == "__main__":
    raise SystemExit(main())
