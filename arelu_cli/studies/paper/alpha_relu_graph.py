"""The graph of alpha-ReLU for several alpha (the paper's Fig. arelu), as CSV rows.

``alpha_relu(x) = [(alpha - 1) x - tau]_+ ** (1 / (alpha - 1))``, evaluated with
:func:`arelu_cli.transforms.alpha_relu` in float64; with ``tau = 0`` 2-ReLU is the ordinary ReLU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import signature
from arelu_cli.transforms import alpha_relu

ALPHAS = (1.25, 1.5, 1.75, 2.0)
"""Several alpha in (1, 2], as in the paper's figure."""


def alpha_relu_curve_rows(alphas: Sequence[float] = ALPHAS, tau: float = 0.0,
                          x_min: float = -2.0, x_max: float = 3.0, points: int = 201) -> list[dict]:
    """Rows ``(alpha, tau, x, y)`` on an even grid of ``points`` x values per alpha."""
    if points < 2 or not x_min < x_max:
        raise UserError(f"the grid needs x_min < x_max and >= 2 points, got [{x_min}, {x_max}], "
                        f"{points} points")
    x = torch.linspace(x_min, x_max, points, dtype=torch.float64)
    rows = []
    for alpha in alphas:
        try:
            y = alpha_relu(x, alpha=alpha, tau=tau)
        except ValueError as err:
            raise UserError(str(err)) from None
        sig = signature(transform=f"{alpha:g}-relu", alpha=alpha, tau=tau)
        rows += [{"alpha": float(alpha), "tau": float(tau), "x": float(xi), "y": float(yi),
                  "signature": sig} for xi, yi in zip(x.tolist(), y.tolist())]
    return rows
