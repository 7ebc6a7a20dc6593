"""``arelu bench generate``: a tiny run writes a complete CSV with paired ratios; bad options
fail in one line. Times are never asserted (the benchmark checks its targets itself)."""

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.bench import generate as bench
from arelu_cli.cli import app
from arelu_cli.util.errors import UserError

COLUMNS = {"method", "transform", "decoding", "v", "batch", "d", "tau", "ms_per_step",
           "us_per_token", "ratio_to_softmax_sample", "ratio_to_softmax_top_p", "support",
           "meets_targets", "other_cpu", "signature", "select_us_per_token",
           "select_ratio_to_softmax_sample", "select_ratio_to_softmax_top_p"}


def test_quick_bench_writes_a_row_per_method_and_case(tmp_path):
    out = tmp_path / "generate.csv"
    result = CliRunner().invoke(app, ["bench", "generate", "--quick", "--vocabs", "300",
                                      "--batches", "1,3", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert COLUMNS <= set(frame.columns) and len(frame) == 2 * 6
    assert list(frame["method"][:6]) == ["softmax-sample", "softmax-top_k50",
                                         "softmax-top_p0.9", "sparsemax-sample",
                                         "1.5-entmax-sample", "1.5-relu-sample"]
    assert (frame["us_per_token"] > 0).all()
    baseline = frame[frame["method"] == "softmax-sample"]
    assert (baseline["ratio_to_softmax_sample"] == 1.0).all()
    assert (baseline["select_ratio_to_softmax_sample"] == 1.0).all()
    assert (frame["select_us_per_token"] > 0).all()
    assert (frame[frame["method"] == "softmax-top_p0.9"]["ratio_to_softmax_top_p"] == 1.0).all()
    relu = frame[frame["transform"] == "1.5-relu"]
    assert relu["meets_targets"].notna().all() and frame["meets_targets"].isna().sum() == 10
    assert (relu["tau"] > 0).all() and (relu["support"] < 300).all()   # a sparse support
    assert frame["signature"].str.contains("decoding:sample").all()


def test_the_targets_compare_the_paired_ratios(monkeypatch):
    """alpha-ReLU meets its targets exactly when both paired ratios are within them."""
    plan = bench.make_plan(quick=True, vocabs="200", batches="2", device="cpu")
    speed = {"softmax-sample": 2.0, "softmax-top_p0.9": 5.0, "1.5-relu-sample": 1.0}
    monkeypatch.setattr(bench.timing, "time_once",
                        lambda fn, setup, device: speed.get(fn.name, 3.0))
    monkeypatch.setattr(bench, "step_loop", lambda *args: _named(args))
    rows = {r["method"]: r for r in bench.case_rows(plan, 200, 2)}
    assert rows["1.5-relu-sample"]["ratio_to_softmax_sample"] == 0.5
    assert rows["1.5-relu-sample"]["ratio_to_softmax_top_p"] == 0.2
    assert rows["1.5-relu-sample"]["meets_targets"] is True
    speed["1.5-relu-sample"] = 2.6   # 0.52x top-p: misses
    rows = {r["method"]: r for r in bench.case_rows(plan, 200, 2)}
    assert rows["1.5-relu-sample"]["meets_targets"] is False


def _named(args):
    """A stand-in step loop that does nothing and carries its method's name."""
    transform, decoding = args[3], args[4]
    names = {("softmax", "sample"): "softmax-sample", ("softmax", "sample-top_p0.9"):
             "softmax-top_p0.9", ("1.5-relu", "sample"): "1.5-relu-sample"}

    def run(_state):
        return None
    run.name = names.get((transform.name, decoding.label()), "other")
    return run


def test_checkpoint_output_layer(tmp_path):
    """--checkpoint takes W, bias and (same alpha-ReLU) tau from a saved model."""
    from arelu_cli.model import checkpoint

    weight, bias = torch.randn(40, 8), torch.randn(40)
    path = tmp_path / "last.pt"
    torch.save({"format": checkpoint.FORMAT, "model": {"output.weight": weight,
                                                       "output.bias": bias},
                "transform": "1.5-relu", "tau": 0.7}, path)
    plan = bench.make_plan(quick=True, batches="2", device="cpu", checkpoint=path)
    w, b, tau, source = bench.output_layer(plan, None)
    assert torch.equal(w, weight) and torch.equal(b, bias) and tau == 0.7
    rows = bench.case_rows(plan, None, 2)
    assert {r["v"] for r in rows} == {40} and {r["source"] for r in rows} == {str(path)}


@pytest.mark.parametrize("kwargs, match", [
    (dict(vocabs="10k"), "--vocabs"), (dict(batches="0"), "--batches"),
    (dict(top_k=0), "top-k"), (dict(top_p=1.5), "top-p"), (dict(alpha=1.0), "alpha"),
    (dict(width=0), "--d"), (dict(steps=0), "--steps"), (dict(repeats=0), "--repeats"),
    (dict(logit_std=0.0), "--logit-std"), (dict(device="tpu"), "--device"),
    (dict(vocabs="100", checkpoint="x.pt"), "--vocabs does not apply"),
])
def test_bad_options_are_user_errors(kwargs, match):
    with pytest.raises(UserError, match=match):
        bench.make_plan(**kwargs)


def test_a_bad_option_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import sys

    from arelu_cli import cli

    out = tmp_path / "g.csv"
    monkeypatch.setattr(sys, "argv", ["arelu", "bench", "generate", "--top-p", "0", "--out",
                                      str(out)])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "top-p must lie in (0, 1]" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
