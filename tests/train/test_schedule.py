"""Noam decay and OpenNMT-py's weight averaging."""

import pytest
import torch

from arelu_cli.train.schedule import average_weight, noam_lr, update_average


@pytest.mark.parametrize("step, expected", [
    (1, 2.0 * 512 ** -0.5 * 4000 ** -1.5),
    (4000, 2.0 * 512 ** -0.5 * 4000 ** -0.5),     # the peak
    (16000, 2.0 * 512 ** -0.5 * 16000 ** -0.5),
    (0, 2.0 * 512 ** -0.5 * 4000 ** -1.5),        # step 0 is treated as 1
])
def test_noam(step, expected):
    assert noam_lr(step, 2.0, 512, 4000) == pytest.approx(expected)


def test_noam_peaks_at_warmup():
    rates = [noam_lr(s, 2.0, 512, 100) for s in range(1, 400)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 100


def test_average_weight_starts_large_then_settles():
    assert average_weight(1, 0.0005) == pytest.approx(1 - 2 / 11)
    assert average_weight(10**6, 0.0005) == 0.0005


def test_update_average_in_place():
    avg, new = [torch.zeros(3)], [torch.ones(3)]
    update_average(avg, new, 0.25)
    assert torch.allclose(avg[0], torch.full((3,), 0.25))
