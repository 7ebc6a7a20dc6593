"""The paper's figures, each drawn from its CSV of the catalog
(:mod:`arelu_cli.studies.paper.columns`): one PNG per figure CSV of :data:`FIGURES`. A grid of
several training seeds is drawn as one thin line per seed under a thick line of their mean
(curves), a mean bar with a standard-deviation error bar (inference time), or one thin
histogram per seed in the same colour.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from arelu_cli.studies.paper.columns import read_csv
from arelu_cli.studies.paper.layout import cell_name
from arelu_cli.studies.plots import lines, plot_inference_time, plt, save, seeds_of
from arelu_cli.studies.seeds import groups
from arelu_cli.util.errors import UserError

def _read(csv: Path) -> pd.DataFrame:
    frame = read_csv(csv.parent, csv.name)
    if frame is None:
        raise UserError(f"{csv} not found: it is written by the reproduction step that "
                        "measures this figure")
    return frame


def _cells(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The rows of each run, a grid cell's seeds together (``softmax/seed-2`` -> ``softmax``)."""
    named = frame.assign(cell=[cell_name(r) for r in frame["run"]])
    return [(cell, part) for (cell,), part in groups(named, ["cell"])]


def plot_alpha_relu_curves(csv: Path, png: Path) -> Path:
    """Fig. arelu: alpha-ReLU(x) for several alpha."""
    frame = _read(csv)
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for (alpha, tau), part in frame.groupby(["alpha", "tau"]):
        ax.plot(part["x"], part["y"], label=f"{alpha:g}-ReLU" + (f", τ={tau:g}" if tau else ""))
    ax.set(xlabel="x", ylabel="α-ReLU(x)")
    ax.legend()
    return save(fig, png)


def plot_training_dynamics(csv: Path, png: Path) -> Path:
    """Figs. train_dyn_rel / train_dyn_abs: BLEU vs step, BLEU vs hours, training loss vs step."""
    frame = _read(csv)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for run, part in _cells(frame):
        label = f"{part['transform'].iloc[0]} ({run})" if run != part["transform"].iloc[0] else run
        style = "--" if re.search(r"-k\d+$", part["transform"].iloc[0]) else "-"  # top-k: dashed
        valid, train = part.dropna(subset=["val_bleu"]), part.dropna(subset=["train_loss"])
        color = lines(axes[0], valid, lambda f: f["step"], "val_bleu", label, style)
        lines(axes[1], valid, lambda f: f["wall_s"] / 3600, "val_bleu", label, style, color)
        lines(axes[2], train, lambda f: f["step"], "train_loss", label, style, color)
    for ax, (x, y) in zip(axes, (("step", "validation BLEU"), ("hours", "validation BLEU"),
                                 ("step", "training loss"))):
        ax.set(xlabel=x, ylabel=y)
    axes[0].legend(fontsize="small")
    return save(fig, png)


def plot_tau_norm_evolution(csv: Path, png: Path) -> Path:
    """Fig. tau_z_evo: the transform's tau (solid), the 1.5-entmax tau(z) of the same logits
    (dashed) on the left axis, and ||z|| (dotted) on the right axis, vs step."""
    frame = _read(csv)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    right = ax.twinx()
    step = lambda f: f["step"]  # noqa: E731
    for run, part in _cells(frame):
        color = lines(ax, part, step, "tau", run)
        lines(ax, part, step, "tau_z", "_", "--", color)
        lines(right, part, step, "logit_norm", "_", ":", color)
    ax.set(xlabel="step", ylabel="mean τ (solid), 1.5-entmax τ(z) (dashed)")
    right.set_ylabel("mean ‖z‖ (dotted)")
    ax.legend(fontsize="small", loc="upper left")
    return save(fig, png)


def plot_tau_sweep(csv: Path, png: Path) -> Path:
    """Fig. tau: validation BLEU vs step per tau, and final BLEU vs tau."""
    frame = _read(csv)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for tau, part in frame.groupby("tau"):
        lines(left, part, lambda f: f["step"], "val_bleu", f"τ = {tau:g}")
    final = frame.groupby(["tau", "run"])[["final_bleu"]].first().reset_index()
    stats = final.groupby("tau")["final_bleu"].agg(["mean", "std"])
    right.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0.0), fmt="o-",
                   capsize=3)
    if final["tau"].duplicated().any():  # several seeds: each seed's final BLEU too
        right.plot(final["tau"], final["final_bleu"], ".", color="grey", alpha=0.6)
    right.set_xscale("symlog", linthresh=0.1)
    left.set(xlabel="step", ylabel="validation BLEU")
    right.set(xlabel="τ", ylabel="final validation BLEU")
    left.legend(fontsize="small")
    return save(fig, png)


def _histograms(frame: pd.DataFrame, xlabel: str, png: Path) -> Path:
    panels = list(frame.groupby(["corpus", "split"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, ((corpus, split), part) in zip(axes[0], panels):
        for name, hists in part.groupby("transform", sort=False):
            n, style = len(seeds_of(hists)), {}
            for i, (_, hist) in enumerate(hists.groupby("seed", sort=True, dropna=False)):
                label = name if n < 2 else (f"{name}, {n} seeds" if i == 0 else "_")
                drawn = ax.stairs(hist["fraction"].to_numpy(),
                                  [*hist["bin_left"].to_numpy(), hist["bin_right"].iloc[-1]],
                                  label=label, fill=False, linewidth=1.5 if n < 2 else 0.9,
                                  **style)
                style = {"color": drawn.get_edgecolor()}  # the seeds of a transform: one colour
        ax.set(title=f"{corpus} {split}", xlabel=xlabel, ylabel="fraction of decoding steps")
        ax.legend(fontsize="small")
    return save(fig, png)


def plot_sparsity(csv: Path, png: Path) -> Path:
    """Figs. sparsity / sparsity_train: distribution of the proportion of zero components."""
    return _histograms(_read(csv), "proportion of zero components", png)


def plot_self_norm(csv: Path, png: Path) -> Path:
    """Fig. self_norm: distribution of the sum of alpha-ReLU components per decoding step."""
    return _histograms(_read(csv), "Σ α-ReLU(z)", png)


FIGURES: dict[str, Callable[[Path, Path], Path]] = {
    "fig_alpha_relu_curves.csv": plot_alpha_relu_curves,
    "fig_training_dynamics.csv": plot_training_dynamics,
    "fig_tau_norm_evolution.csv": plot_tau_norm_evolution,
    "fig_tau_sweep.csv": plot_tau_sweep,
    "fig_inference_time.csv": plot_inference_time,
    "fig_sparsity.csv": plot_sparsity,
    "fig_self_norm.csv": plot_self_norm,
}
"""Figure CSV -> the function drawing its PNG (same name, ``.png``)."""


