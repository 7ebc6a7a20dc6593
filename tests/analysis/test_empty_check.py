"""Empty check (paper Table 2): both scores agree with a brute-force teacher-forced score of
the empty string and of the beam hypothesis, with and without renormalization."""

import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.model import checkpoint
from arelu_cli.analysis.empty_check import check_split, measure
from arelu_cli.cli import app, main
from arelu_cli.util.errors import UserError
from arelu_cli.decode.translate import decode_config, decode_sources, open_checkpoint, resolve_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def _brute_force(decoder, src, sequence, renormalize):
    """Sum of log p (or log p / sum p) of ``sequence`` given ``src``, one full forward."""
    tgt_in = torch.tensor([[decoder.data.bos_id] + sequence[:-1]])
    with torch.no_grad():
        probs = decoder.transform.probs(decoder.model(src, tgt_in)[0].float()).double()
    if renormalize:
        probs = probs / probs.sum(-1, keepdim=True)
    return float(sum(math.log(probs[t, tok]) if probs[t, tok] > 0 else -math.inf
                     for t, tok in enumerate(sequence)))


@pytest.mark.parametrize("name, renormalize", [("softmax", False), ("1.5-entmax", False),
                                               ("1.5-relu", False), ("1.5-relu", True)])
def test_scores_agree_with_brute_force(toy_runs, name, renormalize):
    decoder = open_checkpoint(toy_runs[name], device="cpu")
    cfg = decode_config(decoder, beam=3)
    encoded, eos = decoder.data.split("dev"), decoder.data.eos_id
    indices = np.arange(0, len(encoded), 3)
    checks = check_split(decoder, "dev", cfg, indices=indices, renormalize=renormalize)
    sources = [encoded.src(int(i)).tolist() for i in indices]
    best = [hs[0] for hs in decode_sources(decoder, sources, cfg, renormalize=renormalize)]
    assert [c.index for c in checks] == indices.tolist()
    for check, source, hyp in zip(checks, sources, best):
        src = torch.tensor([source + [eos]])
        empty = _brute_force(decoder, src, [eos], renormalize)
        full = _brute_force(decoder, src, hyp.tokens + [eos] * hyp.ended, renormalize)
        assert check.empty_score == pytest.approx(empty, abs=1e-4)
        assert check.hyp_score == pytest.approx(full, abs=1e-4)
        assert check.hyp_length == len(hyp.tokens)
        assert check.empty_better == (empty > full + 1e-9) or abs(empty - full) < 1e-4


def test_summary_counts(toy_runs):
    decoder = open_checkpoint(toy_runs["1.5-relu"], device="cpu")
    summaries, details = measure(decoder, ["dev", "test"], decode_config(decoder, beam=2),
                                 max_sentences=10)
    assert [r["split"] for r in summaries] == ["dev", "test"] and len(details) == 20
    for row in summaries:
        part = [d for d in details if d["split"] == row["split"]]
        assert row["sentences"] == 10
        assert row["empty_better"] == sum(d["empty_better"] for d in part)
        assert row["empty_better_pct"] == pytest.approx(10.0 * row["empty_better"])
        assert row["empty_nonzero"] == sum(math.isfinite(d["empty_score"]) for d in part)
        assert row["beam_empty"] == sum(d["hyp_length"] == 0 for d in part)
        assert "transform:1.5-relu" in row["signature"] and "beam:2" in row["signature"]


def test_cli_writes_one_row_per_checkpoint_and_split(toy_runs, tmp_path):
    out = tmp_path / "empty.csv"
    result = CliRunner().invoke(app, [
        "empty-check", "--checkpoint", str(toy_runs["softmax"]), "--checkpoint",
        str(toy_runs["1.5-relu"]), "--split", "dev", "--beam", "2", "--max-sentences", "8",
        "--renormalize", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("transform,alpha,tau,split,renormalize")
    assert (tmp_path / "empty_sentences.csv").read_text().count("\n") == 17



def _nan_checkpoint(run, path):
    """A copy of ``run``'s checkpoint with every weight NaN (a run that diverged)."""
    ckpt = checkpoint.load(resolve_checkpoint(run))
    for key in ("model", "average"):
        if ckpt.get(key) is not None:
            ckpt[key] = {k: v.clone().fill_(math.nan) if v.is_floating_point() else v
                         for k, v in ckpt[key].items()}
    return checkpoint.save({k: v for k, v in ckpt.items() if k != "format"}, path)


@pytest.mark.parametrize("name, beam", [("softmax", 1), ("1.5-entmax", 2), ("1.5-relu", 2)])
def test_nan_weights_are_a_one_line_error(toy_runs, tmp_path, monkeypatch, capsys, name, beam):
    nan, out = _nan_checkpoint(toy_runs[name], tmp_path / "nan.pt"), tmp_path / "empty.csv"
    monkeypatch.setattr("sys.argv", [
        "arelu", "empty-check", "--checkpoint", str(nan), "--split", "dev", "--beam", str(beam),
        "--max-sentences", "4", "--device", "cpu", "--out", str(out)])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "NaN logits" in err and "weights are not finite" in err and not out.exists()


def test_nan_logits_of_the_empty_translation_are_refused(toy_runs, monkeypatch):
    """Scoring the empty translation refuses NaN logits itself, not only through decoding."""
    decoder = open_checkpoint(toy_runs["softmax"], device="cpu")
    forward = decoder.model.forward

    def nan_forward(*args, **kwargs):  # the teacher-forced pass only; decoding runs step()
        return forward(*args, **kwargs).fill_(math.nan)
    monkeypatch.setattr(decoder.model, "forward", nan_forward)
    with pytest.raises(UserError, match="NaN logits while scoring"):
        check_split(decoder, "dev", decode_config(decoder, beam=2), indices=np.arange(3))
