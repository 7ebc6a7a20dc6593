"""Tests for arelu_cli.transforms.tau (the taus alpha-ReLU can train with) and the tau table/CLI."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.transforms import tau
from arelu_cli.analysis import tau_table
from arelu_cli.cli import app
from arelu_cli.util.errors import UserError
from arelu_cli.util.options import parse_list


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
    with pytest.raises(ValueError, match=r"is impossible for 1.5-relu: with a vocabulary of 460 "
                       r"and batches of 256 tokens its float32 loss is finite only for tau in "
                       r"\[-\S+, \S+\] \(logits within \+-10\); give a tau in that range"):
        tau.check_relu_tau(value, "1.5-relu", 1.5, 460, 256)
    assert tau.check_relu_tau(-3.0, "1.5-relu", 1.5, 460, 256) == -3.0


# --- bad arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: tau_table.tau_rows("empirical", [1000], [1.5]), r"needs a model and data: give --recipe"),
    (lambda: tau_table.tau_rows("both", [1000], [1.5]), r"needs a model and data"),
    (lambda: tau_table.tau_rows("exact", [1000], [1.5]), r"--method must be one of"),
    (lambda: parse_list("10k", int, "--d-vocab"), r"--d-vocab takes comma-separated integers"),
])
def test_bad_arguments_are_user_errors(call, message):
    with pytest.raises(UserError, match=message):
        call()


def test_cli_refuses_a_bad_alpha_in_one_line(tmp_path, capsys, monkeypatch):
    from arelu_cli.cli import main

    monkeypatch.setattr("sys.argv", ["arelu", "estimate-tau", "--alpha", "1.01",
                                     "--out", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and "\n" not in err and "Traceback" not in err
    assert "alpha 1.01 is outside [1.05, 2]" in err and not (tmp_path / "x.csv").exists()


# --- table and CLI -------------------------------------------------------------------------

COLUMNS = ["corpus", "d_model", "d_vocab", "alpha", "sigma", "p_star", "tau_empirical",
           "tau_analytic", "tau_monte_carlo", "tau_monte_carlo_std", "n_samples", "seed",
           "method", "signature"]


def test_cli_default_writes_table3(tmp_path):
    out = tmp_path / "table3_tau.csv"
    result = CliRunner().invoke(app, ["estimate-tau", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame.columns) == COLUMNS
    assert frame["d_vocab"].tolist() == [10_000, 40_000, 60_000]
    assert frame["tau_analytic"].round(2).tolist() == [0.33, 0.17, 0.14]
    assert frame["signature"].str.contains("d_model:512").all()
    assert frame["seed"].isna().all()  # analytic rows draw nothing


def test_cli_all_methods_grid(tmp_path):
    out = tmp_path / "grid.csv"
    result = CliRunner().invoke(app, [
        "estimate-tau", "--method", "all", "--d-vocab", "500,2000", "--alpha", "1.5,2",
        "--rule", "paper,tail", "--samples", "8", "--sigma", "0.4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert len(frame) == 2 * 2 * 2
    assert frame["d_model"].isna().all() and (frame["sigma"] == 0.4).all()
    assert (frame["seed"] == 0).all()  # the Monte Carlo draws' seed, in its column
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
