"""Reading aligned text files: line splitting and every bad-input error."""

from __future__ import annotations

import pytest

from arelu_cli.data.textio import read_aligned, read_lines, read_text_lines
from arelu_cli.util.errors import UserError


@pytest.mark.parametrize("raw, lines", [
    (b"a\nb\n", ["a", "b"]),
    (b"a\nb", ["a", "b"]),
    (b"a\r\nb\r\n", ["a", "b"]),
    (b"\xef\xbb\xbfa\nb\n", ["a", "b"]),            # byte-order mark dropped
    ("a\u2028b\nc\n".encode(), ["a\u2028b", "c"]),  # only \n ends a line
    (b"a\n\nb\n", ["a", "", "b"]),                  # empty lines kept (alignment)
])
def test_read_lines(tmp_path, raw, lines):
    path = tmp_path / "f.txt"
    path.write_bytes(raw)
    assert read_lines(path) == lines


@pytest.mark.parametrize("raw, message", [
    (b"", "is empty"),
    (b"\n \n", "is empty"),
    (b"ok\nok\nbad \xff here\n", "line 3: bytes that are not UTF-8"),
])
def test_bad_files(tmp_path, raw, message):
    path = tmp_path / "f.txt"
    path.write_bytes(raw)
    with pytest.raises(UserError, match=message):
        read_lines(path)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="file not found"):
        read_lines(tmp_path / "nope.de")


def test_count_mismatch_names_both_counts_and_first_suspicious_line(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_text("eins\nzwei\ndrei\nvier\n", encoding="utf-8")
    tgt.write_text("one\n\nthree four five six seven eight nine ten eleven\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        read_aligned(src, tgt)
    message = str(err.value)
    assert "has 4 lines" in message and "has 3" in message
    assert "first suspicious line 2" in message and "\n" not in message


def test_count_mismatch_without_suspicious_pair_points_past_the_shorter_file(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    tgt.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"first suspicious line 3: 'drei' vs '<end of file>'"):
        read_aligned(src, tgt)


@pytest.mark.parametrize("reader", [read_lines, read_text_lines])
def test_a_named_pipe_is_read_like_a_file(tmp_path, reader):
    """``--input <(echo hello)`` or a FIFO is read, not "file not found"."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"hallo welt\nzwei\n"))
    writer.start()
    assert reader(fifo) == ["hallo welt", "zwei"]
    writer.join()


@pytest.mark.parametrize("reader", [read_lines, read_text_lines])
def test_a_folder_is_named_as_a_folder(tmp_path, reader):
    with pytest.raises(UserError, match=rf"^{tmp_path} is a folder, not a text file; give the "
                                        "file inside it$"):
        reader(tmp_path)
