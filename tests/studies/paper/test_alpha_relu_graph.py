"""The alpha-ReLU graph against its closed form."""

import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper.columns import COLUMNS
from arelu_cli.studies.paper.alpha_relu_graph import alpha_relu_curve_rows

CLOSED_FORMS = [  # alpha, tau, f(x)
    (1.5, 0.0, lambda x: max(x / 2, 0.0) ** 2),
    (2.0, 0.0, lambda x: max(x, 0.0)),
    (1.25, 0.0, lambda x: max(x / 4, 0.0) ** 4),
    (1.5, 0.3, lambda x: max(x / 2 - 0.3, 0.0) ** 2),
    (1.75, 0.1, lambda x: max(0.75 * x - 0.1, 0.0) ** (4 / 3)),
]


@pytest.mark.parametrize("alpha,tau,exact", CLOSED_FORMS)
def test_rows_follow_the_closed_form(alpha, tau, exact):
    rows = alpha_relu_curve_rows([alpha], tau=tau, x_min=-2.0, x_max=3.0, points=51)
    assert len(rows) == 51
    assert rows[0]["x"] == -2.0 and rows[-1]["x"] == 3.0
    for row in rows:
        assert row["y"] == pytest.approx(exact(row["x"]), abs=1e-12)
        assert (row["alpha"], row["tau"]) == (alpha, tau)


def test_default_alphas_and_columns():
    rows = alpha_relu_curve_rows()
    assert sorted({r["alpha"] for r in rows}) == [1.25, 1.5, 1.75, 2.0]
    assert all(tuple(r) == COLUMNS["fig_alpha_relu_curves.csv"] for r in rows)


@pytest.mark.parametrize("kwargs", [{"alphas": [1.0]}, {"alphas": [2.5]}, {"points": 1},
                                    {"x_min": 1.0, "x_max": 1.0}])
def test_bad_arguments_are_user_errors(kwargs):
    with pytest.raises(UserError):
        alpha_relu_curve_rows(**kwargs)
