"""Language-model batches: the split as one token stream, cut into fixed-length blocks.

As LM benchmarks do (Mikolov's PTB setup, fairseq's ``--sample-break-mode none``, nanoGPT),
the lines of a split are concatenated into one stream with an end-of-sentence token after
each line, and one more at its start (so that the first line is predicted from an
end-of-sentence like every other)::

    stream = [eos] + line_1 + [eos] + line_2 + [eos] + ...      (n_tokens + n_lines + 1 ids)

Block ``i`` of length ``T = block_size`` reads ``stream[iT : iT + T]`` and predicts
``stream[iT + 1 : iT + T + 1]``; blocks do not overlap and carry no state across, so every
token of the split (each end-of-sentence included) is predicted exactly once. The last block
is shorter when the stream does not divide evenly (its missing positions are padding,
ignored by the loss). A batch is ``max(1, max_tokens // T)`` blocks, shuffled per epoch
with the seed, sharded over ranks like translation batches
(:func:`arelu_cli.data.batch.batch_indices`). A language-model :class:`Batch` has no
source: ``src`` is ``(B, 0)`` and :attr:`Batch.inputs` is ``(tgt_in,)``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from arelu_cli.data.batch import Batch, batch_indices
from arelu_cli.data.prepared import Prepared
from arelu_cli.util.errors import UserError


def stream(ids: np.ndarray, offsets: np.ndarray, eos_id: int) -> np.ndarray:
    """int64 ``[eos] + line_1 + [eos] + line_2 + [eos] ...`` from flat ids and line offsets."""
    lengths = np.diff(offsets)
    out = np.full(len(ids) + len(lengths) + 1, eos_id, dtype=np.int64)
    # line i's tokens start after the i + 1 end-of-sentence tokens before them
    starts = np.asarray(offsets[:-1], dtype=np.int64) + np.arange(1, len(lengths) + 1)
    keep = np.ones(len(out), dtype=bool)
    keep[0] = False
    keep[starts + lengths] = False
    out[keep] = ids
    return out


def split_stream(data: Prepared, split: str) -> np.ndarray:
    """The token stream of a language-modelling split (see the module docstring)."""
    return stream(*data.text_ids(split), data.eos_id)


def block_lengths(n_stream: int, block_size: int) -> np.ndarray:
    """The predicted positions of each block of a stream of ``n_stream`` tokens."""
    if block_size < 1:
        raise UserError(f"[data] block_size must be at least 1, got {block_size}")
    n_predicted = n_stream - 1
    if n_predicted < 1:
        raise UserError("cannot cut blocks from an empty split")
    full, rest = divmod(n_predicted, block_size)
    return np.array([block_size] * full + ([rest] if rest else []), dtype=np.int64)


def collate_blocks(tokens: np.ndarray, indices: np.ndarray, block_size: int,
                   pad_id: int, stride: int | None = None) -> Batch:
    """The blocks ``indices`` of the stream ``tokens`` as a batch (right-padded); block ``i``
    starts at ``i * stride`` (default ``block_size``: blocks that do not overlap)."""
    rows, step = len(indices), stride or block_size
    tgt_in = np.full((rows, block_size), pad_id, dtype=np.int64)
    tgt_out = tgt_in.copy()
    for row, block in enumerate(indices):
        start = int(block) * step
        piece = tokens[start:start + block_size + 1]
        tgt_in[row, :len(piece) - 1], tgt_out[row, :len(piece) - 1] = piece[:-1], piece[1:]
    width = int((tgt_out != pad_id).any(axis=0).nonzero()[0].max()) + 1  # drop all-pad columns
    return Batch(torch.as_tensor(np.asarray(indices, dtype=np.int64)),
                 torch.zeros((rows, 0), dtype=torch.int64), torch.from_numpy(tgt_in[:, :width]),
                 torch.from_numpy(tgt_out[:, :width]), pad_id=pad_id)


def block_batches(data: Prepared, split: str, max_tokens: int, block_size: int, *, seed: int = 0,
                  epoch: int = 0, shuffle: bool = True, rank: int = 0,
                  world_size: int = 1) -> Iterator[Batch]:
    """This rank's batches of blocks of ``split`` for one epoch (see the module docstring)."""
    if block_size > max_tokens:
        raise UserError(f"[data] block_size ({block_size}) is more than the batch's max_tokens "
                        f"({max_tokens}); raise max_tokens or lower block_size")
    tokens = split_stream(data, split)
    sizes = block_lengths(len(tokens), block_size)
    budget = max_tokens // block_size * block_size
    for indices in batch_indices(sizes, budget, seed=seed, epoch=epoch, shuffle=shuffle,
                                 rank=rank, world_size=world_size):
        yield collate_blocks(tokens, indices, block_size, data.pad_id)


def window_count(n_stream: int, block_size: int, stride: int) -> int:
    """Windows of ``block_size`` every ``stride`` tokens that predict each of the stream's
    ``n_stream - 1`` tokens once: window 0 scores its ``block_size`` positions, window ``j > 0``
    its last ``stride`` (those after window ``j - 1``'s end)."""
    if not 1 <= stride <= block_size:
        raise ValueError(f"the stride must be in [1, block_size = {block_size}], got {stride}")
    beyond = n_stream - 1 - block_size
    return 1 if beyond <= 0 else 1 + -(-beyond // stride)


def window_batches(data: Prepared, split: str, max_tokens: int, block_size: int,
                   stride: int) -> Iterator[tuple[Batch, torch.Tensor]]:
    """Sliding-window evaluation batches of ``split``, in stream order: each batch with a
    ``(B, T)`` mask of the positions it scores (:func:`window_count`). Every token is
    predicted once, as with blocks, but each one after the first window sees at least
    ``block_size - stride`` tokens of context (a block's first tokens see almost none): the
    perplexity a stateful model's evaluation is compared with."""
    tokens = split_stream(data, split)
    count = window_count(len(tokens), block_size, stride)
    rows = max(1, max_tokens // block_size)
    for first in range(0, count, rows):
        windows = np.arange(first, min(first + rows, count))
        batch = collate_blocks(tokens, windows, block_size, data.pad_id, stride)
        columns = torch.arange(batch.tgt_out.shape[1]).unsqueeze(0)
        scored = (columns >= block_size - stride) | torch.as_tensor(windows == 0).unsqueeze(1)
        yield batch, scored & (batch.tgt_out != data.pad_id)
