"""Language-model blocks: the stream with one end-of-sentence per line, blocks that predict
every token exactly once, batches of max_tokens // block_size blocks; sliding windows that
score every token once with at least block_size - stride tokens of context."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arelu_cli.data.blocks import (block_batches, block_lengths, collate_blocks, stream,
                                   window_batches, window_count)
from arelu_cli.data.batching import token_batches
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError

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


def test_window_count_covers_the_stream():
    assert window_count(9, 4, 4) == 2 and window_count(10, 4, 4) == 3  # the blocks' counts
    assert window_count(5, 4, 2) == 1                       # 4 predicted: one window
    assert window_count(10, 4, 2) == 4                      # 9: window 0 scores 1..4, then 2 each
    with pytest.raises(ValueError, match="stride must be in \\[1, block_size = 4\\], got 5"):
        window_count(10, 4, 5)


@pytest.mark.parametrize("block, stride", [(16, 16), (16, 5), (16, 1)])
def test_windows_score_every_token_once_in_order_with_context(tiny_lm_corpus, block, stride):
    data = load_prepared(tiny_lm_corpus)
    tokens = stream(*data.text_ids("dev"), data.eos_id)
    scored_targets, window = [], 0
    for batch, scored in window_batches(data, "dev", 64, block, stride):
        assert batch.tgt_in.shape[0] <= 64 // block and scored.shape == batch.tgt_out.shape
        for row in range(batch.tgt_in.shape[0]):
            start = window * stride
            width = int((batch.tgt_out[row] != PAD).sum())
            assert batch.tgt_in[row, :width].tolist() == tokens[start:start + width].tolist()
            assert batch.tgt_out[row, :width].tolist() == tokens[start + 1:start + width + 1].tolist()
            columns = scored[row].nonzero().flatten().tolist()
            if window:  # each scored position sees at least block - stride tokens before it
                assert columns[0] == block - stride
            scored_targets += batch.tgt_out[row, columns].tolist()
            window += 1
    assert window == window_count(len(tokens), block, stride)
    assert scored_targets == tokens[1:].tolist()


def test_windows_of_the_block_stride_are_the_blocks(tiny_lm_corpus):
    data = load_prepared(tiny_lm_corpus)
    windows = [b for b, _ in window_batches(data, "test", 64, 16, 16)]
    blocks = list(token_batches(data, "test", max_tokens=64, block_size=16, shuffle=False))
    assert sorted(map(tuple, torch.cat([b.tgt_out for b in windows]).tolist())) == \
        sorted(map(tuple, torch.cat([b.tgt_out for b in blocks]).tolist()))
