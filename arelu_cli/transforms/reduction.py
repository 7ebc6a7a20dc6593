"""The rows of a loss and their reduction, shared by every loss: ``(..., V)`` logits and
``(...)`` targets flattened to ``(N, V)`` and ``(N,)``, ``ignore_index`` rows masked out, the
``none``/``sum``/``mean`` reduction of the per-row losses and, for a hand-written backward,
the factor each row's gradient is scaled by. Shapes and Python values are checked, never
tensor contents, so no loss forces a host-device synchronization.

The convention of every loss here (softmax, sparsemax, entmax, alpha-ReLU on every engine,
the fused linear loss): ``mean`` is the sum over counted rows divided by ``max(count, 1)``,
so a batch whose targets are all ``ignore_index`` has loss 0 and exactly zero gradients,
not PyTorch's NaN (``F.cross_entropy``): one such batch (a padded micro-batch, a prompt-only
example under a causal LM's label mask) must not turn every weight NaN while the reported
loss reads 0. A loss with a hand-written backward scales each row's gradient by
:func:`row_scale`, which follows the same rule.
"""

from __future__ import annotations

import torch

from arelu_cli.transforms.checks import check_logits

REDUCTIONS = ("none", "sum", "mean")


def loss_dtype(dtype: torch.dtype, reduction: str) -> torch.dtype:
    """The dtype a loss of ``dtype`` logits returns: ``none``'s rows in the logits' own, a
    ``sum``/``mean`` of half-precision logits in float32 (a sum over 16K fp16 rows of loss 4
    passes fp16's 65,504 and becomes inf; bf16 keeps 3 digits: 478.77 read 478.0), as
    transformers' own loss is; any other in the logits' dtype."""
    if reduction != "none" and dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return dtype


def check_reduction(reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    return reduction


def flatten_logits(logits: torch.Tensor, target: torch.Tensor,
                   ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Check ``logits (..., V)`` against ``target (...)`` (:func:`check_targets` too) and
    flatten both to ``(N, V)``, ``(N,)``."""
    check_logits(logits)
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1, got {tuple(logits.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"target must hold integer class indices (int64), got {target.dtype}")
    if tuple(target.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"target shape {tuple(target.shape)} must equal logits shape without the last "
            f"(vocabulary) dimension, {tuple(logits.shape[:-1])}")
    vocab = logits.shape[-1]
    flat_target = target.reshape(-1).long()
    check_targets(flat_target, vocab, ignore_index)
    return logits.reshape(-1, vocab), flat_target


def check_targets(target: torch.Tensor, vocab: int, ignore_index: int) -> None:
    """A ValueError naming the first target outside ``[0, vocab)`` that is not
    ``ignore_index``. Checked on CPU tensors only, where reading them costs no device
    synchronization, and not inside ``torch.compile``; on a GPU such a target gives a NaN row
    (the ``triton`` engine) or a device-side assert (an ATen gather)."""
    if target.device.type != "cpu" or torch.compiler.is_compiling():
        return
    outside = (target != ignore_index) & ((target < 0) | (target >= vocab))
    if bool(outside.any()):
        first = int(outside.nonzero()[0, 0])
        raise ValueError(f"target {int(target[first])} (position {first} of the flattened "
                         f"targets) is outside the vocabulary [0, {vocab}); targets to ignore "
                         f"must equal ignore_index ({ignore_index})")


def split_ignored(target: torch.Tensor, ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(valid, safe_target)``: a bool mask of counted rows and targets with ignored rows set to 0."""
    valid = target != ignore_index
    return valid, torch.where(valid, target, torch.zeros_like(target))


def reduce_rows(rows: torch.Tensor, valid: torch.Tensor, reduction: str,
                shape: torch.Size) -> torch.Tensor:
    """Apply ``reduction`` to per-row losses; ignored rows count as zero (and not in the mean).

    ``mean`` over no counted row is 0 (the sum, 0, over ``max(count, 1)``), with zero
    gradients (the module docstring says why). The caller casts the result to
    :func:`loss_dtype`.
    """
    rows = rows.masked_fill(~valid, 0.0)
    if reduction == "none":
        return rows.reshape(shape)
    total = rows.sum()
    if reduction == "sum":
        return total
    return total / counted(valid)


def counted(valid: torch.Tensor) -> torch.Tensor:
    """The divisor of a ``mean``: the number of counted rows, at least 1 (a 0-d tensor, so
    that reading it never synchronizes with the device)."""
    return valid.sum().clamp_min(1)


def row_scale(grad: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    """The factor each row's gradient is multiplied by, given the incoming gradient: the
    incoming gradient (over :func:`counted` rows for ``mean``) at counted rows and exactly 0
    at ignored ones, whatever the incoming gradient holds (a NaN from a caller's ``0 / 0``
    never reaches them), as autograd's own masking gives."""
    dtype = torch.float64 if grad.dtype == torch.float64 else torch.float32
    factor = (grad.reshape(-1) if reduction == "none" else grad).to(dtype)
    if reduction == "mean":
        factor = factor / counted(valid)
    return torch.where(valid, factor, torch.zeros((), dtype=dtype, device=factor.device))
