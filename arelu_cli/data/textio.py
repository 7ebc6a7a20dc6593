"""Reading line-aligned UTF-8 text files, with one-line errors for every kind of bad input.

Lines are split on ``\\n`` only (``str.splitlines`` would also split on U+2028, U+0085 and
friends, silently misaligning a parallel corpus); a trailing ``\\r`` and a leading byte-order
mark are dropped.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from arelu_cli.util.errors import UserError

SNIPPET = 40
MAX_LINE_CHARS = 100_000
"""The longest line a corpus file may hold: one sentence or paragraph per line is the
format, and a longer line (a whole document on one line) makes tokenizing it take memory
in proportion (hundreds of bytes per token)."""
STDIO = "-"
"""The file name that means stdin (``--input -``) or stdout (``--out -``)."""


def read_bytes(path: Path, hint: str) -> bytes:
    """The bytes of ``path``: a file, or a pipe (``<(...)``, a named FIFO) read once; a
    one-line error for a missing path (``hint``: what to check), a folder or an unreadable
    file."""
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a text file; give the file inside it")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"file not found: {path}; {hint}") from None
    except OSError as err:
        raise UserError(f"cannot read {path} ({err.strerror or err}); check its "
                        "permissions") from None


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 corpus file; a clear error for a missing, empty or non-UTF-8 file
    or a line longer than :data:`MAX_LINE_CHARS`."""
    path = Path(path)
    data = read_bytes(path, "check the path or the corpus folder given to --source")
    if not data.strip():
        raise UserError(f"{path} is empty; a corpus file needs one sentence per line")
    lines = decode_lines(data, str(path))
    longest = max(range(len(lines)), key=lambda i: len(lines[i]))
    if len(lines[longest]) > MAX_LINE_CHARS:
        raise UserError(f"{path} line {longest + 1} is {len(lines[longest]):,} characters long; "
                        f"a corpus file holds one sentence or paragraph per line (at most "
                        f"{MAX_LINE_CHARS:,} characters): break the text into lines")
    return lines


def read_text_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file, or of stdin for ``-``, split as :func:`read_lines`
    splits them; unlike a corpus file, an empty file or one of blank lines is valid here
    (text to translate, translations, references)."""
    if str(path) == STDIO:
        return decode_lines(sys.stdin.buffer.read(), "<stdin>")
    path = Path(path)
    return decode_lines(read_bytes(path, "check the path (or give - to read stdin)"), str(path))


def decode_lines(data: bytes, name: str) -> list[str]:
    """The lines of UTF-8 ``data`` read from ``name`` (a file, or e.g. ``<stdin>``), split as
    :func:`read_lines` splits them; a clear error for bytes that are not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise UserError(f"{name} line {line}: bytes that are not UTF-8 "
                        f"({data[err.start:err.start + 4]!r}); convert the file to UTF-8 "
                        f"(e.g. iconv -f latin1 -t utf-8)") from None
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _suspicious(src: str, tgt: str) -> bool:
    """A pair that looks misaligned: one side empty, or lengths far apart."""
    a, b = len(src.strip()), len(tgt.strip())
    if (a == 0) != (b == 0):
        return True
    return max(a, b) > 20 and max(a, b) > 3 * max(1, min(a, b))


def _clip(text: str) -> str:
    return repr(text if len(text) <= SNIPPET else text[:SNIPPET] + "...")


def check_aligned(src_path: Path, src: list[str], tgt_path: Path, tgt: list[str]) -> None:
    """Raise a one-line error when two files that must be line-aligned have different lengths."""
    if len(src) == len(tgt):
        return
    first = next((i for i in range(min(len(src), len(tgt))) if _suspicious(src[i], tgt[i])),
                 min(len(src), len(tgt)))
    left = src[first] if first < len(src) else "<end of file>"
    right = tgt[first] if first < len(tgt) else "<end of file>"
    raise UserError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; they must be "
                    f"line-aligned (first suspicious line {first + 1}: {_clip(left)} vs "
                    f"{_clip(right)})")


def read_aligned(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Both sides of a line-aligned pair of text files."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    check_aligned(src_path, src, tgt_path, tgt)
    return src, tgt


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
