"""The output layer at every decoding step of a split: what the sparsity and
self-normalization analyses measure (paper, sections "Sparsity" and "Self-normalization").

A step is one target position of one sentence; its output is the transform applied to the
model's logits there. Two ways to walk the steps:

* ``reference``: teacher-forced on the reference translation (eos included);
* ``beam``: along the best beam hypothesis, i.e. the steps decoding went through to produce
  it (the hypothesis is decoded first, then teacher-forced, which gives the same logits).

Large splits (train) are subsampled to ``max_sentences`` sentences chosen with a seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
import torch

from arelu_cli.config import DecodeConfig
from arelu_cli.data.batching import Batch, batch_indices, collate, example_sizes
from arelu_cli.decode.search import refuse_nan, target_tensors
from arelu_cli.util.errors import UserError
from arelu_cli.decode.translate import Decoder, decode_batch

Along = Literal["reference", "beam"]
ALONG = ("reference", "beam")


def parse_along(text: str) -> list[Along]:
    """``reference``, ``beam`` or ``both``."""
    if text == "both":
        return list(ALONG)
    if text not in ALONG:
        raise UserError(f"--along takes reference, beam or both, got {text!r}")
    return [text]


def sample_indices(n: int, max_sentences: int | None, seed: int = 0) -> np.ndarray:
    """All ``n`` sentence indices, or ``max_sentences`` of them drawn without replacement
    (sorted, the same for the same seed)."""
    if max_sentences is not None and max_sentences < 1:
        raise UserError(f"--max-sentences must be at least 1, got {max_sentences}")
    if max_sentences is None or max_sentences >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_sentences, replace=False))


TRAIN_SAMPLE = 1000
"""Sentences of the train split measured when no ``max_sentences`` is given."""


def split_indices(decoder: Decoder, split: str, max_sentences: int | None,
                  seed: int = 0) -> np.ndarray:
    """The sentences of a split to measure: all of them, or a seeded sample of
    ``max_sentences`` (by default :data:`TRAIN_SAMPLE` of train, which is large)."""
    n = len(decoder.data.split(split))
    if max_sentences is None and split == "train":
        max_sentences = TRAIN_SAMPLE
    return sample_indices(n, max_sentences, seed)


def split_batches(decoder: Decoder, split: str, indices: np.ndarray,
                  max_tokens: int) -> Iterator[Batch]:
    """Padded batches of the sentences ``indices`` of a split, on the decoder's device."""
    data = decoder.data
    encoded = data.split(split)
    if len(indices) == 0:
        raise UserError(f"split {split!r} of {data.path} is empty")
    sizes = example_sizes(encoded.src_lengths[indices], encoded.tgt_lengths[indices])
    budget = max(max_tokens, int(sizes.max()))
    for chosen in batch_indices(sizes, budget, shuffle=False):
        yield collate(encoded, indices[chosen], pad_id=data.pad_id, bos_id=data.bos_id,
                      eos_id=data.eos_id).to(decoder.device)


@torch.no_grad()
def step_targets(decoder: Decoder, batch: Batch, along: Along, cfg: DecodeConfig,
                 renormalize: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-forcing tensors (tgt_in, tgt_out, keep), (B, T) each, that walk the batch's
    steps: the input, the token of each step, True at the steps (see the module docstring)."""
    data = decoder.data
    if along == "reference":
        return batch.tgt_in, batch.tgt_out, batch.tgt_out != data.pad_id
    sources = [row[row != data.pad_id][:-1].tolist() for row in batch.src]  # without eos
    best = [hyps[0] for hyps in decode_batch(decoder, sources, cfg, renormalize=renormalize)]
    return target_tensors(best, bos_id=data.bos_id, eos_id=data.eos_id, pad_id=data.pad_id,
                          device=decoder.device)


@torch.no_grad()
def step_logits(decoder: Decoder, batch: Batch, along: Along, cfg: DecodeConfig,
                renormalize: bool = False) -> torch.Tensor:
    """(N, V) float32 logits at every step of the batch's sentences (see the module docstring);
    NaN logits (weights that are not finite) are a :class:`UserError`, never a NaN statistic."""
    tgt_in, _, keep = step_targets(decoder, batch, along, cfg, renormalize)
    logits = decoder.model(batch.src, tgt_in, keep).float()
    refuse_nan(logits, "measuring its outputs")
    return logits


def step_probs(decoder: Decoder, split: str, along: Along, cfg: DecodeConfig, *,
               indices: np.ndarray, renormalize: bool = False) -> Iterator[torch.Tensor]:
    """The transform's outputs (N, V) at every step, batch by batch."""
    for batch in split_batches(decoder, split, indices, cfg.max_tokens):
        yield decoder.transform.probs(step_logits(decoder, batch, along, cfg, renormalize))
