"""``use_transform(model, "1.5-relu")``: a Hugging Face model trains and generates with an
arelu output transform, in one call.

* training: a causal LM's ``model.loss_function`` becomes the transform's loss (the
  forward calls it with HF's label shifting, ``ignore_index=-100`` and the Trainer's
  ``num_items_in_batch``); a seq2seq model's forward, which computes cross-entropy itself,
  is wrapped to compute the transform's loss instead; ``fused=True`` (alpha-ReLU, causal
  LMs of :data:`~arelu_cli.hf.forward.FUSED_MODEL_TYPES`) computes it from the last hidden
  states and the LM head's weight without the logits. ``Trainer(model=model, ...)`` then
  needs nothing else; :func:`compute_loss_func` gives the same loss for
  ``Trainer(compute_loss_func=...)`` on an unchanged model.
* generation: ``model.generate`` becomes :func:`arelu_cli.hf.generate.generate`.

Calling it again replaces the earlier choice.
"""

from __future__ import annotations

import inspect
from types import MethodType

from torch import nn

from arelu_cli.hf import forward
from arelu_cli.hf.generate import generate
from arelu_cli.hf.loss import loss_function, trainer_loss
from arelu_cli.hf.transform import check_tokenizer, output_layer, resolve
from arelu_cli.registry import OutputTransform


def _check_model(model) -> None:
    if not isinstance(model, nn.Module) or not hasattr(model, "config"):
        raise TypeError(f"expected a transformers model (PreTrainedModel), got "
                        f"{type(model).__name__}")
    output_layer(model)
    if model.config.is_encoder_decoder and not hasattr(model,
                                                       "prepare_decoder_input_ids_from_labels"):
        raise ValueError(f"{type(model).__name__} cannot build decoder inputs from labels "
                         "(no prepare_decoder_input_ids_from_labels); pass a seq2seq LM such "
                         "as BART, T5 or Marian")
    if not model.config.is_encoder_decoder and not _calls_loss_function(type(model)):
        raise ValueError(f"{type(model).__name__} computes its loss inside forward without "
                         "model.loss_function (and its own label convention); use_transform "
                         "supports causal LMs that call it (Llama, GPT-2, Mistral, Qwen, ...) "
                         "and encoder-decoder models")


def _calls_loss_function(cls) -> bool:
    """Whether the class's forward computes its loss through ``self.loss_function`` (what
    the causal LMs of transformers 5 do; a few, e.g. BartForCausalLM, use their own)."""
    try:
        return "self.loss_function" in inspect.getsource(cls.forward)
    except (OSError, TypeError):          # no source to read: trust the common case
        return True


def use_transform(model: nn.Module, name: str, *, tau: float | None = None,
                  fused: bool = False, renormalize: bool = False, tokenizer=None,
                  chunk: int | None = None) -> OutputTransform:
    """Train and generate ``model`` with the registry's transform ``name`` (``softmax``,
    ``sparsemax``, ``1.5-entmax``, ``1.5-relu``, ...; alpha-ReLU's ``tau`` defaults to the
    analytic estimate for the model's vocabulary, printed). ``fused``: the fused output
    layer (alpha-ReLU, GPT-2 / Llama); ``chunk``: its tokens per chunk. ``renormalize``:
    generation divides alpha-ReLU by its sum per step. ``tokenizer``: checked against the
    vocabulary. Returns the transform; bad input raises ValueError/TypeError."""
    _check_model(model)
    transform = resolve(model, name, tau)
    if tokenizer is not None:
        check_tokenizer(model, tokenizer)
    if fused and transform.family != "relu":
        raise ValueError(f"fused=True is alpha-ReLU's fused output layer; {transform.name} has "
                         "none: use an '<a>-relu' transform or fused=False")
    if fused:
        forward.check_fusable(model)
    model.arelu_transform, model.arelu_renormalize, model.arelu_chunk = transform, renormalize, chunk
    model.__dict__.pop("forward", None)                                  # an earlier call's
    if model.config.is_encoder_decoder:
        model.forward = forward.bind(model, forward.seq2seq_forward)
        model.accepts_loss_kwargs = True       # the Trainer passes num_items_in_batch
    else:
        model.loss_function = loss_function(transform)
        if fused:
            model.forward = forward.bind(model, forward.fused_causal_forward)
    model.generate = MethodType(generate, model)
    return transform


def compute_loss_func(model: nn.Module, name: str, *, tau: float | None = None):
    """``Trainer(compute_loss_func=...)`` for an unchanged ``model``: the transform's loss
    of its logits (shifted for a causal LM), ``num_items_in_batch`` honoured."""
    _check_model(model)
    return trainer_loss(resolve(model, name, tau), causal=not model.config.is_encoder_decoder)
