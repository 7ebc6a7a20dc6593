"""One batch of padded tensors, and the seeded, sharded order of an epoch's batches: what
translation batches (:mod:`arelu_cli.data.batching`) and language-model blocks
(:mod:`arelu_cli.data.blocks`) share.

Examples are sorted by size (ties broken at random) and packed greedily into batches whose
padded size stays within ``max_tokens``; then the batch order is shuffled. Everything
depends only on ``(seed, epoch)``: every rank builds the same global list of batches and
takes every ``world_size``-th one starting at ``rank``. When the count is not a multiple of
``world_size``, the first batches are repeated so that every rank gets the same number of
steps (as ``DistributedSampler`` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from arelu_cli.util.errors import UserError


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
