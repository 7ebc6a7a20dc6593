"""Results over several training seeds: one value per seed -> mean, standard deviation and n,
written ``mean ± std (s1 / s2 / s3)`` in REPORT.md and summarized in ``seed_summary.csv``.

The standard deviation is the sample one (ddof = 1) over seeds; with one seed there is none,
and a value prints as it always did (no "± 0"). The per-CSV reductions below bring every
results CSV to one row per (corpus, transform, setting, seed), the unit that seeds repeat;
:func:`summary_rows` aggregates them into the summary table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pandas as pd

from arelu_cli.util.signatures import signature_field
from arelu_cli.report.layout import cell_name
from arelu_cli.report.section import fmt

KEYS = ("corpus", "transform", "setting")


@dataclass(frozen=True)
class Spread:
    """One quantity measured once per seed, in seed order (missing values left out)."""

    seeds: tuple[object, ...]
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / self.n if self.values else None

    @property
    def std(self) -> float | None:
        if self.n < 2:
            return None
        mean = self.mean
        return math.sqrt(sum((v - mean) ** 2 for v in self.values) / (self.n - 1))


def _absent(value: object) -> bool:
    """None, NaN or pandas' NA (an empty cell, e.g. the seed of a run that records none)."""
    return value is None or bool(pd.isna(value))


def spread(frame: pd.DataFrame, column: str) -> Spread:
    """The values of ``column`` of ``frame``'s rows, one row per seed (``seed`` column;
    a frame without one is a single unnamed seed)."""
    seeds = frame["seed"] if "seed" in frame else [None] * len(frame)
    pairs = sorted(((None if _absent(s) else int(s), v) for s, v in zip(seeds, frame[column])
                    if not _absent(v)), key=lambda sv: (sv[0] is None, sv[0] or 0))
    return Spread(tuple(s for s, _ in pairs), tuple(float(v) for _, v in pairs))


def show(values: Spread, digits: int = 2, count: bool = False) -> str:
    """``-``, one value, or ``mean ± std (v1 / v2 / v3)`` in seed order; a value that no
    seed changes (computed without training) is written once, ``v (all 3 seeds)``.
    ``count``: whole numbers such as steps, written plainly (``22752``, a mean ``6.5``)."""
    def text(v: float | None) -> str:
        return "-" if v is None else f"{v:g}" if count else fmt(v, digits)

    if values.n < 2:
        return text(values.mean)
    each = [text(v) for v in values.values]
    if len(set(values.values)) == 1:
        return f"{each[0]} (all {values.n} seeds)"
    return f"{text(values.mean)} ± {text(values.std)} ({' / '.join(each)})"


def groups(frame: pd.DataFrame, keys: Sequence[str]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """``frame`` grouped by ``keys`` in order of appearance, empty keys kept."""
    for key, part in frame.groupby(list(keys), sort=False, dropna=False):
        yield (key if isinstance(key, tuple) else (key,)), part


def n_seeds(frame: pd.DataFrame) -> int:
    """Distinct seeds of a CSV (1 for one seed or for rows without a seed)."""
    return max(1, frame["seed"].dropna().nunique()) if "seed" in frame else 1


def seeds_note(frame: pd.DataFrame) -> list[str]:
    """A verdict line saying how several seeds are shown (nothing for one seed)."""
    if n_seeds(frame) < 2:
        return []
    seeds = " / ".join(str(int(s)) for s in sorted(frame["seed"].dropna().unique()))
    return [f"Over {n_seeds(frame)} training seeds: mean ± sample std (seed {seeds}); "
            "claims are checked on the means."]


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
    seeds = [signature_field(s, "seed") for s in rows["signature"]]
    return rows.assign(transform=[f"{a:g}-entmax" for a in rows["alpha"]],
                       setting=rows["method"], seed=[None if s is None else int(s) for s in seeds])


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
