"""Rows of the paper's Table 3 (tau for alpha-ReLU) and of its alpha x d_vocab extension.

One row per (d_vocab, alpha, rule): the analytic estimate of :mod:`arelu_cli.transforms.tau`
and/or the Monte Carlo mean and spread of the exact alpha-entmax threshold of Gaussian logits
(:func:`tau_rows`), or the empirical tau of a real corpus through the untrained model of a
recipe, beside the analytic one (:func:`empirical_rows`, the paper's tau-tilde), ready for
:func:`arelu_cli.util.results.write_rows` and :func:`print_table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import pandas as pd
import torch
from rich.console import Console
from rich.table import Table

from arelu_cli.transforms import tau as tau_lib
from arelu_cli.config import Config
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model.lm import build_model
from arelu_cli.model.output_stats import first_batch_taus
from arelu_cli.util.signatures import signature

METHODS = ("analytic", "monte-carlo", "empirical", "both", "all")
"""``both`` is empirical beside analytic (the paper's Table 3); ``all`` is analytic beside
Monte Carlo, everything that needs no model."""


def _check(method: str, d_vocabs: Sequence[int], alphas: Sequence[float], rules: Sequence[str],
           d_model: Optional[int], sigma: Optional[float], n_samples: int) -> None:
    """Every argument, before any minute is spent on Monte Carlo."""
    if method not in METHODS:
        raise UserError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if method in ("empirical", "both"):
        raise UserError(f"--method {method} needs a model and data: give --recipe or --data "
                        "(the first training batches go through the untrained model)")
    for d_vocab in d_vocabs:
        tau_lib.check_d_vocab(d_vocab)
    for alpha in alphas:
        tau_lib.check_alpha(alpha)
    for rule in rules:
        if rule not in tau_lib.RULES:
            raise UserError(f"--rule must be one of {', '.join(tau_lib.RULES)}, got {rule!r}")
    if sigma is not None:
        tau_lib.check_sigma(sigma)
    elif d_model is None:
        raise UserError("give --d-model (sigma^2 = 2 d_model / (d_model + d_vocab)) or --sigma")
    if method in ("monte-carlo", "all") and n_samples < 2:
        raise UserError(f"--samples must be >= 2 (a spread needs two), got {n_samples}")


def _monte_carlo_label(alpha: float) -> str:
    """How the exact thresholds were found (the seed and count are in their own columns)."""
    if alpha == 1.5:
        return "monte-carlo:sort"
    return f"monte-carlo:bisection-{tau_lib.BISECTION_TOL:g}"


def tau_rows(method: str, d_vocabs: Sequence[int], alphas: Sequence[float],
             rules: Sequence[str] = ("paper",), d_model: Optional[int] = 512,
             sigma: Optional[float] = None, n_samples: int = 1000, seed: int = 0) -> list[dict]:
    """Rows for every (d_vocab, alpha[, rule]); ``sigma`` overrides ``d_model``.

    Monte Carlo runs once per (d_vocab, alpha) and is shared by the rules; with
    ``method="monte-carlo"`` there is one row per (d_vocab, alpha) and no analytic column.
    """
    _check(method, d_vocabs, alphas, rules, d_model, sigma, n_samples)
    analytic, monte_carlo = method in ("analytic", "all"), method in ("monte-carlo", "all")
    rows = []
    for d_vocab in d_vocabs:
        scale = sigma if sigma is not None else tau_lib.logit_sigma(d_model, d_vocab)
        for alpha in alphas:
            mc = (tau_lib.monte_carlo_tau(d_vocab, scale, alpha, n_samples, seed)
                  if monte_carlo else None)
            for rule in rules if analytic else (None,):
                est = (tau_lib.analytic_tau(d_vocab, sigma=scale, alpha=alpha, rule=rule)
                       if rule else None)
                labels = ([f"analytic:{rule}"] if est else []) + (
                    [_monte_carlo_label(alpha)] if mc else [])
                rows.append({
                    "corpus": None,
                    "d_model": d_model if sigma is None else None,
                    "d_vocab": d_vocab, "alpha": alpha, "sigma": scale,
                    "p_star": est.p_star if est else None,
                    "tau_empirical": None,
                    "tau_analytic": est.tau if est else None,
                    "tau_monte_carlo": mc.mean if mc else None,
                    "tau_monte_carlo_std": mc.std if mc else None,
                    "n_samples": n_samples if mc else None,
                    "seed": seed if mc else None,
                    "method": " + ".join(labels),
                    "signature": signature(
                        transform=f"{alpha:g}-entmax", alpha=alpha, data="gaussian-logits",
                        seed=seed if mc else None, d_model=d_model if sigma is None else None,
                        d_vocab=d_vocab, sigma=scale, rule=rule,
                        n=n_samples if mc else None),
                })
    return rows


def _first_batch_taus(config: Config, alphas: Sequence[float], batches: int):
    """tau-tilde per alpha of the recipe's untrained model (seeded as training seeds it) on
    the first ``batches`` training batches (:func:`arelu_cli.model.output_stats.first_batch_taus`,
    what ``tau = "auto"`` trains with); the prepared corpus and the number of positions."""
    data = load_prepared(config.data.path)
    torch.manual_seed(config.train.seed)
    model = build_model(config, data.src_vocab_size, data.tgt_vocab_size, data.pad_id)
    taus, rows = first_batch_taus(model, data, config.data.max_tokens, config.train.seed,
                                  list(alphas), batches, config.data.block_size)
    return data, taus, rows


def empirical_rows(method: str, config: Config, alphas: Sequence[float],
                   rules: Sequence[str] = ("paper",), batches: int = 1) -> list[dict]:
    """``empirical``: the paper's tau-tilde of the recipe's model and corpus, one row per
    alpha; ``both``: beside the analytic estimate for the same d_model and d_vocab."""
    if method not in ("empirical", "both"):
        raise UserError(f"empirical rows are for --method empirical or both, not {method!r}")
    if batches < 1:
        raise UserError(f"--batches must be >= 1, got {batches}")
    for alpha in alphas:
        tau_lib.check_alpha(alpha)
    data, taus, n_rows = _first_batch_taus(config, alphas, batches)
    d_model, d_vocab = config.model.d_model, data.vocab_size
    sigma = tau_lib.logit_sigma(d_model, d_vocab)
    out = []
    for alpha, tau_tilde in zip(alphas, taus):
        for rule in rules if method == "both" else (None,):
            est = tau_lib.analytic_tau(d_vocab, sigma=sigma, alpha=alpha, rule=rule) if rule else None
            out.append({
                "corpus": data.corpus, "d_model": d_model, "d_vocab": d_vocab, "alpha": alpha,
                "sigma": sigma, "p_star": est.p_star if est else None, "tau_empirical": tau_tilde,
                "tau_analytic": est.tau if est else None, "tau_monte_carlo": None,
                "tau_monte_carlo_std": None, "n_samples": n_rows, "seed": config.train.seed,
                "method": f"empirical:{batches}-batch" + (f" + analytic:{rule}" if est else ""),
                "signature": signature(transform=f"{alpha:g}-entmax", alpha=alpha,
                                       data=data.corpus, seed=config.train.seed, d_model=d_model,
                                       d_vocab=d_vocab, batches=batches, rule=rule),
            })
    return out


def _fmt(value: object) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.4f}"


def print_table(frame: pd.DataFrame, console: Console) -> None:
    """The rows as a rich table: p*, analytic tau and Monte Carlo mean ± std."""
    d_model = frame["d_model"].dropna()
    logits = f"d_model {int(d_model.iloc[0])}" if len(d_model) else "given σ"
    table = Table(title=f"threshold τ of α-entmax, N(0, σ²) logits, {logits} (paper Table 3)")
    for col in ("corpus", "d_vocab", "α", "σ", "p*", "τ empirical", "τ analytic", "τ MC ± std"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("method", overflow="fold")
    for r in frame.to_dict("records"):
        mc = ("-" if pd.isna(r["tau_monte_carlo"]) else
              f"{r['tau_monte_carlo']:.4f}±{r['tau_monte_carlo_std']:.4f}")
        corpus = "-" if pd.isna(r["corpus"]) else r["corpus"]
        table.add_row(corpus, f"{int(r['d_vocab']):,}", f"{r['alpha']:g}", _fmt(r["sigma"]),
                      "-" if pd.isna(r["p_star"]) else f"{r['p_star']:.4g}",
                      _fmt(r["tau_empirical"]), _fmt(r["tau_analytic"]), mc, r["method"])
    console.print(table)
