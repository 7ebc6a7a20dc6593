"""The tables of the paper's grid that ``arelu report`` computes from a results folder: the
alpha-ReLU curves, the training figures and table from the run folders, Table 3 (analytic,
when the grid measured none), and ``seed_summary.csv`` over every other CSV of the folder.
The CSVs that ``arelu reproduce`` measures from checkpoints (Tables 1-2, sparsity,
self-normalization, inference time, examples) are kept as they are; missing ones are
reported missing.

Layout of a results folder: the fixed CSVs of :mod:`.columns` at its top, training runs (one
``arelu train`` folder per transform, or per transform and seed: :mod:`.layout`) under
``runs/``, the tau-sweep runs under ``tau-sweep/`` and the commands that made it, one a
line, in ``commands.txt``.

Only the runs of the report's scope make its tables and figures (:mod:`.provenance`): those
trained on the current version of its prepared folder and inside its grid; the runs left
out, and those whose data cannot be verified, are named in REPORT.md and on the console.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.studies.contract import Table, Tables
from arelu_cli.studies.paper import provenance, runs, seed_summary, tables
from arelu_cli.studies.paper.alpha_relu_graph import alpha_relu_curve_rows
from arelu_cli.studies.paper.columns import COLUMNS, read_csv
from arelu_cli.studies.paper.plots import FIGURES

COMMANDS_FILE = "commands.txt"


def recorded_commands(folder: Path) -> list[str]:
    """The commands of ``folder/commands.txt`` (one a line, blank lines dropped)."""
    path = folder / COMMANDS_FILE
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _screened(folder: Path, where: str, scope: provenance.Scope,
              sweep: bool = False) -> provenance.Screened | None:
    """The runs under ``folder`` screened for ``scope``; None when there are none."""
    found = runs.load_runs(folder)
    return provenance.screen(found, where, scope, sweep) if found else None


def _table(name: str, rows: list[dict]) -> Table:
    return Table(name, rows, COLUMNS[name], FIGURES.get(name))


def _as_written(table: Table) -> pd.DataFrame:
    """The table as its CSV will read back."""
    return pd.read_csv(io.StringIO(pd.DataFrame(table.rows, columns=list(table.columns))
                                   .to_csv(index=False)))


def seed_summary_table(folder: Path, rebuilt: dict[str, Table] | None = None) -> Table:
    """``seed_summary.csv``: every summarized CSV over its seeds, the rebuilt ones as they
    will be written, the others as the folder holds them."""
    rows = []
    for name in seed_summary.REDUCTIONS:
        frame = (_as_written(rebuilt[name]) if name in (rebuilt or {})
                 else read_csv(folder, name))
        if frame is not None and len(frame):
            rows += seed_summary.summary_rows(name, frame)
    return _table("seed_summary.csv", rows)


def tables_of(config: Config, folder: Path) -> Tables:
    """Every table a report of the grid ``config`` computes in ``folder``. A folder whose
    runs are all left out gets tables without rows, so that no earlier CSV keeps their
    numbers."""
    scope, notes = provenance.scope_of(config), []
    found = [_table("fig_alpha_relu_curves.csv", alpha_relu_curve_rows())]
    main = _screened(folder / "runs", "runs", scope)
    if main is not None:
        kept = main.kept
        watts = config.reproduce.gpu_watts or None
        found += [_table("fig_training_dynamics.csv", runs.training_dynamics_rows(kept)),
                  _table("fig_tau_norm_evolution.csv", runs.tau_norm_rows(kept)),
                  _table("training_time.csv", runs.training_time_rows(kept, watts))]
        notes += main.notes
        stale = provenance.still_measured(folder, main.left_out)
        notes += [stale] if stale else []
    sweep = _screened(folder / "tau-sweep", "tau-sweep", scope, sweep=True)
    if sweep is not None:
        found.append(_table("fig_tau_sweep.csv", runs.tau_sweep_rows(sweep.kept)))
        notes += sweep.notes
    if not (folder / "table3_tau.csv").is_file():
        found.append(_table("table3_tau.csv", tables.table3_rows()))
    found.append(seed_summary_table(folder, {t.name: t for t in found}))
    rebuilt = {t.name for t in found}
    found += [Table(name, columns=COLUMNS[name], figure=draw, kept=True)
              for name, draw in FIGURES.items() if name not in rebuilt]
    return Tables(found, notes)
