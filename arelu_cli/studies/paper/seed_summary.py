"""``seed_summary.csv``: every results CSV of the paper's grid over its training seeds.

The per-CSV reductions below bring every results CSV to one row per (corpus, transform,
setting, seed), the unit that seeds repeat; :func:`summary_rows` aggregates them (mean,
sample std and n: :mod:`arelu_cli.studies.seeds`).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from arelu_cli.studies.paper.layout import cell_name
from arelu_cli.studies.seeds import groups, spread

KEYS = ("corpus", "transform", "setting")


# One reduction per CSV: one row per (corpus, transform, setting, seed) with its metrics.
def hist_means(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """The mean of each (corpus, split, transform, seed) histogram, from its bin midpoints,
    as column ``value``."""
    mid = (frame["bin_left"] + frame["bin_right"]) / 2 * frame["fraction"]
    keys = ["corpus", "split", "transform", "seed"]
    out = frame.assign(mid=mid).groupby(keys, sort=False, dropna=False)["mid"].sum().reset_index()
    return out.rename(columns={"mid": value}).assign(setting="split=" + out["split"].astype(str))


def _sweep(frame: pd.DataFrame) -> pd.DataFrame:
    keys = ["corpus", "transform", "tau", "seed"]
    out = frame.groupby(keys, sort=False, dropna=False)[["best_bleu", "final_bleu"]].first()
    out = out.reset_index()
    return out.assign(setting=[f"tau={t:g}" for t in out["tau"]])


def _training_time(frame: pd.DataFrame) -> pd.DataFrame:
    names = [cell_name(r) for r in frame["run"]]
    return frame.assign(setting=["" if n == t else f"run={n}"
                                 for n, t in zip(names, frame["transform"])])


def _table3(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[frame["tau_empirical"].notna()]
    return rows.assign(transform=[f"{a:g}-entmax" for a in rows["alpha"]],
                       setting=rows["method"])


REDUCTIONS: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], tuple[str, ...]]] = {
    "table1_bleu.csv": (lambda f: f.assign(setting=""), ("bleu", "chrf")),
    "table2_empty.csv": (lambda f: f.assign(setting=""), ("percent_empty",)),
    "table3_tau.csv": (_table3, ("tau_empirical",)),
    "training_time.csv": (_training_time, ("hours", "tokens_per_s", "best_bleu", "kwh")),
    "fig_tau_sweep.csv": (_sweep, ("best_bleu", "final_bleu")),
    "fig_inference_time.csv": (lambda f: f.assign(setting=[f"beam={b}" for b in f["beam"]]),
                               ("seconds", "normalized")),
    "fig_sparsity.csv": (lambda f: hist_means(f, "mean_zero_fraction"), ("mean_zero_fraction",)),
    "fig_self_norm.csv": (lambda f: hist_means(f, "mean_sum"), ("mean_sum",)),
}
"""CSV -> (its reduction to one row per seed, the metrics the summary aggregates)."""


def summary_rows(name: str, frame: pd.DataFrame) -> list[dict]:
    """Rows of ``seed_summary.csv`` for one results CSV: per (corpus, transform, setting)
    and metric, n, mean, std and the per-seed values."""
    reduce, metrics = REDUCTIONS[name]
    reduced = reduce(frame)
    rows = []
    for key, part in groups(reduced, KEYS):
        for metric in metrics:
            s = spread(part, metric)
            if not s.n:
                continue
            rows.append({"csv": name, **dict(zip(KEYS, key)), "metric": metric, "n": s.n,
                         "mean": s.mean, "std": s.std,
                         "values": " / ".join(f"{v:.6g}" for v in s.values),
                         "seeds": " / ".join("" if x is None else str(int(x)) for x in s.seeds)})
    return rows
