"""The threshold tau of alpha-entmax, which alpha-ReLU freezes: exact, Monte Carlo, analytic.

With ``p_i = [(alpha - 1) z_i - tau(z)]_+ ** (1 / (alpha - 1))`` summing to one, the paper takes
alpha-ReLU's constant tau as the mean ``tau(z)`` of an untrained model's first batch (Sec.
"Hyperparameters alpha and tau") and predicts it without data from ``z ~ N(0, sigma^2)``
(Sec. "Estimation of tau without data", Lemmas tau_normal and var_transformer):
``tau_hat = (alpha - 1) sigma Phi^-1(1 - p*)``, ``p*`` the support fraction, and
``sigma^2 = 2 d_model / (d_model + V)`` for a Transformer with Xavier output weights.
:func:`entmax_threshold`/:func:`empirical_tau` solve ``tau(z)`` exactly (1.5: sort, else
float64 bisection), :func:`monte_carlo_tau` averages it over Gaussian logits, and
:func:`analytic_tau` is the estimate for any alpha under the Lemma's quadrature (``paper``) or
the expected support mass (``tail``, closer to Monte Carlo); :func:`tau_for` is the one call
that takes the logits. Torch and the standard library only: Gaussian integrals by tanh-sinh
quadrature, roots by the Illinois method.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Optional

import torch

from arelu_cli.transforms.checks import check_alpha

Rule = Literal["paper", "tail"]
RULES: tuple[str, ...] = ("paper", "tail")
_Z_MAX = 40.0  # phi(40) ~ 1e-349 underflows in float64: |z| > 40 adds exactly nothing
_CHUNK_ELEMENTS = 1 << 21  # float64 logits handled at once (16 MiB per copy)
BISECTION_TOL = 1e-10
_ROOT_TOL = 1e-13
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_F32_MAX = float(torch.finfo(torch.float32).max)


@dataclass(frozen=True)
class TauEstimate:
    """The analytic threshold of alpha-entmax for ``d_vocab`` logits ``N(0, sigma^2)``."""

    tau: float
    p_star: float
    """The estimated support fraction (share of the vocabulary with ``p_i > 0``)."""
    sigma: float
    alpha: float
    d_vocab: int
    d_model: Optional[int]
    """``None`` when ``sigma`` was given directly."""
    rule: str


@dataclass(frozen=True)
class MonteCarloTau:
    """Exact alpha-entmax thresholds of ``n_samples`` random Gaussian logit vectors."""

    mean: float
    std: float
    """Spread of ``tau(z)`` across vectors (not the standard error of ``mean``)."""
    n_samples: int
    seed: int

    @property
    def stderr(self) -> float:
        return self.std / math.sqrt(self.n_samples)


def check_d_vocab(d_vocab: int) -> int:
    """The vocabulary needs at least two entries for a threshold to mean anything."""
    if isinstance(d_vocab, bool) or int(d_vocab) != d_vocab or d_vocab < 2:
        raise ValueError(f"d_vocab must be an integer >= 2 (the vocabulary size), got {d_vocab!r}")
    return int(d_vocab)


def check_sigma(sigma: float) -> float:
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma (the logit standard deviation) must be positive and finite, "
                         f"got {sigma:g}")
    return sigma


def logit_sigma(d_model: int, d_vocab: int) -> float:
    """Lemma var_transformer: ``sqrt(2 d_model / (d_model + d_vocab))``, Xavier-uniform output
    weights times a layer-normalized input."""
    if int(d_model) != d_model or d_model < 1:
        raise ValueError(f"d_model must be a positive integer (the hidden size), got {d_model!r}")
    return math.sqrt(2.0 * d_model / (d_model + check_d_vocab(d_vocab)))


def _sf(q: float) -> float:
    return 0.5 * math.erfc(q / math.sqrt(2.0))


def _pdf(q: float) -> float:
    return math.exp(-0.5 * q * q - _LOG_SQRT_2PI)


def _isf(p: float) -> float:
    """``Phi^-1(1 - p)``, accurate for small ``p``."""
    return -float(torch.special.ndtri(torch.tensor(p, dtype=torch.float64)))


@lru_cache(maxsize=1)
def _tanh_sinh(h: float = 1.0 / 32, t_max: float = 3.5) -> tuple[tuple[float, float], ...]:
    """Nodes of tanh-sinh quadrature on [0, 1] as (distance from 0, weight): double-exponential
    convergence even with the power singularity of ``(z - q)^beta`` at an end."""
    nodes = []
    for k in range(-round(t_max / h), round(t_max / h) + 1):
        u = 0.5 * math.pi * math.sinh(k * h)
        nodes.append((1.0 / (1.0 + math.exp(-2.0 * u)),
                      0.5 * h * 0.5 * math.pi * math.cosh(k * h) / math.cosh(u) ** 2))
    return tuple(nodes)


def _scaled_moment(q: float, beta: float, scale: float, upper: float) -> float:
    """``int_q^upper (scale (z - q))^beta phi(z) dz``, in logs so that any beta >= 1 is safe."""
    lo, hi = max(q, -_Z_MAX), min(upper, _Z_MAX)
    if lo >= hi:
        return 0.0
    cuts = [lo, *sorted(p for p in (0.0, q + 1.0) if lo < p < hi), hi]
    total, log_scale = 0.0, math.log(scale)
    for a, b in zip(cuts, cuts[1:]):
        for frac, weight in _tanh_sinh():
            offset = (a - q) + (b - a) * frac  # z - q, exact near the singular end a = q
            if offset > 0.0:
                z = q + offset
                total += (b - a) * weight * math.exp(
                    beta * (log_scale + math.log(offset)) - 0.5 * z * z - _LOG_SQRT_2PI)
    return total


def _root(f, lo: float, hi: float) -> float:
    """A root of ``f`` in ``[lo, hi]`` where it changes sign (Illinois regula falsi)."""
    f_lo, f_hi = f(lo), f(hi)
    if f_lo == 0.0 or f_hi == 0.0:
        return lo if f_lo == 0.0 else hi
    if (f_lo > 0) == (f_hi > 0):
        raise ValueError(f"no sign change of the threshold equation in [{lo:g}, {hi:g}]")
    side = 0
    for _ in range(200):
        x = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
        f_x = f(x)
        if f_x == 0.0:
            return x
        if (f_x > 0) == (f_lo > 0):
            lo, f_lo = x, f_x
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
        else:
            hi, f_hi = x, f_x
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
        if hi - lo < _ROOT_TOL + 4e-16 * abs(x):
            break
    return 0.5 * (lo + hi)


def _residual(q: float, d_vocab: int, sigma: float, alpha: float, rule: str) -> float:
    """Zero at the standardized threshold ``q = tau / ((alpha - 1) sigma)`` of the rule."""
    beta, scale, eps = 1.0 / (alpha - 1.0), (alpha - 1.0) * sigma, 1.0 / d_vocab
    if rule == "tail":
        return d_vocab * _scaled_moment(q, beta, scale, math.inf) - 1.0
    mass = _sf(q) - eps  # P(q <= Z <= Phi^-1(1 - eps)) = p - eps
    return _scaled_moment(q, beta, scale, _isf(eps)) / mass - eps / _sf(q)


def _bracket(d_vocab: int, sigma: float, alpha: float, rule: str) -> tuple[float, float]:
    """Where :func:`_residual` changes sign: positive at ``-1 - 1/scale`` (Jensen), negative at
    the high end (``paper``: every term below ``eps/p``; ``tail``: a Mills-type bound)."""
    scale, eps, beta = (alpha - 1.0) * sigma, 1.0 / d_vocab, 1.0 / (alpha - 1.0)
    q_lo = -1.0 - 1.0 / scale
    if rule == "tail":
        log_k = math.log(d_vocab) + beta * math.log(scale) + math.lgamma(beta + 1.0)
        q_hi = math.sqrt(max(1.0, 2.0 * (math.log(2.0) + log_k - _LOG_SQRT_2PI)))
    else:
        q_hi = _isf(eps) - eps ** (alpha - 1.0) / (2.0 * scale)
    return min(q_lo, q_hi), max(q_lo, q_hi)


def standardized_threshold(d_vocab: int, sigma: float, alpha: float = 1.5,
                           rule: Rule = "paper") -> float:
    """``q* = tau / ((alpha - 1) sigma)``: with ``z_(i) ~ sigma Phi^-1(1 - i/d)`` the support
    condition ``sum_i [(alpha - 1) z_(i) - tau]_+^beta = 1`` becomes an integral. ``paper``: the
    Lemma's, ``E[(scale (Z - q))^beta | q <= Z <= Phi^-1(1 - 1/d)] = (1/d) / p`` (tau low by
    0.2-0.7 Monte Carlo spreads); ``tail``: ``d E[(scale (Z - q))_+^beta] = 1``."""
    alpha, d_vocab, sigma = check_alpha(alpha), check_d_vocab(d_vocab), check_sigma(sigma)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    return _root(lambda q: _residual(q, d_vocab, sigma, alpha, rule),
                 *_bracket(d_vocab, sigma, alpha, rule))


def _paper_moments(q: float, eps: float) -> tuple[float, float]:
    """The Lemma's ``m(p)``, ``s(p)`` at ``p = 1 - Phi(q)``: mean and variance of
    ``Phi^-1(1 - x)`` over ``x in [eps, p]``, from their antiderivatives."""
    p, top = _sf(q), _isf(eps)
    m = (_pdf(q) - _pdf(top)) / (p - eps)
    second = ((q * _pdf(q) + p) - (top * _pdf(top) + eps)) / (p - eps)
    return m, second - m * m


def paper_threshold(d_vocab: int, sigma: float) -> float:
    """``q*`` of Lemma tau_normal (alpha = 1.5) as printed, in its squared form
    ``(m(p) - Phi^-1(1 - p))^2 + s(p) = 4 eps / (sigma^2 p)`` (same roots, as ``m > q``)."""
    d_vocab, sigma = check_d_vocab(d_vocab), check_sigma(sigma)
    eps = 1.0 / d_vocab

    def residual(q: float) -> float:
        m, s = _paper_moments(q, eps)
        return (m - q) ** 2 + s - 4.0 * eps / (sigma * sigma * _sf(q))

    return _root(residual, *_bracket(d_vocab, sigma, 1.5, "paper"))


def analytic_tau(d_vocab: int, sigma: Optional[float] = None, d_model: Optional[int] = None,
                 alpha: float = 1.5, rule: Rule = "paper") -> TauEstimate:
    """tau_hat (paper eq. tau_est) for ``d_vocab`` logits of std ``sigma`` (or of a Transformer
    of width ``d_model``: :func:`logit_sigma`); ``sigma`` wins. Asymptotic: it needs a support
    of many entries (``d_vocab * p_star >> 1``)."""
    alpha, d_vocab = check_alpha(alpha), check_d_vocab(d_vocab)
    if sigma is None:
        if d_model is None:
            raise ValueError("give sigma (the logit std) or d_model (sigma^2 = 2 d_model / "
                             "(d_model + d_vocab), the paper's Transformer)")
        sigma = logit_sigma(d_model, d_vocab)
    else:
        sigma, d_model = check_sigma(sigma), None
    if alpha == 1.5 and rule == "paper":
        q = paper_threshold(d_vocab, sigma)
    else:
        q = standardized_threshold(d_vocab, sigma, alpha, rule)
    return TauEstimate(tau=(alpha - 1.0) * sigma * q, p_star=_sf(q), sigma=sigma, alpha=alpha,
                       d_vocab=d_vocab, d_model=d_model, rule=rule)


def tau_for(logits: torch.Tensor, alpha: float = 1.5, rule: Rule = "paper") -> float:
    """The analytic tau for these logits: ``V`` is their last dimension and ``sigma`` their std
    (that of the untrained model whose first batch they are)."""
    if logits.dim() == 0 or logits.shape[-1] < 2 or logits.numel() < 2:
        raise ValueError("logits need a last (vocabulary) dimension of size >= 2")
    return analytic_tau(logits.shape[-1], sigma=float(logits.detach().double().std()),
                        alpha=alpha, rule=rule).tau


def _entmax15_threshold(x: torch.Tensor) -> torch.Tensor:
    """Exact 1.5-entmax tau of each row (Peters et al. 2019, eq. tau_peters with cond_k); NaN
    for a row where no k meets it (a row of NaN, +inf or only -inf)."""
    z, _ = torch.sort(x, dim=-1, descending=True)  # (N, V)
    k = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype, device=x.device)
    mean = z.cumsum(-1) / k
    var = (z * z).cumsum(-1) / k - mean * mean
    tau = mean / 2 - torch.sqrt(torch.clamp(1.0 / k - var / 4, min=0.0))  # (N, V)
    support = (z / 2 >= tau).sum(-1, keepdim=True)  # (N, 1), the largest k meeting cond_k
    found = tau.gather(-1, support.clamp_min(1) - 1).squeeze(-1)
    return torch.where(support.squeeze(-1) > 0, found, torch.nan)


def _bisect_threshold(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Exact alpha-entmax tau of each row by bisection, to :data:`BISECTION_TOL`."""
    beta, scaled = 1.0 / (alpha - 1.0), (alpha - 1.0) * x
    top = scaled.max(-1, keepdim=True).values  # (N, 1)
    # The largest term alone reaches 1 at top - 1; every term is <= 1/V at top - V^(1-alpha).
    width = 1.0 - x.shape[-1] ** (1.0 - alpha)
    lo, hi = top - 1.0, top - x.shape[-1] ** (1.0 - alpha)
    for _ in range(max(1, math.ceil(math.log2(width / BISECTION_TOL)))):
        mid = (lo + hi) / 2
        mass = torch.clamp(scaled - mid, min=0.0).pow(beta).sum(-1, keepdim=True)
        above = mass >= 1.0
        lo, hi = torch.where(above, mid, lo), torch.where(above, hi, mid)
    return ((lo + hi) / 2).squeeze(-1)


def entmax_threshold(logits: torch.Tensor, alpha: float = 1.5) -> torch.Tensor:
    """Exact ``tau(z)`` of alpha-entmax over the last dim, float64, shape ``logits.shape[:-1]``;
    NaN for a row holding NaN or +inf, or only -inf."""
    alpha = check_alpha(alpha)
    if logits.dim() == 0 or logits.shape[-1] < 2:
        raise ValueError("logits need a last (vocabulary) dimension of size >= 2")
    x = logits.detach().to(torch.float64).reshape(-1, logits.shape[-1])  # (N, V)
    rows = max(1, _CHUNK_ELEMENTS // x.shape[-1])
    solve = _entmax15_threshold if alpha == 1.5 else (lambda c: _bisect_threshold(c, alpha))
    taus = torch.cat([solve(chunk) for chunk in x.split(rows)])
    broken = (torch.isnan(x) | torch.isposinf(x)).any(-1) | ~torch.isfinite(taus)
    return torch.where(broken, torch.nan, taus).reshape(logits.shape[:-1])


def empirical_tau(logits: torch.Tensor, alpha: float = 1.5) -> float:
    """Mean exact threshold over all rows of ``logits (..., V)``: the paper's tau from a batch."""
    return float(entmax_threshold(logits, alpha).mean())


MAX_MONTE_CARLO_VOCAB = 10_000_000
"""The largest vocabulary :func:`monte_carlo_tau` takes: the exact threshold of one vector
needs it whole (sorted, with its running sums: about 0.5 GB at this size)."""


def monte_carlo_tau(d_vocab: int, sigma: float, alpha: float = 1.5, n_samples: int = 1000,
                    seed: int = 0) -> MonteCarloTau:
    """Mean and std of the exact ``tau(z)`` over ``n_samples`` vectors ``z ~ N(0, sigma^2 I_d)``."""
    alpha, d_vocab, sigma = check_alpha(alpha), check_d_vocab(d_vocab), check_sigma(sigma)
    if int(n_samples) != n_samples or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2 (a spread needs two), "
                         f"got {n_samples!r}")
    if d_vocab > MAX_MONTE_CARLO_VOCAB:
        raise ValueError(f"monte-carlo holds several float64 copies of each {d_vocab:,}-"
                         f"dimensional vector (about {6 * 8 * d_vocab / 2**30:,.0f} GiB); it takes "
                         f"d_vocab up to {MAX_MONTE_CARLO_VOCAB:,}: use --method analytic for "
                         "larger vocabularies")
    n_samples = int(n_samples)
    gen = torch.Generator().manual_seed(int(seed))
    rows = max(1, _CHUNK_ELEMENTS // d_vocab)
    taus = []
    for start in range(0, n_samples, rows):
        z = torch.randn(min(rows, n_samples - start), d_vocab, generator=gen,
                        dtype=torch.float64) * sigma  # (n, V)
        taus.append(entmax_threshold(z, alpha))
    tau = torch.cat(taus)
    return MonteCarloTau(mean=float(tau.mean()), std=float(tau.std()), n_samples=n_samples,
                         seed=int(seed))

LOGIT_BOUND = 10.0
"""``|z|`` of an untrained model's logits, with room: their std is at most sqrt(2) (Lemma
var_transformer), so 10 is beyond 7 std. :func:`relu_tau_range` refuses what cannot train
even from there; a loss that overflows later is a divergence the trainer stops at."""


def relu_tau_range(alpha: float, d_vocab: int, tokens: int) -> tuple[float, float]:
    """The taus for which alpha-ReLU's float32 loss of a batch of ``tokens`` rows of
    ``d_vocab`` logits within :data:`LOGIT_BOUND` ``Z`` stays finite.

    With ``a = alpha - 1``, ``e = 1/a``, ``c = tau/a`` the kernels compute a row's loss as
    ``a^(e+1)/alpha * sum_j [z_j - c]_+^(e+1) + 1/(alpha a) + c - z_y``, and a batch sums
    ``tokens`` rows, in float32 (largest value ``F``). High tau: once ``c >= Z`` the sum is 0
    and a row is about ``c``, so ``tokens (c + 1/(alpha a) + Z) <= F``. Low tau: every entry
    is on the support and the sum reaches ``d_vocab (Z - c)^(e+1)``, which must stay below
    ``F``, also once scaled by ``tokens a^(e+1) / alpha``.
    """
    alpha, d_vocab = check_alpha(alpha), check_d_vocab(d_vocab)
    a, e, z = alpha - 1.0, 1.0 / (alpha - 1.0), LOGIT_BOUND
    high = a * (_F32_MAX / tokens - z - 1.0 / (alpha * a))
    scale = max(1.0, tokens * a ** (e + 1.0) / alpha)
    reach = (_F32_MAX / (d_vocab * scale)) ** (1.0 / (e + 1.0))  # the largest z - c
    return a * (z - reach), high


def check_relu_tau(tau: float, name: str, alpha: float, d_vocab: int, tokens: int) -> float:
    """``tau`` if alpha-ReLU ``name`` can train with it (:func:`relu_tau_range`), else a
    ValueError that gives the valid range."""
    low, high = relu_tau_range(alpha, d_vocab, tokens)
    tau = float(tau)
    if not low <= tau <= high:  # NaN fails too
        raise ValueError(
            f"tau {tau:g} is impossible for {name}: with a vocabulary of {d_vocab} and batches "
            f"of {tokens} tokens its float32 loss is finite only for tau in [{low:.4g}, "
            f"{high:.4g}] (logits within +-{LOGIT_BOUND:g}); give a tau in that range, or "
            "auto (the paper's, from the first batch)")
    return tau
