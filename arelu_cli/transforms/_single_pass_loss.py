"""The alpha-ReLU loss in one pass over the logits: the ``triton`` engine's autograd Function.

The loss of the paper's eq. (sp_loss) and its gradient ``p - q`` (Lemma 1; ``q`` the label-
smoothed target, ``e_y`` without smoothing) come from one kernel
(``_triton_kernels._loss_kernel``) that reads each row of the logits once and, when a
gradient is wanted, writes ``p - q`` in the same pass, into the logits' own memory
(``reuse_logits``) or into a new buffer. For ``mean`` the kernel already writes ``(p - q) /
n`` (``n`` the counted rows, at least 1, counted and read on the device), so that backward
only multiplies by the upstream gradient (per row for ``reduction='none'``, one factor for
``sum``/``mean``), a multiplication the device skips where the factor is 1: in training
(upstream 1, any reduction but ``none``) the logits are read once and the gradient written
once, nothing more. Targets equal to ``ignore_index`` are handled inside the kernel; a
``mean`` over no counted row is 0 with zero gradients (``reduction``'s convention). No step
reads a tensor's value on the host, so none synchronizes with the GPU, and the host issues
no ATen compute op: a training call (``mean``) is three launches in forward (the count of
``n``, the pass, the reduced loss) and one in backward. That shortens a call the host waits
for; in a loop the host's work is hidden under the device's anyway. Without a wanted
gradient (validation, ``torch.no_grad``) the pass writes only the per-row losses.

The gradient is scaled in place, so backward runs once per call: a second backward through
the same loss (``retain_graph=True``) raises instead of scaling it twice.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from arelu_cli.transforms.reduction import loss_dtype


class _SinglePassLossFunction(torch.autograd.Function):
    """Loss and gradient (``/ n`` for ``mean``) in forward, the upstream factor in backward;
    see the module doc."""

    @staticmethod
    def forward(ctx, logits, target, alpha, tau, eps, ignore_index, reduction, shape, reuse,
                grad_enabled):
        from arelu_cli.transforms import _triton_kernels as kernels

        want = grad_enabled and ctx.needs_input_grad[0]
        grad = scale = None
        if want:
            grad = logits if reuse else torch.empty_like(logits)
            if reduction == "mean":
                scale = kernels.count_(target, ignore_index)  # [1 / max(n, 1)]
        # Per-row losses of ``none`` are written in the logits' dtype, ready to return.
        rows = torch.empty(target.shape[0], device=logits.device,
                           dtype=logits.dtype if reduction == "none" else torch.float32)
        kernels.loss_pass(logits, target, alpha, tau, eps, ignore_index, grad=grad,
                          scale=None if scale is None else scale[0], rows=rows)
        if want and reuse:
            # Written behind autograd's back: let it see the write, so that another op
            # which saved these logits for its backward raises instead of reading p - q.
            torch.autograd.graph.increment_version(logits)
        ctx.reduction, ctx.used = reduction, False
        ctx.save_for_backward(grad)
        if reduction == "none":
            return rows.reshape(shape)
        return kernels.total(rows, target, ignore_index, reduction == "mean",
                             loss_dtype(logits.dtype, reduction))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        from arelu_cli.transforms import _triton_kernels

        if ctx.used:
            raise RuntimeError("alpha_relu_loss: backward ran twice through one call; on the "
                               "triton engine its gradient is written in forward and scaled "
                               "in place in backward")
        ctx.used = True
        (grad,) = ctx.saved_tensors
        # mean: 1 / max(n, 1) is in grad already
        factor = grad_out.reshape(-1) if ctx.reduction == "none" else grad_out
        return (_triton_kernels.scale_(grad, factor), None, None, None, None, None,
                None, None, None, None)


def single_pass_loss(flat: torch.Tensor, target: torch.Tensor, alpha: float, tau: float,
                     eps: float, ignore_index: int, reduction: str, shape: torch.Size,
                     reuse: bool) -> torch.Tensor:
    """The loss of contiguous ``flat (N, V)`` logits at ``target (N,)`` (checked arguments,
    as :func:`arelu_cli.transforms.alpha_relu_loss` passes them), reduced to ``shape``
    for ``reduction='none'``."""
    return _SinglePassLossFunction.apply(flat, target, alpha, tau, eps, ignore_index,
                                         reduction, shape, reuse, torch.is_grad_enabled())
