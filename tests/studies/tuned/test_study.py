"""The tuned study: the sweep trains what its order asks for and resumes; seeds, borrowed
configurations and convergence copies land where the tables look; equal time in steps; and
a tiny study end to end, with every CSV and REPORT.md."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from arelu_cli.model import checkpoint
from arelu_cli.config import load_config
from arelu_cli.util.errors import UserError
from arelu_cli.studies.core import done, make, output
from arelu_cli.studies.sweep import (Point, continue_copy, record_selection, run_folder, study_run,
                                     sweep)
from arelu_cli.studies.translation import translation, translation_path
from arelu_cli.studies.tuned.report import _sweep_table, machines_sentence, sweep_rows
from arelu_cli.studies.tuned.runs import equal_time_steps
from arelu_cli.studies.tuned.study import bench, train_all
from arelu_cli.train.run_dir import SUMMARY
from arelu_cli.util.signatures import machine

QUIET = Console(quiet=True)


def _config(corpus: Path | str = "data/x", **tables):
    overrides = {("train", "max_steps"): 6, ("train", "keep_every"): 3,
                 ("train", "max_minutes"): 0.0, ("data", "path"): str(corpus),
                 ("sweep", "transforms"): ["softmax", "1.5-relu"], ("sweep", "lr"): [1.0, 2.0],
                 ("sweep", "label_smoothing"): [0.0, 0.1], ("sweep", "warmup"): [4],
                 ("study", "seeds"): [1, 2], ("study", "convergence_steps"): 9}
    for section, values in tables.items():
        overrides |= {(section, k): v for k, v in values.items()}
    return load_config(None, overrides)


def _fake_trainer(bleu_of, calls):
    """Writes what a finished run leaves (summary.json, last.pt) with a scripted BLEU."""
    def trainer(config, folder: Path, resume: bool):
        calls.append((folder, resume, config.train))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / checkpoint.LAST).write_bytes(b"")
        (folder / "log.csv").write_text(f"step,val_bleu\n{config.train.max_steps},1.0\n")
        (folder / "config.json").write_text(json.dumps({**config.to_dict(), "resolved": {}}))
        t = config.train
        (folder / SUMMARY).write_text(json.dumps(
            {"best_bleu": bleu_of(t), "steps": t.max_steps, "best_step": t.max_steps}))
    return trainer


def _fake_evaluate(made=None):
    """Writes each translation the tables need from the run's ``last.pt`` (the fake
    trainer's weights) and notes what it made."""
    def evaluate(item):
        path = translation_path(item.run.folder, item.step, item.run.config.decode.beam)

        def write():
            (made if made is not None else []).append(item)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x\n")
        return output((path,), item.run.folder / checkpoint.LAST, write)
    return evaluate


def test_sweep_trains_the_sequential_order_and_a_second_call_trains_nothing(tmp_path):
    calls = []
    # softmax likes lr 1, 1.5-relu lr 2; smoothing helps softmax only
    def bleu(t):
        good_lr = 1.0 if t.transform == "softmax" else 2.0
        return 30 - 10 * abs(t.lr - good_lr) + (5 if t.label_smoothing and
                                                t.transform == "softmax" else -5 * t.label_smoothing)
    trainer = _fake_trainer(bleu, calls)
    selected = sweep(_config(), tmp_path, trainer, QUIET)
    assert selected == {"softmax": Point(1.0, 4, 0.1), "1.5-relu": Point(2.0, 4, 0.0)}
    trained = [(c[2].transform, c[2].lr, c[2].label_smoothing) for c in calls]
    assert trained == [("softmax", 1.0, 0.0), ("softmax", 2.0, 0.0), ("softmax", 1.0, 0.1),
                       ("1.5-relu", 1.0, 0.0), ("1.5-relu", 2.0, 0.0), ("1.5-relu", 2.0, 0.1)]
    assert all(c[2].max_minutes == 0 and c[2].seed == 1 for c in calls)
    calls.clear()
    assert sweep(_config(), tmp_path, trainer, QUIET) == selected
    assert calls == []


def test_an_unfinished_sweep_run_is_resumed(tmp_path):
    calls = []
    folder = run_folder(tmp_path, "softmax", Point(1.0, 4, 0.0), 1, 1)
    folder.mkdir(parents=True)
    config = _config(**{"sweep": {"transforms": ["softmax"]}})
    planned = study_run(config, tmp_path, "softmax", Point(1.0, 4, 0.0), 1).config
    (folder / "config.json").write_text(json.dumps({**planned.to_dict(), "resolved": {}}))
    (folder / checkpoint.LAST).write_bytes(b"")  # killed: no summary
    sweep(config, tmp_path, _fake_trainer(lambda t: 1.0, calls), QUIET)
    assert calls[0][0] == folder and calls[0][1] is True


def test_seeds_borrow_and_convergence_runs(tmp_path):
    calls, evaluated = [], []
    config = _config(study={"borrow": ["1.5-entmax-k100=1.5-relu"]})
    ms = {"softmax": 4.0, "1.5-relu": 3.0, "1.5-entmax-k100": 6.0}
    selected, todo = train_all(config, tmp_path, _fake_trainer(lambda t: t.lr, calls), QUIET,
                               lambda selected: ms, _fake_evaluate(evaluated))
    assert selected == {"softmax": Point(2.0, 4, 0.0), "1.5-relu": Point(2.0, 4, 0.0)}
    seeds = [run for comparison, run, _ in todo if comparison == "equal_steps"]
    assert [(r.name, r.seed, r.folder.name) for r in seeds] == [
        ("softmax", 1, "lr-2_warmup-4_ls-0"), ("softmax", 2, "lr-2_warmup-4_ls-0_seed-2"),
        ("1.5-relu", 1, "lr-2_warmup-4_ls-0"), ("1.5-relu", 2, "lr-2_warmup-4_ls-0_seed-2"),
        ("1.5-entmax-k100", 1, "lr-2_warmup-4_ls-0"),
        ("1.5-entmax-k100", 2, "lr-2_warmup-4_ls-0_seed-2")]
    assert all(done(r) for _, r, _ in todo)
    steps = {(c, r.name, r.seed): s for c, r, s in todo}
    assert steps[("equal_time", "1.5-relu", 1)] == 6  # the fastest: the whole budget
    assert steps[("equal_time", "softmax", 2)] == 3  # 6 * 3 / 4 = 4.5 -> snapshot 3
    assert steps[("convergence", "softmax", 1)] == 9
    assert steps[("convergence_start", "softmax", 1)] == 6  # the same run at max_steps
    assert [r.folder for c, r, _ in todo if c == "convergence_start"] == [
        r.folder for c, r, _ in todo if c == "convergence"]
    resumed = [c for c in calls if "convergence" in c[0].parts]
    assert all(c[1] and c[2].max_steps == 9 for c in resumed)  # continued, not retrained
    made = [(item.run.folder, item.step) for item in evaluated]
    assert len(made) == len(set(made)) == len({(r.folder, s) for _, r, s in todo})
    assert json.loads((tmp_path / "selected.json").read_text())["softmax"]["lr"] == 2.0


def test_a_run_with_its_translations_needs_no_checkpoint(tmp_path):
    calls = []
    config = _config(**{"sweep": {"transforms": ["softmax"], "label_smoothing": [0.0]},
                        "study": {"seeds": [1], "convergence_steps": 0}})
    trainer = _fake_trainer(lambda t: t.lr, calls)
    _, todo = train_all(config, tmp_path, trainer, QUIET, lambda selected: {"softmax": 1.0},
                        _fake_evaluate())
    (_, run, step), *_ = todo
    for _, _, s in todo:
        path = translation_path(run.folder, s, config.decode.beam)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    for pt in tmp_path.rglob("last.pt"):  # a fresh clone: checkpoints are not committed
        pt.unlink()
    calls.clear()
    train_all(config, tmp_path, trainer, QUIET, lambda selected: {"softmax": 1.0},
              _fake_evaluate())
    assert calls == []
    translation_path(run.folder, step, config.decode.beam).unlink()
    train_all(config, tmp_path, trainer, QUIET, lambda selected: {"softmax": 1.0},
              _fake_evaluate())
    assert [c[0] for c in calls] == [run.folder]  # only the run missing an output retrains


def test_a_committed_translation_needs_no_snapshot_but_a_missing_one_does(tmp_path):
    """A new machine keeps the committed translations, not the git-ignored snapshots they
    came from: the real evaluator keeps the translation instead of refusing the study."""
    config = _config()
    run = study_run(config, tmp_path, "softmax", Point(1.0, 4, 0.0), 1)
    kept = translation_path(run.folder, 6, config.decode.beam)
    kept.parent.mkdir(parents=True)
    kept.write_text("committed\n", encoding="utf-8")
    make([translation(run, 6)])
    assert kept.read_text(encoding="utf-8") == "committed\n"
    with pytest.raises(UserError, match="step-3.pt is missing"):
        make([translation(run, 3)])


def test_a_selected_run_trained_again_keeps_its_first_record_and_the_selection(tmp_path):
    """Checkpoints lost (a new machine): the selected seed-1 run trains again from step 0,
    and its second dev BLEU, here below the runner-up's, must not move the selection (which
    would train the runner-up again, and so on)."""
    calls, trainings = [], {}
    config = _config(**{"sweep": {"transforms": ["softmax"], "label_smoothing": [0.0]},
                        "study": {"seeds": [1], "convergence_steps": 0}})

    def bleu(t):  # lr 2 wins by 1 point the first time, loses by 1 after
        trainings[t.lr] = trainings.get(t.lr, 0) + 1
        return 20.0 if t.lr == 1.0 else 21.0 if trainings[t.lr] == 1 else 19.0

    trainer = _fake_trainer(bleu, calls)
    step_times, evaluator = (lambda selected: {"softmax": 1.0}), (_fake_evaluate())
    selected, todo = train_all(config, tmp_path, trainer, QUIET, step_times, evaluator)
    folder = todo[0][1].folder
    first = json.loads((folder / SUMMARY).read_text())
    for pt in [*tmp_path.rglob("last.pt"), *tmp_path.rglob("test.step-*.txt")]:
        pt.unlink()  # lost before the translations were made
    calls.clear()
    again, _ = train_all(config, tmp_path, trainer, QUIET, step_times, evaluator)
    assert again == selected == {"softmax": Point(2.0, 4, 0.0)}
    assert [(c[0], c[1]) for c in calls] == [(folder, False)]  # trained again, nothing else
    assert json.loads((folder / "first" / SUMMARY).read_text()) == first
    assert json.loads((folder / SUMMARY).read_text())["best_bleu"] == 19.0
    assert (folder / "first" / "log.csv").is_file() and not list(tmp_path.rglob("*.copying"))
    rows = {r["lr"]: r for r in sweep_rows(config, tmp_path, again)}
    assert (rows[2.0]["dev_bleu"], rows[2.0]["dev_bleu_again"], rows[1.0]["dev_bleu_again"]) \
        == (21.0, 19.0, "")
    assert "| dev BLEU, trained again |" in _sweep_table(list(rows.values()))
    calls.clear()
    train_all(config, tmp_path, trainer, QUIET, step_times, evaluator)
    assert calls == []



def test_a_changed_selection_is_announced_and_the_old_one_kept(tmp_path):
    config = _config(**{"sweep": {"transforms": ["softmax"], "label_smoothing": [0.0]},
                        "study": {"seeds": [1, 2], "convergence_steps": 9,
                                  "borrow": ["sparsemax=softmax"]}})
    trainer = _fake_trainer(lambda t: t.lr, [])
    ms = lambda selected: {"softmax": 1.0, "sparsemax": 1.0}  # noqa: E731

    def sitting():
        console = Console(file=io.StringIO(), width=400)
        selected, _ = train_all(config, tmp_path, trainer, console, ms,
                                _fake_evaluate())
        return selected, console.file.getvalue()
    assert sitting()[0] == {"softmax": Point(2.0, 4, 0.0)}  # lr 2 has the higher dev BLEU
    first = (tmp_path / "selected.json").read_text()
    trained_before = sorted(tmp_path.rglob(SUMMARY))
    # the lr-1 run turns out better (say it finished later): the selection moves
    lr1 = run_folder(tmp_path, "softmax", Point(1.0, 4, 0.0), 1, 1) / SUMMARY
    lr1.write_text(json.dumps(json.loads(lr1.read_text()) | {"best_bleu": 99.0}))
    selected, said = sitting()
    assert selected == {"softmax": Point(1.0, 4, 0.0)}
    assert "warning" in said and "selects lr-1_warmup-4_ls-0 for softmax, not lr-2_warmup-4_ls-0"\
        in said and "sparsemax, which borrow it" in said
    kept = list(tmp_path.glob("selected-*.json"))
    assert len(kept) == 1 and kept[0].read_text() == first and kept[0].name in said
    assert json.loads((tmp_path / "selected.json").read_text())["softmax"]["run"] == \
        "lr-1_warmup-4_ls-0"
    assert all(path.is_file() for path in trained_before)  # no run deleted
    assert (run_folder(tmp_path, "softmax", Point(2.0, 4, 0.0), 2, 1) / SUMMARY).is_file()
    assert sitting()[1] == "" and len(list(tmp_path.glob("selected-*.json"))) == 1  # same: quiet



def test_a_dropped_transform_and_an_unreadable_selection_are_announced(tmp_path):
    config, console = _config(), Console(file=io.StringIO(), width=400)
    (tmp_path / "selected.json").write_text(json.dumps({"softmax": {"run": "lr-1"}}))
    record_selection(config, tmp_path, {}, console)
    assert "nothing (not in [sweep] transforms) for softmax, not lr-1" in console.file.getvalue()
    (tmp_path / "selected.json").write_text("not json")
    record_selection(config, tmp_path, {"softmax": Point(1.0, 4, 0.0)}, console)
    assert "could not be read" in console.file.getvalue()
    kept = sorted(p.read_text() for p in tmp_path.glob("selected-*.json"))
    assert kept == ["not json", '{"softmax": {"run": "lr-1"}}']  # two copies, none replaced


def test_a_partial_selection_keeps_the_transforms_not_swept_yet(tmp_path):
    """The LM study records its selection transform by transform: a rerun that has swept
    only the first so far neither drops nor warns about the others; a changed one still
    warns."""
    config, console = _config(), Console(file=io.StringIO(), width=400)
    both = {"softmax": Point(1.0, 4, 0.0), "1.5-relu": Point(2.0, 4, 0.0)}
    record_selection(config, tmp_path, both, console)
    first = (tmp_path / "selected.json").read_text()
    record_selection(config, tmp_path, {"softmax": both["softmax"]}, console, partial=True)
    assert (tmp_path / "selected.json").read_text() == first
    assert console.file.getvalue() == "" and not list(tmp_path.glob("selected-*.json"))
    record_selection(config, tmp_path, {"softmax": Point(2.0, 4, 0.0)}, console, partial=True)
    now = json.loads((tmp_path / "selected.json").read_text())
    assert now["softmax"]["run"] == "lr-2_warmup-4_ls-0"
    assert now["1.5-relu"] == json.loads(first)["1.5-relu"]
    assert "not lr-1_warmup-4_ls-0" in console.file.getvalue()


def test_bench_times_each_transform_at_its_selected_label_smoothing(tmp_path, monkeypatch):
    """The quiet step times come from each transform's selected configuration (borrowed ones
    from the configuration they borrow), and a file timed with other label smoothing (the
    selection has moved since) is refused rather than used."""
    config = _config(study={"borrow": ["sparsemax=1.5-relu"]})
    asked = []

    def bench_train(cfg, names, repeats, device_name, console=None, label_smoothing=None):
        asked.append(dict(label_smoothing))
        return [{"transform": name, "fused_output": False, "ms_per_step": 2.0 + i,
                 "label_smoothing": label_smoothing[name]} for i, name in enumerate(names)]
    monkeypatch.setattr("arelu_cli.bench.train.bench_train", bench_train)
    selected = {"softmax": Point(1.0, 4, 0.0), "1.5-relu": Point(2.0, 4, 0.1)}
    times = bench(config, tmp_path, QUIET, selected)
    assert asked == [{"softmax": 0.0, "1.5-relu": 0.1, "sparsemax": 0.1}]
    assert times == {"softmax": 2.0, "1.5-relu": 3.0, "sparsemax": 4.0}
    assert bench(config, tmp_path, QUIET, selected) == times and len(asked) == 1  # measured once
    moved = selected | {"1.5-relu": Point(2.0, 4, 0.0)}
    with pytest.raises(UserError, match=r"timed 1\.5-relu with 0\.1, not 0; sparsemax with 0\.1, "
                                        r"not 0 \(the label smoothing of the selected"):
        bench(config, tmp_path, QUIET, moved)
    frame = pd.read_csv(tmp_path / "bench_train.csv").drop(columns="label_smoothing")
    frame.to_csv(tmp_path / "bench_train.csv", index=False)
    with pytest.raises(UserError, match="does not record the label smoothing"):
        bench(config, tmp_path, QUIET, moved)


def test_step_times_of_another_model_or_precision_are_refused(tmp_path, monkeypatch):
    """bench_train.csv timed with another [model] or precision than the recipe's is refused,
    never reused for equal time."""
    from arelu_cli.train import precision

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    config = _config(train={"device": "cpu"})
    selected = {"softmax": Point(1.0, 4, 0.0), "1.5-relu": Point(1.0, 4, 0.0)}
    rows = [{"transform": name, "fused_output": False, "ms_per_step": 2.0,
             "label_smoothing": 0.0, "d_model": config.model.d_model, "precision": "fp32"}
            for name in ("softmax", "1.5-relu")]
    pd.DataFrame(rows).to_csv(tmp_path / "bench_train.csv", index=False)
    assert bench(config, tmp_path, QUIET, selected) == {"softmax": 2.0, "1.5-relu": 2.0}
    wider = _config(train={"device": "cpu"}, model={"d_model": 1024})
    with pytest.raises(UserError, match=r"bench_train\.csv was timed with d_model 512, but the "
                                        r"recipe now asks for 1024; delete it to measure again"):
        bench(wider, tmp_path, QUIET, selected)
    with pytest.raises(UserError, match=r"timed with precision fp32, but the recipe now asks "
                                        r"for bf16"):
        bench(_config(train={"device": "cpu", "precision": "bf16"}), tmp_path, QUIET, selected)
    (tmp_path / "bench_train.csv").write_text("")
    with pytest.raises(UserError, match=r"bench_train\.csv is empty or not a CSV"):
        bench(config, tmp_path, QUIET, selected)


def test_continue_copy_links_checkpoints_and_leaves_the_source_alone(tmp_path):
    source, target = tmp_path / "run", tmp_path / "convergence" / "run"
    (source / "steps").mkdir(parents=True)
    for name in ("last.pt", "best.pt", "steps/step-3.pt"):
        (source / name).write_bytes(b"weights")
    (source / "log.csv").write_text("step\n3\n")
    (source / SUMMARY).write_text("{}")
    (source / "first").mkdir()  # the sweep run trained twice: its first record stays there
    (source / "first" / SUMMARY).write_text("{}")
    continue_copy(source, target)
    assert not (target / "first").exists()
    assert (target / "steps" / "step-3.pt").stat().st_ino == (source / "steps/step-3.pt").stat().st_ino
    assert not (target / SUMMARY).exists() and (source / SUMMARY).exists()
    (target / "log.csv").write_text("changed")  # a copy, not a link
    assert (source / "log.csv").read_text() == "step\n3\n"


def test_equal_time_steps_round_down_to_kept_snapshots():
    config = _config(train={"max_steps": 1200, "keep_every": 50})
    ms = {"softmax": 3137.0, "1.5-relu": 2393.0, "1.5-entmax-k100": 4990.0}
    steps = equal_time_steps(config, ms)
    assert steps["1.5-relu"] == 1200  # the fastest reaches the budget
    assert steps["softmax"] == 900  # 1200 * 2393 / 3137 = 915.4 -> 900
    assert steps["1.5-entmax-k100"] == 550
    minutes = _config(train={"max_steps": 1200, "keep_every": 50},
                      study={"equal_time_minutes": 20.0})
    assert equal_time_steps(minutes, ms)["softmax"] == 350  # 1,200 s / 3.137 s = 382


@pytest.mark.parametrize("tables, message", [
    ({"train": {"max_minutes": 5.0}}, "max_minutes = 0"),
    ({"train": {"keep_every": 4}}, "keep_every"),
    ({"study": {"convergence_steps": 5}}, "convergence_steps"),
    # an example that fits the budget, not "e.g. 50" for 6 steps
    ({"train": {"keep_every": 4}}, r"divisor of max_steps \(6\), e\.g\. 2$"),
    # a baseline the study does not train would drop every comparison
    ({"study": {"baseline": "softmx"}}, r"baseline 'softmx' is not a transform the study "
                                        r"trains \(softmax, 1\.5-relu\); name one of them"),
])
def test_a_study_that_could_not_give_its_tables_is_refused(tmp_path, tables, message,
                                                            run_study):
    with pytest.raises(UserError, match=message):
        run_study(_config(**tables), tmp_path, _fake_trainer(lambda t: 0, []), "tuned")


def test_a_borrow_that_would_replace_a_tuned_configuration_is_refused():
    with pytest.raises(UserError, match=r"1\.5-relu is tuned by the sweep"):
        _config(study={"borrow": ["1.5-relu=softmax"]})


def test_bad_borrow_is_a_recipe_error():
    with pytest.raises(UserError, match="borrow"):
        _config(study={"borrow": ["1.5-entmax-k100"]})


def test_a_tiny_study_end_to_end(tiny_corpus, tiny_config, tmp_path, one_thread, run_study):
    base = tiny_config(tiny_corpus, max_steps=6, valid_every=3, save_every=3, keep_every=3,
                       tau="auto")
    out = tmp_path / "study"
    config = dataclasses.replace(base, **{
        "sweep": dataclasses.replace(base.sweep, transforms=("softmax", "1.5-relu"),
                                     lr=(1.0, 2.0), warmup=(4,), label_smoothing=(0.0,)),
        "study": dataclasses.replace(base.study, seeds=(1, 2), convergence_steps=9,
                                     borrow=(), bootstrap_samples=50, kind="tuned"),
        "decode": dataclasses.replace(base.decode, beam=2, max_tokens=2048)})
    report = run_study(config, out)
    sweep_csv = pd.read_csv(out / "sweep.csv")
    assert len(sweep_csv) == 4 and sweep_csv.groupby("transform")["selected"].sum().eq(1).all()
    bleu = pd.read_csv(out / "test_bleu.csv")
    assert set(bleu["comparison"]) == {"equal_steps", "equal_time", "convergence_start",
                                       "convergence"}
    assert len(bleu.query("comparison == 'equal_steps'")) == 4
    assert bleu.query("comparison == 'convergence'")["step"].eq(9).all()
    start = bleu.query("comparison == 'convergence_start'")
    assert start["step"].eq(6).all() and start["translation"].str.contains("convergence").all()
    summary = pd.read_csv(out / "test_bleu_summary.csv")
    assert summary.query("comparison == 'equal_steps'")["n"].eq(2).all()
    sig = pd.read_csv(out / "significance.csv")
    assert set(sig["seeds"].astype(str)) == {"1", "2", "joined"}
    assert sig["p_value"].between(0, 1).all()
    assert (out / "bench_train.csv").is_file()
    text = report.read_text()
    for section in ("## Answer", "## Equal time", "## Sweep", "## Test BLEU"):
        assert section in text
    assert "**1.5-relu against softmax.** Equal steps (1.5-relu step 6, softmax step 6)" in text
    assert "At seed 1 (in the convergence runs), Δ" in text
    assert "| convergence run, start | softmax | 6 |" in text
    assert not bleu["translation"].str.startswith("/").any()  # relative to the folder
    assert f"`arelu bench train` on {machine()}," in text  # which machine the times are of
    assert f"The seed and convergence runs trained on {machine()} (6 runs)" in text
    assert "| transform | ms per step | × softmax | paired × softmax | step at equal time |" \
        in text
    assert (out / "sweep.png").is_file() and (out / "dev_curves.png").is_file()
    assert "![Dev BLEU during training](dev_curves.png)" in text
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("*.pt")}
    run_study(config, out)  # everything is there: nothing is trained again
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.pt")} == mtimes
    _bad_inputs_are_named_before_any_output_is_written(config, out, bleu, run_study)


def _bad_inputs_are_named_before_any_output_is_written(config, out: Path, bleu,
                                                       run_study) -> None:
    """A translation cut short, a summary.json cut short, an empty or cut log.csv: one line
    naming the file and the remedy, and no output rewritten."""
    translation = out / bleu["translation"].iloc[0]
    run = translation.parent.parent
    outputs = {p: p.stat().st_mtime_ns for p in out.glob("*.csv")} | {
        out / "REPORT.md": (out / "REPORT.md").stat().st_mtime_ns}
    kept = translation.read_text()
    n = len(kept.splitlines())
    translation.write_text("".join(kept.splitlines(keepends=True)[:3]))
    with pytest.raises(UserError, match=rf"{translation} has 3 lines but the test set has {n} "
                                        r"references \(cut short\?\); delete it"):
        run_study(config, out)
    translation.write_text(kept)
    for name, text, message in [
            (SUMMARY, '{"best_bleu": ', r"summary\.json is not readable JSON"),
            ("log.csv", "", r"log\.csv is empty or not a CSV"),
            ("log.csv", "step,val_bleu\n3,1.0\n", r"its last validation at step 3, but the "
                                                  r"run finished at step 6 \(cut short\?\)")]:
        path, before = run / name, (run / name).read_text()
        path.write_text(text)
        with pytest.raises(UserError, match=message) as refused:
            run_study(config, out)
        assert str(path) in str(refused.value) and f"delete {run}" in str(refused.value)
        path.write_text(before)
    assert {p: p.stat().st_mtime_ns for p in outputs} == outputs


def test_the_report_names_the_machines_the_runs_trained_on(tmp_path):
    runs = []
    for i, found in enumerate(["AMD EPYC, 2 CPUs", None, "Intel Xeon, 2 CPUs", None]):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        (folder / SUMMARY).write_text(json.dumps({"steps": 6} | ({"machine": found} if found
                                                                 else {})))
        runs.append(study_run(_config(), tmp_path, "softmax", Point(1.0, 4, 0.0), 1,
                              folder=folder))
    text = machines_sentence(runs)
    assert text.startswith(" The seed and convergence runs trained on AMD EPYC, 2 CPUs (1 run); "
                           "a machine its summary does not name (2 runs); "
                           "Intel Xeon, 2 CPUs (1 run)")
    assert machines_sentence([]) == ""


@pytest.mark.parametrize("section, key, value", [
    ("model", "dropout", 0.0), ("train", "clip_norm", 1.0), ("train", "accum", 2)])
def test_a_run_trained_with_other_settings_is_never_reused(tmp_path, section, key, value,
                                                          run_study):
    """An edited [model] or [train] (not a [sweep] axis) after the sweep trained is refused
    before anything trains, naming the setting, not silently reused."""
    calls = []
    config = _config(**{"sweep": {"transforms": ["softmax"], "label_smoothing": [0.0]}})
    trainer = _fake_trainer(lambda t: t.lr, calls)
    sweep(config, tmp_path, trainer, QUIET)
    edited = _config(**{"sweep": {"transforms": ["softmax"], "label_smoothing": [0.0]},
                        section: {key: value}})
    calls.clear()
    with pytest.raises(UserError, match=rf"was trained with {section}\.{key} = "):
        run_study(edited, tmp_path, trainer, "tuned")
    with pytest.raises(UserError, match=rf"{section}\.{key}"):  # the stage alone, too
        sweep(edited, tmp_path, trainer, QUIET)
    assert calls == []
    assert sweep(config, tmp_path, trainer, QUIET) and calls == []  # the recipe as it was
