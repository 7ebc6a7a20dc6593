"""The two passes of the alpha-ReLU loss over an ``(N, V)`` logits matrix, in four engines.

Write ``a = alpha - 1``, ``e = 1 / a`` and ``c = tau / a``. On the support,
``p_j = [a z_j - tau]_+^e = a^e [z_j - c]_+^e``, and since ``p_j (a z_j - tau) = p_j^alpha``
the loss of the paper's eq. (sp_loss) at the label-smoothed target
``q = (1 - eps) e_y + eps / V`` is one reduction per row::

    loss = a^(e+1)/alpha sum_j [z_j - c]_+^(e+1) + 1/(alpha a) + c - (1-eps) z_y - eps/V sum_j z_j

and its gradient (Lemma 1) is ``p - q``: forward only reads the logits, backward writes
``scale * (p - q)`` straight into its output (``eps = 0`` runs the unsmoothed code). Each
:class:`Engine` runs both passes; :func:`select` picks one per call from
``engines.get_engine()``. Inside a user's own ``torch.compile`` the plain math is traced.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from arelu_cli.transforms import _cpp_kernels
from arelu_cli.transforms.engines import get_engine

# Elements per chunk for the eager engine: small enough for the L3 cache, large enough
# that per-op overhead (a few microseconds) stays well under the memory traffic.
_CHUNK_ELEMENTS = 1 << 19
_TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_state = {"failed": False}


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulate in float64 for float64 inputs and in float32 for every other float."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _power_(t: torch.Tensor, exponent: float, out: torch.Tensor) -> torch.Tensor:
    """``out = t ** exponent`` for ``t >= 0``, with the cheap exact cases spelled out."""
    if exponent == 1.0:
        return out.copy_(t)
    if exponent == 2.0:
        return torch.mul(t, t, out=out)
    return torch.pow(t, exponent, out=out)


def _shift_into(zc: torch.Tensor, c: float, t: torch.Tensor) -> torch.Tensor:
    """``t = [zc - c]_+`` in ``t``'s (accumulation) dtype."""
    if zc.dtype == t.dtype:
        return torch.clamp(zc, min=c, out=t).sub_(c)
    return t.copy_(zc).clamp_min_(c).sub_(c)


def _constants(alpha: float, tau: float) -> tuple[float, float, float]:
    a = alpha - 1.0
    return a, 1.0 / a, tau / a


def _rows_per_chunk(vocab: int) -> int:
    return max(1, _CHUNK_ELEMENTS // vocab)


# --------------------------------------------------------------------- eager engine
def _eager_sums(z: torch.Tensor, alpha: float, tau: float,
                logits: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``sum_j [z_j - c]_+^(e+1)`` per row and, with ``logits``, ``sum_j z_j`` (label
    smoothing's term), in the accumulation dtype."""
    n, vocab = z.shape
    _, e, c = _constants(alpha, tau)
    acc = _acc_dtype(z.dtype)
    rows = _rows_per_chunk(vocab)
    t_buf = torch.empty(rows, vocab, dtype=acc, device=z.device)
    p_buf = torch.empty(rows, vocab, dtype=acc, device=z.device)
    sums = torch.empty(n, dtype=acc, device=z.device)
    logit_sums = torch.empty(n, dtype=acc, device=z.device) if logits else None
    for r0 in range(0, n, rows):
        zc = z[r0:r0 + rows]
        t, p = t_buf[:zc.shape[0]], p_buf[:zc.shape[0]]
        _power_(_shift_into(zc, c, t), e, p)           # [z - c]_+^e
        torch.linalg.vecdot(p, t, out=sums[r0:r0 + rows])
        if logit_sums is not None:                     # while the chunk is in the cache
            torch.sum(zc, 1, dtype=acc, out=logit_sums[r0:r0 + rows])
    return sums, logit_sums


def _loss_rows_eager(z: torch.Tensor, y: torch.Tensor, alpha: float, tau: float,
                     eps: float = 0.0) -> torch.Tensor:
    sums, logit_sums = _eager_sums(z, alpha, tau, bool(eps))
    return rows_from_sums(sums, _target_logit(z, y), z.shape[1], alpha, tau, eps, logit_sums)


def rows_from_sums(sums: torch.Tensor, target_logits: torch.Tensor, vocab: int, alpha: float,
                   tau: float, eps: float = 0.0,
                   logit_sums: torch.Tensor | None = None) -> torch.Tensor:
    """The per-row loss from ``sums = sum_j [z_j - c]_+^(e+1)``, the target logits ``z_y``
    and, for label smoothing ``eps > 0``, ``logit_sums = sum_j z_j`` over ``vocab`` columns
    (each a sum over the columns, so it may be added up over blocks of them)."""
    a, e, _ = _constants(alpha, tau)
    rows = sums * (a ** (e + 1.0) / alpha) + (1.0 / (alpha * a) + tau / a)
    if not eps:
        return rows - target_logits
    return rows - (1.0 - eps) * target_logits - (eps / vocab) * logit_sums


def loss_sums(z: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    """``sum_j [z_ij - c]_+^(e+1)`` per row of contiguous ``z (N, V)`` (fp32; fp64 for fp64
    ``z``): the share of the loss that a block of columns holds, the rest being
    :func:`rows_from_sums`'. One C++ pass with the ``cpp`` engine, else the eager ops."""
    if select(z).name == "cpp":
        _, e, c = _constants(alpha, tau)
        return _cpp_kernels.loss_sums(z, c, e)
    return _eager_sums(z, alpha, tau)[0]


def _grad_into_eager(z: torch.Tensor, scale: torch.Tensor, alpha: float, tau: float,
                     out: torch.Tensor, shift: float = 0.0) -> None:
    n, vocab = z.shape
    _, e, c = _constants(alpha, tau)
    acc = _acc_dtype(z.dtype)
    rows = _rows_per_chunk(vocab)
    direct = out.dtype == acc
    t_buf = torch.empty(rows, vocab, dtype=acc, device=z.device)
    p_buf = None if direct else torch.empty(rows, vocab, dtype=acc, device=z.device)
    factor = scale * (alpha - 1.0) ** e                # p = (alpha-1)^e [z - c]_+^e
    offset = scale * shift if shift else None          # label smoothing's scale * eps / V
    for r0 in range(0, n, rows):
        zc = z[r0:r0 + rows]
        m = zc.shape[0]
        t = t_buf[:m]
        p = out[r0:r0 + rows] if direct else p_buf[:m]
        _power_(_shift_into(zc, c, t), e, p).mul_(factor[r0:r0 + rows].unsqueeze(1))
        if offset is not None:
            p.sub_(offset[r0:r0 + rows].unsqueeze(1))
        if not direct:
            out[r0:r0 + rows].copy_(p)


def shifted(logits: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    """``[(alpha - 1) z - tau]_+`` as a fresh tensor."""
    return torch.mul(logits, alpha - 1.0).sub_(tau).clamp_min_(0.0)


def _transform_eager(z: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    t = shifted(z, alpha, tau)
    exponent = 1.0 / (alpha - 1.0)
    return t if exponent == 1.0 else (t.square_() if exponent == 2.0 else t.pow_(exponent))


# ------------------------------------------------------------------ compiled engine
# One function per power (e = 2, e = 1, any e) and every constant passed as a 0-d tensor:
# no Python branch depends on a float, so dynamo never has to guard on one.
def _shift(z: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return (z.to(_acc_dtype(z.dtype)) - c).clamp_min(0.0)


def _target_logit(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return z.gather(1, y.unsqueeze(1)).squeeze(1).to(_acc_dtype(z.dtype))


def _loss_rows_square(z, y, c, k1, k0, e1):
    t = _shift(z, c)
    return (t * t * t).sum(1) * k1 + k0 - _target_logit(z, y)


def _loss_rows_linear(z, y, c, k1, k0, e1):
    t = _shift(z, c)
    return (t * t).sum(1) * k1 + k0 - _target_logit(z, y)


def _loss_rows_power(z, y, c, k1, k0, e1):
    return _shift(z, c).pow(e1).sum(1) * k1 + k0 - _target_logit(z, y)


def _grad_square(z, scale, c, ka, e):
    t = _shift(z, c)
    return t * t * (scale * ka).unsqueeze(1)


def _grad_linear(z, scale, c, ka, e):
    return _shift(z, c) * (scale * ka).unsqueeze(1)


def _grad_power(z, scale, c, ka, e):
    return _shift(z, c).pow(e) * (scale * ka).unsqueeze(1)


def _variant(alpha: float) -> int:
    e = 1.0 / (alpha - 1.0)
    return 0 if e == 2.0 else (1 if e == 1.0 else 2)


_LOSS_ROWS = (_loss_rows_square, _loss_rows_linear, _loss_rows_power)
_GRADS = (_grad_square, _grad_linear, _grad_power)


def _smoothed_loss_rows(fn):
    """``fn``'s rows with ``z_y`` replaced by ``(1 - eps) z_y + (eps / V) sum_j z_j``; the row
    sum is a second reduction over the same rows, which inductor fuses into ``fn``'s."""
    def loss_rows(z, y, c, k1, k0, e1, eps):
        logit_sums = z.sum(1, dtype=_acc_dtype(z.dtype))
        return fn(z, y, c, k1, k0, e1) + eps * _target_logit(z, y) - eps / z.shape[1] * logit_sums
    return loss_rows


def _smoothed_grad(fn):
    """``fn``'s ``scale * p`` minus label smoothing's ``scale * shift`` (``shift = eps / V``)."""
    def grad(z, scale, c, ka, e, shift):
        return fn(z, scale, c, ka, e) - (scale * shift).unsqueeze(1)
    return grad


def _tensor_constants(alpha: float, tau: float, device: torch.device):
    """``c, k1, k0, e+1, a^e, e`` as 0-d float64 tensors (they do not promote the logits)."""
    a, e, c = _constants(alpha, tau)
    values = (c, a ** (e + 1.0) / alpha, 1.0 / (alpha * a) + tau / a, e + 1.0, a ** e, e)
    return [torch.tensor(v, dtype=torch.float64, device=device) for v in values]


def _scalar(value: float, device: torch.device) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64, device=device)


def _loss_rows_traced(z, y, alpha, tau, eps=0.0):
    c, k1, k0, e1, _, _ = _tensor_constants(alpha, tau, z.device)
    if eps:
        return _smoothed_loss_rows(_LOSS_ROWS[_variant(alpha)])(z, y, c, k1, k0, e1, eps)
    return _LOSS_ROWS[_variant(alpha)](z, y, c, k1, k0, e1)


def _grad_traced(z, scale, alpha, tau):
    c, _, _, _, ka, e = _tensor_constants(alpha, tau, z.device)
    return _GRADS[_variant(alpha)](z, scale, c, ka, e)


def _grad_copy(fn):
    def grad_into(z, scale, c, ka, e, out, *shift):
        out.copy_(fn(z, scale, c, ka, e, *shift))
    return grad_into


@functools.lru_cache(maxsize=None)
def _compiled_fns(variant: int, smoothed: bool = False):
    """The compiled loss and gradient passes for one power variant, with or without the
    label smoothing terms."""
    loss_rows, grad = _LOSS_ROWS[variant], _GRADS[variant]
    if smoothed:
        loss_rows, grad = _smoothed_loss_rows(loss_rows), _smoothed_grad(grad)
    return (torch.compile(loss_rows, dynamic=True),
            torch.compile(_grad_copy(grad), dynamic=True))


def _compiled(alpha: float, smoothed: bool = False):
    """The compiled pair of passes, or None when torch.compile is unavailable or failed."""
    if _state["failed"]:
        return None
    try:
        return _compiled_fns(_variant(alpha), smoothed)
    except Exception as err:  # pragma: no cover - depends on the installation
        _fail(err)
        return None


def _fail(err: Exception) -> None:
    _state["failed"] = True
    warnings.warn(f"arelu: torch.compile unavailable ({type(err).__name__}: {err}); "
                  "the alpha-ReLU loss uses its eager engine", RuntimeWarning, stacklevel=3)


def _triton_module():
    """The ``triton`` engine's kernels (imported on first use: importing triton is slow)."""
    from arelu_cli.transforms import _triton_kernels
    return _triton_kernels


def _triton_runs(z: torch.Tensor) -> bool:
    if z.dtype not in _TRITON_DTYPES:
        return False
    if not (z.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"):
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _native_probs_into(module):
    """``probs_into`` of the ``cpp`` or ``triton`` kernels (``module()``), scale in fp32/fp64."""
    def probs_into(z, scale, alpha, tau, out, shift=0.0):
        a, e, c = _constants(alpha, tau)
        scale = None if scale is None else scale.to(_acc_dtype(z.dtype)).contiguous()
        module().probs_into(z, scale, c, e, a ** e, out, *((shift,) if shift else ()))
    return probs_into


def _cpp_loss_rows(z, y, alpha, tau, eps=0.0):
    _, e, c = _constants(alpha, tau)
    if eps:
        sums, logit_sums = _cpp_kernels.loss_and_logit_sums(z, c, e)
    else:
        sums, logit_sums = _cpp_kernels.loss_sums(z, c, e), None
    return rows_from_sums(sums, _target_logit(z, y), z.shape[1], alpha, tau, eps, logit_sums)


def _triton_probs_into(z, scale, alpha, tau, out, shift=0.0):
    """The Triton transform kernel has no smoothing term: with one, the eager loop."""
    if shift:
        _grad_into_eager(z, scale, alpha, tau, out, shift)
    else:
        _native_probs_into(_triton_module)(z, scale, alpha, tau, out)


def _triton_grad_into(z, y, scale, alpha, tau, out, eps=0.0):
    _triton_module().loss_pass(z, y, alpha, tau, eps, grad=out, scale=scale.to(torch.float32))


def _compiled_loss_rows(z, y, alpha, tau, eps=0.0):
    if (fns := _compiled(alpha, bool(eps))) is not None:
        c, k1, k0, e1, _, _ = _tensor_constants(alpha, tau, z.device)
        smoothing = (_scalar(eps, z.device),) if eps else ()
        try:
            return fns[0](z, y, c, k1, k0, e1, *smoothing)
        except Exception as err:  # pragma: no cover - depends on the installation
            _fail(err)
    return _loss_rows_eager(z, y, alpha, tau, eps)


def _compiled_probs_into(z, scale, alpha, tau, out, shift=0.0):
    if (fns := _compiled(alpha, bool(shift))) is not None:
        c, _, _, _, ka, e = _tensor_constants(alpha, tau, z.device)
        smoothing = (_scalar(shift, z.device),) if shift else ()
        try:
            return fns[1](z, scale, c, ka, e, out, *smoothing)
        except Exception as err:  # pragma: no cover - depends on the installation
            _fail(err)
    _grad_into_eager(z, scale, alpha, tau, out, shift)


def _traced_probs_into(z, scale, alpha, tau, out, shift=0.0):
    grad = _grad_traced(z, scale, alpha, tau)
    out.copy_(grad - (scale * shift).unsqueeze(1) if shift else grad)


def _grad_via_probs(probs_into):
    """``grad_into`` from ``probs_into``: ``scale * (p - q)`` as the transform's pass with
    label smoothing's shift ``eps / V``, then ``- scale (1 - eps)`` at each target."""
    def grad_into(z, y, scale, alpha, tau, out, eps=0.0):
        probs_into(z, scale, alpha, tau, out, eps / z.shape[1] if eps else 0.0)
        out.scatter_add_(1, y.unsqueeze(1), (-(1.0 - eps) * scale).unsqueeze(1).to(out.dtype))
    return grad_into


@dataclass(frozen=True)
class Engine:
    """One way to run alpha-ReLU's passes over contiguous ``z (N, V)``; all give the same math.

    ``runs(z)``: whether it can run on ``z`` (else :func:`select` falls back to ``eager``);
    ``loss_rows(z, y, alpha, tau, eps)``: the per-row losses ``(N,)``;
    ``probs_into(z, scale, alpha, tau, out, shift)``: ``out = scale[:, None] * (p - shift)``;
    ``grad_into(z, y, scale, alpha, tau, out, eps)``: ``out = scale[:, None] * (p - q)``;
    ``one_pass``: whether the transform is one kernel (else the eager tensor ops)."""

    name: str
    runs: Callable[[torch.Tensor], bool]
    loss_rows: Callable[..., torch.Tensor]
    probs_into: Callable[..., None]
    grad_into: Callable[..., None]
    one_pass: bool = False


_cpp_probs_into = _native_probs_into(lambda: _cpp_kernels)
EAGER = Engine("eager", lambda z: True, _loss_rows_eager, _grad_into_eager,
               _grad_via_probs(_grad_into_eager))
TRACED = Engine("traced", lambda z: True, _loss_rows_traced, _traced_probs_into,
                _grad_via_probs(_traced_probs_into))
_BY_NAME = {
    "eager": EAGER,
    "cpp": Engine("cpp", lambda z: z.device.type == "cpu" and _cpp_kernels.available(),
                  _cpp_loss_rows, _cpp_probs_into, _grad_via_probs(_cpp_probs_into), True),
    "triton": Engine("triton", _triton_runs,
                     lambda z, y, alpha, tau, eps=0.0:
                     _triton_module().loss_pass(z, y, alpha, tau, eps),
                     _triton_probs_into, _triton_grad_into, True),
    "compiled": Engine("compiled", lambda z: not _state["failed"] and z.dtype != torch.float64,
                       _compiled_loss_rows, _compiled_probs_into,
                       _grad_via_probs(_compiled_probs_into)),
}


def select(z: torch.Tensor) -> Engine:
    """The engine a call on ``z`` runs on: ``traced`` inside a user's ``torch.compile``, else
    the chosen one (``auto``: ``triton`` for CUDA tensors, ``cpp`` for CPU ones) where it can
    run ``z``, else ``eager``."""
    if torch.compiler.is_compiling():
        return TRACED
    name = get_engine()
    if name == "auto":
        name = "triton" if z.is_cuda else "cpp"
    chosen = _BY_NAME[name]
    return chosen if chosen.runs(z) else EAGER


def engine_for(z: torch.Tensor) -> str:
    """The name of :func:`select`'s engine for ``z``."""
    return select(z).name


def loss_rows(z: torch.Tensor, y: torch.Tensor, alpha: float, tau: float,
              eps: float = 0.0) -> torch.Tensor:
    """Per-row alpha-ReLU loss of contiguous ``z (N, V)`` at targets ``y (N,)``, with label
    smoothing ``eps`` (target ``(1 - eps) e_y + eps / V``; 0: none)."""
    return select(z).loss_rows(z, y, alpha, tau, eps)


def grad_into(z: torch.Tensor, y: torch.Tensor, scale: torch.Tensor, alpha: float, tau: float,
              out: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Write ``scale[:, None] * (alpha_relu(z) - q)`` into ``out`` (which may be ``z`` itself),
    ``q = (1 - eps) e_y + eps / V`` the label-smoothed target (``e_y`` for ``eps = 0``)."""
    select(z).grad_into(z, y, scale, alpha, tau, out, eps)
    return out


def support(z: torch.Tensor, alpha: float, tau: float, most: int) -> torch.Tensor | None:
    """The flat indices ``i * V + j`` (int64, ascending) of the entries of contiguous
    ``z (N, V)`` where alpha-ReLU is nonzero (``z > tau / (alpha - 1)``) or NaN; None where
    there are more than ``most``. One C++ pass with the ``cpp`` engine, else tensor ops."""
    c = tau / (alpha - 1.0)
    if select(z).name == "cpp":
        return _cpp_kernels.support(z, c, most)
    live = torch.le(z, c).logical_not_()
    if int(torch.count_nonzero(live)) > most:
        return None
    return live.view(-1).nonzero().squeeze(1)


def probs_into(z: torch.Tensor, scale: torch.Tensor, alpha: float, tau: float,
               out: torch.Tensor) -> torch.Tensor:
    """Write ``scale[:, None] * alpha_relu(z)`` into ``out`` (which may be ``z`` itself),
    ``scale (N,)`` in the accumulation dtype: the gradient ``p - q`` of a block of columns
    before its targets' ``- scale * (1 - eps)``."""
    select(z).probs_into(z, scale, alpha, tau, out)
    return out


def transform(logits: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    """alpha-ReLU of ``logits (..., V)`` in a new tensor: one pass with the ``cpp`` and
    ``triton`` engines, the eager tensor ops otherwise."""
    chosen = select(logits)
    if not chosen.one_pass or logits.dim() == 0:
        return _transform_eager(logits, alpha, tau)
    flat = logits.reshape(-1, logits.shape[-1]).contiguous()
    out = torch.empty_like(flat)
    ones = torch.ones(flat.shape[0], dtype=_acc_dtype(flat.dtype), device=flat.device)
    chosen.probs_into(flat, ones, alpha, tau, out)
    return out.view(logits.shape)
