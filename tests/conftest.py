"""Shared fixtures: a tiny prepared toy corpus and tiny model configs (seconds on a CPU); and
the suite's parallel run: ``pytest`` spreads the tests over :data:`WORKERS` processes of one
torch thread each (pytest-xdist), unless told otherwise (``-n N``, ``-n 0``, ``-p no:xdist``,
``--pdb``) or selecting the GPU tests (``-m cuda``, which share one device)."""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

WORKERS = 2
"""Processes the suite runs in by default: each builds its own session fixtures (the tiny
corpora and runs below), so more than the cores of a small machine only adds that work."""
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``-n WORKERS`` where xdist is installed and nothing said otherwise (before xdist's
    own hook turns ``-n`` into workers), each worker with one torch thread."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    option = config.option
    if option.numprocesses is not None or option.usepdb or "cuda" in (option.markexpr or "") \
            or option.collectonly or option.dist != "no":
        return
    option.numprocesses = min(WORKERS, os.cpu_count() or 1)
    option.dist = "loadscope"  # a module's tests in one worker: its fixtures built once
    os.environ.update(THREADS)  # the workers' libgomp reads it when torch starts


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: one thread (its peers use the rest)
        os.environ.update(THREADS)
        torch.set_num_threads(1)


def pytest_collection_finish(session):
    """What the collected modules imported (torch, transformers, ...) lives to the end:
    frozen out of the garbage collector's full collections, each of which would scan it again
    (~0.4 s per collection, a few hundred of them in a worker)."""
    gc.collect()
    gc.freeze()

from arelu_cli.config import Config, load_config
from arelu_cli.data.prepare import PrepareRequest, prepare

TINY_MODEL = {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "heads": 2, "d_ff": 64,
              "dropout": 0.0, "attention_dropout": 0.0, "share_embeddings": True,
              "tie_output": True, "max_positions": 128}


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A prepared toy corpus: 2,000 training pairs, 40 dev/test pairs, a ~460-token vocabulary."""
    out = tmp_path_factory.mktemp("corpus") / "toy"
    prepare(PrepareRequest("toy", out, train_size=2000, eval_size=40, toy_vocab=150, merges=200))
    return out


def _tiny_config(corpus: Path, **train: object) -> Config:
    """A tiny model on ``corpus``; ``train`` overrides [train] keys (``max_tokens`` -> [data])."""
    overrides = {("data", "path"): str(corpus), ("data", "max_tokens"): train.pop("max_tokens", 256)}
    overrides |= {("model", k): v for k, v in TINY_MODEL.items()}
    # fp32 pinned: "auto" is bf16 on a CPU with AVX512-BF16 or AMX, and the tests' numbers
    # must not depend on the machine's instructions
    defaults = {"transform": "softmax", "accum": 1, "max_steps": 6, "warmup": 4, "lr": 1.0,
                "log_every": 2, "valid_every": 3, "save_every": 3, "stats_rows": 32,
                "device": "cpu", "precision": "fp32"}
    overrides |= {("train", k): v for k, v in (defaults | train).items()}
    return load_config(None, overrides)


@pytest.fixture(scope="session")
def tiny_config():
    """``tiny_config(corpus, **train)``: a tiny model on ``corpus``; keyword arguments
    override [train] keys (``max_tokens`` goes to [data])."""
    return _tiny_config


@pytest.fixture
def one_thread():
    """One torch thread: on a shared CPU, threads only add synchronization to tiny tensors."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TOY_TRANSFORMS = ("softmax", "1.5-entmax", "1.5-relu")


@pytest.fixture(scope="session")
def toy_runs(tiny_corpus, tmp_path_factory) -> dict[str, Path]:
    """Run folders of tiny models trained for 30 steps on ``tiny_corpus``, by transform
    (softmax, 1.5-entmax, 1.5-relu with tau from the first batch: its outputs have zeros)."""
    from arelu_cli.train.loop import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = {}
    for name in TOY_TRANSFORMS:
        config = _tiny_config(tiny_corpus, transform=name, tau="auto", max_steps=30, lr=2.0,
                              warmup=10, log_every=30, valid_every=30, save_every=30)
        runs[name] = train(config, tmp_path_factory.mktemp("runs") / name).out
    torch.set_num_threads(threads)
    return runs


TINY_LM_MODEL = {"d_model": 32, "decoder_layers": 2, "heads": 2, "d_ff": 64, "dropout": 0.0,
                 "attention_dropout": 0.0, "tie_output": True, "max_positions": 32}


@pytest.fixture(scope="session")
def tiny_lm_corpus(tmp_path_factory) -> Path:
    """A prepared toy-lm corpus: 300 training lines, 30 dev/test lines, ~640 words."""
    out = tmp_path_factory.mktemp("lm-corpus") / "toy-lm"
    prepare(PrepareRequest("toy-lm", out, train_size=300, eval_size=30))
    return out


def _tiny_lm_config(corpus: Path, **train: object) -> Config:
    """A tiny language model on ``corpus`` (blocks of 16, 128-token batches); ``train``
    overrides [train] keys."""
    overrides = {("data", "path"): str(corpus), ("data", "task"): "lm",
                 ("data", "block_size"): 16, ("data", "max_tokens"): 128,
                 ("decode", "max_tokens"): 1024}
    overrides |= {("model", k): v for k, v in TINY_LM_MODEL.items()}
    defaults = {"transform": "softmax", "accum": 1, "max_steps": 6, "warmup": 4, "lr": 1.0,
                "log_every": 2, "valid_every": 3, "save_every": 3, "stats_rows": 32,
                "device": "cpu", "threads": 1, "precision": "fp32"}
    overrides |= {("train", k): v for k, v in (defaults | train).items()}
    return load_config(None, overrides)


@pytest.fixture(scope="session")
def tiny_lm_config():
    """``tiny_lm_config(corpus, **train)``: a tiny language model on ``corpus``."""
    return _tiny_lm_config


LM_TRANSFORMS = ("softmax", "1.5-entmax", "1.5-relu")


@pytest.fixture(scope="session")
def lm_runs(tiny_lm_corpus, tmp_path_factory) -> dict[str, Path]:
    """Run folders of tiny language models trained for 40 steps on ``tiny_lm_corpus``."""
    from arelu_cli.train.loop import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = {}
    for name in LM_TRANSFORMS:
        config = _tiny_lm_config(tiny_lm_corpus, transform=name, tau="auto", max_steps=40,
                                 lr=2.0, warmup=10, log_every=40, valid_every=40,
                                 save_every=40)
        runs[name] = train(config, tmp_path_factory.mktemp("lm-runs") / name).out
    torch.set_num_threads(threads)
    return runs


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run ``arelu ARGS...`` through its console entry point; returns exit code and output."""
    def run(*args: str | Path) -> Ran:
        from arelu_cli.cli import main

        monkeypatch.setattr(sys, "argv", ["arelu", *map(str, args)])
        with pytest.raises(SystemExit) as exited:
            main()
        captured = capsys.readouterr()
        return Ran(exited.value.code or 0, captured.out, captured.err)
    return run


