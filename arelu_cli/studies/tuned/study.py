"""The tuned translation study (``[study] kind = "tuned"``, ``arelu study RECIPE``): the
comparison a reviewer accepts, for one recipe, resumable.

Stages, each skipped where its outputs are already there (run it again to continue):

1. **sweep** (``[sweep]``, :mod:`arelu_cli.studies.sweep`): per tuned transform, the training
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
5. **report**: the tables and ``REPORT.md`` (:mod:`arelu_cli.studies.tuned.report`), with
   paired bootstrap tests against ``[study] baseline``.

Every result is step-budgeted: no other process on the machine can change a BLEU score, only
how long it takes. Layout of ``--out``: ``runs/TRANSFORM/CONFIG[_seed-S]/``,
``convergence/TRANSFORM/CONFIG/``, ``selected.json``, ``bench_train.csv``, the CSVs and
``REPORT.md``; each run keeps its test translations in ``translations/``. A sitting whose
sweep selects another configuration than ``selected.json`` recorded (a sweep run finished
since with a higher dev BLEU) says so and keeps the old file as ``selected-TIME.json``; the
runs trained for the old selection stay where they are, unused by the tables. Every run
folder is checked against the settings the study would train it with before any training
(:func:`arelu_cli.studies.core.reuse`): an edited ``[model]`` or ``[train]`` is refused in one
line naming the setting, never reported as the settings of runs trained without it.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from arelu_cli.config import Config
from arelu_cli.model import checkpoint
from arelu_cli.registry import get_transform
from arelu_cli.studies.contract import Context, Study
from arelu_cli.studies.core import Task, Trainer, check_budget, check_runs, done, train_and_make
from arelu_cli.studies.sweep import (Point, continue_copy, record_selection, study_run, sweep)
from arelu_cli.studies.timings import precision, timed_once
from arelu_cli.studies.translation import translation
from arelu_cli.studies.tuned import report
from arelu_cli.studies.tuned.runs import (BENCH, Evaluation, compared, configurations,
                                          convergence_runs, equal_time_steps, evaluations,
                                          planned_runs, seed_runs, step_times)
from arelu_cli.util.errors import UserError

OUTPUTS = {"sweep.csv": "transform", "test_bleu.csv": "comparison",
           "test_bleu_summary.csv": "comparison", "significance.csv": "comparison",
           "dev_curves.csv": "transform", BENCH: "transform"}
"""The study's tables and the first column of each (what a file of ours starts with)."""

Evaluate = Callable[[Evaluation], Task]
"""What the study makes of a run at a step (by default its test translation,
:func:`arelu_cli.studies.translation.translation`)."""


def _translation(item: Evaluation) -> Task:
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


StepTimes = Callable[[dict[str, Point]], dict[str, float]]
"""``ms_per_step(selected)``: the quiet step time (ms) of every compared transform at its
configuration of the selection (the study passes :func:`bench`)."""


def train_all(config: Config, out: Path, train: Trainer, console: Console,
              ms_per_step: StepTimes, evaluate: Evaluate = _translation
              ) -> tuple[dict[str, Point], list[Evaluation]]:
    """Stages 1-4: the selection, then each seed and convergence run trained and at
    once evaluated at every step the tables need (so that its checkpoints are no longer
    needed); returns the selection and the evaluations."""
    selected = sweep(config, out, train, console)
    record_selection(config, out, selected, console)
    seeds, longer = seed_runs(config, out, selected), convergence_runs(config, out, selected)
    todo = evaluations(config, seeds, longer, equal_time_steps(config, ms_per_step(selected)))
    for run in seeds + longer:
        outputs = [evaluate(item) for item in todo if item.run == run]
        first = study_run(config, out, run.name, Point.of(run), run.seed)
        if (run in longer and not done(run, [p for o in outputs for p in o.paths])
                and (first.folder / checkpoint.LAST).is_file()):
            continue_copy(first.folder, run.folder)  # else from step 0: same recipe and seed
        train_and_make(run, train, console, outputs)
    return selected, todo


def bench(config: Config, out: Path, console: Console,
          selected: dict[str, Point]) -> dict[str, float]:
    """Stage 2: quiet step times (ms) of the compared transforms, each with the label
    smoothing of its configuration in ``selected`` (it changes the loss computed; lr and
    warmup do not change a step's time), measured once into ``bench_train.csv``
    (:func:`~arelu_cli.studies.timings.timed_once`) and read back checked
    (:func:`~arelu_cli.studies.tuned.runs.step_times`)."""
    from arelu_cli.bench.train import bench_train

    smoothing = {name: p.label_smoothing for name, p in configurations(config, selected).items()}
    timed_once(out / BENCH, "training step times for equal time", lambda: bench_train(
        config, compared(config), repeats=10, device_name=config.train.device,
        console=console, label_smoothing=smoothing), console,
        {"d_model": config.model.d_model, "precision": precision(config)})
    return step_times(config, out, selected)


def stages(config: Config, out: Path, context: Context) -> None:
    """Every stage (module docstring); an unfinished run resumes only on the data it was
    trained on, unless the command allows a change of data."""
    check_runs(planned_runs(config, out))
    train_all(config, out, context.train, context.console,
              lambda chosen: bench(config, out, context.console, chosen))


STUDY = Study("tuned", check, stages, report.tables, report.claims, report.document, OUTPUTS,
              ("sweep.png", "dev_curves.png"))
