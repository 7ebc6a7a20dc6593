"""The one experiment core: every study (``reproduce``, ``study``, ``attention-study``, the
next one) is a plan of :class:`Run` s over it, never a stack of its own.

* A :class:`Run` is a name, the configuration it trains with (its seed included) and its
  folder.
* "Is it done?" has one answer per kind of thing. A *run* is done (:func:`done`) when it
  finished with the plan's settings (:func:`arelu_cli.pipeline.reuse.reuse` refuses any
  other settings in one line, and a run trained for fewer steps is continued) and either
  keeps its ``last.pt`` or every output wanted from it is made (a committed study keeps
  outputs, not the git-ignored checkpoints); a run that diverged is done, its divergence a
  finding. A *made file* is fresh (:func:`fresh`) when it exists and no input that exists
  is newer: make's rule, with a missing input (a checkpoint not committed) no reason to
  redo it.
* :func:`train_if_needed` trains, resumes or continues a run; :class:`Output` is what a plan
  makes from a run's weights (a test translation, attention counts, a language model's
  generations: the plan says what, the core only when), made by :func:`make`;
  :func:`train_and_make` does both for one run, so that its checkpoints are no longer
  needed once it is through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from arelu_cli.config import Config
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.run_dir import diverged, finished, keep_first
from arelu_cli.pipeline.reuse import LONGER, reuse

Trainer = Callable[[Config, Path, bool], object]
"""``trainer(config, folder, resume)``: trains one run (:func:`trainer` makes the real one;
tests pass a fake that writes what a finished run leaves)."""


@dataclass(frozen=True)
class Run:
    """One training run of a plan: what its reports call it, the configuration it trains
    with and the folder it lives in."""

    name: str
    config: Config
    folder: Path

    @property
    def seed(self) -> int:
        return self.config.train.seed

    @property
    def steps(self) -> int:
        return self.config.train.max_steps


def check_budget(config: Config, what: str = "a study") -> None:
    """``what`` trains for ``[train] max_steps`` and evaluates the weights kept at steps:
    refuse a clock budget and a ``keep_every`` that misses the last step."""
    t = config.train
    if t.max_minutes:
        raise UserError(f"{what} trains for [train] max_steps steps, never against the clock: "
                        "set [train] max_minutes = 0")
    if not t.keep_every or t.max_steps % t.keep_every:
        divisors = [d for d in range(1, t.max_steps + 1) if t.max_steps % d == 0]
        example = min(divisors, key=lambda d: (abs(d - t.max_steps / 4), -d))
        raise UserError(f"{what} evaluates kept weights: set [train] keep_every to a divisor "
                        f"of max_steps ({t.max_steps}), e.g. {example}")


def run_config(config: Config, **train: object) -> Config:
    """``config`` with some ``[train]`` keys replaced (one run's transform, seed, budget)."""
    return dataclasses.replace(config, train=dataclasses.replace(config.train, **train))


def trainer(recipe: str | None, console: Console, allow_data_change: bool = False) -> Trainer:
    """The real :data:`Trainer`: :func:`arelu_cli.train.loop.train`, recording ``recipe``."""
    from arelu_cli.train.loop import train

    return lambda config, folder, resume: train(config, folder, resume=resume, recipe=recipe,
                                                console=console,
                                                allow_data_change=allow_data_change)


def fresh(outputs: Iterable[Path], inputs: Iterable[Path] = ()) -> bool:
    """Every output is a file and no input that exists is newer than the oldest of them, so
    that retrained weights redo what was made from the old ones."""
    made = [Path(p) for p in outputs]
    if not made or not all(p.is_file() for p in made):
        return False
    oldest = min(p.stat().st_mtime_ns for p in made)
    return all(p.stat().st_mtime_ns <= oldest for p in map(Path, inputs) if p.is_file())


def done(run: Run, outputs: Sequence[Path] = ()) -> bool:
    """Nothing to train for ``run`` (see the module docstring); a run trained with other
    settings than ``run.config`` is a :class:`UserError` naming the setting."""
    if reuse(run.folder, run.config) == LONGER:
        return False
    if diverged(run.folder):
        return True
    return finished(run.folder) and ((run.folder / checkpoint.LAST).is_file()
                                     or (bool(outputs) and all(p.is_file() for p in outputs)))


def train_if_needed(run: Run, train: Trainer, console: Console,
                    outputs: Sequence[Path] = ()) -> bool:
    """Train ``run`` unless it is :func:`done`: resume it from its ``last.pt``, continue it
    to a larger ``max_steps``, or train it from the start (a finished run keeping its first
    record, :func:`keep_first`); returns whether it trained."""
    if done(run, outputs):
        return False
    resume = (run.folder / checkpoint.LAST).is_file()
    if finished(run.folder) and not resume:
        keep_first(run.folder)
    console.rule(f"{'resume' if resume else 'train'} {run.name}: {run.folder}")
    train(run.config, run.folder, resume)
    return True


@dataclass(frozen=True)
class Output:
    """Files a plan makes from one run's weights, and how: the core decides when (they are
    missing, or older than the weights), the plan what (``make`` writes every path,
    atomically)."""

    paths: tuple[Path, ...]
    weights: Path
    make: Callable[[], None]


def make(outputs: Iterable[Output]) -> None:
    """Make every output that is not :func:`fresh`; one whose weights are gone is refused in
    one line (the run must train again)."""
    for output in outputs:
        if fresh(output.paths, [output.weights]):
            continue
        if not output.weights.is_file():
            raise UserError(f"{output.weights} is missing, so {output.paths[0]} cannot be "
                            "made: delete the folder of the run it belongs to, to train the run "
                            "again (with [train] keep_every snapshots)")
        output.make()


def train_and_make(run: Run, train: Trainer, console: Console,
                   outputs: Sequence[Output] = ()) -> None:
    """Train ``run`` if needed, then make its outputs (none for a diverged run)."""
    train_if_needed(run, train, console, [p for o in outputs for p in o.paths])
    if not diverged(run.folder):
        make(outputs)


def check_runs(runs: Iterable[Run]) -> None:
    """Refuse, before any training, a run folder trained with other settings than the plan
    would train it with (:func:`arelu_cli.pipeline.reuse.reuse`)."""
    for run in runs:
        reuse(run.folder, run.config)
