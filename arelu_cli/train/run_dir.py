"""The folder of a training run, and the one module that knows its files.

A run folder holds :data:`CONFIG` (the whole configuration and what it resolved to),
:data:`LOG` (:mod:`arelu_cli.train.log`), :data:`SUMMARY` once the run finished,
:data:`DIVERGED` when it stopped on a non-finite value, its checkpoints
(:mod:`arelu_cli.model.checkpoint`) and, where a finished run trained again, its first
training's record in :data:`FIRST`. Every other module reads and writes these files through
the functions here.

``--out`` must be a folder that can be written, a new run's ``--out`` new, empty or a run
folder (never a folder of other files), ``--resume`` a run folder holding ``last.pt``; each
refusal a one-line :class:`UserError` that says what to do. Also what killed writes left in
it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from arelu_cli.model import checkpoint
from arelu_cli.train.log import read_log as read_log_file
from arelu_cli.util.atomic import ATOMIC_TEMP, atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_json

CONFIG = "config.json"
"""The configuration a run trains with, and ``resolved``: what it resolved to."""
LOG = "log.csv"
"""One row per logging interval and validation."""
SUMMARY = "summary.json"
"""Written when a run finishes: a run folder without it is unfinished."""
DIVERGED = "diverged.json"
"""Written when a run stops on a non-finite loss, gradient or weights."""
FIRST = "first"
"""Where a finished run that trains again (its checkpoints gone before its outputs were
made, e.g. on a new machine) keeps its first training's record (:data:`RECORD`): what was
selected on, which a second training of the same configuration must not change."""
RECORD = (CONFIG, LOG, SUMMARY)
"""The files that say what a run was and did (its checkpoints aside)."""


def config_path(folder: Path) -> Path:
    return Path(folder) / CONFIG


def log_path(folder: Path) -> Path:
    return Path(folder) / LOG


def summary_path(folder: Path) -> Path:
    return Path(folder) / SUMMARY


def diverged_path(folder: Path) -> Path:
    return Path(folder) / DIVERGED


def again(folder: Path) -> str:
    """What to do when a record of the run in ``folder`` is unusable."""
    return f"restore it (e.g. from version control), or delete {folder} to train the run again"


def check_run_folder(out: Path, create: bool) -> None:
    """``out`` must be a folder (or not exist yet); with ``create`` (the main process) it is
    made and a file written in it, so that a run cannot fail at its first save."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a run folder; give --out a folder (new, or "
                        "holding a run to --resume)")
    if not create:
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise UserError(f"cannot write the run folder {out} ({err.strerror or err}); give "
                        "--out a folder you can write") from None


def check_new_run_folder(out: Path) -> None:
    """``out`` of a new run: a new or empty folder, or a run folder of ``arelu train``
    without ``last.pt`` (a run stopped before its first save, now started again). A folder
    holding a run is continued with ``--resume``; one holding other files is never written
    into."""
    if (out / checkpoint.LAST).exists():
        raise UserError(f"{out} already holds a run; continue it with --resume {out} or "
                        "choose another --out")
    if not out.is_dir() or _is_run_folder(out):
        return
    # Our own atomic writes' temporaries (another process of this run may be writing
    # its configuration right now) are not foreign files.
    foreign = sorted(p.name for p in out.iterdir() if not ATOMIC_TEMP.fullmatch(p.name))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(f"{out} is not empty and not a run folder of arelu train (it holds "
                        f"{shown}); give --out a new or empty folder")


def clean_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files that killed writes (:func:`arelu_cli.util.atomic.open_temp`'s
    ``.NAME.RANDOM.tmp``) left in the run folder ``folder`` and its ``steps/``: a
    checkpoint's is as large as the checkpoint. Returns the files removed."""
    removed = []
    for place in (folder, folder / "steps"):
        if place.is_dir():
            for path in place.iterdir():
                if ATOMIC_TEMP.fullmatch(path.name) and path.is_file() and not path.is_symlink():
                    path.unlink(missing_ok=True)
                    removed.append(path)
    return removed


def _is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` holds the :data:`CONFIG` that :func:`arelu_cli.train.loop.train` writes."""
    config = read_config(folder)
    return config is not None and {"train", "model", "resolved"} <= set(config)


def read_last(folder: Path) -> dict:
    """The ``last.pt`` of the run folder ``folder``, to continue the run."""
    folder = Path(folder)
    if folder.is_file():
        hint = (f"; use --resume {shlex.quote(str(folder.parent))}"
                if folder.name in (checkpoint.LAST, checkpoint.BEST) else "")
        raise UserError(f"--resume takes a run folder (the --out of an earlier arelu train), "
                        f"not the file {folder}{hint}")
    if not (folder / checkpoint.LAST).is_file():
        what = "does not exist" if not folder.exists() else f"holds no {checkpoint.LAST}"
        raise UserError(f"{folder} {what}, so there is no run to resume; start one with --out "
                        f"{shlex.quote(str(folder))} (without --resume)")
    return checkpoint.load(folder / checkpoint.LAST)


def read_config(folder: Path) -> dict | None:
    """The run folder's :data:`CONFIG` as a dict; None when missing or unreadable."""
    try:
        config = json.loads(config_path(folder).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def require_config(folder: Path) -> dict:
    """The run folder's :data:`CONFIG`; a one-line :class:`UserError` when it is missing or
    unreadable."""
    return read_json(config_path(folder), again(folder))


def write_config(folder: Path, record: dict) -> Path:
    """Write the run's :data:`CONFIG` atomically."""
    return atomic_write_text(config_path(folder), json.dumps(record, indent=2) + "\n")


def read_summary(folder: Path) -> dict:
    """The run's :data:`SUMMARY`; a one-line :class:`UserError` when it is unusable."""
    return read_json(summary_path(folder), again(folder))


def write_summary(folder: Path, summary: dict) -> Path:
    """Write the run's :data:`SUMMARY` atomically: from now on the run is finished."""
    return atomic_write_text(summary_path(folder), json.dumps(summary, indent=2) + "\n")


def first_summary(folder: Path) -> dict | None:
    """The summary of the run's first training (:data:`FIRST`), None when it trained once."""
    path = Path(folder) / FIRST / SUMMARY
    return read_json(path, again(folder)) if path.is_file() else None


def best_score(summary: dict) -> float:
    """A summary's best validation score, higher is better: the best dev BLEU of a
    translation model, minus the best dev loss of a language model."""
    if summary.get("best_dev_loss") is not None:
        return -float(summary["best_dev_loss"])
    return float(summary["best_bleu"])


def best_dev_loss(summary: dict) -> float | None:
    """A language model's best dev loss by its summary; None when it has none."""
    if summary.get("best_dev_loss") is not None:
        return float(summary["best_dev_loss"])
    return None if summary.get("best_bleu") is None else -float(summary["best_bleu"])


def read_log(folder: Path) -> pd.DataFrame:
    """The run's :data:`LOG`; a one-line :class:`UserError` when it is unusable."""
    return read_log_file(log_path(folder), again(folder))


def has_log(folder: Path) -> bool:
    return log_path(folder).is_file()


def finished(folder: Path) -> bool:
    """The run's current training finished (its own :data:`SUMMARY`)."""
    return summary_path(folder).is_file()


def trained(folder: Path) -> bool:
    """The run finished once: it wrote its summary, now or in its first training."""
    return finished(folder) or (Path(folder) / FIRST / SUMMARY).is_file()


def diverged(folder: Path) -> bool:
    """The run stopped on a non-finite loss, gradient or weights (:data:`DIVERGED`)."""
    return diverged_path(folder).is_file()


def read_diverged(folder: Path) -> dict:
    """The run's :data:`DIVERGED` record; a one-line :class:`UserError` when unusable."""
    return read_json(diverged_path(folder), again(folder))


def started(folder: Path) -> bool:
    """Something was trained in ``folder``: a summary, a checkpoint or a divergence."""
    return any((Path(folder) / name).exists() for name in (SUMMARY, checkpoint.LAST, DIVERGED))


def only_record(folder: Path) -> bool:
    """``folder`` holds nothing but a run's first files (:data:`CONFIG`, :data:`LOG`)."""
    return {p.name for p in Path(folder).iterdir()} <= {CONFIG, LOG}


def clear_outcome(folder: Path) -> None:
    """Remove an earlier run's log, summary and divergence before a new one starts."""
    for name in (LOG, SUMMARY, DIVERGED):
        (Path(folder) / name).unlink(missing_ok=True)


def keep_first(folder: Path) -> Path:
    """Before the finished run in ``folder`` trains again, copy its record (:data:`RECORD`)
    to :data:`FIRST` (all files or none; kept once: a later training never replaces it)."""
    folder = Path(folder)
    target = folder / FIRST
    if target.is_dir():
        return target
    tmp = folder / f".{FIRST}.copying"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in RECORD:
        if (folder / name).is_file():
            shutil.copy2(folder / name, tmp / name)
    os.replace(tmp, target)
    return target


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a run's :data:`LOG` (what a report reads of it)."""
    return has_log(folder)
