"""``arelu bench translate`` (paper Fig. infTime): one timed row per model and beam size,
normalized by the fastest, timed interleaved, with ratios to softmax per beam; CSV and PNG."""

import statistics

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.bench.translate import bench_translate, parse_beams
from arelu_cli.cli import app
from arelu_cli.util.errors import UserError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_timings_interleave_models_within_each_beam_and_repeat(toy_runs):
    runs = [toy_runs["softmax"], toy_runs["1.5-relu"]]
    order = []
    bench_translate(runs, [1, 3], "test", device="cpu", max_sentences=3, repeats=2,
                    log=order.append)
    expected = [(f"repeat {r}/2: beam {b}, {name} decoding ", str(toy_runs[name]))
                for r in (1, 2) for b in (1, 3) for name in ("softmax", "1.5-relu")]
    assert len(order) == len(expected)
    assert all(line.startswith(head) and run in line for line, (head, run) in zip(order, expected))


def test_ratios_divide_by_softmax_at_the_same_beam(toy_runs):
    """Softmax listed second is still the baseline; ratio is of medians, ratio_paired the
    median of per-repeat ratios; every repeat's time is kept; scoring names the path."""
    runs = [toy_runs["1.5-relu"], toy_runs["softmax"]]
    rows = bench_translate(runs, [1, 2], "test", device="cpu", max_sentences=3, repeats=3)
    by = {(r["transform"], r["beam"]): r for r in rows}
    for beam in (1, 2):
        relu, soft = by[("1.5-relu", beam)], by[("softmax", beam)]
        relu_all = [float(x) for x in relu["seconds_all"].split()]
        soft_all = [float(x) for x in soft["seconds_all"].split()]
        assert len(relu_all) == 3 and relu["seconds"] == pytest.approx(statistics.median(relu_all),
                                                                         rel=1e-5)
        assert relu["baseline"] == soft["baseline"] == "softmax" and soft["ratio"] == 1.0
        assert relu["ratio"] == pytest.approx(relu["seconds"] / soft["seconds"])
        assert relu["ratio_paired"] == pytest.approx(
            statistics.median(r / s for r, s in zip(relu_all, soft_all)), rel=1e-4)
        assert relu["scoring"].startswith("top-k ") and soft["scoring"] == relu["scoring"]
        assert "repeats:3" in relu["signature"] and f"beam:{beam}" in relu["signature"]


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
                                           ("0,2", "at least 1"), ("", "at least one value")])
def test_bad_beams(text, message):
    with pytest.raises(UserError, match=message):
        parse_beams(text)


def test_cli_writes_csv_and_png(toy_runs, tmp_path):
    out = tmp_path / "translate.csv"
    result = CliRunner().invoke(app, [
        "bench", "translate", "--checkpoints", f"{toy_runs['softmax']},{toy_runs['1.5-entmax']}",
        "--beams", "1,2", "--max-sentences", "4", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert len(frame) == 4 and (tmp_path / "translate.png").stat().st_size > 1000
    assert {"ratio", "ratio_paired", "baseline", "seconds_all", "signature"} <= set(frame.columns)
    assert set(frame["baseline"]) == {"softmax"}
    scoring = dict(zip(frame["transform"], frame["scoring"]))
    assert scoring["softmax"].startswith("top-k ") and scoring["1.5-entmax"] == "log-scores + topk"


def test_tokens_and_ratio_per_token(toy_runs):
    """Every row counts the tokens it generated; ratio_per_token divides time per token."""
    runs = [toy_runs["softmax"], toy_runs["1.5-relu"]]
    rows = bench_translate(runs, [1], "test", device="cpu", max_sentences=4, repeats=2)
    soft, relu = rows
    assert soft["tokens"] > 4 and relu["tokens"] > 4
    assert soft["ratio_per_token"] == 1.0
    assert relu["ratio_per_token"] == pytest.approx(
        (relu["seconds"] / relu["tokens"]) / (soft["seconds"] / soft["tokens"]))
    assert relu["ms_per_token"] == pytest.approx(1000 * relu["seconds"] / relu["tokens"])


def test_same_weights_decode_as_each_transform(toy_runs):
    """--transforms: one 1.5-ReLU checkpoint decodes as softmax and as 1.5-ReLU; at beam 1
    both generate the same tokens (greedy picks the arg-max logit either way), and each
    row's baseline is the softmax decoding of its own weights."""
    rows = bench_translate([toy_runs["1.5-relu"]], [1, 2], "test", device="cpu",
                           max_sentences=5, transforms=["softmax", "1.5-relu"])
    by = {(r["transform"], r["beam"]): r for r in rows}
    assert set(by) == {(t, b) for t in ("softmax", "1.5-relu") for b in (1, 2)}
    assert {r["checkpoint"] for r in rows} == {str(rows[0]["checkpoint"])}
    assert by[("softmax", 1)]["tokens"] == by[("1.5-relu", 1)]["tokens"]
    assert by[("softmax", 1)]["ratio"] == 1.0 and by[("softmax", 2)]["ratio"] == 1.0
    assert by[("1.5-relu", 1)]["scoring"].startswith("top-k ")
    assert by[("softmax", 1)]["scoring"] == by[("1.5-relu", 1)]["scoring"]
    assert by[("1.5-relu", 1)]["tau"] is not None


def test_same_weights_alpha_relu_needs_its_tau(toy_runs):
    with pytest.raises(UserError, match="needs the tau of a 1.5-relu checkpoint"):
        bench_translate([toy_runs["softmax"]], [1], "test", device="cpu", max_sentences=2,
                        transforms=["1.5-relu"])


def test_cli_same_weights(toy_runs, tmp_path):
    out = tmp_path / "same.csv"
    result = CliRunner().invoke(app, [
        "bench", "translate", "--checkpoints", str(toy_runs["1.5-relu"]), "--transforms",
        "softmax,1.5-relu", "--beams", "1", "--max-sentences", "3", "--device", "cpu",
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame["transform"]) == ["softmax", "1.5-relu"]
    assert {"tokens", "ms_per_token", "ratio_per_token"} <= set(frame.columns)
    bad = CliRunner().invoke(app, ["bench", "translate", "--checkpoints", str(toy_runs["1.5-relu"]),
                                   "--transforms", "2-foo", "--out", str(tmp_path / "x.csv")])
    assert isinstance(bad.exception, ValueError) and "2-foo" in str(bad.exception)
