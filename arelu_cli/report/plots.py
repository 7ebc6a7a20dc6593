"""One PNG per figure CSV of the reproduction, drawn from the CSV only (matplotlib, Agg).

Each ``plot_*`` function reads its CSV (:mod:`arelu_cli.report.columns`) and writes a PNG;
:func:`plot_all` draws every figure whose CSV a results folder holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen before pyplot loads)
import pandas as pd  # noqa: E402

from arelu_cli.errors import UserError  # noqa: E402
from arelu_cli.report.columns import read_csv  # noqa: E402


def _save(fig, png: Path) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def _read(csv: Path) -> pd.DataFrame:
    frame = read_csv(csv.parent, csv.name)
    if frame is None:
        raise UserError(f"{csv} not found: it is written by the reproduction step that "
                        "measures this figure")
    return frame


def plot_alpha_relu_curves(csv: Path, png: Path) -> Path:
    """Fig. arelu: alpha-ReLU(x) for several alpha."""
    frame = _read(csv)
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for (alpha, tau), part in frame.groupby(["alpha", "tau"]):
        ax.plot(part["x"], part["y"], label=f"{alpha:g}-ReLU" + (f", τ={tau:g}" if tau else ""))
    ax.set_xlabel("x")
    ax.set_ylabel("α-ReLU(x)")
    ax.legend()
    return _save(fig, png)


def plot_training_dynamics(csv: Path, png: Path) -> Path:
    """Figs. train_dyn_rel / train_dyn_abs: BLEU vs step, BLEU vs hours, training loss vs step."""
    frame = _read(csv)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for run, part in frame.groupby("run", sort=False):
        label = f"{part['transform'].iloc[0]} ({run})" if run != part["transform"].iloc[0] else run
        style = "--" if re.search(r"-k\d+$", part["transform"].iloc[0]) else "-"  # top-k: dashed
        valid, train = part.dropna(subset=["val_bleu"]), part.dropna(subset=["train_loss"])
        axes[0].plot(valid["step"], valid["val_bleu"], style, label=label)
        axes[1].plot(valid["wall_s"] / 3600, valid["val_bleu"], style, label=label)
        axes[2].plot(train["step"], train["train_loss"], style, label=label)
    for ax, (x, y) in zip(axes, (("step", "validation BLEU"), ("hours", "validation BLEU"),
                                 ("step", "training loss"))):
        ax.set_xlabel(x)
        ax.set_ylabel(y)
    axes[0].legend(fontsize="small")
    return _save(fig, png)


def plot_tau_norm_evolution(csv: Path, png: Path) -> Path:
    """Fig. tau_z_evo: the transform's tau (solid), the 1.5-entmax tau(z) of the same logits
    (dashed) on the left axis, and ||z|| (dotted) on the right axis, vs step."""
    frame = _read(csv)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    right = ax.twinx()
    for run, part in frame.groupby("run", sort=False):
        color = ax.plot(part["step"], part["tau"], label=run)[0].get_color()
        ax.plot(part["step"], part["tau_z"], "--", color=color, alpha=0.6)
        right.plot(part["step"], part["logit_norm"], ":", color=color)
    ax.set_xlabel("step")
    ax.set_ylabel("mean τ (solid), 1.5-entmax τ(z) (dashed)")
    right.set_ylabel("mean ‖z‖ (dotted)")
    ax.legend(fontsize="small", loc="upper left")
    return _save(fig, png)


def plot_tau_sweep(csv: Path, png: Path) -> Path:
    """Fig. tau: validation BLEU vs step per tau, and final BLEU vs tau."""
    frame = _read(csv)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for tau, part in frame.groupby("tau"):
        left.plot(part["step"], part["val_bleu"], label=f"τ = {tau:g}")
    final = frame.groupby("tau")["final_bleu"].first()
    right.plot(final.index, final.values, "o-")
    right.set_xscale("symlog", linthresh=0.1)
    left.set(xlabel="step", ylabel="validation BLEU")
    right.set(xlabel="τ", ylabel="final validation BLEU")
    left.legend(fontsize="small")
    return _save(fig, png)


def plot_inference_time(csv: Path, png: Path) -> Path:
    """Fig. infTime: normalized inference time per beam size, one bar per transform."""
    frame = _read(csv)
    wide = frame.pivot_table(index="beam", columns="transform", values="normalized")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    wide.plot.bar(ax=ax, rot=0)
    ax.set(xlabel="beam size", ylabel="time / fastest")
    return _save(fig, png)


def _histograms(frame: pd.DataFrame, xlabel: str, png: Path) -> Path:
    groups = list(frame.groupby(["corpus", "split"], sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 3.6), squeeze=False)
    for ax, ((corpus, split), part) in zip(axes[0], groups):
        for name, hist in part.groupby("transform", sort=False):
            ax.stairs(hist["fraction"].to_numpy(),
                      [*hist["bin_left"].to_numpy(), hist["bin_right"].iloc[-1]],
                      label=name, fill=False)
        ax.set(title=f"{corpus} {split}", xlabel=xlabel, ylabel="fraction of decoding steps")
        ax.legend(fontsize="small")
    return _save(fig, png)


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


def plot_all(folder: str | Path) -> list[Path]:
    """Draw the PNG of every figure CSV present in ``folder``; return the PNGs written."""
    folder = Path(folder)
    return [draw(folder / name, (folder / name).with_suffix(".png"))
            for name, draw in FIGURES.items() if (folder / name).is_file()]
