"""Every figure PNG is drawn from its CSV alone."""

import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.report import plots

PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_all_draws_one_png_per_figure_csv(all_csvs):
    drawn = plots.plot_all(all_csvs)
    assert sorted(p.name for p in drawn) == sorted(
        name.replace(".csv", ".png") for name in plots.FIGURES)
    for path in drawn:
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 2000


def test_plot_all_skips_absent_csvs(tmp_path):
    assert plots.plot_all(tmp_path) == []


def test_plot_of_a_missing_csv_says_so(tmp_path):
    with pytest.raises(UserError, match="not found"):
        plots.plot_sparsity(tmp_path / "fig_sparsity.csv", tmp_path / "x.png")


def test_several_seeds_draw_every_figure(seeded_csvs):
    drawn = plots.plot_all(seeded_csvs)
    assert len(drawn) == len(plots.FIGURES)
    assert all(path.read_bytes()[:8] == PNG for path in drawn)
