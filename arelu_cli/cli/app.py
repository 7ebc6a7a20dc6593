"""The Typer application of ``arelu``, its command groups and what several commands share.

The command modules (:mod:`arelu_cli.cli.data`, ``train``, ``studies``, ``analysis``,
``bench``, ``human_eval``) register their commands on :data:`app`; :mod:`arelu_cli.cli`
imports them all and holds :func:`arelu_cli.cli.main`.
"""

from __future__ import annotations

import inspect
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from arelu_cli import __version__

app = typer.Typer(
    name="arelu",
    help="Sparse output layers for text generation: alpha-ReLU vs softmax, sparsemax and "
    "alpha-entmax. Reproduces the tables and figures of 'Speeding Up Entmax'.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
bench_app = typer.Typer(help="Speed and memory benchmarks that write CSV.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

human_eval_app = typer.Typer(help="Blind human evaluation (paper Sec. 'Human Evaluation'): "
                             "export annotation sheets, then score the filled ones.",
                             no_args_is_help=True)
app.add_typer(human_eval_app, name="human-eval")

console = Console()


def _version(value: bool) -> None:
    if value:
        console.print(f"arelu {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """arelu: sparse output layers for text generation."""


DECODE_HELP = {
    "checkpoint": "A checkpoint file, or a run folder (its best.pt, else last.pt); default: "
                  "the run trained most recently under ./runs.",
    "data": "Prepared corpus folder (default: the one the checkpoint was trained on).",
    "beam": "Beam size; 1 is greedy search (default: the checkpoint's \\[decode] beam, 5).",
    "length_penalty": "GNMT length penalty exponent for ranking finished hypotheses "
                      "(default: the checkpoint's, 0 = none, as OpenNMT-py).",
    "max_tokens": "Source tokens per decoding batch (default: the checkpoint's \\[decode] max_tokens).",
    "renormalize": "alpha-ReLU only: divide the output by its sum at each step before taking "
                   "logs (default: the log of the unnormalized output, as trained).",
    "max_sentences": "At most this many sentences per split, drawn with --seed (default: all; "
                     "1000 of train).",
    "device": "auto, cpu or cuda.",
}
# The decoding options several commands take, declared once (Typer reads a default's
# OptionInfo without changing it, so one object serves every command).
CHECKPOINT = typer.Option(None, help=DECODE_HELP["checkpoint"])
CHECKPOINTS = typer.Option([], help=DECODE_HELP["checkpoint"] + " Repeatable.")
BEAM = typer.Option(None, help=DECODE_HELP["beam"])
LENGTH_PENALTY = typer.Option(None, help=DECODE_HELP["length_penalty"])
MAX_TOKENS = typer.Option(None, help=DECODE_HELP["max_tokens"])
RENORMALIZE = typer.Option(False, "--renormalize", help=DECODE_HELP["renormalize"])
MAX_SENTENCES = typer.Option(None, help=DECODE_HELP["max_sentences"])
SAMPLE_SEED = typer.Option(0, help="Seed of the --max-sentences sample.")
DATA = typer.Option(None, help=DECODE_HELP["data"])
DEVICE = typer.Option("auto", help=DECODE_HELP["device"])
DECODE_OPTIONS = {"beam": (Optional[int], BEAM),
                  "length_penalty": (Optional[float], LENGTH_PENALTY),
                  "max_tokens": (Optional[int], MAX_TOKENS), "renormalize": (bool, RENORMALIZE),
                  "max_sentences": (Optional[int], MAX_SENTENCES), "seed": (int, SAMPLE_SEED),
                  "data": (Optional[Path], DATA), "device": (str, DEVICE)}
"""Decoding option name -> its type and Typer declaration, for :func:`decoding`."""


def decoding(command: Callable) -> Callable:
    """Declare ``command``'s keyword-only parameters that have no default and name a decoding
    option (:data:`DECODE_OPTIONS`: ``beam``, ``max_tokens``, ...) with that option's type and
    Typer declaration: the commands that decode list these options, declared once here (Typer
    reads the command's signature)."""
    signature = inspect.signature(command)
    params = [p.replace(annotation=DECODE_OPTIONS[p.name][0], default=DECODE_OPTIONS[p.name][1])
              if p.kind is p.KEYWORD_ONLY and p.default is p.empty and p.name in DECODE_OPTIONS
              else p for p in signature.parameters.values()]
    command.__signature__ = signature.replace(parameters=params)
    return command


def checkpoint_paths(given: list[Path]) -> list[Path]:
    """The checkpoints given, else the run ``arelu train`` made most recently under ./runs
    (named on stderr, so that stdout keeps only what the command writes there)."""
    if given:
        return given
    from arelu_cli.decode.translate import RUNS, latest_run

    run = latest_run()
    Console(stderr=True).print(f"using {escape(str(run))}, the most recently trained run under "
                               f"{RUNS}/ (--checkpoint chooses another)", highlight=False,
                               soft_wrap=True)
    return [run]


def progress(total: int):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn)

    bar = Progress(TextColumn("translating"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task("translate", total=total)
    return bar, lambda n: bar.advance(task, n)


def stdin_is_piped() -> bool:
    """Whether stdin is a pipe or a file to read from: not a terminal, nor ``/dev/null`` (a
    job started without input), nor closed."""
    if sys.stdin is None:
        return False
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):  # an in-memory stream (tests, embedding) has no descriptor
        return sys.stdin.readable() and not sys.stdin.isatty()
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)
