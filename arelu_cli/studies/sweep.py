"""A tuning sweep as a practitioner runs one before comparing transforms: which training
configurations to try, which one wins on dev, and the runs that train them (the stage of
every study that tunes: the tuned translation study, the language-model study).

A configuration (:class:`Point`) is the Noam learning-rate factor, its warmup and the label
smoothing. ``[sweep] order = "grid"`` tries every combination of the listed values;
``"sequential"`` tunes one axis at a time in the order lr, warmup, label smoothing, each at
the best values found so far (the later axes start at their first listed value). Selection
uses the **dev** score only (the best validation of a run: BLEU, or minus the dev loss of a
language model, :func:`arelu_cli.train.run_dir.best_score`) of the run's first training, so
that training a selected run again can never change the selection; the test set is read
once, for the selected configuration.

Layout: ``runs/TRANSFORM/CONFIG[_seed-S]/``; ``selected.json`` records the selection
(:func:`record_selection`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arelu_cli.config import Config
from arelu_cli.model import checkpoint
from arelu_cli.studies.core import LONGER, Run, Trainer, reuse, run_config, train_if_needed
from arelu_cli.train import run_dir
from arelu_cli.util.atomic import atomic_write_text

AXES = ("lr", "warmup", "label_smoothing")
SELECTED = "selected.json"


@dataclass(frozen=True, order=True)
class Point:
    """One training configuration of the sweep."""

    lr: float
    warmup: int
    label_smoothing: float

    @property
    def name(self) -> str:
        """The run folder's name, e.g. ``lr-0.3_warmup-300_ls-0``."""
        return f"lr-{self.lr:g}_warmup-{self.warmup}_ls-{self.label_smoothing:g}"

    def with_(self, axis: str, value: float) -> Point:
        values = {a: getattr(self, a) for a in AXES}
        values[axis] = value
        return Point(float(values["lr"]), int(values["warmup"]), float(values["label_smoothing"]))

    @classmethod
    def of(cls, run: Run) -> Point:
        """The configuration ``run`` trains with."""
        t = run.config.train
        return cls(t.lr, t.warmup, t.label_smoothing)


def grid_points(axes: Mapping[str, Sequence[float]]) -> list[Point]:
    """Every combination of the axes' values, in the listed order."""
    return [Point(float(lr), int(w), float(ls))
            for lr, w, ls in itertools.product(*(axes[a] for a in AXES))]


def best(points: Sequence[Point], scores: Mapping[Point, float]) -> Point:
    """The point with the highest dev score; a tie goes to the one listed first."""
    return max(points, key=lambda p: (scores[p], -points.index(p)))


def _start(axes: Mapping[str, Sequence[float]]) -> Point:
    return Point(float(axes["lr"][0]), int(axes["warmup"][0]), float(axes["label_smoothing"][0]))


def _rounds(axes: Mapping[str, Sequence[float]], order: str,
            scores: Mapping[Point, float], extend: int = 0) -> Iterator[list[Point]]:
    """The groups of points the order tries, one after another; it stops after the first
    group that is not fully scored (what comes next depends on that group's winner). With
    ``extend``, a group whose best lr is the largest (smallest) tried is followed by the
    same group with one lr more past that end (:func:`beyond`)."""
    for axis in AXES:
        if not axes[axis]:
            raise ValueError(f"the sweep's {axis} axis has no values")
    if order not in ("grid", "sequential"):
        raise ValueError(f"unknown sweep order {order!r}")
    current = _start(axes)
    for axis in (AXES if order == "sequential" else ("lr",)):
        values = list(axes[axis])
        while True:
            candidates = (grid_points({**axes, "lr": values}) if order == "grid" else
                          list(dict.fromkeys(current.with_(axis, v) for v in values)))
            yield candidates
            if any(p not in scores for p in candidates):
                return
            chosen = best(candidates, scores)
            wider = beyond(values, axes["lr"], chosen.lr, extend) if axis == "lr" else None
            if wider is None:
                break
            values = wider
        current = chosen


def beyond(values: Sequence[float], listed: Sequence[float], chosen: float,
           extend: int) -> list[float] | None:
    """``values`` (an lr axis, ``listed`` as the recipe lists it, perhaps extended) with one
    value more past the end ``chosen`` sits at: that end times (or divided by) the ratio of
    the two listed values at that end, so a doubling grid goes on doubling; None when
    ``chosen`` is inside, or ``extend`` values were added past that end already. New values
    come last, so a tie still goes to a listed point (:func:`best`)."""
    ordered = sorted(listed)
    if extend < 1 or len(ordered) < 2:
        return None
    if chosen == max(values) and sum(v > ordered[-1] for v in values) < extend:
        return [*values, _tidy(chosen * ordered[-1] / ordered[-2])]
    if chosen == min(values) and sum(v < ordered[0] for v in values) < extend:
        return [*values, _tidy(chosen * ordered[0] / ordered[1])]
    return None


def _tidy(value: float) -> float:
    """``value`` at 12 significant digits (1.6 x 2 is 3.2, not 3.2000000000000006)."""
    return float(f"{value:.12g}")


def plan(axes: Mapping[str, Sequence[float]], order: str, scores: Mapping[Point, float],
         extend: int = 0) -> tuple[list[Point], Point | None]:
    """``(pending, selected)``: the points to train next (those without a score yet), or,
    when every point the order needs has a score, ``([], the selected point)``.

    Call it again after training the pending points: a sequential sweep reveals its next
    axis only once the previous one is decided, so the calls walk it axis by axis, and a
    sweep interrupted anywhere continues from the scores already there.
    """
    last: list[Point] = []
    for candidates in _rounds(axes, order, scores, extend):
        pending = [p for p in candidates if p not in scores]
        if pending:
            return pending, None
        last = candidates
    return [], best(last, scores)


def visited(axes: Mapping[str, Sequence[float]], order: str, scores: Mapping[Point, float],
            extend: int = 0) -> list[Point]:
    """Every point the sweep has asked for so far, in the order it asked (its table's rows)."""
    return list(dict.fromkeys(p for group in _rounds(axes, order, scores, extend)
                              for p in group))


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
    """One run of a study: the recipe with its transform, configuration, seed and step
    budget, never against the clock; in ``runs/`` unless ``folder`` says otherwise."""
    cfg = run_config(config, transform=transform, lr=point.lr, warmup=point.warmup,
                     label_smoothing=point.label_smoothing, seed=seed, max_minutes=0.0,
                     max_steps=max_steps or config.train.max_steps)
    return Run(transform, cfg, folder or run_folder(out, transform, point, seed,
                                                    config.train.seed))


def sweep_summary(folder: Path) -> dict:
    """The summary the sweep selects on: the first training's."""
    return run_dir.first_summary(folder) or run_dir.read_summary(folder)


def scores(config: Config, out: Path, name: str) -> dict[Point, float]:
    """The dev score of every finished sweep run of ``name`` that the sweep's order asks for,
    given the scores before it (a diverged run: minus infinity); a run's first training's,
    so that training a selected run again can never change the selection. A run trained
    with other settings than the sweep's now is refused; one trained for fewer steps is not
    scored yet (the sweep continues it)."""
    grid, base, found = axes(config), config.train.seed, {}
    while True:
        new = {p: _score(run.folder) for p in visited(grid, config.sweep.order, found,
                                                           config.sweep.extend)
               if p not in found and _ended((run := study_run(config, out, name, p, base)).folder)
               and reuse(run.folder, run.config) != LONGER}
        if not new:
            return found
        found |= new


def _ended(folder: Path) -> bool:
    return run_dir.trained(folder) or run_dir.diverged(folder)


def _score(folder: Path) -> float:
    """A sweep run's dev score; minus infinity for a run that diverged (it loses)."""
    return run_dir.best_score(sweep_summary(folder)) if run_dir.trained(folder) else -math.inf


def borrowed(config: Config) -> dict[str, str]:
    """``{NAME: TUNED}`` from ``[study] borrow``."""
    return dict(tuple(s.strip() for s in item.split("=", 1)) for item in config.study.borrow)


def sweep(config: Config, out: Path, train: Trainer, console: Console) -> dict[str, Point]:
    """``{transform: selected point}`` of every ``[sweep] transforms``, training whatever the
    sweep still needs."""
    selected, base = {}, config.train.seed
    for name in config.sweep.transforms:
        while True:
            pending, chosen = plan(axes(config), config.sweep.order,
                                   scores(config, out, name), config.sweep.extend)
            if chosen is not None:
                selected[name] = chosen
                break
            for point in pending:
                train_if_needed(study_run(config, out, name, point, base), train, console)
    return selected


def read_selection(out: Path) -> dict[str, Point]:
    """``selected.json`` as ``{transform: point}`` (empty when there is none)."""
    found = _previous_selection(out / SELECTED) or {}
    return {name: Point(float(e["lr"]), int(e["warmup"]), float(e["label_smoothing"]))
            for name, e in found.items() if isinstance(e, dict)}


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


def continue_copy(source: Path, target: Path) -> None:
    """Start ``target`` as a copy of the finished run ``source`` (checkpoints hard-linked:
    they are only ever replaced, never written in place), without its summary, its outputs
    (``translations/``) or the record of its first training (the sweep's, not the copy's),
    so that training resumes there."""
    if (target / checkpoint.LAST).is_file():
        return
    tmp = target.with_name(f".{target.name}.copying")
    shutil.rmtree(tmp, ignore_errors=True)
    for path in sorted(source.rglob("*")):
        if (path.is_dir() or path.name == run_dir.SUMMARY
                or {"translations", run_dir.FIRST} & set(path.relative_to(source).parts)):
            continue
        dest = tmp / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".pt":
            os.link(path, dest)
        else:
            shutil.copy2(path, dest)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, target)
