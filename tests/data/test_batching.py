"""Token-budget batching invariants, and collation into padded tensors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.data.batching import batch_indices, collate, example_sizes
from arelu_cli.data.prepared import EncodedSplit
from arelu_cli.util.errors import UserError

sizes_st = st.lists(st.integers(1, 60), min_size=1, max_size=300).map(np.array)


@settings(max_examples=150, deadline=None)
@given(sizes=sizes_st, max_tokens=st.integers(60, 500), seed=st.integers(0, 5),
       epoch=st.integers(0, 3))
def test_every_example_once_and_no_batch_over_budget(sizes, max_tokens, seed, epoch):
    batches = batch_indices(sizes, max_tokens, seed=seed, epoch=epoch)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(len(sizes)))
    assert all(len(b) * sizes[b].max() <= max_tokens for b in batches)


@settings(max_examples=100, deadline=None)
@given(sizes=sizes_st, world_size=st.integers(1, 5))
def test_ranks_get_equal_counts_and_cover_everything(sizes, world_size):
    shards = [batch_indices(sizes, 120, seed=1, epoch=2, rank=r, world_size=world_size)
              for r in range(world_size)]
    assert len({len(s) for s in shards}) == 1
    seen = np.concatenate([b for shard in shards for b in shard])
    assert set(seen.tolist()) == set(range(len(sizes)))
    full = batch_indices(sizes, 120, seed=1, epoch=2)  # the same global list, unsharded
    padded = len(shards[0]) * world_size
    assert padded - len(full) < world_size  # only the first few batches are repeated
    assert len(seen) == sum(len(full[i % len(full)]) for i in range(padded))


def test_deterministic_per_seed_and_epoch_and_shuffled_across_epochs():
    sizes = np.random.default_rng(0).integers(1, 50, size=2000)
    first = batch_indices(sizes, 400, seed=3, epoch=0)
    again = batch_indices(sizes, 400, seed=3, epoch=0)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = batch_indices(sizes, 400, seed=3, epoch=1)
    assert [a.tolist() for a in first] != [b.tolist() for b in other]


def test_batches_are_length_bucketed():
    sizes = np.random.default_rng(0).integers(1, 100, size=5000)
    batches = batch_indices(sizes, 1000, seed=0)
    padding = sum(len(b) * sizes[b].max() - sizes[b].sum() for b in batches)
    assert padding < 0.05 * sizes.sum()


def test_unshuffled_batches_are_in_length_order():
    sizes = np.array([5, 1, 3, 2, 4])
    batches = batch_indices(sizes, 6, shuffle=False)
    assert [b.tolist() for b in batches] == [[1, 3], [2], [4], [0]]


@pytest.mark.parametrize("kwargs, message", [
    ({"max_tokens": 4}, "more than max_tokens=4"),
    ({"max_tokens": 100, "rank": 2, "world_size": 2}, "rank must be"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(UserError, match=message):
        batch_indices(np.array([3, 5]), **kwargs)


def _split(src: list[list[int]], tgt: list[list[int]]) -> EncodedSplit:
    def flat(seqs):
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
        return np.array([t for s in seqs for t in s], dtype=np.uint16), offsets
    return EncodedSplit(*flat(src), *flat(tgt))


def test_collate_adds_bos_eos_and_pads():
    split = _split([[10, 11], [12]], [[20], [21, 22, 23]])
    assert example_sizes(split.src_lengths, split.tgt_lengths).tolist() == [3, 4]
    batch = collate(split, np.array([1, 0]), pad_id=0, bos_id=1, eos_id=2)
    assert batch.indices.tolist() == [1, 0]
    assert batch.src.tolist() == [[12, 2, 0], [10, 11, 2]]
    assert batch.tgt_in.tolist() == [[1, 21, 22, 23], [1, 20, 0, 0]]
    assert batch.tgt_out.tolist() == [[21, 22, 23, 2], [20, 2, 0, 0]]
    assert batch.n_tgt_tokens == 6 and batch.src.dtype == batch.tgt_out.dtype
