"""``arelu score``: sacrebleu BLEU and chrF with the paper's signature, references from a
file or from a translation's JSON, and one-line errors naming both line counts."""

import json
import os

import pytest
import sacrebleu

from arelu_cli.analysis.score import COLUMNS, append_row, score_files, score_row
from arelu_cli.errors import UserError

HYPS = ["The cat sat on the mat .", "", "Ein Haus , zwei Häuser", "it rains"]
REFS = ["The cat sat on the mat.", "Nothing here", "Ein Haus, zwei Häuser", "It rains today"]


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("hyps, refs, bleu", [
    (REFS, REFS, 100.0),
    (HYPS, REFS, sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="13a").score),
    (["a b c d e"], ["A B C D E"], 0.0),  # case-sensitive
])
def test_bleu_and_chrf(tmp_path, hyps, refs, bleu):
    score = score_files(_write(tmp_path / "h", hyps), _write(tmp_path / "r", refs))
    assert score.bleu == pytest.approx(bleu)
    assert score.chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert score.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert score.sentences == len(refs)


def test_references_from_a_translation_json(tmp_path, tiny_corpus):
    from arelu_cli.data.prepared import load_prepared

    refs = load_prepared(tiny_corpus).references("test")
    hyp = _write(tmp_path / "test.hyp", refs)
    (tmp_path / "test.hyp.json").write_text(json.dumps(
        {"data": str(tiny_corpus), "split": "test", "transform": "1.5-relu", "alpha": 1.5,
         "tau": 0.3, "beam": 5, "n_best": 1}))
    score = score_files(hyp)
    assert score.bleu == pytest.approx(100.0) and score.ref.endswith(":test")
    row = score_row(score)
    assert row["transform"] == "1.5-relu" and "beam:5" in row["signature"]
    append_row(row, tmp_path / "s.csv")
    frame = append_row(row, tmp_path / "s.csv")
    assert len(frame) == 2


@pytest.mark.parametrize("hyps, refs, meta, message", [
    (["a", "b"], ["a", "b", "c"], None, "has 2 lines but the references (REF) have 3"),
    (["a"], None, None, "give --ref"),
    (["0 ||| a ||| -1.0"], ["a"], {"n_best": 3}, "is an n-best list"),
    ([], [], None, "nothing to score"),
])
def test_errors(tmp_path, hyps, refs, meta, message):
    hyp = _write(tmp_path / "h.txt", hyps)
    ref = None if refs is None else _write(tmp_path / "r.txt", refs)
    if meta is not None:
        (tmp_path / "h.txt.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match=message.replace("REF", str(ref)).replace("(", r"\(")
                       .replace(")", r"\)")):
        score_files(hyp, ref)


def _cli(monkeypatch, capsys, *args):
    from arelu_cli.cli import main

    monkeypatch.setattr("sys.argv", ["arelu", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, capsys.readouterr()


def _refused(code, captured, message):
    assert code == 2 and message in captured.err, captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_appending_keeps_earlier_rows_byte_for_byte(tmp_path):
    score = score_files(_write(tmp_path / "h", REFS), _write(tmp_path / "r", REFS))
    path = tmp_path / "scores.csv"
    append_row(score_row(score), path)
    first = path.read_bytes().replace(b"\n", b"\r\n")  # as a spreadsheet might save it
    path.write_bytes(first)
    frame = append_row(score_row(score), path)
    assert path.read_bytes().startswith(first) and len(frame) == 2
    assert list(frame.columns) == list(COLUMNS)
    assert frame["bleu"].tolist() == pytest.approx([100, 100])


@pytest.mark.parametrize("existing", [b"a,b\n1,2\n", b"hyp,ref\nx,y\n", b"\x00\xff binary"])
def test_a_csv_of_other_columns_is_never_rewritten(monkeypatch, capsys, tmp_path, existing):
    out = tmp_path / "mine.csv"
    out.write_bytes(existing)
    out.chmod(0o644)
    code, captured = _cli(monkeypatch, capsys, "score", "--hyp", _write(tmp_path / "h", REFS),
                          "--ref", _write(tmp_path / "r", REFS), "--out", out)
    _refused(code, captured, f"{out} exists and is not an arelu score CSV")
    assert out.read_bytes() == existing and out.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("out, message", [
    ("folder", "is a folder; give a file name"),
    ("file.txt/scores.csv", "file.txt is a file, not a folder"),
])
def test_an_unwritable_out_is_one_line(monkeypatch, capsys, tmp_path, out, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("keep\n")
    code, captured = _cli(monkeypatch, capsys, "score", "--hyp", _write(tmp_path / "h", REFS),
                          "--ref", _write(tmp_path / "r", REFS), "--out", tmp_path / out)
    _refused(code, captured, message)
    assert (tmp_path / "file.txt").read_text() == "keep\n"
    assert not any((tmp_path / "folder").iterdir())


def _corpus(root, offset):
    """A custom corpus whose text depends on ``offset`` (same line counts)."""
    root.mkdir(parents=True)
    for split, n in (("train", 40), ("dev", 4), ("test", 5)):
        for lang, word in (("src", "das haus"), ("tgt", "the house")):
            lines = [f"{word} {i + offset} {'x ' * (i % 4)}".strip() for i in range(n)]
            _write(root / f"{split}.{lang}", lines)
    return root


def test_a_translation_of_a_corpus_prepared_again_is_refused(monkeypatch, capsys, tmp_path,
                                                            tiny_config, one_thread):
    """translate records the split's checksum; score refuses references that changed since."""
    from arelu_cli.data.prepare import PrepareRequest, prepare
    from arelu_cli.nmt.train import train

    data = tmp_path / "data"
    prepare(PrepareRequest("custom", data, source=_corpus(tmp_path / "a", 0), merges=30))
    train(tiny_config(data, max_steps=1, valid_every=1, save_every=1, log_every=1),
          tmp_path / "run")
    hyp = tmp_path / "test.hyp"
    code, captured = _cli(monkeypatch, capsys, "translate", "--checkpoint", tmp_path / "run",
                          "--split", "test", "--beam", "1", "--out", hyp, "--device", "cpu")
    assert code == 0, captured.err
    assert json.loads((tmp_path / "test.hyp.json").read_text())["split_sha256"]
    assert score_files(hyp).sentences == 5
    prepare(PrepareRequest("custom", data, source=_corpus(tmp_path / "b", 50), merges=30,
                           force=True))
    code, captured = _cli(monkeypatch, capsys, "score", "--hyp", hyp, "--out", tmp_path / "s.csv")
    _refused(code, captured, "was translated from another version of")
    assert "translate it again, or pass --ref" in captured.err
    assert not (tmp_path / "s.csv").exists()
    assert score_files(hyp, data / "test.tgt").sentences == 5


def test_an_older_translation_json_is_checked_by_time(tmp_path):
    """A JSON written before translations recorded the split's checksum: it must be newer
    than the prepared folder."""
    from arelu_cli.data.prepare import PrepareRequest, prepare
    from arelu_cli.data.prepared import load_prepared

    data = tmp_path / "data"
    prepare(PrepareRequest("custom", data, source=_corpus(tmp_path / "a", 0), merges=30))
    hyp = _write(tmp_path / "test.hyp", load_prepared(data).references("test"))
    (tmp_path / "test.hyp.json").write_text(json.dumps({"data": str(data), "split": "test"}))
    prepared_at = (data / "meta.json").stat().st_mtime
    os.utime(tmp_path / "test.hyp.json", (prepared_at + 10, prepared_at + 10))
    assert score_files(hyp).bleu == pytest.approx(100.0)
    os.utime(tmp_path / "test.hyp.json", (prepared_at - 10, prepared_at - 10))
    with pytest.raises(UserError, match="was translated from another version of"):
        score_files(hyp)
