"""Word-level tokenization for corpora that come tokenized (the Penn Treebank of Mikolov et al.).

The vocabulary is every whitespace-separated word of the training text, most frequent first
(ties in first-seen order), after the special tokens at their fixed ids (``<pad>`` 0, ``<s>``
1, ``</s>`` 2, ``<unk>`` 3, as in :mod:`arelu_cli.data.bpe`). ``<unk>`` is an ordinary word
here: the PTB's own ``<unk>`` is that id, and decoding writes it back as ``<unk>``; a word
never seen in training encodes to it too. Decoding joins words with one space, so
``decode(encode(line)) == line`` for any normalized line without unseen words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tokenizers import Tokenizer, models, pre_tokenizers

from arelu_cli.data.bpe import SPECIALS, UNK_ID


def train_words(lines: Iterable[str]) -> Tokenizer:
    """A word-level tokenizer whose vocabulary is the words of ``lines`` (see the module)."""
    counts = Counter(word for line in lines for word in line.split())
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for word, _ in sorted(counts.items(), key=lambda item: -item[1]):  # stable: first seen first
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=SPECIALS[UNK_ID]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(list(SPECIALS[:UNK_ID]))  # skipped when decoding; <unk> is not
    tokenizer.encode_special_tokens = True
    return tokenizer


def unknown_count(ids: Iterable[Iterable[int]]) -> int:
    """How many tokens are ``<unk>``."""
    return sum(1 for seq in ids for token in seq if token == UNK_ID)
