"""The output projection fused with the alpha-ReLU loss: ``N x V`` logits never exist.

The loss is eq. (sp_loss) of ``logits = hidden @ weight.T + bias``; by Lemma 1 its gradient
in the logits is ``G = P - E`` (scaled alpha-ReLU output minus scaled one-hot targets), so
``grad_hidden = G @ weight``, ``grad_weight = G^T @ hidden``, ``grad_bias = G^T 1``. A loop
over chunks of tokens computes each chunk's logits into one reused buffer, its losses,
overwrites the buffer with ``G`` and adds the chunk's share of the gradients. alpha-ReLU is
exactly zero below ``c = tau / (alpha - 1)``, so a vocabulary column of ``G`` is zero unless
a logit of the chunk exceeds ``c`` there or it is a target. ``skip_zeros`` picks how the
gradient products use that: on CPU (the default, ``None``) they skip those columns (host
decides); on the ``triton`` engine (CUDA) the default runs them dense on cuBLAS
(Liger-Kernel's structure: random-like supports leave almost no ``128 x 128`` tile all zero, and
cuBLAS is the faster GEMM), ``skip_zeros=True`` runs ``_triton_linear``'s own GEMMs that
skip the all-zero tiles (device decides, no sync). Skipped terms are exact zeros: the dense
result up to summation order. For ``sum``/``mean`` the gradients are computed in forward,
the reduction's weight (``1 / n`` for ``mean``) already in them, and only multiplied by the
upstream gradient in backward (as Liger-Kernel's fused cross-entropy; skipped on the device
where it is 1), so one call takes one backward; ``none`` recomputes in backward. bf16/fp16:
matmuls in that dtype, loss math in fp32; autocast casts as ``F.linear``; under
``torch.compile`` the loss runs eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms._chunk_grads import add_chunk_grads
from arelu_cli.transforms.checks import check_alpha, check_tau
from arelu_cli.transforms.reduction import (check_reduction, loss_dtype, reduce_rows, row_scale,
                                            split_ignored)

# Logits elements per chunk, the memory the loop holds beyond the gradients themselves (why
# these sizes: results/bench/README.md; the triton loop also takes at least N * d, see
# ``_triton_linear.chunk_rows``).
CHUNK_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 26}
# Largest share of the vocabulary with a nonzero gradient in a chunk at which the gradient
# matmuls run on those columns only (gathered) rather than on all of them.
LIVE_FRACTION = {"cpu": 0.5, "cuda": 0.25}
# Fewest tokens per chunk on CPU: every chunk streams the whole weight (V x d) through the
# three matmuls, so at large V a chunk of CHUNK_ELEMENTS // V tokens (32 at V = 128K) is
# bound by reading the weight, not by arithmetic.
MIN_CPU_ROWS = 256


@dataclass(frozen=True)
class _Loop:
    """The fixed arguments of one pass of the chunk loop."""

    alpha: float
    tau: float
    rows: int          # tokens per chunk
    skip_zeros: bool   # skip exact zeros: columns (CPU loop), tiles (triton loop)
    triton: bool = False  # the sync-free loop of ``_triton_linear``


def _live_columns(logits: torch.Tensor, target: torch.Tensor, loop: _Loop) -> torch.Tensor | None:
    """The vocabulary columns of a chunk whose gradient ``p - e_y`` has a nonzero entry (a
    logit above ``c = tau / (alpha - 1)``, a NaN, or a target) if skipping the others pays
    (``LIVE_FRACTION``); else None. Every other column of the gradient is exactly zero."""
    if not loop.skip_zeros:
        return None
    live = ~(logits.amax(0) <= loop.tau / (loop.alpha - 1.0))
    live[target] = True
    cols = live.nonzero().squeeze(1)
    share = LIVE_FRACTION.get(logits.device.type, LIVE_FRACTION["cuda"])
    return cols if cols.numel() <= share * logits.shape[1] else None


def _run(hidden, weight, bias, target, loop: _Loop, scale=None, want=(False, False, False)):
    """The chunk loop over tokens: the per-row losses and, given ``scale`` (each row's
    upstream gradient), the gradients (hidden, weight, bias) flagged in ``want`` (None for
    the others)."""
    n, d = hidden.shape
    vocab, device = weight.shape[0], hidden.device
    acc = kernels._acc_dtype(hidden.dtype)
    with_grads = scale is not None
    rows = torch.empty(n, dtype=acc, device=device)
    grads = (torch.empty_like(hidden) if with_grads and want[0] else None,
             torch.zeros(vocab, d, dtype=acc, device=device) if with_grads and want[1] else None,
             torch.zeros(vocab, dtype=acc, device=device)
             if with_grads and want[2] and bias is not None else None)
    buffer = torch.empty(min(loop.rows, n), vocab, dtype=hidden.dtype, device=device)
    for r0 in range(0, n, loop.rows):
        r1 = min(n, r0 + loop.rows)
        h, y = hidden[r0:r1], target[r0:r1]
        logits = buffer[:r1 - r0]  # (n_c, V)
        if bias is None:
            torch.mm(h, weight.t(), out=logits)
        else:
            torch.addmm(bias, h, weight.t(), out=logits)
        rows[r0:r1] = kernels.loss_rows(logits, y, loop.alpha, loop.tau)
        if with_grads:
            cols = _live_columns(logits, y, loop)
            kernels.grad_into(logits, y, scale[r0:r1], loop.alpha, loop.tau, logits)
            add_chunk_grads(logits, cols, h, weight,
                            None if grads[0] is None else grads[0][r0:r1], *grads[1:])
    return (rows, *grads)


def _losses(hidden, weight, bias, target, ignore_index, loop: _Loop, scale=None,
            want=(False, False, False)):
    """:func:`_run` or, on the ``triton`` engine, ``_triton_linear.run`` (which reads the
    targets with ``ignore_index`` itself)."""
    if loop.triton:
        from arelu_cli.transforms import _triton_linear
        return _triton_linear.run(hidden, weight, bias, target, scale, loop.alpha, loop.tau,
                                  0.0, ignore_index, loop.rows, want, tiles=loop.skip_zeros)
    _, safe_target = split_ignored(target, ignore_index)
    return _run(hidden, weight, bias, safe_target, loop, scale, want)


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
        unit = None
        if ctx.early:
            one = torch.ones((), dtype=kernels._acc_dtype(hidden.dtype), device=hidden.device)
            unit = row_scale(one, valid, reduction)
        rows, *grads = _losses(hidden, weight, bias, target, ignore_index, loop, unit, want)
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
            _, *grads = _losses(hidden, weight, bias, target, ctx.ignore_index, ctx.loop, scale,
                                ctx.needs_input_grad[:3])
        out = tuple(None if g is None else g.to(dtype) for g, dtype in zip(grads, ctx.dtypes))
        return (*out, None, None, None, None, None, None, None)


def _check(hidden, weight, target, bias) -> None:
    if not (torch.is_floating_point(hidden) and torch.is_floating_point(weight)):
        raise ValueError("hidden and weight must be floating-point tensors")
    if weight.dim() != 2 or hidden.dim() < 1 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(f"weight must have shape (V, d) with d = hidden.shape[-1]; got hidden "
                         f"{tuple(hidden.shape)} and weight {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must have shape (V,) = ({weight.shape[0]},), "
                         f"got {tuple(bias.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"target must hold integer class indices (int64), got {target.dtype}")
    if tuple(target.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(f"target shape {tuple(target.shape)} must equal hidden shape without "
                         f"the last (model) dimension, {tuple(hidden.shape[:-1])}")


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
                           chunk: int | None = None,
                           skip_zeros: bool | None = None) -> torch.Tensor:
    """The alpha-ReLU loss (paper eq. (sp_loss)) of ``hidden @ weight.T + bias`` at ``target``,
    without materializing the logits.

    Args:
        hidden: ``(..., d)`` inputs of the output projection. weight: ``(V, d)``.
        target: ``(...)`` class indices; rows equal to ``ignore_index`` contribute nothing.
        alpha, tau, ignore_index, reduction: as in :func:`alpha_relu_loss`.
        bias: optional ``(V,)``.
        chunk: tokens per chunk (default: ``CHUNK_ELEMENTS[device] // V``, on CPU at least
            ``MIN_CPU_ROWS``; on the
            ``triton`` engine rounded up to a multiple of 128, by default at least
            ``N * d / V``): the memory held is one ``chunk x V`` logits buffer plus the
            gradients.
        skip_zeros: whether the gradient products skip the exact zeros of alpha-ReLU's
            gradient (never changes the result beyond summation order). ``None`` (the
            default) picks the faster path as measured: on CPU, skip the all-zero vocabulary
            columns of each chunk (where few enough remain, ``LIVE_FRACTION``); on the
            ``triton`` engine (CUDA), dense cuBLAS products. ``True``: the same on CPU; on
            the ``triton`` engine, Triton GEMMs that skip the all-zero ``128 x 128`` tiles
            (pays only where whole tiles are zero, e.g. a trained model's very sparse
            supports). ``False``: dense products everywhere.

    Same value and gradients (hidden, weight, bias) as
    ``alpha_relu_loss(F.linear(hidden, weight, bias), target, ...)``, the loss in
    ``hidden``'s dtype (under autocast the matmuls run in the autocast dtype, the loss math
    in fp32 and the loss keeps ``hidden``'s dtype, as ``logits.float()`` would give); not
    twice differentiable.
    """
    if torch.compiler.is_compiling():
        # Dynamo can trace neither the triton loop's kernels nor the CPU loop's
        # data-dependent skip: one graph break, the loss runs eagerly.
        return _eager_loss(hidden, weight, target, alpha, tau, bias, ignore_index, reduction,
                           chunk, skip_zeros)
    alpha, tau = check_alpha(alpha), check_tau(tau)
    check_reduction(reduction)
    _check(hidden, weight, target, bias)
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be a positive number of tokens, got {chunk}")
    if skip_zeros is not None and not isinstance(skip_zeros, bool):
        raise TypeError(f"skip_zeros must be None (the faster path), True or False, "
                        f"got {skip_zeros!r}")
    out_dtype = hidden.dtype  # under autocast: the loss stays in the caller's dtype
    hidden, weight, bias = _autocast_inputs(hidden, weight, bias)
    if hidden.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
        raise ValueError(f"hidden, weight and bias must share a dtype, got {hidden.dtype}, "
                         f"{weight.dtype}{'' if bias is None else ', ' + str(bias.dtype)}")
    vocab = weight.shape[0]
    flat = hidden.reshape(-1, hidden.shape[-1]).contiguous()
    elements = CHUNK_ELEMENTS.get(hidden.device.type, CHUNK_ELEMENTS["cuda"])
    if kernels.engine_for(flat) == "triton":
        from arelu_cli.transforms import _triton_linear
        rows = _triton_linear.chunk_rows(chunk, *flat.shape, vocab, elements)
        loop = _Loop(alpha, float(tau), rows, skip_zeros is True, triton=True)
    else:
        rows = chunk or max(MIN_CPU_ROWS if flat.device.type == "cpu" else 1, elements // vocab)
        loop = _Loop(alpha, float(tau), rows, skip_zeros is not False)
    with torch.autocast(hidden.device.type, enabled=False):
        return _LinearAlphaReLULossFunction.apply(
            flat, weight.contiguous(), bias, target.reshape(-1).long(), ignore_index, reduction,
            target.shape, loop, torch.is_grad_enabled(), out_dtype)


_eager_loss = torch.compiler.disable(linear_alpha_relu_loss)


class LinearAlphaReLULoss(nn.Module):
    """Module form of :func:`linear_alpha_relu_loss`: ``loss(hidden, weight, target, bias)``."""

    def __init__(self, alpha: float = 1.5, tau: float = 0.0, ignore_index: int = -100,
                 reduction: str = "mean", chunk: int | None = None,
                 skip_zeros: bool | None = None):
        super().__init__()
        self.alpha, self.tau = check_alpha(alpha), float(tau)
        self.ignore_index, self.reduction = ignore_index, check_reduction(reduction)
        self.chunk, self.skip_zeros = chunk, skip_zeros

    def forward(self, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        return linear_alpha_relu_loss(hidden, weight, target, self.alpha, self.tau, bias,
                                      self.ignore_index, self.reduction, self.chunk,
                                      self.skip_zeros)
