"""``arelu score``: sacrebleu BLEU and chrF with the paper's signature, references from a
file or from a translation's JSON, and one-line errors naming both line counts."""

import json

import pytest
import sacrebleu

from arelu_cli.analysis.score import append_row, score_files, score_row
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
