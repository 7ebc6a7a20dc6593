"""The paper's optimization schedule (Appendix "Optimization"): Noam learning-rate decay and
OpenNMT-py's exponential moving average of the weights ("average decay"). Pure functions.
"""

from __future__ import annotations

import torch


def noam_lr(step: int, lr: float, d_model: int, warmup: int) -> float:
    """``lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (Vaswani et al., 2017).

    Rises linearly for ``warmup`` steps, then decays as ``step^-0.5``; ``step`` counts from 1.
    """
    step = max(step, 1)
    return lr * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def average_weight(step: int, average_decay: float) -> float:
    """OpenNMT-py's weight of the current parameters in the running average at ``step``
    (from 1): ``max(average_decay, 1 - (step + 1) / (step + 10))``, large early on so that the
    average does not stay stuck at the initialization."""
    return max(average_decay, 1.0 - (step + 1) / (step + 10))


@torch.no_grad()
def update_average(average: list[torch.Tensor], params: list[torch.Tensor], weight: float) -> None:
    """``average <- (1 - weight) * average + weight * params``, in place."""
    torch._foreach_lerp_(average, params, weight)
