"""``arelu reproduce RECIPE``: the paper's whole grid for one recipe, resumable.

prepare -> tau (Table 3) -> train each transform (Table 1's models, the training-dynamics,
tau/||z|| and training-time figures) -> the tau sweep (Fig. tau) -> translate the test set
with beam search -> score (Table 1) -> empty-check (Table 2) -> sparsity (Figs. sparsity)
-> self-normalization (Fig. self_norm) -> inference time (Fig. infTime) -> translation
examples and blind human-evaluation sheets -> every other CSV, the PNGs and ``REPORT.md``
(:mod:`arelu_cli.report.build`).

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

The layout of ``--out`` is the one :mod:`arelu_cli.report.build` reads: CSVs at the top,
``runs/TRANSFORM/``, ``tau-sweep/tau-T/``, ``translations/``, ``analysis/`` (the raw CSVs of
the analysis commands), ``human_eval/`` and ``commands.txt``; with several seeds each run,
translation and analysis folder has one ``seed-S`` per seed
(:mod:`arelu_cli.report.layout`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from arelu_cli.nmt import checkpoint
from arelu_cli.data import toy
from arelu_cli.data.prepared import data_fingerprint, read_meta
from arelu_cli.config import Config, ReproduceConfig, TrainConfig, load_config
from arelu_cli.errors import UserError
from arelu_cli.options import parse_list
from arelu_cli.ownership import check_ours, json_with_keys, lines_start_with
from arelu_cli.registry import get_transform
from arelu_cli.report.provenance import SHORT
from arelu_cli.atomic import atomic_write_text
from arelu_cli.nmt.train import SUMMARY, train
from arelu_cli.nmt.data_version import recorded_fingerprint
from arelu_cli.pipeline import reproduce_steps as rs
from arelu_cli.pipeline.grid import TEST, Grid, Step, results_folder
from arelu_cli.pipeline.reuse import SAME, reuse

@dataclass(frozen=True)
class Request:
    """The options of ``arelu reproduce``; ``None`` keeps the recipe's ``[reproduce]`` value."""

    recipe: Path
    out: Path
    source: Path | None = None
    transforms: tuple[str, ...] | None = None
    train_minutes: float | None = None
    train_steps: int | None = None
    """With ``train_minutes`` and no ``train_steps``, the minutes alone bound each run."""
    tau_sweep: tuple[float, ...] | None = None
    device: str = "auto"
    gpu_watts: float | None = None
    seeds: tuple[int, ...] | None = None
    command: str = ""
    """The command line that asked for this (recorded in ``commands.txt``)."""


def finished(run: Path) -> bool:
    """A training run is finished when it wrote ``summary.json`` and its checkpoint is there: a
    clone of committed results has the summary without the (git-ignored) checkpoints, so the
    grid trains again rather than reporting on models it does not have."""
    return (run / SUMMARY).is_file() and (run / checkpoint.LAST).is_file()


STALE = "stale"
"""Where runs trained on another version of the data go: ``OUT/stale/data-FINGERPRINT/`` and
the run's path below ``OUT`` (``runs/softmax``), outside the ``runs/`` and ``tau-sweep/`` that
a report reads, so that they are kept without being reported."""


def current_fingerprint(data: str | Path) -> str | None:
    """The fingerprint of the prepared folder ``data`` as it is now (None: no checksums)."""
    meta = read_meta(Path(data))
    return None if meta is None else data_fingerprint(meta)


def stale_data(run: Path, data: str | Path) -> str | None:
    """The fingerprint of the other version of ``data`` that ``run`` was trained on; None
    when it was trained on this one, or when that cannot be told (a run recording no
    fingerprint is kept as it is)."""
    recorded, current = recorded_fingerprint(run), current_fingerprint(data)
    if recorded is None or current is None or recorded == current:
        return None
    return recorded


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


def _train_steps(req: Request) -> int | None:
    """``--steps``; or, for ``--minutes`` alone, no step cap (the minutes decide)."""
    if req.train_steps is not None or req.train_minutes is None:
        return req.train_steps
    return TrainConfig.max_steps


def load_request_config(req: Request) -> Config:
    """The recipe with the request's overrides applied and checked (transform names too)."""
    overrides = {("train", "device"): None if req.device == "auto" else req.device,
                 ("reproduce", "transforms"): list(req.transforms) if req.transforms else None,
                 ("reproduce", "tau_sweep"): None if req.tau_sweep is None else list(req.tau_sweep),
                 ("reproduce", "train_minutes"): req.train_minutes,
                 ("reproduce", "train_steps"): _train_steps(req),
                 ("reproduce", "gpu_watts"): req.gpu_watts,
                 ("reproduce", "seeds"): None if req.seeds is None else list(req.seeds)}
    config = load_config(req.recipe, overrides)
    for name in config.reproduce.transforms:
        get_transform(name)  # an unknown name fails here, before any work
    check_seeds(config.reproduce.seeds)
    return config


PAPER_GRID = ReproduceConfig.transforms
"""Table 1's transforms (``--transforms paper``): softmax, sparsemax, 1.5-entmax, 1.5-entmax
with k = 100 and 1.5-ReLU."""


def parse_transforms(text: str | None) -> tuple[str, ...] | None:
    """``--transforms``: comma-separated registry names, or ``paper`` for :data:`PAPER_GRID`."""
    if text is None:
        return None
    names = parse_list(text, str, "--transforms", example="softmax,1.5-relu or paper")
    return tuple(n for name in names for n in (PAPER_GRID if name == "paper" else (name,)))


def parse_seeds(text: str | None) -> tuple[int, ...] | None:
    """``--seeds 1,2,3`` -> (1, 2, 3); None keeps the recipe's."""
    if text is None:
        return None
    seeds = tuple(parse_list(text, int, "--seeds", example="1,2,3"))
    check_seeds(seeds)
    return seeds


def check_seeds(seeds: tuple[int, ...]) -> None:
    """Seeds name folders (``seed-S``) and runs: each at most once, none negative."""
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UserError(f"seeds must be distinct integers >= 0 (e.g. --seeds 1,2,3), got "
                        f"{list(seeds)}")


def _run_config(config: Config, **train: object) -> Config:
    return dataclasses.replace(config, train=dataclasses.replace(config.train, **train))


def _train_step(name: str, config: Config, folder: Path, grid: Grid, console: Console) -> Step:
    """Train (or resume) the run in ``folder``. One trained on another version of the data
    never counts as done, finished or not: it is moved aside (one line says where and why)
    and trained from the start, so what is computed from it is redone too. One trained with
    other settings is refused, one trained for fewer steps continued
    (:func:`arelu_cli.pipeline.reuse.reuse`)."""
    data = config.data.path

    def run() -> None:
        old = stale_data(folder, data)
        if old is not None:
            now = current_fingerprint(data) or ""
            moved = move_aside(folder, grid.out, old)
            console.print(f"{folder} was trained on another version of {data} (data "
                          f"fingerprint {old[:SHORT]}, now {now[:SHORT]}): moved to {moved}, "
                          "training it again", markup=False, soft_wrap=True)
        train(config, folder, resume=(folder / checkpoint.LAST).is_file(), recipe=grid.recipe,
              console=console)
    def done() -> bool:  # a run without last.pt trains from the start, whatever it was
        if stale_data(folder, data) is not None or not (folder / checkpoint.LAST).is_file():
            return False
        return reuse(folder, config) == SAME and finished(folder)
    return Step(name, done, run)


def training_steps(grid: Grid, console: Console) -> list[Step]:
    """Per seed, one training run per transform, then the tau-sweep runs (1.5-ReLU with a
    fixed tau): a first seed's runs are complete before the next seed starts."""
    config, steps = grid.config, []
    r = config.reproduce
    minutes = r.train_minutes or config.train.max_minutes
    max_steps = r.train_steps or config.train.max_steps
    valid_every = r.valid_every or config.train.valid_every
    every = max(1, r.sweep_steps // 4)
    for seed in grid.seeds:
        for name in r.transforms:
            folder = grid.run(name, seed)
            run = _run_config(config, transform=name, seed=seed, max_minutes=minutes,
                              max_steps=max_steps, valid_every=valid_every,
                              save_every=min(config.train.save_every, valid_every))
            steps.append(_train_step(f"train {grid.label(name, seed)}", run, folder, grid,
                                     console))
        for tau in r.tau_sweep:
            folder = grid.sweep(tau, seed)
            run = _run_config(config, transform="1.5-relu", tau=float(tau), seed=seed,
                              max_steps=r.sweep_steps, max_minutes=r.sweep_minutes,
                              valid_every=every, save_every=every, average_decay=0.0)
            steps.append(_train_step(f"tau sweep {grid.label(f'{tau:g}', seed)}", run, folder,
                                     grid, console))
    return steps


def _prepared(config: Config) -> bool:
    """``[data] path`` holds a prepared folder of the recipe's corpus (rebuild it with
    ``arelu prepare --force``, or pass ``--source`` to check it against the source files)."""
    meta = Path(config.data.path) / "meta.json"
    if not meta.is_file():
        return False
    found = json.loads(meta.read_text(encoding="utf-8"))
    if found.get("corpus") != config.reproduce.corpus:
        return False
    # A toy folder of an earlier generator version (e.g. the older 6,000-concept default) is
    # regenerated by the prepare step; one prepared with this version's options is the user's.
    made = (found.get("toy") or {}).get("generator")
    return config.reproduce.corpus != "toy" or made == toy.GENERATOR


def write_commands(grid: Grid, req: Request) -> None:
    """``commands.txt``: the reproduce command and the single commands each step amounts to."""
    config, out = grid.config, grid.out
    lines = [req.command or f"arelu reproduce {req.recipe} --out {out}"]
    source = f" --source {req.source}" if req.source else ""
    lines.append(f"arelu prepare {config.reproduce.corpus} --out {config.data.path}{source}")
    for seed in grid.seeds:
        seeded = f" --seed {seed}" if len(grid.seeds) > 1 else ""
        for name in config.reproduce.transforms:
            lines.append(f"arelu train --recipe {req.recipe} --transform {name}{seeded} "
                         f"--out {grid.run(name, seed)}")
            lines.append(f"arelu translate --checkpoint {grid.run(name, seed)} --split {TEST} "
                         f"--beam {config.decode.beam} --out {grid.translation(name, seed)}")
    lines.append(f"arelu report {out}")
    check_ours(out / "commands.txt", lines_start_with("arelu "))
    atomic_write_text(out / "commands.txt", "\n".join(lines) + "\n")


def reproduce(req: Request, console: Console | None = None) -> Path:
    """Run (or continue) the grid of ``req.recipe`` into ``req.out``; returns REPORT.md."""
    console = console or Console()
    config = load_request_config(req)
    out = results_folder(Path(req.out))
    grid = Grid(config, out, req.device, Path(req.recipe).stem)
    check_ours(out / "reproduce.json", json_with_keys("recipe", "config"))  # before any work
    write_commands(grid, req)
    steps = [Step("prepare", lambda: req.source is None and _prepared(config),
                  lambda: rs.prepare_data(config, req.source, console)),
             Step("tau (Table 3)", lambda: rs.tau_table_done(grid), lambda: rs.tau_table(grid))]
    trainings = training_steps(grid, console)
    for step in trainings:  # a run of other settings is refused before any work
        step.done()
    steps += trainings + rs.analysis_steps(grid)
    began = time.perf_counter()
    for i, step in enumerate(steps, 1):
        if step.done():
            console.print(f"[{i}/{len(steps)}] {step.name}: done already, skipped")
            continue
        console.rule(f"[{i}/{len(steps)}] {step.name}")
        started = time.perf_counter()
        step.run()
        console.print(f"{step.name}: {time.perf_counter() - started:.0f} s")
    report = rs.write_report(out, gpu_watts=config.reproduce.gpu_watts or None, config=config)
    elapsed = time.perf_counter() - began
    atomic_write_text(out / "reproduce.json", json.dumps(
        {"recipe": str(req.recipe), "seconds_this_call": elapsed,
         "config": config.to_dict()}, indent=2) + "\n")
    console.print(f"grid finished in {elapsed / 60:.1f} min; report: {report}")
    return report

