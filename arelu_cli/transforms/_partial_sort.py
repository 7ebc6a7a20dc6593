"""The 1.5-entmax loss by partial sort, touching the ``(N, V)`` logits twice: one ``topk``
and, in backward, one write of the gradient.

Peters et al. (2019)'s threshold of 1.5-entmax needs only the sorted largest logits: with
``x = (z - max z) / 2`` sorted in descending order, ``tau_r = mean_r - sqrt(max(0, 1 / r -
var_r))`` over the first ``r`` of them, and the support is the largest ``r`` with ``tau_r <=
x_r``. If the top ``k`` hold the whole support (fewer than ``k`` entries pass), they are
enough: ``p = [x - tau]_+^2`` is zero outside them, the loss ``(1 - sum p^(3/2)) / 0.75 + p^T z
- z_y`` (the Fenchel-Young loss, as the ``entmax`` package defines it) is a sum over them, and
the gradient ``p - e_y`` is ``k + 1`` entries per row. Rows whose support fills the top
``k`` are solved again at once over as many as can be in their support: such a row's
support holds its top ``k``, so its threshold is at least ``tau_k`` (the sum of ``(x - tau)^2``
over the top ``k`` alone reaches 1 no later), and only the entries with ``x >= tau_k`` can have
``p > 0``; one more ``topk`` over the largest such count of those rows solves them all, where
the package's doubling ``2k``, ``4k`` ... sorts them up to six times early in training (the
toy model's first 100 steps: 0.74x the time, the same losses to every digit); while no row
fits in the top ``k``, that ``topk`` reads the logits in place. Doubling remains as a floor,
the full sort last. Same formulas as ``entmax.entmax15_loss(z, y, k)``, so the
same numbers up to the order of float sums; the package's forward also shifts, halves, clamps and squares the
whole ``(N, V)`` matrix, sums ``p^(3/2)`` and ``p^T z`` over it and allocates a ``-1``
matrix for the target, each a pass over the logits.
"""

from __future__ import annotations

import torch


def _threshold(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tau (n, 1), support size (n, 1))`` of sorted-descending ``x (n, r)``, as
    ``entmax.activations._entmax_threshold_and_support`` computes them."""
    rho = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype, device=x.device)
    mean = x.cumsum(-1) / rho
    mean_sq = (x * x).cumsum(-1) / rho
    delta = (1 - rho * (mean_sq - mean * mean)) / rho
    tau = mean - delta.clamp_min(0).sqrt()
    support = (tau <= x).sum(-1, keepdim=True)
    return tau.gather(-1, support - 1), support


def _solve(z: torch.Tensor, k: int) -> list[tuple[torch.Tensor | None, torch.Tensor,
                                                  torch.Tensor]]:
    """Blocks ``(rows, indices (n, r), p (n, r))`` that cover every row of ``z (N, V)``
    once (``rows`` None: all of them, in order): the nonzeros of 1.5-entmax, found over the
    top ``k``, then over as many as the rows left can hold (:func:`_support_bound`; at least
    twice as many, up to ``V``)."""
    blocks, pending, width = [], None, k
    vocab = z.shape[-1]
    while True:
        width = min(width, vocab)
        top, index = (z if pending is None else z[pending]).topk(width, dim=-1)  # (n, r)
        x = (top - top[:, :1]) / 2
        tau, support = _threshold(x)
        probs = (x - tau).clamp_min(0).square()
        solved = (support < width).squeeze(-1) | (width == vocab)
        if bool(solved.all()):  # the usual case: no row copied
            blocks.append((pending, index, probs))
            return blocks
        if pending is None and not bool(solved.any()):  # no row solved (early training):
            # the next round reads z itself, no copy of its rows, and its block scatters
            width = max(2 * width, _support_bound(z, top[:, :1], tau) + 1)
            continue
        if pending is None:
            pending = torch.arange(z.shape[0], device=z.device)
        blocks.append((pending[solved], index[solved], probs[solved]))
        left = ~solved
        pending = pending[left]
        width = max(2 * width, _support_bound(z[pending], top[left, :1], tau[left]) + 1)


def _support_bound(z: torch.Tensor, top: torch.Tensor, tau: torch.Tensor) -> int:
    """The most entries of a row of ``z (n, V)`` above ``top + 2 tau`` (``top (n, 1)`` the
    row's largest logit, ``tau (n, 1)`` the threshold over its top ``r``, all of them in its
    support): no row's 1.5-entmax support is larger (module docstring)."""
    return int((z >= top + 2 * tau).sum(-1).max())


class _Entmax15TopKLoss(torch.autograd.Function):
    """Per-row 1.5-entmax loss of ``z (N, V)`` at ``target (N,)``; gradient ``p - e_y``."""

    @staticmethod
    def forward(ctx, z, target, k):
        blocks = _solve(z, k)
        rows = -z.gather(1, target.unsqueeze(1)).squeeze(1)
        for where, index, probs in blocks:
            logits = z.gather(1, index) if where is None else z[where.unsqueeze(1), index]
            loss = (1 - (probs * probs.sqrt()).sum(-1)) / 0.75 + (probs * logits).sum(-1)
            if where is None:
                rows += loss
            else:
                rows[where] += loss
        ctx.blocks, ctx.shape = blocks, z.shape
        ctx.save_for_backward(target)
        return rows

    @staticmethod
    def backward(ctx, grad_rows):
        (target,) = ctx.saved_tensors
        grad = torch.zeros(ctx.shape, dtype=grad_rows.dtype, device=grad_rows.device)
        for where, index, probs in ctx.blocks:
            if where is None:
                grad.scatter_(1, index, probs.to(grad.dtype) * grad_rows[:, None])
            else:
                grad[where.unsqueeze(1), index] = probs.to(grad.dtype) * grad_rows[where, None]
        grad.scatter_add_(1, target.unsqueeze(1), -grad_rows.unsqueeze(1))
        return grad, None, None


def entmax15_topk_rows(z: torch.Tensor, target: torch.Tensor, k: int) -> torch.Tensor:
    """The 1.5-entmax loss of each row of ``z (N, V)`` at ``target (N,)`` (every target in
    ``[0, V)``), by partial sort over the top ``k`` (module docstring)."""
    return _Entmax15TopKLoss.apply(z, target, k)
