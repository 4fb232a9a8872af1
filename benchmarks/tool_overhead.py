"""Overhead of one trivial tool call (``x = 1``): the persistent kernel against a process per call.

Side by side in one run, on the backends that work here:

    ==================  =============================================================
    row                 what one call costs
    ==================  =============================================================
    kernel-docker       ``DockerSandbox.run_code``: a request over a live ``docker exec`` stream
    kernel-bwrap        ``BwrapSandbox.run_code``: a request over a live bubblewrap kernel
    docker-exec         a fresh ``docker exec <container> python3 -c ...``
    docker-run          a fresh ``docker run --rm --network none <image> python3 -c ...``
    bwrap-process       a fresh ``bwrap ... python3 -c ...`` (the sandbox's own namespaces)
    ==================  =============================================================

Each row gives p50 and p99 in milliseconds and its p50 as a multiple of the persistent kernel's
over Docker (the bwrap kernel's when Docker is unavailable). The target is a persistent-kernel
overhead of at most 2 ms at p50.

Example:
    python -m benchmarks.tool_overhead                       # both backends, default call counts
    python -m benchmarks.tool_overhead --calls 200 --backends bwrap --json overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agentgym_envs.errors import SandboxError
from agentgym_envs.sandbox import KernelSandbox, SandboxLimits, open_sandbox
from agentgym_envs.sandbox.bwrap import BwrapSandbox, bwrap_available
from agentgym_envs.sandbox.labels import SANDBOX_LABEL

TOOL_CALL = "x = 1"
"""The trivial tool call whose cost is all overhead."""

TARGET_P50_MS = 2.0
"""Target: the persistent kernel's p50 overhead per tool call, in milliseconds."""

WARMUP_CALLS = 5
"""Calls made and discarded before each row is timed (caches, first imports)."""

ROWS = ("kernel-docker", "kernel-bwrap", "docker-exec", "docker-run", "bwrap-process")
"""Every row the benchmark can report, in display order."""

ROW_BACKEND = {"kernel-docker": "docker", "docker-exec": "docker", "docker-run": "docker",
               "kernel-bwrap": "bwrap", "bwrap-process": "bwrap"}

ROW_METHOD = {
    "kernel-docker": "DockerSandbox.run_code",
    "kernel-bwrap": "BwrapSandbox.run_code",
    "docker-exec": "docker exec python3 -c",
    "docker-run": "docker run --rm python3 -c",
    "bwrap-process": "bwrap ... python3 -c",
}
"""What one call of each row does (short, for the table)."""


@dataclass(frozen=True)
class Row:
    """Timings of one way of making the tool call.

    Attributes:
        name: One of :data:`ROWS`.
        method: What one call does, in words.
        calls: How many timed calls (warm-up excluded).
        p50_ms: Median latency.
        p99_ms: 99th percentile latency.
        mean_ms: Mean latency.
        ratio: ``p50_ms`` over the baseline row's ``p50_ms`` (filled in by :func:`add_ratios`).
    """

    name: str
    method: str
    calls: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    ratio: float | None = None


@dataclass
class Report:
    """Everything one run measured.

    Attributes:
        rows: Measured rows, in :data:`ROWS` order.
        skipped: Rows not measured, with the reason.
        baseline: Name of the row the ratios are relative to.
        target_p50_ms: The persistent-kernel target.
        target_met: True when every measured persistent-kernel row meets the target (None when
            no kernel row was measured).
        machine: CPU count, platform and Python version of the host.
    """

    rows: list[Row] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None
    target_p50_ms: float = TARGET_P50_MS
    target_met: bool | None = None
    machine: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ timing


def time_calls(call: Callable[[], None], calls: int, warmup: int = WARMUP_CALLS) -> list[float]:
    """Run ``call`` ``warmup + calls`` times and return the last ``calls`` latencies in ms."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def summarize(name: str, samples: Sequence[float]) -> Row:
    """A :class:`Row` with the median, 99th percentile and mean of ``samples`` (ms)."""
    ordered = sorted(samples)
    p99 = ordered[-1] if len(ordered) < 2 else statistics.quantiles(ordered, n=100, method="inclusive")[98]
    return Row(name=name, method=ROW_METHOD[name], calls=len(ordered), p50_ms=statistics.median(ordered),
               p99_ms=p99, mean_ms=statistics.fmean(ordered))


def run_checked(argv: Sequence[str]) -> None:
    """Run a command that must succeed (a failure would be timed as if it were a call)."""
    completed = subprocess.run(list(argv), capture_output=True, timeout=120)
    if completed.returncode != 0:
        raise SandboxError(f"{argv[0]} exited with {completed.returncode}: "
                           f"{completed.stderr.decode(errors='replace').strip()[-500:]}")


# -------------------------------------------------------------------------------------------- rows


def kernel_call(sandbox: KernelSandbox) -> Callable[[], None]:
    """One persistent-kernel tool call, checked."""
    def call() -> None:
        result = sandbox.run_code(TOOL_CALL)
        if not result.ok:
            raise SandboxError(f"{sandbox.backend} kernel failed the tool call: {result.output}")
    return call


def docker_exec_argv(container_id: str) -> list[str]:
    """A fresh process in an existing sandbox container, as the sandbox's user."""
    return ["docker", "exec", "-u", "65534:65534", container_id, "python3", "-c", TOOL_CALL]


def docker_run_argv(image: str) -> list[str]:
    """A fresh container per call (labelled, so that a sweep removes any an interrupt leaves)."""
    return ["docker", "run", "--rm", "--network", "none", "--label", f"{SANDBOX_LABEL}=1",
            image, "python3", "-c", TOOL_CALL]


def bwrap_process_argv(sandbox: BwrapSandbox) -> list[str]:
    """A fresh bubblewrap process with the sandbox's own namespaces and mounts."""
    return sandbox.python_argv("-c", TOOL_CALL)


def measure_docker(limits: SandboxLimits, calls: int, process_calls: int, run_calls: int,
                   report: Report) -> None:
    """The three Docker rows, from one sandbox container (and its image for ``docker run``)."""
    try:
        sandbox = open_sandbox("docker", limits)
    except SandboxError as exc:
        for name in ("kernel-docker", "docker-exec", "docker-run"):
            report.skipped[name] = str(exc)
        return
    try:
        report.rows.append(summarize("kernel-docker", time_calls(kernel_call(sandbox), calls)))
        exec_argv = docker_exec_argv(sandbox.container.id)
        report.rows.append(summarize("docker-exec", time_calls(lambda: run_checked(exec_argv), process_calls)))
        run_argv = docker_run_argv(sandbox.image)
        report.rows.append(summarize("docker-run", time_calls(lambda: run_checked(run_argv), run_calls, 1)))
    finally:
        sandbox.close()


def measure_bwrap(limits: SandboxLimits, calls: int, process_calls: int, report: Report) -> None:
    """The two bubblewrap rows."""
    if not bwrap_available():
        reason = "bubblewrap is missing or cannot create namespaces (apt-get install bubblewrap)"
        report.skipped.update({"kernel-bwrap": reason, "bwrap-process": reason})
        return
    sandbox = BwrapSandbox(limits)
    try:
        report.rows.append(summarize("kernel-bwrap", time_calls(kernel_call(sandbox), calls)))
        argv = bwrap_process_argv(sandbox)
        report.rows.append(summarize("bwrap-process", time_calls(lambda: run_checked(argv), process_calls)))
    finally:
        sandbox.close()


# ----------------------------------------------------------------------------------------- report


def add_ratios(report: Report) -> None:
    """Set each row's ratio to the baseline (kernel-docker, else kernel-bwrap) and the target verdict."""
    by_name = {row.name: row for row in report.rows}
    report.baseline = next((name for name in ("kernel-docker", "kernel-bwrap") if name in by_name), None)
    if report.baseline is not None:
        base = by_name[report.baseline].p50_ms
        report.rows = [Row(**{**asdict(row), "ratio": row.p50_ms / base}) for row in report.rows]
    kernels = [row for row in report.rows if row.name.startswith("kernel-")]
    report.target_met = all(row.p50_ms <= report.target_p50_ms for row in kernels) if kernels else None
    order = {name: index for index, name in enumerate(ROWS)}
    report.rows.sort(key=lambda row: order[row.name])


def run_benchmark(backends: Sequence[str] = ("docker", "bwrap"), *, calls: int = 1000,
                  process_calls: int = 50, run_calls: int = 20) -> Report:
    """Measure every row of ``backends`` and return the report.

    Args:
        backends: Which of ``docker`` and ``bwrap`` to measure; an unavailable one is skipped
            with its reason.
        calls: Timed calls of each persistent kernel.
        process_calls: Timed calls of ``docker exec`` and of a fresh bwrap process.
        run_calls: Timed calls of ``docker run`` (each starts a container).
    """
    report = Report(machine={"cpus": str(os.cpu_count()), "platform": platform.platform(),
                             "python": platform.python_version()})
    limits = SandboxLimits()
    if "docker" in backends:
        measure_docker(limits, calls, process_calls, run_calls, report)
    if "bwrap" in backends:
        measure_bwrap(limits, calls, process_calls, report)
    add_ratios(report)
    return report


def target_line(report: Report) -> str:
    """One sentence: is the persistent-kernel target met?"""
    kernels = ", ".join(f"{row.name} {row.p50_ms:.2f} ms" for row in report.rows if row.name.startswith("kernel-"))
    if report.target_met is None:
        return f"Target persistent-kernel overhead p50 <= {report.target_p50_ms:g} ms: not measured"
    verdict = "MET" if report.target_met else "NOT MET"
    return f"Target persistent-kernel overhead p50 <= {report.target_p50_ms:g} ms: {verdict} ({kernels})"


def render(report: Report, console: Console) -> None:
    """Print the table, the skipped rows and the target verdict."""
    title = (f"Tool-call overhead of `{TOOL_CALL}` ({report.machine.get('cpus')} CPUs, "
             f"Python {report.machine.get('python')})")
    caption = f"ratio = p50 / {report.baseline} p50" if report.baseline else None
    table = Table(title=title, caption=caption)
    for column, justify in (("row", "left"), ("one call", "left"), ("calls", "right"), ("p50 ms", "right"),
                            ("p99 ms", "right"), ("ratio", "right")):
        table.add_column(column, justify=justify, no_wrap=column != "one call")
    for row in report.rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:,.1f}x"
        table.add_row(row.name, row.method, str(row.calls), f"{row.p50_ms:,.2f}", f"{row.p99_ms:,.2f}", ratio)
    console.print(table)
    for name, reason in report.skipped.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
    console.print(target_line(report))


def write_json(report: Report, path: Path) -> None:
    """Write the report as JSON."""
    payload = asdict(report)
    payload["tool_call"] = TOOL_CALL
    path.write_text(json.dumps(payload, indent=2) + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tool_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per persistent kernel")
    parser.add_argument("--process-calls", type=int, default=50,
                        help="timed calls of a fresh `docker exec` and of a fresh bwrap process")
    parser.add_argument("--run-calls", type=int, default=20, help="timed calls of a fresh `docker run`")
    parser.add_argument("--backends", nargs="+", choices=("docker", "bwrap"), default=["docker", "bwrap"],
                        help="backends to measure (unavailable ones are reported as skipped)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers to PATH")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when the target is not met")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; status 2 when nothing could be measured, 1 with --check and a missed target."""
    args = build_parser().parse_args(argv)
    for name in ("calls", "process_calls", "run_calls"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}: expected >= 1, got {getattr(args, name)}")
    report = run_benchmark(args.backends, calls=args.calls, process_calls=args.process_calls,
                           run_calls=args.run_calls)
    render(report, Console())
    if args.json is not None:
        write_json(report, args.json)
    if not report.rows:
        return 2
    return 1 if args.check and report.target_met is False else 0


if __name__ == "__main__":
    sys.exit(main())
