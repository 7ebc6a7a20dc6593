"""Reports use only runs of the current data and the requested grid, and name the others."""

import io
import json
from pathlib import Path

import torch
from rich.console import Console

from arelu_cli.config import load_config
from arelu_cli.data.prepared import data_fingerprint, read_meta
from arelu_cli.studies.paper import provenance, runs, tables
from arelu_cli.studies.paper.columns import COLUMNS, read_csv
from arelu_cli.util.results import write_rows


def _prepared(folder, version: str, corpus: str = "toy"):
    """A prepared folder's meta.json (all a report reads of it); returns its fingerprint."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": 1, "corpus": corpus,
            "checksums": {"train.src": version * 64, "tokenizer.json": "ab" * 32}}
    (folder / "meta.json").write_text(json.dumps(meta))
    return data_fingerprint(meta)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}")[1].split("\n## ")[0]


def test_a_run_of_another_data_version_is_left_out_and_named(tmp_path, run_folder, regenerate):
    data, results = tmp_path / "data" / "toy", tmp_path / "results"
    old, new = data_fingerprint({"checksums": {"train.src": "1" * 64}}), _prepared(data, "2")
    run_folder(results / "runs" / "softmax", "softmax", data=str(data), fingerprint=new)
    run_folder(results / "runs" / "1.5-relu", "1.5-relu", tau=0.3, bleu_gain=3.0,
               data=str(data), fingerprint=old)
    done = regenerate(results, data=data, transforms=("softmax", "1.5-relu"))
    time = read_csv(results, "training_time.csv")
    assert time["run"].tolist() == ["softmax"] and time["best_bleu"].tolist() == [4.0]
    assert set(read_csv(results, "fig_training_dynamics.csv")["run"]) == {"softmax"}
    assert set(read_csv(results, "fig_tau_norm_evolution.csv")["run"]) == {"softmax"}
    line = (f"Left out of every table and figure made from training runs: runs/1.5-relu -- "
            f"trained on another version of {data} (fingerprint {old[:12]}, current "
            f"{new[:12]}).")
    assert done.notes == [line]
    text = done.report.read_text()
    assert f"- {line}" in text
    assert "1.5-relu" not in _section(text, "Training time")


def test_runs_of_the_current_data_are_all_kept_without_a_note(tmp_path, run_folder, regenerate):
    data, results = tmp_path / "data" / "toy", tmp_path / "results"
    fingerprint = _prepared(data, "2")
    for name, tau in (("softmax", None), ("1.5-relu", 0.3)):
        run_folder(results / "runs" / name, name, tau=tau, data=str(data),
                   fingerprint=fingerprint)
    done = regenerate(results, data=data, transforms=("softmax", "1.5-relu"))
    assert sorted(read_csv(results, "training_time.csv")["run"]) == ["1.5-relu", "softmax"]
    assert done.notes == []
    assert "Left out" not in done.report.read_text()


def test_runs_outside_the_requested_grid_are_left_out_and_named(tmp_path, run_folder,
                                                               regenerate):
    data, results = tmp_path / "data" / "toy", tmp_path / "results"
    fingerprint = _prepared(data, "2")
    for name in ("softmax", "sparsemax"):
        run_folder(results / "runs" / name, name, data=str(data), fingerprint=fingerprint)
    for tau in (0.1, 1.0):
        run_folder(results / "tau-sweep" / f"tau-{tau:g}", "1.5-relu", tau=tau, data=str(data),
                   fingerprint=fingerprint)
    done = regenerate(results, data=data, transforms=("softmax",), taus=(0.1,))
    assert read_csv(results, "training_time.csv")["run"].tolist() == ["softmax"]
    assert set(read_csv(results, "fig_tau_sweep.csv")["tau"]) == {0.1}
    text = done.report.read_text()
    assert ("- Left out of every table and figure made from training runs: runs/sparsemax -- "
            "outside the requested grid (transforms softmax).") in text
    assert "tau-sweep/tau-1 -- outside the requested tau sweep (taus 0.1)." in text
    assert len(done.notes) == 2


def test_a_seed_outside_the_grid_is_left_out(tmp_path, run_folder):
    data = tmp_path / "toy"
    fingerprint = _prepared(data, "2")
    found = [runs.load_run(run_folder(tmp_path / f"s{seed}", "softmax", seed=seed,
                                      data=str(data), fingerprint=fingerprint))
             for seed in (1, 2)]
    screened = provenance.screen(found, "runs", provenance.Scope(data, seeds=(1,)))
    assert [r.seed for r in screened.kept] == [1] and [r.seed for r in screened.left_out] == [2]
    assert screened.notes == ["Left out of every table and figure made from training runs: "
                              "runs/s2 -- outside the requested grid (seeds 1)."]


def test_runs_without_a_fingerprint_are_kept_unverified_unless_of_another_corpus(tmp_path,
                                                                               run_folder):
    data = tmp_path / "toy"
    _prepared(data, "2")
    older = runs.load_run(run_folder(tmp_path / "softmax", "softmax", data=str(data)))
    other = runs.load_run(run_folder(tmp_path / "1.5-relu", "1.5-relu", tau=0.3,
                                     data="data/multi30k", corpus="multi30k"))
    screened = provenance.screen([older, other], "runs", provenance.Scope(data))
    assert [r.name for r in screened.kept] == ["softmax"]
    assert screened.notes == [
        f"Kept, data not verified: runs/softmax -- they recorded no data fingerprint (trained "
        f"before runs recorded one), so they may come from another version of {data}.",
        f"Left out of every table and figure made from training runs: runs/1.5-relu -- "
        f"trained on another corpus (multi30k; {data} holds toy)."]


def test_without_a_scope_each_run_is_checked_against_its_own_folder(tmp_path, run_folder):
    toy, gone = tmp_path / "toy", tmp_path / "gone"
    fingerprint = _prepared(toy, "2")
    found = [runs.load_run(run_folder(tmp_path / "a", "softmax", data=str(toy),
                                      fingerprint=fingerprint)),
             runs.load_run(run_folder(tmp_path / "b", "sparsemax", data=str(gone),
                                      fingerprint=fingerprint))]
    screened = provenance.screen(found, "runs")
    assert [r.name for r in screened.kept] == ["a", "b"]
    assert screened.notes == [f"Kept, data not verified: runs/b -- {gone} holds no prepared "
                              "corpus (no meta.json) to compare with."]


def test_when_every_run_is_left_out_no_earlier_number_or_figure_stays(tmp_path, run_folder,
                                                                       regenerate):
    data, results = tmp_path / "data" / "toy", tmp_path / "results"
    fingerprint = _prepared(data, "1")
    run_folder(results / "runs" / "softmax", "softmax", data=str(data), fingerprint=fingerprint)
    grid = {"data": data, "transforms": ("softmax",)}
    assert (results / "fig_training_dynamics.png") in regenerate(results, **grid).pngs
    _prepared(data, "2")  # prepared again from other text
    done = regenerate(results, **grid)
    assert read_csv(results, "training_time.csv").empty
    assert read_csv(results, "fig_training_dynamics.csv").empty
    assert not (results / "fig_training_dynamics.png").exists()
    text = done.report.read_text()
    assert "## Training time" not in text and "runs/softmax -- trained on another version" in text


def test_measured_csvs_still_holding_a_left_out_run_are_named(tmp_path, run_folder, regenerate):
    data, results = tmp_path / "data" / "toy", tmp_path / "results"
    new = _prepared(data, "2")
    run_folder(results / "runs" / "softmax", "softmax", data=str(data), fingerprint=new)
    run_folder(results / "runs" / "1.5-relu", "1.5-relu", tau=0.3, data=str(data),
               fingerprint="f" * 64)
    write_rows([tables.table1_row("toy", "softmax", 30.0, seed=1),
                tables.table1_row("toy", "1.5-relu", 31.0, seed=1)],
               results / "table1_bleu.csv", COLUMNS["table1_bleu.csv"])
    done = regenerate(results, data=data)
    assert done.notes[-1].startswith(
        "Still measured from runs left out: table1_bleu.csv (1.5-relu) -- `arelu report` does "
        "not re-measure these")


def test_scope_of_a_grid():
    config = load_config(None, {("data", "path"): "data/toy",
                                ("reproduce", "transforms"): ["softmax", "1.5-relu"],
                                ("reproduce", "tau_sweep"): [0.0, 5.0]})
    assert provenance.scope_of(config) == provenance.Scope(
        Path("data/toy"), ("softmax", "1.5-relu"), (0.0, 5.0), (config.train.seed,))
    seeded = load_config(None, {("reproduce", "seeds"): [1, 2]})
    assert provenance.scope_of(seeded).seeds == (1, 2)


def test_train_records_the_fingerprint_a_report_checks(tmp_path, tiny_corpus, tiny_config):
    from arelu_cli.train.loop import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = train(tiny_config(tiny_corpus, max_steps=2, log_every=1, valid_every=2,
                                save_every=2), tmp_path / "run",
                    console=Console(file=io.StringIO())).out
    finally:
        torch.set_num_threads(threads)
    run = runs.load_run(out)
    assert runs.data_fingerprint_of(run) == data_fingerprint(read_meta(tiny_corpus)) is not None
    screened = provenance.screen([run], "runs", provenance.Scope(tiny_corpus))
    assert [r.name for r in screened.kept] == ["run"] and screened.notes == []


def test_runs_of_different_attention_are_named_as_such(tmp_path, run_folder):
    """A sparsemax-attention run labelled "softmax" beside softmax-attention runs is named."""
    data, results = tmp_path / "data" / "toy", tmp_path / "results"
    fingerprint = _prepared(data, "2")
    for name, tau in (("softmax", None), ("1.5-relu", 0.3)):
        run_folder(results / "runs" / name, name, tau=tau, data=str(data),
                   fingerprint=fingerprint)
    config = results / "runs" / "softmax" / "config.json"
    record = json.loads(config.read_text())
    record["model"] = {**record.get("model", {}), "attention": "sparsemax"}
    config.write_text(json.dumps(record))
    screened = provenance.screen(runs.load_runs(results / "runs"), "runs")
    assert screened.notes == [
        "Mixed attention: runs/1.5-relu (softmax attention), runs/softmax (sparsemax "
        "attention) -- these runs differ in their attention, not only in their output "
        "transform, which alone labels them in the tables."]
    assert len(screened.kept) == 2
