"""Tests for arelu_cli.transforms.tau: the paper's Table 3, the Lemma as printed, exact
thresholds against the entmax package, the alpha-generalized estimate against Monte Carlo
and against the numbers of its former scipy implementation, tau_for and
AlphaReLULoss(tau="analytic")."""

from __future__ import annotations

import math

import entmax
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import norm

from arelu_cli.transforms import tau

ALPHAS = (1.25, 1.5, 1.75, 2.0)

# Paper Table 3 (d_model = 512): d_vocab -> (printed p*, printed tau_hat).
TABLE3 = [(10_000, 0.0184, 0.33), (40_000, 0.0171, 0.17), (60_000, 0.0169, 0.14)]


def _probs(logits: torch.Tensor, threshold: torch.Tensor, alpha: float) -> torch.Tensor:
    scaled = (alpha - 1) * logits.double() - threshold.unsqueeze(-1)
    return torch.clamp(scaled, min=0).pow(1 / (alpha - 1))


# --- the paper's Table 3 ------------------------------------------------------------------

@pytest.mark.parametrize("d_vocab, p_printed, tau_printed", TABLE3)
def test_table3_reproduced(d_vocab, p_printed, tau_printed):
    est = tau.analytic_tau(d_vocab, d_model=512)
    assert round(est.tau, 2) == tau_printed
    assert abs(est.p_star - p_printed) <= 2e-4
    assert est.sigma == pytest.approx(math.sqrt(2 * 512 / (512 + d_vocab)))


@pytest.mark.parametrize("d_vocab, _p, _t", TABLE3)
def test_p_star_solves_the_lemma_equation_as_printed(d_vocab, _p, _t):
    """m(p), s(p) by direct quadrature of their definitions, not by antiderivatives."""
    est = tau.analytic_tau(d_vocab, d_model=512)
    eps, p, sigma = 1 / d_vocab, est.p_star, est.sigma
    mean = integrate.quad(lambda x: norm.isf(x), eps, p, epsabs=0, epsrel=1e-12)[0] / (p - eps)
    second = integrate.quad(lambda x: norm.isf(x) ** 2, eps, p, epsabs=0, epsrel=1e-12)[0]
    s = second / (p - eps) - mean ** 2
    lhs, rhs = norm.isf(p), mean - math.sqrt(4 * eps / (sigma ** 2 * p) - s)
    assert lhs == pytest.approx(rhs, abs=1e-8)
    assert est.tau == pytest.approx(sigma / 2 * lhs, abs=1e-12)


@pytest.mark.parametrize("d_vocab, sigma", [(2, 0.5), (1000, 1e-3), (10_000, 0.3121),
                                            (60_000, 10.0), (10 ** 6, 0.05)])
def test_general_solver_matches_paper_route_at_alpha_1_5(d_vocab, sigma):
    q_general = tau.standardized_threshold(d_vocab, sigma, alpha=1.5, rule="paper")
    assert q_general == pytest.approx(tau.paper_threshold(d_vocab, sigma), abs=1e-9)


# --- the alpha-generalized estimate --------------------------------------------------------

def _taus(alpha, rule, vocabs):
    return [tau.analytic_tau(d, d_model=512, alpha=alpha, rule=rule).tau for d in vocabs]


@pytest.mark.parametrize("alpha", (1.5, 1.75, 2.0))
@pytest.mark.parametrize("rule", tau.RULES)
def test_tau_falls_as_vocabulary_grows(alpha, rule):
    taus = _taus(alpha, rule, (1_000, 3_000, 10_000, 40_000, 60_000, 200_000, 10 ** 6))
    assert all(a > b for a, b in zip(taus, taus[1:])), taus


@pytest.mark.parametrize("rule", tau.RULES)
def test_tau_below_alpha_1_5_falls_then_rises_to_zero(rule):
    """d sigma^beta ~ d^(1 - beta/2) -> 0 for beta > 2: tau < 0 drifts back up (MC agrees)."""
    falling = _taus(1.25, rule, (1_000, 3_000, 10_000, 40_000, 60_000))
    assert all(a > b for a, b in zip(falling, falling[1:])), falling
    rising = _taus(1.25, rule, (100_000, 200_000, 10 ** 6))
    assert all(a < b < 0 for a, b in zip(rising, rising[1:])), rising


@pytest.mark.parametrize("alpha", (1.05, 1.1, 1.5, 2.0))
@pytest.mark.parametrize("sigma", (1e-3, 1.0, 30.0))
@pytest.mark.parametrize("d_vocab", (2, 1_000, 10 ** 6))
def test_brackets_hold_at_extremes(alpha, sigma, d_vocab):
    for rule in tau.RULES:
        est = tau.analytic_tau(d_vocab, sigma=sigma, alpha=alpha, rule=rule)
        assert math.isfinite(est.tau) and 0 < est.p_star <= 1


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("d_vocab", (2, 1_000, 60_000))
def test_paper_rule_residual_changes_sign_once(alpha, d_vocab):
    sigma = tau.logit_sigma(512, d_vocab)
    lo, hi = tau._bracket(d_vocab, sigma, alpha, "paper")
    grid = [lo + (hi - lo) * i / 400 for i in range(401)]
    signs = [tau._residual(q, d_vocab, sigma, alpha, "paper") > 0 for q in grid]
    assert signs[0] and not signs[-1]
    assert sum(a != b for a, b in zip(signs, signs[1:])) == 1


# Observed on the 4 x 4 grid (results/tau/README.md): |tail - MC| <= 0.12 std(tau(z)),
# |paper - MC| <= 0.73 std(tau(z)), the paper's rule always below. Small samples here, so
# each bound also allows 3 standard errors of the Monte Carlo mean.
@pytest.mark.parametrize("alpha, d_vocab", [(1.25, 1_000), (1.5, 1_000), (1.75, 2_000),
                                            (2.0, 1_000), (1.5, 10_000)])
def test_analytic_agrees_with_monte_carlo(alpha, d_vocab):
    sigma = tau.logit_sigma(512, d_vocab)
    mc = tau.monte_carlo_tau(d_vocab, sigma, alpha, n_samples=400, seed=1)
    tail = tau.analytic_tau(d_vocab, sigma=sigma, alpha=alpha, rule="tail").tau
    paper = tau.analytic_tau(d_vocab, sigma=sigma, alpha=alpha, rule="paper").tau
    assert abs(tail - mc.mean) <= 0.15 * mc.std + 3 * mc.stderr
    assert abs(paper - mc.mean) <= 0.8 * mc.std + 3 * mc.stderr
    assert paper < tail


# --- exact thresholds ----------------------------------------------------------------------

@pytest.mark.parametrize("alpha", ALPHAS)
def test_exact_threshold_normalizes_and_matches_entmax(alpha):
    logits = torch.randn(4, 7, 300, generator=torch.Generator().manual_seed(0),
                         dtype=torch.float64) * 2
    threshold = tau.entmax_threshold(logits, alpha)
    assert threshold.shape == (4, 7)
    probs = _probs(logits, threshold, alpha)
    assert torch.allclose(probs.sum(-1), torch.ones(4, 7, dtype=torch.float64), atol=1e-8)
    reference = (entmax.entmax15(logits, dim=-1) if alpha == 1.5 else
                 entmax.sparsemax(logits, dim=-1) if alpha == 2.0 else
                 entmax.entmax_bisect(logits, alpha=alpha, dim=-1, n_iter=60))
    assert torch.allclose(probs, reference, atol=1e-8)


@settings(max_examples=30, deadline=None)
@given(alpha=st.floats(1.05, 2.0), scale=st.floats(0.01, 20.0), vocab=st.integers(2, 200),
       seed=st.integers(0, 10 ** 6))
def test_exact_threshold_property(alpha, scale, vocab, seed):
    logits = torch.randn(3, vocab, generator=torch.Generator().manual_seed(seed),
                         dtype=torch.float64) * scale
    threshold = tau.entmax_threshold(logits, alpha)
    assert torch.allclose(_probs(logits, threshold, alpha).sum(-1),
                          torch.ones(3, dtype=torch.float64), atol=1e-6)


def test_empirical_tau_is_the_mean_over_rows():
    logits = torch.randn(2, 5, 50, generator=torch.Generator().manual_seed(3))
    assert tau.empirical_tau(logits) == pytest.approx(float(tau.entmax_threshold(logits).mean()))


def test_monte_carlo_is_seeded():
    first = tau.monte_carlo_tau(500, 0.5, 1.75, n_samples=20, seed=7)
    assert first == tau.monte_carlo_tau(500, 0.5, 1.75, n_samples=20, seed=7)
    assert first != tau.monte_carlo_tau(500, 0.5, 1.75, n_samples=20, seed=8)
    assert first.std > 0


@pytest.mark.parametrize("alpha", (1.5, 1.25))
def test_rows_that_are_not_finite_have_a_nan_threshold(alpha):
    """A diverged model's logits: NaN for rows with NaN or +inf (or only -inf), never an
    index error; -inf entries are simply outside the support."""
    logits = torch.randn(5, 7, dtype=torch.float64)
    clean = tau.entmax_threshold(logits, alpha)
    logits[0, 3], logits[1, 0], logits[2] = math.nan, math.inf, -math.inf
    logits[3, 2] = -math.inf
    got = tau.entmax_threshold(logits, alpha)
    assert got[:3].isnan().all()
    low = logits[3].clone()
    low[2] = -1e6  # as good as -inf: far outside the support
    assert float(got[3]) == pytest.approx(float(tau.entmax_threshold(low, alpha)), abs=1e-9)
    assert float(got[4]) == pytest.approx(float(clean[4]), abs=1e-12)
    assert math.isnan(tau.empirical_tau(logits.float(), alpha))


# --- the estimate as the former scipy implementation computed it ----------------------------

# arelu_cli.transforms.tau.analytic_tau before it moved here (scipy's quad and brentq, commit ad20252):
# (alpha, rule, d_vocab, sigma or d_model, tau).
PREVIOUS = [
    (1.1, 'paper', 460, 'd_model=512', -0.46452049664591016),
    (1.1, 'paper', 8000, 'd_model=512', -0.39402405982135585),
    (1.1, 'tail', 460, 'd_model=512', -0.4588616089280669),
    (1.1, 'tail', 8000, 'd_model=512', -0.39395586455935616),
    (1.25, 'paper', 460, 'd_model=512', 0.09922413947164366),
    (1.25, 'paper', 8000, 'd_model=512', -0.016864037401842953),
    (1.25, 'tail', 460, 'd_model=512', 0.12441433119509174),
    (1.25, 'tail', 8000, 'd_model=512', -0.016182836019672065),
    (1.5, 'paper', 460, 'd_model=512', 0.8892239352556414),
    (1.5, 'paper', 8000, 'd_model=512', 0.36065895576716606),
    (1.5, 'tail', 460, 'd_model=512', 0.9629092498424302),
    (1.5, 'tail', 8000, 'd_model=512', 0.3658807192595668),
    (1.75, 'paper', 460, 'd_model=512', 1.6398555541284112),
    (1.75, 'paper', 8000, 'd_model=512', 0.6973923811136392),
    (1.75, 'tail', 460, 'd_model=512', 1.762800749749612),
    (1.75, 'tail', 8000, 'd_model=512', 0.7105421329333645),
    (2.0, 'paper', 460, 'd_model=512', 2.3801130680880855),
    (2.0, 'paper', 8000, 'd_model=512', 1.0242315357975607),
    (2.0, 'tail', 460, 'd_model=512', 2.5476512109696383),
    (2.0, 'tail', 8000, 'd_model=512', 1.0462770979153269),
    (1.5, 'paper', 1000, 'sigma=0.5', 0.3926890151209611),
    (1.33, 'tail', 2000, 'sigma=2.0', 1.5451178940288126),
    (1.05, 'tail', 500, 'sigma=1.0', -0.7011113240369581),
    (1.05, 'paper', 500, 'sigma=1.0', -0.7030379179091435),
    (2.0, 'paper', 50, 'sigma=0.1', 0.040523569237106094),
]


@pytest.mark.parametrize("alpha, rule, d_vocab, scale, expected", PREVIOUS)
def test_same_numbers_as_the_former_scipy_implementation(alpha, rule, d_vocab, scale, expected):
    key, value = scale.split("=")
    kwargs = {"d_model": int(value)} if key == "d_model" else {"sigma": float(value)}
    got = tau.analytic_tau(d_vocab, alpha=alpha, rule=rule, **kwargs).tau
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("q", (-3.0, -0.4, 0.0, 1.7, 4.0))
@pytest.mark.parametrize("beta", (1.0, 2.0, 1 / 0.3, 10.0))
@pytest.mark.parametrize("upper", (2.5, math.inf))
def test_quadrature_matches_scipy(q, beta, upper):
    """The torch-only tanh-sinh rule against scipy's adaptive quad, independently."""
    scale = 0.7
    expected = 0.0 if q >= upper else integrate.quad(
        lambda z: (scale * (z - q)) ** beta * norm.pdf(z), q, min(upper, 40.0), epsabs=0.0,
        epsrel=1e-12, limit=200)[0]
    assert tau._scaled_moment(q, beta, scale, upper) == pytest.approx(expected, rel=1e-11,
                                                                     abs=1e-300)


def test_normal_helpers_match_scipy():
    for q in (-6.0, -1.0, 0.0, 0.3, 5.0, 12.0):
        assert tau._sf(q) == pytest.approx(norm.sf(q), rel=1e-13)
        assert tau._pdf(q) == pytest.approx(norm.pdf(q), rel=1e-13)
    for p in (1e-12, 1e-6, 1 / 60_000, 0.02, 0.5, 0.97):
        assert tau._isf(p) == pytest.approx(norm.isf(p), rel=1e-13, abs=1e-15)


def test_tau_for_takes_v_and_sigma_from_the_logits():
    logits = torch.randn(64, 2000, generator=torch.Generator().manual_seed(0)) * 0.6
    sigma = float(logits.double().std())
    assert tau.tau_for(logits) == tau.analytic_tau(2000, sigma=sigma).tau
    assert tau.tau_for(logits, alpha=1.75, rule="tail") == \
        tau.analytic_tau(2000, sigma=sigma, alpha=1.75, rule="tail").tau
    # and it predicts the exact mean threshold of such logits (Gaussian, as untrained ones)
    assert tau.tau_for(logits, rule="tail") == pytest.approx(tau.empirical_tau(logits), abs=0.02)


def test_the_loss_module_freezes_the_analytic_tau_at_its_first_call():
    from arelu_cli.transforms import AlphaReLULoss, alpha_relu_loss

    gen = torch.Generator().manual_seed(1)
    first, later = torch.randn(8, 300, generator=gen), torch.randn(8, 300, generator=gen) * 3
    y = torch.randint(0, 300, (8,), generator=gen)
    module = AlphaReLULoss(alpha=1.5, tau="analytic")
    assert module.tau is None
    torch.testing.assert_close(module(first, y), alpha_relu_loss(first, y, 1.5, tau.tau_for(first)))
    frozen = module.tau
    module(later, y)
    assert module.tau == frozen == tau.tau_for(first)
    with pytest.raises(ValueError, match="tau must be a number or 'analytic'"):
        AlphaReLULoss(tau="auto")


# --- bad arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: tau.analytic_tau(1000, d_model=512, alpha=1.0), r"alpha 1.0 is outside \[1.05, 2\]"),
    (lambda: tau.analytic_tau(1000, d_model=512, alpha=1.04), r"alpha 1.04 is outside"),
    (lambda: tau.analytic_tau(1000, d_model=512, alpha=2.5), r"alpha 2.5 is outside"),
    (lambda: tau.analytic_tau(1, d_model=512), r"d_vocab must be an integer >= 2"),
    (lambda: tau.analytic_tau(100.5, d_model=512), r"d_vocab must be an integer >= 2"),
    (lambda: tau.analytic_tau(1000, sigma=0.0), r"sigma .* must be positive"),
    (lambda: tau.analytic_tau(1000, sigma=-1.0), r"sigma .* must be positive"),
    (lambda: tau.analytic_tau(1000, sigma=math.nan), r"sigma .* must be positive"),
    (lambda: tau.analytic_tau(1000), r"give sigma .* or d_model"),
    (lambda: tau.logit_sigma(0, 1000), r"d_model must be a positive integer"),
    (lambda: tau.analytic_tau(1000, sigma=1.0, rule="midpoint"), r"rule must be one of"),
    (lambda: tau.monte_carlo_tau(1000, 1.0, 1.5, n_samples=1), r"n_samples must be"),
    (lambda: tau.entmax_threshold(torch.zeros(3, 1)), r"vocabulary\) dimension of size >= 2"),
    (lambda: tau.tau_for(torch.zeros(3, 1)), r"vocabulary\) dimension of size >= 2"),
])
def test_bad_arguments_are_value_errors(call, message):
    with pytest.raises(ValueError, match=message) as raised:
        call()
    assert type(raised.value) is ValueError  # the library's own, not the CLI's UserError


def test_monte_carlo_refuses_a_vocabulary_it_cannot_hold_before_allocating():
    """``--d-vocab 1000000000 --method monte-carlo`` is refused before it allocates (it
    would be a raw RuntimeError under a memory limit)."""
    with pytest.raises(ValueError, match=r"it takes d_vocab up to 10,000,000: use --method "
                                        r"analytic for larger vocabularies"):
        tau.monte_carlo_tau(10**9, 0.5, 1.5, n_samples=2)
    assert tau.monte_carlo_tau(tau.MAX_MONTE_CARLO_VOCAB // 1000, 0.5, n_samples=2).n_samples == 2
