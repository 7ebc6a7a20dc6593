"""Self-normalization (paper Fig. self_norm): per-step sums of the output match a direct sum;
the summary and histogram describe them; normalizing transforms sum to one."""

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.analysis.self_norm import histogram_rows, output_sums, summary_row
from arelu_cli.cli import app
from arelu_cli.decode.translate import decode_config, open_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def test_sums_match_a_direct_sum(toy_runs):
    decoder = open_checkpoint(toy_runs["1.5-relu"], device="cpu")
    cfg = decode_config(decoder, beam=2)
    encoded, eos = decoder.data.split("test"), decoder.data.eos_id
    indices = np.arange(10)
    direct = []
    for i in indices:
        src = torch.tensor([encoded.src(int(i)).tolist() + [eos]])
        tgt_in = torch.tensor([[decoder.data.bos_id] + encoded.tgt(int(i)).tolist()])
        with torch.no_grad():
            direct += decoder.transform.probs(decoder.model(src, tgt_in)[0]).sum(-1).tolist()
    sums = output_sums(decoder, "test", "reference", cfg, indices=indices)
    assert np.sort(sums) == pytest.approx(np.sort(direct), abs=1e-5)
    row = summary_row(decoder, "test", "reference", sums, cfg, 10)
    assert row["steps"] == len(direct) and row["mean"] == pytest.approx(np.mean(direct), abs=1e-6)
    assert row["min"] <= row["q05"] <= row["q50"] <= row["q95"] <= row["max"]
    hist = histogram_rows(decoder, "test", "reference", sums, cfg, 10, bins=7)
    assert len(hist) == 7 and sum(r["steps"] for r in hist) == len(direct)


def test_softmax_sums_to_one(toy_runs):
    decoder = open_checkpoint(toy_runs["softmax"], device="cpu")
    sums = output_sums(decoder, "test", "beam", decode_config(decoder, beam=2),
                       indices=np.arange(5))
    assert len(sums) > 0 and sums == pytest.approx(np.ones_like(sums), abs=1e-5)


def test_cli_writes_summary_histogram_and_png(toy_runs, tmp_path):
    out = tmp_path / "self_norm.csv"
    result = CliRunner().invoke(app, [
        "self-norm", "--checkpoint", str(toy_runs["1.5-relu"]), "--split", "test",
        "--along", "both", "--max-sentences", "8", "--beam", "2", "--device", "cpu",
        "--out", str(out), "--plot"])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(out)
    assert list(summary["along"]) == ["reference", "beam"] and "q95" in summary.columns
    hist = pd.read_csv(tmp_path / "self_norm_hist.csv")
    steps = dict(zip(summary["along"], summary["steps"]))
    assert hist.groupby("along")["steps"].sum().to_dict() == steps
    assert (tmp_path / "self_norm.png").stat().st_size > 1000
