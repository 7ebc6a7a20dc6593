"""The attention study: variant names, a divergence recorded and reported (never retrained),
and a tiny study end to end that resumes without training or timing again and rebuilds its
tables from a committed folder (no checkpoints)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from arelu_cli.config import ModelConfig, load_config
from arelu_cli.util.errors import UserError
from arelu_cli.train.loop import train
from arelu_cli.train.divergence import Diverged
from arelu_cli.train.run_dir import DIVERGED
from arelu_cli.studies.attention.report import answer
from arelu_cli.studies.attention.variants import variant_model, variants
from arelu_cli.studies.runner import report as rebuild

QUIET = Console(quiet=True)


@pytest.mark.parametrize("label, attention, relu", [
    ("softmax", "softmax", "raw"), ("1.5-entmax", "1.5-entmax", "raw"),
    ("sparsemax", "sparsemax", "raw"), ("1.5-relu-raw", "1.5-relu", "raw"),
    ("1.5-relu-estimated", "1.5-relu", "estimated"),
    ("1.5-relu-renormalized", "1.5-relu", "renormalized"),
    ("2-relu-renormalized", "2-relu", "renormalized")])
def test_a_variant_sets_every_kind(label, attention, relu):
    model = variant_model(ModelConfig(attention_cross="sparsemax"), label)
    assert (model.attention, model.attention_relu) == (attention, relu)
    assert model.attention_encoder == model.attention_decoder == model.attention_cross == ""


@pytest.mark.parametrize("label, eps", [
    ("1.5-relu-renormalized", 1e-3), ("1.5-relu-renormalized-eps0.01", 0.01),
    ("1.5-relu-renormalized-eps1e-4", 1e-4), ("1.5-relu-renormalized-eps1e-6", 1e-6),
    ("1.5-relu-raw", 0.01), ("softmax", 0.01)])
def test_a_renormalized_variant_may_name_its_eps(label, eps):
    """The label's -eps, else the recipe's attention_eps; the other variants take the
    default (the key belongs to the renormalized variant), and a non-alpha-ReLU variant
    drops the recipe's alpha-ReLU keys."""
    recipe = ModelConfig(attention="1.5-relu", attention_relu="renormalized",
                         attention_tau=-0.5, attention_eps=1e-3)
    model = variant_model(recipe, label)
    assert model.attention_eps == eps
    if label == "softmax":
        assert (model.attention_relu, model.attention_tau) == ("raw", 0.0)


@pytest.mark.parametrize("label, message", [
    ("1.5-relu", "must name its alpha-ReLU variant"), ("softmax-raw", "alpha-ReLU attention only"),
    ("no-such-thing", "variant 'no-such-thing'"), ("1.5-relu-normalized", "variant"),
    ("1.5-relu-raw-eps0.01", "-eps is the constant of the renormalized variant only"),
    ("1.5-relu-renormalized-eps", "variant '1.5-relu-renormalized-eps'"),
    ("1.5-relu-renormalized-eps0.0", "eps must be > 0"),
    # the forms of a variant, not only the output transforms' names
    ("1.5-relu-renorm", r"give a normalized transform \(softmax, sparsemax, <a>-entmax, e\.g\. "
     r"1\.5-entmax\) or an alpha-ReLU with its variant \(<a>-relu-raw, <a>-relu-estimated, "
     r"<a>-relu-renormalized, optionally <a>-relu-renormalized-eps<E>\)")])
def test_a_bad_variant_is_one_line(label, message):
    with pytest.raises(UserError, match=message):
        variant_model(ModelConfig(), label)


@pytest.mark.parametrize("table, message", [
    ({"variants": ["softmax", "softmax"]}, "distinct"),
    ({"variants": ["sparsemax"]}, "baseline 'softmax' must be one of"),
    ({"learned_fraction": 0.0}, "learned_fraction"),
    ({"timing_beams": [0]}, "timing_beams")])
def test_impossible_attention_study_tables_are_refused(table, message):
    with pytest.raises(UserError, match=message):
        load_config(None, {("attention_study", k): v for k, v in table.items()})


def _diverging(real, diverge: str, calls: list):
    """The real trainer, except that the ``diverge`` variant's run stops as a run whose loss
    turned NaN does: log rows up to that step, ``diverged.json``, :class:`Diverged`."""
    def trainer(config, folder: Path, resume: bool):
        calls.append(folder.name)
        if folder.name != diverge:
            return real(config, folder, resume)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({**config.to_dict(), "resolved": {}}))
        (folder / "log.csv").write_text("step,train_loss,val_bleu,signature\n2,9.5,,sig\n4,7.0,,sig\n")
        (folder / DIVERGED).write_text(json.dumps({"step": 5, "train_loss": "nan"}))
        raise Diverged("training diverged at step 5 (train_loss nan)")
    return trainer


def test_a_tiny_attention_study_end_to_end(tiny_corpus, tiny_config, tmp_path, one_thread,
                                           run_study):
    base = tiny_config(tiny_corpus, max_steps=6, valid_every=3, save_every=3, keep_every=6,
                       transform="1.5-relu", tau="auto")
    config = dataclasses.replace(base, **{
        "attention_study": dataclasses.replace(
            base.attention_study, variants=("softmax", "1.5-relu-renormalized", "1.5-relu-raw"),
            heatmaps=1, bench_repeats=1, timing_beams=(1,), timing_sentences=4,
            timing_repeats=1, bootstrap_samples=20, learned_fraction=0.01),
        "decode": dataclasses.replace(base.decode, beam=2, max_tokens=2048)})
    calls: list[str] = []
    real = lambda cfg, folder, resume: train(cfg, folder, resume=resume, console=QUIET)  # noqa: E731
    report = run_study(config, tmp_path, _diverging(real, "1.5-relu-raw", calls), "attention")
    assert calls == ["softmax", "1.5-relu-renormalized", "1.5-relu-raw"]

    renorm = json.loads((tmp_path / "runs/1.5-relu-renormalized/config.json").read_text())
    assert renorm["model"]["attention"] == "1.5-relu"
    assert renorm["model"]["attention_relu"] == "renormalized"
    results = pd.read_csv(tmp_path / "results.csv").set_index("variant")
    assert list(results.index) == ["softmax", "1.5-relu-renormalized", "1.5-relu-raw"]
    raw = results.loc["1.5-relu-raw"]
    assert raw["status"] == "diverged" and raw["diverged_step"] == 5
    assert pd.isna(raw["test_bleu"]) and raw["train_loss_last"] == 7.0
    assert results.loc["softmax", "zeros_cross"] == 0.0  # softmax has no exact zeros
    assert 0.0 <= results.loc["1.5-relu-renormalized", "zeros_cross"] <= 1.0
    assert results.loc["softmax", "train_speed_ratio"] == 1.0  # the baseline, by definition
    assert (results["tokens_per_s"] > 0).all() and (results["train_speed_ratio"] > 0).all()
    assert results.loc["1.5-relu-renormalized", "p_value"] <= 1.0
    assert results.loc["softmax", "decode_ratio"] == 1.0
    for name in ("bench_train.csv", "bench_decode.csv"):  # how quiet each timing was
        assert (pd.read_csv(tmp_path / name)["other_cpu"] >= 0).all()
    for name in ("curves.csv", "sparsity.csv", "heatmaps.csv", "bench_train.csv",
                 "bench_decode.csv", "curves.png", "sparsity.png", "heatmaps.png"):
        assert (tmp_path / name).is_file(), name
    sparsity = pd.read_csv(tmp_path / "sparsity.csv")
    assert set(sparsity["variant"]) == {"softmax", "1.5-relu-renormalized"}
    assert set(sparsity["kind"]) == {"encoder", "decoder", "cross"}
    text = report.read_text()
    assert "## Answer" in text and "Diverge: 1.5-relu-raw (non-finite training at step 5)" in text

    # Again: nothing is trained (the diverged run neither), evaluated or timed again.
    made = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")
            if p.suffix in (".pt", ".txt") or p.name in ("bench_train.csv", "bench_decode.csv")}
    calls.clear()
    run_study(config, tmp_path, _diverging(real, "1.5-relu-raw", calls), "attention")
    assert calls == [] and {p: p.stat().st_mtime_ns for p in made} == made

    # A committed study (run records and outputs, no checkpoints) rebuilds its tables alone.
    for path in tmp_path.rglob("*.pt"):
        path.unlink()
    (tmp_path / "results.csv").unlink()
    run_study(config, tmp_path, _diverging(real, "1.5-relu-raw", calls), "attention")
    assert calls == []
    again = pd.read_csv(tmp_path / "results.csv").set_index("variant")
    assert again["test_bleu"].equals(results["test_bleu"])
    (tmp_path / "results.csv").unlink()
    rebuild(tmp_path)  # arelu report: from the folder's files alone
    assert pd.read_csv(tmp_path / "results.csv").set_index("variant")["test_bleu"].equals(
        results["test_bleu"])


def test_no_bleu_is_not_learning():
    from arelu_cli.studies.attention.report import _status

    assert _status(0.0, 0.0, False, 0.5) == "does not learn"
    assert _status(10.0, 20.0, False, 0.5) == "learns"
    assert _status(9.9, 20.0, False, 0.5) == "does not learn"
    assert _status(None, 20.0, True, 0.5) == "diverged"


def test_the_answer_names_each_outcome():
    config = load_config(None, {("train", "max_steps"): 1200, ("train", "transform"): "1.5-relu"})
    blank = {k: None for k in ("delta", "p_value", "train_speed_ratio", "decode_ratio",
                               "diverged_step")}
    rows = [{**blank, "variant": "softmax", "status": "learns", "dev_bleu": 30.0,
             "test_bleu": 31.0, "unstable": False},
            {**blank, "variant": "1.5-relu-renormalized", "status": "learns", "dev_bleu": 29.0,
             "test_bleu": 30.5, "delta": -0.5, "delta_low": -1.5, "delta_high": 0.4,
             "p_value": 0.2, "train_speed_ratio": 0.8, "decode_ratio": 1.1, "unstable": False},
            {**blank, "variant": "1.5-relu-raw", "status": "does not learn", "dev_bleu": 0.4,
             "test_bleu": 0.3, "unstable": True},
            {**blank, "variant": "1.5-relu-estimated", "status": "diverged", "diverged_step": 40,
             "dev_bleu": None, "test_bleu": None, "unstable": False}]
    text = answer(config, rows)
    assert "softmax attention reaches dev BLEU 30.00 and test BLEU 31.00" in text
    assert ("1.5-relu-renormalized (test BLEU 30.50, -0.50 [-1.50, +0.40] vs softmax: "
            "inconclusive; trains at 0.80× its tokens/s, decodes in 1.10× its time)") in text
    assert "Do not learn: 1.5-relu-raw (last dev BLEU 0.40)" in text
    assert "Diverge: 1.5-relu-estimated (non-finite training at step 40)" in text
    assert "rose by more than 0.5 from its lowest value in: 1.5-relu-raw" in text


@pytest.mark.parametrize("name", ["toy-attention", "multi30k-attention"])
def test_the_shipped_attention_recipes_are_valid(name):
    from arelu_cli.config import resolve_recipe
    from arelu_cli.studies.attention.study import check

    config = load_config(resolve_recipe(name))
    check(config)
    runs = variants(config, Path("out"))
    models = [v.config.model for v in runs]
    assert [v.name for v in runs][0] == "softmax" and len(runs) == 7
    assert {m.attention_relu for m in models if m.attention == "1.5-relu"} == {
        "raw", "estimated", "renormalized"}
    assert sorted(m.attention_eps for m in models
                  if m.attention_relu == "renormalized") == [1e-6, 0.01]
    assert config.train.transform == "1.5-relu" and config.decode.beam == 5
    assert config.study.kind == "attention"


def test_the_reports_speed_ratios_are_the_medians_of_the_paired_ratios():
    """The report says so in its header: decoding takes ratio_paired, not the ratio of the
    two medians (which a noisy repeat moves more)."""
    import pandas as pd

    from arelu_cli.studies.attention.report import _speed

    bench = pd.DataFrame([{"variant": "a", "tokens_per_s": 900.0, "speed_ratio": 0.9}])
    decode = pd.DataFrame([{"variant": "a", "beam": 5, "seconds": 2.0, "ratio": 0.98,
                            "ratio_paired": 0.93},
                           {"variant": "a", "beam": 1, "seconds": 1.0, "ratio": 1.5,
                            "ratio_paired": 1.4}])
    speed = _speed(bench, decode, "a", 5)
    assert (speed["train_speed_ratio"], speed["decode_ratio"], speed["decode_seconds"]) == (
        0.9, 0.93, 2.0)
    assert _speed(None, decode, "a", 1)["decode_ratio"] == 1.4
    assert _speed(bench, decode, "b", 5)["decode_ratio"] is None


def _recorded(config, folder: Path, steps: int, *, last: bool = True) -> None:
    """What a finished run of ``config`` leaves (its config.json, summary, translation)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**config.to_dict(), "resolved": {}}))
    (folder / "summary.json").write_text(json.dumps({"best_bleu": 1.0, "steps": steps}))
    if last:
        (folder / "last.pt").write_bytes(b"")


def _small_study(**train):
    return load_config(None, {("train", "keep_every"): 3, ("train", "max_steps"): 6,
                              ("train", "max_minutes"): 0.0, ("train", "lr"): 0.5,
                              ("attention_study", "variants"): ["softmax", "sparsemax"],
                              ("attention_study", "timing"): False,
                              **{("train", k): v for k, v in train.items()}})


@pytest.mark.parametrize("table, edit", [("train", {"lr": 1.0}), ("model", {"dropout": 0.0})])
def test_an_edited_recipe_is_refused_not_reported_as_the_runs_settings(tmp_path, table, edit,
                                                                       run_study):
    """Edit lr (or [model]) after the study trained: nothing is silently reused under the
    new settings; one line names the setting before any work."""
    config = _small_study()
    for variant in variants(config, tmp_path):
        _recorded(variant.config, variant.folder, 6)
    edited = dataclasses.replace(config, **{table: dataclasses.replace(
        getattr(config, table), **edit)})
    key = next(iter(edit))
    calls = []
    with pytest.raises(UserError, match=rf"runs/softmax was trained with {table}\.{key} = "):
        run_study(edited, tmp_path, lambda c, f, r: calls.append(f), "attention")
    assert calls == [] and not (tmp_path / "REPORT.md").exists()


def test_a_larger_step_budget_continues_the_finished_runs(tmp_path):
    """Raising max_steps after a study finished resumes each run from its last.pt."""
    from arelu_cli.studies.core import train_if_needed

    config = _small_study()
    for variant in variants(config, tmp_path):
        _recorded(variant.config, variant.folder, 6)
    calls = []
    longer = variants(_small_study(max_steps=12), tmp_path)[0]
    train_if_needed(longer, lambda c, f, resume: calls.append((f.name, resume,
                                                               c.train.max_steps)), QUIET)
    assert calls == [("softmax", True, 12)]
    for path in tmp_path.rglob("last.pt"):
        path.unlink()
    with pytest.raises(UserError, match="its last.pt is gone, so it cannot be continued"):
        train_if_needed(longer, lambda *a: None, QUIET)
