"""The conversion study's figure: each converted arm's epsilon-perplexity over the control's,
against fine-tuning steps (from ``ratios.csv``)."""

from __future__ import annotations

from pathlib import Path

from arelu_cli.studies.plots import plt, read_command_csv, save


def plot_ratios(csv: str | Path, png: str | Path) -> Path:
    """Per arm over the control (the rows of question ``control``): the mean over seeds of
    the per-seed ratio at each evaluated step, its 95% interval as a bar where there is one,
    and the margin a converted model must reach (dashed) beside parity (dotted)."""
    frame = read_command_csv(csv, ("arm", "step", "question", "margin", "value", "delta_low",
                                   "delta_high"))
    frame = frame[(frame["question"] == "control") & (frame["arm"] != "scratch")]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for arm, part in frame.groupby("arm", sort=False):
        part = part.sort_values("step")
        low = (part["margin"] + part["delta_low"]).fillna(part["value"])    # delta: less margin
        high = (part["margin"] + part["delta_high"]).fillna(part["value"])
        ax.errorbar(part["step"], part["value"], yerr=[part["value"] - low, high - part["value"]],
                    marker="o", markersize=4, capsize=3, label=arm)
    margin = float(frame["margin"].iloc[0])
    ax.axhline(margin, linestyle="--", color="black", linewidth=0.8,
               label=f"control × {margin:g}")
    ax.axhline(1.0, linestyle=":", color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set(xlabel="fine-tuning step", ylabel="ε-perplexity / control's (pure sampling)")
    ax.legend(fontsize="small")
    return save(fig, png)
