"""Cleaning parallel text the way the paper's pipelines do (fairseq / Moses ``clean-corpus-n``).

Every line is normalized (Unicode NFC, control characters removed, runs of whitespace made
one space, no leading/trailing space). Training pairs are then filtered: empty sides,
sides longer than ``max_words`` words, and pairs whose word-length ratio exceeds
``max_ratio`` are dropped. Dev and test pairs are normalized only, never dropped, so that
their references stay complete. The normalized target lines are the raw, detokenized
references BLEU is computed against.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass

from arelu_cli.util.errors import UserError


@dataclass(frozen=True)
class CleanRules:
    """Which training pairs to drop."""

    max_words: int = 175
    """Longest side, in whitespace-separated words (fairseq's IWSLT'14 recipe: 175)."""
    max_ratio: float = 1.5
    """Largest ratio of the longer side's word count to the shorter's (Moses: 1.5)."""

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise UserError(f"max words must be at least 1, got {self.max_words}")
        if self.max_ratio < 1:
            raise UserError(f"max ratio must be at least 1, got {self.max_ratio}")


def normalize(line: str) -> str:
    """NFC, no control characters, single spaces, stripped."""
    line = unicodedata.normalize("NFC", line)
    if not line.isprintable():
        line = "".join(" " if ch.isspace() or unicodedata.category(ch) == "Cc" else ch
                       for ch in line)
    return " ".join(line.split())


def normalize_all(lines: list[str]) -> list[str]:
    """:func:`normalize` on every line; for dev/test, where no line may be dropped."""
    return [normalize(line) for line in lines]


def drop_reason(src: str, tgt: str, rules: CleanRules) -> str | None:
    """Why a (normalized) training pair is dropped, or ``None`` to keep it."""
    n_src, n_tgt = src.count(" ") + 1 if src else 0, tgt.count(" ") + 1 if tgt else 0
    if n_src == 0 or n_tgt == 0:
        return "empty"
    if max(n_src, n_tgt) > rules.max_words:
        return "too long"
    if max(n_src, n_tgt) > rules.max_ratio * min(n_src, n_tgt):
        return "length ratio"
    return None


def clean_train(src: list[str], tgt: list[str],
                rules: CleanRules) -> tuple[list[str], list[str], dict[str, int]]:
    """Normalize and filter training pairs; returns the kept sides and drop counts by reason."""
    kept_src, kept_tgt, dropped = [], [], Counter()
    for raw_src, raw_tgt in zip(src, tgt, strict=True):
        a, b = normalize(raw_src), normalize(raw_tgt)
        reason = drop_reason(a, b, rules)
        if reason is None:
            kept_src.append(a)
            kept_tgt.append(b)
        else:
            dropped[reason] += 1
    return kept_src, kept_tgt, dict(sorted(dropped.items()))
