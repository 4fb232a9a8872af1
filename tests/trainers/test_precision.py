"""bf16 only where the CPU computes it: TRL's configs default to it, which a CPU without it emulates ~11x slower."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CONFIGS_BF16 = """
import sys
from trainers.grpo import AgentGRPOConfig
from trainers.precision import cpu_computes_bf16
from trainers.sft import AgentSFTConfig

folder = sys.argv[1]
print(cpu_computes_bf16(),
      AgentSFTConfig(output_dir=folder, use_cpu=True).bf16,
      AgentSFTConfig(output_dir=folder, use_cpu=True, bf16=True).bf16,
      AgentGRPOConfig(output_dir=folder, use_cpu=True, max_steps=1).bf16,
      AgentGRPOConfig(output_dir=folder, use_cpu=True, max_steps=1, bf16=True).bf16)
"""
"""Prints: native bf16; SFT's bf16 unset and set; GRPO's bf16 unset and set. oneDNN reads ONEDNN_MAX_CPU_ISA once,
at start, so each case is a process of its own."""


def _bf16_settings(tmp_path, **environment: str) -> list[str]:
    process = subprocess.run([sys.executable, "-c", CONFIGS_BF16, str(tmp_path)],
                             env={**os.environ, "HF_HUB_OFFLINE": "1", **environment}, capture_output=True, text=True,
                             check=True)
    return process.stdout.split()


def test_a_cpu_without_native_bf16_trains_in_float32_unless_bf16_is_asked_for(tmp_path):
    native, sft, sft_asked, grpo, grpo_asked = _bf16_settings(tmp_path, ONEDNN_MAX_CPU_ISA="AVX2")
    assert native == "False"                        # AVX2 has neither AVX512-BF16 nor AMX
    assert (sft, grpo) == ("False", "False")        # TRL's default (True) would emulate bf16
    assert (sft_asked, grpo_asked) == ("True", "True")


def test_a_cpu_with_native_bf16_keeps_trls_default(tmp_path):
    native, sft, sft_asked, grpo, grpo_asked = _bf16_settings(tmp_path)
    if native != "True":
        pytest.skip("this CPU has neither AVX512-BF16 nor AMX")
    assert (sft, sft_asked, grpo, grpo_asked) == ("True", "True", "True", "True")


def test_avx512_without_bf16_units_counts_as_emulating_it_though_onednn_says_supported(monkeypatch):
    import torch

    from trainers.precision import cpu_computes_bf16

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("oneDNN says no on this CPU: the case is its yes without the units")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)  # a Skylake-class AVX512 processor
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert cpu_computes_bf16() is False
