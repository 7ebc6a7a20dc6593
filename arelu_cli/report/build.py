"""What ``arelu report RESULTS_DIR`` regenerates: the CSVs computable from what the folder
holds, every figure PNG, and REPORT.md.

Layout of a results folder (what ``arelu reproduce`` writes): the fixed CSVs of
:mod:`arelu_cli.report.columns` at its top, training runs (one ``arelu train`` folder per
transform, or per transform and seed: :mod:`arelu_cli.report.layout`) under ``runs/``, the
tau-sweep runs under ``tau-sweep/`` and the commands that made it, one a line, in
``commands.txt``. ``seed_summary.csv`` (mean, std and n over seeds) is recomputed from
whatever CSVs are there. CSVs made by measuring commands (BLEU, empty check,
sparsity, ...) are kept as they are; missing ones are reported missing.

Only the runs of the report's scope make its tables and figures (:mod:`.provenance`): those
trained on the current version of its prepared folder and inside its grid, both named by
``arelu reproduce`` (its reproduce.json when ``arelu report`` runs alone); the runs left
out, and those whose data cannot be verified, are named in REPORT.md and on the console.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from arelu_cli.util.errors import UserError
from arelu_cli.report import plots, provenance, reproduction_report, runs, seeds, tables
from arelu_cli.report.columns import COLUMNS, read_csv
from arelu_cli.report.alpha_relu_graph import alpha_relu_curve_rows
from arelu_cli.util.results import write_rows

COMMANDS_FILE = "commands.txt"


@dataclass
class Rebuilt:
    """What :func:`regenerate` wrote."""

    csvs: list[Path] = field(default_factory=list)
    pngs: list[Path] = field(default_factory=list)
    report: Optional[Path] = None
    notes: list[str] = field(default_factory=list)
    """One line per reason for runs left out or whose data is not verified."""

    def write(self, folder: Path, name: str, rows: Sequence[dict]) -> None:
        """Write the catalog's CSV ``name`` in ``folder`` and count it as written."""
        write_rows(rows, folder / name, COLUMNS[name])
        self.csvs.append(folder / name)


def warn(line: str) -> None:
    """The console line of a note (stderr: stdout keeps the list of files written)."""
    print(f"warning: {line}", file=sys.stderr)


def recorded_commands(folder: Path) -> list[str]:
    """The commands of ``folder/commands.txt`` (one a line, blank lines dropped)."""
    path = folder / COMMANDS_FILE
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _tau_rows(tau_csvs: Sequence[Path]) -> list[dict]:
    """The rows of ``arelu estimate-tau`` CSVs (any file name), empty cells as None."""
    rows = []
    for path in map(Path, tau_csvs):
        if not path.is_file():
            raise UserError(f"tau CSV not found: {path} (write one with `arelu estimate-tau`)")
        frame = pd.read_csv(path)
        if tuple(frame.columns) != COLUMNS["table3_tau.csv"]:
            raise UserError(f"{path} is not an `arelu estimate-tau` CSV (columns "
                            f"{list(frame.columns)})")
        rows += frame.astype(object).where(frame.notna(), None).to_dict("records")
    return rows


def _load(given: Optional[Path], default: Path, option: str, scope: provenance.Scope,
          sweep: bool = False) -> Optional[provenance.Screened]:
    """The runs under ``given`` (none there is an error) or under ``default`` (None when
    there are none), screened for ``scope``."""
    found = runs.load_runs(given or default)
    if given is not None and not found:
        raise UserError(f"{option} {given}: no run folders (with a log.csv) in it")
    where = str(given) if given is not None else default.name
    return provenance.screen(found, where, scope, sweep) if found else None


def seed_summary_rows(folder: Path) -> list[dict]:
    """``seed_summary.csv``: every summarized CSV of ``folder`` over its seeds."""
    rows = []
    for name in seeds.REDUCTIONS:
        frame = read_csv(folder, name)
        if frame is not None and len(frame):
            rows += seeds.summary_rows(name, frame)
    return rows


def regenerate_csvs(folder: Path, runs_dir: Optional[Path] = None,
                    sweep_dir: Optional[Path] = None, gpu_watts: Optional[float] = None,
                    n_gpus: Optional[int] = None, tau_csvs: Sequence[Path] = (),
                    scope: provenance.Scope = provenance.Scope()) -> Rebuilt:
    """Write the CSVs computable here: the alpha-ReLU curves, the training figures and table
    from the run folders of ``scope``, and Table 3 (analytic, plus the rows of
    ``tau_csvs``). A folder whose runs are all left out gets CSVs without rows, so that no
    earlier CSV keeps their numbers."""
    out = Rebuilt()
    out.write(folder, "fig_alpha_relu_curves.csv", alpha_relu_curve_rows())
    main = _load(runs_dir, folder / "runs", "--runs", scope)
    if main is not None:
        kept = main.kept
        for name, rows in (("fig_training_dynamics.csv", runs.training_dynamics_rows(kept)),
                           ("fig_tau_norm_evolution.csv", runs.tau_norm_rows(kept)),
                           ("training_time.csv", runs.training_time_rows(kept, gpu_watts, n_gpus))):
            out.write(folder, name, rows)
        out.notes += main.notes
        stale = provenance.still_measured(folder, main.left_out)
        out.notes += [stale] if stale else []
    sweep = _load(sweep_dir, folder / "tau-sweep", "--sweep-runs", scope, sweep=True)
    if sweep is not None:
        out.write(folder, "fig_tau_sweep.csv", runs.tau_sweep_rows(sweep.kept))
        out.notes += sweep.notes
    if tau_csvs or not (folder / "table3_tau.csv").is_file():
        out.write(folder, "table3_tau.csv", tables.table3_rows(_tau_rows(tau_csvs)))
    out.write(folder, "seed_summary.csv", seed_summary_rows(folder))
    return out


def regenerate(folder: str | Path, commands: Sequence[str] = (), runs_dir: Optional[Path] = None,
               sweep_dir: Optional[Path] = None, gpu_watts: Optional[float] = None,
               n_gpus: Optional[int] = None, tau_csvs: Sequence[Path] = (),
               scope: Optional[provenance.Scope] = None,
               log: Callable[[str], None] = warn) -> Rebuilt:
    """CSVs, then PNGs, then REPORT.md with the recorded commands followed by ``commands``.

    Runs outside ``scope`` (default: that of the folder's reproduce.json) are left out; each
    note on them is a line of REPORT.md and goes to ``log``.

    ``folder`` must exist: a mistyped name is an error, not a new, empty report. A
    REPORT.md or figure PNG there that arelu did not write is refused before anything is
    written (:mod:`arelu_cli.util.ownership`).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is a file, not a results folder" if folder.exists() else
                        f"no results folder {folder}; give the folder `arelu reproduce` wrote "
                        "(or make the folder first)")
    plots.check_pngs(folder)  # a user's file of an output's name: refused before any
    reproduction_report.check_report(folder)  # write
    scope = provenance.recorded_scope(folder) if scope is None else scope
    out = regenerate_csvs(folder, runs_dir, sweep_dir, gpu_watts, n_gpus, tau_csvs, scope)
    out.pngs = plots.plot_all(folder)
    out.report = reproduction_report.write_report(
        folder, [*recorded_commands(folder), *commands], notes=out.notes)
    for line in out.notes:
        log(line)
    return out
