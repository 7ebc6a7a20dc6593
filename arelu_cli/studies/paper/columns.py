"""The catalog of the reproduction's CSVs: fixed file names, the paper item each redraws, and
every column documented. Writers hand :data:`COLUMNS` of their file to
:func:`arelu_cli.util.results.write_rows`, which refuses rows whose columns differ from it.

Every CSV has one row per measurement and ends with ``signature`` (transform, alpha, tau,
data, recipe, seed, versions: :func:`arelu_cli.util.signatures.signature`) unless said otherwise.
A grid trained with several seeds has one row per (transform, seed) -- the ``seed``
column -- and ``seed_summary.csv`` aggregates them (mean, std, n). The section below is generated from :data:`CATALOG`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pandas as pd

from arelu_cli.util.errors import UserError

SIGNATURE = "run signature: transform, alpha, tau, data, recipe, seed, package versions"
SEED = "training seed of the run (empty when unknown)"
RUN = "run folder under runs/ or tau-sweep/ (TRANSFORM, or TRANSFORM/seed-S with several seeds)"
HIST = {"bin_left": "left edge of the histogram bin", "bin_right": "right edge of the bin",
        "count": "decoding steps in the bin", "fraction": "count / all steps of the transform"}


@dataclass(frozen=True)
class CsvSpec:
    """One CSV of the reproduction: what it redraws and its columns in order."""

    paper: str
    """The paper's table or figure (its LaTeX label) this file holds the numbers of."""
    columns: Mapping[str, str]
    """Column name -> what it holds (units included)."""


CATALOG: dict[str, CsvSpec] = {
    "table1_bleu.csv": CsvSpec("Table 1 (tab:nmt_results): detokenized test BLEU", {
        "corpus": "prepared corpus name (iwslt14, wmt14-en-de, wmt13-en-ru, toy, ...)",
        "transform": "output transform (registry name, e.g. 1.5-relu)", "seed": SEED,
        "split": "scored split (test)", "bleu": "detokenized case-sensitive BLEU (sacrebleu)",
        "chrf": "chrF (sacrebleu), empty if not computed",
        "bleu_signature": "sacrebleu's own metric signature", "signature": SIGNATURE}),
    "table1_significance.csv": CsvSpec(
        "Table 1 (tab:nmt_results): each transform vs the baseline, paired bootstrap "
        "(sacrebleu's --paired-bs, Koehn 2004; arelu_cli.analysis.significance)", {
            "corpus": "prepared corpus name", "transform": "output transform",
            "baseline": "the transform tested against (softmax when in the grid)",
            "seeds": "the training seed of both sides (same seed), or S1+S2+... for the test "
            "on the seeds' outputs concatenated (each seed's test set once; a resample draws test "
            "sentences, each with all the seeds' translations of it)",
            "split": "test", "sentences": "test sentences resampled",
            "bleu": "the transform's BLEU on them", "bleu_mean": "mean of its resampled BLEU",
            "bleu_low": "95% interval of its BLEU: 2.5% point of the resamples, re-centred on "
            "its BLEU",
            "bleu_high": "97.5% point", "baseline_bleu": "the baseline's BLEU on them",
            "delta": "bleu - baseline_bleu",
            "delta_low": "95% interval of the difference over the paired resamples: 2.5% point, "
            "re-centred on the observed difference (arelu_cli.analysis.significance)",
            "delta_high": "97.5% point, re-centred alike",
            "delta_bias": "the bootstrap's bias estimate the intervals are shifted by",
            "p_value": "paired bootstrap p of 'no difference' (empty for the baseline's row; "
            "not read by the verdicts)",
            "samples": "bootstrap resamples (1000)", "bootstrap_seed": "seed of the resamples",
            "bleu_signature": "sacrebleu's signature of the test (bs, seed)",
            "signature": SIGNATURE}),
    "table2_empty.csv": CsvSpec("Table 2 (tab:empty_perc): empty string beats the beam", {
        "corpus": "prepared corpus name", "transform": "output transform", "seed": SEED,
        "split": "dev",
        "n_sentences": "sentences checked",
        "n_empty_better": "sentences whose empty string outscores the beam hypothesis",
        "percent_empty": "100 * n_empty_better / n_sentences", "signature": SIGNATURE}),
    "table3_tau.csv": CsvSpec("Table 3 (tab:tau): tau of 1.5-entmax, empirical and analytic", {
        "corpus": "corpus of the empirical rows, empty for analytic ones",
        "d_model": "hidden size", "d_vocab": "target vocabulary size", "alpha": "entmax alpha",
        "sigma": "logit std, sigma^2 = 2 d_model / (d_model + d_vocab)",
        "p_star": "the Lemma's p* (analytic rows)", "tau_empirical": "tau-tilde: first batch "
        "through the untrained model", "tau_analytic": "tau-hat: the paper's formula (tau_est)",
        "tau_monte_carlo": "mean exact tau(z) of Gaussian logits",
        "tau_monte_carlo_std": "its standard deviation", "n_samples": "vectors or rows averaged",
        "seed": "seed of the row's draws: the untrained model's (empirical rows, its training "
        "seed) or the Gaussian samples' (Monte Carlo rows); empty for analytic rows",
        "method": "how the row was made", "signature": SIGNATURE}),
    "training_time.csv": CsvSpec("Appendix table (GPU power): training hours and kWh", {
        "corpus": "prepared corpus name", "run": RUN, "transform": "output transform",
        "seed": SEED, "steps": "optimizer steps done",
        "hours": "wall-clock hours, validation included",
        "tokens_per_s": "median over logging intervals of source+target tokens/s",
        "best_bleu": "best validation BLEU", "best_step": "step of the best validation BLEU",
        "n_gpus": "devices (processes) that trained", "gpu_watts": "power per GPU in W (given)",
        "kwh": "hours * gpu_watts / 1000 * n_gpus; empty without --gpu-watts",
        "beside": "other runs trained at the same time on the same CPU (0: alone)",
        "signature": SIGNATURE}),
    "fig_alpha_relu_curves.csv": CsvSpec("Figure fig:arelu: the graph of alpha-ReLU", {
        "alpha": "alpha in [1.05, 2]", "tau": "threshold (the paper's figure: 0)",
        "x": "logit value", "y": "[(alpha-1) x - tau]_+^(1/(alpha-1))", "signature": SIGNATURE}),
    "fig_training_dynamics.csv": CsvSpec(
        "Figures fig:train_dyn_rel / fig:train_dyn_abs: BLEU and loss vs step and wall time", {
            "corpus": "prepared corpus name", "run": RUN,
            "transform": "output transform", "seed": SEED, "step": "optimizer step",
            "wall_s": "wall-clock seconds so far, validation included",
            "train_loss": "mean training loss of the logging interval (empty on other rows)",
            "val_loss": "validation loss (empty between validations)",
            "val_bleu": "validation BLEU (empty between validations)",
            "beside": "other runs trained at the same time on the same CPU (0: alone)",
            "signature": SIGNATURE}),
    "fig_tau_norm_evolution.csv": CsvSpec("Figure fig:tau_z_evo: mean tau(z) and ||z|| in training", {
        "corpus": "prepared corpus name", "run": RUN, "transform": "output transform",
        "seed": SEED, "step": "optimizer step",
        "tau": "the transform's threshold (alpha-ReLU: fixed tau; alpha-entmax: mean tau(z); "
        "empty for softmax)",
        "tau_z": "mean 1.5-entmax tau(z) of the same logits", "logit_norm": "mean ||z||_2",
        "signature": SIGNATURE}),
    "fig_tau_sweep.csv": CsvSpec("Figure fig:tau: impact of tau on training (alpha-ReLU)", {
        "corpus": "prepared corpus name", "run": RUN, "transform": "output transform",
        "seed": SEED, "tau": "the run's fixed tau", "step": "validation step",
        "wall_s": "wall-clock seconds",
        "val_bleu": "validation BLEU", "val_loss": "validation loss",
        "best_bleu": "the run's best validation BLEU (repeated on its rows)",
        "final_bleu": "the run's last validation BLEU (repeated on its rows)",
        "signature": SIGNATURE}),
    "fig_inference_time.csv": CsvSpec("Figure fig:infTime: inference time vs beam size", {
        "corpus": "prepared corpus name", "transform": "output transform", "seed": SEED,
        "beam": "beam size", "seconds": "wall-clock seconds to translate the split",
        "normalized": "seconds / the smallest seconds of the corpus and seed (the paper's y "
        "axis)", "signature": SIGNATURE}),
    "fig_sparsity.csv": CsvSpec("Figures fig:sparsity / fig:sparsity_train: zero components", {
        "corpus": "prepared corpus name", "split": "test or train", "transform": "output transform",
        "seed": SEED, **HIST, "signature": SIGNATURE}),
    "fig_self_norm.csv": CsvSpec("Figure fig:self_norm: sum of alpha-ReLU components per step", {
        "corpus": "prepared corpus name", "split": "test", "transform": "output transform",
        "seed": SEED, **HIST, "mean": "mean sum over all steps (repeated)",
        "std": "its standard deviation", "signature": SIGNATURE}),
    "translation_examples.csv": CsvSpec("Appendix table tab:trans_examples: disagreements", {
        "index": "0-based line of the test set", "source": "source sentence",
        "reference": "reference translation", "system_a": "first transform",
        "hypothesis_a": "its translation", "bleu_a": "its sentence BLEU",
        "system_b": "second transform", "hypothesis_b": "its translation",
        "bleu_b": "its sentence BLEU", "bleu_diff": "bleu_a - bleu_b"}),
    "table_human_eval.csv": CsvSpec("Table tab:human: human evaluation, 4-point scale", {
        "system": "reference or a transform", "n": "judgements (shared items count per annotator)",
        "mean": "mean meaning-preservation score (3+ = 3.25, 4- = 3.75)",
        "std": "sample standard deviation"}),
    "human_eval_kappa.csv": CsvSpec("Sec. Human Evaluation: Cohen's kappa on shared items", {
        "annotator_a": "first annotator", "annotator_b": "second annotator",
        "n_items": "shared items both scored", "n_judgements": "candidate scores both gave",
        "kappa": "unweighted Cohen's kappa over the integer scores 1-4",
        "kappa_linear": "linearly weighted Cohen's kappa over 1-4"}),
    "seed_summary.csv": CsvSpec("Every table and figure over training seeds (no paper item)", {
        "csv": "the results CSV summarized", "corpus": "prepared corpus name",
        "transform": "output transform", "setting": "what else the value depends on "
        "(split=..., beam=..., tau=..., a Table 3 method; empty when nothing)",
        "metric": "the column (or per-seed reduction: mean_zero_fraction, mean_sum) summarized",
        "n": "seeds with a value", "mean": "mean over seeds",
        "std": "sample standard deviation over seeds (empty for one seed)",
        "values": "the per-seed values, in seed order", "seeds": "the seeds, same order"}),
}

COLUMNS: dict[str, tuple[str, ...]] = {name: tuple(spec.columns) for name, spec in CATALOG.items()}
"""CSV file name -> its columns in order."""

def columns_of(name: str) -> tuple[str, ...]:
    """The columns of the catalog's CSV ``name``; an unknown name is a UserError."""
    if name not in CATALOG:
        raise UserError(f"unknown results CSV {name!r}; known: {', '.join(CATALOG)}")
    return COLUMNS[name]


def read_csv(folder: str | Path, name: str) -> Optional[pd.DataFrame]:
    """``folder/name`` as a DataFrame, or None when absent; other columns than the catalog's
    are a UserError."""
    path = Path(folder) / name
    if not path.is_file():
        return None
    expected = columns_of(name)
    frame = pd.read_csv(path)
    if tuple(frame.columns) != expected:
        raise UserError(f"{path} has columns {list(frame.columns)}, expected {list(expected)}; "
                        "regenerate it with the current version")
    return frame


def catalog_markdown() -> str:
    """The catalog as Markdown: one section per CSV with its paper item and columns."""
    parts = []
    for name, spec in CATALOG.items():
        lines = [f"- `{col}`: {desc}" for col, desc in spec.columns.items()]
        parts.append(f"### `{name}`\n{spec.paper}.\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


__doc__ = f"{__doc__}\n{catalog_markdown()}"
