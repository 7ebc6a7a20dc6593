"""Next-token selection for open-ended generation: one decoding step's logits -> tokens.

The paper's motivation (introduction, after Holtzman et al. 2020): softmax puts mass on every
token, so sampling is truncated with top-k or top-p, at the cost of a sort; alpha-ReLU is
sparse by construction, truncated already. This module is the one owner of what a sampler
draws from, for ``arelu generate`` and for ``model.generate`` of :mod:`arelu_cli.hf` alike:

* **the transform's distribution** ``p`` of a row of logits ``z`` (:func:`log_probs`):
  ``softmax(z)``; sparsemax / alpha-entmax their own sparse ``p``; alpha-ReLU
  ``[(alpha - 1) z - (tau + tau_shift)]_+ ^ (1 / (alpha - 1))`` divided by its sum on its
  support;
* **the empty-support policy**: an alpha-ReLU row that is all zero (every logit at or below
  ``(tau + tau_shift) / (alpha - 1)``) is the arg-max logit's token with probability 1
  (:func:`empty_support` says which rows);
* **the temperature rule**: ``p_T = p ^ (1 / T)`` divided by its sum, i.e.
  ``softmax(log p / T)``, for every transform. The support never changes with ``T``; ``T = 1``
  is ``p``; as ``T`` falls the top probability never falls and the entropy never rises;
  ``T -> 0`` is the arg-max (greedy), ``T -> inf`` uniform over the support. For softmax it
  is the usual ``softmax(z / T)``; for alpha-ReLU it raises the bracket to
  ``1 / ((alpha - 1) T)`` (dividing the logits instead would let *more* tokens pass the fixed
  threshold as ``T`` falls, a flatter distribution);
* **top-k / top-p** truncate ``p_T`` (top-k first, then the nucleus of what is left, both
  renormalized), for every transform, as ``transformers``' warpers do after its temperature.

:func:`sampling_probs` is that distribution, :func:`next_tokens` draws from it; ``greedy``
is the arg-max logit and takes no sampling option; ``tau_shift`` on any transform but
alpha-ReLU is a ValueError.

Sampling is an exponential race: ``argmax_i log(U_i) / w_i`` with ``U_i ~ U[0, 1)`` picks
``i`` with probability ``w_i / sum_j w_j`` without normalizing ``w`` and never picks a zero
weight (``U_i = 0``, probability 2^-24 in float32, biases by about 6e-8). alpha-ReLU sampling
is thus its elementwise weights and one race: no sort, no sum.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from arelu_cli.registry import OutputTransform

METHODS = ("sample", "greedy")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_NUMBER = r"[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?"
_LABEL = re.compile(rf"greedy|sample(?:-top_k(?P<k>[0-9]+))?(?:-top_p(?P<p>{_NUMBER}))?"
                    rf"(?:-T(?P<t>{_NUMBER}))?(?:-tau(?P<tau>[+-]{_NUMBER}))?")
"""What :meth:`Decoding.label` writes."""


@dataclass(frozen=True)
class Decoding:
    """How the next token is chosen from one step's logits (module docstring)."""

    method: Literal["sample", "greedy"] = "sample"
    """``sample``: draw from :func:`sampling_probs`; ``greedy``: the arg-max logit."""
    top_k: int | None = None
    """Sample among the ``top_k`` most likely tokens of ``p_T`` (None: all)."""
    top_p: float | None = None
    """Nucleus sampling on ``p_T`` (after top-k), in (0, 1] (1 or None: no truncation)."""
    temperature: float = 1.0
    """``p_T = p ^ (1 / T)`` over its sum, for every transform (module docstring); > 0."""
    tau_shift: float = 0.0
    """alpha-ReLU only: added to its threshold tau at decode time (> 0: sparser)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"decoding method must be one of {', '.join(METHODS)}, "
                             f"got {self.method!r}")
        if self.top_k is not None and not (_is_number(self.top_k)
                                           and isinstance(self.top_k, int) and self.top_k >= 1):
            raise ValueError(f"top-k must be a whole number of at least 1, got {self.top_k!r}")
        if self.top_p is not None and not (_is_number(self.top_p) and 0.0 < self.top_p <= 1.0):
            raise ValueError(f"top-p must lie in (0, 1] (1: no truncation), got {self.top_p!r}")
        if not (_is_number(self.temperature) and math.isfinite(self.temperature)
                and self.temperature > 0):
            raise ValueError(f"temperature must be a positive number, got {self.temperature!r}")
        if not (_is_number(self.tau_shift) and math.isfinite(self.tau_shift)):
            raise ValueError(f"tau shift must be a finite number, got {self.tau_shift!r}")
        if self.method == "greedy" and self._sampling_options():
            raise ValueError(f"greedy decoding takes the arg-max and no "
                             f"{', '.join(self._sampling_options())}: drop them or sample")

    def _sampling_options(self) -> list[str]:
        given = [("top-k", self.top_k is not None), ("top-p", self.top_p is not None),
                 ("temperature", self.temperature != 1.0), ("tau shift", self.tau_shift != 0)]
        return [name for name, on in given if on]

    def label(self) -> str:
        """A name for CSVs: ``greedy``, ``sample``, ``sample-top_p0.9``, ``sample-tau+0.1``,
        ``sample-top_k50-T0.8``."""
        if self.method == "greedy":
            return "greedy"
        parts = ["sample"]
        if self.top_k is not None:
            parts.append(f"top_k{self.top_k}")
        if self.top_p is not None:
            parts.append(f"top_p{self.top_p:g}")
        if self.temperature != 1.0:
            parts.append(f"T{self.temperature:g}")
        if self.tau_shift != 0:
            parts.append(f"tau{self.tau_shift:+g}")
        return "-".join(parts)

    @classmethod
    def from_label(cls, label: str) -> Decoding:
        """The decoding that :meth:`label` names (``greedy``, ``sample-top_p0.9``,
        ``sample-top_k50-T0.8``, ``sample-tau+0.1``); a ValueError for any other text,
        including one that names a decoding another way than :meth:`label` writes it."""
        match = _LABEL.fullmatch(label)
        if match is None:
            raise ValueError(f"{label!r} is not a decoding; write greedy, sample, "
                             "sample-top_p<P>, sample-top_k<K>, sample-T<T> or sample-tau<+S>, "
                             "e.g. sample-top_p0.9")
        found = cls("greedy") if label == "greedy" else cls(
            "sample", int(match["k"]) if match["k"] else None,
            float(match["p"]) if match["p"] else None,
            float(match["t"]) if match["t"] else 1.0,
            float(match["tau"]) if match["tau"] else 0.0)
        if found.label() != label:
            raise ValueError(f"write the decoding {label!r} as {found.label()!r}")
        return found

    def check(self, transform: OutputTransform) -> Decoding:
        """This decoding if it applies to ``transform``, else a ValueError saying why."""
        if self.tau_shift != 0 and transform.family != "relu":
            raise ValueError(f"a tau shift applies only to alpha-ReLU, not {transform.name}: "
                             "drop it")
        return self


def _check_logits(logits: torch.Tensor) -> None:
    if not torch.is_floating_point(logits) or logits.dim() != 2 or logits.shape[1] < 1:
        raise ValueError(f"logits must be a floating-point (B, V) tensor, got "
                         f"{tuple(logits.shape)} {logits.dtype}")


def _refuse_nan(values: torch.Tensor) -> None:
    if bool(torch.isnan(values).any()):
        raise ValueError("the logits hold NaN (a model whose weights are not finite?): "
                         "check the checkpoint")


def _float(logits: torch.Tensor) -> torch.Tensor:
    return logits if logits.dtype == torch.float64 else logits.float()


def _relu_threshold(transform: OutputTransform, shift: float) -> float:
    """``c = (tau + shift) / (alpha - 1)``: alpha-ReLU's support is ``z > c``."""
    return (transform.tau + shift) / (transform.alpha - 1.0)


def _one_hot(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like).scatter_(1, index.unsqueeze(1), 1.0)


def _power(weights: torch.Tensor, exponent: float) -> torch.Tensor:
    """``weights ** exponent`` in place (a square or nothing where that is exact)."""
    if exponent == 1.0:
        return weights
    return weights.square_() if exponent == 2.0 else weights.pow_(exponent)


def _relu_weights(z: torch.Tensor, transform: OutputTransform, shift: float,
                  temperature: float, scaled: bool = True) -> torch.Tensor:
    """``[z - c]_+ ^ (1 / ((alpha - 1) T))`` (:func:`_relu_threshold`): ``p_T`` of alpha-ReLU
    up to a positive factor per row, which neither the race nor normalizing sees (the
    constant ``(alpha - 1) ^ (1 / (alpha - 1))`` dropped). ``scaled``: the bracket divided by
    its row maximum first, so that the power neither overflows nor underflows at the top,
    and an empty row is the arg-max logit's one-hot (the empty-support policy); unscaled,
    an empty row stays all zero (the race's fallback takes the arg-max)."""
    t = torch.sub(z, _relu_threshold(transform, shift)).clamp_min_(0.0)
    if scaled:
        top = t.amax(-1, keepdim=True)
        t = t.div_(torch.where(top > 0, top, torch.ones_like(top)))
        if bool((top == 0).any()):
            t = torch.where(top > 0, t, _one_hot(z.argmax(-1), z))
    return _power(t, 1.0 / ((transform.alpha - 1.0) * temperature))


def _weights(z: torch.Tensor, transform: OutputTransform, decoding: Decoding,
             scaled: bool = True) -> torch.Tensor:
    """Non-negative ``(B, V)`` weights proportional to ``p_T`` of each row of ``z`` (module
    docstring), before top-k/top-p (an empty alpha-ReLU row: :func:`_relu_weights`)."""
    t = decoding.temperature
    if transform.family == "relu":
        return _relu_weights(z, transform, decoding.tau_shift, t, scaled)
    if transform.family == "entmax":
        _refuse_nan(z.amax(-1))  # entmax's threshold search would hide NaN
        p = transform.probs(z).to(z.dtype)
        return p if t == 1.0 else _power(p / p.amax(-1, keepdim=True), 1.0 / t)
    return torch.sub(z, z.amax(-1, keepdim=True)).div_(t).exp_()


def _truncated(weights: torch.Tensor, decoding: Decoding
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``weights`` after top-k and top-p: ``(weights (B, K), indices (B, K))`` of the kept
    candidates, best first (weights 0 outside the nucleus), or ``(weights, None)`` without
    truncation. Sampling and :func:`sampling_probs` both use it, so both keep the same
    tokens to the last bit."""
    vocab = weights.shape[1]
    top_k = decoding.top_k if decoding.top_k is not None and decoding.top_k < vocab else None
    top_p = decoding.top_p if decoding.top_p is not None and decoding.top_p < 1.0 else None
    if top_k is None and top_p is None:
        return weights, None
    if top_k is not None:
        values, indices = weights.topk(top_k, dim=-1)                # best first
    else:
        values, indices = weights.sort(dim=-1, descending=True, stable=True)
    if top_p is None:
        return values, indices
    probs = values / values.sum(-1, keepdim=True)
    before = probs.cumsum(-1) - probs                                # mass of the better tokens
    return values.masked_fill(before >= top_p, 0.0), indices


def _normalized(weights: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """``weights`` divided by their row sums; rows summing to 0 become ``e_fallback``."""
    sums = weights.sum(-1, keepdim=True)
    empty = sums == 0
    probs = weights / torch.where(empty, torch.ones_like(sums), sums)
    return torch.where(empty, _one_hot(fallback, weights), probs)


def log_probs(logits: torch.Tensor, transform: OutputTransform,
              tau_shift: float = 0.0) -> torch.Tensor:
    """``log p`` ``(B, V)`` of the transform's distribution at ``T = 1`` (module docstring):
    ``-inf`` off the support, an empty alpha-ReLU support the arg-max logit's token (log 0
    there), float32 (float64 for float64 logits). ``softmax(log_probs / T)`` is ``p_T``, so
    a sampler that divides these by its temperature (``transformers``' temperature warper)
    applies the temperature rule exactly. NaN logits raise ValueError."""
    _check_logits(logits)
    Decoding(tau_shift=tau_shift).check(transform)
    _refuse_nan(logits)
    z = _float(logits)
    if transform.family == "softmax":
        return torch.log_softmax(z, dim=-1)
    if transform.family == "entmax":
        return transform.probs(z).to(z.dtype).log()
    bracket = z - _relu_threshold(transform, tau_shift)
    inside = bracket > 0
    # log [z - c]_+ ^ e over its sum, in logs: no power to overflow.
    scores = torch.log_softmax(torch.where(inside, bracket.log() / (transform.alpha - 1.0),
                                           -math.inf), dim=-1)
    empty = ~inside.any(-1, keepdim=True)
    if bool(empty.any()):
        best = torch.full_like(z, -math.inf).scatter_(1, z.argmax(-1, keepdim=True), 0.0)
        scores = torch.where(empty, best, scores)
    return scores


def sampling_probs(logits: torch.Tensor, transform: OutputTransform,
                   decoding: Decoding = Decoding()) -> torch.Tensor:
    """The distribution ``(B, V)`` that :func:`next_tokens` samples from, for each row of
    ``logits (B, V)`` (module docstring); float32 (float64 for float64 logits), rows sum
    to 1, exact zeros outside the support. NaN logits raise ValueError."""
    _check_logits(logits)
    decoding.check(transform)
    _refuse_nan(logits)
    z = _float(logits)
    if decoding.method == "greedy":
        return _one_hot(z.argmax(-1), z)
    weights, indices = _truncated(_weights(z, transform, decoding), decoding)
    if indices is not None:
        weights = torch.zeros_like(z).scatter_(1, indices, weights)
    return _normalized(weights, z.argmax(-1))


def empty_support(logits: torch.Tensor, transform: OutputTransform,
                  decoding: Decoding = Decoding()) -> torch.Tensor:
    """``(B,)`` bool: the rows whose alpha-ReLU support is empty, where sampling takes the
    arg-max token (all False for the other transforms, whose support never is)."""
    _check_logits(logits)
    decoding.check(transform)
    if transform.family != "relu" or decoding.method == "greedy":
        return torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
    return _float(logits).amax(-1) - _relu_threshold(transform, decoding.tau_shift) <= 0


def race(weights: torch.Tensor, generator: torch.Generator | None = None,
         fallback: Callable[[], torch.Tensor] | None = None) -> torch.Tensor:
    """One index per row of non-negative ``weights (B, V)``, drawn with probability
    ``w_i / sum_j w_j`` by an exponential race (module docstring), without normalizing;
    a weight 0 never wins. A row where nothing won (all weights 0, or every positive one
    drew ``U = 0``) takes ``fallback()`` (default: its largest weight); NaN raises."""
    scores = torch.rand(weights.shape, generator=generator, device=weights.device,
                        dtype=weights.dtype).log_().div_(weights)
    best, index = scores.max(-1)
    if not bool(torch.isfinite(best).all()):  # one synchronization on the common path
        _refuse_nan(best)
        lost = best == -math.inf
        index = torch.where(lost, fallback() if fallback else weights.argmax(-1), index)
    return index


def next_tokens(logits: torch.Tensor, transform: OutputTransform,
                decoding: Decoding = Decoding(),
                generator: torch.Generator | None = None) -> torch.Tensor:
    """The next token ``(B,)`` of each row of ``logits (B, V)``: a draw from
    :func:`sampling_probs` (reproducible for a seeded ``generator`` on the logits' device),
    or the arg-max for greedy. Never a token of probability 0 under :func:`sampling_probs`;
    NaN logits raise ValueError."""
    _check_logits(logits)
    decoding.check(transform)
    if decoding.method == "greedy":
        best, index = logits.max(-1)
        _refuse_nan(best)
        return index
    z = _float(logits)
    # alpha-ReLU untruncated with a power of at most 2 (1.5-ReLU at T = 1: the bracket
    # squared): no row maximum needed, an empty row falls back to the arg-max in the race.
    plain = (transform.family == "relu" and decoding.top_k is None and decoding.top_p is None
             and (transform.alpha - 1.0) * decoding.temperature >= 0.5)
    weights, indices = _truncated(_weights(z, transform, decoding, scaled=not plain), decoding)
    if indices is None:
        return race(weights, generator, fallback=lambda: z.argmax(-1))
    # Candidates are best first: a row where nothing won takes its first.
    chosen = race(weights, generator, fallback=lambda: torch.zeros_like(indices[:, 0]))
    return indices.gather(1, chosen.unsqueeze(1)).squeeze(1)
