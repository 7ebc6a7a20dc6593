"""Result rows -> CSV, written atomically, each row carrying a sacrebleu-style signature.

Every command that measures something turns its measurements into a list of dicts (one
dict per measurement) and hands them to :func:`write_rows`. The signature names what the
number depends on (transform, alpha, tau, data, recipe, seed, versions) so that a row can
be traced back to the run that made it.

Files are replaced atomically (a temporary sibling, then a rename) with the permissions a
plain ``open`` would give them, or those of the file they replace; a CSV is replaced only
when this tool wrote it (:func:`check_replaceable`), never a user's file of the same name.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import re
import secrets
import stat
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import pandas as pd

from arelu_cli.errors import UserError

def read_json(path: str | Path, remedy: str) -> dict:
    """The JSON object in ``path``; a one-line :class:`UserError` naming the file and
    ``remedy`` (what to do) when it is missing, cut short or not an object."""
    path = Path(path)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} is missing; {remedy}") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"{path} is not readable JSON ({why}); {remedy}") from None
    if not isinstance(found, dict):
        raise UserError(f"{path} does not hold a JSON object; {remedy}")
    return found


def read_table(path: str | Path, remedy: str) -> pd.DataFrame:
    """The CSV ``path`` as a frame; a one-line :class:`UserError` naming the file and
    ``remedy`` when it is missing, empty or not a CSV (a file cut short)."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"{path} is missing; {remedy}") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"{path} is empty or not a CSV ({why}); {remedy}") from None


# Fields in the order they appear in a signature; absent or None fields are left out.
SIGNATURE_FIELDS = ("transform", "alpha", "tau", "data", "recipe", "seed")


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Versions of the packages a result depends on (missing packages are left out)."""
    found = {"python": platform.python_version()}
    for dist, key in (("arelu", "arelu"), ("torch", "torch"), ("entmax", "entmax"),
                      ("sacrebleu", "sacrebleu"), ("tokenizers", "tokenizers")):
        try:
            found[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def machine(device: object = "cpu") -> str:
    """What ran a timing or a training, for a results column: the GPU's name on CUDA
    (``NVIDIA H100 80GB HBM3``), else the CPU's model and how many logical CPUs the process
    may use (``Intel(R) Xeon(R) Processor, 2 CPUs``). Tokens/s and step times of different
    machines are not comparable; this says which machine a number belongs to."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    usable = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count())
    return f"{_cpu_model()}, {usable} CPUs"


@lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8",
                                                    errors="replace").splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def signature(**fields: object) -> str:
    """A one-line signature, e.g. ``transform:1.5-relu|alpha:1.5|tau:0.33|...|torch:2.13.0``.

    Known fields come first in a fixed order, then any extra fields in the order given,
    then the versions of :func:`versions`.
    """
    ordered = [k for k in SIGNATURE_FIELDS if k in fields]
    ordered += [k for k in fields if k not in SIGNATURE_FIELDS]
    parts = [f"{k}:{_fmt(fields[k])}" for k in ordered if fields[k] is not None]
    parts += [f"{k}:{v}" for k, v in versions().items()]
    return "|".join(parts)


def signature_field(signature: object, key: str) -> str | None:
    """The value of ``key`` in a ``key:value|key:value`` signature, or None."""
    for part in str(signature).split("|"):
        name, _, value = part.partition(":")
        if name == key:
            return value
    return None


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


def write_rows(rows: Iterable[Mapping[str, object]], path: str | Path,
               columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Write measurement rows to a CSV atomically and return them as a DataFrame: the one way
    arelu writes a results CSV. ``columns`` fixes the columns and their order (the catalog
    of :mod:`arelu_cli.report.columns`; a header even without rows) and a row with other
    keys is a bug in its builder: ValueError. Without it the columns are the rows' keys in
    order of appearance. An existing file is replaced only when it is a CSV of these
    columns (:func:`check_replaceable`)."""
    rows, path = list(rows), Path(path)
    if columns is not None:
        for row in rows:
            if set(row) != set(columns):
                raise ValueError(f"{path.name}: row columns {sorted(row)} differ from "
                                 f"{list(columns)}")
    frame = pd.DataFrame(rows, columns=None if columns is None else list(columns))
    check_replaceable(path, [str(c) for c in frame.columns])
    atomic_write_text(path, frame.to_csv(index=False))
    return frame
