"""Which engine runs alpha-ReLU's passes: one process-wide choice, like ``torch.set_default_dtype``.

Engines: ``eager`` (chunked tensor ops, no side effects), ``cpp`` (vectorized C++ loops on CPU,
compiled once, see :func:`build_cpp`), ``triton`` (one GPU kernel per pass), ``compiled``
(``torch.compile``; opt-in, as on CPU it slows the process's other eager ops, see
``results/bench/README.md``) and ``auto`` (the default: ``triton`` for CUDA tensors, ``cpp``
for CPU tensors). An engine that cannot run a given tensor (no GPU, no compiler, float64 for
``compiled``) falls back to ``eager``; every engine computes the same math. ``ARELU_ENGINE``
is read once, at import, as the default; :func:`set_engine` and :func:`engine` change it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from arelu_cli.transforms import _cpp_kernels

ENV = "ARELU_ENGINE"
ENGINES = ("auto", "eager", "compiled", "cpp", "triton")


def _checked(name: str, source: str = "engine") -> str:
    if name not in ENGINES:
        raise ValueError(f"{source} must be one of {', '.join(ENGINES)}, got {name!r}")
    return name


_default = os.environ.get(ENV) or "auto"
_state = {"name": None}  # None until first asked: a bad ARELU_ENGINE fails there, not at import


def get_engine() -> str:
    """The engine chosen now (``auto`` unless :data:`ENV` or :func:`set_engine` said otherwise)."""
    if _state["name"] is None:
        _state["name"] = _checked(_default, ENV)
    return _state["name"]


def set_engine(name: str) -> str:
    """Choose the engine for every later call in this process; return the previous one."""
    previous = _default if _state["name"] is None else _state["name"]
    _state["name"] = _checked(name)
    return previous


@contextlib.contextmanager
def engine(name: str) -> Iterator[str]:
    """``with engine("eager"): ...`` runs its block on ``name`` and restores the engine before."""
    saved = _state["name"]
    set_engine(name)
    try:
        yield name
    finally:
        _state["name"] = saved


def build_cpp() -> bool:
    """Build (or load the cached build of) the ``cpp`` engine now, announcing a compile with one
    warning, instead of at the first CPU call; False where it cannot be built (no compiler or
    ninja: the callers then use ``eager``)."""
    return _cpp_kernels.available()
