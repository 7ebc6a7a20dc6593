"""Per-decoding-step distributions as histogram rows: sparsity and self-normalization.

* :func:`sparsity_rows` -- Figs. sparsity / sparsity_train: the proportion of zero
  components of the output per decoding step, per transform;
* :func:`self_norm_rows` -- Fig. self_norm: the sum of the alpha-ReLU components per step.

All transforms of one call share one set of bins, so their histograms overlay; each call
tabulates one training seed (``seed``), and a grid of several seeds concatenates the rows
of one call per seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import signature


def _shared_edges(values: Mapping[str, np.ndarray], bins: int) -> np.ndarray:
    if bins < 1:
        raise UserError(f"bins must be >= 1, got {bins}")
    lo = min(float(v.min()) for v in values.values())
    hi = max(float(v.max()) for v in values.values())
    if hi - lo < 1e-12:  # every value equal: one narrow bin around it
        lo, hi = lo - 0.5e-3, hi + 0.5e-3
    return np.linspace(lo, hi, bins + 1)


def _arrays(values: Mapping[str, Sequence[float]], what: str) -> dict[str, np.ndarray]:
    arrays = {name: np.asarray(v, dtype=np.float64) for name, v in values.items()}
    empty = [name for name, v in arrays.items() if v.size == 0]
    if not arrays or empty:
        raise UserError(f"no {what} values for {', '.join(empty) or 'any transform'}")
    return arrays


def _histogram_rows(corpus: str, split: str, values: Mapping[str, Sequence[float]], bins: int,
                    what: str, signatures: Optional[Mapping[str, str]], seed: Optional[int]
                    ) -> list[tuple[list[dict], np.ndarray]]:
    arrays = _arrays(values, what)
    edges = _shared_edges(arrays, bins)
    out = []
    for name, v in arrays.items():
        counts, _ = np.histogram(v, bins=edges)
        sig = (signatures or {}).get(name) or signature(transform=name, data=corpus)
        rows = [{"corpus": corpus, "split": split, "transform": name, "seed": seed,
                 "bin_left": float(edges[i]), "bin_right": float(edges[i + 1]),
                 "count": int(counts[i]), "fraction": float(counts[i]) / v.size,
                 "signature": sig} for i in range(len(counts))]
        out.append((rows, v))
    return out


def sparsity_rows(corpus: str, split: str, zero_fractions: Mapping[str, Sequence[float]],
                  bins: int = 50, signatures: Optional[Mapping[str, str]] = None,
                  seed: Optional[int] = None) -> list[dict]:
    """Histogram of the per-step proportion of zero output components, per transform."""
    for name, v in zero_fractions.items():
        v = np.asarray(v, dtype=np.float64)
        if v.size and (v.min() < 0 or v.max() > 1):
            raise UserError(f"{name}: zero fractions must lie in [0, 1] (zeros / vocabulary size)")
    parts = _histogram_rows(corpus, split, zero_fractions, bins, "sparsity", signatures, seed)
    return [row for rows, _ in parts for row in rows]


def self_norm_rows(corpus: str, split: str, sums: Mapping[str, Sequence[float]],
                   bins: int = 50, signatures: Optional[Mapping[str, str]] = None,
                   seed: Optional[int] = None) -> list[dict]:
    """Histogram of the per-step sum of output components, with its mean and std repeated."""
    out = []
    for rows, v in _histogram_rows(corpus, split, sums, bins, "self-normalization", signatures,
                                   seed):
        std = float(v.std(ddof=1)) if v.size > 1 else 0.0
        out += [{**row, "mean": float(v.mean()), "std": std} for row in rows]
    return out
