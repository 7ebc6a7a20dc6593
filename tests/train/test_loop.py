"""Training: the loss falls, the log has its columns, the budget holds, a SIGKILLed run
resumes to the same result, 2 gloo processes train like 1 process with the same batch, and
the fused output layer trains like logits + loss."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from arelu_cli.cli import app
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.loop import train
from arelu_cli.train.divergence import Diverged
from arelu_cli.train.run_dir import DIVERGED
from arelu_cli.train.log import COLUMNS
from arelu_cli.train.run_dir import best_score

TINY_RECIPE = """
[data]
path = "{corpus}"
max_tokens = 256
[model]
d_model = 32
encoder_layers = 1
decoder_layers = 1
heads = 2
d_ff = 64
dropout = 0.1
attention_dropout = 0.1
share_embeddings = true
tie_output = true
max_positions = 128
[train]
transform = "1.5-relu"
precision = "fp32"  # "auto" is bf16 on an AVX512-BF16 CPU: these comparisons are fp32
seed = 3
lr = 1.0
warmup = 4
accum = 2
max_steps = {steps}
log_every = 1
valid_every = {valid}
save_every = 3
stats_rows = 16
device = "cpu"
"""


def _recipe(tmp_path, corpus, steps=12, valid=4):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_RECIPE.format(corpus=corpus, steps=steps, valid=valid))
    return path


def _arelu(*args: object) -> list[str]:
    return [sys.executable, "-m", "arelu_cli.cli", *map(str, args)]


def _train_in_process(*args: object) -> None:
    """``arelu train ARGS`` in this process: where the process itself is not what is tested,
    an interpreter start (seconds of CPU) is saved."""
    result = CliRunner().invoke(app, ["train", *map(str, args)])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def whole_run(tiny_corpus, tmp_path_factory):
    """The uninterrupted 12-step run of :data:`TINY_RECIPE` that the stopped runs must equal
    after their resume (read only)."""
    folder = tmp_path_factory.mktemp("whole")
    _train_in_process("--recipe", _recipe(folder, tiny_corpus), "--out", folder / "run")
    return folder / "run"


def _resume_then_compare(broken, whole) -> None:
    """Resume the stopped run ``broken``; it must end as the uninterrupted run ``whole`` did:
    the same step, bitwise the same weights, the same log."""
    _train_in_process("--resume", broken)
    a, b = checkpoint.load(whole), checkpoint.load(broken)
    assert b["step"] == a["step"] == 12
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    log_a, log_b = pd.read_csv(whole / "log.csv"), pd.read_csv(broken / "log.csv")
    assert log_a["step"].tolist() == log_b["step"].tolist()
    for column in ("train_loss", "lr", "tau", "tau_z", "logit_norm", "val_loss", "val_bleu"):
        pd.testing.assert_series_equal(log_a[column], log_b[column], rtol=1e-6)


def test_loss_decreases_and_the_log_has_every_column(tiny_corpus, tiny_config, tmp_path):
    config = tiny_config(tiny_corpus, transform="1.5-relu", max_steps=40, warmup=10, lr=0.5,
                         log_every=5, valid_every=20, save_every=20, max_tokens=512)
    summary = train(config, tmp_path / "run")
    log = pd.read_csv(tmp_path / "run" / "log.csv")
    assert list(log.columns) == list(COLUMNS)
    assert log["step"].tolist() == [5, 10, 15, 20, 25, 30, 35, 40]
    loss = log["train_loss"].tolist()
    assert loss[-1] < 0.8 * loss[0] and sum(loss[-3:]) / 3 < 0.85 * sum(loss[:3]) / 3
    assert log["val_bleu"].notna().sum() == 2 and log["val_loss"].iloc[-1] < log["train_loss"].iloc[0]
    assert (log["tau"] == summary.tau).all() and log["tau_z"].notna().all()
    assert (log[["logit_norm", "sum_p", "nnz", "tokens_per_s", "lr"]] > 0).all().all()
    assert summary.steps == 40 and summary.best_step in (20, 40) and summary.tokens_per_s > 0
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["steps"] == 40 and written["best_bleu"] == summary.best_bleu
    assert written["best_metric"] == "bleu" and written["best_dev_loss"] is None
    assert best_score(written) == summary.best_bleu
    assert written["machine"].endswith(" CPUs")  # which machine its tokens/s belong to
    assert log["signature"].str.contains("transform:1.5-relu").all()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_fused_output_trains_like_logits_and_loss(tiny_corpus, tiny_config, tmp_path, eps):
    """With and without ``[train] label_smoothing``."""
    logs, weights = [], []
    for fused in (False, True):
        config = tiny_config(tiny_corpus, transform="1.5-relu", max_steps=4, log_every=1,
                             valid_every=4, adam_eps=1e-6, fused_output=fused,
                             label_smoothing=eps)
        train(config, tmp_path / str(fused))
        logs.append(pd.read_csv(tmp_path / str(fused) / "log.csv"))
        weights.append(checkpoint.load(tmp_path / str(fused))["model"])
    assert checkpoint.load(tmp_path / "True")["config"]["train"]["fused_output"]
    assert logs[1]["step"].tolist() == [1, 2, 3, 4]
    for column in ("train_loss", "tau", "tau_z", "logit_norm", "sum_p", "nnz", "val_loss"):
        pd.testing.assert_series_equal(logs[0][column], logs[1][column], rtol=1e-4)
    for key in weights[0]:  # Adam turns rounding noise in near-zero gradients into steps
        torch.testing.assert_close(weights[1][key], weights[0][key], rtol=1e-4, atol=3e-4)


def test_tau_auto_is_recorded(tiny_corpus, tiny_config, tmp_path):
    summary = train(tiny_config(tiny_corpus, transform="1.5-relu", max_steps=1), tmp_path / "r")
    assert 0.0 < summary.tau < 1.0
    assert checkpoint.load(tmp_path / "r")["tau"] == summary.tau


def test_wall_clock_budget(tiny_corpus, tiny_config, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=10_000, max_minutes=0.02, valid_every=10_000)
    summary = train(config, tmp_path / "r")
    assert 1 <= summary.steps < 10_000
    assert summary.seconds < 60  # the budget, then one validation


def test_sigkill_then_resume_gives_the_uninterrupted_run(tiny_corpus, whole_run, tmp_path):
    recipe, broken = _recipe(tmp_path, tiny_corpus), tmp_path / "broken"
    proc = subprocess.Popen(_arelu("train", "--recipe", recipe, "--out", broken),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (broken / checkpoint.LAST).exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = checkpoint.load(broken)["step"]
    assert killed_at < 12, "the run finished before it could be killed"
    _resume_then_compare(broken, whole_run)


# No dropout (each process has its own stream); an Adam eps above float noise, because
# attention key biases have a gradient that is exactly zero in exact arithmetic, and Adam
# would blow its rounding noise up to full-size steps.
NO_DROPOUT = ("--set", "model.dropout=0.0", "--set", "model.attention_dropout=0.0",
              "--set", "train.adam_eps=1e-6")


@pytest.fixture(scope="module")
def one_process_run(tiny_corpus, tmp_path_factory):
    """3 steps of :data:`TINY_RECIPE` in one process, with logits and loss, no dropout: what
    both gloo runs must equal (read only)."""
    folder = tmp_path_factory.mktemp("one")
    _train_in_process("--recipe", _recipe(folder, tiny_corpus, steps=3, valid=100), "--out",
                      folder / "run", *NO_DROPOUT)
    return folder / "run"


@pytest.mark.parametrize("fused", [False, True], ids=["logits", "fused_output"])
def test_two_gloo_processes_train_like_one(tiny_corpus, one_process_run, tmp_path, fused):
    """With ``fused_output`` the two processes (DDP over the model and its fused loss) train
    like one process with logits and loss."""
    recipe = _recipe(tmp_path, tiny_corpus, steps=3, valid=100)
    one, two = one_process_run, tmp_path / "two"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node=2", "--module", "arelu_cli.cli", "train", "--recipe",
                    str(recipe), "--out", str(two), "--set", "train.accum=1", *NO_DROPOUT,
                    *(["--fused-output"] if fused else [])],
                   check=True, capture_output=True, env=env, timeout=300)
    a, b = checkpoint.load(one), checkpoint.load(two)
    assert (a["world_size"], b["world_size"], a["step"], b["step"]) == (1, 2, 3, 3)
    for key in a["model"]:
        torch.testing.assert_close(a["model"][key], b["model"][key], rtol=1e-4, atol=1e-4)
    loss_a = pd.read_csv(one / "log.csv")["train_loss"].dropna()
    loss_b = pd.read_csv(two / "log.csv")["train_loss"].dropna()
    pd.testing.assert_series_equal(loss_a, loss_b, rtol=1e-5)


def test_resume_with_another_world_size_is_refused(tiny_corpus, tiny_config, tmp_path):
    train(tiny_config(tiny_corpus, max_steps=3), tmp_path / "r")
    ckpt = checkpoint.load(tmp_path / "r")
    ckpt["world_size"] = 2
    checkpoint.save({k: v for k, v in ckpt.items() if k != "format"}, tmp_path / "r" / "last.pt")
    with pytest.raises(ValueError, match=r"written by 2 process\(es\)"):
        train(tiny_config(tiny_corpus, max_steps=4), tmp_path / "r", resume=True)


def _poison(monkeypatch, at_call: int, how: str) -> None:
    """Make micro-batch ``at_call`` (1-based; the step, with accum 1) give a NaN loss, or
    a finite loss whose gradients are infinite."""
    from arelu_cli.train import step as train_step

    real, calls, hooks = train_step.micro_loss, [0], []

    def micro_loss(s, batch, with_stats):
        calls[0] += 1
        while hooks:
            hooks.pop().remove()
        loss, stats = real(s, batch, with_stats)
        if calls[0] == at_call and how == "loss":
            loss = loss * float("nan")
        elif calls[0] == at_call:
            hooks.append(s.model.output.weight.register_hook(lambda g: g * float("inf")))
        return loss, stats

    monkeypatch.setattr(train_step, "micro_loss", micro_loss)


@pytest.mark.parametrize("how", ["loss", "gradient"])
def test_divergence_stops_the_run_and_keeps_the_last_good_checkpoint(
        tiny_corpus, tiny_config, tmp_path, monkeypatch, how):
    config = tiny_config(tiny_corpus, transform="1.5-relu", max_steps=8, save_every=3,
                         log_every=1, valid_every=100)
    run = tmp_path / "run"
    _poison(monkeypatch, 5, how)
    with pytest.raises(Diverged) as raised:
        train(config, run)
    message = str(raised.value)
    what = r"\(loss nan, grad_norm nan\)" if how == "loss" else r"\(loss [\d.]+, grad_norm nan\)"
    assert re.match("training diverged at step 5 " + what + "; that step was not saved", message)
    assert f"{run / 'last.pt'} keeps step 3; resume with: arelu train --resume" in message
    last = checkpoint.load(run)
    assert last["step"] == 3 and all(torch.isfinite(w).all() for w in last["model"].values())
    assert not (run / "summary.json").exists()
    record = json.loads((run / DIVERGED).read_text())
    assert (record["step"], record["last_saved_step"], record["message"]) == (5, 3, message)
    assert pd.read_csv(run / "log.csv")["step"].tolist() == [1, 2, 3, 4]
    monkeypatch.undo()  # e.g. a lower learning rate: the resumed run goes on from step 3
    summary = train(config, run, resume=True)
    assert summary.steps == 8 and not (run / DIVERGED).exists()
    assert pd.read_csv(run / "log.csv")["step"].tolist() == list(range(1, 9))


def test_sigint_saves_last_pt_and_the_resumed_run_is_the_uninterrupted_one(tiny_corpus,
                                                                         whole_run, tmp_path):
    recipe, broken = _recipe(tmp_path, tiny_corpus), tmp_path / "broken"
    # SIGINT as from a terminal, even where this test runs with it ignored (a background job)
    proc = subprocess.Popen(_arelu("train", "--recipe", recipe, "--out", broken),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    log = broken / "log.csv"  # a row is written after each step: the loop is running
    while not (log.exists() and log.read_text().count("\n") >= 2) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    stopped_at = checkpoint.load(broken)["step"]
    assert 1 <= stopped_at < 12, "the run finished before it could be interrupted"
    assert err.strip().endswith(
        f"stopped by SIGINT after step {stopped_at}: {broken / 'last.pt'} keeps step "
        f"{stopped_at}; resume with: arelu train --resume {broken}")
    assert "Traceback" not in err and not (broken / "summary.json").exists()
    _resume_then_compare(broken, whole_run)


@pytest.mark.parametrize("name, half", [("1.5-relu", True), ("softmax", False)])
def test_bf16_logits_reach_the_loss_uncopied_only_where_the_registry_allows(
        tiny_corpus, tiny_config, tmp_path, monkeypatch, one_thread, name, half):
    """Under bf16 autocast alpha-ReLU's loss gets the bf16 logits themselves (no fp32 copy);
    its loss and weights after 2 steps match the run that copies them to fp32 first."""
    from arelu_cli.train import loop as train_module
    from arelu_cli.registry import get_transform

    seen, runs = [], {}
    for copy in (False, True):
        def looked_up(*args, copy=copy, **kwargs):
            transform = get_transform(*args, **kwargs)

            def loss(logits, *rest, **options):
                if logits.requires_grad:  # training's calls, not validation's
                    seen.append((copy, logits.dtype))
                return transform._loss(logits, *rest, **options)
            return dataclasses.replace(transform, _loss=loss,
                                       half_logits=transform.half_logits and not copy)

        monkeypatch.setattr(train_module, "get_transform", looked_up)
        config = tiny_config(tiny_corpus, transform=name, max_steps=2, log_every=1,
                             valid_every=100, precision="bf16", adam_eps=1e-3)
        train(config, tmp_path / str(copy))
        runs[copy] = (pd.read_csv(tmp_path / str(copy) / "log.csv"),
                      checkpoint.load(tmp_path / str(copy))["model"])
    assert {dtype for copy, dtype in seen if not copy} == {
        torch.bfloat16 if half else torch.float32}
    assert {dtype for copy, dtype in seen if copy} == {torch.float32}
    (log, weights), (log_copy, weights_copy) = runs[False], runs[True]
    pd.testing.assert_series_equal(log["train_loss"], log_copy["train_loss"], rtol=2e-3)
    for key in weights:
        torch.testing.assert_close(weights[key], weights_copy[key], rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("bad", ["attention", "max_tokens"])
def test_a_run_refused_before_its_first_step_leaves_no_folder(tiny_corpus, tiny_config,
                                                              tmp_path, bad):
    """An invalid model.attention or data.max_tokens=1 leaves no empty --out (nor one holding
    only config.json); a folder that was there before stays."""
    config = tiny_config(tiny_corpus, max_steps=2, **({"max_tokens": 1} if bad == "max_tokens"
                                                      else {}))
    if bad == "attention":
        config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                       attention="bogus"))
    with pytest.raises(UserError):
        train(config, tmp_path / "new" / "run")
    assert not (tmp_path / "new" / "run").exists()
    (tmp_path / "mine").mkdir()
    with pytest.raises(UserError):
        train(config, tmp_path / "mine")
    assert (tmp_path / "mine").is_dir()
