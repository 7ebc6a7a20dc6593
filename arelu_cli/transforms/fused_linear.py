"""The output projection fused with the alpha-ReLU loss: ``N x V`` logits never exist.

The loss is eq. (sp_loss) of ``logits = hidden @ weight.T + bias``; by Lemma 1 its gradient
in the logits is ``G = P - Q`` (scaled alpha-ReLU output minus the scaled, possibly
label-smoothed, targets), so ``grad_hidden = G @ weight``, ``grad_weight = G^T @ hidden``,
``grad_bias = G^T 1``. alpha-ReLU has no normalizer: with tau fixed, a row's loss is a sum
over the vocabulary of terms that each column gives alone, plus a constant, minus ``z_y``;
and ``G``'s columns depend on their own logits only. So a loop over *tiles* (tokens x
vocabulary columns) computes each tile's logits into one reused buffer, its share of the
losses, overwrites the buffer with its block of ``G`` and adds its three products; nothing
is recomputed and no second pass is needed. :func:`tile_shape` is the one rule for the
tiles; ``loop`` names its two shapes:

* ``"vocab"`` (the default): blocks of the vocabulary over all tokens, the unfused path's
  three products with an ``N x V_b`` tile instead of the ``N x V`` logits: each block's rows
  of ``grad_weight`` are written once and never read again, ``grad_hidden`` (``N x d``)
  accumulates over the blocks; where all tokens times ``MIN_COLS`` columns exceed the
  budget, blocks of tokens too (2-D tiles: ``grad_weight`` then accumulates over them).
* ``"tokens"``: chunks of tokens over the whole vocabulary, the only loop softmax allows
  (its normalizer needs every column first; Liger-Kernel's fused cross-entropy): every
  chunk re-reads the ``V x d`` weight and re-writes ``grad_weight``.

alpha-ReLU is exactly zero below ``c = tau / (alpha - 1)``, so ``G`` is zero outside the
support and the targets. ``skip_zeros`` picks how the products use that: on CPU (the
default, ``None``) a tile's products run on its nonzeros alone where they are few
(``_torch_linear``); on the ``triton`` engine (CUDA) the default runs dense cuBLAS products
and ``skip_zeros=True`` Triton GEMMs that skip the all-zero ``128 x 128`` tiles
(``_triton_linear``). Skipped terms are exact zeros: the dense result up to summation order.
For ``sum``/``mean`` the gradients are computed in forward, the reduction's weight
(``1 / max(n, 1)`` for ``mean``) already in them, and only multiplied by the upstream gradient
in backward (as Liger-Kernel's fused cross-entropy; skipped on the device where it is 1), so
one call takes one backward. ``none`` recomputes in backward: forward cannot know each row's
upstream gradient, and ``grad_weight`` sums the rows weighted by it. bf16/fp16: matmuls in
that dtype, loss math in fp32; autocast casts as ``F.linear``; under ``torch.compile`` the
loss runs eagerly.

``softcap=c`` (Gemma 2's ``final_logit_softcapping``) is the loss of the capped logits
``z' = c tanh(z / c)``: each tile caps its logits in place, takes its share of the loss from
``z'`` and its gradient ``G' = s (p - q)`` at ``z'``, times the cap's derivative
``1 - (z' / c)^2``, before the products; a zero of ``G'`` stays zero, so the skipping holds.
The cap is not linear in ``z``, so label smoothing's ``sum_j z'_j`` and uniform gradient are
then computed in each tile as well (the CPU loop's tiles run dense with both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from arelu_cli.transforms import _torch_linear
from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms.checks import check_alpha, check_label_smoothing, check_tau
from arelu_cli.transforms.reduction import (check_reduction, counted, loss_dtype, reduce_rows,
                                            row_scale)

# Logits per tile, the memory the loop holds beyond the gradients themselves (why these
# sizes: results/bench/README.md).
CHUNK_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 26}
# Fewest vocabulary columns per block of the "vocab" loop: every block reads and writes
# the N x d grad_hidden once more, so narrow blocks would be bound by that traffic. CPU
# 1024: at 8192 x 40000 x 512 its 4096 x 1024 tiles took 0.395-0.434x the unfused time (dense
# products 0.954-0.998x) in three quiet runs on a 2-core AVX2 CPU, where 512 (8192 x 512
# tiles) took 0.446-0.451x (dense 1.009-1.049x) in two (results/bench/README.md).
MIN_COLS = {"cpu": 1024, "cuda": 4096}
# Fewest tokens per chunk of the "tokens" loop on CPU: every chunk streams the whole weight
# (V x d) through the three matmuls, so at large V a chunk of CHUNK_ELEMENTS // V tokens
# (32 at V = 128K) is bound by reading the weight, not by arithmetic.
MIN_CPU_ROWS = 256
LOOPS = ("vocab", "tokens")
# Tiles of the triton engine are whole multiples of its 128 x 128 skip tiles.
_TRITON_UNIT = 128


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def tile_shape(n: int, width: int, vocab: int, device_type: str, triton: bool, loop: str,
               chunk: int | None = None, vocab_chunk: int | None = None) -> tuple[int, int]:
    """(tokens, vocabulary columns) per tile of the loop, the one rule; the budget is
    ``CHUNK_ELEMENTS[device]`` logits.

    ``"vocab"``: all ``n`` tokens x ``budget // n`` columns where that is at least
    ``MIN_COLS[device]``; else ``budget // MIN_COLS`` tokens x ``MIN_COLS`` columns.
    ``"tokens"``: the whole vocabulary x ``budget // V`` tokens (on CPU at least
    ``MIN_CPU_ROWS``; on the ``triton`` engine at least ``n * width / V``, Liger-Kernel's
    rule: fewer rows make the per-chunk update of ``grad_weight`` dominate). ``chunk``
    (tokens) and ``vocab_chunk`` (columns, ``"vocab"`` only) replace either number, the other
    then follows from the budget. On the ``triton`` engine both are multiples of 128 (the
    rule's token chunks rounded down, requested sizes up).
    """
    budget = CHUNK_ELEMENTS.get(device_type, CHUNK_ELEMENTS["cuda"])
    unit = _TRITON_UNIT if triton else 1
    if loop == "tokens":
        if chunk is not None:
            return _round_up(chunk, unit), vocab
        if triton:
            return max(unit, max(budget, n * width) // vocab // unit * unit), vocab
        return max(MIN_CPU_ROWS if device_type == "cpu" else 1, budget // vocab), vocab
    least = min(vocab, vocab_chunk or MIN_COLS.get(device_type, MIN_COLS["cuda"]))
    rows = chunk or (n if n * least <= budget else max(1, budget // least))
    cols = vocab_chunk or max(least, budget // max(rows, 1))
    return _round_up(rows, unit), min(vocab, _round_up(cols, unit))


@dataclass(frozen=True)
class _Loop:
    """The fixed arguments of one pass of the tile loop."""

    alpha: float
    tau: float
    eps: float         # label smoothing
    rows: int          # tokens per tile
    cols: int          # vocabulary columns per tile
    skip_zeros: bool   # skip exact zeros: entries (CPU loop), tiles (triton loop)
    triton: bool = False  # the sync-free loop of ``_triton_linear``
    softcap: float | None = None  # the logits' cap c: c tanh(z / c)


def _losses(hidden, weight, bias, target, valid, ignore_index, loop: _Loop, scale=None,
            want=(False, False, False)):
    """The per-row losses and, given ``scale`` (each row's factor), the gradients flagged in
    ``want``: ``_triton_linear.run`` on the ``triton`` engine (it reads the targets with
    ``ignore_index`` itself), else ``_torch_linear.run``."""
    if loop.triton:
        from arelu_cli.transforms import _triton_linear
        return _triton_linear.run(hidden, weight, bias, target, scale, loop.alpha, loop.tau,
                                  loop.eps, ignore_index, loop.rows, loop.cols, want,
                                  tiles=loop.skip_zeros, softcap=loop.softcap)
    # A capped, smoothed tile's gradient has no zero to skip (module docstring).
    sparse = (loop.skip_zeros and hidden.device.type == "cpu"
              and not (loop.softcap and loop.eps))
    tiles = _torch_linear.Tiles(loop.alpha, loop.tau, loop.eps, loop.rows, loop.cols, sparse,
                                loop.softcap)
    return _torch_linear.run(hidden, weight, bias, target, valid, scale, tiles, want)


def _unit_scale(valid: torch.Tensor, reduction: str, dtype: torch.dtype) -> torch.Tensor:
    """Each row's gradient factor for an upstream gradient of 1: 0 at ignored rows, else 1
    (``sum``) or ``1 / max(n, 1)`` (``mean``)."""
    mask = valid.to(dtype)
    return mask / counted(valid) if reduction == "mean" else mask


def _scale_grads(grads: tuple, grad: torch.Tensor, loop: _Loop) -> tuple:
    """Multiply the gradients computed in forward by the upstream gradient, in place: on the
    device and skipped there at 1 (``triton``), else skipped on the host at 1 (CPU only,
    where reading it costs no sync)."""
    if loop.triton:
        from arelu_cli.transforms import _triton_kernels
        return tuple(None if g is None else _triton_kernels.scale_(g, grad) for g in grads)
    if grad.device.type != "cpu" or float(grad) != 1.0:
        return tuple(None if g is None else g.mul_(grad.to(g.dtype)) for g in grads)
    return grads


class _LinearAlphaReLULossFunction(torch.autograd.Function):
    """The fused loss on flattened ``hidden (N, d)``; see the module docstring."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, target, ignore_index, reduction, shape, loop,
                grad_enabled, out_dtype):
        valid = target != ignore_index
        want = ctx.needs_input_grad[:3] if grad_enabled else (False, False, False)
        ctx.early = reduction != "none" and any(want)
        unit = (_unit_scale(valid, reduction, kernels._acc_dtype(hidden.dtype)) if ctx.early
                else None)
        rows, *grads = _losses(hidden, weight, bias, target, valid, ignore_index, loop, unit,
                               want)
        ctx.loop = loop
        if ctx.early:
            # Saved (not ctx attributes) so that autograd frees them after backward and
            # AccumulateGrad can take them over without a copy.
            ctx.save_for_backward(*grads)
            ctx.used = False
        else:
            ctx.save_for_backward(hidden, weight, bias, target, valid)
            ctx.ignore_index = ignore_index
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        return reduce_rows(rows, valid, reduction, shape).to(loss_dtype(out_dtype, reduction))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        if ctx.early:
            if ctx.used:
                raise RuntimeError("linear_alpha_relu_loss: backward ran twice through one "
                                   "call; with reduction 'sum'/'mean' its gradients are computed "
                                   "once, in forward, and scaled in place")
            ctx.used = True
            grads = _scale_grads(ctx.saved_tensors, grad, ctx.loop)
        else:
            hidden, weight, bias, target, valid = ctx.saved_tensors
            scale = row_scale(grad, valid, "none")
            _, *grads = _losses(hidden, weight, bias, target, valid, ctx.ignore_index, ctx.loop,
                                scale, ctx.needs_input_grad[:3])
        out = tuple(None if g is None else g.to(dtype) for g, dtype in zip(grads, ctx.dtypes))
        return (*out, None, None, None, None, None, None, None)


def _check(hidden, weight, target, bias) -> None:
    if not (torch.is_floating_point(hidden) and torch.is_floating_point(weight)):
        raise ValueError("hidden and weight must be floating-point tensors")
    if (weight.dim() != 2 or weight.shape[0] < 1 or hidden.dim() < 1
            or hidden.shape[-1] != weight.shape[1]):
        raise ValueError(f"weight must have shape (V, d), V >= 1, d = hidden.shape[-1]; got hidden "
                         f"{tuple(hidden.shape)} and weight {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must have shape (V,) = ({weight.shape[0]},), "
                         f"got {tuple(bias.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"target must hold integer class indices (int64), got {target.dtype}")
    if tuple(target.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(f"target shape {tuple(target.shape)} must equal hidden shape without "
                         f"the last (model) dimension, {tuple(hidden.shape[:-1])}")


def _check_softcap(softcap: float | None) -> float | None:
    """``softcap`` as a float if it is None or a positive finite number, else a ValueError."""
    if softcap is None:
        return None
    number = isinstance(softcap, (int, float)) and not isinstance(softcap, bool)
    value = float(softcap) if number else math.nan
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"softcap must be None (no cap) or a positive finite number c (logits "
                         f"c tanh(z / c)), got {softcap!r}")
    return value


def _autocast_inputs(hidden, weight, bias):
    """Cast to the autocast dtype where autocast is on, as ``F.linear`` would."""
    device_type = hidden.device.type
    if not torch.is_autocast_enabled(device_type):
        return hidden, weight, bias
    dtype = torch.get_autocast_dtype(device_type)
    return hidden.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype)


def linear_alpha_relu_loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                           alpha: float = 1.5, tau: float = 0.0, bias: torch.Tensor | None = None,
                           ignore_index: int = -100, reduction: str = "mean",
                           chunk: int | None = None, skip_zeros: bool | None = None,
                           label_smoothing: float = 0.0, loop: str = "vocab",
                           vocab_chunk: int | None = None,
                           softcap: float | None = None) -> torch.Tensor:
    """The alpha-ReLU loss (paper eq. (sp_loss)) of ``hidden @ weight.T + bias`` at ``target``,
    without materializing the logits; with ``softcap = c``, of the capped logits
    ``c tanh((hidden @ weight.T + bias) / c)``.

    Args:
        hidden: ``(..., d)`` inputs of the output projection. weight: ``(V, d)``.
        target: ``(...)`` class indices; rows equal to ``ignore_index`` contribute nothing.
        alpha, tau, ignore_index, reduction, label_smoothing: as in :func:`alpha_relu_loss`.
        bias: optional ``(V,)``.
        chunk: tokens per tile; vocab_chunk: vocabulary columns per tile (``loop="vocab"``
            only). Default: :func:`tile_shape`'s rule; the memory held is one tile of logits
            plus the gradients.
        skip_zeros: whether the gradient products skip the exact zeros of alpha-ReLU's
            gradient (never changes the result beyond summation order). ``None`` (the
            default) picks the faster path as measured: on CPU, products on the nonzeros of
            each tile (where few enough, ``_torch_linear.SPARSE_SHARE``); on the ``triton``
            engine (CUDA), dense cuBLAS products. ``True``: the same on CPU; on the
            ``triton`` engine, Triton GEMMs that skip the all-zero ``128 x 128`` tiles (pays
            only where whole tiles are zero, e.g. a trained model's very sparse supports).
            ``False``: dense products everywhere.
        loop: ``"vocab"`` (blocks of the vocabulary; the default) or ``"tokens"`` (chunks of
            tokens over the whole vocabulary); see the module docstring.
        softcap: None (the default) or the positive cap ``c`` of a model that soft-caps its
            logits (``final_logit_softcapping``); see the module docstring.

    Same value and gradients (hidden, weight, bias) as
    ``alpha_relu_loss(F.linear(hidden, weight, bias), target, ...)`` (with ``softcap``: of
    ``c * torch.tanh(F.linear(...) / c)``), the loss in
    ``hidden``'s dtype (under autocast the matmuls run in the autocast dtype, the loss math
    in fp32 and the loss keeps ``hidden``'s dtype, as ``logits.float()`` would give); a
    ``mean`` over no counted row is 0, with zero gradients; not twice differentiable.
    """
    if torch.compiler.is_compiling():
        # Dynamo can trace neither the triton loop's kernels nor the CPU loop's
        # data-dependent skip: one graph break, the loss runs eagerly.
        return eager_loss()(hidden, weight, target, alpha, tau, bias, ignore_index, reduction,
                            chunk, skip_zeros, label_smoothing, loop, vocab_chunk, softcap)
    alpha, tau = check_alpha(alpha), check_tau(tau)
    eps, cap = check_label_smoothing(label_smoothing), _check_softcap(softcap)
    check_reduction(reduction)
    _check(hidden, weight, target, bias)
    for name, value in (("chunk", chunk), ("vocab_chunk", vocab_chunk)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be a positive number of "
                             f"{'tokens' if name == 'chunk' else 'columns'}, got {value}")
    if skip_zeros is not None and not isinstance(skip_zeros, bool):
        raise TypeError(f"skip_zeros must be None (the faster path), True or False, "
                        f"got {skip_zeros!r}")
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {', '.join(LOOPS)}, got {loop!r}")
    if loop == "tokens" and vocab_chunk is not None:
        raise ValueError("vocab_chunk sets the vocabulary blocks of loop='vocab'; the 'tokens' "
                         "loop takes the whole vocabulary per chunk")
    out_dtype = hidden.dtype  # under autocast: the loss stays in the caller's dtype
    hidden, weight, bias = _autocast_inputs(hidden, weight, bias)
    if hidden.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
        raise ValueError(f"hidden, weight and bias must share a dtype, got {hidden.dtype}, "
                         f"{weight.dtype}{'' if bias is None else ', ' + str(bias.dtype)}")
    flat = hidden.reshape(-1, hidden.shape[-1]).contiguous()
    triton = kernels.engine_for(flat) == "triton"
    rows, cols = tile_shape(*flat.shape, weight.shape[0], flat.device.type, triton, loop,
                            chunk, vocab_chunk)
    skip = skip_zeros is True if triton else skip_zeros is not False
    plan = _Loop(alpha, float(tau), eps, rows, cols, skip, triton, cap)
    with torch.autocast(hidden.device.type, enabled=False):
        return _LinearAlphaReLULossFunction.apply(
            flat, weight.contiguous(), bias, target.reshape(-1).long(), ignore_index, reduction,
            target.shape, plan, torch.is_grad_enabled(), out_dtype)


_EAGER: list = []


def eager_loss():
    """:func:`linear_alpha_relu_loss` as torch.compile runs it: eagerly, behind one graph
    break. Made at the first compiled call, not at import: ``torch.compiler.disable`` imports
    ``torch._dynamo``, 2.3 s on a 2-core CPU, as long again as ``import torch``, which every
    ``arelu`` command and every user of the library would pay for nothing."""
    if not _EAGER:
        _EAGER.append(torch.compiler.disable(linear_alpha_relu_loss))
    return _EAGER[0]


class LinearAlphaReLULoss(nn.Module):
    """Module form of :func:`linear_alpha_relu_loss`: ``loss(hidden, weight, target, bias)``."""

    def __init__(self, alpha: float = 1.5, tau: float = 0.0, ignore_index: int = -100,
                 reduction: str = "mean", chunk: int | None = None,
                 skip_zeros: bool | None = None, label_smoothing: float = 0.0,
                 loop: str = "vocab", vocab_chunk: int | None = None,
                 softcap: float | None = None):
        super().__init__()
        self.alpha, self.tau = check_alpha(alpha), float(tau)
        self.ignore_index, self.reduction = ignore_index, check_reduction(reduction)
        self.label_smoothing = check_label_smoothing(label_smoothing)
        self.chunk, self.skip_zeros = chunk, skip_zeros
        self.loop, self.vocab_chunk = loop, vocab_chunk
        self.softcap = _check_softcap(softcap)

    def forward(self, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        return linear_alpha_relu_loss(hidden, weight, target, self.alpha, self.tau, bias,
                                      self.ignore_index, self.reduction, self.chunk,
                                      self.skip_zeros, self.label_smoothing, self.loop,
                                      self.vocab_chunk, self.softcap)
