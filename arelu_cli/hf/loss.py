"""The loss of an output transform on Hugging Face's label conventions.

Labels equal to ``ignore_index`` (-100) are ignored; causal LMs predict ``labels[t + 1]``
from position ``t`` (labels are shifted inside the loss, or given already shifted as
``shift_labels``), seq2seq models predict ``labels[t]``. With ``num_items_in_batch`` (the
Trainer's count of target tokens over all accumulated micro-batches) the loss is the sum
over the micro-batch divided by it, so that gradient accumulation equals one large batch;
without it, the mean over the micro-batch's targets. Both as ``transformers``'
``ForCausalLMLoss`` does for cross-entropy. ``label_smoothing`` moves the target to
``(1 - eps) e_y + eps / V`` (every transform's loss takes it; the Trainer's own
``label_smoothing_factor`` would compute softmax cross-entropy instead).
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from arelu_cli.registry import OutputTransform


def shift_left(labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """(B, T) targets of the causal positions: ``labels[:, 1:]`` then ``ignore_index``."""
    return F.pad(labels, (0, 1), value=ignore_index)[..., 1:]


def token_loss(transform: OutputTransform, logits: torch.Tensor, labels: torch.Tensor,
               num_items_in_batch: torch.Tensor | int | None = None,
               ignore_index: int = -100, label_smoothing: float = 0.0) -> torch.Tensor:
    """The transform's loss of ``logits`` (..., V) at ``labels`` (...), unshifted: the mean
    over non-ignored targets, or their sum over ``num_items_in_batch``."""
    vocab = logits.shape[-1]
    flat = transform.loss_input(logits.reshape(-1, vocab))
    target = labels.reshape(-1).to(flat.device)
    reduction = "mean" if num_items_in_batch is None else "sum"
    loss = transform.loss(flat, target, ignore_index=ignore_index, reduction=reduction,
                          label_smoothing=label_smoothing)
    return loss if num_items_in_batch is None else over_items(loss, num_items_in_batch)


def over_items(total: torch.Tensor, num_items_in_batch: torch.Tensor | int) -> torch.Tensor:
    """A summed loss divided by the Trainer's count of targets (a tensor or an int)."""
    if torch.is_tensor(num_items_in_batch):
        return total / num_items_in_batch.to(total.device).clamp_min(1)
    return total / max(num_items_in_batch, 1)


def causal_loss(transform: OutputTransform, logits: torch.Tensor, labels: torch.Tensor,
                vocab_size: int | None = None,
                num_items_in_batch: torch.Tensor | int | None = None,
                ignore_index: int = -100, shift_labels: torch.Tensor | None = None,
                label_smoothing: float = 0.0, **kwargs) -> torch.Tensor:
    """``model.loss_function`` of a causal LM (the signature of ``ForCausalLMLoss``):
    position ``t`` predicts ``labels[t + 1]`` unless ``shift_labels`` are given."""
    if shift_labels is None:
        shift_labels = shift_left(labels, ignore_index)
    return token_loss(transform, logits, shift_labels, num_items_in_batch, ignore_index,
                      label_smoothing)


def trainer_loss(transform: OutputTransform, label_smoothing: float = 0.0):
    """``Trainer(compute_loss_func=...)`` for a causal LM: ``f(outputs, labels,
    num_items_in_batch=None)`` on the model's shifted logits, for a model whose forward is
    left as it is."""
    def loss(outputs, labels, num_items_in_batch=None):
        return causal_loss(transform, outputs["logits"], labels,
                           num_items_in_batch=num_items_in_batch,
                           label_smoothing=label_smoothing)
    return loss


def loss_function(transform: OutputTransform, label_smoothing: float = 0.0):
    """``model.loss_function`` for a causal LM (see :func:`causal_loss`)."""
    return partial(causal_loss, transform, label_smoothing=label_smoothing)
