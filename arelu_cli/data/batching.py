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
from dataclasses import dataclass

import numpy as np
import torch

from arelu_cli.data.prepared import EncodedSplit, Prepared
from arelu_cli.errors import UserError


@dataclass(frozen=True)
class Batch:
    """Padded tensors of one batch (right padding with the pad id)."""

    indices: torch.Tensor
    """(B,) positions of the examples in their split, e.g. to match references."""
    src: torch.Tensor
    """(B, S) source ids followed by eos."""
    tgt_in: torch.Tensor
    """(B, T) bos followed by the target ids: the decoder input."""
    tgt_out: torch.Tensor
    """(B, T) the target ids followed by eos: what the decoder must predict."""
    pad_id: int

    @property
    def inputs(self) -> tuple[torch.Tensor, ...]:
        """What the model reads: ``(src, tgt_in)``, or ``(tgt_in,)`` for a language-model
        batch, whose ``src`` is empty (B, 0): a translation source always holds its eos."""
        return (self.tgt_in,) if self.src.shape[1] == 0 else (self.src, self.tgt_in)

    @property
    def n_tgt_tokens(self) -> int:
        """Non-pad target tokens (eos included): the usual loss normalizer."""
        return int((self.tgt_out != self.pad_id).sum())

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on another device."""
        return Batch(*(t.to(device) for t in (self.indices, self.src, self.tgt_in, self.tgt_out)),
                     pad_id=self.pad_id)


def example_sizes(src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> np.ndarray:
    """Each example's padded size: max(len(src) + 1, len(tgt) + 1)."""
    return np.maximum(np.asarray(src_lengths), np.asarray(tgt_lengths)).astype(np.int64) + 1


def _pack(order: np.ndarray, sizes: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Greedy packing of examples already sorted by ascending size."""
    batches, start, longest = [], 0, 0
    sorted_sizes = sizes[order].tolist()
    for i, size in enumerate(sorted_sizes):
        longest = max(longest, size)
        if (i - start + 1) * longest > max_tokens:
            batches.append(order[start:i])
            start, longest = i, size
    batches.append(order[start:])
    return batches


def batch_indices(sizes: np.ndarray, max_tokens: int, *, seed: int = 0, epoch: int = 0,
                  shuffle: bool = True, rank: int = 0, world_size: int = 1) -> list[np.ndarray]:
    """This rank's batches for one epoch, each an array of example indices.

    With ``shuffle=False`` the batches come in ascending length order and no randomness is
    used (for decoding dev/test).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if world_size < 1 or not 0 <= rank < world_size:
        raise UserError(f"rank must be in [0, world_size), got rank={rank}, world_size={world_size}")
    if len(sizes) == 0:
        raise UserError("cannot batch an empty split")
    if sizes.max() > max_tokens:
        worst = int(sizes.argmax())
        raise UserError(f"example {worst} has {sizes[worst]} tokens, more than max_tokens="
                        f"{max_tokens}; raise the token budget or filter long sentences")
    rng = np.random.default_rng([seed, epoch])
    if shuffle:
        perm = rng.permutation(len(sizes))
        order = perm[np.argsort(sizes[perm], kind="stable")]
    else:
        order = np.argsort(sizes, kind="stable")
    batches = _pack(order, sizes, max_tokens)
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    padded = -(-len(batches) // world_size) * world_size
    batches = [batches[i % len(batches)] for i in range(padded)]
    return batches[rank::world_size]


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
        from arelu_cli.data.blocks import block_batches  # it builds on this module
        yield from block_batches(data, split, max_tokens, block_size, seed=seed, epoch=epoch,
                                 shuffle=shuffle, rank=rank, world_size=world_size)
        return
    encoded = data.split(split)
    sizes = example_sizes(encoded.src_lengths, encoded.tgt_lengths)
    for indices in batch_indices(sizes, max_tokens, seed=seed, epoch=epoch, shuffle=shuffle,
                                 rank=rank, world_size=world_size):
        yield collate(encoded, indices, pad_id=data.pad_id, bos_id=data.bos_id, eos_id=data.eos_id)
