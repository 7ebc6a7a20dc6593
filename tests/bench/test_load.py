"""``arelu bench train --under-load``: rows per transform and thread setting, the CSV, and
a competitor process that never outlives the benchmark. Speeds are never checked: they
depend on the machine."""

from __future__ import annotations

import contextlib
import os

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.bench import load as bench_load
from arelu_cli.cli import app
from arelu_cli.train.threads import Policy

COLUMNS = {"transform", "mode", "threads_max", "quiet_tokens_per_s", "loaded_tokens_per_s",
           "loaded_ratio", "quiet_switches", "loaded_switches", "loaded_share_at_max",
           "threads_end", "steps", "warmup", "load_threads", "load_size", "tokens_per_step",
           "omp_wait_policy", "gomp_spincount", "nice", "signature"}


def test_the_columns_known_before_measuring_hold_every_checked_column():
    assert COLUMNS <= set(bench_load.COLUMNS)


@pytest.fixture
def spied(monkeypatch):
    """The competitor processes the benchmark starts."""
    started = []
    original = bench_load.competitor

    @contextlib.contextmanager
    def spy(*args):
        with original(*args) as proc:
            started.append(proc)
            yield proc
    monkeypatch.setattr(bench_load, "competitor", spy)
    return started


def _gone(proc) -> bool:
    """Killed and reaped: no zombie, no process."""
    return proc.returncode is not None and not os.path.exists(f"/proc/{proc.pid}")


def _recipe(tmp_path, corpus):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[data]\npath = "{corpus}"\nmax_tokens = 256\n[model]\nd_model = 16\n'
                      "encoder_layers = 1\ndecoder_layers = 1\nheads = 2\nd_ff = 32\n"
                      "[train]\naccum = 1\n")
    return recipe


def test_cli_writes_rows_and_stops_the_competitor(tiny_corpus, tmp_path, spied):
    out = tmp_path / "load.csv"
    result = CliRunner().invoke(app, [
        "bench", "train", "--under-load", "--recipe", str(_recipe(tmp_path, tiny_corpus)),
        "--transforms", "softmax,1.5-relu", "--load-steps", "2", "--load-warmup", "1",
        "--load-threads", "1", "--load-size", "64", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert COLUMNS <= set(frame.columns)
    assert list(zip(frame["transform"], frame["mode"])) == [
        ("softmax", "fixed"), ("softmax", "auto"), ("1.5-relu", "fixed"), ("1.5-relu", "auto")]
    assert frame["loaded_ratio"].tolist() == pytest.approx(
        (frame["loaded_tokens_per_s"] / frame["quiet_tokens_per_s"]).tolist())
    assert (frame["steps"] == 2).all() and (frame["load_size"] == 64).all()
    assert frame["signature"].str.contains("threads:auto").tolist() == [False, True] * 2
    assert len(spied) == 1 and _gone(spied[0])  # one competitor for the whole benchmark


def test_competitor_waits_at_libgomps_defaults_whatever_the_benchmark_runs_with(monkeypatch):
    """The competitor is another user's plain job: a wait setting the benchmark is started
    with (to compare settings) must not reach it, or both sides change at once."""
    monkeypatch.setenv("GOMP_SPINCOUNT", "7")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    with bench_load.competitor(1, 8) as proc:
        environ = dict(item.split("=", 1) for item in
                       open(f"/proc/{proc.pid}/environ").read().split("\0") if "=" in item)
    assert "GOMP_SPINCOUNT" not in environ and "OMP_WAIT_POLICY" not in environ
    assert environ["OMP_NUM_THREADS"] == "1"
    assert _gone(proc)


def test_competitor_is_killed_when_the_benchmark_fails(tiny_corpus, tiny_config, spied,
                                                       monkeypatch):
    calls = []
    original = bench_load._run

    def interrupted(session, governor, steps):
        calls.append(steps)
        if len(calls) == 3:  # warm-up, quiet, then Ctrl-C in the loaded phase
            assert spied[0].poll() is None
            raise KeyboardInterrupt
        return original(session, governor, steps)
    monkeypatch.setattr(bench_load, "_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bench_load.bench_under_load(tiny_config(tiny_corpus), ["softmax"], steps=1, warmup=1,
                                    load_threads=1, load_size=32, device_name="cpu",
                                    policy=Policy(window=1))
    assert len(spied) == 1 and _gone(spied[0])


@pytest.mark.parametrize("args, message", [
    (["--fused"], "--fused does not apply to --under-load"),
    (["--label-smoothing", "0.1"], "--label-smoothing does not apply to --under-load"),
    (["--device", "cuda"], "--under-load measures CPU training"),
    (["--load-steps", "0"], "must be >= 1"),
])
def test_bad_options_are_refused_before_anything_starts(tiny_corpus, tmp_path, spied, args,
                                                        message):
    result = CliRunner().invoke(app, ["bench", "train", "--under-load", "--recipe",
                                      str(_recipe(tmp_path, tiny_corpus)), *args])
    assert result.exit_code != 0 and not spied
    assert message in str(result.exception)


def test_an_out_file_it_may_not_replace_is_refused_before_anything_starts(tiny_corpus, tmp_path,
                                                                        spied):
    """An older or foreign CSV at --out is refused before minutes of measuring, not after."""
    out = tmp_path / "old.csv"
    out.write_text("transform,mode\n1.5-relu,auto\n")
    result = CliRunner().invoke(app, ["bench", "train", "--under-load", "--recipe",
                                      str(_recipe(tmp_path, tiny_corpus)), "--out", str(out)])
    assert result.exit_code != 0 and not spied
    assert "is not a CSV this command writes" in str(result.exception)
    assert out.read_text() == "transform,mode\n1.5-relu,auto\n"


def test_rows_carry_the_label_smoothing_that_training_uses(tiny_corpus, tiny_config, monkeypatch,
                                                          one_thread):
    """The steps are the trainer's own (its loss smooths to ``[train] label_smoothing``); the
    rows say so. No competitor process: its speed is not what is checked here."""
    from arelu_cli.registry import OutputTransform

    seen, original = set(), OutputTransform.loss

    def loss(self, *args, **options):
        seen.add((self.name, options.get("label_smoothing", 0.0)))
        return original(self, *args, **options)
    monkeypatch.setattr(OutputTransform, "loss", loss)
    monkeypatch.setattr(bench_load, "competitor",
                        lambda *args: contextlib.nullcontext(object()))
    monkeypatch.setattr(bench_load, "loaded", lambda proc: contextlib.nullcontext())
    rows = bench_load.bench_under_load(tiny_config(tiny_corpus, label_smoothing=0.1),
                                       ["1.5-relu"], steps=1, warmup=0, device_name="cpu",
                                       policy=Policy(window=1))
    assert seen == {("1.5-relu", 0.1)}
    assert [r["label_smoothing"] for r in rows] == [0.1, 0.1]
    assert all("label_smoothing:0.1" in r["signature"] for r in rows)
