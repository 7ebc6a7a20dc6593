"""The tuned study's figures, drawn from its CSVs."""

import pandas as pd
import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import png_ours

from arelu_cli.studies.tuned import plots


def test_the_study_figures_are_drawn_from_its_csvs(tmp_path):
    curves = pd.DataFrame({"transform": ["softmax"] * 6 + ["1.5-relu"] * 3,
                           "seed": [1, 1, 2, 2, 1, 1, 1, 1, 1],
                           "step": [3, 6, 3, 6, 3, 9, 3, 6, 9],
                           "dev_bleu": [1.0, 2.0, 1.5, 2.5, 1.0, 3.0, 2.0, 3.0, 4.0],
                           "train_steps": [6, 6, 6, 6, 9, 9, 9, 9, 9]})
    curves.to_csv(tmp_path / "dev_curves.csv", index=False)
    assert png_ours(plots.plot_study_curves(tmp_path / "dev_curves.csv", tmp_path / "c.png"))
    sweep = pd.DataFrame({"transform": ["softmax"] * 3, "lr": [0.3, 0.6, 0.3],
                          "warmup": [300] * 3, "label_smoothing": [0.0, 0.0, 0.1],
                          "dev_bleu": [37.7, 34.0, 37.9], "selected": [False, False, True]})
    sweep.to_csv(tmp_path / "sweep.csv", index=False)
    assert png_ours(plots.plot_study_sweep(tmp_path / "sweep.csv", tmp_path / "s.png"))
    sweep.drop(columns="selected").to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(UserError, match=r"lacks the columns \['selected'\]"):
        plots.plot_study_sweep(tmp_path / "bad.csv", tmp_path / "bad.png")
