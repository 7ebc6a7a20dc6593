"""Tests for arelu_cli.tau and its table/CLI: the paper's Table 3, exact thresholds,
the alpha-generalized analytic estimate against Monte Carlo, and argument checks."""

from __future__ import annotations

import math

import entmax
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import norm
from typer.testing import CliRunner

from arelu_cli import tau
from arelu_cli.analysis import tau_table
from arelu_cli.cli import app
from arelu_cli.errors import UserError
from arelu_cli.options import parse_list

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


@pytest.mark.parametrize("alpha", (1.01, 1.1, 1.5, 2.0))
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


@pytest.mark.parametrize("alpha", (1.05, 1.25, 1.5, 2.0))
def test_relu_tau_range_is_where_the_float32_loss_is_finite(alpha):
    """Just inside the range the float32 loss of the worst batch (logits all at +Z for the
    low end, the target's at -Z for the high end) is finite; just outside it is not."""
    from arelu_cli.transforms import alpha_relu_loss

    vocab, tokens = 100, 64
    low, high = tau.relu_tau_range(alpha, vocab, tokens)
    assert low < 0 < high
    target = torch.zeros(tokens, dtype=torch.long)

    def batch_loss(tau_value: float, logit: float) -> float:
        logits = torch.full((tokens, vocab), logit)
        rows = alpha_relu_loss(logits, target, alpha, tau_value, reduction="none")
        return float(rows.sum(dtype=torch.float32))

    z = tau.LOGIT_BOUND
    assert math.isfinite(batch_loss(low * 0.99, z)) and math.isinf(batch_loss(low * 1.01, z))
    assert math.isfinite(batch_loss(high * 0.99, -z)) and math.isinf(batch_loss(high * 1.01, -z))


@pytest.mark.parametrize("value", (math.nan, math.inf, -math.inf, 1e308, -1e30))
def test_impossible_taus_are_refused_with_the_valid_range(value):
    with pytest.raises(UserError, match=r"is impossible for 1.5-relu: with a vocabulary of 460 "
                       r"and batches of 256 tokens its float32 loss is finite only for tau in "
                       r"\[-\S+, \S+\] \(logits within \+-10\); give a tau in that range"):
        tau.check_relu_tau(value, "1.5-relu", 1.5, 460, 256)
    assert tau.check_relu_tau(-3.0, "1.5-relu", 1.5, 460, 256) == -3.0


# --- bad arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: tau.analytic_tau(1000, d_model=512, alpha=1.0), r"alpha must lie in \(1, 2\]"),
    (lambda: tau.analytic_tau(1000, d_model=512, alpha=0.5), r"alpha must lie in \(1, 2\]"),
    (lambda: tau.analytic_tau(1000, d_model=512, alpha=2.5), r"alpha must lie in \(1, 2\]"),
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
    (lambda: tau_table.tau_rows("empirical", [1000], [1.5]), r"needs a model and data: give --recipe"),
    (lambda: tau_table.tau_rows("both", [1000], [1.5]), r"needs a model and data"),
    (lambda: tau_table.tau_rows("exact", [1000], [1.5]), r"--method must be one of"),
    (lambda: parse_list("10k", int, "--d-vocab"), r"--d-vocab takes comma-separated integers"),
])
def test_bad_arguments_are_user_errors(call, message):
    with pytest.raises(UserError, match=message):
        call()


# --- table and CLI -------------------------------------------------------------------------

COLUMNS = ["corpus", "d_model", "d_vocab", "alpha", "sigma", "p_star", "tau_empirical",
           "tau_analytic", "tau_monte_carlo", "tau_monte_carlo_std", "n_samples", "method",
           "signature"]


def test_cli_default_writes_table3(tmp_path):
    out = tmp_path / "table3_tau.csv"
    result = CliRunner().invoke(app, ["estimate-tau", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame.columns) == COLUMNS
    assert frame["d_vocab"].tolist() == [10_000, 40_000, 60_000]
    assert frame["tau_analytic"].round(2).tolist() == [0.33, 0.17, 0.14]
    assert frame["signature"].str.contains("d_model:512").all()


def test_cli_all_methods_grid(tmp_path):
    out = tmp_path / "grid.csv"
    result = CliRunner().invoke(app, [
        "estimate-tau", "--method", "all", "--d-vocab", "500,2000", "--alpha", "1.5,2",
        "--rule", "paper,tail", "--samples", "8", "--sigma", "0.4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert len(frame) == 2 * 2 * 2
    assert frame["d_model"].isna().all() and (frame["sigma"] == 0.4).all()
    assert frame[["tau_analytic", "tau_monte_carlo", "tau_monte_carlo_std"]].notna().all().all()
    assert (frame["n_samples"] == 8).all()


def test_cli_empirical_needs_a_recipe_or_data(tmp_path):
    result = CliRunner().invoke(app, ["estimate-tau", "--method", "empirical",
                                      "--out", str(tmp_path / "x.csv")])
    assert isinstance(result.exception, UserError) and "--recipe" in str(result.exception)
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("method, rows", [("empirical", 1), ("both", 2)])
def test_cli_empirical_beside_analytic(tiny_corpus, tmp_path, method, rows):
    """The paper's tau-tilde (first batch through the untrained model) next to tau-hat."""
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[data]\npath = "{tiny_corpus}"\nmax_tokens = 256\n'
                      "[model]\nd_model = 64\nencoder_layers = 1\ndecoder_layers = 1\n"
                      "heads = 2\nd_ff = 64\n")
    out = tmp_path / "t.csv"
    result = CliRunner().invoke(app, ["estimate-tau", "--method", method, "--recipe", str(recipe),
                                      "--rule", "paper,tail" if method == "both" else "paper",
                                      "--batches", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame.columns) == COLUMNS and len(frame) == rows
    assert (frame["corpus"] == "toy").all() and (frame["d_model"] == 64).all()
    assert frame["tau_empirical"].between(0.0, 1.0).all() and (frame["n_samples"] > 0).all()
    if method == "both":
        # empirical and analytic agree to about two decimals, as in the paper's Table 3
        assert (frame["tau_empirical"] - frame["tau_analytic"]).abs().max() < 0.03


def test_monte_carlo_refuses_a_vocabulary_it_cannot_hold_before_allocating():
    """Issue 30: ``--d-vocab 1000000000 --method monte-carlo`` allocated 8 GB at once (a raw
    RuntimeError under a memory limit)."""
    with pytest.raises(UserError, match=r"it takes d_vocab up to 10,000,000: use --method "
                                        r"analytic for larger vocabularies"):
        tau.monte_carlo_tau(10**9, 0.5, 1.5, n_samples=2)
    assert tau.monte_carlo_tau(tau.MAX_MONTE_CARLO_VOCAB // 1000, 0.5, n_samples=2).n_samples == 2
