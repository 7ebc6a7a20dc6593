"""``arelu study RECIPE``: the comparison a reviewer accepts, for one recipe, resumable.

Stages, each skipped where its outputs are already there (run it again to continue):

1. **sweep** (``[sweep]``, :mod:`arelu_cli.pipeline.sweep`): per tuned transform, the training
   configurations, each trained for ``[train] max_steps`` steps at seed ``[train] seed``;
   selection on dev BLEU only.
2. **bench**: the quiet training step time of every compared transform at its selected
   configuration's label smoothing (``arelu bench train`` into ``bench_train.csv``; this one
   stage wants an otherwise idle machine), which
   turns equal time into steps: the step each transform reaches in the time the fastest
   needs for ``[train] max_steps`` steps (or in ``[study] equal_time_minutes``), rounded down
   to a kept snapshot (``[train] keep_every``).
3. **seeds** (``[study] seeds``): every compared transform at its selected configuration
   (``[study] borrow`` transforms at another one's) for every seed; the sweep's run is the
   first seed's. Each run is translated (test, ``[decode]`` beam) at equal steps and at
   equal time as soon as it is trained, so that its checkpoints are no longer needed.
4. **convergence** (``[study] convergence_steps``): the tuned transforms' first-seed runs
   continued to that many steps in a copy of the run (the sweep's own run stays as it was;
   from step 0 with the same recipe and seed when its last checkpoint is gone), then
   translated at that step and at ``[train] max_steps``.
5. **report**: the CSVs and ``REPORT.md`` (:mod:`arelu_cli.pipeline.study_report`), with paired
   bootstrap tests against ``[study] baseline``.

Every result is step-budgeted: no other process on the machine can change a BLEU score, only
how long it takes. Layout of ``--out``: ``runs/TRANSFORM/CONFIG[_seed-S]/``,
``convergence/TRANSFORM/CONFIG/``, ``selected.json``, ``bench_train.csv``, the CSVs and
``REPORT.md``; each run keeps its test translations in ``translations/``. A sitting whose
sweep selects another configuration than ``selected.json`` recorded (a sweep run finished
since with a higher dev BLEU) says so and keeps the old file as ``selected-TIME.json``; the
runs trained for the old selection stay where they are, unused by the tables. Every run
folder is checked against the settings the study would train it with before any training
(:mod:`arelu_cli.pipeline.reuse`): an edited ``[model]`` or ``[train]`` is refused in one
line naming the setting, never reported as the settings of runs trained without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arelu_cli.config import Config
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.run_dir import FIRST, SUMMARY
from arelu_cli.pipeline.core import (Output, Run, Trainer, check_budget, check_runs, done,
                                     trainer as real_trainer, train_and_make, train_if_needed)
from arelu_cli.pipeline.grid import check_outputs, results_folder
from arelu_cli.pipeline.scoring import translation
from arelu_cli.pipeline.study_report import write_report
from arelu_cli.pipeline.study_runs import (BENCH, Evaluation, axes, borrowed, compared,
                                           equal_time_budget_ms, planned_runs, point_of, scores,
                                           study_run)
from arelu_cli.pipeline.sweep import Point, plan
from arelu_cli.registry import get_transform
from arelu_cli.pipeline.timings import precision, timed_once
from arelu_cli.util.atomic import atomic_write_text

SELECTED = "selected.json"
OUTPUTS = {"sweep.csv": "transform", "test_bleu.csv": "comparison",
           "test_bleu_summary.csv": "comparison", "significance.csv": "comparison",
           "dev_curves.csv": "transform", BENCH: "transform"}
"""The study's tables and the first column of each (what a file of ours starts with)."""

Evaluate = Callable[[Evaluation], Output]
"""What the study makes of a run at a step (by default its test translation,
:func:`arelu_cli.pipeline.scoring.translation`)."""


def _translation(item: Evaluation) -> Output:
    return translation(item.run, item.step)


def check(config: Config) -> None:
    """Refuse a study that could not give its tables, before any training."""
    check_budget(config)
    t = config.train
    c = config.study.convergence_steps
    if c and (c <= t.max_steps or c % t.keep_every):
        raise UserError(f"[study] convergence_steps ({c}) must exceed [train] max_steps "
                        f"({t.max_steps}) and be a multiple of keep_every ({t.keep_every}), or 0")
    for name in compared(config):
        get_transform(name)
    if config.study.baseline not in compared(config):
        raise UserError(f"[study] baseline {config.study.baseline!r} is not a transform the "
                        f"study trains ({', '.join(compared(config))}); name one of them")


def sweep(config: Config, out: Path, train: Trainer, console: Console) -> dict[str, Point]:
    """Stage 1: ``{transform: selected point}``, training whatever the sweep still needs."""
    selected, base = {}, config.train.seed
    for name in config.sweep.transforms:
        while True:
            pending, best = plan(axes(config), config.sweep.order, scores(config, out, name))
            if best is not None:
                selected[name] = best
                break
            for point in pending:
                train_if_needed(study_run(config, out, name, point, base), train, console)
    return selected


def configurations(config: Config, selected: dict[str, Point]) -> dict[str, Point]:
    """``{transform: point}`` of every compared transform: its selected one, or (``[study]
    borrow``) the one selected for the transform it borrows from."""
    tuned = {name: name for name in config.sweep.transforms} | borrowed(config)
    return {name: selected[tuned[name]] for name in compared(config)}


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


def continue_copy(source: Path, target: Path) -> None:
    """Start ``target`` as a copy of the finished run ``source`` (checkpoints hard-linked:
    they are only ever replaced, never written in place), without its summary, its test
    translations or the record of its first training (``FIRST``: the sweep's, not the
    copy's), so that training resumes there."""
    if (target / checkpoint.LAST).is_file():
        return
    tmp = target.with_name(f".{target.name}.copying")
    shutil.rmtree(tmp, ignore_errors=True)
    for path in sorted(source.rglob("*")):
        if (path.is_dir() or path.name == SUMMARY
                or {"translations", FIRST} & set(path.relative_to(source).parts)):
            continue
        dest = tmp / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".pt":
            os.link(path, dest)
        else:
            shutil.copy2(path, dest)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, target)


StepTimes = Callable[[dict[str, Point]], dict[str, float]]
"""``ms_per_step(selected)``: the quiet step time (ms) of every compared transform at its
configuration of the selection (the study passes :func:`bench`)."""


def train_all(config: Config, out: Path, train: Trainer, console: Console,
              ms_per_step: StepTimes, evaluate: Evaluate = _translation
              ) -> tuple[dict[str, Point], list[Evaluation]]:
    """Stages 1-3 and 5: the selection, then each seed and convergence run trained and at
    once evaluated at every step the tables need (so that its checkpoints are no longer
    needed); returns the selection and the evaluations."""
    selected = sweep(config, out, train, console)
    record_selection(config, out, selected, console)
    seeds, longer = seed_runs(config, out, selected), convergence_runs(config, out, selected)
    todo = evaluations(config, seeds, longer, equal_time_steps(config, ms_per_step(selected)))
    for run in seeds + longer:
        outputs = [evaluate(item) for item in todo if item.run == run]
        first = study_run(config, out, run.name, point_of(run), run.seed)
        if (run in longer and not done(run, [p for o in outputs for p in o.paths])
                and (first.folder / checkpoint.LAST).is_file()):
            continue_copy(first.folder, run.folder)  # else from step 0: same recipe and seed
        train_and_make(run, train, console, outputs)
    return selected, todo


def _previous_selection(path: Path) -> dict | None:
    """What ``selected.json`` recorded: ``{transform: {..., "run": CONFIG}}``, ``{}`` when
    there is none, None when it cannot be read."""
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _keep(path: Path) -> Path:
    """Copy ``path`` to ``selected-<UTC time>.json`` beside it, never over another file."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(path.stat().st_mtime))
    kept, n = path.with_name(f"{path.stem}-{stamp}.json"), 1
    while kept.exists():
        n += 1
        kept = path.with_name(f"{path.stem}-{stamp}-{n}.json")
    shutil.copy2(path, kept)
    return kept


def record_selection(config: Config, out: Path, selected: dict[str, Point],
                     console: Console, partial: bool = False) -> None:
    """Write ``selected.json``. Where it held another configuration for a transform, warn
    (the seed and convergence runs of the old one stop being used by the tables; they are
    kept, never deleted) and keep the old file as ``selected-<its UTC time>.json``.
    ``partial``: ``selected`` holds the transforms swept so far; the others keep what the
    file recorded."""
    path, now = out / SELECTED, {name: dataclasses.asdict(p) | {"run": p.name}
                                 for name, p in selected.items()}
    before = _previous_selection(path)
    if partial and before:
        now = {name: now.get(name, entry) for name, entry in before.items()} | now
    changed = {name: entry for name, entry in (before or {}).items() if now.get(name) != entry}
    if before is None or changed:
        kept, users, warnings = _keep(path), borrowed(config), []
        for name, entry in changed.items():
            old = entry.get("run", entry) if isinstance(entry, dict) else entry
            new = now[name]["run"] if name in now else "nothing (not in [sweep] transforms)"
            also = [b for b, tuned in users.items() if tuned == name]
            warnings.append(
                f"the sweep now selects {new} for {name}, not {old} as {SELECTED} recorded: "
                f"the runs trained at {old} (seeds, convergence"
                + (f", and {', '.join(also)}, which borrow it" if also else "") + ") are kept "
                f"but no longer used by the tables; the old selection is in {kept.name}")
        if before is None:
            warnings.append(f"{path} could not be read; kept it as {kept.name} and wrote the "
                            "current selection")
        for text in warnings:
            console.print(f"[bold yellow]warning:[/] {escape(text)}", highlight=False,
                          soft_wrap=True)
    atomic_write_text(path, json.dumps(now, indent=2) + "\n")


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
    its seed's first run)."""
    todo = [Evaluation("equal_steps", run, run.steps) for run in seeds]
    todo += [Evaluation("equal_time", run, at_equal_time[run.name]) for run in seeds]
    todo += [Evaluation("convergence_start", run, config.train.max_steps) for run in longer]
    todo += [Evaluation("convergence", run, run.steps) for run in longer]
    return todo


def bench(config: Config, out: Path, console: Console,
          selected: dict[str, Point]) -> dict[str, float]:
    """Stage 2: quiet step times (ms) of the compared transforms, each with the label
    smoothing of its configuration in ``selected`` (it changes the loss computed; lr and
    warmup do not change a step's time), measured once into ``bench_train.csv``
    (:func:`~arelu_cli.pipeline.timings.timed_once`). A file timed with other label
    smoothing is refused."""
    from arelu_cli.bench.train import bench_train

    path, names = out / BENCH, compared(config)
    smoothing = {name: p.label_smoothing for name, p in configurations(config, selected).items()}
    frame = timed_once(path, "training step times for equal time", lambda: bench_train(
        config, names, repeats=10, device_name=config.train.device, console=console,
        label_smoothing=smoothing), console,
        {"d_model": config.model.d_model, "precision": precision(config)})
    frame = frame[~frame["fused_output"].astype(bool)]
    times = dict(zip(frame["transform"], frame["ms_per_step"]))
    missing = [n for n in names if n not in times]
    if missing:
        raise UserError(f"{path} has no step time of {', '.join(missing)}; delete it and run "
                        "the study again on an idle machine")
    _check_smoothing(path, frame, smoothing)
    return {name: float(times[name]) for name in names}


def _check_smoothing(path: Path, frame, smoothing: dict[str, float]) -> None:
    """The step times of ``path`` (rows ``frame``) were taken with each transform's label
    smoothing: refuse other values, and a file that does not say."""
    if "label_smoothing" not in frame.columns:
        raise UserError(f"{path} does not record the label smoothing its step times were "
                        "taken with; delete it and run the study again on an idle machine")
    recorded = dict(zip(frame["transform"], frame["label_smoothing"].fillna(0.0)))
    wrong = [f"{name} with {float(recorded[name]):g}, not {eps:g}"
             for name, eps in smoothing.items() if abs(float(recorded[name]) - eps) > 1e-12]
    if wrong:
        raise UserError(f"{path} timed {'; '.join(wrong)} (the label smoothing of the selected "
                        "configuration); delete it and run the study again on an idle machine")


def study(config: Config, out: Path, console: Console | None = None,
          train: Trainer | None = None, recipe: str | None = None,
          allow_data_change: bool = False) -> Path:
    """Run (or continue) every stage into ``out``; returns ``REPORT.md``. An unfinished run
    resumes only on the data it was trained on, unless ``allow_data_change`` (``train
    --resume --allow-data-change``)."""
    console = console or Console()
    check(config)
    check_runs(planned_runs(config, out))
    check_outputs(out, OUTPUTS)
    results_folder(out)
    train = train or real_trainer(recipe, console, allow_data_change)
    times: dict[str, float] = {}

    def step_times(chosen: dict[str, Point]) -> dict[str, float]:
        times.update(bench(config, out, console, chosen))
        return times

    selected, todo = train_all(config, out, train, console, step_times)
    return write_report(config, out, selected, todo, times)
