"""``arelu bench train``: one row per transform (and per fused alpha-ReLU), softmax as the
baseline, a CSV written."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.bench.train import bench_train
from arelu_cli.cli import app


def test_rows_per_transform(tiny_corpus, tiny_config):
    rows = bench_train(tiny_config(tiny_corpus), ["1.5-relu", "1.5-entmax"], repeats=2,
                       device_name="cpu", warmup=1)
    assert [r["transform"] for r in rows] == ["softmax", "1.5-relu", "1.5-entmax"]
    for r in rows:  # medians of paired ratios: timings are never checked against a clock
        assert r["time_ratio"] > 0 and r["speed_ratio"] == pytest.approx(1 / r["time_ratio"])
    assert all(r["tokens_per_s"] > 0 and r["ms_per_step"] > 0 for r in rows)
    assert rows[1]["tau"] > 0 and rows[0]["tau"] is None


def test_fused_rows_follow_their_transform(tiny_corpus, tiny_config):
    rows = bench_train(tiny_config(tiny_corpus), ["1.5-relu", "sparsemax"], repeats=1,
                       device_name="cpu", warmup=1, fused=True)
    assert [(r["transform"], r["fused_output"]) for r in rows] == [
        ("softmax", False), ("1.5-relu", False), ("1.5-relu", True), ("sparsemax", False)]
    assert rows[2]["tau"] == rows[1]["tau"] and rows[2]["tokens_per_s"] > 0
    assert "fused_output:True" in rows[2]["signature"]
    assert "fused_output" not in rows[1]["signature"]


def test_a_language_model_recipe(tiny_lm_corpus, tiny_lm_config):
    rows = bench_train(tiny_lm_config(tiny_lm_corpus), ["1.5-relu"], repeats=1,
                       device_name="cpu", warmup=1, fused=True)
    assert [(r["transform"], r["fused_output"]) for r in rows] == [
        ("softmax", False), ("1.5-relu", False), ("1.5-relu", True)]
    assert rows[0]["tokens"] == 128 and all(r["tokens_per_s"] > 0 for r in rows)  # 8 blocks of 16


def test_bad_transform_is_refused_before_timing(tiny_corpus, tiny_config):
    with pytest.raises(ValueError, match="unknown output transform"):
        bench_train(tiny_config(tiny_corpus), ["1.5-reluu"], repeats=1, device_name="cpu")


def test_cli_writes_csv(tiny_corpus, tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[data]\npath = "{tiny_corpus}"\nmax_tokens = 256\n[model]\nd_model = 16\n'
                      "encoder_layers = 1\ndecoder_layers = 1\nheads = 2\nd_ff = 32\n")
    out = tmp_path / "b.csv"
    result = CliRunner().invoke(app, ["bench", "train", "--recipe", str(recipe), "--transforms",
                                      "1.5-relu", "--repeats", "1", "--warmup", "0",
                                      "--device", "cpu", "--fused", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert frame["transform"].tolist() == ["softmax", "1.5-relu", "1.5-relu"]
    assert frame["fused_output"].tolist() == [False, False, True]
    assert {"speed_ratio", "peak_extra_mib", "signature"} <= set(frame.columns)
    assert "1.5-relu+fused" in result.output


def test_bf16_logits_reach_the_loss_uncopied_only_where_the_registry_allows(
        tiny_corpus, tiny_config, monkeypatch, one_thread):
    """Under bf16 autocast the timed step gives alpha-ReLU's loss the bf16 logits themselves,
    as the trainer does, and softmax's an fp32 copy: no whole N x V copy is timed where the
    loss needs none."""
    import dataclasses

    import torch

    from arelu_cli.bench import train as module
    from arelu_cli.registry import get_transform

    seen = set()

    def looked_up(*args, **kwargs):
        transform = get_transform(*args, **kwargs)

        def loss(logits, *rest, **options):
            seen.add((transform.name, logits.dtype))
            return transform._loss(logits, *rest, **options)
        return dataclasses.replace(transform, _loss=loss)

    monkeypatch.setattr(module, "get_transform", looked_up)
    bench_train(tiny_config(tiny_corpus, precision="bf16"), ["1.5-relu"], repeats=1,
                device_name="cpu", warmup=0)
    assert seen == {("softmax", torch.float32), ("1.5-relu", torch.bfloat16)}


@pytest.fixture
def smoothing_seen(monkeypatch):
    """The ``(transform, label_smoothing)`` of every call to an output transform's loss."""
    from arelu_cli.registry import OutputTransform

    seen, original = set(), OutputTransform.loss

    def loss(self, *args, **options):
        seen.add((self.name, options.get("label_smoothing", 0.0)))
        return original(self, *args, **options)
    monkeypatch.setattr(OutputTransform, "loss", loss)
    return seen


def test_the_timed_step_uses_the_recipes_label_smoothing(tiny_corpus, tiny_config,
                                                         smoothing_seen, one_thread):
    rows = bench_train(tiny_config(tiny_corpus, label_smoothing=0.1), ["1.5-relu"], repeats=1,
                       device_name="cpu", warmup=0)
    assert smoothing_seen == {("softmax", 0.1), ("1.5-relu", 0.1)}
    assert [r["label_smoothing"] for r in rows] == [0.1, 0.1]
    assert all("label_smoothing:0.1" in r["signature"] for r in rows)
    smoothing_seen.clear()
    rows = bench_train(tiny_config(tiny_corpus), ["1.5-relu"], repeats=1, device_name="cpu",
                       warmup=0)
    assert smoothing_seen == {("softmax", 0.0), ("1.5-relu", 0.0)}
    assert all("label_smoothing" not in r["signature"] for r in rows)


def test_each_transform_can_be_timed_with_its_own_label_smoothing(tiny_corpus, tiny_config,
                                                                  smoothing_seen, one_thread):
    """``arelu study`` times each transform at its selected configuration: the label smoothing
    given per transform, the recipe's for the others (here softmax's)."""
    rows = bench_train(tiny_config(tiny_corpus), ["1.5-relu", "sparsemax"], repeats=1,
                       device_name="cpu", warmup=0,
                       label_smoothing={"1.5-relu": 0.1, "sparsemax": 0.2})
    assert smoothing_seen == {("softmax", 0.0), ("1.5-relu", 0.1), ("sparsemax", 0.2)}
    assert [r["label_smoothing"] for r in rows] == [0.0, 0.1, 0.2]
    assert "label_smoothing" not in rows[0]["signature"]
    assert "label_smoothing:0.2" in rows[2]["signature"]


def test_fused_rows_use_their_transforms_label_smoothing(tiny_corpus, tiny_config, one_thread,
                                                        monkeypatch):
    """The fused output layer trains with label smoothing too: its row is timed at the
    transform's, as the unfused row."""
    from arelu_cli.model import fused_output

    seen, real = set(), fused_output._fused_loss

    def spy(*args, **kwargs):
        seen.add(kwargs["label_smoothing"])
        return real(*args, **kwargs)
    monkeypatch.setattr(fused_output, "_fused_loss", spy)
    rows = bench_train(tiny_config(tiny_corpus, label_smoothing=0.1), ["1.5-relu"], repeats=1,
                       device_name="cpu", warmup=0, fused=True,
                       label_smoothing={"1.5-relu": 0.2})
    assert seen == {0.2}
    assert [(r["fused_output"], r["label_smoothing"]) for r in rows] == [
        (False, 0.1), (False, 0.2), (True, 0.2)]


def test_cli_times_each_transform_at_its_label_smoothing(tiny_corpus, tmp_path):
    """What `arelu study`'s bench stage does, from the command line (another machine's
    step times for the same configurations)."""
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[data]\npath = "{tiny_corpus}"\nmax_tokens = 256\n[model]\nd_model = 16\n'
                      "encoder_layers = 1\ndecoder_layers = 1\nheads = 2\nd_ff = 32\n")
    out, runner = tmp_path / "b.csv", CliRunner()
    args = ["bench", "train", "--recipe", str(recipe), "--transforms", "1.5-relu", "--repeats",
            "1", "--warmup", "0", "--device", "cpu", "--out", str(out), "--label-smoothing"]
    result = runner.invoke(app, args + ["softmax=0.1"])
    assert result.exit_code == 0, result.output
    assert pd.read_csv(out)["label_smoothing"].tolist() == [0.1, 0.0]
    for bad, message in [("1.5", "must be in [0, 1)"), ("sparsemax=0.1", "NAME=NUMBER pairs")]:
        result = runner.invoke(app, args + [bad])
        assert result.exit_code != 0
        assert message in result.output + str(result.exception), result.output


def test_cli_names_each_transform_once_and_refuses_load_options_without_under_load(tmp_path):
    """``--label-smoothing bogus=0.1`` does not list "softmax, softmax"; ``--load-steps``
    without ``--under-load`` is not silently ignored."""
    runner = CliRunner()
    base = ["bench", "train", "--recipe", "toy", "--device", "cpu", "--out",
            str(tmp_path / "b.csv")]
    result = runner.invoke(app, base + ["--transforms", "softmax,1.5-relu", "--label-smoothing",
                                        "bogus=0.1", "--max-tokens", "256"])
    assert "NAME=NUMBER pairs of softmax, 1.5-relu (e.g." in str(result.exception)
    result = runner.invoke(app, base + ["--load-steps", "5"])
    assert "--load-steps applies only with --under-load; add --under-load or drop" in str(
        result.exception)
    assert not (tmp_path / "b.csv").exists()
