"""Values over training seeds: one value per seed -> mean, standard deviation and n, written
``mean ± std (s1 / s2 / s3)`` in a REPORT.md.

The standard deviation is the sample one (ddof = 1) over seeds; with one seed there is none,
and a value prints as itself (no "± 0").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pandas as pd

from arelu_cli.studies.markdown import fmt


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
