"""Every bad input of ``arelu prepare``: one line on stderr, exit status 2, nothing written."""

from __future__ import annotations

import pytest

from .corpus_files import write_lines, write_pair


def _custom(root):
    for split, n in (("train", 20), ("dev", 3), ("test", 3)):
        write_pair(root, split, ("src", "tgt"), n)
    return root


def _fails(cli, tmp_path, *args, match: str):
    ran = cli("prepare", *args, "--out", tmp_path / "out")
    assert ran.code == 2, ran.out
    assert match in ran.err, ran.err
    assert ran.err.count("\n") == 1 and "Traceback" not in ran.err
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_line_counts_differ(cli, tmp_path):
    source = _custom(tmp_path / "c")
    write_lines(source / "train.tgt", (source / "train.tgt").read_text().splitlines()[:-1])
    _fails(cli, tmp_path, "custom", "--source", source,
           match="has 20 lines but " + str(source / "train.tgt") + " has 19")


def test_not_utf8(cli, tmp_path):
    source = _custom(tmp_path / "c")
    (source / "dev.src").write_bytes(b"gut\nGr\xfc\xdfe\nok\n")
    _fails(cli, tmp_path, "custom", "--source", source, match=f"{source / 'dev.src'} line 2: bytes")


def test_empty_file(cli, tmp_path):
    source = _custom(tmp_path / "c")
    (source / "test.tgt").write_bytes(b"")
    _fails(cli, tmp_path, "custom", "--source", source, match="test.tgt is empty")


def test_missing_split_file(cli, tmp_path):
    source = _custom(tmp_path / "c")
    (source / "dev.tgt").unlink()
    _fails(cli, tmp_path, "custom", "--source", source,
           match=f"missing files for split dev ({source / 'dev.tgt'})")


def test_iwslt_without_train_names_the_files(cli, tmp_path):
    (tmp_path / "xml").mkdir()
    _fails(cli, tmp_path, "iwslt14", "--source", tmp_path / "xml", match="train.tags.de-en.de")


def test_unknown_corpus(cli, tmp_path):
    _fails(cli, tmp_path, "europarl", match="unknown corpus 'europarl'; choose one of toy, multi30k")


@pytest.mark.parametrize("corpus, host", [("multi30k", "huggingface.co"),
                                          ("iwslt14", "dl.fbaipublicfiles.com")])
def test_offline_download_names_source(cli, tmp_path, offline, monkeypatch, corpus, host):
    monkeypatch.setenv("ARELU_CACHE", str(tmp_path / "cache"))
    _fails(cli, tmp_path, corpus, match=f"cannot download {corpus} from {host}")
    _fails(cli, tmp_path, corpus, match="--source DIR")


@pytest.mark.parametrize("args, match", [
    (("custom", "--split-file", "train=a.de"), "write SPLIT=SRC_FILE,TGT_FILE"),
    (("custom", "--split-file", "valid=a,b"), "unknown split 'valid'"),
    (("multi30k", "--eval-size", "5"), "toy corpus only"),
    (("toy", "--source", "."), "takes no --source"),
    (("multi30k", "--src-lang", "fr"), "multi30k has languages de and en"),
    (("custom", "--source", "no/such/dir"), "is not a folder"),
    (("toy", "--merges", "0"), "--merges must be at least 1"),
])
def test_bad_options(cli, tmp_path, args, match):
    _fails(cli, tmp_path, *args, match=match)
