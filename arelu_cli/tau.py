"""Which constant taus alpha-ReLU can train with (its float32 loss stays finite), checked
before any model is built; the estimates of tau are the library's, ``transforms.tau``."""

from __future__ import annotations

import torch

from arelu_cli.transforms.checks import check_alpha
from arelu_cli.transforms.tau import check_d_vocab

_F32_MAX = float(torch.finfo(torch.float32).max)
LOGIT_BOUND = 10.0
"""``|z|`` of an untrained model's logits, with room: their std is at most sqrt(2) (Lemma
var_transformer), so 10 is beyond 7 std. :func:`relu_tau_range` refuses what cannot train
even from there; a loss that overflows later is a divergence the trainer stops at."""


def relu_tau_range(alpha: float, d_vocab: int, tokens: int) -> tuple[float, float]:
    """The taus for which alpha-ReLU's float32 loss of a batch of ``tokens`` rows of
    ``d_vocab`` logits within :data:`LOGIT_BOUND` ``Z`` stays finite.

    With ``a = alpha - 1``, ``e = 1/a``, ``c = tau/a`` the kernels compute a row's loss as
    ``a^(e+1)/alpha * sum_j [z_j - c]_+^(e+1) + 1/(alpha a) + c - z_y``, and a batch sums
    ``tokens`` rows, in float32 (largest value ``F``). High tau: once ``c >= Z`` the sum is 0
    and a row is about ``c``, so ``tokens (c + 1/(alpha a) + Z) <= F``. Low tau: every entry
    is on the support and the sum reaches ``d_vocab (Z - c)^(e+1)``, which must stay below
    ``F``, also once scaled by ``tokens a^(e+1) / alpha``.
    """
    alpha, d_vocab = check_alpha(alpha), check_d_vocab(d_vocab)
    a, e, z = alpha - 1.0, 1.0 / (alpha - 1.0), LOGIT_BOUND
    high = a * (_F32_MAX / tokens - z - 1.0 / (alpha * a))
    scale = max(1.0, tokens * a ** (e + 1.0) / alpha)
    reach = (_F32_MAX / (d_vocab * scale)) ** (1.0 / (e + 1.0))  # the largest z - c
    return a * (z - reach), high


def check_relu_tau(tau: float, name: str, alpha: float, d_vocab: int, tokens: int) -> float:
    """``tau`` if alpha-ReLU ``name`` can train with it (:func:`relu_tau_range`), else a
    ValueError that gives the valid range."""
    low, high = relu_tau_range(alpha, d_vocab, tokens)
    tau = float(tau)
    if not low <= tau <= high:  # NaN fails too
        raise ValueError(
            f"tau {tau:g} is impossible for {name}: with a vocabulary of {d_vocab} and batches "
            f"of {tokens} tokens its float32 loss is finite only for tau in [{low:.4g}, "
            f"{high:.4g}] (logits within +-{LOGIT_BOUND:g}); give a tau in that range, or "
            "auto (the paper's, from the first batch)")
    return tau
