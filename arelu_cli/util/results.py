"""Result tables: measurement rows written to a CSV (the one way arelu writes a results
CSV, replacing only its own file) and result files read back with one-line errors.

Every command that measures something turns its measurements into a list of dicts (one
dict per measurement, each with a :func:`arelu_cli.util.signatures.signature`) and hands them to
:func:`write_rows`; a study writes its set of tables, each with its figure, through
:func:`write_tables`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import check_replaceable


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


def write_rows(rows: Iterable[Mapping[str, object]], path: str | Path,
               columns: Sequence[str] | None = None, checked: bool = False) -> pd.DataFrame:
    """Write measurement rows to a CSV atomically and return them as a DataFrame: the one way
    arelu writes a results CSV. ``columns`` fixes the columns and their order (the catalog
    of a study's columns; a header even without rows) and a row with other
    keys is a bug in its builder: ValueError. Without it the columns are the rows' keys in
    order of appearance. An existing file is replaced only when it is a CSV of these
    columns (:func:`check_replaceable`); when it is not, or ``path`` cannot be written (a
    folder), the rows, which may have taken hours to measure, go to a new file beside it
    (:func:`_beside`) and the one-line error names it. ``checked``: the caller already made
    sure that an existing file is one of its outputs (a study's runner, whose tables may have
    gained a column since), so it is replaced whatever its header."""
    rows, path = list(rows), Path(path)
    if columns is not None:
        for row in rows:
            if set(row) != set(columns):
                raise ValueError(f"{path.name}: row columns {sorted(row)} differ from "
                                 f"{list(columns)}")
    frame = pd.DataFrame(rows, columns=None if columns is None else list(columns))
    text = frame.to_csv(index=False)
    try:
        if not checked:
            check_replaceable(path, [str(c) for c in frame.columns])
        atomic_write_text(path, text)
    except UserError as refused:  # not ours to replace, a folder, an unwritable place
        kept = atomic_write_text(_beside(path), text)
        raise UserError(f"{refused}; the rows of this run are in {kept}") from None
    return frame


def _beside(path: Path) -> Path:
    """The first of ``NAME.new.csv``, ``NAME.new-2.csv``, ... beside ``path`` that does not
    exist (``.csv`` also for a ``path`` without a suffix, such as a folder)."""
    suffix = path.suffix or ".csv"
    candidate, n = path.with_name(f"{path.stem}.new{suffix}"), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}.new-{n}{suffix}")
    return candidate


def write_tables(folder: Path, tables: Iterable[tuple[str, Sequence[Mapping[str, object]],
                                                      Sequence[str] | None]],
                 figures: Mapping[str, Callable[[Path, Path], object]] = {}) -> None:
    """Write each ``(name, rows, columns)`` of ``tables`` to ``folder/name``
    (:func:`write_rows`), and draw the figure ``figures[name](csv, png)`` of each that has
    rows, into the PNG of its name."""
    for name, rows, columns in tables:
        write_rows(rows, folder / name, columns)
        if rows and name in figures:
            figures[name](folder / name, (folder / name).with_suffix(".png"))
