"""Log scores of a sparse output: ``log p`` with ``-inf`` at the exact zeros."""

from __future__ import annotations

import torch


def log_with_zeros(x: torch.Tensor) -> torch.Tensor:
    """``log x`` of a non-negative tensor, ``-inf`` at its zeros, in a new tensor. The log of
    exact zeros is a slow path on CPU; clamping to the smallest normal first avoids it."""
    out = x.clamp_min(torch.finfo(x.dtype).tiny).log_()
    return out.masked_fill_(x == 0, float("-inf"))
