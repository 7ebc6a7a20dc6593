"""The fused output layer's view of a causal LM's head, derived from the model itself:
its output embeddings (``get_output_embeddings()``, a ``Linear`` or a PEFT LoRA layer
around one), its config, and one probe forward (:func:`_probe`).

A causal LM can use the fused loss when its logits are ``s * (x W^T + b)`` for the input
``x`` of its head (the last hidden states, after any transform the head module applies
first), the head's weight ``W`` and bias ``b`` and a constant ``s`` (1 for most families;
Cohere's ``logit_scale``, Granite's ``1 / logits_scaling``): :func:`fused_head` runs the
model once on a few tokens, compares its logits with the head's product and finds ``s``
among the config's numbers, so that the fused loss of ``s x`` (and ``s b``), exact since
``(s x) W^T = s (x W^T)``, equals the unfused loss. Logits soft-capped as ``c tanh((x W^T +
b) / c)``, ``c`` a config value (Gemma 2's ``final_logit_softcapping``), are covered too: the
fused loss applies the cap itself (its ``softcap`` argument). Anything else is refused with
one line naming what the family does to its logits: a scale that no config value explains, a
different shape, an auxiliary loss added to the LM loss (a router's, with
``output_router_logits``), a LoRA variant or dropout on the head, a head sharded on its own
by FSDP2 (under ``fully_shard`` of the root module the head's weight is gathered for the
root's forward, which the fused loss runs in).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from arelu_cli.hf.transform import output_layer


@dataclass(frozen=True)
class FusedHead:
    """How a model's logits follow from its head: ``scale * (h W^T + b)``, or with a
    ``softcap`` c, ``c tanh((h W^T + b) / c)``."""

    scale: float = 1.0
    source: str = ""
    """The config value the scale is, e.g. ``logit_scale`` or ``1 / logits_scaling``."""
    softcap: float | None = None
    cap_source: str = ""
    """The config value the cap is, e.g. ``final_logit_softcapping``."""

    def describe(self) -> str:
        if self.softcap is not None:
            return f"{self.cap_source} * tanh(lm_head(x) / {self.cap_source})"
        return "lm_head(x)" if not self.source else f"lm_head(x) * {self.source}"


def _lora_deltas(head: nn.Module) -> list[torch.Tensor]:
    """The active LoRA adapters' weight updates ``scaling * B A`` of a PEFT layer (none
    when merged or disabled), differentiable in ``A`` and ``B``."""
    if getattr(head, "merged", False) or getattr(head, "disable_adapters", False):
        return []
    return [head.get_delta_weight(name) for name in head.active_adapters
            if name in head.lora_A]


def head_params(head: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The head's effective ``(weight (V, d), bias (V,) or None)``: a ``Linear``'s own, or
    a PEFT LoRA layer's base weight plus its active adapters' updates. A ValueError where
    the weight is a shard (:func:`check_whole`)."""
    base = getattr(head, "base_layer", head)
    weight = check_whole(base.weight)
    for delta in _lora_deltas(head) if base is not head else ():
        weight = weight + delta
    return weight, base.bias


def check_whole(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` if it is the whole tensor, a ValueError if it is a ``DTensor`` shard: the
    head was sharded on its own (FSDP2 ``fully_shard(model.lm_head)``), so its weight is
    gathered only inside its own forward, which the fused loss does not run."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:                              # a torch without distributed tensors
        return weight
    if isinstance(weight, DTensor):
        raise ValueError("the LM head's weight is a DTensor shard (fully_shard(lm_head) on its "
                         "own): shard the head with the root module instead (fully_shard each "
                         "decoder layer, then fully_shard(model)), or use fused=False")
    return weight


def _check_lora(model: nn.Module, head: nn.Module) -> None:
    if getattr(head, "base_layer", head) is head:
        return
    name = type(model).__name__
    variants = [v for v in getattr(head, "lora_variant", {}).values() if v is not None]
    if variants or getattr(head, "fan_in_fan_out", False) or not hasattr(head, "lora_A"):
        raise ValueError(f"{name}'s LM head is a {type(head).__name__} adapter that is not "
                         "plain LoRA (DoRA or another variant); use fused=False")
    dropout = [float(getattr(d, "p", 0.0)) for d in head.lora_dropout.values()]
    if any(dropout):
        raise ValueError(f"{name}'s LoRA adapter on the LM head has lora_dropout="
                         f"{max(dropout)}, which drops its input apart from the base "
                         "weight's; set lora_dropout=0 for lm_head or use fused=False")
    if any(getattr(head, "lora_bias", {}).values()):
        raise ValueError(f"{name}'s LoRA adapter on the LM head has a bias (lora_bias=True); "
                         "use fused=False")


def _numbers(config) -> dict[str, float]:
    """The config's nonzero finite numbers (top level) by name, real-valued ones first (a
    scale stored as a whole number, e.g. ``logits_scaling = 16``, is found after them)."""
    items = [(k, v) for k, v in config.to_dict().items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)
             and v != 0 and math.isfinite(v)]
    return {k: float(v) for k, v in sorted(items, key=lambda kv: isinstance(kv[1], int))}


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    eps = torch.finfo(dtype).eps
    size = float(b.abs().max()) if b.numel() else 0.0
    return bool(torch.allclose(a, b, rtol=16 * eps, atol=16 * eps * max(size, 1.0)))


# The probe's largest logit: a soft-cap c tanh(z / c) with c in the tens saturates there,
# however close to z it is for a model's small logits at bf16's precision.
PROBE_LOGIT = 1e4


@contextmanager
def swapped_forward(module: nn.Module, forward):
    """``module``'s forward replaced by ``forward`` (its hooks kept) for a ``with`` block."""
    own = module.__dict__.get("forward")
    module.forward = forward
    try:
        yield
    finally:
        if own is None:
            del module.forward
        else:
            module.forward = own


@torch.no_grad()
def _probe(model: nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The model's logits on a few tokens in eval mode, its head's forward swapped for
    ``k (x W^T + b)`` of the head's input ``x``, and that product of each call of the head;
    ``k`` makes the largest :data:`PROBE_LOGIT`, so that what the model does to its logits
    after the head shows."""
    head = output_layer(model)
    weight, bias = head_params(head)
    seen = []

    def product(x, *args, **kwargs):
        z = F.linear(x.to(weight.dtype), weight, bias)
        seen.append(z * (PROBE_LOGIT / max(float(z.abs().max()), 1e-30)))
        return seen[-1]

    ids = (torch.arange(1, 7, device=weight.device) * 7 % weight.shape[0])[None]   # (1, 6)
    was_training = model.training
    model.eval()
    try:
        with swapped_forward(head, product):
            logits = type(model).forward(model, input_ids=ids).logits
    finally:
        model.train(was_training)
    return logits, seen


def _softcap(model, logits, z, dtype) -> FusedHead | None:
    """The head whose cap explains ``logits = c tanh(z / c)``, ``c`` a config value."""
    for name, cap in _numbers(model.config).items():
        if cap > 0 and _close(logits, cap * torch.tanh(z / cap), dtype):
            return FusedHead(softcap=cap, cap_source=name)
    return None


def _scale(model, logits, z, dtype) -> FusedHead | None:
    """The head whose scale explains ``logits = s z``, ``s`` a config value or its inverse."""
    if _close(logits, z, dtype):
        return FusedHead()
    found = float((logits * z).sum() / (z * z).sum())
    for name, value in _numbers(model.config).items():
        for scale, source in ((value, name), (1.0 / value, f"1 / {name}")):
            if abs(found - scale) <= 1e-3 * abs(scale) and _close(logits, scale * z, dtype):
                return FusedHead(scale, source)
    return None


def fused_head(model: nn.Module) -> FusedHead:
    """How ``model``'s logits follow from its head (module docstring), or a one-line
    ValueError saying why the fused loss would not equal the unfused one."""
    name = type(model).__name__
    if model.config.is_encoder_decoder:
        raise ValueError(f"fused=True is for causal LMs; {name} is an encoder-decoder model: "
                         "use fused=False")
    head = output_layer(model)
    check_whole(getattr(head, "base_layer", head).weight)
    _check_lora(model, head)
    if getattr(model.config, "output_router_logits", False):
        raise ValueError(f"{name} adds its router's load-balancing loss to the LM loss "
                         "(output_router_logits=True), which the fused loss does not compute; "
                         "set config.output_router_logits=False or use fused=False")
    try:
        logits, products = _probe(model)
    except (TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise ValueError(f"{name}: a forward with its LM head replaced failed ("
                         f"{type(err).__name__}: {str(err).splitlines()[0][:120]}); use "
                         "fused=False") from None
    if len(products) != 1:
        raise ValueError(f"{name}'s forward calls its LM head {len(products)} times, not "
                         "once; use fused=False")
    dtype = min((logits.dtype, products[0].dtype), key=lambda d: torch.finfo(d).bits)
    logits, z = logits.double(), products[0].double()
    if logits.shape != z.shape:
        raise ValueError(f"{name}'s logits have shape {tuple(logits.shape)}, not the head's "
                         f"{tuple(z.shape)}; use fused=False")
    found = _scale(model, logits, z, dtype) or _softcap(model, logits, z, dtype)
    if found is not None:
        return found
    raise ValueError(f"{name}'s logits are not a constant times its LM head's output "
                     "(it changes them after the head); use fused=False")
