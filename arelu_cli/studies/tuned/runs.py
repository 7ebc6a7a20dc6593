"""The tuned study's runs and what its tables need of them: the transforms it compares, the
runs of the plan (:class:`~arelu_cli.studies.core.Run`), the quiet step times and the steps
they give at equal time, and every test translation a table needs (:class:`Evaluation`).
Layout: ``runs/TRANSFORM/CONFIG[_seed-S]/`` (:mod:`arelu_cli.studies.sweep`),
``convergence/TRANSFORM/CONFIG/``, ``bench_train.csv``. Read by the study's stages
(:mod:`.study`) and by its tables (:mod:`.report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.studies.core import Run
from arelu_cli.studies.sweep import Point, axes, borrowed, grid_points, study_run
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_table

BENCH = "bench_train.csv"
"""The quiet step times of the compared transforms (the study's bench stage)."""
MEASURE_AGAIN = "delete it and run the study again on an idle machine"


class Evaluation(NamedTuple):
    """One test translation a table needs: which comparison, of which run, at which step."""

    comparison: str
    run: Run
    step: int


def compared(config: Config) -> list[str]:
    """Every transform the study trains at every seed: the tuned ones, then the borrowers."""
    return list(dict.fromkeys([*config.sweep.transforms, *borrowed(config)]))


def configurations(config: Config, selected: dict[str, Point]) -> dict[str, Point]:
    """``{transform: point}`` of every compared transform: its selected one, or (``[study]
    borrow``) the one selected for the transform it borrows from."""
    tuned = {name: name for name in config.sweep.transforms} | borrowed(config)
    return {name: selected[tuned[name]] for name in compared(config)}


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


def seed_runs(config: Config, out: Path, selected: dict[str, Point]) -> list[Run]:
    """Stage 3's runs: every compared transform at its configuration, every seed."""
    return [study_run(config, out, name, point, seed)
            for name, point in configurations(config, selected).items()
            for seed in config.study.seeds]


def convergence_runs(config: Config, out: Path, selected: dict[str, Point]) -> list[Run]:
    steps = config.study.convergence_steps
    return [study_run(config, out, name, point, config.train.seed, steps,
                      out / "convergence" / name / point.name)
            for name, point in selected.items()] if steps else []


def equal_time_budget_ms(config: Config, ms_per_step: dict[str, float]) -> float:
    """The equal-time budget: ``[study] equal_time_minutes`` of quiet training, or (0) the
    time the fastest transform needs for ``[train] max_steps`` steps."""
    minutes = config.study.equal_time_minutes
    return minutes * 60e3 if minutes else config.train.max_steps * min(ms_per_step.values())


def equal_time_steps(config: Config, ms_per_step: dict[str, float]) -> dict[str, int]:
    """The step each transform reaches in the equal-time budget, rounded down to a kept
    snapshot: ``[study] equal_time_minutes`` of quiet training, or (0) the time the fastest
    transform needs for ``[train] max_steps`` steps."""
    t, budget_ms = config.train, equal_time_budget_ms(config, ms_per_step)
    return {name: min(t.max_steps, max(t.keep_every,
                                       int(budget_ms / ms // t.keep_every) * t.keep_every))
            for name, ms in ms_per_step.items()}


def evaluations(config: Config, seeds: list[Run], longer: list[Run],
                at_equal_time: dict[str, int]) -> list[Evaluation]:
    """Every test translation the tables need; a convergence run is translated at its last
    step and at ``[train] max_steps`` (``convergence_start``), so that whether its gap
    closes is read off one training (a run that trained from step 0 again is not bitwise
    its seed's first run). Without step times (``at_equal_time`` empty) there is no
    equal-time comparison."""
    todo = [Evaluation("equal_steps", run, run.steps) for run in seeds]
    todo += [Evaluation("equal_time", run, at_equal_time[run.name]) for run in seeds
             if run.name in at_equal_time]
    todo += [Evaluation("convergence_start", run, config.train.max_steps) for run in longer]
    todo += [Evaluation("convergence", run, run.steps) for run in longer]
    return todo


def step_times(config: Config, out: Path, selected: dict[str, Point]) -> dict[str, float]:
    """The quiet step times (ms) of ``bench_train.csv`` for the compared transforms (none
    while the file is not there), each timed with the label smoothing of its configuration
    in ``selected``; a file without one of them, or timed with other label smoothing, is
    refused."""
    path, names = out / BENCH, compared(config)
    if not path.is_file():
        return {}
    frame = read_table(path, MEASURE_AGAIN)
    frame = frame[~frame["fused_output"].astype(bool)]
    times = dict(zip(frame["transform"], frame["ms_per_step"]))
    missing = [n for n in names if n not in times]
    if missing:
        raise UserError(f"{path} has no step time of {', '.join(missing)}; {MEASURE_AGAIN}")
    _check_smoothing(path, frame, {name: p.label_smoothing
                                   for name, p in configurations(config, selected).items()})
    return {name: float(times[name]) for name in names}


def _check_smoothing(path: Path, frame: pd.DataFrame, smoothing: dict[str, float]) -> None:
    """The step times of ``path`` (rows ``frame``) were taken with each transform's label
    smoothing: refuse other values, and a file that does not say."""
    if "label_smoothing" not in frame.columns:
        raise UserError(f"{path} does not record the label smoothing its step times were "
                        f"taken with; {MEASURE_AGAIN}")
    recorded = dict(zip(frame["transform"], frame["label_smoothing"].fillna(0.0)))
    wrong = [f"{name} with {float(recorded[name]):g}, not {eps:g}"
             for name, eps in smoothing.items() if abs(float(recorded[name]) - eps) > 1e-12]
    if wrong:
        raise UserError(f"{path} timed {'; '.join(wrong)} (the label smoothing of the selected "
                        f"configuration); {MEASURE_AGAIN}")
