"""``use_transform(model, "1.5-relu")``: a Hugging Face model trains and generates with an
arelu output transform, in one call.

* training: a causal LM's ``model.loss_function`` becomes the transform's loss (the
  forward calls it with HF's label shifting, ``ignore_index=-100`` and the Trainer's
  ``num_items_in_batch``); a seq2seq model's forward, which computes cross-entropy itself,
  is wrapped to compute the transform's loss instead; ``fused=True`` (alpha-ReLU, causal
  LMs whose logits are a constant times their head's output, or its soft-cap,
  :mod:`arelu_cli.hf.head`) computes it from the head's input and weight without the
  logits, label smoothing included. ``Trainer(model=model,
  ...)`` then needs nothing else; :func:`compute_loss_func` gives the same loss for
  ``Trainer(compute_loss_func=...)`` on an unchanged causal LM. ``label_smoothing`` smooths
  the transform's own target; a training forward without labels (what a Trainer with
  ``label_smoothing_factor`` > 0 runs before computing softmax cross-entropy itself) warns.
* generation: ``model.generate`` becomes :func:`arelu_cli.hf.generate.generate`
  (transformers' own for greedy search and sampling, with the transform's processor;
  arelu's beam search).
* saving: the choice is written to ``model.config.arelu`` (:data:`CONFIG_KEY`), so that
  ``save_pretrained`` keeps it; after ``from_pretrained``, ``use_transform(model)`` applies it
  again (transformers alone would train and generate the reloaded model with softmax).

Calling it again replaces the earlier choice.
"""

from __future__ import annotations

import inspect
from types import MethodType

from torch import nn

from arelu_cli.hf import forward
from arelu_cli.hf.generate import generate
from arelu_cli.hf.head import fused_head
from arelu_cli.hf.loss import loss_function, trainer_loss
from arelu_cli.hf.transform import check_tokenizer, output_layer, resolve
from arelu_cli.registry import OutputTransform

CONFIG_KEY = "arelu"
"""The ``model.config`` attribute holding the choice: ``{"transform", "tau", "fused",
"renormalize", "chunk", "label_smoothing"}``."""


def check_model(model) -> None:
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


def _unwrap(model):
    """The transformers model inside a PEFT wrapper (``PeftModel.get_base_model()``, the
    object whose forward computes the loss and that ``save_pretrained`` of a merged model
    writes), else ``model``."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def _check_label_smoothing(value: float) -> float:
    if not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"label_smoothing must be in [0, 1), got {value!r}")
    return float(value)


def _stored(model: nn.Module) -> dict:
    """The choice ``use_transform`` wrote to the model's config (a saved model's)."""
    stored = getattr(model.config, CONFIG_KEY, None)
    if not isinstance(stored, dict) or not isinstance(stored.get("transform"), str):
        raise ValueError(f"{type(model).__name__}'s config holds no arelu choice "
                         f"(config.{CONFIG_KEY}); name the transform: "
                         "use_transform(model, '1.5-relu')")
    return stored


def use_transform(model: nn.Module, name: str | None = None, *, tau: float | None = None,
                  fused: bool = False, renormalize: bool = False, tokenizer=None,
                  chunk: int | None = None, label_smoothing: float = 0.0) -> OutputTransform:
    """Train and generate ``model`` with the registry's transform ``name`` (``softmax``,
    ``sparsemax``, ``1.5-entmax``, ``1.5-relu``, ...; alpha-ReLU's ``tau`` defaults to the
    analytic estimate for the model's vocabulary, printed). ``fused``: the fused output
    layer (alpha-ReLU; causal LMs, :func:`arelu_cli.hf.head.fused_head` says which);
    ``chunk``: its tokens per chunk. ``renormalize``:
    generation divides alpha-ReLU by its sum per step. ``label_smoothing``: the training
    target ``(1 - eps) e_y + eps / V``. ``tokenizer``: checked against the vocabulary.
    Without ``name``: the choice stored in ``model.config.arelu`` by an earlier call (a
    model saved with ``save_pretrained`` and loaded again). Returns the transform; bad input
    raises ValueError/TypeError. A PEFT model (LoRA, ...) is changed inside: its wrapper's
    forward and generate run the inner model's."""
    model = _unwrap(model)
    check_model(model)
    if name is None:
        if tau is not None or fused or renormalize or chunk is not None or label_smoothing:
            raise ValueError("without a transform name use_transform applies the stored "
                             "choice as it is; name the transform to change its settings")
        s = _stored(model)
        return use_transform(model, s["transform"], tau=s.get("tau"),
                             fused=bool(s.get("fused")), renormalize=bool(s.get("renormalize")),
                             tokenizer=tokenizer, chunk=s.get("chunk"),
                             label_smoothing=s.get("label_smoothing") or 0.0)
    transform = resolve(model, name, tau)
    eps = _check_label_smoothing(label_smoothing)
    if tokenizer is not None:
        check_tokenizer(model, tokenizer)
    if fused and transform.family != "relu":
        raise ValueError(f"fused=True is alpha-ReLU's fused output layer; {transform.name} has "
                         "none: use an '<a>-relu' transform or fused=False")
    model.arelu_fused_head = fused_head(model) if fused else None
    model.arelu_transform, model.arelu_renormalize, model.arelu_chunk = transform, renormalize, chunk
    model.arelu_label_smoothing = eps
    model.__dict__.pop("forward", None)                                  # an earlier call's
    if model.config.is_encoder_decoder:
        model.forward = forward.bind(model, forward.seq2seq_forward)
        model.accepts_loss_kwargs = True       # the Trainer passes num_items_in_batch
    else:
        model.loss_function = loss_function(transform, eps)
        model.forward = forward.bind(model, forward.fused_causal_forward if fused
                                     else forward.causal_forward)
    model.generate = MethodType(generate, model)
    setattr(model.config, CONFIG_KEY, {
        "transform": transform.name, "tau": transform.tau if transform.family == "relu" else None,
        "fused": fused, "renormalize": renormalize, "chunk": chunk, "label_smoothing": eps})
    return transform


def compute_loss_func(model: nn.Module, name: str, *, tau: float | None = None,
                      label_smoothing: float = 0.0):
    """``Trainer(compute_loss_func=...)`` for an unchanged causal LM: the transform's loss of
    its shifted logits, ``num_items_in_batch`` honoured. Seq2seq models are refused: the
    Trainer drops the labels before the forward, whose decoder inputs would then come from
    somewhere else (BART's: the inputs shifted), so use :func:`use_transform` there."""
    model = _unwrap(model)
    check_model(model)
    if model.config.is_encoder_decoder:
        raise ValueError(f"{type(model).__name__} is a seq2seq model: with compute_loss_func "
                         "the Trainer drops the labels its decoder inputs come from; use "
                         "use_transform(model, ...) instead")
    return trainer_loss(resolve(model, name, tau), _check_label_smoothing(label_smoothing))
