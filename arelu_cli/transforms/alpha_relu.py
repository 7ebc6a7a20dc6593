"""alpha-ReLU and its loss (the paper's Section 2, eq. (sp_loss) and Lemma 1).

alpha-ReLU is alpha-entmax with its normalizing threshold frozen to a constant ``tau``::

    alpha_relu(z)_i = [(alpha - 1) z_i - tau]_+ ** (1 / (alpha - 1)),   alpha in [1.05, 2]
 (no sort, no reduction; no sum to one). With ``p = alpha_relu(z)``, Tsallis
entropy ``H_alpha(p) = (1 - sum_j p_j^alpha) / (alpha (alpha - 1))`` and the label-smoothed
target ``q = (1 - eps) e_y + eps / V`` (``eps = 0``: the paper's one-hot ``e_y``), the loss is::

    loss(z, y) = (p - q)^T (z - tau / (alpha - 1) 1) + H_alpha(p),   d loss / d z = p - q

(no ``- H(q)``, like PyTorch's). Forward never builds ``p``; backward writes the gradient in
one pass (``alpha_relu_kernels``, on the engine of ``engines``). Layers as in ``entmax``:
autograd Functions, plain functions, thin modules. The paper's tau is the mean 1.5-entmax
threshold of an untrained model's first batch, predicted by ``tau`` (``tau="analytic"``).
"""

from __future__ import annotations

import torch
from torch import nn

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms._single_pass_loss import single_pass_loss
from arelu_cli.transforms.tau import tau_for
from arelu_cli.transforms.checks import (check_alpha, check_label_smoothing, check_logits,
                                         check_tau)
from arelu_cli.transforms.reduction import (check_reduction, flatten_logits, loss_dtype,
                                            reduce_rows, row_scale, split_ignored)
from arelu_cli.transforms.log_scores import log_with_zeros


class _AlphaReLUFunction(torch.autograd.Function):
    """alpha-ReLU with a diagonal Jacobian ``diag(p^(2 - alpha))``; saves only ``p``."""

    @staticmethod
    def forward(ctx, logits, alpha, tau):
        probs = kernels.transform(logits, alpha, tau)
        ctx.alpha = alpha
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, grad):
        (probs,) = ctx.saved_tensors
        alpha = ctx.alpha
        if alpha == 2.0:                      # p^0 is 1 on the support and 0 outside
            local = (probs > 0).to(grad.dtype)
        elif alpha == 1.5:
            local = probs.sqrt()
        else:
            local = probs.pow(2.0 - alpha)
        return grad * local, None, None


def alpha_relu(logits: torch.Tensor, alpha: float = 1.5, tau: float = 0.0,
               dim: int = -1) -> torch.Tensor:
    """alpha-ReLU: ``[(alpha - 1) z - tau]_+ ** (1 / (alpha - 1))`` elementwise.

    ``dim`` is accepted for symmetry with the normalizing transforms; alpha-ReLU is
    elementwise so it does not depend on it. The output does not sum to one.
    """
    del dim
    return _AlphaReLUFunction.apply(check_logits(logits), check_alpha(alpha), check_tau(tau))


def alpha_relu_log_scores(logits: torch.Tensor, alpha: float = 1.5, tau: float = 0.0,
                          dim: int = -1) -> torch.Tensor:
    """``log alpha_relu(z)`` computed in the log domain: ``log[(alpha-1) z - tau]_+ / (alpha-1)``.

    Entries outside the support are ``-inf``. Used as the per-step score in decoding.
    """
    del dim
    alpha = check_alpha(alpha)
    shifted = kernels.shifted(check_logits(logits), alpha, check_tau(tau))
    return log_with_zeros(shifted).mul_(1.0 / (alpha - 1.0))


class _AlphaReLULossFunction(torch.autograd.Function):
    """The alpha-ReLU loss on flattened ``(N, V)`` logits with label smoothing ``eps``;
    gradient ``scale * (p - q)``."""

    @staticmethod
    def forward(ctx, logits, target, alpha, tau, ignore_index, reduction, shape, reuse, eps):
        valid, safe_target = split_ignored(target, ignore_index)
        rows = kernels.loss_rows(logits, safe_target, alpha, tau, eps)
        ctx.alpha, ctx.tau, ctx.reduction, ctx.reuse = alpha, tau, reduction, reuse
        ctx.eps = eps
        ctx.save_for_backward(logits, safe_target, valid)
        return reduce_rows(rows, valid, reduction, shape).to(loss_dtype(logits.dtype, reduction))

    @staticmethod
    def backward(ctx, grad):
        logits, safe_target, valid = ctx.saved_tensors
        scale = row_scale(grad, valid, ctx.reduction)
        out = logits if ctx.reuse else torch.empty_like(logits)
        kernels.grad_into(logits, safe_target, scale, ctx.alpha, ctx.tau, out, ctx.eps)
        return out, None, None, None, None, None, None, None, None


def _can_reuse(logits: torch.Tensor) -> bool:
    """Whether the logits' memory may hold their own gradient: never for a leaf (its
    ``.grad`` would alias its data) nor for a view of one."""
    base = logits if logits._base is None else logits._base
    return not base.is_leaf


def alpha_relu_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 1.5,
                    tau: float = 0.0, ignore_index: int = -100, reduction: str = "mean",
                    reuse_logits: bool = False, label_smoothing: float = 0.0) -> torch.Tensor:
    """The alpha-ReLU loss (paper eq. (sp_loss)) of ``logits (..., V)`` at ``target (...)``.

    Args:
        logits: raw scores ``z``, any float dtype (math in fp32, fp64 for fp64 input).
        target: class indices; rows equal to ``ignore_index`` contribute nothing.
        alpha: in [1.05, 2]. tau: the constant threshold, a number (the estimate:
            :func:`arelu_cli.transforms.analytic_tau` or ``tau_for(first_logits)``; a tau
            recomputed from every batch would not be a constant).
        reduction: ``none`` (shape of ``target``), ``sum`` or ``mean`` over counted rows.
        reuse_logits: write the gradient into the logits' own memory in backward, saving
            a whole ``N x V`` allocation (the fastest path). Only for logits that nothing
            reads after backward, e.g. the output of the model's final linear layer;
            ignored for leaf tensors. Autograd raises if another op saved the logits.
            On the ``triton`` engine (CUDA) the gradient is written in forward, so
            nothing may read the logits after this call.
        label_smoothing: ``eps`` in [0, 1): the target is ``q = (1 - eps) e_y + eps / V``
            (see the module docstring); 0, the default and the paper's setting, is none.

    The gradient with respect to ``logits`` is ``alpha_relu(logits) - q`` (times the
    reduction's weight), exactly.
    """
    alpha, tau = check_alpha(alpha), check_tau(tau)
    eps = check_label_smoothing(label_smoothing)
    check_reduction(reduction)
    flat, flat_target = flatten_logits(logits, target, ignore_index)
    flat = flat.contiguous()
    copied = flat.untyped_storage().data_ptr() != logits.untyped_storage().data_ptr()
    reuse = bool(reuse_logits) and (copied or _can_reuse(logits))
    if kernels.engine_for(flat) == "triton":  # loss and gradient in one pass, in forward
        return single_pass_loss(flat, flat_target, alpha, tau, eps, ignore_index,
                                reduction, target.shape, reuse)
    return _AlphaReLULossFunction.apply(flat, flat_target, alpha, tau,
                                        ignore_index, reduction, target.shape, reuse, eps)


class AlphaReLU(nn.Module):
    """Module form of :func:`alpha_relu`."""

    def __init__(self, alpha: float = 1.5, tau: float = 0.0, dim: int = -1):
        super().__init__()
        self.alpha, self.tau, self.dim = check_alpha(alpha), check_tau(tau), dim

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return alpha_relu(logits, self.alpha, self.tau, self.dim)


class AlphaReLULoss(nn.Module):
    """Module form of :func:`alpha_relu_loss`. ``tau="analytic"`` freezes tau at the first call
    to ``tau_for(logits, alpha)``, the analytic estimate for that (untrained model's) batch:
    ``V`` its last dimension, ``sigma`` its std; :attr:`tau` is None until then."""

    def __init__(self, alpha: float = 1.5, tau: float | str = 0.0, ignore_index: int = -100,
                 reduction: str = "mean", reuse_logits: bool = False,
                 label_smoothing: float = 0.0):
        super().__init__()
        if isinstance(tau, str) and tau != "analytic":
            raise ValueError(f"tau must be a number or 'analytic', got {tau!r}")
        self.alpha = check_alpha(alpha)
        self.tau = None if tau == "analytic" else check_tau(tau)
        self.ignore_index, self.reduction = ignore_index, check_reduction(reduction)
        self.reuse_logits = reuse_logits
        self.label_smoothing = check_label_smoothing(label_smoothing)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.tau is None:
            self.tau = tau_for(logits, self.alpha)
        return alpha_relu_loss(logits, target, self.alpha, self.tau, self.ignore_index,
                               self.reduction, self.reuse_logits, self.label_smoothing)
