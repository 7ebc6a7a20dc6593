"""The sweep's plan: which configurations a grid or a sequential sweep trains, and which wins."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from arelu_cli.studies.sweep import Point, best, grid_points, plan, visited

AXES = {"lr": [0.15, 0.3, 0.6, 1.2], "warmup": [300], "label_smoothing": [0.0, 0.1]}


def lrs(points):
    return [p.lr for p in points]


def test_point_name_is_the_run_folder():
    assert Point(0.3, 300, 0.0).name == "lr-0.3_warmup-300_ls-0"
    assert Point(1.2, 4000, 0.1).name == "lr-1.2_warmup-4000_ls-0.1"


def test_sequential_tunes_lr_then_label_smoothing_at_the_best_lr():
    pending, chosen = plan(AXES, "sequential", {})
    assert chosen is None and lrs(pending) == [0.15, 0.3, 0.6, 1.2]
    assert {p.label_smoothing for p in pending} == {0.0}
    scores = dict(zip(pending, [28.0, 31.5, 30.0, 7.0]))
    pending, chosen = plan(AXES, "sequential", scores)
    assert chosen is None and pending == [Point(0.3, 300, 0.1)]  # warmup has one value
    scores[Point(0.3, 300, 0.1)] = 30.9
    assert plan(AXES, "sequential", scores) == ([], Point(0.3, 300, 0.0))
    scores[Point(0.3, 300, 0.1)] = 32.0
    assert plan(AXES, "sequential", scores) == ([], Point(0.3, 300, 0.1))
    assert [p.name for p in visited(AXES, "sequential", scores)] == [
        "lr-0.15_warmup-300_ls-0", "lr-0.3_warmup-300_ls-0", "lr-0.6_warmup-300_ls-0",
        "lr-1.2_warmup-300_ls-0", "lr-0.3_warmup-300_ls-0.1"]


def test_a_partly_scored_round_asks_only_for_the_rest():
    scores = {Point(0.15, 300, 0.0): 20.0, Point(0.6, 300, 0.0): 25.0}
    pending, chosen = plan(AXES, "sequential", scores)
    assert chosen is None and lrs(pending) == [0.3, 1.2]


def test_grid_trains_every_combination():
    pending, chosen = plan(AXES, "grid", {})
    assert chosen is None and len(pending) == 8 == len(grid_points(AXES))
    scores = {p: float(i) for i, p in enumerate(pending)}
    assert plan(AXES, "grid", scores) == ([], pending[-1])


def test_ties_go_to_the_point_listed_first():
    points = [Point(0.3, 300, 0.0), Point(0.6, 300, 0.0)]
    assert best(points, {points[0]: 30.0, points[1]: 30.0}) == points[0]


def test_bad_axes_and_orders_are_errors():
    with pytest.raises(ValueError, match="no values"):
        plan({**AXES, "lr": []}, "sequential", {})
    with pytest.raises(ValueError, match="order"):
        plan(AXES, "random", {})


@settings(deadline=None, max_examples=50)
@given(st.lists(st.floats(0, 60, allow_nan=False), min_size=8, max_size=8))
def test_the_selected_point_is_the_best_of_its_last_round(values):
    scores, selected, calls = {}, None, 0
    while selected is None:
        pending, selected = plan(AXES, "sequential", scores)
        for p in pending:
            scores[p] = values[len(scores)]
        calls += 1
    assert calls == 3  # lr round, label-smoothing round, then the answer
    lr_round = [p for p in scores if p.label_smoothing == 0.0]
    assert scores[selected] >= max(scores[p] for p in lr_round if p.lr == selected.lr)
    assert scores[selected] == max(scores[p] for p in scores if p.lr == selected.lr)


def score_by_lr(best_lr):
    """A dev score that peaks at ``best_lr`` (in log lr), whatever else the point has."""
    import math
    return lambda p: -abs(math.log(p.lr / best_lr))


def walk(axes, order, score, extend):
    scores, rounds = {}, 0
    while True:
        pending, chosen = plan(axes, order, scores, extend)
        if chosen is not None:
            return chosen, scores, rounds
        scores |= {p: score(p) for p in pending}
        rounds += 1


@pytest.mark.parametrize("order", ["sequential", "grid"])
def test_extend_goes_past_the_end_the_best_lr_sits_at_until_it_is_inside(order):
    axes = {"lr": [0.2, 0.4, 0.8, 1.6], "warmup": [400], "label_smoothing": [0.0]}
    chosen, scores, _ = walk(axes, order, score_by_lr(3.0), extend=3)
    assert chosen.lr == 3.2 and sorted(lrs(scores)) == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4]
    chosen, scores, _ = walk(axes, order, score_by_lr(0.07), extend=3)
    assert chosen.lr == 0.05 and sorted(lrs(scores)) == [0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
    # inside the listed grid: nothing is added, as without extend
    chosen, scores, _ = walk(axes, order, score_by_lr(0.5), extend=3)
    assert chosen.lr == 0.4 and sorted(lrs(scores)) == [0.2, 0.4, 0.8, 1.6]
    # the bound: at most `extend` values past an end, the last of them selected if best
    chosen, scores, _ = walk(axes, order, score_by_lr(100.0), extend=2)
    assert chosen.lr == 6.4 and max(lrs(scores)) == 6.4
    assert walk(axes, order, score_by_lr(100.0), extend=0)[0].lr == 1.6


def test_extend_keeps_the_other_axes_and_lists_new_points_last():
    chosen, scores, _ = walk(AXES, "grid", score_by_lr(5.0), extend=1)
    assert chosen.lr == 2.4 and len(scores) == 10  # both label smoothings at the new lr
    order = visited(AXES, "grid", scores, extend=1)
    assert lrs(order[-2:]) == [2.4, 2.4] and order[:8] == grid_points(AXES)
    # sequential: the later axes are tuned at the extended lr
    chosen, scores, _ = walk(AXES, "sequential", score_by_lr(5.0), extend=1)
    assert chosen.lr == 2.4 and Point(2.4, 300, 0.1) in scores


def test_a_tie_with_an_added_lr_goes_to_the_listed_one():
    axes = {"lr": [0.4, 0.8], "warmup": [400], "label_smoothing": [0.0]}
    chosen, scores, _ = walk(axes, "grid", lambda p: 1.0 if p.lr >= 0.8 else 0.0, extend=1)
    assert lrs(scores) == [0.4, 0.8, 1.6] and chosen.lr == 0.8
