"""Each corpus reader on tiny fixtures in its publisher's layout, through ``arelu prepare``."""

from __future__ import annotations

import pytest

from arelu_cli.data.prepared import load_prepared
from .corpus_files import WORDS_DE, WORDS_EN, sentences, write_lines, write_pair

FAST = ("--merges", "40")


def _prepare(cli, *args):
    ran = cli("prepare", *args, *FAST)
    assert ran.code == 0, ran.err
    return ran


def test_multi30k_layout(cli, tmp_path):
    src = tmp_path / "raw"
    write_pair(src, "train", ("de", "en"), 40)
    write_pair(src, "val", ("de", "en"), 5, offset=100)
    write_pair(src, "test_2016_flickr", ("de", "en"), 6, offset=200)
    _prepare(cli, "multi30k", "--source", src, "--out", tmp_path / "out")
    data = load_prepared(tmp_path / "out")
    assert (data.src_lang, data.tgt_lang) == ("de", "en")
    assert [len(data.split(s)) for s in ("train", "dev", "test")] == [40, 5, 6]
    assert data.references("test") == sentences(WORDS_EN, 6, offset=200)
    assert data.sources("dev") == sentences(WORDS_DE, 5, offset=100)


def test_language_direction_can_be_swapped(cli, tmp_path):
    src = tmp_path / "raw"
    write_pair(src, "train", ("de", "en"), 20)
    write_pair(src, "val", ("de", "en"), 3)
    write_pair(src, "test_2016_flickr", ("de", "en"), 3)
    _prepare(cli, "multi30k", "--source", src, "--out", tmp_path / "out", "--src-lang", "en")
    data = load_prepared(tmp_path / "out")
    assert (data.src_lang, data.tgt_lang) == ("en", "de")
    assert data.references("test") == sentences(WORDS_DE, 3)


def _iwslt_folder(root, n_train=60):
    tags = ["<url>http://x</url>", "<keywords>k</keywords>", "<talkid>1</talkid>",
            "<title>{title}</title>", "<description>{desc}</description>"]
    for lang, words, title in (("de", WORDS_DE, "Titel"), ("en", WORDS_EN, "Title")):
        head = [t.format(title=title, desc=f"{title} description") for t in tags]
        write_lines(root / f"train.tags.de-en.{lang}", head + sentences(words, n_train))
        for k, name in enumerate(("TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011",
                                  "TED.tst2012")):
            segs = [f'<seg id="{i + 1}"> {s} </seg>'
                    for i, s in enumerate(sentences(words, 2, 500 + 10 * k))]
            write_lines(root / f"IWSLT14.{name}.de-en.{lang}.xml",
                        ['<?xml version="1.0" encoding="UTF-8"?>', "<mteval>", "<doc>", *segs,
                         "</doc>", "</mteval>"])


def test_iwslt14_layout_and_fairseq_split(cli, tmp_path):
    _iwslt_folder(tmp_path / "de-en")
    _prepare(cli, "iwslt14", "--source", tmp_path / "de-en", "--out", tmp_path / "out")
    data = load_prepared(tmp_path / "out")
    # 62 training lines (title + description + 60); every 23rd goes to dev
    assert [len(data.split(s)) for s in ("train", "dev", "test")] == [60, 2, 10]
    assert data.sources("train")[:2] == ["Titel", "Titel description"]
    assert data.references("dev") == [sentences(WORDS_EN, 60)[20], sentences(WORDS_EN, 60)[43]]
    assert data.references("test")[:2] == sentences(WORDS_EN, 2, 500)  # dev2010 comes first
    assert data.references("test")[2:4] == sentences(WORDS_EN, 2, 510)  # then TEDX.dev2012


def test_iwslt14_train_pointed_elsewhere(cli, tmp_path):
    _iwslt_folder(tmp_path / "de-en")
    for lang in ("de", "en"):
        (tmp_path / "de-en" / f"train.tags.de-en.{lang}").unlink()
    write_pair(tmp_path / "sample", "train", ("de", "en"), 46)
    train = f"train={tmp_path / 'sample' / 'train.de'},{tmp_path / 'sample' / 'train.en'}"
    _prepare(cli, "iwslt14", "--source", tmp_path / "de-en", "--split-file", train,
             "--out", tmp_path / "out")
    data = load_prepared(tmp_path / "out")
    assert [len(data.split(s)) for s in ("train", "dev", "test")] == [44, 2, 10]


@pytest.mark.parametrize("corpus, langs, train, dev, test", [
    ("wmt14-en-de", ("en", "de"), ("europarl-v7.de-en", "commoncrawl.de-en", "news-commentary-v9.de-en"),
     "newstest2013", "newstest2014"),
    ("wmt13-en-ru", ("en", "ru"), ("commoncrawl.ru-en", "news-commentary-v8.ru-en", "corpus.en_ru.1m"),
     "newstest2012", "newstest2013"),
])
def test_wmt_layouts(cli, tmp_path, corpus, langs, train, dev, test):
    for k, stem in enumerate(train):
        write_pair(tmp_path / "wmt", stem, langs, 10, offset=20 * k)
    write_pair(tmp_path / "wmt", dev, langs, 4, offset=300)
    write_pair(tmp_path / "wmt", test, langs, 5, offset=400)
    _prepare(cli, corpus, "--source", tmp_path / "wmt", "--out", tmp_path / "out")
    data = load_prepared(tmp_path / "out")
    assert (data.src_lang, data.tgt_lang) == langs
    assert [len(data.split(s)) for s in ("train", "dev", "test")] == [30, 4, 5]
    assert data.sources("train")[10] == sentences(WORDS_DE, 1, offset=20)[0]  # parts in order


def test_custom_from_folder_and_from_split_files(cli, tmp_path):
    for split, n in (("train", 20), ("dev", 3), ("test", 4)):
        write_pair(tmp_path / "c", split, ("xx", "yy"), n)
    _prepare(cli, "custom", "--source", tmp_path / "c", "--src-lang", "xx", "--tgt-lang", "yy",
             "--out", tmp_path / "a", "--separate")
    by_folder = load_prepared(tmp_path / "a")
    assert not by_folder.shared_vocab and by_folder.src_tokenizer is not by_folder.tgt_tokenizer
    files = [f"{s}={tmp_path / 'c' / f'{s}.xx'},{tmp_path / 'c' / f'{s}.yy'}"
             for s in ("train", "dev", "test")]
    _prepare(cli, "custom", *(a for f in files for a in ("--split-file", f)), "--out", tmp_path / "b")
    by_files = load_prepared(tmp_path / "b")
    assert by_files.references("test") == by_folder.references("test")
    assert (by_files.src_lang, by_files.tgt_lang) == ("src", "tgt")


def test_train_size_keeps_the_first_cleaned_pairs(cli, tmp_path):
    for split, n in (("train", 30), ("dev", 3), ("test", 3)):
        write_pair(tmp_path / "c", split, ("src", "tgt"), n)
    _prepare(cli, "custom", "--source", tmp_path / "c", "--train-size", "7", "--out", tmp_path / "o")
    data = load_prepared(tmp_path / "o")
    assert data.sources("train") == sentences(WORDS_DE, 7)
