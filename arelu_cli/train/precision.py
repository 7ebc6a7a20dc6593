"""Which precision a run trains in: bf16 autocast only where the hardware computes bf16
natively (CUDA; a CPU with AVX512-BF16 or AMX), fp32 elsewhere.

``[train] precision = "auto"`` (what the recipes use) decides by the hardware. On a CPU
without those instructions (AVX2 only, say) PyTorch emulates bf16 autocast, far slower
than fp32 training; an explicit ``"bf16"`` there is kept (the user asked for it) with one
warning per process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import lru_cache

import torch

from arelu_cli.util.cpuinfo import cpuinfo

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""``/proc/cpuinfo`` flags of native bf16 arithmetic."""
EMULATED_COST = "far slower than fp32"


@lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively (Linux: its ``/proc/cpuinfo`` flags)."""
    return any(flag in cpuinfo()[1] for flag in CPU_BF16_FLAGS)


def device_type(device: torch.device | str) -> str:
    """``cuda`` or ``cpu`` (``auto``: CUDA when there is one)."""
    if str(device) == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


def resolve(precision: str, device: torch.device | str) -> str:
    """``bf16`` or ``fp32``: what ``precision`` (auto, fp32, bf16) means on ``device``."""
    if precision in ("bf16", "fp32"):
        return precision
    kind = device_type(device)
    return "bf16" if kind == "cuda" or (kind == "cpu" and cpu_has_bf16()) else "fp32"


_warned: set[str] = set()


def warn_if_emulated(precision: str, device: torch.device | str) -> bool:
    """Say once per process (on stderr) that an explicit bf16 runs emulated on this CPU;
    returns whether it said so now."""
    if (precision != "bf16" or device_type(device) != "cpu" or cpu_has_bf16()
            or "cpu" in _warned):
        return False
    _warned.add("cpu")
    print(f"warning: precision bf16 on a CPU without native bf16 (no {' or '.join(CPU_BF16_FLAGS)}"
          f"): autocast is emulated, {EMULATED_COST}; use precision \"auto\" (fp32 here) "
          "unless you need bf16's numerics", file=sys.stderr)
    return True


def autocast(precision: str, device: torch.device | str
             ) -> Callable[[], AbstractContextManager]:
    """A factory of the context that runs a step in ``precision`` on ``device``: bf16
    autocast or nothing (fp32)."""
    kind = device_type(device)
    if resolve(precision, kind) == "bf16":
        warn_if_emulated(precision, kind)
        return lambda: torch.autocast(kind, dtype=torch.bfloat16)
    return contextlib.nullcontext
