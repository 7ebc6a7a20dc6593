"""REPORT.md: sections beside the paper, computed verdicts, missing CSVs, commands."""

import pandas as pd

from arelu_cli.config import ReproduceConfig, load_config, resolve_recipe
from arelu_cli.studies.paper import reproduction_report, tables
from arelu_cli.studies.paper.columns import CATALOG, COLUMNS
from arelu_cli.util.results import write_rows


def _table1(folder, relu_bleu):
    scores = {"softmax": 35.3, "sparsemax": 30.0, "1.5-entmax": 36.6, "1.5-relu": relu_bleu}
    write_rows([tables.table1_row("iwslt14", t, b) for t, b in scores.items()],
               folder / "table1_bleu.csv", COLUMNS["table1_bleu.csv"])


def test_empty_folder_lists_every_csv_as_missing(tmp_path):
    text = reproduction_report.render_report(tmp_path, ["arelu reproduce recipes/toy.toml"])
    missing = text.split("## Missing")[1].split("## Commands")[0]
    assert all(f"`{name}`" in missing for name in CATALOG)
    assert "## Table 1" not in text and "![" not in text
    assert "```\narelu reproduce recipes/toy.toml\n```" in text


def test_table1_verdicts_are_computed_from_the_numbers(tmp_path):
    _table1(tmp_path, 37.3)
    text = reproduction_report.render_report(tmp_path, [])
    assert "| iwslt14 | sparsemax | 30.0 | - | 35.5 | -5.5 |" in text
    assert "**Differs**: iwslt14 sparsemax (30.0 vs 35.5, Δ -5.5)" in text
    assert "iwslt14 1.5-relu (37.3 vs 37.3, Δ +0.0)" in text.split("**Differs**")[0]
    assert "✓ Paper's claim — 1.5-ReLU performs on par with 1.5-entmax" in text
    assert "`table1_bleu.csv`" not in text.split("## Missing")[1].split("## Commands")[0]
    _table1(tmp_path, 34.0)
    text = reproduction_report.render_report(tmp_path, [])
    assert "✗ Paper's claim — 1.5-ReLU performs on par" in text


def test_corpus_without_paper_numbers_checks_only_claims(tmp_path):
    write_rows([tables.table1_row("toy", "1.5-relu", 20.0)],
               tmp_path / "table1_bleu.csv", COLUMNS["table1_bleu.csv"])
    text = reproduction_report.render_report(tmp_path, [])
    assert "No number here has a paper counterpart" in text
    assert "? Paper's claim — 1.5-ReLU performs on par" in text


def test_every_csv_makes_a_section_and_figures_embed_only_when_drawn(all_csvs, regenerate):
    text = reproduction_report.render_report(all_csvs, [])
    assert "Nothing: every CSV of the catalog is present." in text
    assert "![" not in text and "is not drawn yet" in text
    done = regenerate(all_csvs)
    text = done.report.read_text()
    for png in done.pngs:
        assert f"]({png.name})" in text
    assert text.count("## ") >= len(reproduction_report.SECTIONS) + 3


def test_a_report_builds_from_runs_and_lists_the_recorded_commands(tmp_path, run_folder,
                                                                  regenerate):
    for transform, tau in (("softmax", None), ("1.5-relu", 0.3)):
        run_folder(tmp_path / "runs" / transform, transform, tau=tau)
    run_folder(tmp_path / "tau-sweep" / "tau-0.1", "1.5-relu", tau=0.1)
    (tmp_path / "commands.txt").write_text("arelu prepare toy\n\narelu train --transform softmax\n")
    done = regenerate(tmp_path, gpu_watts=250.0)
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == [
        "fig_alpha_relu_curves.csv", "fig_tau_norm_evolution.csv", "fig_tau_sweep.csv",
        "fig_training_dynamics.csv", "seed_summary.csv", "table3_tau.csv", "training_time.csv"]
    assert len(done.pngs) == 4
    text = done.report.read_text()
    assert "```\narelu prepare toy\narelu train --transform softmax\n```" in text
    assert "`table1_bleu.csv`" in text.split("## Missing")[1]
    assert pd.read_csv(tmp_path / "training_time.csv")["kwh"].notna().all()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}")[1].split("\n## ")[0]


def test_one_seed_reads_as_before_with_the_tests_of_table1(all_csvs, regenerate):
    text = regenerate(all_csvs).report.read_text()
    assert "±" not in text and "seeds" not in _section(text, "Table 1")
    table1 = _section(text, "Table 1")
    assert "| BLEU 95% CI | Δ vs baseline [95% CI] | p |" in table1
    assert "| iwslt14 | softmax | 35.1 | - | 35.3 | -0.2 | [" in table1
    relu = next(line for line in table1.splitlines() if line.startswith("| iwslt14 | 1.5-relu"))
    cells = [c.strip() for c in relu.strip("|").split("|")]
    assert cells[7].startswith("+") and "[" in cells[7] and float(cells[8]) <= 1
    assert "Against softmax on iwslt14 (paired bootstrap, 95% interval of Δ): better: " \
        "1.5-relu" in table1
    assert "1,000 resamples" not in table1 and "200 resamples, seed 12345" in table1


def test_several_seeds_show_mean_std_and_each_seed_everywhere(seeded_csvs, regenerate):
    done = regenerate(seeded_csvs, seeds=(1, 2, 3))
    text = done.report.read_text()
    table1 = _section(text, "Table 1")
    assert "| iwslt14 | 1.5-relu | 37.1 ± 0.1 (37.0 / 37.1 / 37.2) |" in table1
    assert "| iwslt14 | softmax | 35.1 (all 3 seeds) |" in table1
    assert "(per seed: " in table1 and "concatenated" in table1
    assert "Over 3 training seeds: mean ± sample std (seed 1 / 2 / 3)" in table1
    assert "| iwslt14 | softmax | 3/40 / 4/40 / 5/40 | 10.00 ± 2.50 (7.50 / 10.00 / 12.50) |" in text
    for title in ("Figures: training dynamics", "Figure: evolution of τ(z)", "Figure: impact of τ",
                  "Figure: normalized inference time", "Figure: sparsity",
                  "Figure: self-normalization", "Training time"):
        assert "±" in _section(text, title) and "Over 3 training seeds" in _section(text, title)
    dynamics = _section(text, "Figures: training dyn")
    assert "| softmax | softmax | 40 (all 3 seeds) | 0.00 (all 3 seeds) | 0.200 (all 3 seeds) | " \
           "4.40 ± 0.40 (4.00 / 4.40 / 4.80) |" in dynamics
    assert "1.5-ReLU's τ remains constant (1.5-relu, all 3 seeds)" in text
    assert all(f"]({png.name})" in text for png in done.pngs)


def test_a_grid_without_the_tau_sweep_says_so_and_how_to_measure_it(tmp_path, run_folder,
                                                                     regenerate):
    run_folder(tmp_path / "runs" / "softmax", "softmax")
    (tmp_path / "commands.txt").write_text("arelu reproduce toy\narelu report results/toy\n")
    missing = _section(regenerate(tmp_path, taus=()).report.read_text(), "Missing")
    left_out, absent = missing.split("Not measured in this folder")
    assert "Left out of this recipe's grid" in left_out and "`fig_tau_sweep.csv`" in left_out
    assert "`arelu reproduce toy --set reproduce.tau_sweep=[0.0,0.1,0.2,0.3,5.0,10.0] --set " \
           "reproduce.sweep_steps=100000`" in left_out
    assert "`table1_bleu.csv`" in absent and "`fig_tau_sweep.csv`" not in absent
    missing = _section(regenerate(tmp_path, taus=(0.1,)).report.read_text(), "Missing")
    assert "Left out" not in missing and "`fig_tau_sweep.csv`" in missing


def test_the_recipe_named_for_the_full_sweep_runs_the_papers_taus():
    config = load_config(resolve_recipe(reproduction_report.SWEEP_RECIPE))
    assert config.reproduce.tau_sweep == ReproduceConfig().tau_sweep
