"""The ``arelu`` command line: thin Typer commands that parse, call the library, print.

One module per command group; nothing outside this package imports it. Each command's work
lives in a library module (:mod:`arelu_cli.train`, :mod:`arelu_cli.decode`,
:mod:`arelu_cli.analysis`, :mod:`arelu_cli.bench`, :mod:`arelu_cli.studies`,
:mod:`arelu_cli.data`).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading

STARTING = "arelu: interrupted (Ctrl-C) while starting; nothing was written\n"


def _interrupted_while_starting(*_) -> None:
    os.write(2, STARTING.encode())
    os._exit(130)


# Ctrl-C during the seconds the imports below take (torch, the commands) ends the process
# with one line instead of an import traceback; the usual handler is back once they are done.
_MAIN_THREAD = threading.current_thread() is threading.main_thread()
if _MAIN_THREAD:
    signal.signal(signal.SIGINT, _interrupted_while_starting)

from arelu_cli.train import openmp  # noqa: E402

openmp.short_spin()  # before any module below imports torch (libgomp reads it once)

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402

# Each module registers its commands on `app` when imported, in the order `arelu --help` lists them.
from arelu_cli.cli import data, train, lm, studies, human_eval, analysis, bench  # noqa: F401,E402
from arelu_cli.cli.app import app  # noqa: E402
from arelu_cli.util.errors import UserError  # noqa: E402

if _MAIN_THREAD:
    signal.signal(signal.SIGINT, signal.default_int_handler)

__all__ = ["app", "main"]
# Modules whose ValueError is an argument error by contract (library code raises no UserError).
LIBRARY = ("arelu_cli.transforms", "arelu_cli.registry", "arelu_cli.transforms.tau", "arelu_cli.decode.sampling",
           "arelu_cli.analysis.lm_metrics")


def _from_library(error: BaseException) -> bool:
    """Whether ``error`` was raised by a line of :data:`LIBRARY` (not by a bug further down)."""
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    return trace is not None and trace.tb_frame.f_globals.get("__name__", "").startswith(LIBRARY)


def main() -> None:
    """Console entry point: user errors (and the library's ValueErrors) become one line on
    stderr and exit status 2; a stop signal in a multi-step command (``arelu train`` says its
    own) one line with the command that continues, and 128 + the signal's number; Ctrl-C
    before a command has anything to save one line and 130."""
    err = Console(stderr=True)
    try:
        _run(err)
    except KeyboardInterrupt:
        err.print("arelu: interrupted (Ctrl-C)", highlight=False, soft_wrap=True)
        sys.exit(130)


def _run(err: Console) -> None:
    from arelu_cli.train.stop_signals import Interrupted

    try:
        app()
    except ValueError as error:
        if not isinstance(error, UserError) and not _from_library(error):
            raise
        err.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except Interrupted as stopped:  # inside a training run of reproduce, study...
        if stopped.rank == 0:
            command = shlex.join(["arelu", *sys.argv[1:]])
            err.print(escape(stopped.rerun(command)), highlight=False, soft_wrap=True)
        sys.exit(stopped.code)
