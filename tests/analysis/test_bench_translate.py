"""``arelu bench translate`` (paper Fig. infTime): one timed row per model and beam size,
normalized by the fastest; CSV and PNG."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.analysis.bench_translate import bench_translate, parse_beams
from arelu_cli.cli import app
from arelu_cli.errors import UserError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rows_per_model_and_beam(toy_runs):
    runs = [toy_runs["softmax"], toy_runs["1.5-relu"]]
    rows = bench_translate(runs, [1, 3], "test", device="cpu", max_sentences=6)
    assert [(r["transform"], r["beam"]) for r in rows] == [
        ("softmax", 1), ("softmax", 3), ("1.5-relu", 1), ("1.5-relu", 3)]
    assert min(r["normalized"] for r in rows) == 1.0
    for r in rows:
        assert r["sentences"] == 6 and r["seconds"] > 0
        assert r["normalized"] == pytest.approx(r["seconds"] / min(x["seconds"] for x in rows))


@pytest.mark.parametrize("text, message", [("1,x", "comma-separated integers"),
                                           ("0,2", "at least 1"), ("", "at least 1")])
def test_bad_beams(text, message):
    with pytest.raises(UserError, match=message):
        parse_beams(text)


def test_cli_writes_csv_and_png(toy_runs, tmp_path):
    out = tmp_path / "translate.csv"
    result = CliRunner().invoke(app, [
        "bench", "translate", "--checkpoints", f"{toy_runs['softmax']},{toy_runs['1.5-entmax']}",
        "--beams", "1,2", "--max-sentences", "4", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(out)) == 4 and (tmp_path / "translate.png").stat().st_size > 1000
