"""``arelu human-eval export/score`` from the command line."""

import pandas as pd
import pytest

from arelu_cli.cli import main


def _run(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["arelu", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, capsys.readouterr()


def test_human_eval_export_then_score(monkeypatch, capsys, tmp_path):
    n = 8
    for name in ("src", "ref", "soft", "relu"):
        (tmp_path / f"{name}.txt").write_text("".join(f"{name} {i}\n" for i in range(n)))
    out = tmp_path / "he"
    code, printed = _run(monkeypatch, capsys, "human-eval", "export", "--source", tmp_path / "src.txt",
                         "--reference", tmp_path / "ref.txt", "--system",
                         f"softmax={tmp_path / 'soft.txt'}", "--system",
                         f"1.5-relu={tmp_path / 'relu.txt'}", "--out", out, "--items", "3")
    assert code == 0, printed.err
    for sheet in ("sheet_a1.csv", "sheet_a2.csv"):
        frame = pd.read_csv(out / sheet, keep_default_na=False, dtype=str)
        for col in ("score_A", "score_B", "score_C"):
            frame[col] = "4"
        frame.to_csv(out / sheet, index=False)
    code, printed = _run(monkeypatch, capsys, "human-eval", "score", out / "sheet_a1.csv",
                         out / "sheet_a2.csv", "--key", tmp_path / "he-key" / "key.csv")
    assert code == 0, printed.err
    assert "Cohen's kappa a1/a2" in printed.out
    assert sorted(p.name for p in out.iterdir()) == ["INSTRUCTIONS.txt", "sheet_a1.csv",
                                                     "sheet_a2.csv"]  # no key for annotators
    table = pd.read_csv(tmp_path / "table_human_eval.csv")  # beside the key's folder
    assert table["mean"].tolist() == [4.0, 4.0, 4.0] and table["n"].tolist() == [6, 6, 6]


def test_bad_system_option_is_one_line(monkeypatch, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    code, printed = _run(monkeypatch, capsys, "human-eval", "export", "--source", tmp_path / "a.txt",
                         "--reference", tmp_path / "a.txt", "--system", "softmax")
    assert code == 2 and "--system takes NAME=FILE" in printed.err
    assert "Traceback" not in printed.err


def _refused(code, printed, message):
    assert code == 2 and message in printed.err, printed.err
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err


def _export(monkeypatch, capsys, tmp_path, out):
    for name in ("src", "ref", "soft"):
        (tmp_path / f"{name}.txt").write_text("".join(f"{name} {i}\n" for i in range(8)))
    return _run(monkeypatch, capsys, "human-eval", "export", "--source", tmp_path / "src.txt",
                "--reference", tmp_path / "ref.txt", "--system", f"softmax={tmp_path / 'soft.txt'}",
                "--out", out, "--items", "3")


def test_a_second_export_never_replaces_filled_sheets(monkeypatch, capsys, tmp_path):
    out = tmp_path / "he"
    assert _export(monkeypatch, capsys, tmp_path, out)[0] == 0
    sheet = out / "sheet_a1.csv"
    sheet.write_text(sheet.read_text().replace(",,", ",4,"))  # an annotator's work
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, printed = _export(monkeypatch, capsys, tmp_path, out)
    _refused(code, printed, "already holds key.csv of an earlier export")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_export_and_score_to_an_unwritable_out_are_one_line(monkeypatch, capsys, tmp_path):
    (tmp_path / "file").write_text("keep\n")
    code, printed = _export(monkeypatch, capsys, tmp_path, tmp_path / "file")
    _refused(code, printed, "file is a file, not a folder")
    out = tmp_path / "he"
    assert _export(monkeypatch, capsys, tmp_path, out)[0] == 0
    for sheet in ("sheet_a1.csv", "sheet_a2.csv"):
        frame = pd.read_csv(out / sheet, keep_default_na=False, dtype=str)
        frame[["score_A", "score_B"]] = "3"
        frame.to_csv(out / sheet, index=False)
    code, printed = _run(monkeypatch, capsys, "human-eval", "score", out / "sheet_a1.csv",
                         out / "sheet_a2.csv", "--key", tmp_path / "he-key" / "key.csv", "--out", tmp_path / "file")
    _refused(code, printed, "file is a file, not a folder")
    assert (tmp_path / "file").read_text() == "keep\n"
