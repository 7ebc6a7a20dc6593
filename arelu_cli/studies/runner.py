"""The one runner of every study (:mod:`arelu_cli.studies.contract`): ``arelu study RECIPE``
and ``arelu reproduce RECIPE`` run one; ``arelu report DIR`` rebuilds any study's folder from
its files.

A study's folder holds :data:`RECORD`: which study it is (its ``kind``), the recipe and the
whole configuration it runs with, written before any training. :func:`run` checks the
recipe, refuses any file of an output's name that arelu did not write, writes the record,
runs the stages and writes the report; :func:`report` reads the record and writes the
tables (CSVs and figures), then ``REPORT.md``. A study is found by its ``kind``: the folder
of :mod:`arelu_cli.studies` whose ``study`` module names it (``STUDY``); adding a study is
adding a folder. A recipe names its study by ``[study] kind`` (:func:`load`); the
configuration is the shared :class:`~arelu_cli.config.Config`, or, for a study with tables of
its own, its schema's (:func:`configuration`).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from arelu_cli.config import from_dict
from arelu_cli.studies.contract import (RECORD, Configuration, Context, Study, Tables,
                                        read_record, write_record)
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import (check_ours, csv_starting_with, json_with_keys,
                                      markdown_ours, png_ours, write_markdown)
from arelu_cli.util.results import write_rows

REPORT = "REPORT.md"


def studies() -> dict[str, Study]:
    """Every study: ``kind -> Study``, one per folder of :mod:`arelu_cli.studies` with a
    ``study`` module that names one."""
    import arelu_cli.studies as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}.study"
        if info.ispkg and importlib.util.find_spec(name) is not None:
            study = getattr(importlib.import_module(name), "STUDY", None)
            if study is not None:
                found[study.kind] = study
    return found


def study_of(kind: str) -> Study:
    known = studies()
    if kind not in known:
        raise UserError(f"no study of kind {kind!r}; [study] kind is one of "
                        f"{', '.join(sorted(known))}")
    return known[kind]


def results_folder(out: Path) -> Path:
    """Make the results folder ``out``, or refuse in one line what cannot be one."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a results folder; give --out a folder (new, or "
                        "the one an earlier run of this command wrote, to continue it)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot make the results folder {out} ({err.strerror or err}); give "
                        "--out a folder you can write") from None
    return out


def guard(study: Study, out: Path, advice: str) -> None:
    """Refuse, before any work, a file in ``out`` of an output's name that arelu did not
    write: hours of training never end on a file that cannot be replaced."""
    check_ours(out / RECORD, json_with_keys("kind", "config"), advice=advice)
    for name, first in study.outputs.items():
        check_ours(out / name, csv_starting_with(first), advice=advice)
    for name in study.figures:
        check_ours(out / name, png_ours, advice=advice)
    for name, ours in study.files.items():
        check_ours(out / name, ours, advice=advice)
    check_ours(out / REPORT, markdown_ours, advice=advice)


def configuration(study: Study, tables: Mapping[str, object]) -> Configuration:
    """``tables`` (a recipe's, or a record's) as ``study``'s configuration: its own
    schema's (:attr:`~arelu_cli.studies.contract.Study.schema`), else the shared
    :class:`~arelu_cli.config.Config`."""
    return (study.schema or from_dict)(tables)


def load(tables: Mapping[str, object]) -> tuple[Study, Configuration] | None:
    """The study that a recipe's tables name (``[study] kind``) and its configuration made
    from them; None where they name none."""
    section = tables.get("study")
    kind = section.get("kind", "") if isinstance(section, Mapping) else ""
    if not kind:
        return None
    if not isinstance(kind, str):
        raise UserError(f"[study] kind must be a string, got {kind!r}")
    study = study_of(kind)
    return study, configuration(study, tables)


def read(folder: Path) -> tuple[Study, Configuration]:
    """The study and configuration that the study folder ``folder``'s record names."""
    kind, tables = read_record(folder)
    study = study_of(kind)
    return study, configuration(study, tables)


def run(config: Configuration, out: Path, context: Context) -> Path:
    """Run (or continue) the study that ``config``'s ``[study] kind`` names into ``out``;
    returns its ``REPORT.md``."""
    study = study_of(config.study.kind)
    study.check(config)
    guard(study, out, "move that file away or give another --out")
    results_folder(out)
    write_record(out, study.kind, context.recipe, config)
    context = Context(context.console, context.train, context.recipe, context.command,
                      context.source, lambda: write_report(study, config, out))
    study.stages(config, out, context)
    return write_report(study, config, out)


def report(folder: Path, overrides: Mapping[tuple[str, str], object] = {}) -> Path:
    """Rebuild the tables, figures and ``REPORT.md`` of the study folder ``folder`` from its
    files; ``overrides``: ``{(table, key): value}`` over the recorded configuration."""
    kind, tables = read_record(Path(folder))
    study = study_of(kind)
    for (section, key), value in overrides.items():
        tables.setdefault(section, {})[key] = value
    config = configuration(study, tables)
    guard(study, Path(folder), "move that file away")
    return write_report(study, config, Path(folder))


def _has_rows(csv: Path, table) -> bool:
    if not table.kept:
        return bool(table.rows)
    return csv.is_file() and not pd.read_csv(csv).empty


def write_report(study: Study, config: Configuration, out: Path) -> Path:
    """Tables (every input read and checked first), their CSVs (each a file of ours, checked
    by :func:`guard`) and figures, the claims, ``REPORT.md``; each note goes to stderr too."""
    found: Tables = study.tables(config, out)
    for table in found.tables:
        csv, png = out / table.name, (out / table.name).with_suffix(".png")
        if not table.kept:
            write_rows(table.rows, csv, table.columns, checked=True)
        if table.figure is not None and _has_rows(csv, table):
            table.figure(csv, png)
        elif png.name in study.figures:  # a figure of nothing: an earlier one is stale
            png.unlink(missing_ok=True)
    claims = study.claims(config, out, found)
    for line in found.notes:
        print(f"note: {line}", file=sys.stderr)
    return write_markdown(out / REPORT, study.document(config, out, found, claims))
