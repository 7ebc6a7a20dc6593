"""Files written atomically: a temporary sibling, then a rename, so that a kill at any moment
leaves the old file or the new one, never half of one; with the permissions a plain
``open`` would give, or those of the file replaced. A path that cannot be written is a
one-line :class:`UserError`.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from arelu_cli.util.errors import UserError

ATOMIC_TEMP = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")
"""Names of :func:`open_temp`'s temporary files (``.NAME.RANDOM.tmp``)."""


def open_temp(path: Path) -> tuple[int, Path]:
    """A new, empty temporary file beside ``path`` (a write descriptor and its name).

    Created with mode 0666 less the umask, as ``open`` would (``tempfile.mkstemp`` makes it
    0600), or with the mode of the file at ``path`` when replacing one: an atomic write
    changes the contents of a file, never who may read it.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except OSError:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
        return fd, tmp
    raise FileExistsError(f"no free temporary name beside {path}")


def cannot_write(path: Path, err: OSError) -> UserError:
    """A one-line error for a path that cannot be written, naming a file where a folder
    would have to be."""
    blocker = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
    why = f"{blocker} is a file, not a folder" if blocker else err.strerror or str(err)
    return UserError(f"cannot write {path}: {why}; choose another path")


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and a rename: never half a file.

    A path that cannot be written (a folder, a read-only place, a file where a folder is
    needed) is a one-line UserError.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = open_temp(path)
    except OSError as err:
        raise cannot_write(path, err) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise cannot_write(path, err) from None
        raise
    return path
