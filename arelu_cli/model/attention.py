"""The transform of the attention scores: softmax, sparsemax / alpha-entmax, or alpha-ReLU.

Beyond the paper, whose Conclusion leaves alpha-ReLU attention open (an unnormalized
transform there may stop a model from learning; Zhang et al., 2021). ``[model] attention``
takes any registry name, per kind (encoder self-, decoder self-, cross-attention), for the
weights ``p = transform(s)`` of the scores ``s_j = q . k_j / sqrt(d_k)`` over visible keys:

* ``softmax`` (default): ``F.scaled_dot_product_attention``; weights formed only when recorded;
* ``sparsemax``, ``<a>-entmax[-k<k>|-bisect]``: the registry's normalizing transforms;
* ``<a>-relu`` with ``beta = 1 / (alpha - 1)``, by ``[model] attention_relu``:

  - ``raw``: ``p_j = [(alpha - 1) s_j - tau]_+^beta``, ``tau = [model] attention_tau``;
  - ``estimated``: the same with ``tau = tau_hat(n)``, :func:`arelu_cli.transforms.analytic_tau`
    for ``n`` visible keys and the head's initial score std (:func:`score_sigma`), so that
    the weights sum to about one at the start of training (rule :data:`TAU_RULE`);
  - ``renormalized``: ``r_j`` as for ``raw``, divided by ``sum_j r_j + eps``
    (``eps = [model] attention_eps``, default :data:`RENORM_EPS`).

An empty alpha-ReLU support gives the zero vector (the sub-layer adds only its output bias).
A masked key (padding, the future) gets exactly 0 and never changes the visible keys'
weights; a query with no visible key gets zero weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Literal, get_args

import torch
import torch.nn.functional as F

from arelu_cli import transforms as T
from arelu_cli.config import ModelConfig
from arelu_cli.util.errors import UserError
from arelu_cli.registry import get_transform
from arelu_cli.transforms.tau import analytic_tau

Kind = Literal["encoder", "decoder", "cross"]
KINDS: tuple[str, ...] = get_args(Kind)
Variant = Literal["raw", "estimated", "renormalized"]
VARIANTS: tuple[str, ...] = get_args(Variant)
TAU_RULE = "tail"
"""The rule of :func:`arelu_cli.transforms.analytic_tau` for ``tau_hat``: ``tail`` (``arelu
estimate-tau --rule tail``), not the Lemma's ``paper`` quadrature, which comes out low at
attention's few keys (its bias grows as ``d_vocab`` shrinks), leaving weights that sum to
more than one on average; ``tail`` is close to the mean exact threshold there and its
weights sum to one on average (tests/model/test_attention.py)."""
RENORM_EPS = 1e-2
"""The default ``eps`` of the renormalized variant (``[model] attention_eps``). A row whose
raw sum ``S`` is large against ``eps`` sums to about 1, one with ``S`` comparable to ``eps``
to ``S / (S + eps) < 1``: the weights fade out as the support empties instead of jumping to
one on its last key. The price of a small ``eps`` is a steep slope: at alpha 1.5 a lone key
``x`` above the threshold weighs ``x^2 / (x^2 + eps)``, of slope up to
``(3 sqrt(3) / 8) / sqrt(eps)`` (6.5 for 1e-2, 650 for 1e-6). The attention studies chose
1e-2 over 1e-6 (``results/toy-attention/``, ``results/multi30k-attention/``)."""


def score_sigma(d_model: int, q_fan_out: int, k_fan_out: int) -> float:
    """Std of a head's scores ``q . k / sqrt(d_k)`` at initialization: Lemma
    var_transformer's argument for a query and a key instead of a logit.

    ``q = W_q x``, ``k = W_k x'`` with ``x, x'`` layer-normalized (``sum x_j^2 = d_model``)
    and Xavier-uniform weights of variance ``2 / (d_model + fan_out)``, ``fan_out`` being
    the output size of the whole projection matrix (``3 d_model`` for a fused QKV), so
    ``Var q_i = 2 d_model / (d_model + q_fan_out)``, likewise ``k_i``, independent. The
    score is ``d_k`` such products over ``sqrt(d_k)``: its variance is
    ``Var q_i Var k_i``, whatever ``d_k``.
    """
    var_q = 2.0 * d_model / (d_model + q_fan_out)
    var_k = 2.0 * d_model / (d_model + k_fan_out)
    return math.sqrt(var_q * var_k)


@lru_cache(maxsize=None)
def estimated_tau(n: int, alpha: float, sigma: float) -> float:
    """``tau_hat(n)`` of the ``estimated`` variant (see the module docstring); 0 for ``n = 0``,
    a query with no visible key, whose weights are zero anyway. Each ``n`` is solved once
    per process (a root of a quadrature, some milliseconds)."""
    if n == 0:
        return 0.0
    if n == 1:
        return -1.0
    return analytic_tau(n, sigma=sigma, alpha=alpha, rule=TAU_RULE).tau


@lru_cache(maxsize=64)
def _tau_table(alpha: float, sigma: float, size: int, device: str) -> torch.Tensor:
    """``tau_hat(n)`` for ``n = 0 .. size`` as a float64 tensor on ``device``."""
    values = [estimated_tau(n, alpha, sigma) for n in range(size + 1)]
    return torch.tensor(values, dtype=torch.float64, device=device)


def tau_per_row(alpha: float, sigma: float, counts: torch.Tensor, keys: int,
                dtype: torch.dtype) -> torch.Tensor:
    """``tau_hat`` of each query from its number of visible keys ``counts`` (at most
    ``keys``); the table grows in powers of two so that few are ever built."""
    size = 1 << max(keys, 1).bit_length()
    return _tau_table(alpha, sigma, size, str(counts.device))[counts].to(dtype)


def _label(name: str, variant: str | None, tau: float, eps: float = RENORM_EPS) -> str:
    """See :attr:`AttentionTransform.label`; ``name`` is a valid lower-case registry name.
    A renormalized label always names its ``eps``."""
    if not name.endswith("-relu"):
        return name
    if variant == "estimated":
        return f"{name}/estimated"
    if variant == "renormalized":
        return f"{name}/{variant}/tau={tau:g}/eps={eps:g}"
    return f"{name}/{variant}/tau={tau:g}"


@dataclass(frozen=True)
class AttentionTransform:
    """The transform of one attention kind: ``weights(scores, visible)``."""

    name: str
    """Registry name: ``softmax``, ``sparsemax``, ``1.5-entmax``, ``1.5-relu``..."""
    family: Literal["softmax", "entmax", "relu"]
    alpha: float
    variant: Variant | None = None
    """alpha-ReLU only (see the module docstring)."""
    tau: float = 0.0
    """alpha-ReLU's constant threshold (``raw``, ``renormalized``)."""
    eps: float = RENORM_EPS
    """The constant added to the sum of ``renormalized`` weights."""
    sigma: float | None = None
    """The score std the ``estimated`` variant's threshold assumes."""
    _probs: Callable[[torch.Tensor], torch.Tensor] = field(repr=False, compare=False,
                                                           default=None)

    @property
    def is_softmax(self) -> bool:
        return self.family == "softmax"

    @property
    def label(self) -> str:
        """``1.5-relu/raw/tau=0``, ``1.5-relu/estimated``,
        ``1.5-relu/renormalized/tau=0/eps=0.01``, ``sparsemax``: for signatures and CSVs."""
        return _label(self.name, self.variant, self.tau, self.eps)

    def weights(self, scores: torch.Tensor, visible: torch.Tensor | None = None) -> torch.Tensor:
        """Weights (B, H, T, S) of scores (B, H, T, S) over the keys where ``visible``
        (broadcastable, bool) is True; exactly 0 elsewhere."""
        if self.family == "relu":
            return self._relu(scores, visible)
        if visible is None:
            return self._probs(scores)
        # A finite fill below any support: entmax squares scores, so -inf would give NaN.
        filled = torch.where(visible, scores, self._fill(scores, visible))
        return self._probs(filled).masked_fill(~visible, 0.0)

    def _fill(self, scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor | float:
        """A score that gets exactly zero weight: softmax's exp underflows at the dtype's
        minimum; alpha-entmax's threshold is at least ``(alpha-1) max s - 1``, so any
        score below ``max s - 1/(alpha-1)`` is outside the support and leaves it alone."""
        if self.family == "softmax":
            return torch.finfo(scores.dtype).min
        top = scores.detach().masked_fill(~visible, -math.inf).amax(-1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # no visible key
        return top - 1.0 / (self.alpha - 1.0) - 1.0

    def _relu(self, scores: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
        z, tau = scores, self.tau
        if self.variant == "estimated":
            keys = scores.shape[-1]
            if visible is None:
                tau = estimated_tau(keys, self.alpha, self.sigma)
            else:  # [(a-1) s - tau_n]_+ = [(a-1)(s - tau_n/(a-1)) - 0]_+, per row
                counts = visible.sum(-1, keepdim=True)
                z, tau = scores - tau_per_row(self.alpha, self.sigma, counts, keys,
                                              scores.dtype) / (self.alpha - 1.0), 0.0
        if visible is not None:
            z = z.masked_fill(~visible, torch.finfo(z.dtype).min)
        probs = T.alpha_relu(z, self.alpha, tau)
        if visible is not None:
            probs = probs.masked_fill(~visible, 0.0)
        if self.variant == "renormalized":
            probs = probs / (probs.sum(-1, keepdim=True) + self.eps)
        return probs


def attention_transform(name: str, variant: Variant = "raw", tau: float = 0.0,
                        sigma: float | None = None,
                        eps: float = RENORM_EPS) -> AttentionTransform:
    """An :class:`AttentionTransform` by registry name; ``variant``, ``tau``, ``sigma`` and
    ``eps`` matter for alpha-ReLU only (``sigma`` for ``estimated``, ``eps`` for
    ``renormalized``)."""
    t = get_transform(name)
    if t.family != "relu":
        return AttentionTransform(t.name, t.family, t.alpha, _probs=t.probs)
    if variant not in VARIANTS:
        raise UserError(f"[model] attention_relu must be one of {', '.join(VARIANTS)}, "
                        f"got {variant!r}")
    if not math.isfinite(tau):
        raise UserError(f"[model] attention_tau must be a finite number, got {tau}")
    if variant == "estimated" and tau != 0.0:
        raise UserError("[model] attention_tau is the constant tau of the raw and renormalized "
                        "variants; the estimated variant computes its own: leave it at 0")
    if variant == "estimated" and not (sigma is not None and sigma > 0):
        raise UserError("the estimated alpha-ReLU attention needs the score std sigma > 0")
    if not (math.isfinite(eps) and eps > 0):
        raise UserError(f"[model] attention_eps must be a finite number > 0, got {eps}")
    if variant != "renormalized" and eps != RENORM_EPS:
        raise UserError("[model] attention_eps is the constant added to the sum of the "
                        "renormalized variant: set attention_relu = \"renormalized\" or "
                        "remove it")
    return AttentionTransform(t.name, "relu", t.alpha, variant, float(tau), float(eps),
                              sigma if variant == "estimated" else None)


def kind_names(cfg: ModelConfig) -> dict[str, str]:
    """The transform name of each kind: its own key, else ``[model] attention``; an unknown
    name is a UserError naming the key."""
    names = {}
    for kind in KINDS:
        key = f"attention_{kind}" if getattr(cfg, f"attention_{kind}") else "attention"
        names[kind] = getattr(cfg, key).strip().lower()
        try:
            get_transform(names[kind])
        except ValueError as err:
            raise UserError(f"[model] {key}: {err}") from None
    return names


def _uses_relu(cfg: ModelConfig) -> bool:
    return any(name.endswith("-relu") for name in kind_names(cfg).values())


def for_kind(cfg: ModelConfig, kind: Kind, sigma: float) -> AttentionTransform:
    """The transform of attention ``kind`` of a model, ``sigma`` its score std at
    initialization (:func:`score_sigma` of its projections)."""
    if not _uses_relu(cfg) and (cfg.attention_relu != "raw" or cfg.attention_tau != 0.0
                                or cfg.attention_eps != RENORM_EPS):
        raise UserError("[model] attention_relu, attention_tau and attention_eps apply to "
                        "alpha-ReLU attention (<a>-relu) only; set one of the attention keys "
                        "to e.g. 1.5-relu or remove them")
    return attention_transform(kind_names(cfg)[kind], cfg.attention_relu, cfg.attention_tau,
                               sigma, cfg.attention_eps)


def describe(cfg: ModelConfig) -> str | None:
    """The attention choice for a run's signature: None when every kind is softmax (so
    the signatures of earlier runs stay as they were), one label when all kinds agree,
    else ``encoder=...;decoder=...;cross=...``."""
    names = kind_names(cfg)
    if all(name == "softmax" for name in names.values()):
        return None
    labels = {kind: _label(name, cfg.attention_relu, cfg.attention_tau, cfg.attention_eps)
              for kind, name in names.items()}
    if len(set(labels.values())) == 1:
        return labels["encoder"]
    return ";".join(f"{kind}={label}" for kind, label in labels.items())


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> torch.Tensor:
    """Scaled dot-product attention. On CPU in float32 even under bf16 autocast: the CPU
    flash-attention backward is much slower in bf16 than in float32."""
    if q.device.type != "cpu" or q.dtype == torch.float32:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    with torch.autocast("cpu", enabled=False):
        y = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kwargs)
    return y.to(q.dtype)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, transform: AttentionTransform, *,
           visible: torch.Tensor | None = None, causal: bool = False, dropout_p: float = 0.0,
           need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention of queries (B, H, T, d_k) over keys and values (B, H, S, d_k): the output
    (B, H, T, d_k) and, when ``need_weights`` or not softmax, the weights (B, H, T, S).

    ``visible`` (B, 1, 1, S) is True at keys that may be attended; ``causal`` also hides
    the keys after each query (T = S). Dropout acts on the weights, as in the Transformer.
    """
    if transform.is_softmax and not need_weights:
        return _sdpa(q, k, v, attn_mask=visible, is_causal=causal, dropout_p=dropout_p), None
    if causal:
        t, s = q.shape[-2], k.shape[-2]
        future = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)  # (T, S)
        visible = future if visible is None else visible & future
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, H, T, S)
    if scores.dtype in (torch.float16, torch.bfloat16):  # thresholds and sums in float32
        scores = scores.float()
    probs = transform.weights(scores, visible)
    mixed = F.dropout(probs, dropout_p, training=True) if dropout_p > 0.0 else probs
    return mixed.to(v.dtype) @ v, probs
