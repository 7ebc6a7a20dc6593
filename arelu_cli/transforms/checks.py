"""Argument checks shared by every transform, loss and tau: the one alpha range, label
smoothing. They look at Python values only, never at tensor contents, so no call forces a
host-device synchronization.
"""

from __future__ import annotations

import math

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
