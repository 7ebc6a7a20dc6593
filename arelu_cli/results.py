"""Result rows -> CSV, written atomically, each row carrying a sacrebleu-style signature.

Every command that measures something turns its measurements into a list of dicts (one
dict per measurement) and hands them to :func:`write_rows`. The signature names what the
number depends on (transform, alpha, tau, data, recipe, seed, versions) so that a row can
be traced back to the run that made it.
"""

from __future__ import annotations

import os
import platform
import tempfile
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import pandas as pd

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


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and a rename: never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_rows(rows: Iterable[Mapping[str, object]], path: str | Path) -> pd.DataFrame:
    """Write measurement rows to a CSV atomically and return them as a DataFrame."""
    frame = pd.DataFrame(list(rows))
    atomic_write_text(path, frame.to_csv(index=False))
    return frame
