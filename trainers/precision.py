"""bfloat16 only where the hardware computes it: float32 on a CPU that would emulate it.

TRL's configs turn ``bf16`` on unless told otherwise, which on a CPU means bfloat16 autocast. A CPU with
AVX512-BF16 or AMX runs it about 3x faster than float32 (10.5 ms against 35.4 ms for a 256-1024-256 MLP's forward
and backward on 2,048 rows, one thread, an AMX Intel Xeon); one without them emulates it, about 11x slower than
float32 (646 ms against 57 ms on the same machine with torch, MKL and oneDNN capped at AVX2), the likely reason
the main job's SFT took 7.2 s a step on an AVX2-only AMD EPYC (0.3 s on the Xeon capped at AVX2, in float32,
three seeds side by side). So a CPU run leaves bf16 off unless the CPU computes it; a bf16 set explicitly is kept.
The tiny model's recipes set it off everywhere (the same numbers on every CPU).
"""

from __future__ import annotations

from typing import Any


def cpu_computes_bf16() -> bool:
    """True when this CPU computes bfloat16 natively: it has AVX512-BF16 or AMX, and oneDNN may use them.

    oneDNN's own answer alone is not enough: it also says yes on AVX512 without BF16, which emulates it (3.4x
    float32's time for the MLP step above, oneDNN capped at AVX512_CORE); the processor's flags alone are not
    either, as ``ONEDNN_MAX_CPU_ISA`` (a kernel path) can take the units away.
    """
    import torch

    has_units = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return bool(has_units and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def runs_on_cpu(config: Any) -> bool:
    """True when a TRL/transformers training config will train on the CPU."""
    import torch

    return bool(config.use_cpu) or not torch.cuda.is_available()


def float32_without_native_bf16(config: Any) -> None:
    """Before a TRL config's own ``__post_init__``: leave ``bf16`` off on a CPU that would emulate it.

    Only an unset ``bf16`` (None, which TRL turns into True) is decided here, and only when ``fp16`` is off too.
    """
    if config.bf16 is None and not config.fp16 and runs_on_cpu(config) and not cpu_computes_bf16():
        config.bf16 = False
