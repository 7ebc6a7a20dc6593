"""Which training runs a report may use: those trained on the version of the prepared
corpus the report is about, inside the grid it was asked for.

A run records the :func:`~arelu_cli.data.prepared.data_fingerprint` of the folder it was
trained on (config.json ``resolved.data_fingerprint``). A run whose fingerprint differs from
that folder's now was trained on another version of the corpus (an earlier toy generator,
other cleaning, another train size): its numbers do not belong beside the others, so it is
left out of every table and figure made from runs. So is a run of another corpus, and a run
outside the requested grid (its transform, its tau in ``tau-sweep/`` or its seed). Runs from
before the fingerprint was recorded are kept, and said to be unverified. Every run left out
or unverified is named with its reason, one line per reason (REPORT.md and the console):
nothing is dropped silently. The CSVs that ``arelu reproduce`` measures from a run's
checkpoint (Table 1, ...) are not redone by a report; one more line names those that still
hold rows of a run left out (:func:`still_measured`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from arelu_cli.config import Config
from arelu_cli.data.prepared import data_fingerprint, read_meta
from arelu_cli.studies.core import Run
from arelu_cli.studies.paper.columns import COLUMNS, read_csv
from arelu_cli.studies.paper.runs import attention_of, data_fingerprint_of, tau_of

SHORT = 12
"""Hex digits of a fingerprint shown in a note."""
LEFT_OUT, UNVERIFIED = "Left out", "Kept, data not verified"
FROM_RUNS = ("training_time.csv", "fig_training_dynamics.csv", "fig_tau_norm_evolution.csv",
             "fig_tau_sweep.csv", "seed_summary.csv")
"""The CSVs a report computes from run folders (and from the other CSVs): never stale."""


@dataclass(frozen=True)
class Scope:
    """What a report is about. ``data``: the prepared folder (None: each run is checked
    against the folder its own config names); the grid: None where any value is welcome."""

    data: Optional[Path] = None
    transforms: Optional[tuple[str, ...]] = None
    taus: Optional[tuple[float, ...]] = None
    """The tau of every ``tau-sweep/`` run (the grid's ``tau_sweep``)."""
    seeds: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class Screened:
    """The runs a report uses, and one line per reason for those left out or unverified."""

    kept: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_out: list[Run] = field(default_factory=list)


def scope_of(config: Config) -> Scope:
    """The scope of the paper's grid of ``config``: its ``[data] path`` and grid; seeds as
    ``Grid.seeds`` reads them."""
    grid = config.reproduce
    return Scope(Path(config.data.path), tuple(grid.transforms),
                 tuple(float(t) for t in grid.tau_sweep), grid.seeds or (config.train.seed,))


@dataclass(frozen=True)
class _Data:
    """A prepared folder as it is now: its corpus and fingerprint (None: no meta.json)."""

    path: str
    corpus: Optional[str]
    fingerprint: Optional[str]


def _current(path: str) -> _Data:
    meta = read_meta(Path(path))
    return _Data(path, None, None) if meta is None else _Data(path, meta.get("corpus"),
                                                              data_fingerprint(meta))


def _data_verdict(run: Run, data: Optional[_Data]) -> tuple[str, str] | None:
    """(LEFT_OUT or UNVERIFIED, why) for a run whose data is not the report's; None if it is."""
    if data is None:
        return UNVERIFIED, "their config names no prepared folder"
    if data.corpus is None:
        return UNVERIFIED, f"{data.path} holds no prepared corpus (no meta.json) to compare with"
    fingerprint = data_fingerprint_of(run)
    if fingerprint is None:
        if run.corpus and run.corpus != data.corpus:
            return LEFT_OUT, (f"trained on another corpus ({run.corpus}; {data.path} holds "
                              f"{data.corpus})")
        return UNVERIFIED, ("they recorded no data fingerprint (trained before runs recorded "
                            f"one), so they may come from another version of {data.path}")
    if data.fingerprint is None:
        return UNVERIFIED, f"{data.path}/meta.json records no checksums to compare with"
    if fingerprint != data.fingerprint:
        return LEFT_OUT, (f"trained on another version of {data.path} (fingerprint "
                          f"{fingerprint[:SHORT]}, current {data.fingerprint[:SHORT]})")
    return None


def _grid_verdict(run: Run, scope: Scope, sweep: bool) -> str | None:
    """Why a run is outside the requested grid; None when it is inside."""
    if scope.seeds is not None and run.seed is not None and run.seed not in scope.seeds:
        return f"outside the requested grid (seeds {', '.join(map(str, scope.seeds))})"
    tau = tau_of(run)
    if sweep and scope.taus is not None and not (
            tau is not None and any(math.isclose(tau, t, abs_tol=1e-12) for t in scope.taus)):
        shown = ", ".join(f"{t:g}" for t in scope.taus) or "none"
        return f"outside the requested tau sweep (taus {shown})"
    if not sweep and scope.transforms is not None and run.transform not in scope.transforms:
        return f"outside the requested grid (transforms {', '.join(scope.transforms)})"
    return None


def screen(runs: Iterable[Run], where: str, scope: Scope = Scope(),
           sweep: bool = False) -> Screened:
    """The runs of ``where`` (``runs``, ``tau-sweep`` or a given folder) that a report of
    ``scope`` uses; ``sweep`` checks taus instead of transforms. Each note names the runs
    (``where/NAME``) of one reason: ``Left out ...: runs/softmax -- trained on another
    version of data/toy (fingerprint ..., current ...).``"""
    folders: dict[str, _Data] = {}
    groups: dict[tuple[str, str], list[str]] = {}
    kept, left_out = [], []
    for run in runs:
        path = str(scope.data) if scope.data is not None else run.config.data.path
        data = None if path is None else folders.setdefault(path, _current(path))
        verdict = _data_verdict(run, data)
        if verdict is None or verdict[0] != LEFT_OUT:
            outside = _grid_verdict(run, scope, sweep)
            verdict = (LEFT_OUT, outside) if outside else verdict
        (left_out if verdict is not None and verdict[0] == LEFT_OUT else kept).append(run)
        if verdict is not None:
            groups.setdefault(verdict, []).append(f"{where}/{run.name}")
    notes = [note(kind, names, why) for (kind, why), names in groups.items()]
    if len({attention_of(run) for run in kept}) > 1:  # labelled by output transform alone
        names = [f"{where}/{run.name} ({attention_of(run) or 'softmax'} attention)"
                 for run in kept]
        notes.append(note("Mixed attention", names, "these runs differ in their attention, "
                          "not only in their output transform, which alone labels them in "
                          "the tables"))
    return Screened(kept, notes, left_out)


def note(kind: str, names: list[str], why: str) -> str:
    """One line of the report and the console about ``names``."""
    where = " of every table and figure made from training runs" if kind == LEFT_OUT else ""
    return f"{kind}{where}: {', '.join(names)} -- {why}."


def _measured_from(frame, run: Run) -> bool:
    """Whether ``frame`` has a row of ``run``'s transform and seed (an unknown seed matches)."""
    rows = frame[frame["transform"] == run.transform]
    if run.seed is None:
        return len(rows) > 0
    return bool((rows["seed"].isna() | (rows["seed"] == run.seed)).any())


def still_measured(folder: str | Path, left_out: Iterable[Run]) -> str | None:
    """One line naming the measured CSVs of ``folder`` that still hold rows of the transform
    and seed of a run left out (measured from its checkpoint by ``arelu reproduce``, which a
    report does not redo); None when there are none."""
    left_out, found = list(left_out), []
    for name, columns in COLUMNS.items():
        if name in FROM_RUNS or not {"transform", "seed"} <= set(columns):
            continue
        frame = read_csv(folder, name)
        hits = [] if frame is None else [r.name for r in left_out if _measured_from(frame, r)]
        if hits:
            found.append(f"{name} ({', '.join(hits)})")
    if not found:
        return None
    return (f"Still measured from runs left out: {'; '.join(found)} -- `arelu report` does "
            "not re-measure these: retrain those runs (or move them away) and run "
            "`arelu reproduce` again.")
