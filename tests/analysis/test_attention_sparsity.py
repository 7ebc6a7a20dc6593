"""Attention sparsity (``arelu sparsity --attention``): the counted pairs, counts that match a
direct count sentence by sentence, the heatmap rows, and the CLI's CSVs and PNG, on a tiny
model trained with alpha-ReLU attention (whose checkpoint records the choice)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.analysis import attention_sparsity as att
from arelu_cli.cli import app
from arelu_cli.util.errors import UserError
from arelu_cli.decode.translate import decode_config, open_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def relu_run(tiny_corpus, tiny_config, tmp_path_factory):
    """A tiny model trained 6 steps with 1.5-ReLU attention (estimated tau) everywhere but
    the encoder (1.5-entmax)."""
    from arelu_cli.train.loop import train

    config = tiny_config(tiny_corpus, max_steps=6)
    model = dataclasses.replace(config.model, attention="1.5-relu", attention_relu="estimated",
                                attention_encoder="1.5-entmax")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train(dataclasses.replace(config, model=model),
                     tmp_path_factory.mktemp("runs") / "relu-attention").out
    finally:
        torch.set_num_threads(threads)


def test_counted_pairs_and_counts_on_a_hand_made_case():
    src_real = torch.tensor([[True, True, False]])
    keep = torch.tensor([[True, True]])
    assert att.visible_pairs("encoder", src_real, keep)[0, 0].tolist() == [
        [True, True, False], [True, True, False], [False, False, False]]
    assert att.visible_pairs("decoder", src_real, keep)[0, 0].tolist() == [[True, False],
                                                                           [True, True]]
    assert att.visible_pairs("cross", src_real, keep)[0, 0].tolist() == [[True, True, False],
                                                                         [True, True, False]]
    weights = torch.tensor([[[[0.0, 0.0, 9.0], [0.5, 0.0, 0.0]]]])  # (1, 1, 2, 3)
    counts = att.zero_counts(weights, att.visible_pairs("cross", src_real, keep))
    assert counts == {"weights": 4, "zeros": 3, "queries": 2, "empty_queries": 1}


def _direct_counts(decoder, sources, targets):
    """Counts per (kind, layer), each sentence run alone (no padding to mask)."""
    totals = {}
    for source, target in zip(sources, targets):
        src = torch.tensor([source + [decoder.data.eos_id]])
        tgt_in = torch.tensor([[decoder.data.bos_id] + target[:-1]])
        with att.kept_weights(decoder.model) as layers, torch.no_grad():
            decoder.model(src, tgt_in)
            for kind, i, module in layers:
                w = module.weights
                visible = torch.ones_like(w, dtype=torch.bool)
                if kind == "decoder":
                    visible = visible.tril()
                into = totals.setdefault((kind, i), {"weights": 0, "zeros": 0})
                into["weights"] += int(visible.sum())
                into["zeros"] += int(((w == 0) & visible).sum())
    return totals


def test_counts_match_a_direct_count_and_the_checkpoint_records_the_attention(relu_run):
    decoder = open_checkpoint(relu_run, device="cpu")
    assert decoder.config.model.attention == "1.5-relu"
    assert "attention:encoder=1.5-entmax;decoder=1.5-relu/estimated;" in decoder.signature()
    cfg = decode_config(decoder, beam=2, max_tokens=120)
    rows = att.measure(decoder, ["test"], ["reference"], cfg, max_sentences=8, seed=1)
    assert {(r["kind"], r["layer"]) for r in rows} == {("encoder", 0), ("decoder", 0),
                                                       ("cross", 0)}
    encoded, eos = decoder.data.split("test"), decoder.data.eos_id
    indices = att.split_indices(decoder, "test", 8, 1)
    sources = [encoded.src(int(i)).tolist() for i in indices]
    references = [encoded.tgt(int(i)).tolist() + [eos] for i in indices]
    direct = _direct_counts(decoder, sources, references)
    for r in rows:
        assert (r["weights"], r["zeros"]) == tuple(direct[(r["kind"], r["layer"])].values())
        assert r["attention"] == ("1.5-entmax" if r["kind"] == "encoder" else "1.5-relu/estimated")
    assert sum(r["zeros"] for r in rows) > 0  # sparse transforms do give zeros


def test_heatmap_rows_are_the_head_averaged_cross_attention(relu_run):
    decoder = open_checkpoint(relu_run, device="cpu")
    cfg = decode_config(decoder, beam=2)
    frame = pd.DataFrame(att.heatmap_rows(decoder, "test", np.array([3]), "reference", cfg))
    encoded = decoder.data.split("test")
    source, target = encoded.src(3).tolist(), encoded.tgt(3).tolist()
    assert len(frame) == (len(target) + 1) * (len(source) + 1)
    src = torch.tensor([source + [decoder.data.eos_id]])
    tgt_in = torch.tensor([[decoder.data.bos_id] + target])
    with att.kept_weights(decoder.model) as layers, torch.no_grad():
        decoder.model(src, tgt_in)
        cross = [m.weights for kind, _, m in layers if kind == "cross"][0].mean(1)[0]
    grid = frame.pivot(index="target_pos", columns="source_pos", values="weight").to_numpy()
    assert np.allclose(grid, cross.numpy(), atol=1e-6)
    assert frame["source_token"].iloc[-1] == decoder.data.src_tokenizer.id_to_token(
        decoder.data.eos_id)


def test_cli_writes_both_csvs_and_the_heatmap_png(relu_run, tmp_path):
    out = tmp_path / "attention.csv"
    result = CliRunner().invoke(app, [
        "sparsity", "--attention", "--checkpoint", str(relu_run), "--split", "test",
        "--max-sentences", "5", "--beam", "2", "--device", "cpu", "--heatmaps", "2",
        "--out", str(out), "--plot"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["along"]) == {"reference", "beam"} and len(frame) == 6
    assert ((frame["zero_fraction"] >= 0) & (frame["zero_fraction"] <= 1)).all()
    maps = pd.read_csv(tmp_path / "attention_heatmaps.csv")
    assert set(maps["along"]) == {"beam"} and maps["sentence"].nunique() == 2
    assert (tmp_path / "attention.png").stat().st_size > 1000
    bad = CliRunner().invoke(app, ["sparsity", "--attention", "--checkpoint", str(relu_run),
                                   "--heatmaps", "-1", "--out", str(out)])
    assert isinstance(bad.exception, UserError) and "--heatmaps must be >= 0" in str(bad.exception)


def test_nan_weights_at_counted_pairs_are_refused():
    src_real, keep = torch.tensor([[True, False]]), torch.tensor([[True]])
    visible = att.visible_pairs("cross", src_real, keep)
    att.refuse_nan(torch.tensor([[[[0.0, float("nan")]]]]), visible)  # a masked key: not counted
    with pytest.raises(UserError, match="NaN attention weights"):
        att.refuse_nan(torch.tensor([[[[float("nan"), 0.0]]]]), visible)


def _nan_checkpoint(run, path):
    """A copy of ``run``'s last.pt with every floating-point weight NaN (a run that diverged)."""
    from arelu_cli.model import checkpoint

    ckpt = checkpoint.load(run)
    for key in ("model", "average"):
        if ckpt.get(key) is not None:
            ckpt[key] = {k: v.clone().fill_(float("nan")) if v.is_floating_point() else v
                         for k, v in ckpt[key].items()}
    return checkpoint.save({k: v for k, v in ckpt.items() if k != "format"}, path)


@pytest.mark.parametrize("which", ["softmax", "entmax"])
def test_nan_checkpoint_weights_are_a_one_line_error(which, relu_run, toy_runs, tmp_path,
                                                     monkeypatch, capsys):
    """Teacher-forced on the references nothing is decoded first: softmax attention gives NaN
    weights (once counted as non-zero), the sort-based entmax attention of ``relu_run``'s
    encoder an index error (once a traceback); both are one line, exit 2, no CSV."""
    from arelu_cli.cli import main

    run = toy_runs["softmax"] if which == "softmax" else relu_run
    nan, out = _nan_checkpoint(run, tmp_path / "nan.pt"), tmp_path / "attention.csv"
    monkeypatch.setattr("sys.argv", [
        "arelu", "sparsity", "--attention", "--checkpoint", str(nan), "--split", "test",
        "--along", "reference", "--max-sentences", "4", "--device", "cpu", "--out", str(out)])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "NaN attention weights" in err and "use an earlier checkpoint" in err
    assert not out.exists()
