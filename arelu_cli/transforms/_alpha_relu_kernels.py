"""The two passes of the alpha-ReLU loss over an ``(N, V)`` logits matrix, in four engines.

Write ``a = alpha - 1``, ``e = 1 / a`` and ``c = tau / a``. On the support,
``p_j = [a z_j - tau]_+^e = a^e [z_j - c]_+^e``, and since ``p_j (a z_j - tau) = p_j^alpha``
the loss of the paper's eq. (sp_loss) reduces to one reduction per row::

    loss = a^(e+1) * sum_j [z_j - c]_+^(e+1) / alpha + 1/(alpha a) + tau/a - z_y

and its gradient (Lemma 1) is ``p - e_y``. So the forward pass only reads the logits
(nothing N x V is kept for backward but the logits themselves) and the backward pass
writes ``scale * p - scale * e_y`` straight into its output buffer. The transform itself
is the backward pass's ``p`` with unit scale.

Label smoothing ``eps`` (target ``q = (1 - eps) e_y + eps / V``, gradient ``p - q``)
replaces ``z_y - c`` by ``q^T (z - c) = (1 - eps)(z_y - c) + (eps / V) sum_j (z_j - c)``;
the ``c`` terms cancel as ``q`` sums to one, leaving ``- (1 - eps) z_y - (eps / V) sum_j z_j``.
So the forward pass also sums each row of ``z``, in the same read (``cpp``: the same loop;
``eager``: the same cached chunk; ``compiled``: the same inductor reduction), and the
backward pass writes ``scale * (p - eps / V) - scale * (1 - eps) e_y``, still one write
pass. ``eps = 0`` runs the unsmoothed code unchanged.

Engines (``ARELU_ENGINE=auto|eager|compiled|cpp|triton``, default ``auto``: ``triton``
for CUDA tensors, ``cpp`` for CPU tensors, each falling back to ``eager``):
* ``eager``: row chunks that stay in the L3 cache, every op writing into reused chunk
  buffers, so no N x V temporary is ever allocated. No side effects on the process.
* ``cpp`` (CPU): vectorized C++ loops on ATen's thread pool, built at first use
  (``_cpp_kernels``); one read pass forward, one read+write pass backward.
* ``triton`` (CUDA fp32/bf16/fp16; CPU tensors too under ``TRITON_INTERPRET=1``): one
  Triton kernel (``_triton_kernels``) reads each row once and writes its loss and, when
  asked, its whole gradient ``scale * (p - q)``, target and smoothing included (no
  scatter). ``alpha_relu_loss`` runs it once, in forward (``_single_pass_loss``); here
  ``loss_rows`` and ``grad_into`` call it for the loss alone or the gradient alone.
* ``compiled``: the same math as one ``torch.compile``d (inductor) loop per pass; opt-in:
  on CPU, once an inductor kernel has run, the process's *other* eager ops (matmul,
  log_softmax) ran 1.3-4x slower on our 2-core machine unless ``OMP_WAIT_POLICY=PASSIVE``
  is set before start. Any compile failure falls back to ``eager`` for good.
Inside a user's own ``torch.compile`` the plain math is traced so inductor can fuse it.
"""

from __future__ import annotations

import functools
import os
import warnings

import torch

from arelu_cli.transforms import _cpp_kernels

# Elements per chunk for the eager engine: small enough for the L3 cache, large enough
# that per-op overhead (a few microseconds) stays well under the memory traffic.
_CHUNK_ELEMENTS = 1 << 19
ENGINE_ENV = "ARELU_ENGINE"
_OLD_ENGINE_ENV = "ARELU_BACKEND"  # its name before 0.2; still read when ENGINE_ENV is unset
ENGINES = ("auto", "eager", "compiled", "cpp", "triton")
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
def _loss_rows_eager(z: torch.Tensor, y: torch.Tensor, alpha: float, tau: float,
                     eps: float = 0.0) -> torch.Tensor:
    n, vocab = z.shape
    _, e, c = _constants(alpha, tau)
    acc = _acc_dtype(z.dtype)
    rows = _rows_per_chunk(vocab)
    t_buf = torch.empty(rows, vocab, dtype=acc, device=z.device)
    p_buf = torch.empty(rows, vocab, dtype=acc, device=z.device)
    sums = torch.empty(n, dtype=acc, device=z.device)
    logit_sums = torch.empty(n, dtype=acc, device=z.device) if eps else None
    for r0 in range(0, n, rows):
        zc = z[r0:r0 + rows]
        t, p = t_buf[:zc.shape[0]], p_buf[:zc.shape[0]]
        _power_(_shift_into(zc, c, t), e, p)           # [z - c]_+^e
        torch.linalg.vecdot(p, t, out=sums[r0:r0 + rows])
        if logit_sums is not None:                     # while the chunk is in the cache
            torch.sum(zc, 1, dtype=acc, out=logit_sums[r0:r0 + rows])
    return _rows_from_sums(sums, z, y, alpha, tau, eps, logit_sums)


def _rows_from_sums(sums: torch.Tensor, z: torch.Tensor, y: torch.Tensor, alpha: float,
                    tau: float, eps: float = 0.0,
                    logit_sums: torch.Tensor | None = None) -> torch.Tensor:
    """The per-row loss from ``sums = sum_j [z_j - c]_+^(e+1)`` (and, for label smoothing
    ``eps > 0``, ``logit_sums = sum_j z_j``)."""
    a, e, _ = _constants(alpha, tau)
    rows = sums * (a ** (e + 1.0) / alpha) + (1.0 / (alpha * a) + tau / a)
    if not eps:
        return rows - _target_logit(z, y)
    return rows - (1.0 - eps) * _target_logit(z, y) - (eps / z.shape[1]) * logit_sums


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


def _native(engine: str):
    """The module of the ``cpp`` or ``triton`` engine (imported on first use)."""
    if engine == "cpp":
        return _cpp_kernels
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


def engine_for(z: torch.Tensor) -> str:
    """Which engine a call on ``z`` uses: ``traced`` (inside a user's torch.compile),
    ``triton``, ``cpp``, ``compiled`` (not for float64) or ``eager``; see the module docstring."""
    if torch.compiler.is_compiling():
        return "traced"
    name = ENGINE_ENV if ENGINE_ENV in os.environ or _OLD_ENGINE_ENV not in os.environ else _OLD_ENGINE_ENV
    choice = os.environ.get(name, "auto")
    if choice not in ENGINES:
        raise ValueError(f"{name} must be one of {', '.join(ENGINES)}, got {choice!r}")
    if choice == "auto":
        choice = "triton" if z.is_cuda else "cpp"
    if choice == "triton" and _triton_runs(z):
        return "triton"
    if choice == "cpp" and z.device.type == "cpu" and _cpp_kernels.available():
        return "cpp"
    if choice == "compiled" and not _state["failed"] and z.dtype != torch.float64:
        return "compiled"
    return "eager"


def _engine(z: torch.Tensor, eps: float) -> str:
    """:func:`engine_for`, but ``eager`` where it says ``triton`` and label smoothing is on
    (``eps > 0``): the Triton transform kernel has no smoothing term (the loss kernel has
    one: ``loss_rows`` and ``grad_into`` take it before asking this)."""
    engine = engine_for(z)
    return "eager" if eps and engine == "triton" else engine


def loss_rows(z: torch.Tensor, y: torch.Tensor, alpha: float, tau: float,
              eps: float = 0.0) -> torch.Tensor:
    """Per-row alpha-ReLU loss of contiguous ``z (N, V)`` at targets ``y (N,)``, with label
    smoothing ``eps`` (target ``(1 - eps) e_y + eps / V``; 0: none)."""
    if engine_for(z) == "triton":
        return _native("triton").loss_pass(z, y, alpha, tau, eps)
    engine = _engine(z, eps)
    if engine == "traced":
        return _loss_rows_traced(z, y, alpha, tau, eps)
    if engine == "cpp" and eps:
        _, e, c = _constants(alpha, tau)
        sums, logit_sums = _cpp_kernels.loss_and_logit_sums(z, c, e)
        return _rows_from_sums(sums, z, y, alpha, tau, eps, logit_sums)
    if engine == "cpp":
        _, e, c = _constants(alpha, tau)
        return _rows_from_sums(_cpp_kernels.loss_sums(z, c, e), z, y, alpha, tau)
    if engine == "compiled" and (fns := _compiled(alpha, bool(eps))) is not None:
        c, k1, k0, e1, _, _ = _tensor_constants(alpha, tau, z.device)
        smoothing = (_scalar(eps, z.device),) if eps else ()
        try:
            return fns[0](z, y, c, k1, k0, e1, *smoothing)
        except Exception as err:  # pragma: no cover - depends on the installation
            _fail(err)
    return _loss_rows_eager(z, y, alpha, tau, eps)


def probs_into(z: torch.Tensor, scale: torch.Tensor, alpha: float, tau: float,
               out: torch.Tensor, shift: float = 0.0) -> torch.Tensor:
    """Write ``scale[:, None] * (alpha_relu(z) - shift)`` into ``out`` (which may be ``z``
    itself); ``shift`` is label smoothing's ``eps / V`` (0: none)."""
    engine = _engine(z, shift)
    if engine == "traced":
        grad = _grad_traced(z, scale, alpha, tau)
        out.copy_(grad - (scale * shift).unsqueeze(1) if shift else grad)
    elif engine == "cpp" and shift:
        a, e, c = _constants(alpha, tau)
        scale = scale.to(_acc_dtype(z.dtype)).contiguous()
        _cpp_kernels.probs_into(z, scale, c, e, a ** e, out, shift)
    elif engine in ("cpp", "triton"):
        a, e, c = _constants(alpha, tau)
        scale = scale.to(_acc_dtype(z.dtype)).contiguous()
        _native(engine).probs_into(z, scale, c, e, a ** e, out)
    elif engine == "compiled" and (fns := _compiled(alpha, bool(shift))) is not None:
        c, _, _, _, ka, e = _tensor_constants(alpha, tau, z.device)
        smoothing = (_scalar(shift, z.device),) if shift else ()
        try:
            fns[1](z, scale, c, ka, e, out, *smoothing)
        except Exception as err:  # pragma: no cover - depends on the installation
            _fail(err)
            _grad_into_eager(z, scale, alpha, tau, out, shift)
    else:
        _grad_into_eager(z, scale, alpha, tau, out, shift)
    return out


def grad_into(z: torch.Tensor, y: torch.Tensor, scale: torch.Tensor, alpha: float, tau: float,
              out: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Write ``scale[:, None] * (alpha_relu(z) - q)`` into ``out`` (which may be ``z`` itself),
    ``q = (1 - eps) e_y + eps / V`` the label-smoothed target (``e_y`` for ``eps = 0``)."""
    if engine_for(z) == "triton":
        scale = scale.to(torch.float32)
        _native("triton").loss_pass(z, y, alpha, tau, eps, grad=out, scale=scale)
        return out
    if not eps:
        probs_into(z, scale, alpha, tau, out)
        out.scatter_add_(1, y.unsqueeze(1), (-scale).unsqueeze(1).to(out.dtype))
        return out
    probs_into(z, scale, alpha, tau, out, eps / z.shape[1])
    out.scatter_add_(1, y.unsqueeze(1), (-(1.0 - eps) * scale).unsqueeze(1).to(out.dtype))
    return out


def transform(logits: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    """alpha-ReLU of ``logits (..., V)`` in a new tensor: one pass with the ``cpp`` and
    ``triton`` engines, the eager tensor ops otherwise."""
    engine = engine_for(logits)
    if engine not in ("cpp", "triton") or logits.dim() == 0:
        return _transform_eager(logits, alpha, tau)
    flat = logits.reshape(-1, logits.shape[-1]).contiguous()
    out = torch.empty_like(flat)
    a, e, c = _constants(alpha, tau)
    if engine == "cpp":
        ones = torch.ones(flat.shape[0], dtype=_acc_dtype(flat.dtype))
        _cpp_kernels.probs_into(flat, ones, c, e, a ** e, out)
    else:
        _native(engine).probs_into(flat, None, c, e, a ** e, out)
    return out.view(logits.shape)
