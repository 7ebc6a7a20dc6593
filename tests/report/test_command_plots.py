"""The analysis commands' PNGs: drawn from their CSV, marked as arelu's, never over a user's."""

import pandas as pd
import pytest

from arelu_cli.report import plots
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import png_ours


def _timing_csv(path):
    pd.DataFrame({"transform": ["softmax", "1.5-relu"] * 2, "checkpoint": ["a", "b"] * 2,
                  "beam": [1, 1, 2, 2], "normalized": [1.0, 0.9, 1.0, 1.1]}).to_csv(path, index=False)
    return path


def test_a_figure_is_marked_and_replaced_only_when_arelu_drew_it(tmp_path):
    csv, png = _timing_csv(tmp_path / "t.csv"), tmp_path / "t.png"
    assert png_ours(plots.plot_inference_time(csv, png))
    plots.plot_inference_time(csv, png)  # its own figure: replaced
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)  # someone else's file of that name
    before = png.read_bytes()
    with pytest.raises(UserError, match=r"t.png exists and was not written by arelu"):
        plots.plot_inference_time(csv, png)
    assert png.read_bytes() == before


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
