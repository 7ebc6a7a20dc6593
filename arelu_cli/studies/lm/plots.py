"""The language-model study's figures: distance to human text against eps-perplexity, and
dev loss against steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from arelu_cli.studies.plots import lines, plt, read_command_csv, save, seeds_of
from arelu_cli.util.errors import UserError

MARKERS = {"greedy": "s", "sample": "o", "sample-top_p0.9": "^", "sample-tau_dev": "D"}
"""The LM study's decodings' markers (others: ``x``)."""


def lm_summary_points(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of an LM study's ``summary.csv`` that :func:`plot_lm_summary` draws: sampling
    decodings with an eps-perplexity."""
    return frame[(frame["decoding"] != "greedy") & frame["eps_ppl_mean"].notna()]


def plot_lm_summary(csv: str | Path, png: str | Path) -> Path:
    """The language-model study: per model x sampling decoding (greedy, far off on every axis, only
    squeezes them together), distinct-2 and Zipf distances to human against eps-perplexity
    (log scale where it spans more than a factor 10), mean over seeds with a +- std bar each
    way; colour per model, marker per decoding (:data:`MARKERS`)."""
    stats = ("distinct_2_gap", "zipf_gap")
    frame = read_command_csv(csv, ("transform", "label", "decoding", "eps_ppl_mean",
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
    return save(fig, png)


def plot_lm_curves(csv: str | Path, png: str | Path) -> Path:
    """The language-model study: dev loss against steps, one panel per transform (their losses
    differ in scale), a thick mean over thin per-seed lines."""
    frame = read_command_csv(csv, ("transform", "seed", "step", "val_loss"))
    names = list(dict.fromkeys(frame["transform"]))
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        part = frame[frame["transform"] == name].dropna(subset=["val_loss"])
        lines(ax, part, lambda f: f["step"], "val_loss", f"{len(seeds_of(part))} seeds")
        ax.set(title=name, xlabel="step", ylabel="dev loss")
        ax.grid(alpha=0.3)
    return save(fig, png)


