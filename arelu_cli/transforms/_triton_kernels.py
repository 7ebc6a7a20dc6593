"""The ``triton`` engine: GPU kernels for alpha-ReLU and its loss, one pass over the logits each.

With ``c = tau / (alpha - 1)``, ``e = 1 / (alpha - 1)``, ``ka = (alpha - 1)^e``, the transform
is ``p = ka [z - c]_+^e`` and the loss (eq. (sp_loss), target ``q = (1 - eps) e_y + eps / V``) is
``k1 sum_j [z_j - c]_+^(e + 1) + k0 - (1 - eps) z_y - (eps / V) sum_j z_j`` with
``k1 = (alpha - 1)^(e + 1) / alpha``, ``k0 = 1 / (alpha (alpha - 1)) + c``; its gradient is
``p - q`` (Lemma 1); of soft-capped logits ``z' = cap tanh(z / cap)``, the same terms of ``z'``
and the gradient ``(p - q) (1 - (z' / cap)^2)`` in ``z``.
``_loss_kernel``: one program per row writes the row's loss and, if asked,
``s (p - q)`` (into a buffer or the logits' own memory, as Liger-Kernel does; ``ignore_index``
rows are never read, a target outside ``[0, V)`` gives NaN) and marks the nonzero ``TILE x
TILE`` tiles for ``_triton_linear``; on a block of columns (``_triton_linear``'s vocabulary
blocks) it adds the block's share of the loss instead: every term but ``k0`` is a sum over
columns, and ``z_y`` lies in one block. ``_scale_kernel`` scales a gradient in place by a factor
read on the device (skipped at exactly 1, no host sync); ``_count_kernel`` and
``_total_kernel`` give ``mean``'s ``1 / n`` and the reduced loss in one launch each, where
ATen ops would take five or more. ``_probs_kernel``: the transform.
fp32 math on fp32/bf16/fp16; integer ``e`` in 1..4 are exact products; 64-bit offsets. Imported
only when needed; under ``TRITON_INTERPRET=1`` the kernels run on CPU tensors (the tests), so
they call no function of triton's jit-compiled standard library (``tl.sum``, ``tl.zeros``: made
before the interpreter was asked for); ``tl.reduce`` with triton's own combine functions runs.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

# Columns per step of the row kernels, and rows x columns of one skip tile of the fused
# layer's gradient (a GEMM tile of ``_triton_linear``).
_LOSS_BLOCK = 4096
# The loss kernel's warps and software-pipeline stages (None: Triton's default); see
# ``loss_launch``, the one place they are chosen.
_LOSS_WARPS = 8
_LOSS_STAGES = None
_PROBS_BLOCK = 2048
_SCALE_BLOCK = 2048
# Targets or row losses per step of the one-program count and total kernels.
_REDUCE_BLOCK = 1024
# Most programs of one scaling launch: each takes several blocks beyond it, so that skipping
# a whole gradient (factor 1, every training step) launches tens of thousands of programs
# that return at once, not millions (8.6e9 logits are 4.2e6 blocks).
_SCALE_PROGRAMS = 1 << 16
TILE = 128


@triton.jit
def _power(t, e, K: tl.constexpr):
    """``t ** K`` for a constant integer K in 1..4, else ``t ** e``; ``t >= 0`` or NaN."""
    if K == 1:
        r = t
    elif K == 2:
        r = t * t
    elif K == 3:
        r = t * t * t
    elif K == 4:
        r = (t * t) * (t * t)
    else:
        positive = t > 0.0
        r = tl.where(positive, tl.exp2(e * tl.log2(tl.where(positive, t, 1.0))), t)
    return r


@triton.jit
def _tanh(x):
    """``tanh(x)`` in fp32 from ``tl.exp`` (libdevice's has no interpreter): its Taylor
    series to ``x^7`` below ``|x| = 0.1`` (error under ``x^9 / 40``), else ``(1 - q) / (1 +
    q)`` with ``q = exp(-2 |x|)``, neither losing digits to a difference; NaN kept."""
    ax = tl.where(x < 0.0, -x, x)
    q = tl.exp(-2.0 * ax)
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    far = (1.0 - q) / (1.0 + q)
    return tl.where(ax < 0.1, series, tl.where(x < 0.0, -far, far))


@triton.jit
def _plain_add(a, b):
    return a + b


@triton.jit
def _plain_max(a, b):
    return tl.maximum(a, b)


# The reductions' combine functions: triton's own where it has them, which its interpreter
# reduces in one NumPy call (any other combine it applies one element at a time, in Python:
# minutes for the CPU tests); on a GPU both compile to the same reduction.
_add = getattr(tl.standard, "_sum_combine", _plain_add)
_max = getattr(tl.standard, "_elementwise_max", _plain_max)


@triton.jit
def _loss_kernel(z_ptr, y_ptr, rows_ptr, g_ptr, scale_ptr, flags_ptr, vocab, col0, total,
                 z_stride, g_stride, scale_stride, flags_stride, ignore_index, c, e, ka, k1,
                 k0, keep, spread, cap, K: tl.constexpr, GRAD: tl.constexpr,
                 SCALED: tl.constexpr, SMOOTH: tl.constexpr, FLAGS: tl.constexpr,
                 ACCUMULATE: tl.constexpr, TILE: tl.constexpr, BLOCK: tl.constexpr,
                 SOFTCAP: tl.constexpr):
    """Row ``program_id`` of the loss (and gradient, and tile marks) over the ``vocab``
    columns ``col0 ..`` of a vocabulary of ``total``; ``SOFTCAP``: of the logits
    ``cap tanh(z / cap)``; see the module doc."""
    row = tl.program_id(0).to(tl.int64)
    y = tl.load(y_ptr + row).to(tl.int64)
    valid = y != ignore_index
    local = y - col0  # the target's column in this block, if it lies in it
    known = valid & (local >= 0) & (local < vocab)
    z_row = z_ptr + row * z_stride
    # Read before the loop: with the gradient written in place, z_y is overwritten in it.
    zy = tl.load(z_row + local, mask=known, other=0.0).to(tl.float32)
    if SOFTCAP:
        zy = cap * _tanh(zy / cap)
    zy = tl.where(valid & ((y < 0) | (y >= total)), float("nan"), zy)  # no such class
    s = 1.0
    if SCALED:
        s = tl.load(scale_ptr + row * scale_stride).to(tl.float32)
    # Masks are compared against a per-row bound rather than and-ed with the scalar
    # `valid`: the interpreter gives a block & scalar an integer type no mask accepts.
    end = tl.where(valid, vocab, 0)  # an ignored row reads nothing
    powers = tl.full([BLOCK], 0.0, tl.float32)
    logits = tl.full([BLOCK], 0.0, tl.float32)
    for start in range(0, vocab, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = cols < vocab
        read = cols < end
        z = tl.load(z_row + cols, mask=read, other=0.0).to(tl.float32)
        if SOFTCAP:
            th = _tanh(z / cap)
            z = cap * th
        t = z - c
        t = tl.where(read & ~(t < 0.0), t, 0.0)  # [z - c]_+, NaN kept
        pe = _power(t, e, K)
        powers += t * pe
        if SMOOTH:
            logits += z
        target = cols == local
        if GRAD:
            g = ka * pe - tl.where(target, keep, 0.0) - spread
            if SOFTCAP:
                g = g * (1.0 - th * th)  # the cap's derivative; a zero stays zero
            g = tl.where(valid, g * s, 0.0)
            tl.store(g_ptr + row * g_stride + cols, g.to(g_ptr.dtype.element_ty), mask=inside)
        if FLAGS:
            live = (read & (~(t == 0.0) | target)).to(tl.int32)
            tiles = tl.reduce(tl.reshape(live, [BLOCK // TILE, TILE]), 1, _max)
            marks = flags_ptr + (row // TILE) * flags_stride + start // TILE
            tl.store(marks + tl.arange(0, BLOCK // TILE), tiles, mask=tiles > 0)
    loss = k1 * tl.reduce(powers, 0, _add) + k0 - keep * zy
    if SMOOTH:
        loss -= spread * tl.reduce(logits, 0, _add)
    loss = tl.where(valid, loss, 0.0)
    if ACCUMULATE:
        loss += tl.load(rows_ptr + row)
    tl.store(rows_ptr + row, loss)


@triton.jit
def _scale_kernel(x_ptr, scale_ptr, cols, blocks, x_stride, scale_stride,
                  BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """``x[row, span] *= scale[row]`` for program ``row * blocks + span``, a span of ``ITERS``
    blocks; skipped at 1 (a NaN factor is applied)."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid // blocks
    s = tl.load(scale_ptr + row * scale_stride).to(tl.float32)
    if s != 1.0:
        first = (pid % blocks) * (BLOCK * ITERS)
        for i in range(ITERS):
            offs = first + i * BLOCK + tl.arange(0, BLOCK)
            mask = offs < cols
            ptrs = x_ptr + row * x_stride + offs
            x = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
            tl.store(ptrs, (x * s).to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _count_kernel(y_ptr, n, ignore_index, out_ptr, BLOCK: tl.constexpr):
    """With ``c`` the targets of ``y[:n]`` not equal to ``ignore_index``: ``out[0] = 1 /
    max(c, 1)``, the gradient's scale for ``mean`` (``reduction.reduce_rows``' rule: no
    counted row, zero gradients)."""
    counts = tl.full([BLOCK], 0, tl.int64)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        y = tl.load(y_ptr + offs, mask=offs < n, other=ignore_index)
        counts += (y != ignore_index).to(tl.int64)
    c = tl.reduce(counts, 0, _add).to(tl.float32)
    tl.store(out_ptr, 1.0 / tl.maximum(c, 1.0))


@triton.jit
def _total_kernel(rows_ptr, y_ptr, n, ignore_index, out_ptr, MEAN: tl.constexpr,
                  BLOCK: tl.constexpr):
    """``out[0]`` = the sum of ``rows[:n]`` (zero at ignored rows), divided for ``MEAN`` by
    the number of targets not equal to ``ignore_index``, at least 1 (no counted row: 0, the
    rule of ``reduction.reduce_rows``), in ``out``'s dtype."""
    acc = tl.full([BLOCK], 0.0, tl.float32)
    counts = tl.full([BLOCK], 0, tl.int64)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inside = offs < n
        acc += tl.load(rows_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        if MEAN:
            y = tl.load(y_ptr + offs, mask=inside, other=ignore_index)
            counts += (y != ignore_index).to(tl.int64)
    total = tl.reduce(acc, 0, _add)
    if MEAN:
        total = total / tl.maximum(tl.reduce(counts, 0, _add).to(tl.float32), 1.0)
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@triton.jit
def _probs_kernel(z_ptr, out_ptr, scale_ptr, vocab, z_stride, out_stride, c, e, ka,
                  K: tl.constexpr, HAS_SCALE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < vocab
    t = tl.load(z_ptr + row * z_stride + cols, mask=mask, other=0.0).to(tl.float32) - c
    t = tl.where(mask & ~(t < 0.0), t, 0.0)
    k = ka
    if HAS_SCALE:
        k = tl.load(scale_ptr + row).to(tl.float32) * ka
    p = k * _power(t, e, K)
    tl.store(out_ptr + row * out_stride + cols, p.to(out_ptr.dtype.element_ty), mask=mask)


def on_device(t: torch.Tensor):
    """The CUDA device guard for launches on ``t`` (a no-op for CPU tensors)."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def _integer_power(e: float) -> int:
    """``e`` if it is an integer in 1..4, else 0 (the general power)."""
    return int(e) if e in (1.0, 2.0, 3.0, 4.0) else 0


def _block(vocab: int, most: int) -> int:
    return max(TILE, min(most, triton.next_power_of_2(vocab)))


def loss_launch(vocab: int) -> dict:
    """The loss kernel's launch parameters for rows of ``vocab`` columns: ``BLOCK`` columns
    per step, ``num_warps`` and (where set) ``num_stages``. One program streams one row, so
    a row of ``V`` takes ``V / BLOCK`` dependent steps: a GPU benchmark that tries other
    values replaces this function."""
    block = _block(vocab, _LOSS_BLOCK)
    launch = dict(BLOCK=block, num_warps=_LOSS_WARPS if block >= 2048 else 4)
    if _LOSS_STAGES is not None:
        launch["num_stages"] = _LOSS_STAGES
    return launch


def loss_pass(z: torch.Tensor, y: torch.Tensor, alpha: float, tau: float, eps: float = 0.0,
              ignore_index: int = -100, grad: torch.Tensor | None = None,
              scale: torch.Tensor | None = None, flags: torch.Tensor | None = None,
              rows: torch.Tensor | None = None, col0: int = 0,
              total: int | None = None, softcap: float | None = None) -> torch.Tensor:
    """The per-row loss (fp32) of ``z (N, V)`` (unit stride along V) at targets ``y (N,)``, in
    one read of ``z``.

    ``grad``: also write ``scale_i (p - q)`` there (it may be ``z`` itself); ``scale``: fp32,
    ``(N,)`` or 0-d (None: 1); ``flags``: int32 ``(ceil(N / TILE), ceil(V / TILE))``, zeroed
    by the caller: set to 1 where a tile of the gradient holds a nonzero; ``rows``: the
    output (None: a new tensor).

    ``total``: ``z`` is the block of columns ``col0 .. col0 + V`` of a vocabulary of
    ``total``, and its share of each row's loss is *added* to ``rows`` (zeroed by the
    caller): the terms of its own columns, ``- (1 - eps) z_y`` where the target lies in it,
    the constant in the block at ``col0 = 0``; label smoothing's ``eps / total``.

    ``softcap``: the loss of ``softcap tanh(z / softcap)`` and its gradient in ``z``.
    """
    n, vocab = z.shape
    rows = torch.empty(n, dtype=torch.float32, device=z.device) if rows is None else rows
    if n == 0:
        return rows
    a = alpha - 1.0
    e, c = 1.0 / a, tau / a
    blocked = total is not None
    total = vocab if total is None else total
    smooth = eps > 0.0
    if flags is not None and smooth:
        flags.fill_(1)  # the smoothed target is nonzero everywhere
    mark = flags is not None and not smooth and grad is not None
    launch = loss_launch(vocab)
    with on_device(z):
        _loss_kernel[(n,)](
            z, y, rows, rows if grad is None else grad, rows if scale is None else scale,
            flags if mark else rows, vocab, col0, total, z.stride(0),
            0 if grad is None else grad.stride(0),
            0 if scale is None or scale.dim() == 0 else scale.stride(0),
            flags.stride(0) if mark else 0, ignore_index, c, e, a ** e,
            a ** (e + 1.0) / alpha, 1.0 / (alpha * a) + c if col0 == 0 else 0.0, 1.0 - eps,
            eps / total, 1.0 if softcap is None else softcap, K=_integer_power(e),
            GRAD=grad is not None, SCALED=scale is not None, SMOOTH=smooth, FLAGS=mark,
            ACCUMULATE=blocked, TILE=TILE, SOFTCAP=softcap is not None, **launch)
    return rows


def scale_(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x *= scale`` in place, in fp32: ``scale`` (any float dtype, cast on the device) 0-d
    (any contiguous ``x``) or ``(N,)`` (one factor per row of ``x (N, V)``, unit stride along
    V). Rows whose factor is 1 are left untouched by the device itself."""
    if x.numel() == 0:
        return x
    scale = scale.to(device=x.device)
    view = x.view(1, -1) if scale.dim() == 0 else x
    n, cols = view.shape
    spans = n * triton.cdiv(cols, _SCALE_BLOCK)
    iters = min(64, triton.next_power_of_2(triton.cdiv(spans, _SCALE_PROGRAMS)))
    blocks = triton.cdiv(cols, _SCALE_BLOCK * iters)
    with on_device(x):
        _scale_kernel[(n * blocks,)](view, scale, cols, blocks, view.stride(0),
                                    0 if scale.dim() == 0 else scale.stride(0),
                                    BLOCK=_SCALE_BLOCK, ITERS=iters, num_warps=4)
    return x


def count_(y: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """fp32 ``[1 / max(c, 1)]`` for the ``c`` targets of ``y (N,)`` not equal to
    ``ignore_index``, computed on the device in one launch (no host sync)."""
    out = torch.empty(1, dtype=torch.float32, device=y.device)
    with on_device(y):
        _count_kernel[(1,)](y, y.numel(), ignore_index, out, BLOCK=_REDUCE_BLOCK, num_warps=4)
    return out


def total(rows: torch.Tensor, y: torch.Tensor, ignore_index: int, mean: bool,
          dtype: torch.dtype) -> torch.Tensor:
    """The 0-d ``dtype`` sum of ``rows (N,)`` (zero at ignored rows), for ``mean`` divided by
    the targets of ``y`` not equal to ``ignore_index`` (at least 1), in one launch."""
    out = torch.empty((), dtype=dtype, device=rows.device)
    with on_device(rows):
        _total_kernel[(1,)](rows, y, rows.numel(), ignore_index, out, MEAN=mean,
                            BLOCK=_REDUCE_BLOCK, num_warps=4)
    return out


def probs_into(z: torch.Tensor, scale: torch.Tensor | None, c: float, e: float, ka: float,
               out: torch.Tensor) -> torch.Tensor:
    """``out_ij = scale_i * ka * [z_ij - c]_+^e`` (no ``scale``: ``ka * [z - c]_+^e``)."""
    n, vocab = z.shape
    if n:
        block = _block(vocab, _PROBS_BLOCK)
        grid = (n, triton.cdiv(vocab, block))
        with on_device(z):
            _probs_kernel[grid](z, out, z if scale is None else scale, vocab, z.stride(0),
                                out.stride(0), c, e, ka, K=_integer_power(e),
                                HAS_SCALE=scale is not None, BLOCK=block, num_warps=4)
    return out
