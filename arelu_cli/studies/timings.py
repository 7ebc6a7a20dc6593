"""Timings a plan measures once, on an idle machine, into a CSV of its results folder
(delete the file to measure again): never measured again behind the user's back, and
refused when a column says they were taken with other settings than the recipe asks for
now (another ``[model]``, precision, output transform)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd
from rich.console import Console

from arelu_cli.config import Config
from arelu_cli.util.errors import UserError
from arelu_cli.train.precision import resolve as resolve_precision
from arelu_cli.util.results import read_table, write_rows


def precision(config: Config) -> str:
    """The precision the recipe trains with on its device (what a timing records)."""
    return resolve_precision(config.train.precision, config.train.device)


def timed_once(path: Path, what: str, measure: Callable[[], list[dict]], console: Console,
               settings: Mapping[str, object] = {}) -> pd.DataFrame:
    """The rows of ``path``, measured by ``measure`` when the file is not there yet (a
    warning says how busy the machine was), refused where a column of ``settings`` holds
    another value than the recipe's now."""
    from arelu_cli.bench.timing import warn_if_busy

    if not path.is_file():
        console.rule(f"bench: {what} (wants an idle machine)")
        rows = measure()
        write_rows(rows, path)
        warn_if_busy(rows, console, f"the times of {path}", "; delete the file and run the "
                     "study again to measure it again")
    frame = read_table(path, "delete it to measure again (on an idle machine)")
    for column, want in settings.items():
        found = set(frame[column].dropna()) if column in frame.columns else set()
        if found and found != {want}:
            raise UserError(f"{path} was timed with {column} {sorted(map(str, found))[0]}, but "
                            f"the recipe now asks for {want}; delete it to measure again (on "
                            "an idle machine)")
    return frame
