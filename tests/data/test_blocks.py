"""Language-model blocks: the stream with one end-of-sentence per line, blocks that predict
every token exactly once, batches of max_tokens // block_size blocks."""

from __future__ import annotations

import numpy as np
import pytest

from arelu_cli.data.blocks import block_batches, block_lengths, collate_blocks, stream
from arelu_cli.data.batching import token_batches
from arelu_cli.data.prepared import load_prepared
from arelu_cli.errors import UserError

EOS, PAD = 2, 0


def test_stream_puts_an_eos_before_the_first_line_and_after_each():
    ids = np.array([10, 11, 12, 13, 14], dtype=np.uint16)
    offsets = np.array([0, 2, 2, 5])  # lines [10, 11], [], [12, 13, 14]
    assert stream(ids, offsets, EOS).tolist() == [2, 10, 11, 2, 2, 12, 13, 14, 2]


def test_block_lengths_cover_every_predicted_token():
    assert block_lengths(9, 4).tolist() == [4, 4]       # 8 predicted tokens
    assert block_lengths(10, 4).tolist() == [4, 4, 1]   # 9: a short last block
    with pytest.raises(UserError, match="empty split"):
        block_lengths(1, 4)


def test_collate_blocks_shifts_by_one_and_pads_the_short_block():
    tokens = np.arange(20, 30)  # 10 tokens: blocks of 4 predict 4, 4, 1
    batch = collate_blocks(tokens, np.array([2, 0]), 4, PAD)
    assert batch.src.shape == (2, 0) and batch.inputs == (batch.tgt_in,)
    assert batch.tgt_in.tolist() == [[28, 0, 0, 0], [20, 21, 22, 23]]
    assert batch.tgt_out.tolist() == [[29, 0, 0, 0], [21, 22, 23, 24]]
    assert batch.n_tgt_tokens == 5


def test_an_epoch_predicts_every_token_once(tiny_lm_corpus):
    data = load_prepared(tiny_lm_corpus)
    n = data.meta["splits"]["dev"]["stream_tokens"]
    batches = list(token_batches(data, "dev", max_tokens=64, block_size=16, shuffle=False))
    assert all(b.tgt_in.shape[0] <= 4 for b in batches)  # 64 // 16 blocks a batch
    assert sum(b.n_tgt_tokens for b in batches) == n
    targets = sorted(int(i) for b in batches for i in b.indices)
    assert targets == list(range(len(targets)))


def test_shuffled_epochs_differ_and_repeat_with_the_seed(tiny_lm_corpus):
    data = load_prepared(tiny_lm_corpus)
    def order(epoch):
        return [b.indices.tolist() for b in block_batches(data, "train", 64, 16, seed=1, epoch=epoch)]
    assert order(0) == order(0) and order(0) != order(1)


def test_two_ranks_split_the_blocks(tiny_lm_corpus):
    data = load_prepared(tiny_lm_corpus)
    per_rank = [list(block_batches(data, "train", 64, 16, rank=r, world_size=2)) for r in (0, 1)]
    assert len(per_rank[0]) == len(per_rank[1])  # the same number of steps on each
    seen = {int(i) for batches in per_rank for b in batches for i in b.indices}
    n_blocks = len(block_lengths(len(stream(*data.text_ids("train"), EOS)), 16))
    assert seen == set(range(n_blocks))


def test_block_longer_than_the_batch_is_refused(tiny_lm_corpus):
    with pytest.raises(UserError, match="block_size \\(32\\) is more than the batch's max_tokens"):
        next(block_batches(load_prepared(tiny_lm_corpus), "dev", 16, 32))
