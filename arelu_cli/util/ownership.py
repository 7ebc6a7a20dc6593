"""Which output files arelu made: it replaces only those, never a user's file of the same name.

CSVs carry their own proof: the writer's exact header (:func:`check_replaceable`). The
other outputs carry a mark: a Markdown report ends with :data:`MD_MARK` (an HTML comment,
invisible when rendered) and a PNG has ``Software: arelu ...`` in its metadata
(:func:`png_metadata`). An empty file holds nothing to lose.
"""

from __future__ import annotations

import csv
import json
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import versions

MD_MARK = "<!-- written by arelu, which rewrites this file; move it away to keep an edited copy -->"
SOFTWARE = "arelu"
_PNG = b"\x89PNG\r\n\x1a\n"


def check_ours(path: Path, ours: Callable[[Path], bool], *, writer: str = "arelu",
               advice: str = "move that file away or choose another folder") -> None:
    """Refuse to replace ``path`` when it exists, is not empty and ``ours`` says arelu did
    not write it: a one-line :class:`UserError` naming the file, the command that would
    have written it (``writer``) and what to do (``advice``)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0 or ours(path):
        return
    raise UserError(f"{path} exists and was not written by {writer}, which replaces only its "
                    f"own files; {advice}")


def csv_header(path: Path) -> list[str] | None:
    """The column names of an existing file read as CSV; ``None`` when there is no such
    file or it is empty (nothing in it to lose)."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return next(csv.reader(handle), None)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError, csv.Error):
        return ["<not UTF-8 text>"]


def check_replaceable(path: Path, columns: Sequence[str]) -> None:
    """Refuse to replace a file this writer did not write: an existing non-empty file must be
    a CSV whose header is ``columns``. A header that merely has a ``signature`` column is
    not enough: every arelu CSV has one, and another command's file (``arelu score``'s
    scores, say, with its ``bleu`` column) would be lost."""
    header = csv_header(path)
    if header is None or header == list(columns):
        return
    raise UserError(f"{path} exists and is not a CSV this command writes (header "
                    f"{','.join(header)[:60]!r}); choose another --out or move that file away")


def markdown_ours(path: Path) -> bool:
    """Whether a Markdown file holds :data:`MD_MARK`."""
    try:
        return MD_MARK in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def write_markdown(path: str | Path, text: str) -> Path:
    """Write a Markdown output atomically with :data:`MD_MARK` as its last line, replacing
    only a file arelu wrote (:func:`markdown_ours`)."""
    path = Path(path)
    check_ours(path, markdown_ours)
    return atomic_write_text(path, text.rstrip("\n") + f"\n\n{MD_MARK}\n")


def png_metadata() -> dict[str, str]:
    """PNG metadata for matplotlib's ``savefig``: the mark of :func:`png_ours`."""
    return {"Software": f"{SOFTWARE} {versions().get('arelu', '')}".strip()}


def png_text(path: Path, key: str) -> str | None:
    """The ``tEXt`` value of ``key`` in the PNG ``path`` (among the chunks before the image
    data, where matplotlib writes them); None when absent or not a PNG."""
    try:
        with open(path, "rb") as handle:
            if handle.read(8) != _PNG:
                return None
            while len(head := handle.read(8)) == 8:
                length, kind = struct.unpack(">I4s", head)
                if kind in (b"IDAT", b"IEND"):
                    return None
                data = handle.read(length + 4)[:length]  # the chunk and its CRC
                name, _, value = data.partition(b"\0")
                if kind == b"tEXt" and name == key.encode("latin-1"):
                    return value.decode("latin-1")
    except OSError:
        return None
    return None


def png_ours(path: Path) -> bool:
    """Whether the PNG ``path`` has arelu's mark (:func:`png_metadata`)."""
    return (png_text(path, "Software") or "").split(" ")[0] == SOFTWARE



def json_with_keys(*keys: str) -> Callable[[Path], bool]:
    """Whether a file is a JSON object with every one of ``keys``."""
    def ours(path: Path) -> bool:
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return False
        return isinstance(value, dict) and set(keys) <= set(value)
    return ours


def csv_starting_with(column: str) -> Callable[[Path], bool]:
    """Whether a file is a CSV whose first column is ``column`` (with a ``signature`` column
    or not: an arelu table's first column names what each row measures)."""
    def ours(path: Path) -> bool:
        header = csv_header(path)
        return bool(header) and header[0] == column
    return ours


def lines_start_with(prefix: str) -> Callable[[Path], bool]:
    """Whether every non-blank line of a text file starts with ``prefix`` (a list of
    commands, e.g. ``commands.txt``)."""
    def ours(path: Path) -> bool:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return False
        return all(line.startswith(prefix) for line in lines if line.strip())
    return ours
