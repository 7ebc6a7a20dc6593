"""The contract every study fills in: **stages -> tables -> claims -> document**.

A study is a folder of :mod:`arelu_cli.studies` whose ``study`` module names its
:class:`Study` (``STUDY``); the recipe's ``[study] kind`` chooses it, and :mod:`arelu_cli.studies.runner`
runs it (``arelu study RECIPE``, ``arelu reproduce RECIPE``) and rebuilds its report from its
folder (``arelu report DIR``):

* **stages** say which runs to train and which outputs to make from their weights, through
  the core (:mod:`arelu_cli.studies.core`), which decides what is done already;
* **tables** are read only from files: the runs' records, the outputs the stages made, the
  timings; every input is read and checked before anything is written;
* **claims** are the sections of verdicts computed from the tables (the one verdict rule:
  :mod:`arelu_cli.studies.verdict`);
* the **document** is ``REPORT.md``.

The runner owns everything else: checks before any training, refusing to replace files it
did not write, the study's record (``study.json``), the CSVs, the figures and ``REPORT.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from arelu_cli.studies.core import Trainer
from arelu_cli.studies.markdown import Section
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_json

RECORD = "study.json"
"""A study folder's record: ``{"kind": ..., "recipe": ..., "config": {...}}``, written
before any training: which study it is and the whole configuration it runs with."""


class Configuration(Protocol):
    """What the runner reads of a study's configuration: the shared
    :class:`~arelu_cli.config.Config`, or the frozen dataclasses of a study with tables of its
    own (:attr:`Study.schema`). ``study`` has its ``kind``, ``data`` its ``path`` (the
    prepared corpus ``arelu study`` prepares and checks), and ``to_dict()`` gives the tables
    the record keeps."""

    study: Any
    data: Any

    def to_dict(self) -> dict: ...

Figure = Callable[[Path, Path], object]
"""``draw(csv, png)``: a figure drawn from one written CSV."""


@dataclass(frozen=True)
class Table:
    """One CSV of a study's folder: its rows, its columns (None: the rows' keys) and the
    figure drawn from it, if any (``NAME.png``; none when the table has no rows). A ``kept``
    table is one the stages measured: the report leaves its CSV as it is and draws its
    figure from it."""

    name: str
    rows: Sequence[Mapping[str, object]] = ()
    columns: Sequence[str] | None = None
    figure: Figure | None = None
    kept: bool = False


@dataclass(frozen=True)
class Tables:
    """What a study's tables step gives: the tables, and one line per thing about their
    inputs that a reader must know (runs left out, seeds missing)."""

    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def rows(self, name: str) -> Sequence[Mapping[str, object]]:
        return next((t.rows for t in self.tables if t.name == name), [])


@dataclass(frozen=True)
class Context:
    """What a study's stages work with: the console, the trainer, the recipe's name, the
    command line that asked (recorded by studies that list their commands), the corpus
    files to prepare from, and ``report``: write the report of what is finished so far
    (a long study calls it between its parts)."""

    console: Console
    train: Trainer
    recipe: str = ""
    command: str = ""
    source: Path | None = None
    report: Callable[[], Path] = lambda: Path()


@dataclass(frozen=True)
class Study:
    """A study (module docstring): its ``[study] kind``, its files and its four steps."""

    kind: str
    """The ``[study] kind`` that names it."""
    check: Callable[[Configuration], None]
    """Refuse, before any work, a recipe whose tables could not be made."""
    stages: Callable[[Configuration, Path, Context], None]
    """Train what is not trained and make what is not made."""
    tables: Callable[[Configuration, Path], Tables]
    """The tables, from the folder's files alone."""
    claims: Callable[[Configuration, Path, Tables], list[Section]]
    """The sections of verdicts, from the written tables."""
    document: Callable[[Configuration, Path, Tables, list[Section]], str]
    """``REPORT.md`` (its claims and its tables)."""
    outputs: Mapping[str, str] = field(default_factory=dict)
    """Every CSV it writes -> its first column (how the runner knows a file of that name is
    one of ours)."""
    figures: tuple[str, ...] = ()
    """Every PNG it draws."""
    files: Mapping[str, Callable[[Path], bool]] = field(default_factory=dict)
    """Any other file it writes at the folder's top -> how to tell that one is ours."""
    schema: Callable[[Mapping[str, object]], Configuration] | None = None
    """A study with tables of its own: its recipe's tables -> its configuration (unknown
    tables and keys, wrong types and impossible values refused in one line); None: the
    shared :class:`~arelu_cli.config.Config` (:func:`arelu_cli.config.from_dict`)."""


def write_record(out: Path, kind: str, recipe: str, config: Configuration) -> Path:
    """Write the study folder ``out``'s :data:`RECORD`."""
    return atomic_write_text(out / RECORD, json.dumps(
        {"kind": kind, "recipe": recipe, "config": config.to_dict()}, indent=2) + "\n")


def read_record(folder: Path) -> tuple[str, dict]:
    """The kind and the configuration's tables that the study folder ``folder``'s
    :data:`RECORD` names (:func:`arelu_cli.studies.runner.read` makes them the study's
    configuration); a one-line :class:`UserError` for a folder that is no study's."""
    if not folder.is_dir():
        raise UserError(f"{folder} is a file, not a results folder" if folder.exists() else
                        f"no results folder {folder}; give the folder a study wrote")
    if not (folder / RECORD).is_file():
        raise UserError(f"{folder} holds no {RECORD}, so it is not a study's folder; give a "
                        "folder that arelu reproduce or arelu study wrote")
    record = read_json(folder / RECORD, "restore it (e.g. from version control)")
    if not isinstance(record.get("config"), dict) or not isinstance(record.get("kind"), str):
        raise UserError(f"{folder / RECORD} names no kind and config; restore it (e.g. from "
                        "version control)")
    return record["kind"], record["config"]
