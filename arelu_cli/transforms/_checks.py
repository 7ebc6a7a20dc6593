"""Argument checks and the ignore_index/reduction plumbing shared by every loss.

All checks look at Python values and shapes only, never at tensor contents, so no loss
forces a host-device synchronization.
"""

from __future__ import annotations

import math

import torch

REDUCTIONS = ("none", "sum", "mean")


MIN_ALPHA = 1.05


def check_alpha(alpha: float) -> float:
    """``alpha`` as a float if it lies in [1.05, 2], the one range of every transform, loss and
    tau here; else a ValueError, the same message everywhere. Why 1.05: alpha-ReLU's float32
    kernels scale ``[z - c]_+^e`` and ``sum_j [z_j - c]_+^(e+1)`` (``e = 1/(alpha-1)``) by
    ``(alpha-1)^e`` and ``(alpha-1)^(e+1)``; for O(1) outputs these are about ``e^-(e+1)`` and
    ``e^(e+1)``, out of float32 at ``e ~ 26`` (alpha ~ 1.038); ``e <= 20`` keeps them within
    1e+-28, ten orders of magnitude inside. As alpha -> 1 every transform tends to softmax.
    """
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        value = math.nan
    if not MIN_ALPHA <= value <= 2.0:  # NaN fails too
        raise ValueError(
            f"alpha {alpha!r} is outside [{MIN_ALPHA:g}, 2]: alpha -> 1 is softmax (use "
            f"'softmax'), 2 is sparsemax, and below {MIN_ALPHA:g} alpha-ReLU's float32 loss "
            "overflows")
    return value


def check_label_smoothing(eps: float) -> float:
    """Return the label smoothing ``eps`` as a float if it lies in [0, 1), else raise a
    ValueError saying so."""
    try:
        value = float(eps)
    except (TypeError, ValueError):
        raise ValueError(f"label_smoothing must be a number in [0, 1), got {eps!r}") from None
    if not 0.0 <= value < 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1) (0 is no smoothing), got {value:g}")
    return value


def check_reduction(reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    return reduction


def flatten_logits(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Check ``logits (..., V)`` against ``target (...)`` and flatten both to ``(N, V)``, ``(N,)``."""
    if not torch.is_floating_point(logits):
        raise ValueError(f"logits must be a floating-point tensor, got {logits.dtype}")
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1, got {tuple(logits.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"target must hold integer class indices (int64), got {target.dtype}")
    if tuple(target.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"target shape {tuple(target.shape)} must equal logits shape without the last "
            f"(vocabulary) dimension, {tuple(logits.shape[:-1])}")
    vocab = logits.shape[-1]
    return logits.reshape(-1, vocab), target.reshape(-1).long()


def split_ignored(target: torch.Tensor, ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(valid, safe_target)``: a bool mask of counted rows and targets with ignored rows set to 0."""
    valid = target != ignore_index
    return valid, torch.where(valid, target, torch.zeros_like(target))


def reduce_rows(rows: torch.Tensor, valid: torch.Tensor, reduction: str,
                shape: torch.Size) -> torch.Tensor:
    """Apply ``reduction`` to per-row losses; ignored rows count as zero (and not in the mean).

    ``mean`` over no counted row is NaN, as in ``F.cross_entropy``.
    """
    rows = rows.masked_fill(~valid, 0.0)
    if reduction == "none":
        return rows.reshape(shape)
    total = rows.sum()
    if reduction == "sum":
        return total
    return total / valid.sum()


def row_scale(grad: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    """The factor each row's gradient is multiplied by, given the incoming gradient."""
    mask = valid.to(torch.float64 if grad.dtype == torch.float64 else torch.float32)
    if reduction == "none":
        return grad.reshape(-1).to(mask.dtype) * mask
    if reduction == "sum":
        return grad.to(mask.dtype) * mask
    return grad.to(mask.dtype) * mask / valid.sum()


def log_with_zeros(x: torch.Tensor) -> torch.Tensor:
    """``log x`` of a non-negative tensor, ``-inf`` at its zeros, in a new tensor. The log of
    exact zeros is a slow path on CPU; clamping to the smallest normal first is ~3x faster."""
    out = x.clamp_min(torch.finfo(x.dtype).tiny).log_()
    return out.masked_fill_(x == 0, float("-inf"))
