"""Where ``arelu study`` keeps its runs and what a finished run says: the folder layout
(``runs/TRANSFORM/CONFIG[_seed-S]/``, ``translations/``), the sweep's axes and the dev BLEU
of every sweep run so far. Read by the study's stages (:mod:`arelu_cli.pipeline.study`) and
by its tables (:mod:`arelu_cli.pipeline.study_report`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.data.textio import read_text_lines
from arelu_cli.errors import UserError
from arelu_cli.nmt.train_log import read_log
from arelu_cli.results import read_json
from arelu_cli.nmt.train import SUMMARY
from arelu_cli.pipeline.reuse import LONGER, reuse
from arelu_cli.pipeline.sweep import Point, grid_points, visited

TEST = "test"
BENCH = "bench_train.csv"
"""The quiet step times of the compared transforms (the study's bench stage)."""
FIRST = "first"
"""Where a finished run that trains again (its checkpoints gone before its test translations
were made, e.g. on a new machine) keeps its first training's ``config.json``, ``log.csv`` and
``summary.json``: the dev BLEU its sweep selected on, which a second training of the same
configuration (not bit-identical under the thread governor) must not change."""
RECORD = ("config.json", "log.csv", SUMMARY)


@dataclass(frozen=True)
class Run:
    """One training run of the study and what it is."""

    transform: str
    point: Point
    seed: int
    folder: Path
    steps: int


def trained(folder: Path) -> bool:
    """The run wrote its summary: its dev BLEU (what the sweep selects on) is known."""
    return (folder / SUMMARY).is_file()


def summary(folder: Path) -> dict:
    return read_json(folder / SUMMARY, again(folder))


def first_summary(folder: Path) -> dict | None:
    """The summary of the run's first training, kept in ``FIRST/`` when it trained again;
    None when it trained once."""
    path = folder / FIRST / SUMMARY
    return read_json(path, again(folder)) if path.is_file() else None


def again(folder: Path) -> str:
    """What to do when a record of the run in ``folder`` is unusable."""
    return f"restore it (e.g. from version control), or delete {folder} to train the run again"


def translation_lines(path: Path, references: int) -> list[str]:
    """The lines of the test translation ``path``, refused in one line naming it when it
    has another number of lines than the test set has references (a file cut short)."""
    lines = read_text_lines(path)
    if len(lines) != references:
        raise UserError(f"{path} has {len(lines)} lines but the test set has {references} "
                        "references (cut short?); delete it, and its .json, to translate "
                        "again")
    return lines


def dev_log(folder: Path) -> pd.DataFrame:
    """The run's ``log.csv`` up to its last validation, refused in one line when it is cut
    short (no dev BLEU at the step the run's summary says it finished at)."""
    path, steps = folder / "log.csv", summary(folder).get("steps")
    log = read_log(path, again(folder))
    bleu = log.dropna(subset=["val_bleu"]) if "val_bleu" in log else log.iloc[0:0]
    if steps is not None and (bleu.empty or int(bleu["step"].iloc[-1]) != int(steps)):
        last = "no validation" if bleu.empty else f"its last validation at step {int(bleu['step'].iloc[-1])}"
        raise UserError(f"{path} has {last}, but the run finished at step {steps} (cut "
                        f"short?); {again(folder)}")
    return log


def sweep_summary(folder: Path) -> dict:
    """The summary the sweep selects on: the first training's."""
    return first_summary(folder) or summary(folder)


def scored(folder: Path) -> bool:
    """The sweep knows the run's dev BLEU: it finished once (possibly training again now)."""
    return trained(folder) or (folder / FIRST / SUMMARY).is_file()


def keep_first(folder: Path) -> Path:
    """Before the finished run in ``folder`` trains again, copy its record (``RECORD``) to
    ``FIRST/`` (all files or none; kept once: a later training never replaces it)."""
    target = folder / FIRST
    if target.is_dir():
        return target
    tmp = folder / f".{FIRST}.copying"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in RECORD:
        if (folder / name).is_file():
            shutil.copy2(folder / name, tmp / name)
    os.replace(tmp, target)
    return target


def axes(config: Config) -> dict[str, tuple]:
    """The sweep's axes, an empty one standing for the ``[train]`` value."""
    s, t = config.sweep, config.train
    return {"lr": s.lr or (t.lr,), "warmup": s.warmup or (t.warmup,),
            "label_smoothing": s.label_smoothing or (t.label_smoothing,)}


def run_folder(out: Path, transform: str, point: Point, seed: int, base_seed: int) -> Path:
    suffix = "" if seed == base_seed else f"_seed-{seed}"
    return out / "runs" / transform / f"{point.name}{suffix}"


def run_config(config: Config, transform: str, point: Point, seed: int,
               max_steps: int | None = None) -> Config:
    """The recipe with one run's transform, configuration, seed and step budget."""
    train_cfg = dataclasses.replace(
        config.train, transform=transform, lr=point.lr, warmup=point.warmup,
        label_smoothing=point.label_smoothing, seed=seed, max_minutes=0.0,
        max_steps=max_steps or config.train.max_steps)
    return dataclasses.replace(config, train=train_cfg)


def planned_runs(config: Config, out: Path) -> list[tuple[Path, Config]]:
    """Every run folder the study may use, whatever the sweep selects, with the configuration
    it trains there: each sweep point of each compared transform at each seed, and each
    tuned transform's convergence run at each point."""
    base, points = config.train.seed, grid_points(axes(config))
    found = [(run_folder(out, name, point, seed, base), run_config(config, name, point, seed))
             for name in compared(config) for point in points
             for seed in dict.fromkeys([base, *config.study.seeds])]
    steps = config.study.convergence_steps
    return found + [(out / "convergence" / name / point.name,
                     run_config(config, name, point, base, steps))
                    for name in config.sweep.transforms for point in points if steps]


def check_runs(config: Config, out: Path) -> None:
    """Refuse, before any training, a run folder of the study trained with other settings
    than the study would train it with now (:func:`arelu_cli.pipeline.reuse.reuse`)."""
    for folder, planned in planned_runs(config, out):
        reuse(folder, planned)


def translation_path(run: Path, step: int, beam: int) -> Path:
    return run / "translations" / f"{TEST}.step-{step}.beam-{beam}.txt"


def scores(config: Config, out: Path, name: str) -> dict[Point, float]:
    """Dev BLEU (best validation) of every finished sweep run of ``name`` that the sweep's
    order asks for, given the scores before it; a run's first training's (``FIRST``), so
    that training a selected run again can never change the selection. A run trained with
    other settings than the sweep's now is refused; one trained for fewer steps is not
    scored yet (the sweep continues it)."""
    grid, base, found = axes(config), config.train.seed, {}
    while True:
        new = {p: sweep_summary(folder)["best_bleu"]
               for p in visited(grid, config.sweep.order, found)
               if p not in found and scored(folder := run_folder(out, name, p, base, base))
               and reuse(folder, run_config(config, name, p, base)) != LONGER}
        if not new:
            return found
        found |= new


def borrowed(config: Config) -> dict[str, str]:
    """``{NAME: TUNED}`` from ``[study] borrow``."""
    return dict(tuple(s.strip() for s in item.split("=", 1)) for item in config.study.borrow)


def compared(config: Config) -> list[str]:
    """Every transform the study trains at every seed: the tuned ones, then the borrowers."""
    return list(dict.fromkeys([*config.sweep.transforms, *borrowed(config)]))


def equal_time_budget_ms(config: Config, ms_per_step: dict[str, float]) -> float:
    """The equal-time budget: ``[study] equal_time_minutes`` of quiet training, or (0) the
    time the fastest transform needs for ``[train] max_steps`` steps."""
    minutes = config.study.equal_time_minutes
    return minutes * 60e3 if minutes else config.train.max_steps * min(ms_per_step.values())
