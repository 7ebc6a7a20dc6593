"""The training log: one CSV row per logging or validation step, and the progress bar.

Columns (see :data:`COLUMNS`) feed the paper's training-dynamics figure (loss and BLEU
against steps or seconds), the tau/||z|| evolution and the tau sweep: ``tau`` is the
transform's threshold (alpha-ReLU's fixed tau, alpha-entmax's mean ``tau(z)``, empty for
softmax), ``tau_z`` the mean 1.5-entmax ``tau(z)`` of the same logits for every transform.
Rows are appended as they come; a resumed run first drops the rows a killed run wrote after
its last checkpoint, so the file reads as one uninterrupted run.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from arelu_cli.util.errors import UserError
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.results import read_table

COLUMNS = ("step", "epoch", "wall_s", "tokens_per_s", "threads", "train_loss", "lr", "tau",
           "tau_z", "logit_norm", "sum_p", "nnz", "val_loss", "val_bleu", "val_ppl", "signature")
"""``tokens_per_s`` counts source and target tokens (padding excluded), all processes,
over the logging interval's training time (validation excluded); ``threads`` is torch's
intra-op thread count of the row's step (``[train] threads``: the governor may change it);
``wall_s`` is the run's wall-clock time so far, validation included; a language model
logs ``val_ppl`` (softmax only) where a translation model logs ``val_bleu``."""


def append_row(path: Path, row: dict) -> None:
    """Append one row (missing columns empty), writing the header to a new file; a log of
    other columns is a one-line :class:`UserError`."""
    new = not path.exists() or path.stat().st_size == 0
    if not new and _header(path) != COLUMNS:
        raise UserError(f"{path} has other columns than arelu train's log ({', '.join(COLUMNS)})"
                        "; train the run again into a new --out")
    with open(path, "a", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({key: row.get(key) for key in COLUMNS})


def _header(path: Path) -> tuple[str, ...]:
    with open(path, encoding="utf-8", newline="") as handle:
        return tuple(next(csv.reader(handle), COLUMNS))


def read_log(path: Path, remedy: str = "restore it, or train the run again") -> pd.DataFrame:
    """``log.csv`` as a frame; a missing, empty or broken file is a one-line
    :class:`UserError` naming it and ``remedy``."""
    return read_table(path, f"it is the run's training log: {remedy}")


def truncate_after(path: Path, step: int) -> None:
    """Drop the rows written after ``step`` (by a run killed after its last checkpoint) and
    a last line that a kill cut short; the rows kept stay as they were written. A log
    without a complete header is emptied: the next row starts it again."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", newline="") as handle:
        text = handle.read()
    lines = [line + "\n" for line in text.split("\n")[:-1]]  # the last one lacks it: cut short
    if not lines:
        atomic_write_text(path, "")
        return
    header = next(csv.reader(lines[:1]))
    if "step" not in header:
        raise UserError(f"{path} is not a training log of arelu (its header has no step "
                        "column); move it away, then resume")
    at = header.index("step")
    kept = [line for line in lines[1:] if _row_step(line, at, len(header)) <= step]
    atomic_write_text(path, "".join(lines[:1] + kept))


def _row_step(line: str, at: int, width: int) -> float:
    """The step of one log line; infinite (never kept) for a line that is not a whole row."""
    row = next(csv.reader([line]), [])
    try:
        return float(row[at]) if len(row) == width else math.inf
    except ValueError:
        return math.inf


def progress_bar(console: Console | None) -> Progress | None:
    """A rich progress bar with steps, tokens/s, loss and ETA; None without a console."""
    if console is None:
        return None
    return Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[speed]} tok/s  loss {task.fields[loss]}  "
                               "bleu {task.fields[bleu]}  ETA {task.fields[eta]}"),
                    console=console, transient=False)


def format_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
