"""Does the echo pretraining reach its targets on every machine? Builds over seeds, kernel paths and threads.

Torch picks its CPU kernels by what the processor offers, in three places that round differently: its own
kernels (``ATEN_CPU_CAPABILITY=avx2|avx512|default`` forces a path), and the matrix products of Intel's MKL and
of oneDNN, which pick their own instruction sets (``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA`` cap them);
thread counts round differently too. A pretraining whose outcome hangs on its draws would then build a good
model on one machine and a useless one on the next. This builds the tiny model's echo pretraining
(:mod:`trainers.pretrain`) once per (kernel path, seed, thread count), each in its own process and its own empty
cache, and prints a table: per build, each phase's steps and final copy accuracy, the build's wall time, and
whether every phase reached its target. It exits 1 when a build missed one. A kernel path caps torch's kernels,
MKL's and oneDNN's (:data:`KERNEL_ENVIRONMENT`), as a processor with only that instruction set would. By default
it builds on every kernel path this processor runs; it refuses (exit 2) a path the processor lacks, which torch
would take anyway and die on with SIGILL.

Builds run side by side (``--parallel``, default: one per CPU core; each build uses ``--threads`` torch
threads), so wall times grow when they share cores with other work.

Example:
    python -m benchmarks.pretraining                  # seeds 0-4 x every kernel path this processor runs
    python -m benchmarks.pretraining --seeds 0 1 --kernels default --threads 1 2 --json builds.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainers.pretrain import PhaseResult, last_attempt, phases_summary

KERNELS = ("default", "avx2", "avx512")
"""Torch's x86 CPU kernel paths (``ATEN_CPU_CAPABILITY``), lowest first. Torch takes a forced path without
checking the processor: one it lacks dies with SIGILL at its first vector kernel (seen on an AVX2-only EPYC
forced onto avx512), so :func:`runnable_kernels` says which ones this processor runs."""

KERNEL_ENVIRONMENT: dict[str, dict[str, str]] = {
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "ONEDNN_MAX_CPU_ISA": "DEFAULT"},
}
"""The variables that put a process on a kernel path, as a processor with only that instruction set would run:
torch's own kernels, MKL's matrix products and oneDNN's (avx512 leaves oneDNN the AVX512 extensions the processor
has, AVX512-BF16 and AMX among them). ATEN_CPU_CAPABILITY alone is a mix no processor runs. MKL stays on the
processor's best set: on an AVX512 Intel machine forced onto avx2, the random strings of seed 0 took 746 steps
with MKL on AVX512 and 678 with it capped at AVX2. And oneDNN keeps AMX, whose bfloat16 attention then calls an
AVX512-only kernel that torch's AVX2 build lacks: SFT stopped at its first step with "pack_vnni2 is only supported
when avx512 is supported". The main job runs on a path with the same variables set, e.g.
``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 python -m trainers.pipeline``."""


@dataclass(frozen=True)
class BuildSpec:
    """One build: the kernel path forced, the pretraining seed, the torch thread count."""

    kernel: str
    seed: int
    threads: int


@dataclass
class Build:
    """How one build went.

    Attributes:
        spec: What was built.
        returncode: The build process's exit status (1: a phase missed its target).
        phases: Each phase's result, of every attempt (empty when the build failed before saving).
        seconds: Wall time of the whole process (model and tokenizer built, pretraining, copy check).
        capability: The kernel path torch reported in the build's process.
        error: The last lines the process wrote to stderr when it failed.
    """

    spec: BuildSpec
    returncode: int
    phases: list[PhaseResult] = field(default_factory=list)
    seconds: float = 0.0
    capability: str = ""
    error: str = ""

    @property
    def reached(self) -> bool:
        """Every phase of the last attempt that has a target reached it."""
        return self.returncode == 0 and bool(self.phases) and not any(
            phase.missed for phase in last_attempt(self.phases))

    @property
    def attempts(self) -> str:
        """How many attempts the build made, and where each dropped one stalled."""
        made = max((phase.attempt for phase in self.phases), default=0) + 1
        stalls = [f"{phase.name} stalled at {phase.accuracy:.3f} after {phase.steps} steps"
                  for phase in self.phases if phase.stalled]
        return f"{made}" + (f" ({'; '.join(stalls)})" if stalls else "")


def runnable_kernels() -> tuple[str, ...]:
    """The kernel paths of :data:`KERNELS` this processor runs: up to the one torch picks on its own."""
    environment = {name: value for name, value in os.environ.items() if name not in KERNEL_ENVIRONMENT["default"]}
    process = subprocess.run([sys.executable, "-c", CAPABILITY_ONLY], env=environment, capture_output=True,
                             text=True, check=True)
    own = process.stdout.strip().removeprefix("capability=").lower()
    return KERNELS[:KERNELS.index(own) + 1] if own in KERNELS else ("default",)


def unrunnable_kernels_error(requested: Sequence[str], runnable: Sequence[str]) -> str | None:
    """The error for the kernel paths in ``requested`` that this processor lacks, or None when it runs them all."""
    missing = [kernel for kernel in requested if kernel not in runnable]
    if not missing:
        return None
    return (f"error: this processor runs torch's kernel paths {', '.join(runnable)}, got --kernels "
            f"{' '.join(requested)}: forced onto {', '.join(missing)}, torch dies with SIGILL. Build "
            f"{', '.join(missing)} on a processor that has it, or leave it out.")


def run_build(spec: BuildSpec, folder: Path, progress: Callable[[str], None] | None = None) -> Build:
    """Build ``spec`` in a fresh process whose cache is ``folder``; returns how it went.

    Each line the build prints (a phase starting, its progress about every minute, its end) goes to ``progress``
    as it comes: a build on a slow path runs for the better part of an hour.
    """
    environment = {**os.environ, "AGENTRL_CACHE": str(folder), **KERNEL_ENVIRONMENT[spec.kernel],
                   "HF_HUB_OFFLINE": "1"}
    record = folder / "phases.json"
    capability = ""
    started = time.perf_counter()
    with (folder / "stderr.log").open("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", CAPABILITY_THEN_BUILD, "--seed", str(spec.seed), "--threads", str(spec.threads),
             "--json", str(record)],
            env=environment, stdout=subprocess.PIPE, stderr=stderr, text=True)
        for line in process.stdout:
            if line.startswith("capability="):
                capability = line.strip().split("=", 1)[1]
            elif progress is not None:
                progress(line.rstrip())
        returncode = process.wait()
        stderr.seek(0)
        errors = stderr.read()
    seconds = time.perf_counter() - started
    phases = [PhaseResult(**phase) for phase in json.loads(record.read_text())] if record.exists() else []
    error = build_error(errors, returncode) if returncode else ""
    return Build(spec, returncode, phases, seconds, capability, error)


def build_error(stderr: str, returncode: int = 1) -> str:
    """The error a failed build printed: its ``error:`` line (progress bars and warnings left out), else the last
    line of its output; a build killed by a signal says which."""
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    lines = stderr.strip().splitlines() or ["(no output)"]
    return next((line for line in reversed(lines) if line.startswith("error:")), lines[-1])


CAPABILITY_ONLY = "import torch; print('capability=' + torch.backends.cpu.get_cpu_capability(), flush=True)"
CAPABILITY_THEN_BUILD = (CAPABILITY_ONLY
                         + "; import sys; from trainers.pretrain import main; sys.exit(main(sys.argv[1:]))")
"""The build process: report the kernel path torch took, then ``python -m trainers.pretrain``
(:data:`CAPABILITY_ONLY` reports it alone)."""


def run_builds(specs: Sequence[BuildSpec], parallel: int, console: Console) -> list[Build]:
    """Every build of ``specs``, ``parallel`` at a time, each in an empty cache of its own (deleted after)."""
    def build(spec: BuildSpec) -> Build:
        def progress(line: str) -> None:
            console.print(f"{_label(spec)}: {line}", markup=False, highlight=False, soft_wrap=True)
            console.file.flush()

        with tempfile.TemporaryDirectory(prefix="agentrl-pretraining-") as folder:
            result = run_build(spec, Path(folder), progress)
        console.print(f"{_label(spec)} ({result.capability or '?'}): "
                      f"{'targets reached' if result.reached else 'MISSED'}, {result.seconds / 60:.1f} min: "
                      f"{phases_summary(result.phases)}",
                      markup=False, highlight=False, soft_wrap=True)
        console.file.flush()
        return result

    with ThreadPoolExecutor(max(1, parallel)) as pool:
        return list(pool.map(build, specs))


def _label(spec: BuildSpec) -> str:
    return f"{spec.kernel}, seed {spec.seed}, {spec.threads} thread(s)"


def builds_table(builds: Sequence[Build]) -> Table:
    """Per build: kernel path (as forced, and as torch took it), seed, threads, each phase's steps and
    accuracy in the last attempt, the attempts, minutes, and whether every target was reached."""
    names = [phase.name for phase in max((last_attempt(build.phases) for build in builds), key=len, default=[])]
    table = Table(title="Echo pretraining builds: steps / final copy accuracy per phase (the last attempt)")
    for column in ("kernel (taken)", "seed", "threads", *names, "attempts", "minutes", "targets"):
        table.add_column(column)
    for build in builds:
        phases = [f"{phase.steps} / {phase.accuracy:.3f}" for phase in last_attempt(build.phases)]
        phases += [""] * (len(names) - len(phases))
        table.add_row(f"{build.spec.kernel} ({build.capability or '?'})", str(build.spec.seed),
                      str(build.spec.threads), *phases, build.attempts, f"{build.seconds / 60:.1f}",
                      "reached" if build.reached else f"MISSED: {build.error or build.phases[-1].name}")
    return table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pretraining", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="Pretraining seeds.")
    parser.add_argument("--kernels", nargs="+", choices=KERNELS,
                        help="Kernel paths (torch's, MKL's and oneDNN's kernels capped at it), one build each "
                             "(default: every one this processor runs).")
    parser.add_argument("--threads", type=int, nargs="+", default=[1], help="Torch thread counts, one build each.")
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 1, help="Builds run at once.")
    parser.add_argument("--json", type=Path, help="Write every build's result here.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.pretraining``: the builds, their table, exit 1 if one missed a target."""
    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    runnable = runnable_kernels()
    kernels = args.kernels or list(runnable)
    if (error := unrunnable_kernels_error(kernels, runnable)) is not None:
        print(error, file=sys.stderr)
        return 2
    specs = [BuildSpec(kernel, seed, threads)
             for kernel, seed, threads in itertools.product(kernels, args.seeds, args.threads)]
    builds = run_builds(specs, args.parallel, console)
    console.print(builds_table(builds))
    reached = sum(build.reached for build in builds)
    console.print(f"targets reached on {reached} of {len(builds)} builds")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(build) for build in builds], indent=2))
    return 0 if reached == len(builds) else 1


if __name__ == "__main__":
    sys.exit(main())
