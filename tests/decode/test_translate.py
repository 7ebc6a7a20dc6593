"""``arelu translate``: one output line per input line whatever the input (odd unicode,
blank lines, lines longer than the model's positions, stdin), n-best lists, the run's JSON,
a pipe whose stdout holds only the translations, and one-line errors (missing checkpoint,
wrong vocabulary, bad options)."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from arelu_cli.cli import app, main
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.decode.search import Hypothesis, beam_search, max_lengths
from arelu_cli.data.textio import read_text_lines
from arelu_cli.util.errors import UserError
from arelu_cli.decode.output import meta_path
from arelu_cli.decode.translate import (Translation, cut, decode_config, decode_sources, encode_lines,
                                     one_line, open_checkpoint, pad_sources, translate,
                                     truncation_warning, write_translation)

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
        result = translate(relu, decode_config(relu, beam=beam), lines=read_text_lines(raw))
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
    assert translate(relu, cfg, lines=read_text_lines(blank)).lines == ["", "", ""]
    assert translate(relu, cfg, lines=read_text_lines(empty)).lines == []


def test_batching_does_not_change_or_reorder_translations(relu):
    sources, _ = cut(encode_lines(relu, ["ein Haus", "", "zwei Häuser und ein Hund", "Hund"] * 3),
                     127)
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
    # --renormalize on softmax is refused; an --input folder is called a folder, not "not found"
    (["--checkpoint", "{run}", "--split", "test", "--renormalize"],
     "--renormalize applies to alpha-ReLU only, whose outputs do not sum to 1; softmax sums "
     "to 1 already, so drop --renormalize"),
    (["--checkpoint", "{run}", "--input", "{tmp}"], "is a folder, not a text file"),
])
def test_errors_are_one_line(monkeypatch, capsys, toy_runs, other_corpus, tmp_path, args, message):
    fill = {"tmp": tmp_path, "run": toy_runs["softmax"], "other": other_corpus}
    code, captured = _run(monkeypatch, capsys, "translate", "--device", "cpu",
                          *(a.format(**fill) for a in args))
    assert code == 2 and message in captured.err and "Traceback" not in captured.err


def test_cut_keeps_the_start_and_names_the_cut_lines():
    kept, cut_at = cut([[1, 2, 3], [], [4, 5, 6, 7, 8], [9, 10], [1, 2, 3, 4]], 3)
    assert kept == [[1, 2, 3], [], [4, 5, 6], [9, 10], [1, 2, 3]] and cut_at == [2, 4]


def test_the_warning_names_the_first_cut_lines_only(relu):
    found = translate(relu, decode_config(relu, beam=1), lines=["x" * 400] * 7 + ["Hund"])
    assert found.truncated == list(range(1, 8)) and found.limit == 127
    warning = truncation_warning(found)
    assert warning.startswith("7 of 8 input lines were longer than the model's 127 source tokens")
    assert warning.endswith("lines 1, 2, 3, 4, 5, ...")
    assert truncation_warning(translate(relu, decode_config(relu, beam=1), lines=["Hund"])) is None


def test_long_lines_are_cut_with_a_warning_and_counted_in_the_json(toy_runs, tmp_path):
    lines = ["ein Haus", "x" * 100_000, "", "y" * 2000 + " Hund", "Hund"]
    raw, out = tmp_path / "in.txt", tmp_path / "out.txt"
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["translate", "--checkpoint", str(toy_runs["1.5-relu"]),
                                      "--input", str(raw), "--beam", "2", "--out", str(out),
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").count("\n") == len(lines)
    meta = json.loads((tmp_path / "out.txt.json").read_text())
    assert meta["truncated_lines"] == 2 and meta["truncated_line_numbers"] == [2, 4]
    assert meta["truncated_to_tokens"] == 127 and meta["input"] == str(raw)
    assert "warning: 2 of 5 input lines" in result.stderr and "lines 2, 4" in result.stderr
    assert result.stdout == ""


def test_split_translation_cuts_nothing(toy_runs):
    decoder = open_checkpoint(toy_runs["softmax"], device="cpu")
    found = translate(decoder, decode_config(decoder, beam=1), split="dev")
    assert found.truncated == [] and found.meta["truncated_lines"] == 0


def _expected(relu, lines):
    return "".join(line + "\n" for line in translate(relu, decode_config(relu, beam=2),
                                                      lines=lines).lines)


@pytest.mark.parametrize("args", [["--input", "-"], ["--input", "-", "--out", "-"], []])
def test_stdin_to_stdout_gives_only_the_translations(relu, toy_runs, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    data = ("\ufeff" + "\r\n".join(ODD_LINES) + "\r\n").encode("utf-8")
    result = CliRunner().invoke(app, ["translate", "--checkpoint", str(toy_runs["1.5-relu"]),
                                      "--beam", "2", "--device", "cpu", *args], input=data)
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.decode("utf-8") == _expected(relu, ODD_LINES)
    assert "sentences/s" in result.stderr and "wrote" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # no file named - or -.json


def test_a_shell_pipe_gets_only_translations_on_stdout(relu, toy_runs, tmp_path):
    lines = ["ein Haus", "", "e\u0301\u0300 🙂 עברית", "zwei\u2028Häuser", "Hund"]
    source = tmp_path / "x.de"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with source.open("rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "arelu_cli.cli", "translate", "--checkpoint",
                               str(toy_runs["1.5-relu"]), "--beam", "2", "--device", "cpu"],
                              stdin=stdin, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode("utf-8") == _expected(relu, lines)
    assert b"sentences/s" in done.stderr


def test_out_onto_the_input_file_is_refused_and_the_input_kept(monkeypatch, capsys, toy_runs,
                                                                  tmp_path):
    source = tmp_path / "x.de"
    source.write_text("ein hund\n", encoding="utf-8")
    code, captured = _run(monkeypatch, capsys, "translate", "--checkpoint", toy_runs["softmax"],
                          "--input", source, "--out", source)
    assert code == 2 and "overwrite the source" in captured.err
    assert source.read_text(encoding="utf-8") == "ein hund\n"


def _translation(input_name=None, lines=("a house",)):
    """What :func:`translate` returns, without a model: enough for :func:`write_translation`."""
    meta = {"checkpoint": "run/best.pt", "input": input_name, "split": None,
            "transform": "softmax", "beam": 1, "signature": "transform:softmax"}
    return Translation(list(lines), [[Hypothesis([4], -1.0)] for _ in lines], 1.0, meta, [], 10)


def test_write_translation_never_overwrites_its_input(tmp_path):
    source = tmp_path / "x.de"
    source.write_text("ein hund\n", encoding="utf-8")
    with pytest.raises(UserError, match="would overwrite the --input file"):
        write_translation(_translation(str(source)), source)
    link = tmp_path / "link.de"  # another name of the same file
    link.hardlink_to(source)
    with pytest.raises(UserError, match="would overwrite the --input file"):
        write_translation(_translation(str(source)), link)
    meta_input = tmp_path / "y.txt.json"  # OUT.json would be the input
    meta_input.write_text("the source\n", encoding="utf-8")
    with pytest.raises(UserError, match="would overwrite the --input file"):
        write_translation(_translation(str(meta_input)), tmp_path / "y.txt")
    assert source.read_text(encoding="utf-8") == "ein hund\n"
    assert meta_input.read_text(encoding="utf-8") == "the source\n"
    assert not (tmp_path / "y.txt").exists() and not (tmp_path / "x.de.json").exists()


@pytest.mark.parametrize("files", [
    {"out.txt": "my own translation\n"},  # no OUT.json: a user's file
    {"out.txt": "my own translation\n", "out.txt.json": '{"note": "mine"}'},
    {"out.txt.json": '{"note": "mine"}'},  # OUT.json alone is a user's JSON too
    {"out.txt": "mine\n", "out.txt.json": "not json"},
])
def test_write_translation_refuses_a_file_it_did_not_write(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="not written by arelu translate.*choose another --out"):
        write_translation(_translation(), tmp_path / "out.txt")
    assert {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()} == files


def test_write_translation_replaces_its_own_output_and_an_empty_file(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("", encoding="utf-8")  # nothing in it to lose
    write_translation(_translation(lines=["first"]), out)
    assert out.read_text(encoding="utf-8") == "first\n"
    write_translation(_translation(lines=["second"]), out)  # its own, with OUT.json
    assert out.read_text(encoding="utf-8") == "second\n"
    assert json.loads(meta_path(out).read_text())["sentences_per_s"] == 1.0


def test_cli_refuses_to_replace_a_users_file(monkeypatch, capsys, toy_runs, tmp_path):
    source, out = tmp_path / "x.de", tmp_path / "notes.txt"
    source.write_text("ein hund\n", encoding="utf-8")
    out.write_text("my notes\n", encoding="utf-8")
    code, captured = _run(monkeypatch, capsys, "translate", "--checkpoint", toy_runs["softmax"],
                          "--input", source, "--out", out, "--beam", "1", "--device", "cpu")
    assert code == 2 and "not written by arelu translate" in captured.err
    assert "Traceback" not in captured.err and len(captured.err.strip().splitlines()) == 1
    assert out.read_text(encoding="utf-8") == "my notes\n" and not meta_path(out).exists()
