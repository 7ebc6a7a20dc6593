"""The fused linear + alpha-ReLU loss as a loop of torch ops over tiles of tokens x vocabulary.

The loop of every device but the ``triton`` engine's (CPU above all). With ``logits z = h W^T
+ b``, the loss of a row (eq. (sp_loss), ``alpha_relu_kernels``) is ``k1 sum_j [z_j - c]_+^(e+1)
+ k0 - (1 - eps) z_y - (eps / V) sum_j z_j`` and its gradient in the logits (Lemma 1) is
``s (p - q)``, ``s`` the row's factor. Every term but ``k0`` is a sum over the vocabulary, so
each tile (tokens ``r0:r1`` x columns ``v0:v1``) adds its share: the power sums of its logits
(:func:`alpha_relu_kernels.loss_sums`) and ``z_y`` where the target lies in it. Label
smoothing's ``sum_j z_j = h . sum_j w_j + sum_j b_j`` is one matrix-vector product for all
rows, and its uniform part ``- s eps / V`` of the gradient a rank-one term of each gradient,
both added once, after the loop. The rest of the gradient, ``s (p - (1 - eps) e_y)``, is
exactly zero outside alpha-ReLU's support and the targets: on CPU, where a tile holds few
enough nonzeros (``SPARSE_SHARE``), its gradient products run on those alone, found in one
pass over the tile (:func:`alpha_relu_kernels.support`) and multiplied as compressed sparse
rows (torch's sparse CSR x dense product): the skipped terms are exact zeros, the result the
dense one up to summation order. Other tiles run dense matmuls
(``_tiles``). On CPU the ignored rows are dropped before the loop. Gradients accumulate in
fp32 (fp64 for fp64 inputs); each tile writes its blocks of ``grad_hidden`` and
``grad_weight`` where it is their first, and adds to them after.

With a soft-cap ``c`` each tile's logits become ``z' = c tanh(z / c)`` in place (in the
logits' dtype, as a model computes them) and every term above is of ``z'``; the tile's
gradient in ``z`` is ``s (p - q)`` times ``1 - (z' / c)^2``, kept in a second buffer (the
accumulation dtype) while ``z'`` turns into ``s (p - q)``; the sparse entries take it at
theirs. Label smoothing's ``sum_j z'_j`` and ``- s eps / V`` are then added in each tile.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms._tiles import add_tile_grads, tile_logits

# Largest share of a tile's logit gradient that may be nonzero for its products to run on
# the nonzeros alone (sparse x dense) rather than on the whole tile (dense matmuls): a
# sparse product costs several times a dense one per multiply-add.
SPARSE_SHARE = 1 / 16


@dataclass(frozen=True)
class Tiles:
    """One pass of the loop: the loss's constants and the tile shape."""

    alpha: float
    tau: float
    eps: float       # label smoothing
    rows: int        # tokens per tile
    cols: int        # vocabulary columns per tile
    sparse: bool     # sparse gradient products where they pay (CPU only)
    softcap: float | None = None  # the logits' cap c: c tanh(z / c)


def _cap_(z: torch.Tensor, cap: float) -> torch.Tensor:
    """``z = cap tanh(z / cap)`` in place."""
    return z.div_(cap).tanh_().mul_(cap)


def _slope_(z: torch.Tensor, cap: float) -> torch.Tensor:
    """The cap's derivative ``1 - (z' / cap)^2`` in place of the capped logits ``z'``."""
    return z.div_(cap).square_().neg_().add_(1.0)


def _accumulators(n, d, vocab, acc, device, want, bias):
    """The gradients' accumulators: ``grad_hidden`` and ``grad_weight`` are written by their
    first tile (empty, unless no tile will run), ``grad_bias`` added to."""
    alloc = torch.empty if n else torch.zeros
    return (alloc(n, d, dtype=acc, device=device) if want[0] else None,
            alloc(vocab, d, dtype=acc, device=device) if want[1] else None,
            torch.zeros(vocab, dtype=acc, device=device) if want[2] and bias is not None
            else None)


def _sparse_gradient(z, inside, local, scale, loop: Tiles):
    """The nonzeros of one tile's ``s (p - (1 - eps) e_y)`` as ``(rows, cols, values)``
    (row-major), or None where more than ``SPARSE_SHARE`` of the tile would be nonzero.
    ``inside``: the rows whose target lies in the tile, ``local`` every row's target column
    in it (outside ``[0, v)`` where it lies elsewhere)."""
    n, v = z.shape
    flat = kernels.support(z, loop.alpha, loop.tau, int(SPARSE_SHARE * z.numel()))
    if flat is None:
        return None
    flat = torch.cat((flat, inside * v + local[inside])).unique()  # and the targets
    rows, cols = flat.div(v, rounding_mode="floor"), flat.remainder(v)
    logits = z.view(-1)[flat].to(scale.dtype)
    t = (logits - loop.tau / (loop.alpha - 1.0)).clamp_min_(0.0)
    e = 1.0 / (loop.alpha - 1.0)
    values = t.pow_(e) if e != 1.0 else t
    values.mul_((loop.alpha - 1.0) ** e)
    values.sub_((cols == local[rows]).to(values.dtype), alpha=1.0 - loop.eps)
    if loop.softcap:
        values.mul_(_slope_(logits, loop.softcap))
    return rows, cols, values.mul_(scale[rows])


def _row_pointers(index: torch.Tensor, size: int) -> torch.Tensor:
    """Compressed-row pointers of sorted row indices."""
    pointers = torch.zeros(size + 1, dtype=torch.int64, device=index.device)
    torch.cumsum(torch.bincount(index, minlength=size), 0, out=pointers[1:])
    return pointers


def _sparse_addmm(out, pointers, cols, values, dense, write: bool) -> None:
    """``out = A @ dense`` (``write``: beta 0 ignores what ``out`` held) or
    ``out += A @ dense``, ``A`` given in compressed sparse rows."""
    with warnings.catch_warnings():  # torch's "sparse CSR support is in beta": for a user
        warnings.simplefilter("ignore", UserWarning)  # who never asked for sparse tensors
        a = torch.sparse_csr_tensor(pointers, cols, values, (out.shape[0], dense.shape[0]),
                                    check_invariants=False)
        out.addmm_(a, dense, beta=0.0 if write else 1.0)


def _add_sparse_grads(entries, shape, hidden, weight, grads, first) -> None:
    """:func:`_tiles.add_tile_grads` for the gradient given by its nonzeros ``entries``,
    ``hidden`` and ``weight`` in the accumulation dtype; ``first``: whether this tile writes
    its block of ``grad_hidden``, of ``grad_weight`` (else adds to it)."""
    rows, cols, values = entries
    grad_h, grad_w, grad_b = grads
    if grad_h is not None:
        _sparse_addmm(grad_h, _row_pointers(rows, shape[0]), cols, values, weight, first[0])
    if grad_w is not None:
        order = torch.argsort(cols, stable=True)
        _sparse_addmm(grad_w, _row_pointers(cols[order], shape[1]), rows[order],
                      values[order], hidden, first[1])
    if grad_b is not None:
        grad_b.index_add_(0, cols, values)


def _add_tile(z, inside, local, scale, h, w, grads, first, loop: Tiles, wide, slope,
              spread) -> None:
    """One tile's gradient and its share of the gradients: sparse where it pays, else in
    ``z`` itself and dense. ``wide``: ``(h, w)`` in the accumulation dtype; ``first``:
    whether this tile writes its block of ``grad_hidden``, of ``grad_weight``; ``slope``: a
    buffer for the cap's derivative (None: no cap); ``spread``: label smoothing's ``eps / V``
    where it is added in the tile (else 0)."""
    if loop.sparse:
        entries = _sparse_gradient(z, inside, local, scale, loop)
        if entries is not None:
            _add_sparse_grads(entries, z.shape, *wide, grads, first)
            return
    if slope is not None:                      # read z' before it turns into s (p - q)
        _slope_(slope.copy_(z), loop.softcap)
    kernels.probs_into(z, scale, loop.alpha, loop.tau, z)
    z[inside, local[inside]] -= ((1.0 - loop.eps) * scale[inside]).to(z.dtype)
    if spread:
        z.sub_((scale * spread).unsqueeze(1))
    if slope is not None:
        z.mul_(slope)
    add_tile_grads(z, h, w, *grads, *first)


def _smoothing(hidden, weight, bias, scale, loop: Tiles, grads):
    """Label smoothing's ``sum_j z_j`` per row, and its uniform gradient ``- s eps / V``
    added to each gradient (a rank-one term)."""
    acc = kernels._acc_dtype(hidden.dtype)
    wide = hidden.to(acc)
    column_sum = weight.sum(0, dtype=acc)
    logit_sums = torch.mv(wide, column_sum)
    if bias is not None:
        logit_sums += bias.sum(dtype=acc)
    if scale is not None:
        spread = loop.eps / weight.shape[0]
        grad_h, grad_w, grad_b = grads
        if grad_h is not None:
            grad_h.addr_(scale, column_sum, alpha=-spread)
        if grad_w is not None:
            grad_w.sub_(torch.mv(wide.t(), scale), alpha=spread)
        if grad_b is not None:
            grad_b.sub_(scale.sum(), alpha=spread)
    return logit_sums


def _loop(hidden, weight, bias, target, scale, loop: Tiles, want):
    """Sums over tiles: the per-row losses and, given ``scale``, the gradients."""
    n, d = hidden.shape
    vocab, device = weight.shape[0], hidden.device
    acc = kernels._acc_dtype(hidden.dtype)
    with_grads = scale is not None
    grads = (_accumulators(n, d, vocab, acc, device, want, bias) if with_grads
             else (None, None, None))
    sums = torch.zeros(n, dtype=acc, device=device)
    target_logits = torch.zeros(n, dtype=acc, device=device)
    # Label smoothing's terms: after the loop, linear in the logits (uncapped), else per tile.
    in_tiles = bool(loop.eps) and loop.softcap is not None
    logit_sums = torch.zeros(n, dtype=acc, device=device) if in_tiles else None
    slopes = (torch.empty(min(loop.rows, n) * min(loop.cols, vocab), dtype=acc, device=device)
              if with_grads and loop.softcap is not None else None)
    wide_h = hidden.to(acc) if loop.sparse else None
    for r0, r1, v0, v1, h, w, z in tile_logits(hidden, weight, bias, loop.rows, loop.cols):
        if loop.softcap is not None:
            _cap_(z, loop.softcap)
        sums[r0:r1] += kernels.loss_sums(z, loop.alpha, loop.tau)
        if in_tiles:
            logit_sums[r0:r1] += z.sum(1, dtype=acc)
        local = target[r0:r1] - v0
        inside = ((local >= 0) & (local < v1 - v0)).nonzero().squeeze(1)
        target_logits[r0 + inside] = z[inside, local[inside]].to(acc)
        if with_grads:
            tile_grads = (None if grads[0] is None else grads[0][r0:r1],
                          None if grads[1] is None else grads[1][v0:v1],
                          None if grads[2] is None else grads[2][v0:v1])
            wide = None if wide_h is None else (wide_h[r0:r1], w.to(acc))
            slope = None if slopes is None else slopes[:z.numel()].view(z.shape)
            _add_tile(z, inside, local, scale[r0:r1], h, w, tile_grads, (v0 == 0, r0 == 0),
                      loop, wide, slope, loop.eps / vocab if in_tiles else 0.0)
    # A target outside [0, V) lies in no tile: its row's loss is NaN, as on every engine.
    outside = (target < 0) | (target >= vocab)
    target_logits.masked_fill_(outside, float("nan"))
    if loop.eps and not in_tiles:
        logit_sums = _smoothing(hidden, weight, bias, scale, loop, grads)
    rows = kernels.rows_from_sums(sums, target_logits, vocab, loop.alpha, loop.tau, loop.eps,
                                  logit_sums)
    return (rows, *grads)


def run(hidden, weight, bias, target, valid, scale, loop: Tiles, want):
    """The per-row losses (zero at ignored rows, in the accumulation dtype) and, given
    ``scale`` (each row's factor, zero at ignored rows), the gradients (hidden, weight,
    bias) flagged in ``want`` (None for the others), in the accumulation dtype.
    ``target``: class indices, ``valid`` the rows that count; on CPU the others are
    dropped first (a host-side choice; elsewhere they run with factor 0)."""
    if hidden.device.type != "cpu" or bool(valid.all()):
        safe = torch.where(valid, target, torch.zeros_like(target))
        rows, *grads = _loop(hidden, weight, bias, safe, scale, loop, want)
        return (rows.masked_fill_(~valid, 0.0), *grads)
    keep = valid.nonzero().squeeze(1)
    rows, *grads = _loop(hidden[keep], weight, bias, target[keep],
                         None if scale is None else scale[keep], loop, want)
    full = torch.zeros(hidden.shape[0], dtype=rows.dtype, device=rows.device)
    full[keep] = rows
    if grads[0] is not None:
        grad_h = torch.zeros(hidden.shape, dtype=grads[0].dtype, device=rows.device)
        grad_h[keep] = grads[0]
        grads[0] = grad_h
    return (full, *grads)
