"""Byte-pair encoding with Hugging Face ``tokenizers`` (Sennrich et al., 2016; the paper's §4).

The tokenizer is byte-level BPE (the GPT-2 pre-tokenizer without an added prefix space,
NFC normalization): every string encodes without unknown tokens, and
``tokenizer.decode(tokenizer.encode(text).ids) == text`` for any NFC text, so decoding a
translation gives detokenized text directly, ready for sacrebleu. The special tokens come
first and have fixed ids: ``<pad>`` 0, ``<s>`` 1 (bos), ``</s>`` 2 (eos), ``<unk>`` 3.
The vocabulary is the 4 specials + 256 byte symbols + one token per merge. Special-token
strings inside text (a literal "<s>") are encoded as ordinary text, never as the special id;
the tokenizer file does not store that setting, so open it with :func:`load`.

Use the ``tokenizers.Tokenizer`` this module returns directly: ``encode(text).ids`` and
``decode(ids)`` (special tokens are skipped when decoding).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)
BASE_SIZE = len(SPECIALS) + 256


def new_tokenizer() -> Tokenizer:
    """An untrained byte-level BPE tokenizer with this project's normalizer and decoder."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.encode_special_tokens = True
    return tokenizer


def train_bpe(lines: Iterable[str], merges: int, min_frequency: int = 2) -> Tokenizer:
    """Learn up to ``merges`` merges from ``lines`` (fewer if the text runs out of pairs)."""
    tokenizer = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=BASE_SIZE + merges, min_frequency=min_frequency, show_progress=False,
        special_tokens=list(SPECIALS), initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(lines, trainer)
    return tokenizer


def merge_count(tokenizer: Tokenizer) -> int:
    """How many merges the tokenizer learned."""
    return tokenizer.get_vocab_size() - BASE_SIZE


def encode_lines(tokenizer: Tokenizer, lines: list[str],
                 chunk_chars: int = 2_000_000) -> list[list[int]]:
    """Token ids of every line, without bos/eos, batched through the Rust encoder in chunks
    of about ``chunk_chars`` characters: the encoder's per-token records (offsets, strings)
    take a few hundred bytes per token, so a chunk's memory follows its characters, not
    its line count."""
    ids: list[list[int]] = []
    start = 0
    while start < len(lines):
        end, size = start, 0
        while end < len(lines) and (end == start or size + len(lines[end]) <= chunk_chars):
            size += len(lines[end])
            end += 1
        ids += [e.ids for e in tokenizer.encode_batch_fast(lines[start:end],
                                                           add_special_tokens=False)]
        start = end
    return ids


def round_trip_failures(tokenizer: Tokenizer, lines: list[str], ids: list[list[int]]) -> list[int]:
    """Indices of lines whose ids do not decode back to exactly the line."""
    decoded = tokenizer.decode_batch(ids)
    return [i for i, (line, text) in enumerate(zip(lines, decoded, strict=True)) if line != text]


def save(tokenizer: Tokenizer, path: Path) -> None:
    """Write the tokenizer as one JSON file."""
    tokenizer.save(str(path))


def load(path: Path) -> Tokenizer:
    """Read a tokenizer written by :func:`save` (text like "<s>" stays text, as in training)."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.encode_special_tokens = True  # not stored in the JSON file
    return tokenizer


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id."""
    return np.dtype(np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32)
