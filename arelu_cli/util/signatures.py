"""Run signatures, after sacrebleu's: one ``key:value|key:value`` line naming what a result
depends on (transform, alpha, tau, data, recipe, seed, then package versions), so that a
row can be traced back to the run that made it; and the machine that measured a timing.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from importlib import metadata
from pathlib import Path

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
    (``NVIDIA H100 80GB HBM3``), else the CPU's model and how many logical CPUs the process
    may use (``Intel(R) Xeon(R) Processor, 2 CPUs``). Tokens/s and step times of different
    machines are not comparable; this says which machine a number belongs to."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    usable = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count())
    return f"{_cpu_model()}, {usable} CPUs"


@lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8",
                                                    errors="replace").splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def signature(**fields: object) -> str:
    """A one-line signature, e.g. ``transform:1.5-relu|alpha:1.5|tau:0.33|...|torch:2.13.0``.

    Known fields come first in a fixed order, then any extra fields in the order given,
    then the versions of :func:`versions`.
    """
    ordered = [k for k in SIGNATURE_FIELDS if k in fields]
    ordered += [k for k in fields if k not in SIGNATURE_FIELDS]
    parts = [f"{k}:{_fmt(fields[k])}" for k in ordered if fields[k] is not None]
    parts += [f"{k}:{v}" for k, v in versions().items()]
    return "|".join(parts)


def signature_field(signature: object, key: str) -> str | None:
    """The value of ``key`` in a ``key:value|key:value`` signature, or None."""
    for part in str(signature).split("|"):
        name, _, value = part.partition(":")
        if name == key:
            return value
    return None
