"""An arelu output transform for a Hugging Face model: the name looked up in the registry,
alpha-ReLU's tau from the paper's analytic estimate (eq. tau_est, Appendix "Approximation
of tau") for the model's vocabulary and width when none is given, and the checks that
the model can take it (an LM head; a tokenizer that fits its vocabulary).
"""

from __future__ import annotations

import math
import sys

from torch import nn

from arelu_cli.registry import OutputTransform, get_transform
# The one import of the analytic tau in this package (re-point it here when it moves).
from arelu_cli.transforms.tau import analytic_tau


def output_layer(model: nn.Module) -> nn.Module:
    """The model's LM head (``get_output_embeddings()``): a ``Linear``, or an adapter layer
    around one (PEFT's LoRA: its ``base_layer``); a ValueError saying that it has none."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if not isinstance(getattr(head, "base_layer", head), nn.Linear):
        raise ValueError(f"{type(model).__name__} has no LM head (get_output_embeddings() is "
                         f"{type(head).__name__}); load it as a *ForCausalLM or "
                         "*ForConditionalGeneration model, e.g. AutoModelForCausalLM")
    return head


def head_shape(model: nn.Module) -> tuple[int, int]:
    """``(V, d)`` of the LM head's weight."""
    head = output_layer(model)
    return tuple(getattr(head, "base_layer", head).weight.shape)


def vocab_size(model: nn.Module) -> int:
    """Rows of the LM head: the size of the distribution the transform is applied to."""
    return head_shape(model)[0]


def check_tokenizer(model: nn.Module, tokenizer) -> None:
    """A ValueError when ``tokenizer`` has ids the model's LM head cannot score."""
    size, vocab = len(tokenizer), vocab_size(model)
    if size > vocab:
        raise ValueError(f"the tokenizer has {size} tokens but the model's LM head scores "
                         f"{vocab}; call model.resize_token_embeddings(len(tokenizer)) first")


def _finite(tau) -> float:
    try:
        value = float(tau)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"tau must be a finite number (alpha-ReLU's threshold), got {tau!r}")
    return value


def resolve(model: nn.Module, name: str, tau: float | None = None) -> OutputTransform:
    """The registry's transform ``name`` for ``model``; alpha-ReLU without ``tau`` gets the
    analytic tau for the model's vocabulary V and hidden size d (logit variance
    2 d / (d + V), the paper's untrained Transformer), printed to stderr."""
    if not isinstance(name, str):
        raise TypeError(f"the transform is a name such as '1.5-relu', got {type(name).__name__}")
    transform = get_transform(name, tau=0.0 if tau is None else _finite(tau))
    if transform.family != "relu":
        if tau is not None:
            raise ValueError(f"tau is alpha-ReLU's threshold; {transform.name} takes none")
        return transform
    if tau is not None:
        return transform
    width = head_shape(model)[1]
    estimate = analytic_tau(vocab_size(model), d_model=width, alpha=transform.alpha)
    print(f"arelu: {transform.name} with the analytic tau = {estimate.tau:.4f} (vocabulary "
          f"{estimate.d_vocab}, hidden size {width}); pass tau= to choose it", file=sys.stderr)
    return get_transform(name, tau=estimate.tau)
