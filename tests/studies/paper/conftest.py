"""Synthetic training run folders (config.json + log.csv) for the report tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from arelu_cli.config import Config, load_config

from arelu_cli.train.log import append_row


def write_run(folder: Path, transform: str, tau: float | None = None, steps: int = 40,
              valid_every: int = 20, world_size: int = 1, bleu_gain: float = 1.0,
              seed: int = 1, data: str | None = None, fingerprint: str | None = None,
              corpus: str = "toy") -> Path:
    """A run logging every 10 steps (2 s and 1000 tokens/s each), validating every
    ``valid_every`` steps with BLEU ``bleu_gain * step / 10``; ||z|| grows by 1 per row,
    1.5-entmax's tau(z) by 0.01, alpha-ReLU's tau is fixed. Trained on ``corpus`` in the
    prepared folder ``data`` (default ``data/CORPUS``), whose data fingerprint it records
    when one is given."""
    folder.mkdir(parents=True)
    resolved = {"tau": tau, "world_size": world_size}
    resolved |= {"data_fingerprint": fingerprint} if fingerprint is not None else {}
    config = {"data": {"path": data or f"data/{corpus}"},
              "train": {"transform": transform, "tau": tau if tau is not None else "auto",
                        "seed": seed}, "resolved": resolved}
    (folder / "config.json").write_text(json.dumps(config))
    sig = f"transform:{transform}|data:{corpus}|recipe:toy|seed:{seed}"
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


REFS = ["the cat sat on the mat", "a red car drove by", "hello world how are you",
        "good morning to you all", "it is raining again today", "we went to the beach"]
HYPS = {"softmax": ["the cat sat on a mat", "a blue car drove", "hello world how are you",
                    "good morning to you", "it rains today", "we go to the beach"],
        "1.5-relu": ["the cat sat on the mat", "a red car drove by", "hello world how are you",
                     "good morning to you all", "it is raining today", "we went to a beach"]}


def significance_csv_rows(corpus: str, seeds: tuple[int, ...]) -> list[dict]:
    """Paired bootstrap rows of a tiny fixed test set: per seed, and joined for several."""
    from arelu_cli.studies.translation import bootstrap_rows, seed_groups
    from arelu_cli.studies.paper import tables

    hyps = {(n, s): lines for n, lines in HYPS.items() for s in seeds}
    tests = bootstrap_rows([(n, "softmax") for n in HYPS], hyps, REFS,
                           seed_groups(seeds, "+".join(map(str, seeds))), samples=200)
    return tables.significance_rows(corpus, tests, {})


def _cell(name: str, seed: int, seeds: tuple[int, ...]) -> str:
    return name if len(seeds) == 1 else f"{name}/seed-{seed}"


def write_all_csvs(folder: Path, seeds: tuple[int, ...] = (1,)) -> Path:
    """Every CSV of the catalog, small, built by the report's own builders: one training
    seed, or several (runs in ``seed-S`` folders, numbers that change a little per seed)."""
    from arelu_cli.studies.paper import build, distributions, examples, runs, tables
    from arelu_cli.studies.paper.columns import COLUMNS
    from arelu_cli.util.results import write_rows
    from arelu_cli.studies.paper.alpha_relu_graph import alpha_relu_curve_rows

    corpus, built = "iwslt14", {name: [] for name in (
        "table1_bleu.csv", "table2_empty.csv", "fig_inference_time.csv", "fig_sparsity.csv",
        "fig_self_norm.csv")}
    for seed in seeds:
        d = 0.1 * (seed - seeds[0])
        for t, tau, g in (("softmax", None, 1.0), ("1.5-entmax", None, 1.05),
                          ("1.5-relu", 0.33, 1.1)):
            write_run(folder / "runs" / _cell(t, seed, seeds), t, tau=tau, bleu_gain=g + d,
                      seed=seed)
        for t in (0.1, 1.0):
            write_run(folder / "tau-sweep" / _cell(f"tau-{t}", seed, seeds), "1.5-relu", tau=t,
                      seed=seed, bleu_gain=1.0 + d)
        scores = {"softmax": 35.1, "sparsemax": 33.0, "1.5-entmax": 36.5, "1.5-relu": 37.0 + d}
        built["table1_bleu.csv"] += [tables.table1_row(corpus, t, b, seed=seed)
                                     for t, b in scores.items()]
        built["table2_empty.csv"] += [
            tables.table2_row(corpus, "softmax", 3 + seed - seeds[0], 40, seed=seed),
            tables.table2_row(corpus, "1.5-relu", 0, 40, seed=seed)]
        built["fig_inference_time.csv"] += tables.inference_time_rows(corpus, {
            ("softmax", 1): 10.0, ("1.5-entmax", 1): 19.0, ("1.5-relu", 1): 10.5 + d,
            ("softmax", 5): 20.0, ("1.5-entmax", 5): 39.0, ("1.5-relu", 5): 21.0}, seed=seed)
        built["fig_sparsity.csv"] += distributions.sparsity_rows(corpus, "test", {
            "1.5-relu": [0.90, 0.95 - d / 10], "1.5-entmax": [0.99, 0.999]}, bins=4, seed=seed)
        built["fig_self_norm.csv"] += distributions.self_norm_rows(
            corpus, "test", {"1.5-relu": [1.2, 1.25 + d, 1.3, 1.22]}, bins=3, seed=seed)
    main, sweep = runs.load_runs(folder / "runs"), runs.load_runs(folder / "tau-sweep")
    built |= {
        "table1_significance.csv": significance_csv_rows(corpus, seeds),
        "table3_tau.csv": tables.table3_rows(),
        "training_time.csv": runs.training_time_rows(main, gpu_watts=250.0),
        "fig_alpha_relu_curves.csv": alpha_relu_curve_rows(points=21),
        "fig_training_dynamics.csv": runs.training_dynamics_rows(main),
        "fig_tau_norm_evolution.csv": runs.tau_norm_rows(main),
        "fig_tau_sweep.csv": runs.tau_sweep_rows(sweep),
        "translation_examples.csv": examples.translation_examples_rows(
            ["a b c", "d e f"], ["x y z", "u v w"], "1.5-relu", ["x y z", "u"],
            "1.5-entmax", ["x", "u v w"]),
        "table_human_eval.csv": [{"system": "reference", "n": 10, "mean": 3.9, "std": 0.3},
                                 {"system": "softmax", "n": 10, "mean": 3.0, "std": 0.7}],
        "human_eval_kappa.csv": [{"annotator_a": "a1", "annotator_b": "a2", "n_items": 5,
                                  "n_judgements": 15, "kappa": 0.5, "kappa_linear": 0.6}],
    }
    for name, rows in built.items():
        write_rows(rows, folder / name, COLUMNS[name])
    write_rows(build.seed_summary_table(folder).rows, folder / "seed_summary.csv",
               COLUMNS["seed_summary.csv"])
    write_record(folder, seeds=seeds)
    return folder


def write_record(folder: Path, data: str | None = None, transforms: tuple[str, ...] | None = None,
                 taus: tuple[float, ...] = (0.1, 1.0), seeds: tuple[int, ...] = (1,),
                 gpu_watts: float = 0.0, corpus: str = "toy") -> Config:
    """The study record of a paper grid in ``folder``: its data, transforms, taus, seeds."""
    from arelu_cli.studies.contract import write_record as record

    given = {("data", "path"): str(data or f"data/{corpus}"), ("train", "seed"): seeds[0],
             ("reproduce", "tau_sweep"): list(taus), ("reproduce", "gpu_watts"): gpu_watts,
             ("reproduce", "seeds"): list(seeds) if len(seeds) > 1 else [],
             ("study", "kind"): "paper"}
    if transforms is not None:
        given[("reproduce", "transforms")] = list(transforms)
    config = load_config(None, given)
    folder.mkdir(parents=True, exist_ok=True)
    record(folder, "paper", "test", config)
    return config


@dataclass
class Done:
    """What a report of a paper grid wrote, and its notes."""

    report: Path
    notes: list[str]
    pngs: list[Path]


@pytest.fixture
def regenerate():
    """``regenerate(folder, **record)``: record the grid (:func:`write_record`), then
    ``arelu report`` the folder."""
    from arelu_cli.studies.paper.build import tables_of
    from arelu_cli.studies.runner import report

    def go(folder: Path, **record) -> Done:
        config = write_record(folder, **record)
        done = report(folder)
        return Done(done, tables_of(config, folder).notes, sorted(folder.glob("*.png")))
    return go


@pytest.fixture
def all_csvs(tmp_path) -> Path:
    """A results folder holding every CSV of the catalog (and the runs they came from)."""
    return write_all_csvs(tmp_path / "results")


@pytest.fixture
def seeded_csvs(tmp_path) -> Path:
    """The same with three training seeds (1, 2, 3)."""
    return write_all_csvs(tmp_path / "seeded", seeds=(1, 2, 3))
