"""The conversion study's epsilon-perplexity ratios: paired by seed, resampled over seeds by
the one bootstrap; exact for step 0's fixed models, without an interval for one seed."""

from __future__ import annotations

import numpy as np
import pytest

from arelu_cli.analysis.significance import SEED, bootstrap_chunks, interval
from arelu_cli.studies.convert.tables import ratio_row
from arelu_cli.studies.verdict import BETTER, INCONCLUSIVE, WORSE, verdict


def test_step_zero_compares_two_fixed_models_exactly():
    row = ratio_row({None: 306.0}, {None: 102.0}, 1.02, 1000)
    assert row["value"] == pytest.approx(3.0) and row["seeds"] == "-"
    assert row["delta_low"] == row["delta_high"] == row["delta"] == pytest.approx(1.98)
    assert verdict(row, higher_is_better=False) == WORSE


def test_one_seed_gives_no_interval():
    row = ratio_row({1: 101.0, 2: 99.0}, {1: 100.0}, 1.02, 1000)   # seed 2 has no partner
    assert row["seeds"] == "1" and row["value"] == pytest.approx(1.01)
    assert row["delta_low"] is None and verdict(row, higher_is_better=False) == INCONCLUSIVE


def test_seeds_are_paired_and_resampled_by_the_one_bootstrap():
    mine, theirs = {1: 101.0, 2: 100.5, 3: 101.5}, {1: 100.0, 2: 99.0, 3: 100.0}
    row = ratio_row(mine, theirs, 1.02, 1000)
    ratios = np.array([mine[s] / theirs[s] for s in (1, 2, 3)])
    assert row["seeds"] == "1+2+3" and row["value"] == pytest.approx(ratios.mean())
    index = np.concatenate(list(bootstrap_chunks(3, 1000, SEED)))
    low, high = interval(ratios[index].mean(axis=1) - 1.02, ratios.mean() - 1.02)
    assert (row["delta_low"], row["delta_high"]) == pytest.approx((low, high))
    assert ratios.min() - 1.02 <= row["delta_low"] + 1e-3 and \
        row["delta_high"] - 1e-3 <= ratios.max() - 1.02    # three seeds: about their range
    assert verdict(row, higher_is_better=False) == BETTER   # every seed under 1.02


def test_no_shared_seed_is_no_row():
    assert ratio_row({1: 1.0}, {2: 1.0}, 1.0, 1000) is None
