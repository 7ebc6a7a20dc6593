"""A tuning sweep as a practitioner runs one before comparing transforms: which training
configurations to try, and which one wins on dev BLEU.

A configuration (:class:`Point`) is the Noam learning-rate factor, its warmup and the label
smoothing. ``[sweep] order = "grid"`` tries every combination of the listed values;
``"sequential"`` tunes one axis at a time in the order lr, warmup, label smoothing, each at
the best values found so far (the later axes start at their first listed value), which is how
the study tunes lr first and then label smoothing at each transform's best lr. Selection uses
**dev** BLEU only (the best validation BLEU of a run); the test set is read once, for the
selected configuration. Pure functions: the caller trains the points and reports their scores.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

AXES = ("lr", "warmup", "label_smoothing")


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


def grid_points(axes: Mapping[str, Sequence[float]]) -> list[Point]:
    """Every combination of the axes' values, in the listed order."""
    return [Point(float(lr), int(w), float(ls))
            for lr, w, ls in itertools.product(*(axes[a] for a in AXES))]


def best(points: Sequence[Point], scores: Mapping[Point, float]) -> Point:
    """The point with the highest dev BLEU; a tie goes to the one listed first."""
    return max(points, key=lambda p: (scores[p], -points.index(p)))


def _start(axes: Mapping[str, Sequence[float]]) -> Point:
    return Point(float(axes["lr"][0]), int(axes["warmup"][0]), float(axes["label_smoothing"][0]))


def _rounds(axes: Mapping[str, Sequence[float]], order: str,
            scores: Mapping[Point, float]) -> Iterator[list[Point]]:
    """The groups of points the order tries, one after another; it stops after the first
    group that is not fully scored (what comes next depends on that group's winner)."""
    for axis in AXES:
        if not axes[axis]:
            raise ValueError(f"the sweep's {axis} axis has no values")
    if order == "grid":
        yield grid_points(axes)
        return
    if order != "sequential":
        raise ValueError(f"unknown sweep order {order!r}")
    current = _start(axes)
    for axis in AXES:
        candidates = list(dict.fromkeys(current.with_(axis, v) for v in axes[axis]))
        yield candidates
        if any(p not in scores for p in candidates):
            return
        current = best(candidates, scores)


def plan(axes: Mapping[str, Sequence[float]], order: str,
         scores: Mapping[Point, float]) -> tuple[list[Point], Point | None]:
    """``(pending, selected)``: the points to train next (those without a score yet), or,
    when every point the order needs has a score, ``([], the selected point)``.

    Call it again after training the pending points: a sequential sweep reveals its next
    axis only once the previous one is decided, so the calls walk it axis by axis, and a
    sweep interrupted anywhere continues from the scores already there.
    """
    last: list[Point] = []
    for candidates in _rounds(axes, order, scores):
        pending = [p for p in candidates if p not in scores]
        if pending:
            return pending, None
        last = candidates
    return [], best(last, scores)


def visited(axes: Mapping[str, Sequence[float]], order: str,
            scores: Mapping[Point, float]) -> list[Point]:
    """Every point the sweep has asked for so far, in the order it asked (its table's rows)."""
    return list(dict.fromkeys(p for group in _rounds(axes, order, scores) for p in group))
