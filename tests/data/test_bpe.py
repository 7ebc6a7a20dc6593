"""Byte-level BPE: lossless round trip, fixed special ids, merge counts, dtype choice."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.data import bpe

TEXT = ["Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
        "A little girl climbs into a wooden playhouse.",
        "Двое мужчин стоят у дома.", "Zwei Männer stehen vor dem Haus."] * 20


@pytest.fixture(scope="module")
def tokenizer():
    return bpe.train_bpe(TEXT, merges=60)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_nfc_text_round_trips(tokenizer, text):
    text = unicodedata.normalize("NFC", text)
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == text
    assert bpe.UNK_ID not in ids


def test_special_tokens_have_fixed_ids_and_literal_text_stays_text(tokenizer):
    assert [tokenizer.token_to_id(t) for t in bpe.SPECIALS] == [0, 1, 2, 3]
    ids = tokenizer.encode("a <s> b </s> <pad>").ids
    assert not set(ids) & {bpe.PAD_ID, bpe.BOS_ID, bpe.EOS_ID, bpe.UNK_ID}
    assert tokenizer.decode([bpe.BOS_ID, *ids, bpe.EOS_ID, bpe.PAD_ID]) == "a <s> b </s> <pad>"


def test_merges_and_vocab_size(tokenizer):
    assert bpe.merge_count(tokenizer) == 60
    assert tokenizer.get_vocab_size() == bpe.BASE_SIZE + 60


def test_save_load_keeps_behaviour(tokenizer, tmp_path):
    bpe.save(tokenizer, tmp_path / "tok.json")
    loaded = bpe.load(tmp_path / "tok.json")
    lines = TEXT[:4] + ["<s> literal"]
    assert bpe.encode_lines(loaded, lines) == bpe.encode_lines(tokenizer, lines)
    assert bpe.round_trip_failures(loaded, lines, bpe.encode_lines(loaded, lines)) == []


def test_encode_lines_chunks_agree(tokenizer):
    """Chunks of at most 100 characters (two lines; a longer line is a chunk of its own)
    give the ids of one batch."""
    for size in (100, 10):
        assert bpe.encode_lines(tokenizer, TEXT, size) == bpe.encode_lines(tokenizer, TEXT)


@pytest.mark.parametrize("size, dtype", [(260, np.uint16), (65536, np.uint16), (65537, np.int32)])
def test_id_dtype(size, dtype):
    assert bpe.id_dtype(size) == dtype
