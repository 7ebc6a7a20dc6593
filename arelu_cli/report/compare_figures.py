"""Our figures' numbers beside the paper's claims about them.

One function per figure CSV (:mod:`arelu_cli.report.columns`), each returning a
:class:`~arelu_cli.report.markdown.Section` with a summary table and computed verdicts; the
figure itself is embedded by :mod:`arelu_cli.report.report_md`.
"""

from __future__ import annotations

import pandas as pd

from arelu_cli.report import paper
from arelu_cli.report.markdown import (Section, claim, compare_numbers, fmt, match_line,
                                       md_table)

SPEED_PARITY = 1.2
"""1.5-ReLU counts as "as fast as softmax" at most this many times slower."""
ENTMAX_SLOWDOWN = 1.5
"""1.5-entmax counts as clearly slower than softmax (the paper: almost 2x) from this ratio."""
CONCENTRATED_CV = 0.1
"""Sums count as concentrated around their mean below this coefficient of variation."""
DYNAMICS_TRIO = ("softmax", "1.5-entmax", "1.5-relu")


def curves_section(frame: pd.DataFrame) -> Section:
    """Fig. arelu: the closed form on the grid, and 2-ReLU = ReLU for tau = 0."""
    rows, errors = [], []
    for (alpha, tau), part in frame.groupby(["alpha", "tau"]):
        exact = ((alpha - 1) * part["x"] - tau).clip(lower=0) ** (1 / (alpha - 1))
        errors.append(float((part["y"] - exact).abs().max()))
        rows.append([fmt(alpha), fmt(tau), f"{1 / (alpha - 1):g}", len(part),
                     fmt(float(part["y"].max()), 3)])
    relu = frame[(frame["alpha"] == 2.0) & (frame["tau"] == 0.0)]
    gap = float((relu["y"] - relu["x"].clip(lower=0)).abs().max()) if len(relu) else None
    verdicts = [f"Largest deviation from [(α−1)x − τ]_+^(1/(α−1)): {max(errors):.2e}.",
                claim("2-ReLU with τ = 0 is the standard ReLU", None if gap is None else gap < 1e-9,
                      f"max |2-ReLU(x) − max(x, 0)| = {fmt(gap, 6)}")]
    table = md_table(["α", "τ", "exponent 1/(α−1)", "points", "max y"], rows)
    return Section("Figure: α-ReLU for several α", "fig_alpha_relu_curves.csv", table, verdicts,
                   "fig_alpha_relu_curves.png")


def _per_run(frame: pd.DataFrame) -> list[dict]:
    out = []
    for run, part in frame.groupby("run", sort=False):
        valid = part.dropna(subset=["val_bleu"])
        best = valid.loc[valid["val_bleu"].idxmax()] if len(valid) else None
        last = part.iloc[-1]
        out.append({"run": run, "transform": part["transform"].iloc[0], "steps": int(last["step"]),
                    "hours": last["wall_s"] / 3600, "s_per_step": last["wall_s"] / last["step"],
                    "best": None if best is None else best["val_bleu"],
                    "best_step": None if best is None else int(best["step"]),
                    "final": valid["val_bleu"].iloc[-1] if len(valid) else None,
                    "valid": valid.set_index("step")["val_bleu"]})
    return out


def dynamics_section(frame: pd.DataFrame) -> Section:
    """Figs. train_dyn_rel / train_dyn_abs: similar in steps, 1.5-entmax slower in wall time."""
    runs = _per_run(frame)
    table = md_table(["run", "transform", "steps", "hours", "s/step", "best BLEU", "at step",
                      "final BLEU"],
                     [[r["run"], r["transform"], r["steps"], fmt(r["hours"]),
                       fmt(r["s_per_step"], 3), fmt(r["best"]), r["best_step"] or "-",
                       fmt(r["final"])] for r in runs])
    speed = {r["transform"]: r["s_per_step"] for r in runs}
    others = [speed[t] for t in ("softmax", "1.5-relu") if t in speed]
    holds = None if "1.5-entmax" not in speed or not others else speed["1.5-entmax"] > max(others)
    verdicts = [claim("1.5-entmax is slower in wall time than softmax and 1.5-ReLU", holds,
                      ", ".join(f"{t} {fmt(s, 3)} s/step" for t, s in speed.items()))]
    trio = [r for r in runs if r["transform"] in DYNAMICS_TRIO and len(r["valid"])]
    common = set.intersection(*(set(r["valid"].index) for r in trio)) if len(trio) > 1 else set()
    if common:
        step = max(common)
        at = {r["transform"]: float(r["valid"][step]) for r in trio}
        spread = max(at.values()) - min(at.values())
        verdicts.append(claim("training dynamics in steps are similar for softmax, 1.5-entmax "
                              "and 1.5-ReLU", spread <= paper.TOLERANCE["bleu"],
                              f"validation BLEU at step {step}: " + ", ".join(
                                  f"{t} {fmt(b)}" for t, b in at.items())
                              + f"; spread {fmt(spread)} (similar = within "
                              f"{paper.TOLERANCE['bleu']:g})"))
    else:
        verdicts.append(claim("training dynamics in steps are similar", None,
                              "needs two of softmax/1.5-entmax/1.5-ReLU validated at a common step"))
    return Section("Figures: training dynamics in steps and in wall time",
                   "fig_training_dynamics.csv", table, verdicts, "fig_training_dynamics.png")


def tau_norm_section(frame: pd.DataFrame) -> Section:
    """Fig. tau_z_evo: ||z|| grows for both; entmax's tau(z) follows it, alpha-ReLU's is fixed."""
    rows, verdicts = [], []
    for run, part in frame.groupby("run", sort=False):
        first, last, transform = part.iloc[0], part.iloc[-1], part["transform"].iloc[0]
        rows.append([run, transform, fmt(first["logit_norm"]), fmt(last["logit_norm"]),
                     fmt(first["tau"], 3), fmt(last["tau"], 3), fmt(first["tau_z"], 3),
                     fmt(last["tau_z"], 3)])
        if transform in ("1.5-entmax", "1.5-relu"):
            verdicts.append(claim(f"the logit norm grows during training ({run})",
                                  last["logit_norm"] > first["logit_norm"],
                                  f"||z|| {fmt(first['logit_norm'])} → {fmt(last['logit_norm'])}"))
        if transform == "1.5-entmax":
            verdicts.append(claim(f"1.5-entmax's τ(z) increases following the logit size ({run})",
                                  last["tau"] > first["tau"],
                                  f"τ(z) {fmt(first['tau'], 3)} → {fmt(last['tau'], 3)}"))
        if transform == "1.5-relu":
            verdicts.append(claim(f"1.5-ReLU's τ remains constant ({run})",
                                  part["tau"].nunique() == 1, f"τ = {fmt(first['tau'], 4)}"))
    table = md_table(["run", "transform", "‖z‖ first", "‖z‖ last", "τ first", "τ last",
                      "1.5-entmax τ(z) first", "τ(z) last"], rows)
    return Section("Figure: evolution of τ(z) and ‖z‖ in training", "fig_tau_norm_evolution.csv",
                   table, verdicts, "fig_tau_norm_evolution.png")


def tau_sweep_section(frame: pd.DataFrame) -> Section:
    """Fig. tau: every tau ends at almost the same BLEU; which tau learns fastest early."""
    summary = frame.groupby(["tau", "run"], sort=True).agg(
        first_step=("step", "first"), first_bleu=("val_bleu", "first"),
        best=("best_bleu", "first"), final=("final_bleu", "first")).reset_index()
    table = md_table(["τ", "run", "first validation (step)", "BLEU there", "best BLEU",
                      "final BLEU"],
                     [[fmt(r["tau"], 3), r["run"], r["first_step"], fmt(r["first_bleu"]),
                       fmt(r["best"]), fmt(r["final"])] for r in summary.to_dict("records")])
    spread = float(summary["final"].max() - summary["final"].min()) if len(summary) > 1 else None
    fastest = summary.loc[summary["first_bleu"].idxmax()] if len(summary) else None
    verdicts = [claim("all τ lead to almost the same BLEU at the end of training",
                      None if spread is None else spread <= paper.TOLERANCE["bleu"],
                      f"final BLEU spread {fmt(spread)} over {len(summary)} τ values "
                      f"(same = within {paper.TOLERANCE['bleu']:g})")]
    if fastest is not None:
        verdicts.append(f"Best BLEU at the first validation: τ = {fmt(fastest['tau'], 3)} "
                        f"(paper: τ = 0.3 best early on IWSLT, its estimate 0.33).")
    return Section("Figure: impact of τ on training", "fig_tau_sweep.csv", table, verdicts,
                   "fig_tau_sweep.png")


def inference_section(frame: pd.DataFrame) -> Section:
    """Fig. infTime: softmax ~ 1.5-ReLU, 1.5-entmax about twice slower, for every beam."""
    wide = frame.pivot_table(index="beam", columns="transform", values="normalized")
    table = md_table(["beam", *wide.columns],
                     [[beam, *(fmt(v) for v in row)] for beam, row in wide.iterrows()])
    verdicts = []
    if "softmax" in wide:
        for name, bound, text in (("1.5-relu", SPEED_PARITY, "1.5-ReLU is as fast as softmax"),
                                  ("1.5-entmax", ENTMAX_SLOWDOWN, "1.5-entmax is clearly slower "
                                   "than softmax (paper: almost 2×)")):
            ratio = (wide[name] / wide["softmax"]) if name in wide else None
            holds = None if ratio is None else bool(
                (ratio <= bound).all() if name == "1.5-relu" else (ratio >= bound).all())
            evidence = "no timings" if ratio is None else "time vs softmax per beam: " + ", ".join(
                f"{b}: {fmt(v)}×" for b, v in ratio.items())
            verdicts.append(claim(text, holds, f"{evidence}; threshold {bound:g}×"))
    return Section("Figure: normalized inference time vs beam size", "fig_inference_time.csv",
                   table, verdicts, "fig_inference_time.png")


def _hist_means(frame: pd.DataFrame) -> pd.DataFrame:
    mid = (frame["bin_left"] + frame["bin_right"]) / 2 * frame["fraction"]
    return frame.assign(mid=mid).groupby(["corpus", "split", "transform"], sort=False)["mid"].sum()


def sparsity_section(frame: pd.DataFrame) -> Section:
    """Figs. sparsity: 1.5-ReLU is less sparse than 1.5-entmax."""
    means = _hist_means(frame)
    table = md_table(["corpus", "split", "transform", "mean zero fraction"],
                     [[*key, fmt(v, 4)] for key, v in means.items()])
    verdicts = []
    for (corpus, split), part in means.groupby(level=[0, 1]):
        by = {key[2]: v for key, v in part.items()}
        holds = None if {"1.5-relu", "1.5-entmax"} - set(by) else by["1.5-relu"] < by["1.5-entmax"]
        verdicts.append(claim(f"1.5-ReLU is less sparse than 1.5-entmax ({corpus} {split})", holds,
                              f"mean zero fraction 1.5-ReLU {fmt(by.get('1.5-relu'), 4)}, "
                              f"1.5-entmax {fmt(by.get('1.5-entmax'), 4)}"))
    return Section("Figure: sparsity (proportion of zero components)", "fig_sparsity.csv", table,
                   verdicts, "fig_sparsity.png")


def self_norm_section(frame: pd.DataFrame) -> Section:
    """Fig. self_norm: the sum concentrates around ~1.24 (IWSLT) / ~1.09 (WMT14)."""
    stats = frame.groupby(["corpus", "split", "transform"], sort=False).agg(
        mean=("mean", "first"), std=("std", "first"), steps=("count", "sum")).reset_index()
    rows, matches, differs, verdicts = [], [], [], []
    for r in stats.to_dict("records"):
        theirs = paper.SELF_NORM_MEAN.get(r["corpus"]) if "relu" in r["transform"] else None
        rows.append([r["corpus"], r["split"], r["transform"], r["steps"], fmt(r["mean"], 3),
                     fmt(r["std"], 3), fmt(theirs)])
        compare_numbers(f"{r['corpus']} {r['transform']} mean", r["mean"], theirs,
                        paper.TOLERANCE["self_norm"], 3, matches, differs)
        cv = r["std"] / r["mean"] if r["mean"] else None
        verdicts.append(claim(f"Σ {r['transform']}(z) concentrates around its mean ({r['corpus']})",
                              None if cv is None else cv < CONCENTRATED_CV,
                              f"std/mean = {fmt(cv, 3)}, concentrated below {CONCENTRATED_CV:g}"))
    verdicts.insert(0, match_line(matches, differs,
                                  f"|Δ mean| ≤ {paper.TOLERANCE['self_norm']:g}"))
    table = md_table(["corpus", "split", "transform", "steps", "mean Σp", "std", "paper mean"], rows)
    return Section("Figure: self-normalization of α-ReLU", "fig_self_norm.csv", table, verdicts,
                   "fig_self_norm.png")

