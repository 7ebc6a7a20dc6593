"""What every figure arelu draws shares, and the figures of the analysis commands: each PNG
drawn from a CSV only (matplotlib, Agg).

:func:`save` writes a PNG with arelu's mark, replacing only a PNG arelu drew;
:func:`read_command_csv` reads a CSV a command wrote; :func:`lines` draws a run's curve (a
thick mean over thin per-seed lines when it has several seeds). The commands' ``--plot``
figures: :func:`plot_step_sparsity` (``arelu sparsity``), :func:`plot_step_self_norm`
(``arelu self-norm``), :func:`plot_attention_heatmaps` (``arelu sparsity --attention``, and
the attention study's), :func:`plot_inference_time` (``arelu bench translate``, and the
paper's Fig. infTime). Each study draws its own figures with these (its ``plots`` module).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen before pyplot loads)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from arelu_cli.util.errors import UserError  # noqa: E402
from arelu_cli.util.ownership import check_ours, png_metadata, png_ours  # noqa: E402


LINESTYLES = {"reference": "-", "beam": "--"}


def save(fig, png: str | Path) -> Path:
    """Write the figure; replace only a PNG arelu drew (:func:`arelu_cli.util.ownership.png_ours`)."""
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    check_ours(png, png_ours)
    fig.savefig(png, dpi=120, metadata=png_metadata())
    plt.close(fig)
    return png


def read_command_csv(csv: str | Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A CSV an analysis command wrote, with at least ``columns`` and one row."""
    path = Path(csv)
    if not path.is_file():
        raise UserError(f"{path} not found; the command that measures this figure writes it")
    frame = pd.read_csv(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing or frame.empty:
        raise UserError(f"{path} has no rows or lacks the columns {missing}; regenerate it")
    return frame


def seeds_of(part: pd.DataFrame) -> list:
    return list(part["seed"].dropna().unique()) if "seed" in part else []


def lines(ax, part: pd.DataFrame, x: Callable[[pd.DataFrame], pd.Series], y: str, label: str,
           style: str = "-", color: str | None = None, by: str = "step") -> str:
    """One run's curve; for several seeds, the mean over seeds at each ``by`` (thick,
    labelled) over one thin line per seed. Returns the colour used."""
    if len(seeds_of(part)) < 2:
        return ax.plot(x(part), part[y], style, label=label, color=color)[0].get_color()
    mean = part.groupby(by, sort=True).mean(numeric_only=True).reset_index()
    shown = label if label.startswith("_") else f"{label}, mean of {len(seeds_of(part))} seeds"
    color = ax.plot(x(mean), mean[y], style, color=color, label=shown)[0].get_color()
    for _, one in part.groupby("seed", sort=True):
        ax.plot(x(one), one[y], style, color=color, alpha=0.3, linewidth=0.8)
    return color


def plot_inference_time(csv: str | Path, png: str | Path) -> Path:
    """Fig. infTime: translation time over the fastest per beam size, one bar per model (a
    transform; with several seeds the mean bar and a standard-deviation error bar). Reads
    the paper's ``fig_inference_time.csv`` or the CSV of ``arelu bench translate``, where a transform
    timed with several checkpoints gets one bar per checkpoint."""
    frame = read_command_csv(csv, ("transform", "beam", "normalized"))
    model = frame["transform"]
    if "checkpoint" in frame and model.nunique() < len(
            frame[["transform", "checkpoint"]].drop_duplicates()):
        model = frame["transform"] + " (" + frame["checkpoint"].astype(str) + ")"
    frame = frame.assign(model=model)
    names = list(dict.fromkeys(frame["model"]))
    stats = frame.groupby(["beam", "model"])["normalized"].agg(["mean", "std"])
    mean, std = (stats[c].unstack("model")[names] for c in ("mean", "std"))
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    several = len(seeds_of(frame)) > 1
    mean.plot.bar(ax=ax, rot=0, yerr=std.fillna(0.0) if several else None, capsize=3)
    ax.set(xlabel="beam size", ylabel="time / fastest")
    ax.legend(fontsize="small")
    return save(fig, png)


def plot_step_sparsity(csv: str | Path, png: str | Path, bins: int = 50) -> Path:
    """Histogram of the proportion of zero output components per decoding step, one panel per
    split, one line per transform (solid: teacher-forced on references, dashed: beam output)."""
    frame = read_command_csv(csv, ("transform", "split", "along", "zero_fraction", "steps"))
    splits = list(dict.fromkeys(frame["split"]))
    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 3.6), squeeze=False)
    # Shared bins over the observed range: sparse outputs crowd near 1, softmax sits at 0.
    edges = np.linspace(frame["zero_fraction"].min(), frame["zero_fraction"].max() + 1e-9, bins + 1)
    for ax, split in zip(axes[0], splits):
        part = frame[frame["split"] == split]
        for (name, along), rows in part.groupby(["transform", "along"], sort=False):
            counts, _ = np.histogram(rows["zero_fraction"], bins=edges, weights=rows["steps"])
            ax.stairs(counts / counts.sum(), edges, label=f"{name} ({along})",
                      linestyle=LINESTYLES.get(along, "-"))
        ax.set(title=split, xlabel="proportion of zero components",
               ylabel="fraction of decoding steps")
        ax.legend(fontsize="small")
    return save(fig, png)


def plot_step_self_norm(csv: str | Path, png: str | Path) -> Path:
    """Histogram of the sum of the output components per decoding step, one panel per
    split, one line per checkpoint and walk; the means in the legend."""
    frame = read_command_csv(csv, ("transform", "split", "along", "bin_low", "bin_high", "steps"))
    splits = list(dict.fromkeys(frame["split"]))
    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 3.6), squeeze=False)
    for ax, split in zip(axes[0], splits):
        part = frame[frame["split"] == split]
        groups = part.groupby(["checkpoint", "transform", "along"], sort=False)
        for (_, name, along), rows in groups:
            steps = rows["steps"].to_numpy()
            centers = (rows["bin_low"].to_numpy() + rows["bin_high"].to_numpy()) / 2
            mean = float((centers * steps).sum() / steps.sum())
            ax.stairs(steps / steps.sum(), [*rows["bin_low"], rows["bin_high"].iloc[-1]],
                      label=f"{name} ({along}), mean ≈ {mean:.2f}",
                      linestyle=LINESTYLES.get(along, "-"))
        ax.set(title=split, xlabel=r"$\sum_i p_i$", ylabel="fraction of decoding steps")
        ax.legend(fontsize="small")
    return save(fig, png)


def plot_attention_heatmaps(csv: str | Path, png: str | Path) -> Path:
    """Cross-attention (averaged over heads) of a few sentences: one row of panels per
    checkpoint and sentence, one column per layer; target steps down, source tokens across,
    one colour scale, exact zeros white."""
    frame = read_command_csv(csv, ("checkpoint", "attention", "sentence", "layer", "target_pos",
                        "target_token", "source_pos", "source_token", "weight"))
    panels = list(dict.fromkeys(zip(frame["checkpoint"], frame["sentence"])))
    layers = sorted(set(frame["layer"]))
    fig, axes = plt.subplots(len(panels), len(layers), squeeze=False,
                             figsize=(3.2 * len(layers) + 1, 3.2 * len(panels)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    top = max(float(frame["weight"].max()), 1e-12)
    for row, (ckpt, sentence) in zip(axes, panels):
        part = frame[(frame["checkpoint"] == ckpt) & (frame["sentence"] == sentence)]
        for ax, layer in zip(row, layers):
            cells = part[part["layer"] == layer]
            grid = cells.pivot(index="target_pos", columns="source_pos", values="weight")
            image = ax.imshow(np.ma.masked_equal(grid.to_numpy(), 0.0), cmap=cmap, vmin=0.0,
                              vmax=top, aspect="auto", interpolation="nearest")
            src = cells.drop_duplicates("source_pos").sort_values("source_pos")["source_token"]
            tgt = cells.drop_duplicates("target_pos").sort_values("target_pos")["target_token"]
            ax.set_xticks(range(len(src)), [str(t) for t in src], rotation=90, fontsize=6)
            ax.set_yticks(range(len(tgt)), [str(t) for t in tgt], fontsize=6)
            ax.set_title(f"{part['attention'].iloc[0]}: sentence {sentence}, layer {layer}",
                         fontsize=7)
        fig.colorbar(image, ax=row[-1], label="weight")  # the same scale in every panel
    return save(fig, png)


