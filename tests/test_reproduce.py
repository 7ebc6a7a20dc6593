"""``arelu reproduce`` on a tiny recipe: every CSV with its columns, PNGs and REPORT.md; a
second call skips every step; lost outputs and an unfinished run are redone."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from arelu_cli.errors import UserError
from arelu_cli.report.columns import COLUMNS
from arelu_cli.reproduce import Request, load_request_config, reproduce, resolve_recipe

SCORED_BY_HAND = {"table_human_eval.csv", "human_eval_kappa.csv"}  # need filled sheets


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return repr(value)


def write_recipe(path: Path, corpus: Path, model: dict) -> Path:
    tables = {
        "data": {"path": str(corpus), "max_tokens": 256},
        "model": model,
        "train": {"max_steps": 6, "warmup": 4, "lr": 1.0, "accum": 1, "log_every": 2,
                  "valid_every": 3, "save_every": 3, "stats_rows": 32, "device": "cpu"},
        "decode": {"beam": 2, "max_tokens": 2048},
        "reproduce": {"corpus": "toy", "transforms": ["softmax", "1.5-entmax", "1.5-relu"],
                      "tau_sweep": [0.0, 0.3], "sweep_steps": 4, "beams": [1, 2],
                      "timing_sentences": 5, "timing_repeats": 2, "train_sentences": 10,
                      "human_eval_items": 6},
    }
    path.write_text("".join(f"[{name}]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in t.items())
                            + "\n" for name, t in tables.items()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_model(tiny_corpus, tiny_config) -> dict:
    return dataclasses.asdict(tiny_config(tiny_corpus).model)


@pytest.fixture(scope="module")
def grid(tiny_corpus, tiny_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("grid")
    recipe = write_recipe(folder / "tiny.toml", tiny_corpus, tiny_model)
    request = Request(recipe, folder / "results", device="cpu")
    console = Console(record=True, width=120)
    report = reproduce(request, console)
    return request, report, console.export_text()


def test_every_csv_png_and_the_report(grid):
    request, report, _ = grid
    out = request.out
    for name, columns in COLUMNS.items():
        if name in SCORED_BY_HAND:
            continue
        frame = pd.read_csv(out / name)
        assert tuple(frame.columns) == columns, name
        if name not in ("translation_examples.csv",):
            assert len(frame) > 0, name
    table1 = pd.read_csv(out / "table1_bleu.csv")
    assert table1["transform"].tolist() == ["softmax", "1.5-entmax", "1.5-relu"]
    assert set(pd.read_csv(out / "fig_sparsity.csv")["split"]) == {"test", "train"}
    assert set(pd.read_csv(out / "fig_self_norm.csv")["transform"]) == {"1.5-relu"}
    assert sorted(pd.read_csv(out / "fig_tau_sweep.csv")["tau"].unique()) == [0.0, 0.3]
    timing = pd.read_csv(out / "fig_inference_time.csv")
    assert len(timing) == 3 * 2 and timing["normalized"].min() == pytest.approx(1.0)
    assert set(pd.read_csv(out / "analysis" / "bench_translate.csv")["repeats"]) == {2}
    assert list(out.glob("*.png")) and report == out / "REPORT.md"
    text = report.read_text(encoding="utf-8")
    assert "arelu reproduce" in text and "table1_bleu.csv" in text
    for name in ("softmax", "1.5-entmax", "1.5-relu"):
        hyps = (out / "translations" / f"{name}.test.txt").read_text(encoding="utf-8")
        assert len(hyps.splitlines()) == 40
    assert (out / "human_eval" / "key.csv").is_file()


def test_a_second_call_skips_every_step(grid):
    request, _, _ = grid
    before = {p: p.stat().st_mtime_ns for p in request.out.rglob("*") if p.suffix in (".csv", ".pt", ".txt")
              and p.parent.name not in ("",) and p.name not in {"commands.txt"}}
    console = Console(record=True, width=120)
    reproduce(request, console)
    text = console.export_text()
    steps = [line for line in text.splitlines() if line.startswith("[")]
    assert len(steps) == 16 and all(line.endswith("done already, skipped") for line in steps)
    kept = [p for p in before if p.parent == request.out / "translations" or p.suffix == ".pt"]
    assert kept and all(p.stat().st_mtime_ns == before[p] for p in kept)


def test_lost_outputs_and_an_unfinished_run_are_redone(grid):
    request, _, _ = grid
    out = request.out
    (out / "table2_empty.csv").unlink()
    (out / "translations" / "1.5-relu.test.txt").unlink()
    (out / "runs" / "softmax" / "summary.json").unlink()  # as if killed before the end
    console = Console(record=True, width=120)
    reproduce(request, console)
    text = console.export_text()
    redone = set(re.findall(r"^(.+): \d+ s$", text, re.M))
    assert {"train softmax", "translate 1.5-relu (beam 2)", "empty check (Table 2)",
            "score (Table 1)", "examples and human-eval sheets"} <= redone
    assert "[4/16] train 1.5-entmax: done already, skipped" in text
    assert "[9/16] translate 1.5-entmax (beam 2): done already, skipped" in text
    assert (out / "runs" / "softmax" / "summary.json").is_file()
    assert (out / "table2_empty.csv").is_file()
    assert json.loads((out / "runs" / "softmax" / "summary.json").read_text())["steps"] == 6


def test_a_clone_without_checkpoints_trains_again_and_redoes_what_depends_on_it(grid):
    """Committed results hold summary.json but no *.pt: the model is trained again, and every
    output computed from the old model is redone; the other transforms are left alone."""
    request, _, _ = grid
    out = request.out
    for ckpt in (out / "runs" / "softmax").glob("*.pt"):
        ckpt.unlink()
    console = Console(record=True, width=120)
    reproduce(request, console)
    text = console.export_text()
    redone = set(re.findall(r"^(.+): \d+ s$", text, re.M))
    assert redone == {"train softmax", "translate softmax (beam 2)", "score (Table 1)",
                      "empty check (Table 2)", "sparsity", "self-normalization",
                      "inference time", "examples and human-eval sheets"}
    assert (out / "runs" / "softmax" / "last.pt").is_file()
    assert json.loads((out / "runs" / "softmax" / "summary.json").read_text())["steps"] == 6


def test_bad_requests_fail_before_any_work(tiny_corpus, tiny_model, tmp_path):
    recipe = write_recipe(tmp_path / "tiny.toml", tiny_corpus, tiny_model)
    with pytest.raises(UserError, match="no recipe"):
        resolve_recipe("no-such-recipe")
    with pytest.raises(UserError, match="unknown|transform"):
        load_request_config(Request(recipe, tmp_path / "r", transforms=("softmax", "2.5-nope")))
    with pytest.raises(UserError, match="tau_sweep|number"):
        load_request_config(Request(recipe, tmp_path / "r", tau_sweep=("x",)))  # type: ignore[arg-type]
    assert not (tmp_path / "r").exists()
