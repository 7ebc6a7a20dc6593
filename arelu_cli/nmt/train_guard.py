"""Guards of a training run: a usable folder, and early ends that hide nothing and lose no work.

* Folders: :func:`check_run_folder` (``--out``: a folder that can be written),
  :func:`check_new_run_folder` (a new run's ``--out``: new, empty or a run folder, never a
  folder of other files) and :func:`read_last` (``--resume``: a run folder holding
  ``last.pt``), as one-line :class:`UserError` messages that say what to do.
* Data: :func:`check_same_data` (``--resume`` continues a run only on the version of the
  prepared folder it was trained on, as its recorded data fingerprint says; another version
  only with ``--allow-data-change``, which :func:`record_data_change` notes in the run's
  ``config.json``).
* Divergence: a step whose loss or gradient norm is not finite (NaN or inf) is never
  applied, and weights that an update made non-finite (or whose validation loss is not
  finite) are never saved, so ``last.pt`` keeps the last good state. :func:`diverged`
  writes ``diverged.json`` in the run folder for tools (a diverged run has no
  ``summary.json``) and raises :class:`Diverged` with the one-line message (exit status 2,
  like every :class:`UserError`).
* Signals: :class:`StopSignals` turns the first SIGINT (Ctrl-C) or SIGTERM into a request that
  the loop honours after the current step: it saves ``last.pt`` and raises
  :class:`Interrupted` (exit status 130 or 143) with the command that resumes the run. A
  second Ctrl-C aborts at once (``KeyboardInterrupt``); ``last.pt`` then keeps its last save.
"""

from __future__ import annotations

import json
import math
import shlex
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from arelu_cli.data.prepared import Prepared, data_fingerprint
from arelu_cli.nmt import checkpoint, distributed
from arelu_cli.errors import UserError
from arelu_cli.registry import get_transform
from arelu_cli.atomic import ATOMIC_TEMP, atomic_write_text

DIVERGED = "diverged.json"
"""Written when a run stops on a non-finite loss, gradient or weights."""


class Diverged(UserError):
    """The loss, the gradient norm or the weights stopped being finite."""


class Interrupted(Exception):
    """Training stopped on a signal; ``code`` is the exit status (128 + the signal number).
    The message ends with the ``arelu train --resume`` command; ``stopped`` and ``kept`` are
    its parts without it, for a multi-step command that continues otherwise (:meth:`rerun`)."""

    def __init__(self, message: str, code: int, rank: int = 0, stopped: str = "",
                 kept: str = ""):
        super().__init__(message)
        self.code, self.rank = code, rank
        self.stopped, self.kept = stopped or message, kept

    def rerun(self, command: str) -> str:
        """The line of a multi-step command (``arelu reproduce``, ``study``...) stopped in one
        of its training runs: running ``command`` again continues everything, that run too."""
        kept = f"; {self.kept}" if self.kept else ""
        return (f"{self.stopped}{kept}. What is finished is kept: run `{command}` again to "
                "continue")


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
    """Remove the temporary files that killed writes (:func:`arelu_cli.atomic.open_temp`'s
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
    """Whether ``folder`` holds the ``config.json`` that :func:`arelu_cli.nmt.train.train` writes."""
    config = _read_config(folder)
    return config is not None and {"train", "model", "resolved"} <= set(config)


def check_tau_given(tau: object, transform: str) -> None:
    """A number given for tau (``--tau``, ``--set train.tau=``) with a transform that has no
    fixed threshold would be ignored: refuse it. (A recipe's numeric tau is kept, as
    ``reproduce`` trains its other transforms with the recipe that sets 1.5-ReLU's.)"""
    if isinstance(tau, str) or tau is None or get_transform(transform).family == "relu":
        return
    raise UserError(f"--tau {tau:g} applies only to alpha-ReLU transforms (<a>-relu, e.g. "
                    f"1.5-relu); {transform} has no fixed threshold, so drop --tau")


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


SHORT = 12
"""Hex digits of a data fingerprint shown in messages."""


@dataclass(frozen=True)
class DataChange:
    """A resumed run goes on, from ``step``, on another version of its prepared folder."""

    step: int
    before: str | None
    after: str | None


def recorded_fingerprint(run: Path) -> str | None:
    """The data fingerprint ``train`` recorded in the run's config.json; None when it recorded
    none (data without checksums) or the config.json cannot be read."""
    config = _read_config(run)
    resolved = config.get("resolved") if isinstance(config, dict) else None
    found = resolved.get("data_fingerprint") if isinstance(resolved, dict) else None
    return found if isinstance(found, str) else None


def check_same_data(out: Path, data: Prepared, step: int,
                    allow_change: bool) -> DataChange | None:
    """Resuming the run in ``out`` (at ``step``) on ``data``: refuse another version of the
    data than the run recorded, unless ``allow_change`` (then return the change, to be
    recorded)."""
    recorded, current = recorded_fingerprint(out), data_fingerprint(data.meta)
    if recorded == current:
        return None
    if not allow_change:
        raise UserError(
            f"{out} was trained on another version of {data.path} (data fingerprint "
            f"{_short(recorded)}, now {_short(current)}); train into a new --out, or continue "
            f"it on the changed data with: arelu train --resume {shlex.quote(str(out))} "
            "--allow-data-change")
    return DataChange(step, recorded, current)


def _short(fingerprint: str | None) -> str:
    return fingerprint[:SHORT] if fingerprint else "none"


def record_data_change(out: Path, change: DataChange) -> str:
    """Note ``change`` in the run's config.json (``resolved.data_fingerprint`` becomes the new
    one; ``resolved.data_changes`` lists every change) and return the line that says so."""
    config = _read_config(out)
    resolved = config["resolved"]
    resolved["data_fingerprint"] = change.after
    resolved["data_changes"] = [*resolved.get("data_changes", []),
                                {"step": change.step, "from": change.before, "to": change.after}]
    atomic_write_text(out / "config.json", json.dumps(config, indent=2) + "\n")
    return (f"note: {out} goes on from step {change.step} on changed data (data fingerprint "
            f"{_short(change.before)}, now {_short(change.after)}; --allow-data-change), "
            "recorded in its config.json")


def _read_config(run: Path) -> dict | None:
    try:
        config = json.loads((Path(run) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def kept_hint(out: Path, saved_step: int | None) -> str:
    """What the stopped run ``out`` keeps."""
    if saved_step is None:
        return f"no {checkpoint.LAST} was saved yet in {out}"
    return f"{out / checkpoint.LAST} keeps step {saved_step}"


def resume_hint(out: Path, saved_step: int | None) -> str:
    """Where the run's work is kept and the command that continues it."""
    if saved_step is None:
        return f"no {checkpoint.LAST} was saved yet; start again with --out {shlex.quote(str(out))}"
    return (f"{kept_hint(out, saved_step)}; resume with: arelu train "
            f"--resume {shlex.quote(str(out))}")


def interrupted(stopped: str, code: int, out: Path, saved_step: int | None,
                rank: int) -> Interrupted:
    """The :class:`Interrupted` of a run ``out`` that ``stopped`` (what happened, when)."""
    return Interrupted(f"{stopped}: {resume_hint(out, saved_step)}", code, rank, stopped,
                       kept_hint(out, saved_step))


def is_finite(value: torch.Tensor | float) -> bool:
    return math.isfinite(float(value))


def grad_norm(parameters: list[torch.Tensor], clip: float) -> torch.Tensor:
    """The gradients' global L2 norm, clipped to ``clip`` first when it is positive."""
    if clip > 0:
        return torch.nn.utils.clip_grad_norm_(parameters, clip)
    return torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])


def diverged(out: Path, step: int, what: dict, saved_step: int | None, record: bool) -> None:
    """Stop the run at ``step``, where the values ``what`` (name: value) are not finite:
    raise :class:`Diverged`; with ``record`` (the main process) first write ``diverged.json``
    (the step, those values, the message) for tools."""
    values = ", ".join(f"{name} {float(value):g}" for name, value in what.items())
    message = (f"training diverged at step {step} ({values}); that step was not saved. "
               f"{resume_hint(out, saved_step)} after lowering the learning rate (--set "
               "train.lr=...) or clipping gradients (--set train.clip_norm=1.0)")
    if record:  # strict JSON: a value that is not finite is written as "nan", "inf", "-inf"
        numbers = {k: float(v) if is_finite(v) else str(float(v)) for k, v in what.items()}
        atomic_write_text(out / DIVERGED, json.dumps(
            {"step": step, **numbers, "last_saved_step": saved_step, "message": message},
            indent=2, allow_nan=False) + "\n")
    raise Diverged(message)


class StopSignals:
    """Within ``with``: SIGINT and SIGTERM set :attr:`received` instead of ending the process
    (only in the main thread, where Python runs signal handlers); a second SIGINT raises
    ``KeyboardInterrupt``. A signal the process was started to ignore (``nohup``, a shell's
    background job) stays ignored. The earlier handlers come back on exit."""

    def __init__(self, announce: bool = True):
        self.received: int | None = None
        self.announce = announce
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        if self.received is None:
            self.received = signum
            if self.announce:
                sys.stderr.write(f"\n{signal.Signals(signum).name}: stopping after this step "
                                 "and saving last.pt (Ctrl-C again aborts at once)\n")
            return
        # A second SIGTERM (e.g. a launcher passing on the first signal) changes nothing.
        if signum == signal.SIGINT:
            raise KeyboardInterrupt

    def requested(self, ctx: distributed.Context) -> bool:
        """Whether any process received a stop signal (a collective under torchrun)."""
        return distributed.any_true(ctx, self.received is not None)

    @property
    def code(self) -> int:
        """Exit status of a stopped run: 128 + the signal's number (SIGTERM from a peer)."""
        return 128 + int(self.received or signal.SIGTERM)

    def interrupted(self, step: int, out: Path, saved_step: int | None,
                    rank: int) -> Interrupted:
        """What a run stopped by a signal after ``step`` raises."""
        name = signal.Signals(self.code - 128).name
        return interrupted(f"stopped by {name} after step {step}", self.code, out, saved_step,
                           rank)
