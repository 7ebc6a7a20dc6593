"""The language-model study's figures, drawn from its CSVs."""

import pandas as pd
import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import png_ours

from arelu_cli.studies.lm import plots


def test_the_lm_study_figures_are_drawn_from_its_csvs(tmp_path):
    summary = pd.DataFrame({
        "transform": ["softmax", "softmax", "1.5-relu"], "label": ["softmax", "softmax", "1.5-ReLU"],
        "decoding": ["sample", "greedy", "sample"], "eps_ppl_mean": [104.0, 2100.0, 166.0],
        "eps_ppl_std": [0.2, 24.0, None], "distinct_2_gap_mean": [0.03, 0.67, 0.02],
        "distinct_2_gap_std": [0.01, 0.01, None], "zipf_gap_mean": [0.09, 0.59, 0.03],
        "zipf_gap_std": [0.02, 0.03, None]})  # one seed: no std
    summary.to_csv(tmp_path / "summary.csv", index=False)
    assert png_ours(plots.plot_lm_summary(tmp_path / "summary.csv", tmp_path / "s.png"))
    summary.assign(eps_ppl_mean=[None, 2100.0, None]).to_csv(tmp_path / "none.csv", index=False)
    with pytest.raises(UserError, match="has no sampling row with an ε-perplexity; run arelu"):
        plots.plot_lm_summary(tmp_path / "none.csv", tmp_path / "none.png")
    summary.drop(columns="zipf_gap_std").to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(UserError, match=r"lacks the columns \['zipf_gap_std'\]"):
        plots.plot_lm_summary(tmp_path / "bad.csv", tmp_path / "bad.png")
    assert not (tmp_path / "none.png").exists() and not (tmp_path / "bad.png").exists()
    curves = pd.DataFrame({"transform": ["softmax"] * 4 + ["1.5-relu"] * 2,
                           "seed": [1, 1, 2, 2, 1, 1], "step": [250, 500] * 3,
                           "val_loss": [5.0, 4.9, 5.1, 4.95, 1.2, 1.1]})
    curves.to_csv(tmp_path / "dev_curves.csv", index=False)
    assert png_ours(plots.plot_lm_curves(tmp_path / "dev_curves.csv", tmp_path / "c.png"))
