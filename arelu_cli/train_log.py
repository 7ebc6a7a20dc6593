"""The training log: one CSV row per logging or validation step, and the progress bar.

Columns (see :data:`COLUMNS`) feed the paper's training-dynamics figure (loss and BLEU
against steps or seconds), the tau/||z|| evolution and the tau sweep: ``tau`` is the
transform's threshold (alpha-ReLU's fixed tau, alpha-entmax's mean ``tau(z)``, empty for
softmax), ``tau_z`` the mean 1.5-entmax ``tau(z)`` of the same logits for every transform.
Rows are appended as they come; a resumed run first drops the rows a killed run wrote
after its last checkpoint, so the file reads as one uninterrupted run.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from arelu_cli.results import atomic_write_text

COLUMNS = ("step", "epoch", "wall_s", "tokens_per_s", "train_loss", "lr", "tau", "tau_z",
           "logit_norm", "sum_p", "nnz", "val_loss", "val_bleu", "signature")
"""``tokens_per_s`` counts source and target tokens (padding excluded), all processes,
over the logging interval's training time (validation excluded); ``wall_s`` is the run's
wall-clock time so far, validation included."""


def append_row(path: Path, row: dict) -> None:
    """Append one row (missing columns empty), writing the header to a new file."""
    new = not path.exists()
    with open(path, "a", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({key: row.get(key) for key in COLUMNS})


def truncate_after(path: Path, step: int) -> None:
    """Drop the rows written after ``step`` (by a run killed after its last checkpoint)."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    text = text[:text.rfind("\n") + 1]  # a kill mid-write leaves a last line without newline
    frame = pd.read_csv(io.StringIO(text))
    atomic_write_text(path, frame[frame["step"] <= step].to_csv(index=False))


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
