"""Token-budget batches: length-bucketed, shuffled per epoch with a seed, shardable over ranks.

As in fairseq and OpenNMT (the paper trains with 4096-token batches), a batch is a set of
examples whose *padded* size stays within ``max_tokens``: ``len(batch) * max size``, where an
example's size is ``max(len(src) + 1, len(tgt) + 1)`` (the source gets an eos, the target a
bos or eos). Examples are sorted by size (ties broken at random) and packed greedily, so
a batch holds examples of nearly equal length; then the batch order is shuffled.

Everything depends only on ``(seed, epoch)``: every rank builds the same global list of
batches and takes every ``world_size``-th one starting at ``rank``. When the count is not
a multiple of ``world_size``, the first batches are repeated so that every rank gets the
same number of steps (as ``DistributedSampler`` does); with one rank every example is in
exactly one batch per epoch.

Typical use::

    data = load_prepared("data/toy")
    for batch in token_batches(data, "train", max_tokens=4096, seed=0, epoch=epoch):
        logits = model(batch.src, batch.tgt_in)            # (B, T, V)
        loss = loss_fn(logits, batch.tgt_out)              # pad positions hold data.pad_id
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from arelu_cli.data.batch import Batch, batch_indices
from arelu_cli.data.blocks import block_batches
from arelu_cli.data.prepared import EncodedSplit, Prepared


def example_sizes(src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> np.ndarray:
    """Each example's padded size: max(len(src) + 1, len(tgt) + 1)."""
    return np.maximum(np.asarray(src_lengths), np.asarray(tgt_lengths)).astype(np.int64) + 1


def collate(split: EncodedSplit, indices: np.ndarray, *, pad_id: int, bos_id: int,
            eos_id: int) -> Batch:
    """Padded tensors for the examples ``indices`` of ``split``."""
    srcs = [split.src(int(i)) for i in indices]
    tgts = [split.tgt(int(i)) for i in indices]
    src = np.full((len(srcs), max(len(s) for s in srcs) + 1), pad_id, dtype=np.int64)
    tgt_in = np.full((len(tgts), max(len(t) for t in tgts) + 1), pad_id, dtype=np.int64)
    tgt_out = tgt_in.copy()
    for row, (s, t) in enumerate(zip(srcs, tgts)):
        src[row, :len(s)], src[row, len(s)] = s, eos_id
        tgt_in[row, 0], tgt_in[row, 1:len(t) + 1] = bos_id, t
        tgt_out[row, :len(t)], tgt_out[row, len(t)] = t, eos_id
    return Batch(torch.as_tensor(np.asarray(indices, dtype=np.int64)), torch.from_numpy(src),
                 torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), pad_id=pad_id)


def token_batches(data: Prepared, split: str, max_tokens: int = 4096, *, seed: int = 0,
                  epoch: int = 0, shuffle: bool = True, rank: int = 0, world_size: int = 1,
                  block_size: int = 0) -> Iterator[Batch]:
    """This rank's padded batches of ``split`` for one epoch (see the module docstring); for
    a language-modelling folder, batches of blocks of ``block_size`` tokens
    (:mod:`arelu_cli.data.blocks`)."""
    if data.task == "lm":
        yield from block_batches(data, split, max_tokens, block_size, seed=seed, epoch=epoch,
                                 shuffle=shuffle, rank=rank, world_size=world_size)
        return
    encoded = data.split(split)
    sizes = example_sizes(encoded.src_lengths, encoded.tgt_lengths)
    for indices in batch_indices(sizes, max_tokens, seed=seed, epoch=epoch, shuffle=shuffle,
                                 rank=rank, world_size=world_size):
        yield collate(encoded, indices, pad_id=data.pad_id, bos_id=data.bos_id, eos_id=data.eos_id)
