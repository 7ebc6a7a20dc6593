"""Training a language model with ``arelu train``: every output transform and loss, the fused
alpha-ReLU output, the loss falling, dev perplexity for softmax, resuming to the same result."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from arelu_cli.train.loop import train
from arelu_cli.train.log import read_log
from arelu_cli.train.run_dir import best_score


@pytest.mark.parametrize("transform, extra", [
    ("softmax", {}), ("sparsemax", {}), ("1.5-entmax", {}), ("1.5-entmax-k100", {}),
    ("1.5-relu", {}), ("1.5-relu", {"fused_output": True}), ("1.3-relu", {}),
    ("softmax", {"label_smoothing": 0.1}),
])
def test_every_transform_trains(tiny_lm_corpus, tiny_lm_config, tmp_path, one_thread,
                                transform, extra):
    config = tiny_lm_config(tiny_lm_corpus, transform=transform, tau="auto", max_steps=4,
                            log_every=2, valid_every=4, save_every=4, **extra)
    summary = train(config, tmp_path / "run")
    log = read_log(tmp_path / "run" / "log.csv")
    assert summary.steps == 4 and log["train_loss"].notna().sum() == 2
    assert math.isfinite(log["val_loss"].dropna().iloc[-1])
    ppl = log["val_ppl"].dropna()
    if transform == "softmax":  # exp of the dev cross-entropy
        assert ppl.iloc[-1] == pytest.approx(math.exp(log["val_loss"].dropna().iloc[-1]))
    else:
        assert ppl.empty
    assert log["val_bleu"].isna().all()
    assert (tmp_path / "run" / "best.pt").is_file()


def test_loss_falls_and_best_is_the_lowest_dev_loss(lm_runs):
    for name, run in lm_runs.items():
        log = read_log(run / "log.csv")
        losses = log["train_loss"].dropna()
        assert losses.iloc[-1] < losses.iloc[0] or len(losses) == 1
        summary = json.loads((run / "summary.json").read_text())
        assert summary["best_metric"] == "dev_loss" and summary["best_bleu"] is None
        assert summary["best_dev_loss"] == pytest.approx(log["val_loss"].dropna().min())
        assert best_score(summary) == -summary["best_dev_loss"]


def test_softmax_dev_loss_falls(tiny_lm_corpus, tiny_lm_config, tmp_path, one_thread):
    config = tiny_lm_config(tiny_lm_corpus, max_steps=30, lr=2.0, warmup=10, log_every=10,
                            valid_every=10, save_every=30)
    train(config, tmp_path / "run")
    ppl = read_log(tmp_path / "run" / "log.csv")["val_ppl"].dropna().tolist()
    assert len(ppl) == 3 and ppl[2] < ppl[0] < 640  # below the vocabulary's uniform guess


def test_resume_gives_the_same_losses(tiny_lm_corpus, tiny_lm_config, tmp_path, one_thread):
    config = tiny_lm_config(tiny_lm_corpus, transform="1.5-relu", tau="auto", max_steps=6,
                            log_every=1, valid_every=6, save_every=3)
    train(config, tmp_path / "whole")
    import dataclasses
    first = dataclasses.replace(config, train=dataclasses.replace(config.train, max_steps=3))
    train(first, tmp_path / "parts")
    train(config, tmp_path / "parts", resume=True)
    whole, parts = (pd.read_csv(tmp_path / name / "log.csv") for name in ("whole", "parts"))
    assert whole["train_loss"].tolist() == parts["train_loss"].tolist()
    assert torch.equal(torch.load(tmp_path / "whole" / "last.pt")["model"]["output.bias"],
                       torch.load(tmp_path / "parts" / "last.pt")["model"]["output.bias"])


def test_fused_output_trains_like_logits_and_loss(tiny_lm_corpus, tiny_lm_config, tmp_path,
                                                  one_thread):
    losses = []
    for fused in (False, True):
        config = tiny_lm_config(tiny_lm_corpus, transform="1.5-relu", tau=0.2, max_steps=3,
                                log_every=1, valid_every=3, save_every=3, fused_output=fused)
        train(config, tmp_path / str(fused))
        losses.append(read_log(tmp_path / str(fused) / "log.csv")["train_loss"].dropna().tolist())
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
