"""The one experiment core: every study is a plan of :class:`Run` s and :class:`Task` s over
it, never a stack of its own.

* A :class:`Run` is a name, the configuration it trains with (its seed included) and its
  folder (:mod:`arelu_cli.train.run_dir` owns the folder's files); :meth:`Run.read` is a run
  read back from its folder.
* "Is it done?" has one answer per kind of thing. A *run* is done (:func:`done`) when it
  finished with the plan's settings (:func:`reuse` refuses any other settings in one line,
  and a run trained for fewer steps is continued) and either keeps its ``last.pt`` or every
  output wanted from it is made (a committed study keeps outputs, not the git-ignored
  checkpoints); a run that diverged is done, its divergence a finding. A *made file* is
  fresh (:func:`fresh`) when it exists and no input that exists is newer: make's rule, with
  a missing input (a checkpoint not committed) no reason to redo it.
* :func:`train_if_needed` trains, resumes or continues a run; a :class:`Task` is what a
  study makes (a test translation, attention counts, a language model's generations, a
  table): the study says what, the core when (:func:`make`); :func:`train_and_make` trains a
  run and at once makes what is made from its weights, so that its checkpoints are no
  longer needed once it is through.

Reuse: a run folder is reused only for the settings it was trained with. Every setting that
shapes a run is in its record (:mod:`arelu_cli.train.run_record`). A run whose recorded
settings are the ones the plan asks for is reused (or resumed, if unfinished); one that
differs only in a larger ``[train] max_steps`` is continued from its ``last.pt``; any other
difference is refused in one line that names the setting and says what to do, before the run
is used: a report never states settings its numbers did not come from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape

from arelu_cli.config import Config, from_dict
from arelu_cli.model import checkpoint
from arelu_cli.train import run_dir
from arelu_cli.train.divergence import Diverged
from arelu_cli.train.run_record import (NOT_SHAPING, SHAPING, changed_while_resumed,
                                        differences, show)
from arelu_cli.util.errors import UserError

Trainer = Callable[[Config, Path, bool], object]
"""``trainer(config, folder, resume)``: trains one run (:func:`trainer` makes the real one;
tests pass a fake that writes what a finished run leaves)."""

NEW, SAME, LONGER = "new", "same", "longer"
"""What :func:`reuse` says of a run folder: nothing trained there yet; trained (or being
trained) with the planned settings; trained with them for fewer steps than planned, to be
continued from its ``last.pt``."""


@dataclass(frozen=True)
class Run:
    """One training run of a study: what its reports call it, the configuration it trains
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

    @property
    def transform(self) -> str:
        return self.config.train.transform

    @property
    def corpus(self) -> str:
        """The corpus it was trained on: the name of its prepared folder."""
        return Path(self.config.data.path).name

    @property
    def log(self) -> pd.DataFrame:
        """Its log (:data:`arelu_cli.train.run_dir.LOG`), read now."""
        return run_dir.read_log(self.folder)

    @property
    def resolved(self) -> dict:
        """What its record says the run resolved to (tau, world size, data fingerprint)."""
        found = (run_dir.read_config(self.folder) or {}).get("resolved")
        return found if isinstance(found, dict) else {}

    @classmethod
    def read(cls, folder: Path, name: str | None = None) -> Run:
        """The run in ``folder`` as its record says it was trained (the tables that shape a
        run; the others at their defaults); ``name`` defaults to the folder's name."""
        record = run_dir.require_config(folder)
        try:
            config = from_dict({key: record.get(key) or {} for key in SHAPING})
        except UserError as err:
            raise UserError(f"{run_dir.config_path(folder)} does not hold a configuration this "
                            f"version reads ({err}); {run_dir.again(folder)}") from None
        return cls(name or Path(folder).name, config, Path(folder))


def run_config(config: Config, **train: object) -> Config:
    """``config`` with some ``[train]`` keys replaced (one run's transform, seed, budget)."""
    return dataclasses.replace(config, train=dataclasses.replace(config.train, **train))


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


@dataclass
class RunTrainer:
    """The real :data:`Trainer`: :func:`arelu_cli.train.loop.train`, recording ``recipe``;
    it pickles without its console, so a study can train runs side by side in processes of
    their own (:mod:`arelu_cli.studies.side_by_side`)."""

    recipe: str | None
    console: Console | None = None
    allow_data_change: bool = False

    def __call__(self, config: Config, folder: Path, resume: bool) -> object:
        return self.train(config, folder, resume, console=self.console)

    def train(self, config: Config, folder: Path, resume: bool, *,
              console: Console | None, beside: int = 0) -> object:
        from arelu_cli.train.loop import train

        return train(config, folder, resume=resume, recipe=self.recipe, console=console,
                     allow_data_change=self.allow_data_change, beside=beside)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "console": None}


def trainer(recipe: str | None, console: Console, allow_data_change: bool = False) -> Trainer:
    """The real :data:`Trainer` (:class:`RunTrainer`)."""
    return RunTrainer(recipe, console, allow_data_change)


def tolerant(train: Trainer, console: Console) -> Trainer:
    """``train``, with a divergence reported, not raised: it is a finding (recorded in the
    run's folder by the trainer), and the study goes on."""
    def run(config: Config, folder: Path, resume: bool) -> None:
        try:
            train(config, folder, resume)
        except Diverged as err:
            if not run_dir.diverged(folder):  # a trainer that raises without recording it
                raise
            console.print(f"[bold yellow]diverged:[/] {escape(folder.name)}: "
                          f"{escape(str(err))} (recorded in "
                          f"{escape(str(run_dir.diverged_path(folder)))}; the study goes on)",
                          highlight=False, soft_wrap=True)
    return run


def reuse(folder: Path, planned: Config) -> str:
    """How the run in ``folder`` may serve the plan's run ``planned``: :data:`NEW`,
    :data:`SAME` or :data:`LONGER`; a :class:`UserError` naming the first setting that
    differs otherwise (module docstring)."""
    record = run_dir.read_config(folder)
    remedy = f"delete {folder} (or give another --out) to train it again"
    where = run_dir.config_path(folder)
    if record is None:
        if not run_dir.started(folder):
            return NEW
        raise UserError(f"{where} is missing or unreadable, so the settings the run in "
                        f"{folder} was trained with are unknown; {remedy}")
    try:
        changed = differences(record, planned)
    except UserError as err:
        raise UserError(f"{where} does not hold a configuration this version reads ({err}); "
                        f"{remedy}") from None
    changed = {k: v for k, v in changed.items() if k not in NOT_SHAPING}
    mixed = {k: v for k, v in changed_while_resumed(record).items()
             if k not in NOT_SHAPING and k != "train.max_steps"}
    if mixed:
        key, (first, now) = next(iter(mixed.items()))
        raise UserError(f"{folder} was resumed with {key} changed from {show(first)} to "
                        f"{show(now)} (resolved.setting_changes in its {where.name}), so no "
                        f"single setting describes it; {remedy}")
    steps = changed.pop("train.max_steps", None)
    if changed:
        key, (old, new) = next(iter(changed.items()))
        more = f" (and {len(changed) - 1} more: {', '.join(list(changed)[1:])})" \
            if len(changed) > 1 else ""
        raise UserError(f"{folder} was trained with {key} = {show(old)}, but the plan now asks "
                        f"for {show(new)}{more}; set it back to {show(old)}, or {remedy}")
    if steps is None:
        return SAME
    old, new = steps
    if new < old:
        raise UserError(f"{folder} was trained for train.max_steps = {old}, more than the "
                        f"{new} the plan now asks for; set it back to {old}, or {remedy}")
    if not (folder / checkpoint.LAST).is_file():
        raise UserError(f"{folder} was trained for {old} steps and the plan now asks for {new}, "
                        f"but its {checkpoint.LAST} is gone, so it cannot be continued; set "
                        f"train.max_steps back to {old}, or {remedy}")
    return LONGER


def check_runs(runs: Iterable[Run]) -> None:
    """Refuse, before any training, a run folder trained with other settings than the plan
    would train it with (:func:`reuse`)."""
    for run in runs:
        reuse(run.folder, run.config)


def fresh(outputs: Iterable[Path], inputs: Iterable[Path] = ()) -> bool:
    """Every output is a file and no input that exists is newer than the oldest of them, so
    that retrained weights redo what was made from the old ones."""
    made = [Path(p) for p in outputs]
    if not made or not all(p.is_file() for p in made):
        return False
    oldest = min(p.stat().st_mtime_ns for p in made)
    return all(p.stat().st_mtime_ns <= oldest for p in map(Path, inputs) if p.is_file())


def done(run: Run, outputs: Sequence[Path] = ()) -> bool:
    """Nothing to train for ``run`` (module docstring); a run trained with other settings
    than ``run.config`` is a :class:`UserError` naming the setting."""
    if reuse(run.folder, run.config) == LONGER:
        return False
    if run_dir.diverged(run.folder):
        return True
    return run_dir.finished(run.folder) and (
        (run.folder / checkpoint.LAST).is_file()
        or (bool(outputs) and all(p.is_file() for p in outputs)))


def train_if_needed(run: Run, train: Trainer, console: Console,
                    outputs: Sequence[Path] = ()) -> bool:
    """Train ``run`` unless it is :func:`done`: resume it from its ``last.pt``, continue it
    to a larger ``max_steps``, or train it from the start (a finished run keeping its first
    record, :func:`arelu_cli.train.run_dir.keep_first`); returns whether it trained."""
    resume = to_train(run, outputs)
    if resume is None:
        return False
    console.rule(f"{'resume' if resume else 'train'} {run.name}: {run.folder}")
    train(run.config, run.folder, resume)
    return True


def to_train(run: Run, outputs: Sequence[Path] = ()) -> bool | None:
    """None when ``run`` is :func:`done`; else whether it resumes from its ``last.pt`` (a
    finished run trained again keeps its first record first)."""
    if done(run, outputs):
        return None
    resume = (run.folder / checkpoint.LAST).is_file()
    if run_dir.finished(run.folder) and not resume:
        run_dir.keep_first(run.folder)
    return resume


@dataclass(frozen=True)
class Task:
    """Something a study makes: its name, how (``make`` writes every path, atomically),
    the files it writes and the files it is made from. It is done when its ``ready`` says
    so, else when its files are :func:`fresh`; one whose inputs are gone is refused."""

    name: str
    make: Callable[[], None]
    paths: tuple[Path, ...] = ()
    inputs: tuple[Path, ...] = ()
    ready: Callable[[], bool] | None = None

    def done(self) -> bool:
        return self.ready() if self.ready is not None else fresh(self.paths, self.inputs)


def output(paths: Sequence[Path], weights: Path, make: Callable[[], None]) -> Task:
    """What a study makes from one run's ``weights``."""
    return Task(str(paths[0]), make, tuple(paths), (weights,))


def make(tasks: Iterable[Task]) -> None:
    """Make every task that is not done; one whose inputs are gone is refused in one line
    (a run whose weights are gone must train again)."""
    for task in tasks:
        if task.done():
            continue
        gone = [p for p in task.inputs if not p.is_file()]
        if gone:
            raise UserError(f"{gone[0]} is missing, so {task.paths[0]} cannot be made: delete "
                            "the folder of the run it belongs to, to train the run again (with "
                            "[train] keep_every snapshots)")
        task.make()


def train_and_make(run: Run, train: Trainer, console: Console,
                   tasks: Sequence[Task] = ()) -> None:
    """Train ``run`` if needed, then make what is made from it (nothing for a diverged
    run)."""
    train_if_needed(run, train, console, [p for t in tasks for p in t.paths])
    if not run_dir.diverged(run.folder):
        make(tasks)
