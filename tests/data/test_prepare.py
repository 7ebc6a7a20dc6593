"""The prepared folder: contents, read API, no-op reruns, rebuilds, and atomic writing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arelu_cli.data import bpe
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError

from .corpus_files import write_lines, write_pair

TOY = ("prepare", "toy", "--train-size", "300", "--eval-size", "20", "--toy-vocab", "300",
       "--merges", "200")


def _custom(root, n_train=30):
    for split, n, start in (("train", n_train, 0), ("dev", 4, 100), ("test", 4, 110)):
        write_pair(root, split, ("src", "tgt"), n, start)
    return root


def test_toy_folder_contents_and_read_api(cli, tmp_path):
    ran = cli(*TOY, "--out", tmp_path / "toy")
    assert ran.code == 0 and "train" in ran.out
    data = load_prepared(tmp_path / "toy")
    meta = json.loads((tmp_path / "toy" / "meta.json").read_text())
    assert meta["corpus"] == "toy" and meta["toy"]["train"] == 300 and "torch" in meta["versions"]
    assert data.vocab_size == data.src_vocab_size == meta["vocab"]["tgt_size"] <= bpe.BASE_SIZE + 200
    assert (data.pad_id, data.bos_id, data.eos_id, data.unk_id) == (0, 1, 2, 3)
    test = data.split("test")
    assert isinstance(test.src_ids, np.memmap) and test.src_ids.dtype == np.uint16
    assert len(test) == 20 and meta["splits"]["test"]["tgt_tokens"] == int(test.tgt_lengths.sum())
    decoded = [data.tgt_tokenizer.decode(test.tgt(i).tolist()) for i in range(len(test))]
    assert decoded == data.references("test")
    assert data.src_tokenizer.encode(data.sources("test")[0]).ids == test.src(0).tolist()


def test_rerun_is_a_no_op_and_changes_rebuild(cli, tmp_path):
    out = tmp_path / "toy"
    assert cli(*TOY, "--out", out).code == 0
    stamp = (out / "meta.json").stat().st_mtime_ns
    again = cli(*TOY, "--out", out)
    assert again.code == 0 and "up to date" in again.out
    assert (out / "meta.json").stat().st_mtime_ns == stamp
    assert cli(*TOY, "--out", out, "--seed", "1", "--force").code == 0
    assert json.loads((out / "meta.json").read_text())["toy"]["seed"] == 1


def test_changed_input_file_rebuilds(tmp_path):
    source = _custom(tmp_path / "c")
    request = PrepareRequest("custom", tmp_path / "out", source=source, merges=30)
    assert prepare(request).rebuilt and not prepare(request).rebuilt
    write_lines(source / "test.tgt", ["changed one", "changed two", "changed three", "changed four"])
    assert prepare(request).rebuilt
    assert load_prepared(tmp_path / "out").references("test")[0] == "changed one"


def test_moved_inputs_with_the_same_bytes_do_not_rebuild(tmp_path):
    source = _custom(tmp_path / "c")
    prepare(PrepareRequest("custom", tmp_path / "out", source=source, merges=30))
    moved = source.rename(tmp_path / "elsewhere")
    assert not prepare(PrepareRequest("custom", tmp_path / "out", source=moved, merges=30)).rebuilt


def test_dev_and_test_are_never_filtered(tmp_path):
    source = _custom(tmp_path / "c")
    long = " ".join(["word"] * 300)
    write_lines(source / "test.src", ["", long, "a b", "c"])
    write_lines(source / "test.tgt", ["x", "y", "", "d e f g h i"])
    prepare(PrepareRequest("custom", tmp_path / "out", source=source, merges=30))
    data = load_prepared(tmp_path / "out")
    assert data.sources("test") == ["", long, "a b", "c"]
    assert data.references("test") == ["x", "y", "", "d e f g h i"]


def test_failure_leaves_no_output_and_no_temporary_folder(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(bpe, "train_bpe", broken)
    with pytest.raises(RuntimeError):
        prepare(PrepareRequest("custom", tmp_path / "out", source=_custom(tmp_path / "c")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_failed_rebuild_keeps_the_old_folder(tmp_path, monkeypatch):
    source = _custom(tmp_path / "c")
    prepare(PrepareRequest("custom", tmp_path / "out", source=source, merges=30))
    monkeypatch.setattr(bpe, "train_bpe", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    with pytest.raises(RuntimeError):
        prepare(PrepareRequest("custom", tmp_path / "out", source=source, merges=31,
                               force=True))
    assert load_prepared(tmp_path / "out").meta["options"]["merges"] == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "out"]


def test_other_corpus_in_out_folder_needs_force(cli, tmp_path):
    out = tmp_path / "out"
    prepare(PrepareRequest("custom", out, source=_custom(tmp_path / "c"), merges=30))
    refused = cli(*TOY, "--out", out)
    assert refused.code == 2 and "holds the prepared corpus 'custom'" in refused.err
    assert load_prepared(out).corpus == "custom"
    assert cli(*TOY, "--out", out, "--force").code == 0
    assert load_prepared(out).corpus == "toy"


def test_non_prepared_folder_is_not_replaced_without_force(tmp_path):
    out = tmp_path / "out"
    write_lines(out / "notes.txt", ["mine"])
    with pytest.raises(UserError, match="not a prepared corpus folder"):
        prepare(PrepareRequest("custom", out, source=_custom(tmp_path / "c")))
    assert (out / "notes.txt").read_text() == "mine\n"


def test_load_prepared_errors(tmp_path):
    with pytest.raises(UserError, match="no meta.json"):
        load_prepared(tmp_path)
    prepare(PrepareRequest("custom", tmp_path / "out", source=_custom(tmp_path / "c"), merges=30))
    with pytest.raises(UserError, match="has no split 'valid'"):
        load_prepared(tmp_path / "out").split("valid")


def test_one_file_as_both_sides_and_merges_beyond_the_text_are_warned_of(cli, tmp_path):
    """``prepare custom`` with the same file as source and target, and ``--merges 1000000``
    that learns far fewer, each get a word."""
    source = _custom(tmp_path / "c")
    same = ",".join([str(source / "train.src")] * 2)
    ran = cli("prepare", "custom", "--out", tmp_path / "out", "--source", source,
              "--split-file", f"train={same}", "--merges", "1000000")
    assert ran.code == 0, ran.err
    meta = load_prepared(tmp_path / "out").meta
    learned = min(meta["vocab"]["learned_merges"])
    assert 0 < learned < 1_000_000
    err = " ".join(ran.err.split())
    assert (f"the train split reads {(source / 'train.src').resolve()} as both source and "
            "target, so a model learns to copy") in err
    assert f"learned {learned:,} of the 1,000,000 BPE merges asked for" in err
    assert err.count("warning:") == 2
    ran = cli("prepare", "custom", "--out", tmp_path / "ok", "--source", source, "--merges", "30")
    assert ran.code == 0 and "warning" not in ran.err
    ran = cli("prepare", "custom", "--out", tmp_path / "default", "--source", source)
    meta = load_prepared(tmp_path / "default").meta
    assert min(meta["vocab"]["learned_merges"]) < meta["vocab"]["merges"]
    assert ran.code == 0 and "warning" not in ran.err, "a corpus's default merges is a ceiling"
