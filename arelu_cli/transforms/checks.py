"""Argument checks shared by every transform, loss and tau: the one alpha range, alpha-ReLU's
threshold, label smoothing, the logits' dtype. They look at Python values and dtypes only,
never at tensor contents, so no call forces a host-device synchronization.
"""

from __future__ import annotations

import math

import torch

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


def check_tau(tau: float) -> float:
    """alpha-ReLU's threshold ``tau`` as a float if it is a finite number, else a ValueError:
    a NaN threshold makes every output and loss NaN, an infinite one every output 0 (or 1
    everywhere), and neither would say so."""
    try:
        value = float(tau)
    except (TypeError, ValueError):
        raise ValueError(f"tau (alpha-ReLU's threshold) must be a number, got {tau!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"tau (alpha-ReLU's threshold) must be a finite number, got {value}")
    return value


def check_logits(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` if they are a floating-point tensor, else a TypeError saying so (integer
    logits would fail inside a kernel, or round every output)."""
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not torch.is_floating_point(logits):
        raise TypeError(f"logits must be a floating-point tensor, got {logits.dtype}; convert "
                        "them first, e.g. logits.float()")
    return logits
