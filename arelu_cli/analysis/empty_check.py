"""``arelu empty-check``: the "cat got your tongue" statistic (paper Table 2, after Stahlberg
and Byrne 2019 and Peters and Martins 2021).

For each sentence of a split, the model score of the empty translation (eos as the first
token) is compared with the score of the beam search hypothesis, both with the scores
decoding uses (:func:`arelu_cli.decode.search.step_log_scores`: for alpha-ReLU the log of its
unnormalized output, or renormalized with ``renormalize``). The summary counts the
sentences where the empty string scores strictly higher than the hypothesis (the table's
percentage), those where the empty string has non-zero probability at all, and those where
the beam hypothesis itself is empty. Scores are raw sums of log scores, not length-normalized.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from arelu_cli.analysis.steps import split_batches, split_indices
from arelu_cli.config import DecodeConfig
from arelu_cli.decode.search import Hypothesis, sequence_scores, target_tensors
from arelu_cli.decode.translate import Decoder, decode_batch


@dataclass(frozen=True)
class SentenceCheck:
    index: int
    """Position of the sentence in its split."""
    hyp_score: float
    """Score of the best beam hypothesis (its eos included when it ended with one)."""
    empty_score: float
    """Score of the empty translation: the log score of eos at the first step."""
    hyp_length: int
    """Tokens of the beam hypothesis, eos excluded."""

    @property
    def empty_better(self) -> bool:
        return self.empty_score > self.hyp_score

    @property
    def empty_possible(self) -> bool:
        return math.isfinite(self.empty_score)


def check_split(decoder: Decoder, split: str, cfg: DecodeConfig, *, indices: np.ndarray,
                renormalize: bool = False) -> list[SentenceCheck]:
    """One :class:`SentenceCheck` per sentence of ``indices``, in split order."""
    data, found = decoder.data, []
    empty = Hypothesis([], 0.0)
    for batch in split_batches(decoder, split, indices, cfg.max_tokens):
        sources = [row[row != data.pad_id][:-1].tolist() for row in batch.src]
        best = [hyps[0] for hyps in decode_batch(decoder, sources, cfg, renormalize=renormalize)]
        forced = target_tensors([empty] * len(best), bos_id=data.bos_id, eos_id=data.eos_id,
                                pad_id=data.pad_id, device=decoder.device)
        empty_scores = sequence_scores(decoder.model, batch.src, *forced, decoder.transform,
                                       renormalize=renormalize).tolist()
        found += [SentenceCheck(i, h.score, e, len(h.tokens))
                  for i, h, e in zip(batch.indices.tolist(), best, empty_scores)]
    return sorted(found, key=lambda c: c.index)


def summary_row(decoder: Decoder, split: str, checks: list[SentenceCheck], cfg: DecodeConfig,
                renormalize: bool) -> dict:
    """The Table 2 row of one checkpoint and split."""
    n = len(checks)
    better = sum(c.empty_better for c in checks)
    possible = sum(c.empty_possible for c in checks)
    t = decoder.transform
    return {"transform": t.name, "alpha": t.alpha, "tau": t.tau, "split": split,
            "renormalize": renormalize, "beam": cfg.beam, "sentences": n,
            "empty_better": better, "empty_better_pct": 100.0 * better / n,
            "empty_nonzero": possible, "empty_nonzero_pct": 100.0 * possible / n,
            "beam_empty": sum(c.hyp_length == 0 for c in checks),
            "checkpoint": str(decoder.path),
            "signature": decoder.signature(split=split, beam=cfg.beam,
                                           renormalize=renormalize or None)}


def sentence_rows(decoder: Decoder, split: str, checks: list[SentenceCheck]) -> list[dict]:
    """Per-sentence details: both scores and which one wins."""
    return [{"transform": decoder.transform.name, "split": split, **asdict(c),
             "empty_better": c.empty_better} for c in checks]


def measure(decoder: Decoder, splits: list[str], cfg: DecodeConfig, *, renormalize: bool = False,
            max_sentences: int | None = None, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Summary rows (one per split) and per-sentence rows of one checkpoint."""
    summaries, details = [], []
    for split in splits:
        checks = check_split(decoder, split, cfg, renormalize=renormalize,
                             indices=split_indices(decoder, split, max_sentences, seed))
        summaries.append(summary_row(decoder, split, checks, cfg, renormalize))
        details += sentence_rows(decoder, split, checks)
    return summaries, details
