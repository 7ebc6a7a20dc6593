"""``arelu score``: sacrebleu BLEU and chrF with the paper's signature, references from a
file or from a translation's JSON, and one-line errors naming both line counts; ``arelu
significance``: the paired bootstrap of translation files, several runs a side joined."""

import json
import os

import pandas as pd
import pytest
import sacrebleu

from arelu_cli.analysis.score import (COLUMNS, SIGNIFICANCE_COLUMNS, append_row, score_files,
                                      score_row)
from arelu_cli.util.errors import UserError

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
    from arelu_cli.train.loop import train

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


# ``arelu significance``: the paired bootstrap of translation files, runs joined.

SYSTEM = ["The cat sat on the mat.", "Nothing there", "Ein Haus, zwei Häuser", "It rains"]


def test_significance_of_files_is_the_paired_bootstrap_of_their_lines(tmp_path):
    from arelu_cli.analysis.score import compare_files
    from arelu_cli.analysis.significance import paired_bootstrap

    ref = _write(tmp_path / "r", REFS)
    one = compare_files([_write(tmp_path / "s", SYSTEM)], [_write(tmp_path / "b", HYPS)], ref,
                        samples=200)
    expected = paired_bootstrap(HYPS, SYSTEM, REFS, samples=200)
    assert {k: one[k] for k in expected if k in one} == {k: expected[k] for k in expected
                                                           if k in one}
    assert one["runs"] == 1 and one["run_bleu"] == f"{one['bleu']:.2f}"
    assert one["bootstrap_signature"].startswith("nrefs:1|bs:200|seed:12345|case:mixed")
    # two runs a side: the joined test, with each run's own BLEU alongside
    other = ["The cat sat.", "Nothing here", "Ein Haus", "It rains today"]
    two = compare_files([tmp_path / "s", _write(tmp_path / "s2", other)],
                        [tmp_path / "b", _write(tmp_path / "b2", REFS)], ref, samples=200)
    joined = paired_bootstrap(HYPS + REFS, SYSTEM + other, REFS * 2, samples=200, runs=2)
    assert (two["runs"], two["delta"], two["p_value"]) == (2, joined["delta"], joined["p_value"])
    assert two["baseline_run_bleu"].split(";")[1] == "100.00"


@pytest.mark.parametrize("systems, baselines, message", [
    (["s"], [], "give one --baseline per --hyp"),
    (["s", "s"], ["b"], "give one --baseline per --hyp"),
    (["s"], ["short"], "short has 3 lines but the references"),
])
def test_significance_errors(tmp_path, systems, baselines, message):
    from arelu_cli.analysis.score import compare_files

    _write(tmp_path / "s", SYSTEM), _write(tmp_path / "b", HYPS)
    _write(tmp_path / "short", HYPS[:3])
    with pytest.raises(UserError, match=message) as err:
        compare_files([tmp_path / f for f in systems], [tmp_path / f for f in baselines],
                      _write(tmp_path / "r", REFS))
    assert "\n" not in str(err.value)


def test_significance_refuses_translations_of_other_sentences(tmp_path, tiny_corpus):
    """Without --ref each file's split is its reference: the two sides must share it."""
    from arelu_cli.analysis.score import compare_files
    from arelu_cli.data.prepared import load_prepared

    data = load_prepared(tiny_corpus)
    files = {}
    for split in ("dev", "test"):
        refs = data.references(split)
        files[split] = _write(tmp_path / f"{split}.hyp", refs)
        (tmp_path / f"{split}.hyp.json").write_text(json.dumps(
            {"split": split, "data": str(tiny_corpus),
             "split_sha256": data.split_checksum(split)}), encoding="utf-8")
    assert compare_files([files["test"]], [files["test"]], samples=20)["p_value"] == 1.0
    with pytest.raises(UserError, match="translates other sentences"):
        compare_files([files["test"]], [files["dev"]], samples=20)


def test_a_ref_that_contradicts_the_translation_json_is_refused(tmp_path, tiny_corpus):
    """Dev hypotheses scored against test references are not accepted silently."""
    from arelu_cli.analysis.score import compare_files
    from arelu_cli.data.prepared import load_prepared

    data = load_prepared(tiny_corpus)
    hyp = _write(tmp_path / "dev.hyp", data.references("dev"))
    (tmp_path / "dev.hyp.json").write_text(json.dumps({"split": "dev", "data": str(tiny_corpus)}))
    test_refs = _write(tmp_path / "test.ref", data.references("test"))
    message = (rf"--ref {test_refs} is not the references of {hyp}: its dev.hyp.json says it "
               rf"translates the dev split of {tiny_corpus}")
    with pytest.raises(UserError, match=message):
        score_files(hyp, test_refs)
    with pytest.raises(UserError, match=message):
        compare_files([hyp], [hyp], test_refs, samples=20)
    assert score_files(hyp, _write(tmp_path / "dev.ref", data.references("dev"))).bleu == \
        pytest.approx(100.0)


def test_significance_cli_appends_a_row_and_refuses_a_score_csv(monkeypatch, capsys, tmp_path):
    out = tmp_path / "sig.csv"
    args = ("significance", "--hyp", _write(tmp_path / "s", SYSTEM), "--baseline",
            _write(tmp_path / "b", HYPS), "--ref", _write(tmp_path / "r", REFS),
            "--samples", 50)
    code, captured = _cli(monkeypatch, capsys, *args, "--out", out)
    assert code == 0 and "vs baseline" in captured.out and "p = " in captured.out
    code, _ = _cli(monkeypatch, capsys, *args, "--out", out)
    frame = pd.read_csv(out)
    assert code == 0 and list(frame.columns) == list(SIGNIFICANCE_COLUMNS) and len(frame) == 2
    assert frame["bootstrap_signature"].str.contains("bs:50").all()
    scores = tmp_path / "scores.csv"
    append_row(score_row(score_files(tmp_path / "s", tmp_path / "r")), scores)
    before = scores.read_bytes()
    code, captured = _cli(monkeypatch, capsys, *args, "--out", scores)
    _refused(code, captured, f"{scores} exists and is not an arelu significance CSV")
    assert scores.read_bytes() == before
