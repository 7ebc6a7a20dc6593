"""Sparsity (paper Figs. sparsity): zero counts per decoding step match a direct count, both
teacher-forced on the references and along the beam output; the CLI writes CSV and PNG."""

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.analysis.sparsity import distribution_rows, summary, zero_counts
from arelu_cli.analysis.steps import sample_indices, split_indices
from arelu_cli.cli import app
from arelu_cli.decode.translate import decode_config, decode_sources, open_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def _direct_counts(decoder, sources, targets):
    """Zeros of the output at every position of ``targets`` (each ending where it ends)."""
    counts = []
    for source, target in zip(sources, targets):
        src = torch.tensor([source + [decoder.data.eos_id]])
        tgt_in = torch.tensor([[decoder.data.bos_id] + target[:-1]])
        with torch.no_grad():
            probs = decoder.transform.probs(decoder.model(src, tgt_in)[0].float())
        counts += [int((row == 0).sum()) for row in probs]
    return np.sort(np.array(counts))


@pytest.mark.parametrize("name", ["1.5-relu", "1.5-entmax"])
def test_counts_match_a_direct_count(toy_runs, name):
    decoder = open_checkpoint(toy_runs[name], device="cpu")
    cfg = decode_config(decoder, beam=3, max_tokens=120)
    encoded, eos = decoder.data.split("test"), decoder.data.eos_id
    indices = np.arange(0, len(encoded), 2)
    sources = [encoded.src(int(i)).tolist() for i in indices]
    references = [encoded.tgt(int(i)).tolist() + [eos] for i in indices]
    counted = zero_counts(decoder, "test", "reference", cfg, indices=indices)
    assert np.array_equal(np.sort(counted), _direct_counts(decoder, sources, references))
    assert counted.max() > 0  # the toy models' outputs do have zeros
    best = [hs[0] for hs in decode_sources(decoder, sources, cfg)]
    outputs = [h.tokens + [eos] * h.ended for h in best]
    counted = zero_counts(decoder, "test", "beam", cfg, indices=indices)
    assert np.array_equal(np.sort(counted), _direct_counts(decoder, sources, outputs))


def test_distribution_rows_hold_every_step(toy_runs):
    decoder = open_checkpoint(toy_runs["1.5-relu"], device="cpu")
    counts = np.array([5, 7, 5, 5, 300])
    rows = distribution_rows(decoder, "test", "reference", counts, decode_config(decoder), 2)
    assert [(r["zeros"], r["steps"]) for r in rows] == [(5, 3), (7, 1), (300, 1)]
    assert rows[2]["zero_fraction"] == pytest.approx(300 / decoder.data.vocab_size)
    stats = summary(pd.DataFrame(rows)).iloc[0]
    assert stats["steps"] == 5 and stats["mean_zeros"] == pytest.approx(counts.mean())
    assert stats["median_zeros"] == 5


def test_train_is_sampled(toy_runs):
    decoder = open_checkpoint(toy_runs["softmax"], device="cpu")
    assert len(split_indices(decoder, "train", None)) == 1000
    assert len(split_indices(decoder, "test", None)) == 40
    picked = sample_indices(2000, 10, seed=3)
    assert len(set(picked.tolist())) == 10 and np.array_equal(picked, sample_indices(2000, 10, 3))


def test_cli_writes_csv_and_png(toy_runs, tmp_path):
    out = tmp_path / "sparsity.csv"
    result = CliRunner().invoke(app, [
        "sparsity", "--checkpoint", str(toy_runs["1.5-relu"]), "--checkpoint",
        str(toy_runs["1.5-entmax"]), "--split", "test", "--split", "train", "--max-sentences", "6",
        "--beam", "2", "--device", "cpu", "--out", str(out), "--plot"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["along"]) == {"reference", "beam"} and set(frame["split"]) == {"test", "train"}
    assert set(frame["transform"]) == {"1.5-relu", "1.5-entmax"}
    assert (tmp_path / "sparsity.png").stat().st_size > 1000


@pytest.mark.parametrize("name", ["softmax", "1.5-entmax", "1.5-relu"])
def test_nan_weights_are_refused_not_counted(toy_runs, name):
    """Teacher-forced on the references no decoding runs first to notice NaN logits: the
    steps refuse them themselves instead of counting NaN outputs as non-zero."""
    from arelu_cli.util.errors import UserError

    decoder = open_checkpoint(toy_runs[name], device="cpu")
    with torch.no_grad():
        for param in decoder.model.parameters():
            param.fill_(float("nan"))
    with pytest.raises(UserError, match="NaN logits while measuring its outputs"):
        zero_counts(decoder, "test", "reference", decode_config(decoder, beam=2),
                    indices=np.arange(4))
