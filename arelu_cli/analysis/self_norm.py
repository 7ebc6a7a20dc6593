"""``arelu self-norm``: the sum of alpha-ReLU's outputs at each decoding step (paper,
Fig. "self_norm": it concentrates around 1.24 on IWSLT'14 and 1.09 on WMT'14).

alpha-ReLU is not normalized, so beam search compares unnormalized scores across steps;
that is sound when ``sum_i alpha-ReLU_i(z)`` is about the same at every step. For each
checkpoint and split this writes a summary row (mean, std, quantiles) and the histogram of
the sums (one row per bin) that the plot is drawn from. A normalizing transform sums to one.
"""

from __future__ import annotations

import numpy as np

from arelu_cli.analysis.steps import Along, split_indices, step_probs
from arelu_cli.config import DecodeConfig
from arelu_cli.util.errors import UserError
from arelu_cli.decode.translate import Decoder

QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def output_sums(decoder: Decoder, split: str, along: Along, cfg: DecodeConfig, *,
                indices: np.ndarray) -> np.ndarray:
    """``sum_i p_i`` at every step, float64, in batch order."""
    sums = [probs.double().sum(-1).cpu().numpy()
            for probs in step_probs(decoder, split, along, cfg, indices=indices)]
    return np.concatenate(sums) if sums else np.zeros(0)


def _labels(decoder: Decoder, split: str, along: Along, cfg: DecodeConfig,
            sentences: int) -> dict:
    t = decoder.transform
    return {"transform": t.name, "alpha": t.alpha, "tau": t.tau, "split": split,
            "along": along, "checkpoint": str(decoder.path),
            "signature": decoder.signature(split=split, along=along, sentences=sentences,
                                           beam=cfg.beam if along == "beam" else None)}


def summary_row(decoder: Decoder, split: str, along: Along, sums: np.ndarray,
                cfg: DecodeConfig, sentences: int) -> dict:
    """Steps, mean, std, min, max and the :data:`QUANTILES` of the sums."""
    if len(sums) == 0:
        raise UserError(f"no decoding steps on split {split!r}: nothing to measure")
    quantiles = {f"q{round(q * 100):02d}": float(np.quantile(sums, q)) for q in QUANTILES}
    return {**_labels(decoder, split, along, cfg, sentences), "steps": len(sums),
            "mean": float(sums.mean()), "std": float(sums.std()), "min": float(sums.min()),
            **quantiles, "max": float(sums.max())}


def histogram_rows(decoder: Decoder, split: str, along: Along, sums: np.ndarray,
                   cfg: DecodeConfig, sentences: int, bins: int = 60) -> list[dict]:
    """The histogram of the sums: ``bins`` equal bins from their min to their max."""
    counts, edges = np.histogram(sums, bins=bins)
    labels = _labels(decoder, split, along, cfg, sentences)
    return [{**labels, "bin_low": float(lo), "bin_high": float(hi), "steps": int(n)}
            for lo, hi, n in zip(edges[:-1], edges[1:], counts)]


def measure(decoder: Decoder, splits: list[str], alongs: list[Along], cfg: DecodeConfig, *,
            max_sentences: int | None = None, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Summary rows and histogram rows of one checkpoint for every split and walk."""
    summaries, histograms = [], []
    for split in splits:
        indices = split_indices(decoder, split, max_sentences, seed)
        for along in alongs:
            sums = output_sums(decoder, split, along, cfg, indices=indices)
            summaries.append(summary_row(decoder, split, along, sums, cfg, len(indices)))
            histograms += histogram_rows(decoder, split, along, sums, cfg, len(indices))
    return summaries, histograms
