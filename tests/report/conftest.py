"""Synthetic training run folders (config.json + log.csv) for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arelu_cli.train_log import append_row


def write_run(folder: Path, transform: str, tau: float | None = None, steps: int = 40,
              valid_every: int = 20, world_size: int = 1, bleu_gain: float = 1.0) -> Path:
    """A run logging every 10 steps (2 s and 1000 tokens/s each), validating every
    ``valid_every`` steps with BLEU ``bleu_gain * step / 10``; ||z|| grows by 1 per row,
    1.5-entmax's tau(z) by 0.01, alpha-ReLU's tau is fixed."""
    folder.mkdir(parents=True)
    config = {"data": {"path": "data/toy"}, "train": {"transform": transform, "tau": tau},
              "resolved": {"tau": tau, "world_size": world_size}}
    (folder / "config.json").write_text(json.dumps(config))
    sig = f"transform:{transform}|data:toy|recipe:toy|seed:1"
    for i, step in enumerate(range(10, steps + 1, 10)):
        tau_z = 0.2 + 0.01 * i
        row = {"step": step, "epoch": step / 100, "wall_s": 2.0 * step / 10,
               "tokens_per_s": 1000.0 + i, "train_loss": 5.0 - 0.1 * i, "lr": 1e-3,
               "tau": tau if "relu" in transform else (tau_z if "entmax" in transform else None),
               "tau_z": tau_z, "logit_norm": 10.0 + i, "sum_p": 1.0, "nnz": 50.0,
               "signature": sig}
        if step % valid_every == 0:
            row |= {"val_loss": 4.0 - 0.1 * i, "val_bleu": bleu_gain * step / 10}
        append_row(folder / "log.csv", row)
    return folder


@pytest.fixture
def run_folder():
    """``run_folder(folder, transform, tau=None, **kw)``: write a synthetic run there."""
    return write_run


def write_all_csvs(folder: Path) -> Path:
    """Every CSV of the catalog, small, built by the report's own builders."""
    from arelu_cli.report import distributions, examples, runs, tables
    from arelu_cli.report.columns import write_csv
    from arelu_cli.report.curves import alpha_relu_curve_rows

    main = [runs.load_run(write_run(folder / "runs" / t, t, tau=tau, bleu_gain=g))
            for t, tau, g in (("softmax", None, 1.0), ("1.5-entmax", None, 1.05),
                              ("1.5-relu", 0.33, 1.1))]
    sweep = [runs.load_run(write_run(folder / "tau-sweep" / f"tau-{t}", "1.5-relu", tau=t))
             for t in (0.1, 1.0)]
    corpus = "iwslt14"
    scores = {"softmax": 35.1, "sparsemax": 33.0, "1.5-entmax": 36.5, "1.5-relu": 37.0}
    sums = {"1.5-relu": [1.2, 1.25, 1.3, 1.22]}
    built = {
        "table1_bleu.csv": tables.table1_rows(corpus, {t: tables.BleuScore(b) for t, b in scores.items()}),
        "table2_empty.csv": tables.table2_rows(corpus, {"softmax": tables.EmptyCount(3, 40),
                                                        "1.5-relu": tables.EmptyCount(0, 40)}),
        "table3_tau.csv": tables.table3_rows(),
        "training_time.csv": runs.training_time_rows(main, gpu_watts=250.0),
        "fig_alpha_relu_curves.csv": alpha_relu_curve_rows(points=21),
        "fig_training_dynamics.csv": runs.training_dynamics_rows(main),
        "fig_tau_norm_evolution.csv": runs.tau_norm_rows(main),
        "fig_tau_sweep.csv": runs.tau_sweep_rows(sweep),
        "fig_inference_time.csv": tables.inference_time_rows(corpus, {
            ("softmax", 1): 10.0, ("1.5-entmax", 1): 19.0, ("1.5-relu", 1): 10.5,
            ("softmax", 5): 20.0, ("1.5-entmax", 5): 39.0, ("1.5-relu", 5): 21.0}),
        "fig_sparsity.csv": distributions.sparsity_rows(corpus, "test", {
            "1.5-relu": [0.90, 0.95], "1.5-entmax": [0.99, 0.999]}, bins=4),
        "fig_self_norm.csv": distributions.self_norm_rows(corpus, "test", sums, bins=3),
        "translation_examples.csv": examples.translation_examples_rows(
            ["a b c", "d e f"], ["x y z", "u v w"], "1.5-relu", ["x y z", "u"],
            "1.5-entmax", ["x", "u v w"]),
        "table_human_eval.csv": [{"system": "reference", "n": 10, "mean": 3.9, "std": 0.3},
                                 {"system": "softmax", "n": 10, "mean": 3.0, "std": 0.7}],
        "human_eval_kappa.csv": [{"annotator_a": "a1", "annotator_b": "a2", "n_items": 5,
                                  "n_judgements": 15, "kappa": 0.5, "kappa_linear": 0.6}],
    }
    for name, rows in built.items():
        write_csv(rows, folder, name)
    return folder


@pytest.fixture
def all_csvs(tmp_path) -> Path:
    """A results folder holding every CSV of the catalog (and the runs they came from)."""
    return write_all_csvs(tmp_path / "results")
