"""A run stopped by a signal keeps its work: :class:`StopSignals` turns the first SIGINT
(Ctrl-C) or SIGTERM into a request that the loop honours after the current step: it saves
``last.pt`` and raises :class:`Interrupted` (exit status 130 or 143) with the command that
resumes the run. A second Ctrl-C aborts at once (``KeyboardInterrupt``); ``last.pt`` then
keeps its last save.
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from pathlib import Path

from arelu_cli.model import checkpoint

from arelu_cli.train import distributed


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
