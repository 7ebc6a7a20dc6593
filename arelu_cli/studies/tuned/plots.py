"""The tuned study's figures: dev BLEU against steps, and the sweep.
"""

from __future__ import annotations

from pathlib import Path

from arelu_cli.studies.plots import lines, plt, read_command_csv, save

def plot_study_curves(csv: str | Path, png: str | Path) -> Path:
    """``arelu study``: dev BLEU against steps per transform, its seeds' runs as a mean over
    thin per-seed lines, its convergence run (longer than the seed runs) dashed."""
    frame = read_command_csv(csv, ("transform", "seed", "step", "dev_bleu", "train_steps"))
    shortest = frame["train_steps"].min()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, part in frame.groupby("transform", sort=False):
        seeds, longer = part[part["train_steps"] == shortest], part[part["train_steps"] > shortest]
        color = lines(ax, seeds, lambda f: f["step"], "dev_bleu", name) if len(seeds) else None
        if len(longer):
            ax.plot(longer["step"], longer["dev_bleu"], "--", color=color,
                    label=f"{name}, seed {int(longer['seed'].iloc[0])} continued")
    ax.set(xlabel="step", ylabel="dev BLEU (greedy)")
    ax.legend(fontsize="small")
    return save(fig, png)


def plot_study_sweep(csv: str | Path, png: str | Path) -> Path:
    """``arelu study``: the sweep's dev BLEU against the learning rate (log scale), one line
    per transform, warmup and label smoothing; a ring marks each transform's selection."""
    frame = read_command_csv(csv, ("transform", "lr", "warmup", "label_smoothing",
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
    return save(fig, png)


