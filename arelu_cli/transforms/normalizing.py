"""The normalizing baselines: softmax, sparsemax, 1.5-entmax and bisection alpha-entmax.

alpha-entmax (Peters et al., 2019; the paper's eq. (entmax)) solves ``max_p p^T z + H_alpha(p)``
over the simplex: ``p_i = [(alpha - 1) z_i - tau(z)]_+ ** (1 / (alpha - 1))`` with ``tau(z)``
making ``sum p = 1``; alpha -> 1 is softmax, alpha = 2 sparsemax. These wrap the reference
``entmax`` package (exact sort, top-``k`` partial sort, bisection) and add ``(..., V)`` inputs,
``ignore_index``, ``reduction``, label smoothing and float32 math for half-precision logits.
With label smoothing ``eps`` the target is ``q = (1 - eps) e_y + eps / V``: softmax's loss is
``F.cross_entropy(..., label_smoothing=eps)``, entmax's the Fenchel-Young loss at ``q``::

    loss(z, y) = [entmax package's loss at e_y] + eps * (z_y - mean_j z_j)

(no ``- H(q)``, like PyTorch's). Every gradient is exactly ``p - q``; ``eps = 0`` (the paper's
setting) runs the unsmoothed code unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from arelu_cli.transforms._partial_sort import entmax15_topk_rows
from arelu_cli.transforms.checks import check_alpha, check_label_smoothing, check_logits
from arelu_cli.transforms.reduction import (check_reduction, flatten_logits, loss_dtype,
                                            reduce_rows, split_ignored)
from arelu_cli.transforms.log_scores import log_with_zeros


def _entmax():
    """The ``entmax`` package, imported at the first call that needs it (importing
    :mod:`arelu_cli.transforms` needs torch only)."""
    import entmax

    return entmax


def _acc(logits: torch.Tensor) -> torch.Tensor:
    """Half-precision logits are upcast: sorting and thresholds need float32."""
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def _check_k(k: int | None) -> int | None:
    if k is not None and (int(k) != k or k < 1):
        raise ValueError(f"k (the partial-sort size) must be a positive integer or None, got {k!r}")
    return None if k is None else int(k)


def softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax (1-entmax): dense probabilities."""
    return torch.softmax(_acc(check_logits(logits)), dim=dim).to(logits.dtype)


def sparsemax(logits: torch.Tensor, dim: int = -1, k: int | None = None) -> torch.Tensor:
    """sparsemax (2-entmax): Euclidean projection onto the simplex; exact sort, or top-``k``."""
    probs = _entmax().sparsemax(_acc(check_logits(logits)), dim=dim, k=_check_k(k))
    return probs.to(logits.dtype)


def entmax15(logits: torch.Tensor, dim: int = -1, k: int | None = None) -> torch.Tensor:
    """1.5-entmax by exact sort, or by partial sort over the top ``k`` (widened if needed)."""
    probs = _entmax().entmax15(_acc(check_logits(logits)), dim=dim, k=_check_k(k))
    return probs.to(logits.dtype)


def entmax_bisect(logits: torch.Tensor, alpha: float = 1.5, dim: int = -1,
                  n_iter: int = 50) -> torch.Tensor:
    """alpha-entmax for any alpha in [1.05, 2] by bisection on the threshold."""
    alpha = check_alpha(alpha)
    probs = _entmax().entmax_bisect(_acc(check_logits(logits)), alpha=alpha, dim=dim,
                                    n_iter=n_iter)
    return probs.to(logits.dtype)


def log_probs(probs: torch.Tensor) -> torch.Tensor:
    """``log p`` with ``-inf`` where ``p = 0``: the decoding score of a normalizing transform."""
    return log_with_zeros(probs)


def _reduced(row_loss, logits, target, ignore_index, reduction,
             label_smoothing) -> torch.Tensor:
    """Run a per-row loss of the entmax package on flattened, ignore-safe inputs, moved
    from ``e_y`` to the smoothed target ``q`` by ``+ eps (z_y - mean_j z_j)``; autograd adds
    that term's gradient ``eps (e_y - 1/V)``, making the total ``p - q``."""
    eps = check_label_smoothing(label_smoothing)
    check_reduction(reduction)
    flat, flat_target = flatten_logits(logits, target, ignore_index)
    valid, safe_target = split_ignored(flat_target, ignore_index)
    z = _acc(flat)
    rows = row_loss(z, safe_target)
    if eps:
        target_logit = z.gather(1, safe_target.unsqueeze(1)).squeeze(1)
        rows = rows + eps * (target_logit - z.mean(1))
    return reduce_rows(rows, valid, reduction, target.shape).to(loss_dtype(logits.dtype,
                                                                          reduction))


def cross_entropy_loss(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                       reduction: str = "mean", label_smoothing: float = 0.0) -> torch.Tensor:
    """Softmax cross-entropy (``F.cross_entropy``'s rows) on ``(..., V)`` logits, to the
    smoothed target ``q`` when ``label_smoothing > 0``, reduced by
    :func:`~arelu_cli.transforms.reduction.reduce_rows` like every loss here (a ``mean`` over
    no counted row is 0, not ``F.cross_entropy``'s NaN); a reduced loss of half-precision
    logits is their rows' float32 sum (:func:`~arelu_cli.transforms.reduction.loss_dtype`)."""
    eps = check_label_smoothing(label_smoothing)
    check_reduction(reduction)
    flat, flat_target = flatten_logits(logits, target, ignore_index)
    rows = F.cross_entropy(flat, flat_target, ignore_index=ignore_index, reduction="none",
                           label_smoothing=eps).to(loss_dtype(logits.dtype, reduction))
    return reduce_rows(rows, flat_target != ignore_index, reduction, target.shape)


def sparsemax_loss(logits: torch.Tensor, target: torch.Tensor, k: int | None = None,
                   ignore_index: int = -100, reduction: str = "mean",
                   label_smoothing: float = 0.0) -> torch.Tensor:
    """The sparsemax loss (Martins & Astudillo, 2016); gradient ``sparsemax(z) - q``."""
    k = _check_k(k)
    return _reduced(lambda z, y: _entmax().sparsemax_loss(z, y, k), logits, target,
                    ignore_index, reduction, label_smoothing)


def entmax15_loss(logits: torch.Tensor, target: torch.Tensor, k: int | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """The 1.5-entmax loss; exact sort when ``k`` is None (the ``entmax`` package), else
    partial sort over the top ``k``, widened where the support fills it
    (:mod:`~arelu_cli.transforms._partial_sort`: the package's numbers, one pass over the
    logits and one for the gradient)."""
    k = _check_k(k)
    if k is None:
        return _reduced(lambda z, y: _entmax().entmax15_loss(z, y), logits, target,
                        ignore_index, reduction, label_smoothing)
    return _reduced(lambda z, y: entmax15_topk_rows(z, y, k), logits, target, ignore_index,
                    reduction, label_smoothing)


def entmax_bisect_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 1.5,
                       n_iter: int = 50, ignore_index: int = -100, reduction: str = "mean",
                       label_smoothing: float = 0.0) -> torch.Tensor:
    """The alpha-entmax loss for any alpha in [1.05, 2], threshold found by bisection."""
    alpha = check_alpha(alpha)
    return _reduced(lambda z, y: _entmax().entmax_bisect_loss(z, y, alpha, n_iter), logits, target,
                    ignore_index, reduction, label_smoothing)
