"""The one verdict rule of every study: a system is **better** or **worse** than its baseline
when the 95% interval of their paired bootstrap difference
(:func:`arelu_cli.analysis.significance.paired`) lies on one side of 0, the **same** when the
difference is 0 on every resample (nothing differs to test), and **inconclusive** otherwise
(the interval includes 0, or it could not be computed).

The p-value a bootstrap row also carries is never read here: sacrebleu's ``--paired-bs``
p-value folds the resampled differences before centring them, in effect a one-sided test,
and near the boundary it can fall under 0.05 while the interval includes 0
(:mod:`arelu_cli.analysis.significance` says why the interval is the one to read).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

BETTER, WORSE, SAME, INCONCLUSIVE = "better", "worse", "same", "inconclusive"


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def verdict(row: Mapping[str, object], higher_is_better: bool = True) -> str:
    """:data:`BETTER`, :data:`WORSE`, :data:`SAME` or :data:`INCONCLUSIVE` for a paired
    bootstrap row (``delta``, ``delta_low``, ``delta_high``: system minus baseline), where a
    larger statistic is better (``higher_is_better``) or a smaller one is."""
    delta, low, high = (row.get(key) for key in ("delta", "delta_low", "delta_high"))
    if any(_missing(v) for v in (delta, low, high)):
        return INCONCLUSIVE
    if low == high == delta == 0:
        return SAME
    if low <= 0 <= high:
        return INCONCLUSIVE
    return BETTER if (low > 0) == higher_is_better else WORSE
