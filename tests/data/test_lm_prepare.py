"""``arelu prepare`` for language-modelling corpora: PTB (words, its own <unk>), Tiny
Shakespeare (BPE, a document split at speaker turns), a user's text, the generated toy-lm;
and their bad inputs (one line, exit 2, nothing written)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arelu_cli.data.blocks import split_stream
from arelu_cli.data.lm_corpora import document_split, speaker_cut
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError

from .corpus_files import write_lines

PTB = {"train": [" the cat sat on the mat ", " the dog <unk> N years "],
       "valid": [" the cat <unk> "], "test": [" a dog sat "]}


def _ptb(root):
    for split, lines in PTB.items():
        write_lines(root / f"ptb.{split}.txt", lines)
    return root


def test_ptb_is_tokenized_by_words_with_its_own_unk(tmp_path):
    result = prepare(PrepareRequest("ptb", tmp_path / "out", source=_ptb(tmp_path / "ptb")))
    data = load_prepared(result.path)
    assert data.task == "lm" and data.meta["vocab"]["tokens"] == "words"
    vocab = data.tgt_tokenizer.get_vocab()
    # 4 specials, then words by frequency: "the" (3 times) first, then the words seen once
    # in first-seen order; PTB's own <unk> is the special's id
    assert [vocab[w] for w in ("<pad>", "<s>", "</s>", "<unk>", "the", "cat", "sat", "on",
                               "mat", "dog", "N", "years")] == list(range(12))
    assert data.references("train") == ["the cat sat on the mat", "the dog <unk> N years"]
    ids, offsets = data.text_ids("dev")
    assert ids.tolist() == [4, 5, 3] and offsets.tolist() == [0, 3]
    # "a" is not a training word: <unk>, counted
    assert data.meta["splits"]["test"] == {"lines": 1, "tokens": 3, "unk": 1, "stream_tokens": 4}
    assert data.tgt_tokenizer.decode(data.text_ids("dev")[0].tolist()) == "the cat <unk>"
    assert split_stream(data, "dev").tolist() == [2, 4, 5, 3, 2]


def test_rerun_is_a_no_op_and_changed_text_needs_force(tmp_path):
    source = _ptb(tmp_path / "ptb")
    assert prepare(PrepareRequest("ptb", tmp_path / "out", source=source)).rebuilt
    assert not prepare(PrepareRequest("ptb", tmp_path / "out", source=source)).rebuilt
    write_lines(source / "ptb.test.txt", [" the cat "])
    assert prepare(PrepareRequest("ptb", tmp_path / "out", source=source)).rebuilt  # same place
    assert load_prepared(tmp_path / "out").references("test") == ["the cat"]


def test_speaker_cut_and_document_split():
    lines = ["A:", "one", "", "B:", "two", "three", "", "A:", "four"]
    assert speaker_cut(lines, 0) == 3 and speaker_cut(lines, 3) == 3 and speaker_cut(lines, 4) == 7
    assert speaker_cut(lines, 8) == len(lines)
    turns = [line for i in range(20) for line in (f"S{i}:", "a", "b", "")]  # turns at 0, 4, ... 76
    splits, bounds = document_split(turns)
    # 90% of 80 lines = 72, a turn's start; 95% = 76, another: test is the last turn
    assert bounds == {"train": [0, 72], "dev": [72, 76], "test": [76, 80]}
    assert splits["test"] == ["S19:", "a", "b", ""]
    splits, bounds = document_split(turns[:-5])  # 75 lines: 67.5 -> 68, 71.25 -> 71 -> 72
    assert bounds == {"train": [0, 68], "dev": [68, 72], "test": [72, 75]}
    with pytest.raises(UserError, match="too few speaker turns for a dev split"):
        document_split(["A:", "one", "two"] * 10)


def test_tinyshakespeare_splits_at_speaker_turns(tmp_path):
    turns = [[f"Speaker {i % 3}:", f"line {i} of the play, said well.", ""] for i in range(60)]
    text = [line for turn in turns for line in turn][:-1]
    write_lines(tmp_path / "ts" / "input.txt", text)
    data = load_prepared(prepare(PrepareRequest("tinyshakespeare", tmp_path / "out",
                                                source=tmp_path / "ts", merges=50)).path)
    rule = data.meta["split"]
    assert rule["kind"] == "document"
    first, second = rule["lines"]["dev"]
    assert rule["lines"]["train"] == [0, first] and rule["lines"]["test"] == [second, len(text)]
    for split in ("train", "dev", "test"):
        lines = data.references(split)
        assert lines[0].startswith("Speaker ")  # every split starts a turn
        ids, offsets = data.text_ids(split)
        # byte-level BPE: every line decodes back exactly, the empty ones too
        assert [data.tgt_tokenizer.decode(ids[a:b].tolist())
                for a, b in zip(offsets[:-1], offsets[1:])] == lines
    assert data.references("train") + data.references("dev") + data.references("test") == text
    assert "" in data.references("train")  # an empty line is kept: an end-of-sentence alone


def test_user_text_without_final_newline(tmp_path):
    root = tmp_path / "text"
    for split in ("train", "dev", "test"):
        write_lines(root / f"{split}.txt", ["Hello there, world.", "  Again   hello. "])
    (root / "test.txt").write_bytes(b"last line without newline")
    data = load_prepared(prepare(PrepareRequest("text", tmp_path / "out", source=root,
                                                merges=20)).path)
    assert data.references("dev") == ["Hello there, world.", "Again hello."]  # normalized
    assert data.references("test") == ["last line without newline"]
    assert data.meta["vocab"]["tokens"] == "bpe" and data.meta["vocab"]["merges"] == 20


def test_toy_lm_is_the_toy_target_language(tiny_lm_corpus):
    data = load_prepared(tiny_lm_corpus)
    assert data.task == "lm" and data.corpus == "toy-lm"
    assert [data.meta["splits"][s]["lines"] for s in ("train", "dev", "test")] == [300, 30, 30]
    assert data.meta["splits"]["train"]["unk"] == 0  # the vocabulary is the training words
    stream = split_stream(data, "train")
    assert len(stream) == data.meta["splits"]["train"]["stream_tokens"] + 1
    assert int((stream == data.eos_id).sum()) == 301


def _fails(cli, tmp_path, *args, match: str):
    ran = cli("prepare", *args, "--out", tmp_path / "out")
    assert ran.code == 2, ran.out
    assert match in ran.err, ran.err
    assert ran.err.count("\n") == 1 and "Traceback" not in ran.err
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_not_utf8(cli, tmp_path):
    source = _ptb(tmp_path / "ptb")
    (source / "ptb.valid.txt").write_bytes(b" ok \n gr\xfc\xdfe \n")
    _fails(cli, tmp_path, "ptb", "--source", source,
           match=f"{source / 'ptb.valid.txt'} line 2: bytes that are not UTF-8")


def test_missing_file(cli, tmp_path):
    source = _ptb(tmp_path / "ptb")
    (source / "ptb.test.txt").unlink()
    _fails(cli, tmp_path, "ptb", "--source", source, match=f"ptb: missing {source / 'ptb.test.txt'}")


def test_empty_file(cli, tmp_path):
    source = _ptb(tmp_path / "ptb")
    (source / "ptb.train.txt").write_text("\n\n")
    _fails(cli, tmp_path, "ptb", "--source", source, match="ptb.train.txt is empty")


@pytest.mark.parametrize("args, match", [
    (("ptb",), "ptb needs --source: the folder holding ptb.test.txt"),
    (("tinyshakespeare", "--src-lang", "en"), "--src-lang applies to translation corpora"),
    (("ptb", "--merges", "10"), "ptb is tokenized by words; --merges applies to BPE corpora"),
    (("toy-lm", "--source", "."), "the toy-lm corpus is generated; it takes no --source"),
    (("text", "--eval-size", "3"), "--eval-size and --toy-vocab apply to the toy corpora only"),
])
def test_bad_options(cli, tmp_path, args, match):
    _fails(cli, tmp_path, *args, match=match)


def test_unknown_corpus_lists_language_modelling_ones(cli, tmp_path):
    _fails(cli, tmp_path, "wikitext", match="or ptb, tinyshakespeare, text, toy-lm (language modelling)")


def test_summary_table(cli, tmp_path):
    ran = cli("prepare", "ptb", "--source", _ptb(tmp_path / "ptb"), "--out", tmp_path / "out")
    assert ran.code == 0 and "ptb (language modelling, words)" in ran.out
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["task"] == "lm" and np.load(tmp_path / "out" / "train.tgt.ids.npy").size == 11  # 6 + 5 words


def test_another_seed_on_a_prepared_folder_needs_force(cli, tmp_path):
    out, args = tmp_path / "out", ("toy-lm", "--train-size", "40", "--eval-size", "5")
    assert cli("prepare", *args, "--out", out).code == 0
    ran = cli("prepare", *args, "--seed", "3", "--out", out)
    assert ran.code == 2 and ran.err.count("\n") == 1
    assert f"{out} holds a toy-lm corpus prepared with other options (--seed: 0 there, 3 now)" \
        in ran.err
    assert cli("prepare", *args, "--seed", "3", "--out", out, "--force").code == 0


def test_one_file_as_every_split_is_a_warning(cli, tmp_path):
    source = tmp_path / "text"
    for split in ("train", "dev", "test"):
        write_lines(source / f"{split}.txt", ["one line here", "and another one", "a third"])
    ran = cli("prepare", "text", "--source", source, "--merges", "20", "--out", tmp_path / "out")
    assert ran.code == 0, ran.err
    assert "warning: the train and dev and test splits hold the same text" in ran.err
