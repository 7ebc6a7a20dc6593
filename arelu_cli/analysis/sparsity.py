"""``arelu sparsity``: how many output components are exactly zero at each decoding step
(paper, Figs. "sparsity" (test sets) and "sparsity_train": 1.5-ReLU vs 1.5-entmax).

For each checkpoint, split and walk (:mod:`arelu_cli.analysis.steps`) the CSV holds the full
distribution: one row per distinct number of zeros with the number of steps that had it,
and the zero fraction ``zeros / vocab``. Softmax has no zeros; it is allowed as a baseline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from arelu_cli.analysis.steps import Along, split_indices, step_probs
from arelu_cli.config import DecodeConfig
from arelu_cli.decode.translate import Decoder


def zero_counts(decoder: Decoder, split: str, along: Along, cfg: DecodeConfig, *,
                indices: np.ndarray) -> np.ndarray:
    """Number of zero components of the output at every step, in batch order."""
    counts = [(probs == 0).sum(-1).cpu().numpy()
              for probs in step_probs(decoder, split, along, cfg, indices=indices)]
    return np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)


def distribution_rows(decoder: Decoder, split: str, along: Along, counts: np.ndarray,
                      cfg: DecodeConfig, sentences: int) -> list[dict]:
    """One row per distinct zero count: how many steps had exactly that many zeros."""
    t, vocab = decoder.transform, decoder.data.vocab_size
    sig = decoder.signature(split=split, along=along, beam=cfg.beam if along == "beam" else None,
                            sentences=sentences)
    values, steps = np.unique(counts, return_counts=True)
    return [{"transform": t.name, "alpha": t.alpha, "tau": t.tau, "split": split, "along": along,
             "zeros": int(v), "steps": int(n), "vocab": vocab, "zero_fraction": int(v) / vocab,
             "checkpoint": str(decoder.path), "signature": sig}
            for v, n in zip(values.tolist(), steps.tolist())]


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per transform, split and walk: steps, mean/median/min/max zeros and mean zero fraction."""
    rows = []
    keys = ["checkpoint", "transform", "split", "along"]
    for key, group in frame.groupby(keys, sort=False):
        zeros = np.repeat(group["zeros"].to_numpy(), group["steps"].to_numpy())
        vocab = int(group["vocab"].iloc[0])
        rows.append({**dict(zip(keys, key)), "steps": len(zeros), "vocab": vocab,
                     "mean_zeros": zeros.mean(), "median_zeros": float(np.median(zeros)),
                     "min_zeros": int(zeros.min()), "max_zeros": int(zeros.max()),
                     "mean_zero_fraction": zeros.mean() / vocab})
    return pd.DataFrame(rows)


def measure(decoder: Decoder, splits: list[str], alongs: list[Along], cfg: DecodeConfig, *,
            max_sentences: int | None = None, seed: int = 0) -> list[dict]:
    """Distribution rows of one checkpoint for every split and walk."""
    rows = []
    for split in splits:
        indices = split_indices(decoder, split, max_sentences, seed)
        for along in alongs:
            counts = zero_counts(decoder, split, along, cfg, indices=indices)
            rows += distribution_rows(decoder, split, along, counts, cfg, len(indices))
    return rows
