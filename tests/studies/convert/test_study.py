"""The conversion study end to end on the one runner, on a tiny Llama (hidden 16, 2 layers) and
the toy-lm corpus: pretrain, fine-tune arms, evaluations, selections, the report from the
folder's files; calling it again trains nothing, a stopped run resumes to the same weights,
and a folder with parts missing still reports, saying what is missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from rich.console import Console

pytest.importorskip("transformers")

from arelu_cli.config import recipe_tables  # noqa: E402
from arelu_cli.data.prepared import load_prepared  # noqa: E402
from arelu_cli.studies import runner  # noqa: E402
from arelu_cli.studies.contract import RECORD, Context  # noqa: E402
from arelu_cli.studies.convert import evaluate as E  # noqa: E402
from arelu_cli.studies.convert import stages as S  # noqa: E402
from arelu_cli.studies.convert.recipe import from_tables  # noqa: E402
from arelu_cli.studies.convert.train import STATE, train_run  # noqa: E402
from arelu_cli.util.errors import UserError  # noqa: E402

QUIET = Console(quiet=True)

ROOT = Path(__file__).resolve().parents[3]
ARMS = ["softmax", "relu-tau_for", "relu-tau_dev", "relu-lora"]


def tiny(corpus: Path, **finetune) -> dict:
    """The tables of a tiny conversion recipe (fine-tuning 4 steps, evaluated at 0, 2, 4)."""
    return {
        "study": {"kind": "convert", "threads": 1},
        "data": {"path": str(corpus), "block_size": 16, "max_tokens": 64},
        "model": {"hidden_size": 16, "layers": 2, "heads": 2, "intermediate_size": 32},
        "pretrain": {"steps": 4, "warmup": 1, "ppl_stride": 8},
        "finetune": {"arms": ARMS, "steps": 4, "warmup": 1, "seeds": [1], "eval_steps": [0, 2, 4],
                     "grid_steps": 2, "tau_grid": [0.5, 1.0], "save_every": 2, "log_every": 2,
                     **finetune},
        "reference": {"scratch": False},
        "eval": {"prompts": 4, "max_new_tokens": 4, "stride": 16, "bootstrap_samples": 20}}


def never(*args, **kwargs):
    raise AssertionError("nothing may train or evaluate again")


def run(tables: dict, out: Path) -> Path:
    study, recipe = runner.load(tables)
    study.check(recipe)
    return runner.run(recipe, out, Context(QUIET, never, "test"))


@pytest.fixture(scope="module")
def study(tiny_lm_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("convert") / "study"
    tables = tiny(tiny_lm_corpus)
    return tables, out, run(tables, out)


def test_every_arm_is_trained_and_evaluated_at_every_step(study):
    _, out, _ = study
    assert (out / "pretrain" / "summary.json").is_file()
    assert (out / "pretrain" / "eval-ppl" / "sample.csv").is_file()
    assert {"tau_for", "analytic", "entmax_threshold_mean"} <= set(
        json.loads((out / "taus.json").read_text()))
    for label in ("sample", "sample-top_p0.9"):
        assert (out / "runs/softmax/step-0/eval" / f"{label}.csv").is_file()
        for step in (2, 4):
            assert (out / f"runs/softmax/seed-1/eval/step-{step}/{label}.csv").is_file()
    for step in (2, 4):
        row = out / f"runs/relu-tau_for/seed-1/eval/step-{step}/sample.csv"
        ids = json.loads((row.parent / "generations/sample.tokens.json").read_text())["tokens"]
        assert len(ids) == 4
        named = pd.read_csv(row).iloc[0]      # files named by their paths in the study folder
        assert named["checkpoint"] == f"runs/relu-tau_for/seed-1/snapshots/step-{step}"
        assert named["generations"] == f"runs/relu-tau_for/seed-1/eval/step-{step}/" \
                                       "generations/sample.txt"
    grid = (out / "grid.csv").read_text().splitlines()
    assert len(grid) == 3 and grid[0].startswith("factor,tau,steps,dev_eps_ppl")
    selection = json.loads((out / "selection.json").read_text())
    assert selection["tau_dev"]["run"] in ("relu-tau_for", "relu-x0.5")
    assert selection["lora"]["rule"] in ("tau_for", "tau_dev")
    assert (out / "runs/relu-lora/seed-1/eval/step-4/sample.csv").is_file()


def test_the_runner_records_the_study_and_writes_its_report(study):
    _, out, report = study
    record = json.loads((out / RECORD).read_text())
    assert record["kind"] == "convert" and record["config"]["finetune"]["arms"] == ARMS
    text = report.read_text()
    for name in ("lm_eval.csv", "summary.csv", "ratios.csv", "significance.csv", "ratios.png"):
        assert (out / name).is_file(), name
    assert "## Answer" in text and "| relu-tau_for | 4 | sample |" in text
    assert "| softmax | 4 | sample-top_p0.9 |" in text
    assert "Every run and evaluation of the recipe is measured." in text
    assert "After how many fine-tuning steps is `relu-tau_for` within 2%" in text
    assert "Does LoRA suffice" in text and "Is the analytic τ wrong" in text
    ratios = pd.read_csv(out / "ratios.csv")
    first = ratios[(ratios["arm"] == "relu-tau_for") & (ratios["step"] == 0)].iloc[0]
    assert first["seeds"] == "-" and first["delta_low"] == first["delta_high"]  # exact
    later = ratios[(ratios["arm"] == "relu-tau_for") & (ratios["step"] == 4)].iloc[0]
    assert later["seeds"] == "1" and pd.isna(later["delta_low"])   # one seed: no interval
    assert "seed 1 alone: no interval" in text


def test_calling_it_again_trains_and_evaluates_nothing(study, monkeypatch):
    tables, out, _ = study
    made = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*") if p.is_file()}
    monkeypatch.setattr(S, "train_run", never)
    monkeypatch.setattr(E, "load", never)
    run(tables, out)
    assert made == {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*") if p.is_file()}


def test_arelu_report_rebuilds_the_folder_from_its_files(study, tmp_path, cli):
    _, out, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("state.pt", "snapshots", "model"))
    for name in ("summary.csv", "ratios.csv", "ratios.png", "REPORT.md"):
        (copy / name).unlink()
    ran = cli("report", copy)
    assert ran.code == 0, ran.err
    assert (copy / "REPORT.md").read_text() == (out / "REPORT.md").read_text()
    assert (copy / "ratios.csv").read_text() == (out / "ratios.csv").read_text()


def test_a_folder_with_parts_missing_reports_what_is_missing(study, tmp_path, cli):
    _, out, _ = study
    copy = tmp_path / "partial"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("state.pt", "snapshots", "model"))
    shutil.rmtree(copy / "runs/relu-tau_for/seed-1/eval/step-4")
    (copy / "runs/softmax/seed-1/summary.json").unlink()
    selection = json.loads((copy / "selection.json").read_text())
    del selection["lora"]
    (copy / "selection.json").write_text(json.dumps(selection))
    ran = cli("report", copy)
    assert ran.code == 0, ran.err
    text = (copy / "REPORT.md").read_text()
    assert "Not measured yet:" in text
    assert "- relu-tau_for seed 1: step 4 not evaluated." in text
    assert "- softmax seed 1: still training." in text
    assert "- relu-lora: its tau rule not chosen on dev yet (selection.json)" in text
    assert "Does LoRA suffice (its ε-perplexity within 2% of the full fine-tune's at its τ " \
           "rule)? Not measured yet." in text
    assert "(measured to step 2 of 4)" in text
    assert "note: relu-tau_for seed 1: step 4 not evaluated" in ran.err


def test_a_stopped_run_resumes_to_the_same_weights(study, tmp_path):
    tables, out, _ = study
    recipe = from_tables(tables)
    data = load_prepared(recipe.data.path)
    spec = S.finetune_spec(recipe, out.resolve(), "1.5-relu", 0.1, seed=1)
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    train_run(whole, spec, data, recipe.model, say=lambda line: None)
    train_run(parts, spec, data, recipe.model, until=1, say=lambda line: None)
    assert torch.load(parts / STATE, weights_only=False)["step"] == 1
    train_run(parts, spec, data, recipe.model, say=lambda line: None)
    a = torch.load(whole / STATE, weights_only=False)["model"]
    b = torch.load(parts / STATE, weights_only=False)["model"]
    for key in a:
        torch.testing.assert_close(a[key], b[key])


def test_a_run_refuses_other_settings(study, tmp_path):
    tables, out, _ = study
    recipe = from_tables(tables)
    data = load_prepared(recipe.data.path)
    spec = S.finetune_spec(recipe, out.resolve(), "1.5-relu", 0.1, seed=1)
    train_run(tmp_path, spec, data, recipe.model, until=1, say=lambda line: None)
    other = S.finetune_spec(recipe, out.resolve(), "1.5-relu", 0.2, seed=1)
    with pytest.raises(UserError, match="tau"):
        train_run(tmp_path, other, data, recipe.model, say=lambda line: None)


def test_the_study_refuses_other_shared_tables_before_training(study, tmp_path):
    tables, out, _ = study
    shutil.copy(out / "recipe.json", tmp_path)
    changed = {**tables, "model": {**tables["model"], "hidden_size": 32, "heads": 4}}
    with pytest.raises(UserError, match=r"was made with other \[model\]"):
        run(changed, tmp_path)
    assert not (tmp_path / "pretrain").exists()


def test_lora_trains_only_its_adapters_and_saves_merged_weights(study, tmp_path):
    from transformers import LlamaForCausalLM

    tables, out, _ = study
    recipe = from_tables(tables)
    data = load_prepared(recipe.data.path)
    spec = S.finetune_spec(recipe, out.resolve(), "1.5-relu", 0.1, seed=1, lora=True)
    train_run(tmp_path, spec, data, recipe.model, say=lambda line: None)
    merged = LlamaForCausalLM.from_pretrained(tmp_path / "snapshots" / "step-4")
    assert merged.config.arelu["transform"] == "1.5-relu"
    base = LlamaForCausalLM.from_pretrained(spec.init)
    emb = "model.embed_tokens.weight"
    torch.testing.assert_close(merged.state_dict()[emb], base.state_dict()[emb])
    moved = merged.state_dict()["model.layers.0.self_attn.q_proj.weight"]
    assert not torch.equal(moved, base.state_dict()["model.layers.0.self_attn.q_proj.weight"])


def test_the_shipped_recipe_names_the_study_and_bad_tables_are_refused():
    study, recipe = runner.load(recipe_tables(ROOT / "recipes" / "ptb-convert.toml"))
    assert study.kind == "convert" and recipe.finetune.eval_steps[-1] == recipe.finetune.steps
    assert recipe.to_dict()["finetune"]["arms"] == list(recipe.finetune.arms)
    with pytest.raises(UserError, match="stepz"):
        from_tables({"study": {"kind": "convert"}, "finetune": {"stepz": 3}})
    with pytest.raises(UserError, match="eval_steps"):
        from_tables({"finetune": {"steps": 10, "eval_steps": [0, 5]}})
    with pytest.raises(UserError, match=r"unknown table\(s\) \[train\]"):
        from_tables({"study": {"kind": "convert"}, "train": {}})


def test_the_study_command_refuses_a_bad_convert_recipe_in_one_line(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "bad.toml"
    recipe.write_text('[study]\nkind = "convert"\n[finetune]\nstepz = 3\n')
    ran = cli("study", recipe)
    assert ran.code == 2 and "unknown key(s) stepz in [finetune]" in ran.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]
