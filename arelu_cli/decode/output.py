"""The output of a decoding command (``arelu translate``, ``arelu generate``): one line per
input, to stdout or to a file ``OUT`` written atomically with its record ``OUT.json``.

The record is how arelu knows an ``OUT`` as its own: an existing ``OUT`` or ``OUT.json`` is
replaced only when the record carries the keys every record of that command has, and the
command's own input file is never replaced (:func:`check_output`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from arelu_cli.data.textio import STDIO
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import check_ours, json_with_keys


def meta_path(out: str | Path) -> Path:
    """The record written next to the output file ``out``."""
    return Path(f"{out}.json")


def to_stdout(out: str | Path | None) -> bool:
    """Whether ``out`` means stdout (None or ``-``)."""
    return out is None or str(out) == STDIO


def _same_file(path: Path, other: str | Path | None) -> bool:
    if other is None or str(other) == STDIO:
        return False
    try:
        return os.path.samefile(path, other)
    except OSError:  # either one is not there: nothing of the input to overwrite
        return False


def check_output(out: str | Path | None, source: str | Path | None, *, flag: str,
                 keys: Sequence[str], writer: str) -> None:
    """Refuse an output whose writing would lose data: the input file ``source`` (given by
    ``flag``) as ``OUT`` or ``OUT.json``, or an existing non-empty ``OUT`` or ``OUT.json``
    that ``writer`` did not write (an ``OUT`` is its own when its ``OUT.json`` has ``keys``).
    Stdout is always fine."""
    if to_stdout(out):
        return
    out = Path(out)
    for path in (out, meta_path(out)):
        if _same_file(path, source):
            raise UserError(f"--out {out} would overwrite the {flag} file {source}; choose "
                            "another --out")
    ours = json_with_keys(*keys)
    for path, mine in ((meta_path(out), ours), (out, lambda p: ours(meta_path(p)))):
        check_ours(path, mine, writer=writer, advice="move it away or choose another --out")


def write_output(lines: Sequence[str], out: str | Path | None, meta: dict,
                 check: Callable[[Path], None]) -> None:
    """``lines`` to ``out`` (atomically, after ``check(out)``, with ``meta`` as
    ``OUT.json``), or as UTF-8 to stdout whatever the locale's encoding."""
    text = "".join(line + "\n" for line in lines)
    if to_stdout(out):
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
        return
    check(Path(out))
    atomic_write_text(out, text)
    atomic_write_text(meta_path(out), json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
