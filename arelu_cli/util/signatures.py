"""Run signatures, after sacrebleu's: an object whose fields name what a result depends on
(transform, alpha, tau, data, recipe, seed, then package versions), printed as one
``key:value|key:value`` line so that a row can be traced back to the run that made it, and
never parsed back; and the machine that measured a timing.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata

from arelu_cli.util.cpuinfo import cpuinfo, usable_cpus

# Fields in the order they appear in a signature; absent or None fields are left out.
SIGNATURE_FIELDS = ("transform", "alpha", "tau", "data", "recipe", "seed")


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Versions of the packages a result depends on (missing packages are left out)."""
    found = {"python": platform.python_version()}
    for dist, key in (("arelu", "arelu"), ("torch", "torch"), ("entmax", "entmax"),
                      ("sacrebleu", "sacrebleu"), ("tokenizers", "tokenizers")):
        try:
            found[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def machine(device: object = "cpu") -> str:
    """What ran a timing or a training, for a results column: the GPU's name on CUDA
    (``NVIDIA H100 80GB HBM3``), else the CPU's model, its widest vector extension and how
    many logical CPUs the process may use (``AMD EPYC (AVX2), 2 CPUs``). Tokens/s and step
    times of different machines are not comparable, and one model name covers CPUs with and
    without AVX512-BF16 (2-3x apart in bf16); this says which machine a number belongs to."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{_cpu_model()}, {usable_cpus()} CPUs"


# The widest vector extension a CPU reports, widest first: (cpuinfo flag, name).
CPU_KINDS = (("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX512"), ("avx2", "AVX2"))


@lru_cache(maxsize=1)
def _cpu_model() -> str:
    """``model name`` of /proc/cpuinfo with its widest vector extension in brackets (none
    where the flags name none of CPU_KINDS); the platform's name where there is no cpuinfo."""
    model, flags = cpuinfo()
    if model is None:
        return platform.processor() or platform.machine() or "unknown CPU"
    kind = next((name for flag, name in CPU_KINDS if flag in flags), None)
    return f"{model} ({kind})" if kind else model


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


@dataclass(frozen=True)
class Signature:
    """What a result depends on, as fields (sacrebleu's ``Signature``): it prints as one
    ``key:value|key:value`` line, known fields first in a fixed order, then the extra fields
    in the order given, then the versions of :func:`versions`. A result's own columns hold
    what a reader needs to compute with; the printed line is for people and is never parsed
    back."""

    fields: dict[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        ordered = [k for k in SIGNATURE_FIELDS if k in self.fields]
        ordered += [k for k in self.fields if k not in SIGNATURE_FIELDS]
        parts = [f"{k}:{_fmt(self.fields[k])}" for k in ordered if self.fields[k] is not None]
        parts += [f"{k}:{v}" for k, v in versions().items()]
        return "|".join(parts)


def signature(**fields: object) -> str:
    """The printed :class:`Signature` of ``fields``, e.g.
    ``transform:1.5-relu|alpha:1.5|tau:0.33|...|torch:2.13.0``."""
    return str(Signature(dict(fields)))
