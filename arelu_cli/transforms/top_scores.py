"""The k best decoding scores per row without the full log-score matrix: alpha-ReLU, softmax.

A token's alpha-ReLU log-score ``log([(alpha - 1) z - tau]_+) / (alpha - 1)`` (``-inf`` off the
support) depends on its own logit only and never decreases with it, so the ``k`` best are
those of the ``k`` largest logits: :func:`alpha_relu_top_log_scores` finds them in one read
pass and takes the log of ``k`` per row with :func:`alpha_relu_log_scores` itself (bit for bit
the full matrix's). Softmax's ``(z_j - m) - log sum_i exp(z_i - m)`` ranks tokens the same way,
so :func:`softmax_top_log_scores` takes the same ``k`` logits (the first is ``m``) and one
``sum exp(z - m)``, instead of ``log_softmax(z).topk(k)``: decoding's fair fast path for
softmax (agreeing with ``log_softmax`` to float32 rounding). Ties: larger logit first, equal
logits lower index first (``argmax``'s rule); a row holding a NaN gets NaN scores. Engines:
the ``cpp`` engine's ``top_k_logits``, else :func:`top_k_logits` (``torch.topk`` over unique
int64 keys, the same choices).
"""

from __future__ import annotations

import math

import torch

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms import _cpp_kernels
from arelu_cli.transforms.checks import check_alpha
from arelu_cli.transforms.alpha_relu import alpha_relu_log_scores

_MAGNITUDE = 0x7FFFFFFF


def top_k_logits(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest entries of each row of float32 ``logits (N, V)`` and their indices,
    ``(N, k)`` each: larger first, equal values lower index first (``-0.0`` equals ``0.0``);
    a row holding a NaN gets NaN values and indices ``0..k-1``. The eager twin of the
    ``cpp`` engine's pass: ``torch.topk`` over keys that no two entries share."""
    bits = torch.where(logits == 0, 0.0, logits).view(torch.int32)   # (N, V); -0.0 -> 0.0
    # Negative floats order backwards as integers: flip their magnitude bits.
    ordered = bits ^ ((bits >> 31) & _MAGNITUDE)
    vocab = logits.shape[1]
    reversed_index = vocab - 1 - torch.arange(vocab, device=logits.device)
    indices = ((ordered.long() << 32) | reversed_index).topk(k, dim=1).indices  # (N, k)
    nan_rows = torch.isnan(logits).any(1, keepdim=True)                # (N, 1)
    first = torch.arange(k, device=logits.device).expand_as(indices)
    return (logits.gather(1, indices).masked_fill_(nan_rows, math.nan),
            torch.where(nan_rows, first, indices))


def engine(device: torch.device | str) -> str:
    """``cpp`` or ``eager``: the engine of :func:`alpha_relu_top_log_scores` on ``device``."""
    return "cpp" if kernels.engine_for(torch.empty(0, 1, device=device)) == "cpp" else "eager"


def _top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``logits (..., V)`` as float32 ``(N, V)`` and the ``k`` largest entries of each row
    with their indices, ``(N, k)`` each, by the engine for them (ties and NaN as above)."""
    vocab = logits.shape[-1]
    if not 1 <= k <= vocab:
        raise ValueError(f"k must lie in [1, {vocab}] (the vocabulary size), got {k}")
    z = logits.float().reshape(-1, vocab).contiguous()                 # (N, V)
    values, indices = (_cpp_kernels.top_k_logits(z, k) if kernels.engine_for(z) == "cpp"
                         else top_k_logits(z, k))
    return z, values, indices


def alpha_relu_top_log_scores(logits: torch.Tensor, k: int, alpha: float = 1.5,
                              tau: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best alpha-ReLU log-scores of each row of ``logits (..., V)`` and their
    indices, ``(..., k)`` each, best first: the top ``k`` of :func:`alpha_relu_log_scores`
    (float32) without building it; see the module docstring for ties and NaN."""
    alpha = check_alpha(alpha)
    _, values, indices = _top_k(logits, k)
    shape = (*logits.shape[:-1], k)
    return alpha_relu_log_scores(values, alpha, tau).view(shape), indices.view(shape)


def softmax_top_log_scores(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best log-softmax scores of each row of ``logits (..., V)`` and their
    indices, ``(..., k)`` each, best first, in float32: the ``k`` largest logits minus the
    row's logsumexp, without ``topk`` over the ``(N, V)`` log-probabilities; see the module
    docstring."""
    z, values, indices = _top_k(logits, k)
    top = values[:, :1]                                                 # (N, 1) row maxima
    # log_softmax's own grouping, (z - max) - log sum exp(z - max): exact for the best token
    # even where z - logsumexp(z) would round (|z| large against the log of the sum).
    log_sum = (z - top).exp_().sum(1, keepdim=True).log_()              # (N, 1)
    shape = (*logits.shape[:-1], k)
    return ((values - top) - log_sum).view(shape), indices.view(shape)
