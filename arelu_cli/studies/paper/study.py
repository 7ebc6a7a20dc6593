"""The paper's grid (``arelu reproduce RECIPE``, ``[study] kind = "paper"``): every table and
figure of the paper for one recipe, resumable.

prepare -> tau (Table 3) -> train each transform (Table 1's models, the training-dynamics,
tau/||z|| and training-time figures) -> the tau sweep (Fig. tau) -> translate the test set
with beam search -> score (Table 1) -> empty-check (Table 2) -> sparsity (Figs. sparsity)
-> self-normalization (Fig. self_norm) -> inference time (Fig. infTime) -> translation
examples and blind human-evaluation sheets; then the report: every other CSV
(:mod:`arelu_cli.studies.paper.build`), the PNGs and ``REPORT.md``
(:mod:`arelu_cli.studies.paper.reproduction_report`).

Every step writes its outputs atomically and is skipped when they are already there and no
older than what they were computed from (a retrained model redoes its translations and
analyses), and a training run that was killed resumes from its ``last.pt``, so running the
same command again after an interruption continues where it stopped. A run counts as
finished only with its checkpoint, so a fresh clone of committed results trains again. A run
trained (or half trained) on another version of the prepared corpus -- its recorded data
fingerprint is not the folder's now -- is moved to ``stale/`` and trained again, so no table
mixes data versions (:func:`stale_data`).

Seeds (``--seeds 1,2,3`` or ``[reproduce] seeds``; default the ``[train] seed`` alone):
every run -- each transform and each tau of the sweep -- is trained once per seed, and
translated, scored and analysed per (transform, seed); the tables and figures report the
mean, standard deviation and per-seed values, and Table 1 tests each transform against
softmax per seed and on the seeds' outputs concatenated, resampled by test sentence
(:mod:`arelu_cli.analysis.significance`). The translation examples and the human-evaluation
sheets use the first seed's translations.

The layout of ``--out`` is the one :mod:`arelu_cli.studies.paper.build` reads: CSVs at the top,
``runs/TRANSFORM/``, ``tau-sweep/tau-T/``, ``translations/``, ``analysis/`` (the raw CSVs of
the analysis commands), ``human_eval/`` and ``commands.txt``; with several seeds each run,
translation and analysis folder has one ``seed-S`` per seed
(:mod:`arelu_cli.studies.paper.layout`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from rich.console import Console

from arelu_cli.config import Config
from arelu_cli.data import toy
from arelu_cli.data.prepared import data_fingerprint, read_meta
from arelu_cli.registry import get_transform
from arelu_cli.studies.contract import Context, Study, Tables
from arelu_cli.model.device import pick_device
from arelu_cli.studies import side_by_side
from arelu_cli.studies.core import (Run, RunTrainer, Task, Trainer, done, run_config, to_train,
                                    train_if_needed)
from arelu_cli.studies.markdown import Section
from arelu_cli.studies.paper import steps as rs
from arelu_cli.studies.paper.build import recorded_commands, tables_of
from arelu_cli.studies.paper.columns import COLUMNS
from arelu_cli.studies.paper.grid import Grid
from arelu_cli.studies.translation import TEST
from arelu_cli.studies.paper.plots import FIGURES
from arelu_cli.studies.paper.provenance import SHORT
from arelu_cli.studies.paper.reproduction_report import (outside_the_grid, render_report,
                                                        sections)
from arelu_cli.train.data_version import recorded_fingerprint
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import check_ours, lines_start_with

STALE = "stale"
"""Where runs trained on another version of the data go: ``OUT/stale/data-FINGERPRINT/`` and
the run's path below ``OUT`` (``runs/softmax``), outside the ``runs/`` and ``tau-sweep/`` that
a report reads, so that they are kept without being reported."""


def stale_data(run: Path, data: str | Path) -> tuple[str, str] | None:
    """``(fingerprint run was trained on, data's now)`` when ``run`` was trained on another
    version of the prepared folder ``data``; None when it was trained on this one, or when
    that cannot be told (a run recording no fingerprint is kept as it is, and so is any run
    of a folder with no checksums)."""
    meta = read_meta(Path(data))
    recorded, current = recorded_fingerprint(run), meta and data_fingerprint(meta)
    if recorded is None or current is None or recorded == current:
        return None
    return recorded, current


def move_aside(run: Path, out: Path, fingerprint: str) -> Path:
    """Rename ``run`` (a folder under ``out``) into ``out/stale/data-FP/`` (``data-FP-2``
    and so on when that version was moved aside before); returns where it went."""
    below, tag, n = run.relative_to(out), f"data-{fingerprint[:SHORT]}", 1
    target = out / STALE / tag / below
    while target.exists():
        n += 1
        target = out / STALE / f"{tag}-{n}" / below
    target.parent.mkdir(parents=True, exist_ok=True)
    run.rename(target)
    return target


def check(config: Config) -> None:
    """The grid's transform names and seeds, before any work."""
    for name in config.reproduce.transforms:
        get_transform(name)  # an unknown name fails here, before any work
    side_by_side.check_jobs(config.reproduce.jobs)
    seeds = config.reproduce.seeds
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UserError(f"seeds must be distinct integers >= 0 (e.g. --set "
                        f"reproduce.seeds=[1,2,3]), got {list(seeds)}")


def _set_aside_stale(run: Run, grid: Grid, console: Console) -> None:
    """A run trained on another version of the data never counts as done, finished or not:
    it is moved aside (one line says where and why) and trained from the start, so what is
    computed from it is redone too."""
    data = run.config.data.path
    stale = stale_data(run.folder, data)
    if stale is not None:
        old, now = stale
        moved = move_aside(run.folder, grid.out, old)
        console.print(f"{run.folder} was trained on another version of {data} (data "
                      f"fingerprint {old[:SHORT]}, now {now[:SHORT]}): moved to {moved}, "
                      "training it again", markup=False, soft_wrap=True)


def _train_step(label: str, run: Run, grid: Grid, train: Trainer, console: Console) -> Task:
    """Train (or resume, or continue) ``run`` (:func:`arelu_cli.studies.core.train_if_needed`),
    a stale one from the start (:func:`_set_aside_stale`)."""
    data = run.config.data.path

    def go() -> None:
        _set_aside_stale(run, grid, console)
        train_if_needed(run, train, console)
    return Task(label, go, ready=lambda: stale_data(run.folder, data) is None and done(run))


def _side_by_side(runs: list[tuple[str, Run]], trainings: list[Task], grid: Grid,
                  context: Context, numbers: str) -> bool:
    """Train the runs whose training task is not done side by side when ``[reproduce] jobs``
    asks for it on this machine (:mod:`arelu_cli.studies.side_by_side`); False when it does
    not (the tasks then train them one at a time). ``numbers``: the tasks' numbers in the
    grid's count."""
    pending = [pair for pair, task in zip(runs, trainings) if not task.done()]
    config = grid.config
    clock = any(run.config.train.max_minutes for _, run in pending)
    jobs, threads = side_by_side.plan(config.reproduce.jobs, len(pending),
                                      pick_device(config.train.device).type,
                                      config.train.threads, clock=clock)
    if jobs == 1 or not isinstance(context.train, RunTrainer):
        return False
    console, items = context.console, []
    for label, run in pending:
        _set_aside_stale(run, grid, console)
        run = Run(run.name, dataclasses.replace(run.config, train=dataclasses.replace(
            run.config.train, threads=threads)), run.folder)
        items.append((label, run, bool(to_train(run))))
    names = ", ".join(run.name for _, run, _ in items)
    console.rule(f"[{numbers}] train {names}: {jobs} at a time, {threads} "
                 f"thread{'s' if threads != 1 else ''} each")
    started = time.perf_counter()
    side_by_side.train(items, context.train, jobs, console)
    console.print(f"training side by side: {time.perf_counter() - started:.0f} s")
    return True


def grid_runs(grid: Grid) -> list[tuple[str, Run]]:
    """Per seed, one run per transform, then the tau-sweep runs (1.5-ReLU with a fixed tau),
    each with its step's label: a first seed's runs are complete before the next starts."""
    config, found = grid.config, []
    r = config.reproduce
    minutes = r.train_minutes or config.train.max_minutes
    max_steps = r.train_steps or config.train.max_steps
    valid_every = r.valid_every or config.train.valid_every
    every = max(1, r.sweep_steps // 4)
    for seed in grid.seeds:
        found += [(f"train {grid.label(name, seed)}", Run(name, run_config(
                      config, transform=name, seed=seed, max_minutes=minutes,
                      max_steps=max_steps, valid_every=valid_every,
                      save_every=min(config.train.save_every, valid_every)),
                      grid.run_folder(name, seed)))
                  for name in r.transforms]
        found += [(f"tau sweep {grid.label(f'{tau:g}', seed)}", Run(f"tau-{tau:g}", run_config(
                      config, transform="1.5-relu", tau=float(tau), seed=seed,
                      max_steps=r.sweep_steps, max_minutes=r.sweep_minutes, valid_every=every,
                      save_every=every, average_decay=0.0), grid.sweep_folder(tau, seed)))
                  for tau in r.tau_sweep]
    return found


def _prepared(config: Config) -> bool:
    """``[data] path`` holds a prepared folder of the recipe's corpus (rebuild it with
    ``arelu prepare --force``, or pass ``--source`` to check it against the source files)."""
    found = read_meta(Path(config.data.path))
    if found is None or found["corpus"] != config.reproduce.corpus:
        return False
    # A toy folder of an earlier generator version (e.g. the older 6,000-concept default) is
    # regenerated by the prepare step; one prepared with this version's options is the user's.
    made = (found.get("toy") or {}).get("generator")
    return config.reproduce.corpus != "toy" or made == toy.GENERATOR


def write_commands(grid: Grid, context: Context) -> None:
    """``commands.txt``: the reproduce command and the single commands each step amounts to."""
    config, out, recipe = grid.config, grid.out, context.recipe
    lines = [context.command or f"arelu reproduce {recipe} --out {out}"]
    source = f" --source {context.source}" if context.source else ""
    lines.append(f"arelu prepare {config.reproduce.corpus} --out {config.data.path}{source}")
    for seed in grid.seeds:
        seeded = f" --seed {seed}" if len(grid.seeds) > 1 else ""
        for name in config.reproduce.transforms:
            lines.append(f"arelu train --recipe {recipe} --transform {name}{seeded} "
                         f"--out {grid.run_folder(name, seed)}")
            lines.append(f"arelu translate --checkpoint {grid.run_folder(name, seed)} "
                         f"--split {TEST} --beam {config.decode.beam} "
                         f"--out {grid.translation(name, seed)}")
    lines.append(f"arelu report {out}")
    check_ours(out / "commands.txt", lines_start_with("arelu "))
    atomic_write_text(out / "commands.txt", "\n".join(lines) + "\n")


def stages(config: Config, out: Path, context: Context) -> None:
    """Run (or continue) the grid of ``config`` into ``out`` (module docstring)."""
    console = context.console
    grid = Grid(config, out, config.train.device, Path(context.recipe).stem)
    write_commands(grid, context)
    tasks = [Task("prepare", lambda: rs.prepare_data(config, context.source, console),
                  ready=lambda: context.source is None and _prepared(config)),
             Task("tau (Table 3)", lambda: rs.tau_table(grid),
                  ready=lambda: rs.tau_table_done(grid))]
    runs = grid_runs(grid)
    trainings = [_train_step(label, run, grid, context.train, console) for label, run in runs]
    for task in trainings:  # a run of other settings is refused before any work
        task.done()
    analyses = rs.analysis_steps(grid, [run for _, run in runs
                                        if run.name in config.reproduce.transforms])
    began, total = time.perf_counter(), len(tasks) + len(trainings) + len(analyses)
    _make(tasks, 1, total, console)
    numbers = f"{len(tasks) + 1}-{len(tasks) + len(trainings)}/{total}"
    if not _side_by_side(runs, trainings, grid, context, numbers):
        _make(trainings, len(tasks) + 1, total, console)
    _make(analyses, total - len(analyses) + 1, total, console)
    console.print(f"grid finished in {(time.perf_counter() - began) / 60:.1f} min")


def _make(tasks: list[Task], first: int, total: int, console: Console) -> None:
    """Make each task not done, numbered from ``first`` of ``total``."""
    for i, task in enumerate(tasks, first):
        if task.done():
            console.print(f"[{i}/{total}] {task.name}: done already, skipped")
            continue
        console.rule(f"[{i}/{total}] {task.name}")
        started = time.perf_counter()
        task.make()
        console.print(f"{task.name}: {time.perf_counter() - started:.0f} s")


def tables(config: Config, out: Path) -> Tables:
    return tables_of(config, out)


def claims(config: Config, out: Path, found: Tables) -> list[Section]:
    return sections(out)


def document(config: Config, out: Path, found: Tables, claims: list[Section]) -> str:
    commands = recorded_commands(out)
    return render_report(out, commands, claims, notes=found.notes,
                         left_out=outside_the_grid(config, commands))


STUDY = Study("paper", check, stages, tables, claims, document,
              {name: columns[0] for name, columns in COLUMNS.items()},
              tuple(Path(name).with_suffix(".png").name for name in FIGURES),
              {"commands.txt": lines_start_with("arelu ")})
