"""The paper's figures: every PNG drawn from its CSV alone."""

import pytest

from arelu_cli.studies.paper import plots
from arelu_cli.util.errors import UserError

PNG = b"\x89PNG\r\n\x1a\n"


def _draw_all(folder):
    return [draw(folder / name, (folder / name).with_suffix(".png"))
            for name, draw in plots.FIGURES.items()]


def test_one_png_per_figure_csv(all_csvs):
    for path in _draw_all(all_csvs):
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 2000


def test_plot_of_a_missing_csv_says_so(tmp_path):
    with pytest.raises(UserError, match="not found"):
        plots.plot_sparsity(tmp_path / "fig_sparsity.csv", tmp_path / "x.png")


def test_several_seeds_draw_every_figure(seeded_csvs):
    assert all(path.read_bytes()[:8] == PNG for path in _draw_all(seeded_csvs))
