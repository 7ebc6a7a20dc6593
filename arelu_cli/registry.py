"""Output transforms by name: ``"1.5-relu"`` -> an :class:`OutputTransform`. Pure lookup.

Names:
  ``softmax``; ``sparsemax`` (= ``2-entmax``); ``<a>-entmax`` (exact sort for a = 1.5,
  sparsemax for a = 2, bisection otherwise); ``<a>-entmax-k<k>`` (partial sort over the
  top k, for a = 1.5 or 2); ``<a>-entmax-bisect``; ``<a>-relu`` (alpha-ReLU, ``tau=``).
  ``a`` lies in [1.05, 2] (``transforms.checks.check_alpha`` says why). The paper's five:
  softmax, sparsemax, 1.5-entmax, 1.5-entmax-k100, 1.5-relu. Bad names raise ValueError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Literal

import torch

from arelu_cli import transforms as T
from arelu_cli.transforms.checks import check_alpha, check_tau
from arelu_cli.transforms.top_scores import alpha_relu_top_log_scores, softmax_top_log_scores

PAPER_TRANSFORMS = ("softmax", "sparsemax", "1.5-entmax", "1.5-entmax-k100", "1.5-relu")
NAME_FORMS = ("softmax", "sparsemax", "<a>-relu", "<a>-entmax", "<a>-entmax-k<k>",
              "<a>-entmax-bisect")
_PATTERN = re.compile(r"^(?P<alpha>\d+(?:\.\d+)?)-(?P<kind>relu|entmax)"
                      r"(?:-(?:k(?P<k>\d+)|(?P<bisect>bisect)))?$")


@dataclass(frozen=True)
class OutputTransform:
    """A named output layer: its transform, its loss and its decoding scores.

    ``probs`` maps logits ``(..., V)`` to outputs; ``loss(logits, target, ignore_index=-100,
    reduction="mean", label_smoothing=0.0)`` has gradient ``probs - q``, with
    ``q = (1 - eps) e_y + eps / V`` the label-smoothed target (``e_y`` for ``eps = 0``);
    ``log_scores`` is ``log probs`` with ``-inf`` at zeros. ``normalized`` is False only for
    alpha-ReLU, whose output need not sum to one.
    """

    name: str
    family: Literal["softmax", "entmax", "relu"]
    alpha: float
    tau: float | None = None
    k: int | None = None
    method: Literal["dense", "sort", "bisect", "elementwise"] = "dense"
    half_logits: bool = False
    """Whether the loss reads bf16/fp16 logits as they are, with fp32 math and no fp32 copy
    of them (alpha-ReLU's kernels). Softmax's cross-entropy would compute its log-probabilities
    in bf16 and the entmax losses copy to fp32 anyway, so a trainer gives those fp32 logits."""
    _probs: Callable[[torch.Tensor], torch.Tensor] = field(repr=False, compare=False, default=None)
    _loss: Callable[..., torch.Tensor] = field(repr=False, compare=False, default=None)
    _log_scores: Callable[[torch.Tensor], torch.Tensor] = field(repr=False, compare=False,
                                                               default=None)
    _top_log_scores: Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]] | None = \
        field(repr=False, compare=False, default=None)

    @property
    def normalized(self) -> bool:
        return self.family != "relu"

    @property
    def sparse(self) -> bool:
        return self.family != "softmax"

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return self._probs(logits)

    def log_scores(self, logits: torch.Tensor) -> torch.Tensor:
        return self._log_scores(logits)

    @property
    def fused_top_k(self) -> bool:
        """Whether :meth:`top_log_scores` skips the full log-score matrix (alpha-ReLU and
        softmax, whose scores rank tokens by logit; entmax's need the threshold of the row)."""
        return self._top_log_scores is not None

    def top_log_scores(self, logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` best ``log_scores`` of each row of ``logits (..., V)`` and their
        indices, best first; alpha-ReLU's and softmax's come from the ``k`` largest logits,
        without the full score matrix (equal logits lower index first, NaN rows NaN:
        ``transforms.top_scores``), entmax's from ``log_scores(logits).topk(k)``."""
        if self._top_log_scores is None:
            return self.log_scores(logits).topk(k, dim=-1)
        return self._top_log_scores(logits, k)

    def loss_input(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` as :meth:`loss` should get them: as they are where the loss reads
        bf16/fp16 with fp32 math (:attr:`half_logits`), else in fp32 (a copy only of
        half-precision logits), so that no loss computes in 8 significant bits."""
        if self.half_logits or logits.dtype not in (torch.float16, torch.bfloat16):
            return logits
        return logits.float()

    def loss(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
             reduction: str = "mean", reuse_logits: bool = False,
             label_smoothing: float = 0.0) -> torch.Tensor:
        """The paired loss, to the target smoothed by ``label_smoothing`` (in [0, 1); 0: none);
        ``reuse_logits`` is honoured by alpha-ReLU and ignored otherwise."""
        if self.family == "relu":
            return self._loss(logits, target, ignore_index=ignore_index, reduction=reduction,
                              reuse_logits=reuse_logits, label_smoothing=label_smoothing)
        return self._loss(logits, target, ignore_index=ignore_index, reduction=reduction,
                          label_smoothing=label_smoothing)


def _bad_name(name: str, why: str) -> ValueError:
    return ValueError(f"unknown output transform {name!r} ({why}); valid names: "
                      f"{', '.join(NAME_FORMS)}, e.g. {', '.join(PAPER_TRANSFORMS)}")


def _softmax(name: str) -> OutputTransform:
    return OutputTransform(name, "softmax", 1.0, _probs=T.softmax, _loss=T.cross_entropy_loss,
                           _log_scores=partial(torch.log_softmax, dim=-1),
                           _top_log_scores=softmax_top_log_scores)


def _entmax(name: str, alpha: float, k: int | None, bisect: bool, n_iter: int) -> OutputTransform:
    def from_probs(probs):
        return OutputTransform(name, "entmax", alpha, k=k,
                               method="bisect" if bisect else "sort", _probs=probs,
                               _loss=loss, _log_scores=lambda z: T.log_probs(probs(z)))
    if bisect or alpha not in (1.5, 2.0):
        if k is not None:
            raise _bad_name(name, "partial sort -k<k> exists only for alpha 1.5 and 2; "
                                  "use <a>-entmax-bisect for other alphas")
        bisect = True
        loss = partial(T.entmax_bisect_loss, alpha=alpha, n_iter=n_iter)
        return from_probs(partial(T.entmax_bisect, alpha=alpha, n_iter=n_iter))
    if alpha == 2.0:
        loss = partial(T.sparsemax_loss, k=k)
        return from_probs(partial(T.sparsemax, k=k))
    loss = partial(T.entmax15_loss, k=k)
    return from_probs(partial(T.entmax15, k=k))


def _relu(name: str, alpha: float, tau: float) -> OutputTransform:
    return OutputTransform(name, "relu", alpha, tau=tau, method="elementwise", half_logits=True,
                           _probs=partial(T.alpha_relu, alpha=alpha, tau=tau),
                           _loss=partial(T.alpha_relu_loss, alpha=alpha, tau=tau),
                           _log_scores=partial(T.alpha_relu_log_scores, alpha=alpha, tau=tau),
                           _top_log_scores=partial(alpha_relu_top_log_scores, alpha=alpha,
                                                   tau=tau))


def get_transform(name: str, *, tau: float = 0.0, n_iter: int = 50) -> OutputTransform:
    """Look up an output transform by name (see the module docstring for the forms).

    ``tau`` is alpha-ReLU's threshold (the analytic estimate: ``transforms.analytic_tau``), a
    finite number; ``n_iter`` the bisection steps of ``-bisect``. Unknown names and alpha
    outside [1.05, 2] raise a ValueError listing what is valid.
    """
    key = name.strip().lower()
    if key == "softmax":
        return _softmax(key)
    if key == "sparsemax":
        return _entmax(key, 2.0, None, False, n_iter)
    match = _PATTERN.match(key)
    if not match:
        raise _bad_name(name, "not of a known form")
    try:
        alpha = check_alpha(float(match["alpha"]))
    except ValueError as err:
        raise _bad_name(name, str(err)) from None
    if match["kind"] == "relu":
        if match["k"] or match["bisect"]:
            raise _bad_name(name, "alpha-ReLU takes no -k or -bisect suffix")
        return _relu(key, alpha, check_tau(tau))
    k = int(match["k"]) if match["k"] else None
    if k is not None and k < 1:
        raise _bad_name(name, "k must be at least 1")
    return _entmax(key, alpha, k, bool(match["bisect"]), n_iter)
