"""The folder of a training run: ``--out`` must be a folder that can be written,
a new run's ``--out`` new, empty or a run folder (never a folder of other files),
``--resume`` a run folder holding ``last.pt``; each refusal a one-line :class:`UserError`
that says what to do. Also what killed writes left in it, and its ``config.json``.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path

from arelu_cli.util.atomic import ATOMIC_TEMP
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint


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
    # config.json right now) are not foreign files.
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
    """Whether ``folder`` holds the ``config.json`` that :func:`arelu_cli.train.loop.train` writes."""
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


def read_config(run: Path) -> dict | None:
    """The run folder's ``config.json`` as a dict; None when missing or unreadable."""
    try:
        config = json.loads((Path(run) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def best_score(summary: Mapping) -> float:
    """A finished run's best validation result from its ``summary.json`` as one score where
    higher is better (what a sweep selects by): the BLEU of a translation run (``best_metric
    = "bleu"``), minus the dev loss of a language model (``"dev_loss"``)."""
    if summary.get("best_metric") == "dev_loss":
        return -float(summary["best_dev_loss"])
    return float(summary["best_bleu"])
