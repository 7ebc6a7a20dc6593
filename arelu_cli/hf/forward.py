"""The forwards :func:`arelu_cli.hf.use_transform` binds to a model instance.

* seq2seq models (BART, T5, Marian, ...) compute their cross-entropy inside ``forward``
  rather than through ``model.loss_function``: :func:`seq2seq_forward` runs the model's own
  forward without labels (decoder inputs from ``prepare_decoder_input_ids_from_labels``, as
  the model would build them) and adds the transform's loss of its logits;
* the fused output layer of causal LMs (:func:`fused_causal_forward`): in training with
  labels, the model's own forward runs with its LM head swapped for one that keeps its
  input (:func:`head_input`); that input (times the family's logit scale,
  :mod:`arelu_cli.hf.head`) and the head's weight go to
  :func:`arelu_cli.transforms.linear_alpha_relu_loss` (with the family's soft-cap and the
  label smoothing), which never holds the
  ``(tokens, V)`` logits; ``logits`` is then None, as Liger-Kernel's fused linear
  cross-entropy forward does (a trainer that reads them in training needs fused=False).
  Otherwise (eval, generation) the model's own forward;
* every other causal LM: the model's own forward (:func:`causal_forward`), whose
  ``model.loss_function`` is the transform's.

Each warns, once per model, when it trains without labels (:func:`warn_unlabelled`): the
transform's loss is then not computed, and a Trainer with ``label_smoothing_factor`` > 0
does exactly that, then computes softmax cross-entropy from the logits itself. Each refuses
TRL's ``fused_lm_head=True`` (:func:`refuse_trl_head`), whose head computes softmax
cross-entropy from the backbone.

Each reads the transform from ``self.arelu_transform``; :func:`bind` gives it the class
forward's signature (the Trainer keeps only the dataset columns that signature names) and
binds it with ``MethodType``, so that ``copy.deepcopy(model)`` gives a copy that runs its
own weights.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from types import MethodType

import torch

from arelu_cli.hf.head import head_params, swapped_forward
from arelu_cli.hf.loss import over_items, shift_left, token_loss
from arelu_cli.hf.transform import output_layer
from arelu_cli.transforms import linear_alpha_relu_loss


def bind(model: torch.nn.Module, impl):
    """``impl(self, ...)`` as ``model.forward``, with the signature of the class's forward."""
    def forward(self, *args, **kwargs):
        return impl(self, *args, **kwargs)
    functools.update_wrapper(forward, type(model).forward)
    return MethodType(forward, model)


def warn_unlabelled(model: torch.nn.Module, labels, shift_labels=None) -> None:
    """Warn once per model when a forward with gradients in training mode has no labels."""
    if (labels is not None or shift_labels is not None or not model.training
            or not torch.is_grad_enabled() or getattr(model, "_arelu_warned", False)):
        return
    model._arelu_warned = True
    warnings.warn(f"arelu: {type(model).__name__} trains without labels, so its "
                  f"{model.arelu_transform.name} loss is not computed here. A Trainer with "
                  "label_smoothing_factor > 0 does this and computes softmax cross-entropy "
                  "itself: set label_smoothing_factor=0 and pass label_smoothing= to "
                  "use_transform", stacklevel=3)


def causal_forward(self, *args, **kwargs):
    """The class's forward (its loss through ``self.loss_function``), after
    :func:`warn_unlabelled`."""
    refuse_trl_head(kwargs)
    base = type(self).forward
    named = kwargs.get("labels") is not None or kwargs.get("shift_labels") is not None
    if (not named and self.training and torch.is_grad_enabled()
            and not getattr(self, "_arelu_warned", False)):       # labels given by position?
        given = inspect.signature(base).bind_partial(self, *args, **kwargs).arguments
        warn_unlabelled(self, given.get("labels"), given.get("kwargs", {}).get("shift_labels"))
    return base(self, *args, **kwargs)


def seq2seq_forward(self, *args, labels=None, num_items_in_batch=None, **kwargs):
    """The model's forward with the transform's loss of ``labels`` (no shift: the decoder
    inputs are the labels shifted right)."""
    base = type(self).forward.__get__(self)
    if labels is None:
        warn_unlabelled(self, labels)
        return base(*args, **kwargs)
    if kwargs.get("decoder_input_ids") is None and kwargs.get("decoder_inputs_embeds") is None:
        kwargs["decoder_input_ids"] = self.prepare_decoder_input_ids_from_labels(labels=labels)
    kwargs.setdefault("use_cache", False)
    out = base(*args, **kwargs)
    loss = token_loss(self.arelu_transform, out.logits, labels, num_items_in_batch,
                      label_smoothing=self.arelu_label_smoothing)
    return type(out)(loss=loss, **{k: v for k, v in out.items() if k != "loss"})


def head_input(model: torch.nn.Module, **inputs):
    """The model's own forward on ``inputs`` (no labels), its LM head swapped for one that
    keeps its input and gives ``(..., 0)`` logits: ``(output, the head's input (B, T, d))``."""
    kept = []

    def keep(x, *args, **kwargs):
        kept.append(x)
        return x.new_zeros(*x.shape[:-1], 0)

    with swapped_forward(output_layer(model), keep):
        out = type(model).forward(model, **inputs)
    return out, kept[0]


def refuse_trl_head(kwargs: dict) -> None:
    """A ValueError for TRL's ``fused_lm_head=True``: its trainers' own fused head computes
    softmax log-probabilities from the backbone, never the model's loss."""
    if kwargs.pop("fused_lm_head", False):
        raise ValueError("TRL's fused_lm_head computes softmax cross-entropy itself, not the "
                         "arelu transform's loss: give the trainer compute_loss_func="
                         "compute_loss_func(model, name) (arelu_cli.hf) instead")


def fused_causal_forward(self, input_ids=None, attention_mask=None, labels=None,
                         num_items_in_batch=None, shift_labels=None, logits_to_keep=0,
                         **kwargs):
    """Training with labels: :func:`head_input`, then the fused alpha-ReLU loss of the head's
    input (times the family's logit scale) and the head's weight, with the family's
    soft-cap."""
    refuse_trl_head(kwargs)
    if not self.training or (labels is None and shift_labels is None):
        warn_unlabelled(self, labels, shift_labels)
        return type(self).forward(self, input_ids=input_ids, attention_mask=attention_mask,
                                  labels=labels, num_items_in_batch=num_items_in_batch,
                                  shift_labels=shift_labels, logits_to_keep=logits_to_keep,
                                  **kwargs)
    kwargs.setdefault("use_cache", False)
    out, hidden = head_input(self, input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    target = shift_left(labels) if shift_labels is None else shift_labels
    transform, head = self.arelu_transform, self.arelu_fused_head
    weight, bias = head_params(output_layer(self))
    if head.scale != 1.0:                            # (s x) W^T + s b = s (x W^T + b)
        hidden, bias = hidden * head.scale, None if bias is None else bias * head.scale
    reduction = "mean" if num_items_in_batch is None else "sum"
    loss = linear_alpha_relu_loss(hidden, weight, target.to(hidden.device), transform.alpha,
                                  transform.tau, bias=bias, reduction=reduction,
                                  chunk=self.arelu_chunk, softcap=head.softcap,
                                  label_smoothing=self.arelu_label_smoothing)
    if num_items_in_batch is not None:
        loss = over_items(loss, num_items_in_batch)
    return type(out)(loss=loss, **{k: v for k, v in out.items() if k not in ("loss", "logits")})
