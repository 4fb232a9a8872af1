"""The pretraining robustness benchmark: the kernel path a build is forced onto, and how builds are judged."""

from __future__ import annotations

import platform
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

import benchmarks.pretraining
from benchmarks.pretraining import (
    CAPABILITY_THEN_BUILD,
    KERNEL_ENVIRONMENT,
    Build,
    BuildSpec,
    build_error,
    builds_table,
    main,
    run_build,
    runnable_kernels,
    unrunnable_kernels_error,
)
from trainers.pretrain import PhaseResult

REACHED = [PhaseResult("random strings", 800, 0.951, 0.95), PhaseResult("sentences", 300, 0.97),
           PhaseResult("report drills", 400, 0.902, 0.9)]


@pytest.mark.parametrize(("kernel", "taken"), [("default", "DEFAULT"), ("avx2", "AVX2")])
def test_a_build_process_takes_the_kernel_path_it_is_forced_onto(kernel, taken):
    import os

    process = subprocess.run([sys.executable, "-c", CAPABILITY_THEN_BUILD.split("; from")[0]],
                             env={**os.environ, "ATEN_CPU_CAPABILITY": kernel}, capture_output=True, text=True,
                             check=True)
    assert process.stdout.strip() == f"capability={taken}"


PRODUCT_BITS = ("import hashlib, numpy, torch; torch.set_num_threads(1); rng = numpy.random.default_rng(0); "
                "a, b = (torch.from_numpy(rng.standard_normal(shape, dtype=numpy.float32)) "
                "for shape in ((64, 257), (257, 129))); "
                "print(hashlib.sha256((a @ b).numpy().tobytes()).hexdigest())")
"""A process that prints a digest of a float32 matrix product's bits (MKL computes it; numpy draws the factors,
whose bits torch's kernel path would change)."""


def _cpu_flags() -> set[str]:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    return set(" ".join(line for line in lines if line.startswith("flags")).split())


def _product_bits(environment: dict[str, str]) -> str:
    import os

    kept = {name: value for name, value in os.environ.items() if name not in KERNEL_ENVIRONMENT["avx2"]}
    return subprocess.run([sys.executable, "-c", PRODUCT_BITS], env={**kept, **environment}, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.skipif("avx2" not in _cpu_flags(), reason="MKL runs above SSE4.2 only on an AVX2 processor")
def test_a_kernel_path_caps_mkls_matrix_products_too():
    own = _product_bits({})
    assert _product_bits({"ATEN_CPU_CAPABILITY": "default"}) == own  # torch's own path alone leaves MKL as it was
    capped = _product_bits(KERNEL_ENVIRONMENT["default"])
    if capped == own and "GenuineIntel" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("MKL may run its SSE4.2 code on this vendor's processors whatever they offer")
    assert capped != own  # the path's MKL cap changes the bits (seen on Intel Xeons with AVX512)


@pytest.mark.parametrize(("returncode", "phases", "reached"), [
    (0, REACHED, True),                                                    # every target met
    (1, [*REACHED[:2], PhaseResult("report drills", 1500, 0.4, 0.9)], False),  # the drills spent their budget
    (0, [], False),                                                        # nothing recorded: no claim
    (1, REACHED, False),                                                   # the process failed after all
    (0, [*REACHED[:2], PhaseResult("report drills", 1000, 0.2, 0.9, stalled=True),
         *(replace(phase, attempt=1) for phase in REACHED)], True),       # the second attempt reached
])
def test_a_build_counts_as_reached_only_when_it_succeeded_and_every_target_was_met(returncode, phases, reached):
    assert Build(BuildSpec("avx2", 0, 1), returncode, phases).reached is reached


def test_the_table_shows_each_phase_and_names_a_missed_target():
    builds = [Build(BuildSpec("avx512", 0, 1), 0, REACHED, 400.0, "AVX512"),
              Build(BuildSpec("default", 3, 2), 1, [*REACHED[:2], PhaseResult("report drills", 1500, 0.4, 0.9)],
                    900.0, "DEFAULT", "error: echo pretraining: phase 'report drills' reached copy accuracy 0.400")]
    console = Console(width=250, record=True)
    console.print(builds_table(builds))
    text = console.export_text()
    assert "avx512 (AVX512)" in text and "800 / 0.951" in text and "400 / 0.902" in text and "reached" in text
    assert "1500 / 0.400" in text and "MISSED: error: echo pretraining: phase 'report drills'" in text


def test_the_table_shows_the_last_attempts_phases_and_where_the_dropped_one_stalled():
    stalled = PhaseResult("report drills", 1000, 0.219, 0.9, stalled=True)
    phases = [*REACHED[:2], stalled, *(replace(phase, attempt=1) for phase in REACHED)]
    build = Build(BuildSpec("avx512", 5, 1), 0, phases)
    console = Console(width=250, record=True)
    console.print(builds_table([build]))
    text = console.export_text()
    assert "1000 / 0.219" not in text and "400 / 0.902" in text and "reached" in text
    assert "2 (report drills stalled at 0.219 after 1000 steps)" in text


def test_a_build_whose_every_attempt_stalled_counts_its_attempts_not_one_more():
    stalled = [replace(phase, attempt=attempt) for attempt in range(3)
               for phase in [*REACHED[:2], PhaseResult("report drills", 1000, 0.2, 0.9, stalled=True)]]
    build = Build(BuildSpec("avx512", 5, 1), 1, stalled, error="error: echo pretraining: phase 'report drills' stood")
    assert build.attempts.startswith("3 (report drills stalled at 0.200") and not build.reached


def test_unknown_kernel_paths_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--kernels", "avx1024"])
    assert "invalid choice" in capsys.readouterr().err


def test_a_failed_builds_error_is_its_error_line_not_the_progress_bars_around_it():
    stderr = ("Loading weights:   0%|          | 0/29\nLoading weights: 100%|##########| 29/29\n"
              "error: echo pretraining: phase 'report drills' reached copy accuracy 0.865\n")
    assert build_error(stderr) == "error: echo pretraining: phase 'report drills' reached copy accuracy 0.865"
    assert build_error("Traceback (most recent call last):\nMemoryError\n") == "MemoryError"
    assert build_error("") == "(no output)"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="torch's x86 kernel paths")
def test_the_runnable_kernel_paths_are_those_the_processors_flags_allow(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # the processor's own paths are asked, not a forced one
    flags = _cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        expected = ("default", "avx2", "avx512")
    elif {"avx2", "fma"} <= flags:
        expected = ("default", "avx2")
    else:
        expected = ("default",)
    assert runnable_kernels() == expected


@pytest.mark.parametrize(("requested", "missing"), [
    (["avx2", "default"], None),         # both run on an AVX2 processor
    (["avx512"], "avx512"),              # forced onto a path the processor lacks: SIGILL
    (["default", "avx512"], "avx512"),   # one of several
])
def test_kernel_paths_the_processor_lacks_are_named(requested, missing):
    error = unrunnable_kernels_error(requested, ("default", "avx2"))
    if missing is None:
        assert error is None
    else:
        assert f"forced onto {missing}, torch dies with SIGILL" in error
        assert "runs torch's kernel paths default, avx2" in error


def test_a_kernel_path_the_processor_lacks_is_refused_before_any_build(monkeypatch, capsys):
    monkeypatch.setattr(benchmarks.pretraining, "runnable_kernels", lambda: ("default", "avx2"))
    monkeypatch.setattr(benchmarks.pretraining, "run_builds", lambda *args: pytest.fail("a build was started"))
    assert main(["--kernels", "avx2", "avx512", "--seeds", "0"]) == 2
    assert "forced onto avx512" in capsys.readouterr().err


def test_a_build_killed_by_a_signal_says_which():
    assert build_error("", -4) == "killed by SIGILL"
    assert build_error("Loading weights: 100%\n", -9) == "killed by SIGKILL"


FAKE_BUILD = ("import sys; print('capability=AVX2', flush=True); "
              "print('echo pretraining, random strings: step 390, copy accuracy 0.143, 60 s', flush=True); "
              "print('error: echo pretraining: phase ' + repr('random strings') + ' reached 0.2', file=sys.stderr); "
              "sys.exit(1)")
"""A build process that reports its kernel path and one progress line, then fails as a missed phase does."""


def test_a_builds_progress_lines_reach_the_caller_as_they_come_and_its_error_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmarks.pretraining, "CAPABILITY_THEN_BUILD", FAKE_BUILD)
    seen = []
    build = run_build(BuildSpec("avx2", 3, 1), tmp_path, seen.append)
    assert seen == ["echo pretraining, random strings: step 390, copy accuracy 0.143, 60 s"]  # not the capability
    assert build.capability == "AVX2" and build.returncode == 1 and not build.reached
    assert build.error == "error: echo pretraining: phase 'random strings' reached 0.2"
