"""The analysis commands' PNGs: drawn from their CSV, marked as arelu's, never over a user's."""

import pandas as pd
import pytest

from arelu_cli.studies import plots
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
