"""Word-level tokenization: specials at fixed ids, words by frequency, <unk> an ordinary word
that decodes as itself, unseen words to <unk>, and the file reloads the same."""

from __future__ import annotations

from arelu_cli.data import bpe
from arelu_cli.data.words import train_words, unknown_count


def test_vocabulary_order_and_unknown_words(tmp_path):
    tokenizer = train_words(["b a b", "c <unk> b", "a"])
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in ("<pad>", "<s>", "</s>", "<unk>", "b", "a", "c")] == list(range(7))
    ids = tokenizer.encode("a  zz <unk> b", add_special_tokens=False).ids
    assert ids == [5, 3, 3, 4] and unknown_count([ids, [3]]) == 3
    assert tokenizer.decode(ids) == "a <unk> <unk> b"
    assert tokenizer.decode([1, 4, 2, 0]) == "b"  # pad, bos, eos are skipped
    bpe.save(tokenizer, tmp_path / "t.json")
    again = bpe.load(tmp_path / "t.json")
    assert again.encode("c b", add_special_tokens=False).ids == [6, 4]
