"""The ``cpp`` engine of alpha-ReLU: ``csrc/alpha_relu_cpu.cpp``, compiled once per machine.

The two passes of the paper's eq. (sp_loss) and Lemma 1 (see ``alpha_relu_kernels``), with
label smoothing's row sum and uniform gradient term fused in, alpha-ReLU's support (the
fused linear layer's sparse gradient, ``_torch_linear``), and decoding's per-row top-k
logits (``top_scores``), as vectorized C++ loops over rows on ATen's own thread pool
(``at::parallel_for``; the extension links the OpenMP runtime torch already loaded). Built by
``torch.utils.cpp_extension.load_inline`` at the first call, or ahead of time by
:func:`arelu_cli.transforms.build_cpp`; a compile (not a load of the cached build, under
``TORCH_EXTENSIONS_DIR`` or ``~/.cache/torch_extensions``, one folder per Python, torch,
instruction set and source) is announced by one warning. Without a C++ compiler or ninja,
or on any build error, :func:`ops` warns once and returns None and the callers use the eager
engine. POSIX only (``fcntl``), like the compiler toolchain it needs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import sys
import threading
import warnings
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("csrc") / "alpha_relu_cpu.cpp"
_lock = threading.Lock()


_state: dict = {"ops": None, "failed": False}


def _isa_flags() -> list[str]:
    """AVX2 + FMA where the CPU has them (the loops are written to auto-vectorize)."""
    from arelu_cli.util.cpuinfo import cpuinfo

    return ["-mavx2", "-mfma"] if {"avx2", "fma"} <= cpuinfo()[1] else []


def _build_directory(isa: list[str]) -> Path:
    """One folder per Python, torch, instruction set and source, so no stale build is ever
    loaded and two checkouts with different sources never rebuild each other's."""
    from torch.utils import cpp_extension  # imported here: it pulls in setuptools

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    tag = re.sub(r"[^A-Za-z0-9]+", "_", f"py{sys.version_info[0]}{sys.version_info[1]}_"
                                        f"torch{torch.__version__}_{'avx2' if isa else 'base'}")
    tag += "_" + hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    folder = Path(root) / f"arelu_alpha_relu_cpu_{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _build():
    from torch.utils import cpp_extension

    cpp_extension.verify_ninja_availability()
    isa = _isa_flags()
    folder = _build_directory(isa)
    if not (folder / "arelu_alpha_relu_cpu.so").exists():
        warnings.warn(f"arelu: compiling the C++ alpha-ReLU kernels into {folder} (about 10 s, "
                      "once per machine)", stacklevel=4)
    with open(folder / "arelu.flock", "w") as lock:
        # An OS lock dies with its process; torch's own lock file, left behind by a build
        # that was killed, would make every later build wait forever.
        fcntl.flock(lock, fcntl.LOCK_EX)
        (folder / "lock").unlink(missing_ok=True)
        cpp_extension.load_inline(
            name="arelu_alpha_relu_cpu", cpp_sources=[_SOURCE.read_text()],
            build_directory=str(folder), is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp", *isa], extra_ldflags=["-fopenmp"])
    return torch.ops.arelu_cpu


def ops():
    """``torch.ops.arelu_cpu`` (``loss_sums``, ``loss_and_logit_sums``, ``probs_into``,
    ``support``, ``top_k_logits``), built on the first call; None when it cannot be built."""
    if _state["ops"] is not None or _state["failed"]:
        return _state["ops"]
    with _lock:
        if _state["ops"] is None and not _state["failed"]:
            try:
                _state["ops"] = _build()
            except Exception as err:  # no compiler, no ninja, a build or load error
                _state["failed"] = True
                warnings.warn(f"arelu: the C++ alpha-ReLU kernels could not be built "
                              f"({type(err).__name__}: {str(err)[:300]}); using the eager "
                              "engine", RuntimeWarning, stacklevel=3)
    return _state["ops"]


def available() -> bool:
    """Whether the ``cpp`` engine can run (building it if needed)."""
    return ops() is not None


def loss_sums(z: torch.Tensor, c: float, e: float) -> torch.Tensor:
    """``sum_j [z_ij - c]_+^(e + 1)`` per row of contiguous CPU ``z (N, V)``, in float32
    (float64 for float64 ``z``)."""
    return _state["ops"].loss_sums(z, c, e)


def loss_and_logit_sums(z: torch.Tensor, c: float, e: float) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`loss_sums` and ``sum_j z_ij`` (the label-smoothed loss's extra term), both from
    one read pass over ``z``."""
    return _state["ops"].loss_and_logit_sums(z, c, e)


def probs_into(z: torch.Tensor, scale: torch.Tensor, c: float, e: float, ka: float,
               out: torch.Tensor, shift: float = 0.0) -> None:
    """``out_ij = scale_i * (ka * [z_ij - c]_+^e - shift)``; ``out`` may be ``z`` itself.
    ``shift`` is label smoothing's ``eps / V``; 0 runs the loops without it."""
    _state["ops"].probs_into(z, scale, c, e, ka, out, shift)


def support(z: torch.Tensor, c: float, most: int) -> torch.Tensor | None:
    """The flat indices ``i * V + j`` (int64, ascending) of the entries of contiguous CPU
    ``z (N, V)`` above ``c`` or NaN, in one read pass; None where more than ``most``."""
    flat, count = _state["ops"].support(z, c, most)
    return None if count > most else flat


def top_k_logits(z: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest logits of each row of contiguous float32 CPU ``z (N, V)`` and their
    indices, ``(N, k)`` each, larger first and equal logits lower index first, in one read
    pass; a row holding a NaN gets NaN values and indices ``0..k-1``."""
    return _state["ops"].top_k_logits(z, k)
