"""The threshold tau of alpha-entmax: exact, Monte Carlo and analytic (no data).

alpha-ReLU needs a constant tau; the paper takes the mean threshold ``tau(z)`` of
1.5-entmax over the first batch of an untrained model (Sec. "Hyperparameters alpha and
tau") and shows that it can be predicted without data (Sec. "Estimation of tau without
data", Table 3; Appendix "Approximation of tau for 1.5-entmax", Lemmas tau_normal and
var_transformer). This module implements, with the convention
``p_i = [(alpha - 1) z_i - tau]_+ ** (1 / (alpha - 1))``:

* :func:`entmax_threshold` / :func:`empirical_tau`: the exact ``tau(z)`` of given logits
  (1.5: the sort-based closed form of Peters et al. 2019, eq. tau_peters; other alpha:
  float64 bisection to 1e-10);
* :func:`monte_carlo_tau`: mean and spread of the exact ``tau(z)`` for ``z ~ N(0, sigma^2 I)``;
* :func:`logit_sigma`: ``sigma^2 = 2 d_model / (d_model + d_vocab)`` (Lemma var_transformer);
* :func:`paper_threshold`: the Lemma's equation for ``p*``, as printed (alpha = 1.5 only);
* :func:`standardized_threshold` / :func:`analytic_tau`: the same order-statistics argument
  for any alpha in (1, 2], under two quadrature rules (see :func:`standardized_threshold`);
* :func:`relu_tau_range` / :func:`check_relu_tau`: the taus alpha-ReLU can train with, i.e.
  for which its float32 loss stays finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import torch
from scipy import integrate, optimize
from scipy.stats import norm

from arelu_cli.errors import UserError
from arelu_cli.transforms import _checks

Rule = Literal["paper", "tail"]
RULES: tuple[str, ...] = ("paper", "tail")

# phi(40) ~ 1e-349 underflows in float64: quadrature over |z| > 40 adds exactly nothing.
_Z_MAX = 40.0
# Rows of float64 logits handled at once (about 16 MiB per copy), to bound memory.
_CHUNK_ELEMENTS = 1 << 21
BISECTION_TOL = 1e-10
_F32_MAX = float(torch.finfo(torch.float32).max)
LOGIT_BOUND = 10.0
"""``|z|`` of an untrained model's logits, with room: their std is at most sqrt(2) (Lemma
var_transformer), so 10 is beyond 7 std. :func:`relu_tau_range` refuses what cannot train
even from there; a loss that overflows later is a divergence the trainer stops at."""


@dataclass(frozen=True)
class TauEstimate:
    """The analytic threshold for ``z ~ N(0, sigma^2)``, ``d_vocab`` logits, alpha-entmax."""

    tau: float
    """The estimated threshold ``tau_hat = (alpha - 1) * sigma * Phi^-1(1 - p_star)``."""
    p_star: float
    """The estimated support fraction (share of the vocabulary with ``p_i > 0``)."""
    sigma: float
    """The logit standard deviation used (given, or from ``d_model`` by Lemma var_transformer)."""
    alpha: float
    d_vocab: int
    d_model: Optional[int]
    """``None`` when ``sigma`` was given directly."""
    rule: str
    """``paper`` (the Lemma's quadrature) or ``tail`` (the Gaussian-tail expectation)."""


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
        """Standard error of :attr:`mean`."""
        return self.std / math.sqrt(self.n_samples)


def check_alpha(alpha: float) -> float:
    """alpha must lie in (1, 2]: 1 is softmax (no threshold), above 2 is not entmax. The
    transforms' own check, as a :class:`UserError`."""
    try:
        return _checks.check_alpha(alpha)
    except ValueError as err:
        raise UserError(str(err)) from None


def check_d_vocab(d_vocab: int) -> int:
    """The vocabulary needs at least two entries for a threshold to mean anything."""
    if int(d_vocab) != d_vocab or d_vocab < 2:
        raise UserError(f"d_vocab must be an integer >= 2 (the vocabulary size), got {d_vocab!r}")
    return int(d_vocab)


def check_sigma(sigma: float) -> float:
    """sigma is a standard deviation: positive and finite."""
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise UserError(f"sigma (the logit standard deviation) must be positive and finite, "
                        f"got {sigma:g}")
    return sigma


def logit_sigma(d_model: int, d_vocab: int) -> float:
    """Std of the untrained OpenNMT Transformer's logits: ``sqrt(2 d_model / (d_model + d_vocab))``.

    Lemma var_transformer: Xavier-uniform output weights (variance ``2 / (d_model + d_vocab)``)
    times a layer-normalized input (``sum x_j^2 = d_model``).
    """
    if int(d_model) != d_model or d_model < 1:
        raise UserError(f"d_model must be a positive integer (the hidden size), got {d_model!r}")
    d_vocab = check_d_vocab(d_vocab)
    return math.sqrt(2.0 * d_model / (d_model + d_vocab))


def _scaled_moment(q: float, beta: float, scale: float, upper: float) -> float:
    """``int_q^upper (scale (z - q))^beta phi(z) dz``, in logs so that any beta >= 1 is safe."""
    lo, hi = max(q, -_Z_MAX), min(upper, _Z_MAX)
    if lo >= hi:
        return 0.0
    log_norm = 0.5 * math.log(2.0 * math.pi)

    def integrand(z: float) -> float:
        if z <= q:
            return 0.0
        return math.exp(beta * math.log(scale * (z - q)) - 0.5 * z * z - log_norm)

    inner = [p for p in (0.0, q + 1.0) if lo < p < hi]
    value, _ = integrate.quad(integrand, lo, hi, points=inner or None, epsabs=0.0,
                              epsrel=1e-11, limit=200)
    return value


def _residual(q: float, d_vocab: int, sigma: float, alpha: float, rule: str) -> float:
    """Zero at the standardized threshold ``q = tau / ((alpha - 1) sigma)`` of the chosen rule."""
    beta, scale, eps = 1.0 / (alpha - 1.0), (alpha - 1.0) * sigma, 1.0 / d_vocab
    if rule == "tail":
        return d_vocab * _scaled_moment(q, beta, scale, math.inf) - 1.0
    top = norm.isf(eps)  # z_(1) ~ sigma * Phi^-1(1 - eps), the Lemma's upper quantile
    mass = norm.sf(q) - eps  # P(q <= Z <= top) = p - eps
    return _scaled_moment(q, beta, scale, top) / mass - eps / norm.sf(q)


def _bracket(d_vocab: int, sigma: float, alpha: float, rule: str) -> tuple[float, float]:
    """An interval where :func:`_residual` changes sign (proof: :func:`standardized_threshold`)."""
    scale, eps, beta = (alpha - 1.0) * sigma, 1.0 / d_vocab, 1.0 / (alpha - 1.0)
    q_lo = -1.0 - 1.0 / scale
    if rule == "tail":
        log_k = math.log(d_vocab) + beta * math.log(scale) + math.lgamma(beta + 1.0)
        q_hi = math.sqrt(max(1.0, 2.0 * (math.log(2.0) + log_k - 0.5 * math.log(2.0 * math.pi))))
    else:
        q_hi = norm.isf(eps) - eps ** (alpha - 1.0) / (2.0 * scale)
    return min(q_lo, q_hi), max(q_lo, q_hi)


def standardized_threshold(d_vocab: int, sigma: float, alpha: float = 1.5,
                           rule: Rule = "paper") -> float:
    """``q* = tau / ((alpha - 1) sigma)`` for alpha-entmax of ``d_vocab`` logits ``N(0, sigma^2)``.

    The Lemma's argument, for any alpha: with ``z`` sorted, ``tau`` solves
    ``sum_{i <= k} [(alpha - 1) z_(i) - tau]^beta = 1`` (``beta = 1/(alpha - 1)``) with
    ``(alpha - 1) z_(k) = tau`` at the support edge; put ``z_(i) ~ sigma Phi^-1(1 - i/d)``,
    ``p = k/d``, ``eps = 1/d``, ``q = Phi^-1(1 - p)``. Two ways to turn the sum into an integral:

    * ``paper``: the Lemma's own: the mean over ``i <= k`` is the mean over ``x in [eps, p]``,
      ``E[(scale (Z - q))^beta | q <= Z <= Phi^-1(1 - eps)] = eps / p``. For alpha = 1.5
      this is, term by term, the Lemma's equation (its m(p), s(p) are this conditional
      mean and variance), so it reproduces Table 3. It places the i-th largest logit at
      quantile ``i/d`` and drops ``x < eps``, i.e. it shifts every order statistic half a
      cell down, and tau comes out low for every alpha: by 0.2-0.7 of the spread of tau(z)
      over random z (~5% at d = 1K, ~2% at 10K, 0.1-1% at 60K; results/tau).
    * ``tail``: the midpoint (continuum) version of the same sum, which is exactly the
      expected support mass: ``d E[(scale (Z - q))_+^beta] = 1``. On the alpha x d grid of
      results/tau it is within 0.12 of the spread of tau(z) of Monte Carlo (within ~2
      standard errors of its mean), for every alpha.

    Brackets (``scale = (alpha - 1) sigma``, ``beta >= 1``, ``d >= 2``). Low end
    ``q = -1 - 1/scale``, where the residual is positive. ``paper``: by Jensen the mean is at
    least ``(scale E[Z - q | q <= Z <= Phi^-1(1-eps)])^beta``; truncating from below raises a
    mean, so ``E[Z | ...] >= E[Z | Z <= Phi^-1(1-eps)] >= -2 phi(0) > -1`` and the mean
    exceeds ``1 >= eps/p``. ``tail``: ``d E[(scale (Z - q))_+^beta] >= d (scale (-q))^beta > d``.
    High end, where it is negative. ``paper``: at ``Phi^-1(1-eps) - eps^(alpha-1) / (2 scale)``
    the integrand is at most ``eps 2^-beta < eps/p``. ``tail``: at the ``q >= 1`` with
    ``K phi(q) = 1/2`` (or ``q = 1``), ``K = d scale^beta Gamma(beta+1)``, by the Mills-type
    bound ``E[(Z - q)_+^beta] <= phi(q) Gamma(beta+1) / q^(beta+1)``. ``tail``'s residual
    decreases strictly in ``q``, so its root is unique; for ``paper`` the tests check a
    single sign change across the bracket.
    """
    alpha, d_vocab, sigma = check_alpha(alpha), check_d_vocab(d_vocab), check_sigma(sigma)
    if rule not in RULES:
        raise UserError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    lo, hi = _bracket(d_vocab, sigma, alpha, rule)
    return optimize.brentq(_residual, lo, hi, args=(d_vocab, sigma, alpha, rule),
                           xtol=1e-13, maxiter=200)


def _paper_moments(q: float, eps: float) -> tuple[float, float]:
    """The Lemma's ``m(p)`` and ``s(p)`` at ``p = 1 - Phi(q)``, from its antiderivatives.

    ``m`` and ``s`` are the mean and variance of ``Phi^-1(1 - x)`` over ``x in [eps, p]``;
    ``Phi^-1(p) = -q`` is used instead of ``Phi^-1(p)`` of a rounded ``p`` near 1.
    """
    p, top = norm.sf(q), norm.isf(eps)
    m = (norm.pdf(q) - norm.pdf(top)) / (p - eps)
    second = ((q * norm.pdf(q) + p) - (top * norm.pdf(top) + eps)) / (p - eps)
    return m, second - m * m


def paper_threshold(d_vocab: int, sigma: float) -> float:
    """``q* = Phi^-1(1 - p*)`` of Lemma tau_normal (1.5-entmax), from the equation as printed:

    ``Phi^-1(1 - p) = m(p) - sqrt(4 eps / (sigma^2 p) - s(p))``, ``eps = 1/d``.

    Solved in its squared form ``(m(p) - Phi^-1(1-p))^2 + s(p) = 4 eps / (sigma^2 p)``, which
    has the same roots because ``m(p)``, a mean of ``Phi^-1(1 - x)`` over ``x < p``, exceeds
    ``Phi^-1(1 - p)``; the squared form is defined where the square root is not. The unknown
    is ``q`` rather than ``p`` so that a support fraction near 1 keeps its precision.
    """
    d_vocab, sigma = check_d_vocab(d_vocab), check_sigma(sigma)
    eps = 1.0 / d_vocab

    def residual(q: float) -> float:
        m, s = _paper_moments(q, eps)
        return (m - q) ** 2 + s - 4.0 * eps / (sigma * sigma * norm.sf(q))

    q_lo, q_hi = _bracket(d_vocab, sigma, 1.5, "paper")
    return optimize.brentq(residual, q_lo, q_hi, xtol=1e-13, maxiter=200)


def analytic_tau(d_vocab: int, sigma: Optional[float] = None, d_model: Optional[int] = None,
                 alpha: float = 1.5, rule: Rule = "paper") -> TauEstimate:
    """tau_hat for alpha-entmax of Gaussian logits, without data (paper eq. tau_est).

    ``sigma`` wins over ``d_model``; with only ``d_model`` it is :func:`logit_sigma`. For
    alpha = 1.5 with the ``paper`` rule ``p*`` comes from the Lemma's equation as printed
    (:func:`paper_threshold`); otherwise from :func:`standardized_threshold`. The estimate
    is asymptotic: it needs a support of many entries (``d_vocab * p_star >> 1``). With
    sigma from ``d_model``, tau falls as ``d_vocab`` grows for alpha >= 1.5; for alpha < 1.5
    it is negative and rises back towards 0 beyond d_vocab ~ 6e4 (at d_model 512), because
    ``d sigma^beta ~ d^(1 - beta/2) -> 0`` when ``beta > 2``; Monte Carlo shows the same.
    """
    alpha, d_vocab = check_alpha(alpha), check_d_vocab(d_vocab)
    if sigma is None:
        if d_model is None:
            raise UserError("give sigma (the logit std) or d_model (sigma^2 = 2 d_model / "
                            "(d_model + d_vocab), the paper's Transformer)")
        sigma = logit_sigma(d_model, d_vocab)
    else:
        sigma, d_model = check_sigma(sigma), None
    if alpha == 1.5 and rule == "paper":
        q = paper_threshold(d_vocab, sigma)
    else:
        q = standardized_threshold(d_vocab, sigma, alpha, rule)
    return TauEstimate(tau=float((alpha - 1.0) * sigma * q), p_star=float(norm.sf(q)), sigma=sigma,
                       alpha=alpha, d_vocab=d_vocab, d_model=d_model, rule=rule)


def _entmax15_threshold(x: torch.Tensor) -> torch.Tensor:
    """Exact 1.5-entmax tau of each row (eq. tau_peters with the support condition cond_k);
    NaN for a row where no k meets it (a row of NaN, +inf or only -inf)."""
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
    """Exact ``tau(z)`` of alpha-entmax over the last dim, in float64; ``logits.shape[:-1]``.

    A row holding NaN or +inf (a diverged model's), or only -inf, has NaN; ``-inf`` entries
    are outside the support like any very low logit."""
    alpha = check_alpha(alpha)
    if logits.dim() == 0 or logits.shape[-1] < 2:
        raise UserError("logits need a last (vocabulary) dimension of size >= 2")
    x = logits.detach().to(torch.float64).reshape(-1, logits.shape[-1])  # (N, V)
    rows = max(1, _CHUNK_ELEMENTS // x.shape[-1])
    solve = _entmax15_threshold if alpha == 1.5 else (lambda c: _bisect_threshold(c, alpha))
    taus = torch.cat([solve(chunk) for chunk in x.split(rows)])
    broken = (torch.isnan(x) | torch.isposinf(x)).any(-1) | ~torch.isfinite(taus)
    return torch.where(broken, torch.nan, taus).reshape(logits.shape[:-1])


def empirical_tau(logits: torch.Tensor, alpha: float = 1.5) -> float:
    """Mean exact threshold over all rows of ``logits`` (..., V): the paper's tau from a batch."""
    return float(entmax_threshold(logits, alpha).mean())


MAX_MONTE_CARLO_VOCAB = 10_000_000
"""The largest vocabulary :func:`monte_carlo_tau` takes: the exact threshold of one vector
needs it whole (sorted, with its running sums: about 0.5 GB at this size)."""


def monte_carlo_tau(d_vocab: int, sigma: float, alpha: float = 1.5, n_samples: int = 1000,
                    seed: int = 0) -> MonteCarloTau:
    """Mean and std of the exact ``tau(z)`` over ``n_samples`` vectors ``z ~ N(0, sigma^2 I_d)``."""
    alpha, d_vocab, sigma = check_alpha(alpha), check_d_vocab(d_vocab), check_sigma(sigma)
    if int(n_samples) != n_samples or n_samples < 2:
        raise UserError(f"n_samples must be an integer >= 2 (a spread needs two), "
                        f"got {n_samples!r}")
    if d_vocab > MAX_MONTE_CARLO_VOCAB:
        raise UserError(f"--method monte-carlo holds several float64 copies of each {d_vocab:,}-"
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
    :class:`UserError` that gives the valid range."""
    low, high = relu_tau_range(alpha, d_vocab, tokens)
    tau = float(tau)
    if not low <= tau <= high:  # NaN fails too
        raise UserError(
            f"tau {tau:g} is impossible for {name}: with a vocabulary of {d_vocab} and batches "
            f"of {tokens} tokens its float32 loss is finite only for tau in [{low:.4g}, "
            f"{high:.4g}] (logits within +-{LOGIT_BOUND:g}); give a tau in that range, or "
            "auto (the paper's, from the first batch)")
    return tau
