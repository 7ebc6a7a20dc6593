"""A decoding command's output file and its record: the one rule of ``arelu translate`` and
``arelu generate`` for what they may replace, and how they write."""

import io
import json
import re
import sys

import pytest

from arelu_cli.decode import generate, translate
from arelu_cli.decode.output import meta_path, write_output
from arelu_cli.util.errors import UserError

COMMANDS = {"translate": (translate.check_out, translate.META_KEYS, "--input"),
            "generate": (generate.check_out, generate.META_KEYS, "--prompts")}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_input_file_is_never_the_output(tmp_path, command):
    check, _, flag = COMMANDS[command]
    source = tmp_path / "in.txt"
    source.write_text("ein hund\n", encoding="utf-8")
    link = tmp_path / "link.txt"  # another name of the same file
    link.hardlink_to(source)
    record = tmp_path / "y.txt.json"  # OUT.json would be the input
    record.write_text("the source\n", encoding="utf-8")
    for out, given in ((source, source), (link, source), (tmp_path / "y.txt", record)):
        with pytest.raises(UserError, match=re.escape(f"would overwrite the {flag} file {given}")):
            check(out, str(given))
    assert source.read_text(encoding="utf-8") == "ein hund\n"
    check(tmp_path / "new.txt", str(source))
    check(None, str(source))  # stdout
    check("-", str(source))


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("files, refused", [
    ({"out.txt": "mine\n"}, True),  # no OUT.json: a user's file
    ({"out.txt.json": '{"note": "mine"}'}, True),  # a user's JSON
    ({"out.txt": "mine\n", "out.txt.json": "not json"}, True),
    ({"out.txt": ""}, False),  # nothing in it to lose
    ({"out.txt": "earlier\n", "out.txt.json": "KEYS"}, False),  # its own
])
def test_only_its_own_or_empty_files_are_replaced(tmp_path, command, files, refused):
    check, keys, _ = COMMANDS[command]
    for name, text in files.items():
        text = json.dumps(dict.fromkeys(keys, "x")) if text == "KEYS" else text
        (tmp_path / name).write_text(text, encoding="utf-8")
    if refused:
        with pytest.raises(UserError, match=f"not written by arelu {command}.*another --out"):
            check(tmp_path / "out.txt", None)
    else:
        check(tmp_path / "out.txt", None)


def test_other_commands_records_are_not_its_own(tmp_path):
    """A translation's record lacks what every generation's record has, and back."""
    out = tmp_path / "out.txt"
    out.write_text("earlier\n", encoding="utf-8")
    meta_path(out).write_text(json.dumps(dict.fromkeys(translate.META_KEYS, "x")))
    with pytest.raises(UserError, match="not written by arelu generate"):
        generate.check_out(out, None)


def test_a_file_gets_the_lines_and_the_record_after_the_check(tmp_path):
    out, seen = tmp_path / "out.txt", []
    write_output(["ein Hund", "", "zwei"], out, {"rate": 2.5}, seen.append)
    assert seen == [out] and out.read_text(encoding="utf-8") == "ein Hund\n\nzwei\n"
    assert json.loads(meta_path(out).read_text(encoding="utf-8")) == {"rate": 2.5}

    def refuse(path):
        raise UserError("no")
    with pytest.raises(UserError):
        write_output(["new"], tmp_path / "other.txt", {}, refuse)
    assert not (tmp_path / "other.txt").exists() and not meta_path(tmp_path / "other.txt").exists()


@pytest.mark.parametrize("out", [None, "-"])
def test_stdout_gets_utf8_whatever_the_locale_and_no_check(monkeypatch, tmp_path, out):
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    monkeypatch.chdir(tmp_path)
    write_output(["Grüße", "→"], out, {"rate": 1.0}, lambda path: pytest.fail("checked"))
    assert raw.getvalue().decode("utf-8") == "Grüße\n→\n" and not list(tmp_path.iterdir())
