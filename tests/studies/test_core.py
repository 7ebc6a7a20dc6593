"""The experiment core itself (:mod:`arelu_cli.studies.core`,
:mod:`arelu_cli.studies.translation`): one Run, one "is it done?" for runs and for made
files, train if needed, a study's outputs made when missing or older than their weights, and
one paired bootstrap over seeds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from rich.console import Console

from arelu_cli.analysis.significance import bootstrap_signature, compare_to_baseline
from arelu_cli.config import load_config
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.decode.bleu import paper_bleu
from arelu_cli.train.loop import snapshot_path
from arelu_cli.train.run_dir import DIVERGED, FIRST, SUMMARY
from arelu_cli.studies.core import (Run, check_runs, done, fresh, make, output,
                                     run_config, train_and_make, train_if_needed)
from arelu_cli.studies.translation import (bootstrap_rows, seed_groups, translation,
                                        translation_path)

QUIET = Console(quiet=True)


def _run(folder: Path, **train) -> Run:
    config = load_config(None, {("train", k): v for k, v in {"max_steps": 6, **train}.items()})
    return Run("softmax", config, folder)


def _touch(path: Path, ns: int, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, ns=(ns, ns))
    return path


def _trainer(calls: list, bleu: float = 1.0):
    """What a finished run leaves: its config.json, summary, last.pt and its last snapshot."""
    def train(config, folder: Path, resume: bool) -> None:
        calls.append((folder.name, resume, config.train.max_steps))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({**config.to_dict(), "resolved": {}}))
        (folder / SUMMARY).write_text(json.dumps({"best_bleu": bleu + len(calls),
                                                  "steps": config.train.max_steps}))
        (folder / checkpoint.LAST).write_bytes(b"")
        _touch(snapshot_path(folder, config.train.max_steps), 10 ** 18 + len(calls))
    return train


def test_a_run_is_a_name_a_configuration_and_a_folder(tmp_path):
    run = _run(tmp_path / "r", seed=3)
    assert (run.name, run.seed, run.steps, run.folder) == ("softmax", 3, 6, tmp_path / "r")
    moved = run_config(run.config, seed=4, lr=0.5)
    assert (moved.train.seed, moved.train.lr, moved.train.max_steps) == (4, 0.5, 6)
    assert moved.model == run.config.model and run.config.train.seed == 3  # a copy


@pytest.mark.parametrize("outputs, inputs, expected", [
    ([], [], False),                       # nothing to make is never "made"
    ([("a", 5)], [], True),
    ([("a", 5)], [("w", 4)], True),        # made after its weights
    ([("a", 5)], [("w", 5)], True),
    ([("a", 5)], [("w", 6)], False),       # retrained weights redo it
    ([("a", 5), ("b", 9)], [("w", 6)], False),  # the oldest output decides
    ([("a", 5)], [("gone", None)], True),  # a committed output, its checkpoint not committed
    ([("a", None)], [("w", 4)], False),    # a missing output
])
def test_fresh_is_makes_rule_with_missing_inputs_no_reason_to_redo(tmp_path, outputs, inputs,
                                                                    expected):
    def paths(items):
        return [tmp_path / name if ns is None else _touch(tmp_path / name, ns * 10 ** 9)
                for name, ns in items]
    assert fresh(paths(outputs), paths(inputs)) is expected


def test_a_run_is_done_when_finished_with_the_plans_settings(tmp_path):
    calls: list = []
    run = _run(tmp_path / "r")
    assert not done(run) and train_if_needed(run, _trainer(calls), QUIET)
    assert calls == [("r", False, 6)] and done(run)
    assert not train_if_needed(run, _trainer(calls), QUIET) and len(calls) == 1
    with pytest.raises(UserError, match=r"was trained with train\.lr = .*but the plan now asks"):
        done(_run(tmp_path / "r", lr=0.25))  # never reused under other settings
    longer = _run(tmp_path / "r", max_steps=12)
    assert not done(longer) and train_if_needed(longer, _trainer(calls), QUIET)
    assert calls[-1] == ("r", True, 12)  # continued from its last.pt


def test_without_its_checkpoint_a_run_is_done_only_when_its_outputs_are_made(tmp_path):
    calls: list = []
    run = _run(tmp_path / "r")
    train_if_needed(run, _trainer(calls, bleu=20.0), QUIET)
    (run.folder / checkpoint.LAST).unlink()  # a clone of committed results
    made = _touch(tmp_path / "r" / "out.txt", 1)
    assert done(run, [made]) and not done(run) and not done(run, [tmp_path / "missing"])
    assert train_if_needed(run, _trainer(calls, bleu=20.0), QUIET)
    assert calls[-1] == ("r", False, 6)  # from the start, its first record kept
    assert json.loads((run.folder / FIRST / SUMMARY).read_text())["best_bleu"] == 21.0
    assert json.loads((run.folder / SUMMARY).read_text())["best_bleu"] == 22.0


def test_a_diverged_run_is_done_and_gets_no_outputs(tmp_path):
    run = _run(tmp_path / "r")
    run.folder.mkdir()
    (run.folder / "config.json").write_text(json.dumps({**run.config.to_dict(), "resolved": {}}))
    (run.folder / DIVERGED).write_text(json.dumps({"step": 3}))
    made = []
    task = output((tmp_path / "out.txt",), tmp_path / "w.pt", lambda: made.append(1))
    train_and_make(run, lambda *a: pytest.fail("a diverged run is never retrained"), QUIET,
                   [task])
    assert done(run) and made == []


def test_outputs_are_made_when_missing_or_older_than_their_weights(tmp_path):
    weights, target, made = _touch(tmp_path / "w.pt", 5 * 10 ** 9), tmp_path / "out.txt", []

    def write():
        made.append(1)
        _touch(target, (5 + len(made)) * 10 ** 9)
    task = output((target,), weights, write)
    make([task])
    make([task])
    assert made == [1]
    _touch(weights, 9 * 10 ** 9)  # retrained
    make([task])
    assert made == [1, 1]
    weights.unlink()  # a committed output stays without its weights
    make([task])
    target.unlink()
    with pytest.raises(UserError, match=r"w\.pt is missing, so .*out\.txt cannot be made"):
        make([task])
    assert made == [1, 1]


def test_a_plan_says_what_to_evaluate_without_knowing_about_translation(tmp_path):
    """A plan of another kind (a language model's generations, say) is a list of runs and
    an Output per run: the core trains each if needed and makes what is missing."""
    calls: list = []
    runs = [_run(tmp_path / name, seed=seed) for name, seed in (("a", 1), ("b", 2))]

    def generations(run: Run):
        path = run.folder / "generations.txt"
        return output((path,), snapshot_path(run.folder, run.steps),
                      lambda: path.write_text(f"seed {run.seed}\n"))
    check_runs(runs)
    for run in runs:
        train_and_make(run, _trainer(calls), QUIET, [generations(run)])
    assert [c[0] for c in calls] == ["a", "b"]
    assert (tmp_path / "b" / "generations.txt").read_text() == "seed 2\n"
    for run in runs:
        train_and_make(run, _trainer(calls), QUIET, [generations(run)])
    assert len(calls) == 2
    with pytest.raises(UserError, match=r"train\.seed"):
        check_runs([_run(tmp_path / "a", seed=5)])



def test_a_translation_is_of_kept_weights_at_a_step_or_of_the_best_weights(tmp_path):
    """At a step: that snapshot, into the run's translations/; without one: best.pt (else
    last.pt, before a validation wrote a best) into the path the plan gives."""
    run = _run(tmp_path / "r")
    at = translation(run, 6)
    assert at.paths == (translation_path(run.folder, 6, run.config.decode.beam),)
    assert at.inputs == (snapshot_path(run.folder, 6),)
    path = tmp_path / "translations" / "softmax.test.txt"
    run.folder.mkdir()
    assert translation(run, path=path).paths == (path,)
    assert translation(run, path=path).inputs == (run.folder / checkpoint.LAST,)
    _touch(run.folder / checkpoint.BEST, 1)
    assert translation(run, path=path).inputs == (run.folder / checkpoint.BEST,)

REFS = ["the cat sat on the mat", "a red car drove by", "hello world how are you",
        "good morning to you", "it rains today", "we go to the beach"]
HYPS = {("base", 1): ["the cat sat on a mat", "a car drove by", "hello world",
                      "good morning", "it rains", "we go to beach"],
        ("sys", 1): REFS[:3] + ["good morning to you all", "it is raining today", "we go"],
        ("base", 2): ["the cat sat on the mat", "red car", "hello how are you",
                      "good morning to you", "it rains today", "to the beach"],
        ("sys", 2): ["the cat sat on the mat", "a red car", "world how are you",
                     "good morning you", "it rains", "we go to the beach"]}


def test_bootstrap_rows_are_the_significance_modules_tests_seed_by_seed_and_joined():
    rows = bootstrap_rows([("sys", "base")], HYPS, REFS, seed_groups((1, 2), "joined"),
                          samples=100)
    assert [(r["transform"], r["baseline"], r["seeds"]) for r in rows] == [
        ("sys", "base", "1"), ("sys", "base", "2"), ("sys", "base", "joined")]
    for row, seeds in zip(rows, [(1,), (2,), (1, 2)]):
        joined = {n: [x for s in seeds for x in HYPS[n, s]] for n in ("base", "sys")}
        (expected,) = compare_to_baseline(joined["base"], {"sys": joined["sys"]},
                                          REFS * len(seeds), samples=100,
                                          runs=len(seeds)).values()
        assert row["delta"] == expected.delta and row["p_value"] == expected.p_value
        assert row["sentences"] == len(REFS)  # resampled by test sentence, joined or not
    metric = paper_bleu()
    compare_to_baseline(REFS, {"x": REFS}, REFS, samples=100, metric=metric)
    assert rows[0]["bleu_signature"] == bootstrap_signature(metric, 100)


def test_bootstrap_rows_use_only_the_seeds_both_sides_have():
    partial = {k: v for k, v in HYPS.items() if k != ("sys", 2)}
    rows = bootstrap_rows([("sys", "base")], partial, REFS, seed_groups((1, 2), "1+2"),
                          samples=50)
    assert [r["seeds"] for r in rows] == ["1"]  # no seed-2 test, no joined test of one seed
    assert bootstrap_rows([("sys", "nobody")], HYPS, REFS, [("1", (1,))], samples=50) == []
    assert seed_groups((4,), "joined") == [("4", (4,))]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["a b c", "a b", "b c d e", "c"]), min_size=3, max_size=6))
def test_a_system_against_itself_differs_by_nothing(lines):
    (row,) = bootstrap_rows([("x", "x")], {("x", 1): lines}, ["a b c d"] * len(lines),
                            [("1", (1,))], samples=20)
    assert row["delta"] == 0 and row["p_value"] == 1.0 and row["bleu"] == row["baseline_bleu"]
