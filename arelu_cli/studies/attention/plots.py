"""The attention study's figures: training curves and attention sparsity per layer (its
heatmaps: :func:`arelu_cli.studies.plots.plot_attention_heatmaps`).
"""

from __future__ import annotations

from pathlib import Path

from arelu_cli.studies.plots import plt, read_command_csv, save

def plot_attention_curves(csv: str | Path, png: str | Path) -> Path:
    """The attention study: dev BLEU and training loss against steps, one line per
    attention variant; a cross marks the last logged step of a run that diverged."""
    frame = read_command_csv(csv, ("variant", "step", "train_loss", "dev_bleu", "diverged"))
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
    return save(fig, png)


def plot_attention_sparsity(csv: str | Path, png: str | Path) -> Path:
    """The attention study: the share of exactly-zero attention weights per layer, one
    panel per kind (encoder self, decoder self, cross), one bar per variant."""
    frame = read_command_csv(csv, ("variant", "kind", "layer", "zero_fraction"))
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
    return save(fig, png)


