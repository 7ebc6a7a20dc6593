"""Every PNG arelu draws, each from a CSV only (matplotlib, Agg): the one plotting module.

Each ``plot_*`` function reads its CSV and writes a PNG. The reproduction's figures read the
fixed CSVs of :mod:`arelu_cli.report.columns` and :func:`plot_all` draws every figure whose
CSV a results folder holds; the analysis commands' ``--plot`` figures read the CSV the
command wrote: :func:`plot_step_sparsity` (``arelu sparsity``), :func:`plot_step_self_norm`
(``arelu self-norm``), :func:`plot_attention_heatmaps` (``arelu sparsity --attention``, beyond
the paper), :func:`plot_attention_curves` and :func:`plot_attention_sparsity` (``arelu
attention-study``), :func:`plot_study_curves` and :func:`plot_study_sweep` (``arelu study``),
:func:`plot_lm_summary` and :func:`plot_lm_curves` (``arelu lm-study``), and
:func:`plot_inference_time` draws Fig. infTime from either the reproduction's
``fig_inference_time.csv`` or ``arelu bench translate``'s CSV. A run of several training seeds
is drawn as one thin line per seed under a thick line of their mean (curves), a mean bar with a
standard-deviation error bar (inference time), or one thin histogram per seed in the same
colour; with one seed a figure looks as it always did.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen before pyplot loads)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from arelu_cli.util.errors import UserError  # noqa: E402
from arelu_cli.util.ownership import check_ours, png_metadata, png_ours  # noqa: E402
from arelu_cli.report.columns import read_csv  # noqa: E402
from arelu_cli.report.layout import cell_name  # noqa: E402
from arelu_cli.report.seeds import groups  # noqa: E402


LINESTYLES = {"reference": "-", "beam": "--"}


def _save(fig, png: str | Path) -> Path:
    """Write the figure; replace only a PNG arelu drew (:func:`arelu_cli.util.ownership.png_ours`)."""
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    check_ours(png, png_ours)
    fig.savefig(png, dpi=120, metadata=png_metadata())
    plt.close(fig)
    return png


def _read_command_csv(csv: str | Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A CSV an analysis command wrote, with at least ``columns`` and one row."""
    path = Path(csv)
    if not path.is_file():
        raise UserError(f"{path} not found; the command that measures this figure writes it")
    frame = pd.read_csv(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing or frame.empty:
        raise UserError(f"{path} has no rows or lacks the columns {missing}; regenerate it")
    return frame


def _read(csv: Path) -> pd.DataFrame:
    frame = read_csv(csv.parent, csv.name)
    if frame is None:
        raise UserError(f"{csv} not found: it is written by the reproduction step that "
                        "measures this figure")
    return frame


def _seeds(part: pd.DataFrame) -> list:
    return list(part["seed"].dropna().unique()) if "seed" in part else []


def _lines(ax, part: pd.DataFrame, x: Callable[[pd.DataFrame], pd.Series], y: str, label: str,
           style: str = "-", color: str | None = None, by: str = "step") -> str:
    """One run's curve; for several seeds, the mean over seeds at each ``by`` (thick,
    labelled) over one thin line per seed. Returns the colour used."""
    if len(_seeds(part)) < 2:
        return ax.plot(x(part), part[y], style, label=label, color=color)[0].get_color()
    mean = part.groupby(by, sort=True).mean(numeric_only=True).reset_index()
    shown = label if label.startswith("_") else f"{label}, mean of {len(_seeds(part))} seeds"
    color = ax.plot(x(mean), mean[y], style, color=color, label=shown)[0].get_color()
    for _, one in part.groupby("seed", sort=True):
        ax.plot(x(one), one[y], style, color=color, alpha=0.3, linewidth=0.8)
    return color


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
    return _save(fig, png)


def plot_training_dynamics(csv: Path, png: Path) -> Path:
    """Figs. train_dyn_rel / train_dyn_abs: BLEU vs step, BLEU vs hours, training loss vs step."""
    frame = _read(csv)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for run, part in _cells(frame):
        label = f"{part['transform'].iloc[0]} ({run})" if run != part["transform"].iloc[0] else run
        style = "--" if re.search(r"-k\d+$", part["transform"].iloc[0]) else "-"  # top-k: dashed
        valid, train = part.dropna(subset=["val_bleu"]), part.dropna(subset=["train_loss"])
        color = _lines(axes[0], valid, lambda f: f["step"], "val_bleu", label, style)
        _lines(axes[1], valid, lambda f: f["wall_s"] / 3600, "val_bleu", label, style, color)
        _lines(axes[2], train, lambda f: f["step"], "train_loss", label, style, color)
    for ax, (x, y) in zip(axes, (("step", "validation BLEU"), ("hours", "validation BLEU"),
                                 ("step", "training loss"))):
        ax.set(xlabel=x, ylabel=y)
    axes[0].legend(fontsize="small")
    return _save(fig, png)


def plot_tau_norm_evolution(csv: Path, png: Path) -> Path:
    """Fig. tau_z_evo: the transform's tau (solid), the 1.5-entmax tau(z) of the same logits
    (dashed) on the left axis, and ||z|| (dotted) on the right axis, vs step."""
    frame = _read(csv)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    right = ax.twinx()
    step = lambda f: f["step"]  # noqa: E731
    for run, part in _cells(frame):
        color = _lines(ax, part, step, "tau", run)
        _lines(ax, part, step, "tau_z", "_", "--", color)
        _lines(right, part, step, "logit_norm", "_", ":", color)
    ax.set(xlabel="step", ylabel="mean τ (solid), 1.5-entmax τ(z) (dashed)")
    right.set_ylabel("mean ‖z‖ (dotted)")
    ax.legend(fontsize="small", loc="upper left")
    return _save(fig, png)


def plot_tau_sweep(csv: Path, png: Path) -> Path:
    """Fig. tau: validation BLEU vs step per tau, and final BLEU vs tau."""
    frame = _read(csv)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for tau, part in frame.groupby("tau"):
        _lines(left, part, lambda f: f["step"], "val_bleu", f"τ = {tau:g}")
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
    return _save(fig, png)


def plot_inference_time(csv: str | Path, png: str | Path) -> Path:
    """Fig. infTime: translation time over the fastest per beam size, one bar per model (a
    transform; with several seeds the mean bar and a standard-deviation error bar). Reads
    ``fig_inference_time.csv`` or the CSV of ``arelu bench translate``, where a transform
    timed with several checkpoints gets one bar per checkpoint."""
    csv = Path(csv)
    columns = ("transform", "beam", "normalized")
    frame = _read(csv) if csv.name in FIGURES else _read_command_csv(csv, columns)
    model = frame["transform"]
    if "checkpoint" in frame and model.nunique() < len(
            frame[["transform", "checkpoint"]].drop_duplicates()):
        model = frame["transform"] + " (" + frame["checkpoint"].astype(str) + ")"
    frame = frame.assign(model=model)
    names = list(dict.fromkeys(frame["model"]))
    stats = frame.groupby(["beam", "model"])["normalized"].agg(["mean", "std"])
    mean, std = (stats[c].unstack("model")[names] for c in ("mean", "std"))
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    several = len(_seeds(frame)) > 1
    mean.plot.bar(ax=ax, rot=0, yerr=std.fillna(0.0) if several else None, capsize=3)
    ax.set(xlabel="beam size", ylabel="time / fastest")
    ax.legend(fontsize="small")
    return _save(fig, png)


def _histograms(frame: pd.DataFrame, xlabel: str, png: Path) -> Path:
    panels = list(frame.groupby(["corpus", "split"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, ((corpus, split), part) in zip(axes[0], panels):
        for name, hists in part.groupby("transform", sort=False):
            n, style = len(_seeds(hists)), {}
            for i, (_, hist) in enumerate(hists.groupby("seed", sort=True, dropna=False)):
                label = name if n < 2 else (f"{name}, {n} seeds" if i == 0 else "_")
                drawn = ax.stairs(hist["fraction"].to_numpy(),
                                  [*hist["bin_left"].to_numpy(), hist["bin_right"].iloc[-1]],
                                  label=label, fill=False, linewidth=1.5 if n < 2 else 0.9,
                                  **style)
                style = {"color": drawn.get_edgecolor()}  # the seeds of a transform: one colour
        ax.set(title=f"{corpus} {split}", xlabel=xlabel, ylabel="fraction of decoding steps")
        ax.legend(fontsize="small")
    return _save(fig, png)


def plot_sparsity(csv: Path, png: Path) -> Path:
    """Figs. sparsity / sparsity_train: distribution of the proportion of zero components."""
    return _histograms(_read(csv), "proportion of zero components", png)


def plot_self_norm(csv: Path, png: Path) -> Path:
    """Fig. self_norm: distribution of the sum of alpha-ReLU components per decoding step."""
    return _histograms(_read(csv), "Σ α-ReLU(z)", png)


def plot_step_sparsity(csv: str | Path, png: str | Path, bins: int = 50) -> Path:
    """Histogram of the proportion of zero output components per decoding step, one panel per
    split, one line per transform (solid: teacher-forced on references, dashed: beam output)."""
    frame = _read_command_csv(csv, ("transform", "split", "along", "zero_fraction", "steps"))
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
    return _save(fig, png)


def plot_step_self_norm(csv: str | Path, png: str | Path) -> Path:
    """Histogram of the sum of the output components per decoding step, one panel per
    split, one line per checkpoint and walk; the means in the legend."""
    frame = _read_command_csv(csv, ("transform", "split", "along", "bin_low", "bin_high", "steps"))
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
    return _save(fig, png)


def plot_attention_heatmaps(csv: str | Path, png: str | Path) -> Path:
    """Cross-attention (averaged over heads) of a few sentences: one row of panels per
    checkpoint and sentence, one column per layer; target steps down, source tokens across,
    one colour scale, exact zeros white."""
    frame = _read_command_csv(csv, ("checkpoint", "attention", "sentence", "layer", "target_pos",
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
    return _save(fig, png)


def plot_attention_curves(csv: str | Path, png: str | Path) -> Path:
    """``arelu attention-study``: dev BLEU and training loss against steps, one line per
    attention variant; a cross marks the last logged step of a run that diverged."""
    frame = _read_command_csv(csv, ("variant", "step", "train_loss", "dev_bleu", "diverged"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for variant, part in frame.groupby("variant", sort=False):
        valid, train = part.dropna(subset=["dev_bleu"]), part.dropna(subset=["train_loss"])
        line = axes[0].plot(valid["step"], valid["dev_bleu"], "-o", markersize=3, label=variant)
        color = line[0].get_color()
        axes[1].plot(train["step"], train["train_loss"], "-", color=color, label=variant)
        if bool(part["diverged"].iloc[0]) and len(train):
            axes[1].plot(train["step"].iloc[-1], train["train_loss"].iloc[-1], "x", color=color,
                         markersize=9, markeredgewidth=2)
    for ax, label in zip(axes, ("dev BLEU (greedy)", "training loss")):
        ax.set(xlabel="step", ylabel=label)
    axes[0].legend(fontsize="small")
    return _save(fig, png)


def plot_attention_sparsity(csv: str | Path, png: str | Path) -> Path:
    """``arelu attention-study``: the share of exactly-zero attention weights per layer, one
    panel per kind (encoder self, decoder self, cross), one bar per variant."""
    frame = _read_command_csv(csv, ("variant", "kind", "layer", "zero_fraction"))
    kinds = [k for k in ("encoder", "decoder", "cross") if k in set(frame["kind"])]
    variants = list(dict.fromkeys(frame["variant"]))
    fig, axes = plt.subplots(1, len(kinds), squeeze=False, figsize=(4.2 * len(kinds), 3.4))
    width = 0.8 / max(len(variants), 1)
    for ax, kind in zip(axes[0], kinds):
        part = frame[frame["kind"] == kind]
        for i, variant in enumerate(variants):
            rows = part[part["variant"] == variant].sort_values("layer")
            ax.bar(rows["layer"] + (i - (len(variants) - 1) / 2) * width,
                   100 * rows["zero_fraction"], width, label=variant)
        ax.set_title(f"{kind} attention", fontsize=9)
        ax.set(xlabel="layer", ylabel="exactly-zero weights (%)")
        ax.set_xticks(sorted(set(part["layer"])))
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return _save(fig, png)


def plot_study_curves(csv: str | Path, png: str | Path) -> Path:
    """``arelu study``: dev BLEU against steps per transform, its seeds' runs as a mean over
    thin per-seed lines, its convergence run (longer than the seed runs) dashed."""
    frame = _read_command_csv(csv, ("transform", "seed", "step", "dev_bleu", "train_steps"))
    shortest = frame["train_steps"].min()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, part in frame.groupby("transform", sort=False):
        seeds, longer = part[part["train_steps"] == shortest], part[part["train_steps"] > shortest]
        color = _lines(ax, seeds, lambda f: f["step"], "dev_bleu", name) if len(seeds) else None
        if len(longer):
            ax.plot(longer["step"], longer["dev_bleu"], "--", color=color,
                    label=f"{name}, seed {int(longer['seed'].iloc[0])} continued")
    ax.set(xlabel="step", ylabel="dev BLEU (greedy)")
    ax.legend(fontsize="small")
    return _save(fig, png)


def plot_study_sweep(csv: str | Path, png: str | Path) -> Path:
    """``arelu study``: the sweep's dev BLEU against the learning rate (log scale), one line
    per transform, warmup and label smoothing; a ring marks each transform's selection."""
    frame = _read_command_csv(csv, ("transform", "lr", "warmup", "label_smoothing",
                                     "dev_bleu", "selected"))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    colors: dict[str, str] = {}
    for (name, warmup, eps), part in frame.groupby(["transform", "warmup", "label_smoothing"],
                                                   sort=False):
        part = part.sort_values("lr")
        style = "-o" if part["lr"].nunique() > 1 else "s"
        line = ax.plot(part["lr"], part["dev_bleu"], style, markersize=4, color=colors.get(name),
                       label=f"{name}, warmup {warmup}, label smoothing {eps:g}")
        colors.setdefault(name, line[0].get_color())
    chosen = frame[frame["selected"].astype(bool)]
    ax.plot(chosen["lr"], chosen["dev_bleu"], "o", markersize=12, markerfacecolor="none",
            markeredgecolor="black", label="selected")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(frame["lr"].unique()), [f"{v:g}" for v in sorted(frame["lr"].unique())])
    ax.set(xlabel="learning rate (Noam factor)", ylabel="dev BLEU (greedy)")
    ax.legend(fontsize="small")
    return _save(fig, png)


MARKERS = {"greedy": "s", "sample": "o", "sample-top_p0.9": "^", "sample-tau_dev": "D"}
"""The LM study's decodings' markers (others: ``x``)."""


def lm_summary_points(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of an LM study's ``summary.csv`` that :func:`plot_lm_summary` draws: sampling
    decodings with an eps-perplexity."""
    return frame[(frame["decoding"] != "greedy") & frame["eps_ppl_mean"].notna()]


def plot_lm_summary(csv: str | Path, png: str | Path) -> Path:
    """``arelu lm-study``: per model x sampling decoding (greedy, far off on every axis, only
    squeezes them together), distinct-2 and Zipf distances to human against eps-perplexity
    (log scale where it spans more than a factor 10), mean over seeds with a +- std bar each
    way; colour per model, marker per decoding (:data:`MARKERS`)."""
    stats = ("distinct_2_gap", "zipf_gap")
    frame = _read_command_csv(csv, ("transform", "label", "decoding", "eps_ppl_mean",
                                     "eps_ppl_std", *(f"{s}_{m}" for s in stats
                                                      for m in ("mean", "std"))))
    frame = lm_summary_points(frame)
    if frame.empty:
        raise UserError(f"{csv} has no sampling row with an ε-perplexity; run arelu lm-eval "
                        "first")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    colors: dict[str, str] = {}
    for _, row in frame.iterrows():
        name = row["label"] if isinstance(row["label"], str) else row["transform"]
        for ax, stat in zip(axes, stats):
            line = ax.errorbar(row["eps_ppl_mean"], row[f"{stat}_mean"],
                               xerr=np.nan_to_num(row["eps_ppl_std"]),
                               yerr=np.nan_to_num(row[f"{stat}_std"]),
                               fmt=MARKERS.get(row["decoding"], "x"), color=colors.get(name),
                               markersize=6, capsize=2, label=f"{name} {row['decoding']}")
            colors.setdefault(name, line[0].get_color())
    for ax, ylabel in zip(axes, ("distinct-2 distance to human",
                                 "Zipf-coefficient distance to human")):
        if frame["eps_ppl_mean"].max() > 10 * frame["eps_ppl_mean"].min():
            ax.set_xscale("log")
        ax.set(xlabel="ε-perplexity", ylabel=ylabel)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize="x-small", loc="best")
    return _save(fig, png)


def plot_lm_curves(csv: str | Path, png: str | Path) -> Path:
    """``arelu lm-study``: dev loss against steps, one panel per transform (their losses
    differ in scale), a thick mean over thin per-seed lines."""
    frame = _read_command_csv(csv, ("transform", "seed", "step", "val_loss"))
    names = list(dict.fromkeys(frame["transform"]))
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        part = frame[frame["transform"] == name].dropna(subset=["val_loss"])
        _lines(ax, part, lambda f: f["step"], "val_loss", f"{len(_seeds(part))} seeds")
        ax.set(title=name, xlabel="step", ylabel="dev loss")
        ax.grid(alpha=0.3)
    return _save(fig, png)


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


def check_pngs(folder: str | Path) -> None:
    """Refuse, before anything is written, a figure's PNG in ``folder`` that arelu did not
    draw (:func:`arelu_cli.util.ownership.png_ours`)."""
    for name in FIGURES:
        check_ours((Path(folder) / name).with_suffix(".png"), png_ours)


def plot_all(folder: str | Path) -> list[Path]:
    """Draw the PNG of every figure CSV present in ``folder``; return the PNGs written. A
    CSV without rows (all its runs left out of the report) has no figure: an earlier PNG of
    it, which shows those runs, is removed."""
    folder = Path(folder)
    drawn = []
    for name, draw in FIGURES.items():
        csv, png = folder / name, (folder / name).with_suffix(".png")
        if not csv.is_file():
            continue
        if read_csv(folder, name).empty:
            check_ours(png, png_ours)
            png.unlink(missing_ok=True)
            continue
        drawn.append(draw(csv, png))
    return drawn
