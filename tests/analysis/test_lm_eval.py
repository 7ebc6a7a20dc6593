"""``arelu lm-eval``: the CSV's columns and one row per model x decoding x split, perplexity
equal to exp of the training code's cross-entropy, epsilon tuned on dev, text statistics and
their gaps to the human continuations, reruns replacing their row, nothing written on error."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from arelu_cli.analysis import lm_metrics as M
from arelu_cli.analysis.lm_eval import COLUMNS, EvalSettings, run, step_values
from arelu_cli.train.evaluate import split_loss
from arelu_cli.decode.translate import open_checkpoint
from arelu_cli.decode.sampling import Decoding

SETTINGS = EvalSettings(prefix_tokens=3, max_prompts=8, max_tokens=6, seed=1, batch_size=4,
                        eval_tokens=64)


def _decoders(lm_runs, *names):
    return [open_checkpoint(lm_runs[name], device="cpu", task="lm") for name in names]


def test_rows_and_columns(lm_runs, tmp_path):
    out, gens = tmp_path / "eval.csv", tmp_path / "gens"
    frame = run(_decoders(lm_runs, "softmax", "1.5-relu", "1.5-entmax"), Decoding(), SETTINGS,
                out, gens)
    assert list(pd.read_csv(out).columns) == list(COLUMNS)
    assert len(frame) == 3 and set(frame["decoding"]) == {"sample"} and set(frame["split"]) == {"test"}
    by = frame.set_index("transform")
    assert math.isfinite(by.loc["softmax", "ppl"])
    assert pd.isna(by.loc["1.5-relu", "ppl"]) and pd.isna(by.loc["1.5-entmax", "ppl"])
    for name, row in by.iterrows():
        assert row["eps"] in M.EPS_GRID and row["eps_ppl"] > 1
        assert 0 <= row["sp"] <= 1 and 0 <= row["jsd"] <= math.log(2)
        assert row["rep_16"] <= row["rep_32"] <= row["rep_128"] <= 1
        assert row["support_q10"] <= row["support_q50"] <= row["support_q90"]
        assert row["distinct_4_gap"] == pytest.approx(abs(row["distinct_4"] - row["human_distinct_4"]))
        lines = open(row["generations"], encoding="utf-8").read().splitlines()
        record = json.loads(open(row["generations"] + ".json").read())
        assert len(lines) == row["prompts"] == 8 and record["seed"] == 1
    assert by.loc["softmax", "zero_share"] == 0 and by.loc["softmax", "support_mean"] > 600
    assert by.loc["1.5-relu", "support_mean"] < by.loc["softmax", "support_mean"]


def test_softmax_ppl_is_exp_of_the_validation_cross_entropy(lm_runs):
    (decoder,) = _decoders(lm_runs, "softmax")
    values = step_values(decoder, "test", Decoding(), EvalSettings(eval_tokens=64))
    loss = split_loss(decoder.model, decoder.data, "test", decoder.transform, 64, decoder.device,
                      decoder.config.data.block_size)
    assert M.perplexity(values["p_target"]) == pytest.approx(math.exp(loss), rel=1e-5)
    stream_tokens = decoder.data.meta["splits"]["test"]["stream_tokens"]
    assert len(values["p_target"]) == stream_tokens  # every token, each eos included, once


def test_eps_is_the_best_on_dev(lm_runs, tmp_path):
    (decoder,) = _decoders(lm_runs, "1.5-relu")
    dev = step_values(decoder, "dev", Decoding(), EvalSettings(eval_tokens=64))["p_target"]
    best = min(M.EPS_GRID, key=lambda e: M.eps_perplexity(dev, e, decoder.data.vocab_size))
    frame = run([decoder], Decoding(), SETTINGS, *_outs(tmp_path))
    assert frame["eps"].iloc[0] == best


def _outs(folder):
    return folder / "eval.csv", folder / "gens"


def test_rerun_replaces_its_row_and_keeps_others(lm_runs, tmp_path):
    decoders = _decoders(lm_runs, "softmax")
    out, gens = _outs(tmp_path)
    run(decoders, Decoding(), SETTINGS, out, gens)
    run(decoders, Decoding("greedy"), SETTINGS, out, gens)
    frame = run(decoders, Decoding(), SETTINGS, out, gens)
    assert sorted(frame["decoding"]) == ["greedy", "sample"]
    greedy = frame.set_index("decoding").loc["greedy"]
    # a one-hot: sp is 1 where the arg-max is the target, else 0; JSD log 2 where it is not
    assert greedy["support_mean"] == 1
    assert greedy["sp"] == pytest.approx(1 - greedy["zero_share"])
    assert greedy["jsd"] == pytest.approx(math.log(2) * greedy["zero_share"])


def test_nothing_is_written_when_one_checkpoint_fails(cli, lm_runs, tmp_path):
    out, gens = _outs(tmp_path)
    ran = cli("lm-eval", "--checkpoint", lm_runs["softmax"], "--checkpoint", lm_runs["1.5-relu"],
              "--tau", "0.1", "--max-prompts", "2", "--out", out, "--generations", gens)
    assert ran.code == 2 and "a tau shift applies only to alpha-ReLU, not softmax" in ran.err
    assert ran.err.count("\n") == 1
    assert not out.exists() and not gens.exists()


def test_a_foreign_csv_is_refused(cli, lm_runs, tmp_path):
    out, gens = _outs(tmp_path)
    out.write_text("a,b\n1,2\n")
    ran = cli("lm-eval", "--checkpoint", lm_runs["softmax"], "--max-prompts", "2", "--out", out,
              "--generations", gens)
    assert ran.code == 2 and "is not an arelu lm-eval CSV" in ran.err
    assert out.read_text() == "a,b\n1,2\n" and not gens.exists()


def test_cli_prints_a_summary(cli, lm_runs, tmp_path):
    out, gens = _outs(tmp_path)
    ran = cli("lm-eval", "--checkpoint", lm_runs["softmax"], "--max-prompts", "2",
              "--max-tokens", "4", "--top-k", "5", "--out", out, "--generations", gens)
    assert ran.code == 0, ran.err
    assert "softmax sample-top_k5 on test:" in ran.err
    assert pd.read_csv(out)["decoding"].tolist() == ["sample-top_k5"]


def test_sliding_windows_give_each_token_its_probability_under_its_window(lm_runs, tmp_path):
    """``--stride S``: token ``k`` of the stream is scored by window ``j`` (0 if ``k <= T``, else
    ``ceil((k - T) / S)``) at column ``k - jS - 1``: checked token by token against the model."""
    import torch

    from arelu_cli.data.blocks import split_stream

    (decoder,) = _decoders(lm_runs, "softmax")
    block, stride = decoder.config.data.block_size, 5
    values = step_values(decoder, "test", Decoding(), EvalSettings(eval_tokens=64, stride=stride))
    tokens = torch.as_tensor(split_stream(decoder.data, "test"))
    assert len(values["p_target"]) == len(tokens) - 1
    for k in (1, block, block + 1, block + 7, len(tokens) - 1):
        j = 0 if k <= block else -(-(k - block) // stride)
        window = tokens[j * stride:j * stride + block]
        with torch.no_grad():
            p = torch.softmax(decoder.model(window.unsqueeze(0))[0, k - j * stride - 1].double(), -1)
        assert values["p_target"][k - 1].item() == pytest.approx(p[tokens[k]].item(), rel=1e-5)
    frame = run([decoder], Decoding(), EvalSettings(**{**SETTINGS.__dict__, "stride": stride}),
                *_outs(tmp_path))
    assert frame["stride"].tolist() == [stride] and "stride:5" in frame["signature"].iloc[0]
    assert frame["ppl"].iloc[0] == pytest.approx(M.perplexity(values["p_target"]), rel=1e-9)


def test_a_stride_beyond_the_block_is_refused_before_anything_runs(cli, lm_runs, tmp_path):
    out, gens = _outs(tmp_path)
    ran = cli("lm-eval", "--checkpoint", lm_runs["softmax"], "--stride", "17", "--out", out,
              "--generations", gens)
    assert ran.code == 2 and "--stride must be in [1, 16] (the checkpoint's block_size), got 17" in ran.err
    assert not out.exists() and not gens.exists()


def test_a_second_call_never_replaces_another_models_generations(cli, lm_runs, tmp_path):
    """``runs/sm`` then ``other/sm`` (two run folders of the same name) with the same --out
    and --generations: the second call is refused in one line and the first row's
    generation file still holds the first model's text; the first model may rerun."""
    import shutil

    first, second = tmp_path / "runs" / "sm", tmp_path / "other" / "sm"
    shutil.copytree(lm_runs["softmax"], first)
    shutil.copytree(lm_runs["1.5-relu"], second)
    out, gens = _outs(tmp_path)
    args = ("--max-prompts", "2", "--max-tokens", "4", "--out", out, "--generations", gens)
    assert cli("lm-eval", "--checkpoint", first, *args).code == 0
    row = pd.read_csv(out).iloc[0]
    text = open(row["generations"], encoding="utf-8").read()
    ran = cli("lm-eval", "--checkpoint", second, *args)
    assert ran.code == 2 and ran.err.count("\n") == 1, ran.err
    assert (f"was not written by arelu lm-eval of {second}" in ran.err
            and "another --generations folder" in ran.err and str(first) in ran.err)
    assert open(row["generations"], encoding="utf-8").read() == text
    assert pd.read_csv(out)["checkpoint"].tolist() == [row["checkpoint"]]
    assert cli("lm-eval", "--checkpoint", first, *args).code == 0
    assert cli("lm-eval", "--checkpoint", second, *args[:-1], tmp_path / "gens2").code == 0
    assert len(pd.read_csv(out)) == 2
