"""The conversion study end to end on a tiny Llama (hidden 16, 2 layers) and the toy-lm
corpus: pretrain, fine-tune arms, evaluations, selections; resuming a stopped run and calling
the study again change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from arelu_cli.data.prepared import load_prepared  # noqa: E402
from arelu_cli.studies.lm.convert.recipe import from_tables, load_recipe  # noqa: E402
from arelu_cli.studies.lm.convert.stages import finetune_spec, run_study  # noqa: E402
from arelu_cli.studies.lm.convert.train import STATE, train_run  # noqa: E402
from arelu_cli.util.errors import UserError  # noqa: E402


def tiny(corpus: Path, **finetune) -> object:
    return from_tables({
        "data": {"path": str(corpus), "block_size": 16, "max_tokens": 64},
        "model": {"hidden_size": 16, "layers": 2, "heads": 2, "intermediate_size": 32},
        "pretrain": {"steps": 4, "warmup": 1, "ppl_stride": 8},
        "finetune": {"steps": 4, "warmup": 1, "seeds": [1], "eval_steps": [0, 2, 4],
                     "grid_steps": 2, "tau_grid": [0.5, 1.0], "save_every": 2,
                     "log_every": 2, **finetune},
        "reference": {"scratch": False},
        "eval": {"prompts": 4, "max_new_tokens": 4, "stride": 16}})


@pytest.fixture(scope="module")
def study(tiny_lm_corpus, tmp_path_factory):
    torch.set_num_threads(1)
    recipe = tiny(tiny_lm_corpus, arms=["softmax", "relu-tau_for", "relu-tau_dev"])
    out = tmp_path_factory.mktemp("convert")
    run_study(recipe, out, say=lambda line: None)
    return recipe, out


def test_every_arm_is_trained_and_evaluated_at_every_step(study):
    _, out = study
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
        assert row.is_file()
        ids = json.loads((row.parent / "generations/sample.tokens.json").read_text())["tokens"]
        assert len(ids) == 4
    grid = (out / "grid.csv").read_text().splitlines()
    assert len(grid) == 3 and grid[0].startswith("factor,tau,steps,dev_eps_ppl")
    selection = json.loads((out / "selection.json").read_text())
    assert selection["tau_dev"]["run"] in ("relu-tau_for", "relu-x0.5")


def test_calling_it_again_trains_nothing(study):
    recipe, out = study
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()
              and p.name != "driver.log"}
    run_study(recipe, out, say=lambda line: None)
    after = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()
             and p.name != "driver.log"}
    changed = [p for p in after if before.get(p) != after[p] and p.name != "recipe.json"]
    assert not changed


def test_a_stopped_run_resumes_to_the_same_weights(study, tmp_path):
    recipe, out = study
    data = load_prepared(recipe.data.path)
    spec = finetune_spec(recipe, out, "1.5-relu", 0.1, seed=1)
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
    recipe, out = study
    data = load_prepared(recipe.data.path)
    spec = finetune_spec(recipe, out, "1.5-relu", 0.1, seed=1)
    train_run(tmp_path, spec, data, recipe.model, until=1, say=lambda line: None)
    other = finetune_spec(recipe, out, "1.5-relu", 0.2, seed=1)
    with pytest.raises(UserError, match="tau"):
        train_run(tmp_path, other, data, recipe.model, say=lambda line: None)


def test_lora_trains_only_its_adapters_and_saves_merged_weights(study, tmp_path):
    from transformers import LlamaForCausalLM

    recipe, out = study
    data = load_prepared(recipe.data.path)
    spec = finetune_spec(recipe, out, "1.5-relu", 0.1, seed=1, lora=True)
    train_run(tmp_path, spec, data, recipe.model, say=lambda line: None)
    merged = LlamaForCausalLM.from_pretrained(tmp_path / "snapshots" / "step-4")
    assert merged.config.arelu["transform"] == "1.5-relu"
    base = LlamaForCausalLM.from_pretrained(spec.init)
    emb = "model.embed_tokens.weight"
    torch.testing.assert_close(merged.state_dict()[emb], base.state_dict()[emb])
    moved = merged.state_dict()["model.layers.0.self_attn.q_proj.weight"]
    assert not torch.equal(moved, base.state_dict()["model.layers.0.self_attn.q_proj.weight"])


def test_the_shipped_recipe_loads_and_unknown_keys_are_refused(tmp_path):
    recipe = load_recipe(Path(__file__).parents[4] / "recipes" / "ptb-convert.toml")
    assert recipe.finetune.eval_steps[-1] == recipe.finetune.steps
    bad = tmp_path / "bad.toml"
    bad.write_text("[finetune]\nstepz = 3\n")
    with pytest.raises(UserError, match="stepz"):
        load_recipe(bad)
    with pytest.raises(UserError, match="eval_steps"):
        from_tables({"finetune": {"steps": 10, "eval_steps": [0, 5]}})


def test_the_report_is_computed_from_the_folder(study):
    from arelu_cli.studies.lm.convert.report import write_report

    _, out = study
    text = write_report(out, samples=20).read_text()
    for name in ("lm_eval.csv", "summary.csv", "significance.csv"):
        assert (out / name).is_file()
    assert "## Answer" in text and "| relu-tau_for | 4 | sample |" in text
    assert "| softmax | 4 | sample-top_p0.9 |" in text
    assert "within 2% of the control" in text
