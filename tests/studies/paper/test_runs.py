"""Run folders -> training dynamics, tau/||z|| evolution, training time and the tau sweep."""

import pandas as pd
import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper import runs
from arelu_cli.studies.paper.columns import COLUMNS, read_csv
from arelu_cli.util.results import write_rows


def test_load_run_reads_config_and_log(tmp_path, run_folder):
    run = runs.load_run(run_folder(tmp_path / "1.5-relu", "1.5-relu", tau=0.33, world_size=2))
    assert (run.name, run.corpus, run.transform, runs.tau_of(run), runs.n_gpus_of(run)) == (
        "1.5-relu", "toy", "1.5-relu", 0.33, 2)
    assert run.log["step"].tolist() == [10, 20, 30, 40]


def test_load_run_errors_name_the_missing_file(tmp_path):
    (tmp_path / "r").mkdir()
    with pytest.raises(UserError, match="config.json is missing"):
        runs.load_run(tmp_path / "r")


def test_training_dynamics_keeps_every_log_row(tmp_path, run_folder):
    run = runs.load_run(run_folder(tmp_path / "softmax", "softmax"))
    rows = runs.training_dynamics_rows([run])
    assert [r["step"] for r in rows] == [10, 20, 30, 40]
    assert [r["wall_s"] for r in rows] == [2.0, 4.0, 6.0, 8.0]
    assert [r["val_bleu"] for r in rows] == [None, 2.0, None, 4.0]
    name = "fig_training_dynamics.csv"
    frame = write_rows(rows, tmp_path / name, COLUMNS[name])
    assert tuple(frame.columns) == COLUMNS["fig_training_dynamics.csv"]
    assert read_csv(tmp_path, "fig_training_dynamics.csv")["val_bleu"].isna().sum() == 2


def test_tau_norm_rows_carry_tau_z_and_norm(tmp_path, run_folder):
    relu = runs.load_run(run_folder(tmp_path / "r", "1.5-relu", tau=0.33))
    entmax = runs.load_run(run_folder(tmp_path / "e", "1.5-entmax"))
    rows = runs.tau_norm_rows([relu, entmax])
    assert [r["tau"] for r in rows[:4]] == [0.33] * 4
    assert [r["tau"] for r in rows[4:]] == pytest.approx([0.20, 0.21, 0.22, 0.23])
    assert [r["logit_norm"] for r in rows[4:]] == [10.0, 11.0, 12.0, 13.0]
    assert set(rows[0]) == set(COLUMNS["fig_tau_norm_evolution.csv"])


def test_training_time_hours_speed_and_kwh(tmp_path, run_folder):
    run = runs.load_run(run_folder(tmp_path / "s", "softmax", steps=1800, world_size=2))
    (row,) = runs.training_time_rows([run], gpu_watts=320.0)
    # 1800 steps, 2 s per 10 steps: 360 s = 0.1 h; kWh = 0.1 h * 320 W / 1000 * 2 GPUs
    assert row["hours"] == pytest.approx(0.1)
    assert row["kwh"] == pytest.approx(0.064)
    assert row["tokens_per_s"] == pytest.approx(1000.0 + 179 / 2)  # median of 1000..1179
    assert (row["best_bleu"], row["best_step"], row["steps"]) == (180.0, 1800, 1800)
    (cpu,) = runs.training_time_rows([run])
    assert cpu["kwh"] is None and cpu["gpu_watts"] is None
    assert runs.training_time_rows([run], 250.0, n_gpus=1)[0]["kwh"] == pytest.approx(0.025)
    for watts in (0.0, float("nan"), float("inf")):  # NaN would give a NaN kWh column
        with pytest.raises(UserError, match="gpu_watts must be positive and finite"):
            runs.training_time_rows([run], gpu_watts=watts)


def test_a_run_trained_side_by_side_says_so_in_the_training_time_table(tmp_path, run_folder):
    import json

    from arelu_cli.studies.paper import compare_figures, compare_tables
    from arelu_cli.train import run_dir

    alone = runs.load_run(run_folder(tmp_path / "softmax", "softmax"))
    shared = runs.load_run(run_folder(tmp_path / "1.5-relu", "1.5-relu"))
    assert not run_dir.summary_path(alone.folder).is_file() or runs.beside_of(alone) == 0
    run_dir.write_summary(shared.folder, {"beside": 2})
    rows = runs.training_time_rows([alone, shared])
    assert [row["beside"] for row in rows] == [0, 2]
    frame = pd.DataFrame(rows)
    text = "\n".join(compare_tables.training_time_section(frame).verdicts)
    assert "The runs trained side by side (up to 3 at a time on one CPU" in text
    assert "--set reproduce.jobs=1" in text
    quiet = "\n".join(compare_tables.training_time_section(frame.assign(beside=0)).verdicts)
    assert "side by side" not in quiet
    assert json.loads(run_dir.summary_path(shared.folder).read_text()) == {"beside": 2}
    dynamics = pd.DataFrame(runs.training_dynamics_rows([alone, shared]))
    assert set(dynamics.groupby("run")["beside"].unique().map(tuple)) == {(0,), (2,)}
    assert "side by side" in "\n".join(compare_figures.dynamics_section(dynamics).verdicts)


def test_tau_sweep_rows_sorted_by_tau_with_best_and_final(tmp_path, run_folder):
    sweep = [runs.load_run(run_folder(tmp_path / f"tau-{t}", "1.5-relu", tau=t, bleu_gain=g))
             for t, g in ((0.5, 1.0), (0.1, 2.0))]
    rows = runs.tau_sweep_rows(sweep)
    assert [(r["tau"], r["step"], r["val_bleu"]) for r in rows] == [
        (0.1, 20, 4.0), (0.1, 40, 8.0), (0.5, 20, 2.0), (0.5, 40, 4.0)]
    assert {(r["tau"], r["best_bleu"], r["final_bleu"]) for r in rows} == {
        (0.1, 8.0, 8.0), (0.5, 4.0, 4.0)}
    assert set(rows[0]) == set(COLUMNS["fig_tau_sweep.csv"])


def test_tau_sweep_refuses_runs_without_fixed_tau(tmp_path, run_folder):
    with pytest.raises(UserError, match="alpha-ReLU runs only"):
        runs.tau_sweep_rows([runs.load_run(run_folder(tmp_path / "s", "softmax"))])


def test_runs_of_several_seeds_are_named_by_their_path_and_carry_their_seed(tmp_path, run_folder):
    for seed in (1, 2):
        run_folder(tmp_path / "softmax" / f"seed-{seed}", "softmax", seed=seed)
    loaded = runs.load_runs(tmp_path)
    assert [(r.name, r.seed) for r in loaded] == [("softmax/seed-1", 1), ("softmax/seed-2", 2)]
    rows = runs.training_time_rows(loaded)
    assert [(r["run"], r["seed"]) for r in rows] == [("softmax/seed-1", 1), ("softmax/seed-2", 2)]
    assert {r["seed"] for r in runs.training_dynamics_rows(loaded)} == {1, 2}
