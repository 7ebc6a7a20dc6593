"""The one verdict rule: better, worse, same or inconclusive from a bootstrap row's interval,
never its p."""

import math

import pytest

from arelu_cli.studies.verdict import BETTER, INCONCLUSIVE, SAME, WORSE, verdict


@pytest.mark.parametrize("delta, low, high, higher, expected", [
    (1.0, 0.2, 1.8, True, BETTER), (1.0, 0.2, 1.8, False, WORSE),
    (-1.0, -1.8, -0.2, True, WORSE), (-1.0, -1.8, -0.2, False, BETTER),
    (0.5, -0.1, 1.1, True, INCONCLUSIVE), (0.0, 0.0, 0.0, True, SAME),
    (0.3, 0.0, 0.6, True, INCONCLUSIVE),  # an interval touching 0 decides nothing
    (0.3, None, None, True, INCONCLUSIVE), (0.3, math.nan, 0.6, True, INCONCLUSIVE)])
def test_the_interval_decides(delta, low, high, higher, expected):
    row = {"delta": delta, "delta_low": low, "delta_high": high, "p_value": 0.001}
    assert verdict(row, higher) == expected


def test_p_is_never_read():
    row = {"delta": 0.5, "delta_low": -0.1, "delta_high": 1.1}
    assert verdict(row | {"p_value": 0.001}) == verdict(row | {"p_value": 0.9}) == INCONCLUSIVE
