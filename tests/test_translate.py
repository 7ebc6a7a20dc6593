"""``arelu translate``: one output line per input line whatever the input, n-best lists,
the run's JSON, and one-line errors (missing checkpoint, wrong vocabulary, bad options)."""

import json

import pytest
from typer.testing import CliRunner

from arelu_cli.cli import app, main
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.decode import beam_search, max_lengths
from arelu_cli.translate import (decode_config, decode_sources, encode_lines, one_line,
                                 open_checkpoint, pad_sources, read_text_lines, translate)

pytestmark = pytest.mark.usefixtures("one_thread")

ODD_LINES = ["ein Haus", "", "   ", "zwei\u2028Häuser", "\u0085", "e\u0301\u0300 🙂 עברית",
             "<s> </s> <pad>", "\t", "x" * 300, ""]


def _run(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["arelu", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, capsys.readouterr()


@pytest.fixture(scope="module")
def relu(toy_runs):
    return open_checkpoint(toy_runs["1.5-relu"], device="cpu")


def test_every_input_line_gives_one_output_line(relu, tmp_path):
    raw = tmp_path / "in.txt"
    raw.write_bytes(("\ufeff" + "\r\n".join(ODD_LINES) + "\r\n").encode("utf-8"))
    assert read_text_lines(raw) == ODD_LINES
    for beam in (1, 3):
        result = translate(relu, decode_config(relu, beam=beam), input_path=raw)
        assert len(result.lines) == len(ODD_LINES)
        for line, out in zip(ODD_LINES, result.lines):
            assert "\n" not in out and len(out.splitlines()) <= 1
            if not line.strip() or line == "\u0085":
                assert out == ""


def test_blank_and_empty_files_are_valid_input(relu, tmp_path):
    blank, empty = tmp_path / "blank.txt", tmp_path / "empty.txt"
    blank.write_text("\n \n\n")
    empty.write_text("")
    cfg = decode_config(relu, beam=2)
    assert translate(relu, cfg, input_path=blank).lines == ["", "", ""]
    assert translate(relu, cfg, input_path=empty).lines == []


def test_batching_does_not_change_or_reorder_translations(relu):
    sources = encode_lines(relu, ["ein Haus", "", "zwei Häuser und ein Hund", "Hund"] * 3)
    one = decode_sources(relu, sources, decode_config(relu, beam=3, max_tokens=1))
    many = decode_sources(relu, sources, decode_config(relu, beam=3, max_tokens=10_000))
    assert [[h.tokens for h in hs] for hs in one] == [[h.tokens for h in hs] for hs in many]
    assert one[1][0].tokens == [] and one[1][0].score == 0.0


def test_split_translation_matches_direct_beam_search(toy_runs):
    decoder = open_checkpoint(toy_runs["softmax"], device="cpu")
    cfg = decode_config(decoder, beam=3)
    result = translate(decoder, cfg, split="test", n_best=2)
    encoded = decoder.data.split("test")
    assert len(result.lines) == 2 * len(encoded)
    src = pad_sources([encoded.src(5)], decoder.data.pad_id, decoder.data.eos_id)
    direct = beam_search(decoder.model, src, decoder.transform, bos_id=1, eos_id=2,
                         limits=max_lengths(src, 0, cfg, 128), beam=3, n_best=2)[0]
    assert [h.tokens for h in result.hypotheses[5]] == [h.tokens for h in direct]
    first = result.lines[10].split(" ||| ")
    assert first[0] == "5" and float(first[2]) == pytest.approx(direct[0].score, abs=1e-4)


def test_one_line_replaces_every_line_break():
    assert one_line("a\nb\u2028c\r\nd\x85e") == "a b c d e"
    assert one_line("plain") == "plain" and one_line("") == ""


def test_cli_writes_output_and_json_then_scores_it(toy_runs, tmp_path):
    out, scores = tmp_path / "test.hyp", tmp_path / "scores.csv"
    runner = CliRunner()
    result = runner.invoke(app, ["translate", "--checkpoint", str(toy_runs["1.5-entmax"]),
                                 "--split", "test", "--beam", "2", "--out", str(out),
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "test.hyp.json").read_text())
    assert meta["transform"] == "1.5-entmax" and meta["beam"] == 2 and meta["sentences"] == 40
    assert meta["sentences_per_s"] > 0 and "sentences/s" in result.output
    assert len(out.read_text(encoding="utf-8").split("\n")) == 41
    result = runner.invoke(app, ["score", "--hyp", str(out), "--out", str(scores)])
    assert result.exit_code == 0, result.output
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in result.output
    assert scores.read_text().count("\n") == 2


@pytest.fixture(scope="module")
def other_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("other") / "toy"
    prepare(PrepareRequest("toy", out, seed=5, train_size=300, eval_size=5, toy_vocab=100,
                           merges=40))
    return out


@pytest.mark.parametrize("args, message", [
    (["--checkpoint", "{tmp}/nope", "--split", "test"], "no checkpoint at"),
    (["--checkpoint", "{run}"], "exactly one of --input FILE"),
    (["--checkpoint", "{run}", "--split", "test", "--input", "{tmp}/x"], "exactly one of"),
    (["--checkpoint", "{run}", "--split", "test", "--beam", "0"], "--beam must be at least 1"),
    (["--checkpoint", "{run}", "--split", "test", "--beam", "2", "--n-best", "3"],
     "--n-best must be between 1 and the beam size 2"),
    (["--checkpoint", "{run}", "--split", "test", "--data", "{other}"], "another vocabulary"),
    (["--checkpoint", "{run}", "--input", "{tmp}/missing.txt"], "file not found"),
    (["--checkpoint", "{run}", "--split", "valid"], "has no split 'valid'"),
])
def test_errors_are_one_line(monkeypatch, capsys, toy_runs, other_corpus, tmp_path, args, message):
    fill = {"tmp": tmp_path, "run": toy_runs["softmax"], "other": other_corpus}
    code, captured = _run(monkeypatch, capsys, "translate", "--device", "cpu",
                          *(a.format(**fill) for a in args))
    assert code == 2 and message in captured.err and "Traceback" not in captured.err
