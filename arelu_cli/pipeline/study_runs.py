"""Where ``arelu study`` keeps its runs: the folder layout
(``runs/TRANSFORM/CONFIG[_seed-S]/``, ``convergence/TRANSFORM/CONFIG/``), the sweep's axes,
the runs of the plan (:class:`~arelu_cli.pipeline.core.Run`) and the dev BLEU of every
sweep run so far. Read by the study's stages (:mod:`arelu_cli.pipeline.study`) and by its
tables (:mod:`arelu_cli.pipeline.study_report`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

from arelu_cli.config import Config
from arelu_cli.pipeline.core import Run, run_config
from arelu_cli.train.run_dir import best_score, diverged, trained
from arelu_cli.pipeline.reuse import LONGER, reuse
from arelu_cli.pipeline.scoring import first_summary, summary
from arelu_cli.pipeline.sweep import Point, grid_points, visited

BENCH = "bench_train.csv"
"""The quiet step times of the compared transforms (the study's bench stage)."""


class Evaluation(NamedTuple):
    """One test translation a table needs: which comparison, of which run, at which step."""

    comparison: str
    run: Run
    step: int


def point_of(run: Run) -> Point:
    """The sweep's configuration a run trains with."""
    t = run.config.train
    return Point(t.lr, t.warmup, t.label_smoothing)


def sweep_summary(folder: Path) -> dict:
    """The summary the sweep selects on: the first training's."""
    return first_summary(folder) or summary(folder)


def axes(config: Config) -> dict[str, tuple]:
    """The sweep's axes, an empty one standing for the ``[train]`` value."""
    s, t = config.sweep, config.train
    return {"lr": s.lr or (t.lr,), "warmup": s.warmup or (t.warmup,),
            "label_smoothing": s.label_smoothing or (t.label_smoothing,)}


def run_folder(out: Path, transform: str, point: Point, seed: int, base_seed: int) -> Path:
    suffix = "" if seed == base_seed else f"_seed-{seed}"
    return out / "runs" / transform / f"{point.name}{suffix}"


def study_run(config: Config, out: Path, transform: str, point: Point, seed: int,
              max_steps: int | None = None, folder: Path | None = None) -> Run:
    """One run of the study: the recipe with its transform, configuration, seed and step
    budget, never against the clock; in ``runs/`` unless ``folder`` says otherwise."""
    cfg = run_config(config, transform=transform, lr=point.lr, warmup=point.warmup,
                     label_smoothing=point.label_smoothing, seed=seed, max_minutes=0.0,
                     max_steps=max_steps or config.train.max_steps)
    return Run(transform, cfg, folder or run_folder(out, transform, point, seed,
                                                    config.train.seed))


def planned_runs(config: Config, out: Path) -> list[Run]:
    """Every run the study may use, whatever the sweep selects: each sweep point of each
    compared transform at each seed, and each tuned transform's convergence run at each
    point."""
    base, points = config.train.seed, grid_points(axes(config))
    found = [study_run(config, out, name, point, seed)
             for name in compared(config) for point in points
             for seed in dict.fromkeys([base, *config.study.seeds])]
    steps = config.study.convergence_steps
    return found + [study_run(config, out, name, point, base, steps,
                              out / "convergence" / name / point.name)
                    for name in config.sweep.transforms for point in points if steps]


def scores(config: Config, out: Path, name: str) -> dict[Point, float]:
    """Dev BLEU (best validation; a language model's: minus its best dev loss) of every
    finished sweep run of ``name`` that the sweep's order asks for, given the scores before
    it (a diverged run: minus infinity); a run's first training's (``FIRST``), so
    that training a selected run again can never change the selection. A run trained with
    other settings than the sweep's now is refused; one trained for fewer steps is not
    scored yet (the sweep continues it)."""
    grid, base, found = axes(config), config.train.seed, {}
    while True:
        new = {p: _score(run.folder) for p in visited(grid, config.sweep.order, found)
               if p not in found and _ended((run := study_run(config, out, name, p, base)).folder)
               and reuse(run.folder, run.config) != LONGER}
        if not new:
            return found
        found |= new


def _ended(folder: Path) -> bool:
    return trained(folder) or diverged(folder)


def _score(folder: Path) -> float:
    """A sweep run's dev score; minus infinity for a run that diverged (it loses)."""
    return best_score(sweep_summary(folder)) if trained(folder) else -math.inf


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
