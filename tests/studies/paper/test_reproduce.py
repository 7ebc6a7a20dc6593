"""``arelu reproduce`` on a tiny recipe: every CSV with its columns, PNGs and REPORT.md; a
second call skips every step; lost outputs and an unfinished run are redone; runs trained on
another version of the prepared corpus are moved aside and trained again."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from arelu_cli.cli import main
from arelu_cli.config import RECIPES, load_config, parse_override, resolve_recipe
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import data_fingerprint, read_meta
from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper.columns import COLUMNS
from arelu_cli.studies.paper.layout import find_run_dirs
from arelu_cli.studies.paper import steps as rs
from arelu_cli.studies.paper.grid import Grid
from arelu_cli.studies.contract import Context
from arelu_cli.util.cpuinfo import usable_cpus
from arelu_cli.studies.core import trainer
from arelu_cli.studies.paper.study import check, move_aside, recorded_fingerprint, stale_data
from arelu_cli.studies.runner import run
from arelu_cli.train.run_dir import SUMMARY


@dataclasses.dataclass(frozen=True)
class Request:
    """What ``arelu reproduce`` is asked for: the recipe, the folder, ``--set`` overrides."""

    recipe: Path
    out: Path
    overrides: tuple[str, ...] = ()


def load_request_config(req: Request):
    """The recipe with its overrides, as ``arelu reproduce`` reads and checks it."""
    config = load_config(req.recipe, {(section, key): value for section, key, value
                                      in map(parse_override, req.overrides)})
    config = dataclasses.replace(config, study=dataclasses.replace(config.study, kind="paper"))
    check(config)
    return config


def reproduce(req: Request, console: Console) -> Path:
    """``arelu reproduce`` through the runner."""
    return run(load_request_config(req), req.out,
               Context(console, trainer(req.recipe.stem, console), str(req.recipe)))

SCORED_BY_HAND = {"table_human_eval.csv", "human_eval_kappa.csv"}  # need filled sheets


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return repr(value)


def write_recipe(path: Path, corpus: Path, model: dict, **reproduce: object) -> Path:
    """A tiny recipe; ``reproduce`` replaces keys of its [reproduce] table (runs one at a
    time unless ``jobs`` says otherwise: :func:`grid` trains side by side)."""
    tables = {
        "data": {"path": str(corpus), "max_tokens": 256},
        "model": model,
        "train": {"max_steps": 6, "warmup": 4, "lr": 1.0, "accum": 1, "log_every": 2,
                  "valid_every": 3, "save_every": 3, "stats_rows": 32, "device": "cpu"},
        "decode": {"beam": 2, "max_tokens": 2048},
        "reproduce": {"corpus": "toy", "transforms": ["softmax", "1.5-entmax", "1.5-relu"],
                      "tau_sweep": [0.0, 0.3], "sweep_steps": 4, "beams": [1, 2],
                      "timing_sentences": 5, "timing_repeats": 2, "train_sentences": 10,
                      "human_eval_items": 6, "jobs": 1} | reproduce,
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
    recipe = write_recipe(folder / "tiny.toml", tiny_corpus, tiny_model, jobs="auto")
    request = Request(recipe, folder / "results")
    console = Console(record=True, width=120)
    report = reproduce(request, console)
    return request, report, console.export_text()


def test_every_csv_png_and_the_report(grid):
    request, report, text = grid
    out = request.out
    if usable_cpus() > 1:  # the five runs trained side by side, and say so
        assert re.search(r"train softmax, 1\.5-entmax, 1\.5-relu, tau-0, tau-0\.3: \d at a time",
                         text)
        assert set(pd.read_csv(out / "training_time.csv")["beside"]) - {0}
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
    assert (out / "human_eval-key" / "key.csv").is_file()
    assert not (out / "human_eval" / "key.csv").exists()  # the sheets' folder is blind


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


@pytest.fixture(scope="module")
def seeded_grid(tiny_corpus, tiny_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("seeded")
    recipe = write_recipe(folder / "tiny.toml", tiny_corpus, tiny_model,
                          transforms=["softmax", "1.5-relu"], tau_sweep=[0.3], beams=[1])
    request = Request(recipe, folder / "results", overrides=("reproduce.seeds=[1, 2]",))
    console = Console(record=True, width=120)
    report = reproduce(request, console)
    return request, report, console.export_text()


def test_several_seeds_run_every_cell_in_seed_folders(seeded_grid):
    request, report, text = seeded_grid
    out = request.out
    for name in ("softmax", "1.5-relu"):
        for seed in (1, 2):
            run = json.loads((out / "runs" / name / f"seed-{seed}" / "summary.json").read_text())
            assert f"seed:{seed}" in run["signature"]
            assert (out / "translations" / name / f"seed-{seed}.test.txt").is_file()
    assert not (out / "runs" / "softmax" / "log.csv").exists()
    assert {p.name for p in (out / "tau-sweep" / "tau-0.3").iterdir()} == {"seed-1", "seed-2"}
    assert (out / "analysis" / "seed-2" / "empty_check.csv").is_file()
    assert "train 1.5-relu seed 2" in text and "translate softmax seed 1 (beam 2)" in text
    assert "--seed 2 --out" in (out / "commands.txt").read_text()
    for name in ("table1_bleu.csv", "table2_empty.csv", "fig_inference_time.csv",
                 "training_time.csv"):
        frame = pd.read_csv(out / name)
        assert sorted(zip(frame["transform"], frame["seed"])) == [
            ("1.5-relu", 1), ("1.5-relu", 2), ("softmax", 1), ("softmax", 2)], name
        assert all(f"seed:{s}" in sig for s, sig in zip(frame["seed"], frame["signature"])), name
    assert set(pd.read_csv(out / "fig_sparsity.csv")["seed"]) == {1, 2}
    assert set(pd.read_csv(out / "fig_tau_sweep.csv")["seed"]) == {1, 2}
    tau = pd.read_csv(out / "table3_tau.csv").dropna(subset=["tau_empirical"])
    assert {sig.split("seed:")[1].split("|")[0] for sig in tau["signature"]} == {"1", "2"}


def test_several_seeds_are_tested_per_seed_and_concatenated(seeded_grid):
    request, report, _ = seeded_grid
    tests = pd.read_csv(request.out / "table1_significance.csv", dtype={"seeds": str})
    relu = tests[tests["transform"] == "1.5-relu"]
    assert relu["seeds"].tolist() == ["1", "2", "1+2"]
    # the joined test resamples the 40 test sentences, each with both seeds' translations
    assert relu["sentences"].tolist() == [40, 40, 40]
    assert relu["p_value"].between(0, 1).all() and (tests["baseline"] == "softmax").all()
    assert tests.loc[tests["transform"] == "softmax", "p_value"].isna().all()
    summary = pd.read_csv(request.out / "seed_summary.csv")
    bleu = summary[(summary["csv"] == "table1_bleu.csv") & (summary["metric"] == "bleu")]
    assert bleu["n"].tolist() == [2, 2]
    table1 = report.read_text(encoding="utf-8").split("## Table 1")[1].split("\n## ")[0]
    assert "±" in table1 and "(per seed: " in table1 and "Over 2 training seeds" in table1


def test_per_seed_gathers_every_seeds_rows_and_keeps_each_seeds_raw_csvs(tmp_path):
    """An analysis of one seed gives its rows of a catalog CSV and the raw CSVs of the
    single command; per_seed runs it for every seed of the grid, in seed order."""
    grid = Grid(load_config(None, {("reproduce", "seeds"): [3, 1]}), tmp_path)

    def analysis(given: Grid, seed: int) -> tuple[list[dict], dict[str, list[dict]]]:
        assert given is grid
        row = dict.fromkeys(COLUMNS["table2_empty.csv"], "") | {"seed": seed}
        return [row], {"empty_check.csv": [{"seed": seed, "n": 1}]}
    rs.per_seed("table2_empty.csv", analysis)(grid)
    assert pd.read_csv(tmp_path / "table2_empty.csv")["seed"].tolist() == [3, 1]
    for seed in (3, 1):
        raw = pd.read_csv(tmp_path / "analysis" / f"seed-{seed}" / "empty_check.csv")
        assert raw.to_dict("records") == [{"seed": seed, "n": 1}]

def test_seeds_must_be_distinct_integers(tiny_corpus, tiny_model, tmp_path):
    recipe = write_recipe(tmp_path / "tiny.toml", tiny_corpus, tiny_model)
    with pytest.raises(UserError, match="distinct"):
        load_request_config(Request(recipe, tmp_path / "r", overrides=("reproduce.seeds=[1,1]",)))
    with pytest.raises(UserError, match="seeds"):
        load_request_config(Request(recipe, tmp_path / "r", overrides=("reproduce.seeds=[1,x]",)))
    seeded = Request(recipe, tmp_path / "r", overrides=("reproduce.seeds=[3, 1]",))
    assert load_request_config(seeded).reproduce.seeds == (3, 1)
    assert load_request_config(Request(recipe, tmp_path / "r")).reproduce.seeds == ()
    assert Grid(load_request_config(Request(recipe, tmp_path / "r")), tmp_path).seeds == (1,)
    assert not (tmp_path / "r").exists()


def test_bad_requests_fail_before_any_work(tiny_corpus, tiny_model, tmp_path):
    recipe = write_recipe(tmp_path / "tiny.toml", tiny_corpus, tiny_model)
    with pytest.raises(UserError, match="no recipe"):
        resolve_recipe("no-such-recipe")
    with pytest.raises(ValueError, match="unknown|transform"):  # the registry's ValueError
        load_request_config(Request(recipe, tmp_path / "r",
                                    overrides=('reproduce.transforms=["softmax","2.5-nope"]',)))
    with pytest.raises(UserError, match="tau_sweep|number"):
        load_request_config(Request(recipe, tmp_path / "r", overrides=('reproduce.tau_sweep=["x"]',)))
    with pytest.raises(UserError, match="--set takes SECTION.KEY=VALUE"):
        load_request_config(Request(recipe, tmp_path / "r", overrides=("seeds=1",)))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("name, text", [("study.json", '{"mine": 1}\n'),
                                        ("commands.txt", "make all\n")])
def test_a_users_file_of_an_outputs_name_is_refused_before_any_work(tiny_corpus, tiny_model,
                                                                   tmp_path, name, text):
    recipe = write_recipe(tmp_path / "tiny.toml", tiny_corpus, tiny_model)
    out = tmp_path / "r"
    out.mkdir()
    (out / name).write_text(text)
    with pytest.raises(UserError, match=f"{name} exists and was not written by arelu"):
        reproduce(Request(recipe, out), Console(quiet=True))
    assert [p.name for p in out.iterdir()] == [name] and (out / name).read_text() == text


REPO = Path(__file__).resolve().parents[3]


def test_recipes_ship_with_the_package_and_the_repository_links_to_them():
    bundled = REPO / "arelu_cli" / "recipes"
    assert {"toy.toml", "multi30k.toml", "iwslt14.toml"} <= {p.name for p in bundled.glob("*.toml")}
    assert (REPO / "recipes").is_symlink() and os.readlink(REPO / "recipes") == "arelu_cli/recipes"
    assert "recipes/*.toml" in (REPO / "pyproject.toml").read_text()


def test_recipe_names_resolve_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    toy = RECIPES / "toy.toml"
    assert resolve_recipe("toy") == resolve_recipe("toy.toml") == toy
    assert resolve_recipe("recipes/toy.toml") == resolve_recipe(Path("recipes/toy.toml")) == toy
    assert load_config(resolve_recipe("toy")).model.d_model == 128
    with pytest.raises(UserError, match=r"no recipe 'elsewhere/toy.toml'.*toy"):
        resolve_recipe("elsewhere/toy.toml")  # a path that is not there is not a name
    mine = tmp_path / "recipes" / "toy.toml"  # a folder's own recipes come first
    mine.parent.mkdir()
    mine.write_text("[model]\nd_model = 64\n")
    assert resolve_recipe("toy") == Path("recipes/toy.toml")
    assert resolve_recipe("multi30k") == RECIPES / "multi30k.toml"


def _cli(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["arelu", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, capsys.readouterr()


def test_commands_read_bundled_recipes_from_another_folder(tiny_corpus, tmp_path, monkeypatch,
                                                           capsys, one_thread):
    monkeypatch.chdir(tmp_path)
    code, _ = _cli(monkeypatch, capsys, "estimate-tau", "--method", "empirical", "--recipe",
                   "recipes/toy.toml", "--data", tiny_corpus, "--out", "tau.csv")
    assert code == 0
    assert pd.read_csv(tmp_path / "tau.csv")["d_model"].tolist() == [128]  # the toy recipe's
    code, captured = _cli(monkeypatch, capsys, "reproduce", "toy", "--set",
                          'reproduce.transforms=["2.5-relu"]')
    assert code == 2 and "no recipe" not in captured.err and "2.5" in captured.err
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()


def test_the_grid_takes_the_recipes_own_keys_through_set(tiny_corpus, tiny_model, tmp_path):
    """``--set`` replaces the hand-copied options (--steps, --minutes, --transforms...)."""
    recipe = write_recipe(tmp_path / "tiny.toml", tiny_corpus, tiny_model)
    config = load_request_config(Request(recipe, tmp_path / "r", overrides=(
        "reproduce.train_steps=9", "reproduce.train_minutes=0.5", "train.device=cpu")))
    assert (config.reproduce.train_steps, config.reproduce.train_minutes) == (9, 0.5)
    assert load_request_config(Request(recipe, tmp_path / "r")).reproduce.train_steps == 0


def test_a_toy_folder_of_an_earlier_generator_is_not_reused(tmp_path):
    from arelu_cli.data import toy
    from arelu_cli.studies.paper.study import _prepared
    config = load_config(resolve_recipe("toy"), {("data", "path"): str(tmp_path)})
    assert not _prepared(config)
    meta = {"corpus": "toy", "toy": toy.record(toy.ToyConfig())}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert _prepared(config)
    meta["toy"] = toy.record(toy.ToyConfig(vocab=6000, train=300))  # the user's own options
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert _prepared(config)
    meta["toy"]["generator"] = toy.GENERATOR - 1  # an earlier version (its default differed)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert not _prepared(config)


def test_the_toy_recipe_is_a_step_budget():
    config = load_config(resolve_recipe("toy"))
    assert config.train.max_minutes == 0 and config.reproduce.train_minutes == 0
    # fp32 pinned: its committed runs are fp32, and "auto" resolves bf16 on AVX512-BF16 CPUs
    assert config.train.max_steps >= 500 and config.train.precision == "fp32"


# After the prepared corpus changed: runs trained on the old version (finished or half
# trained) are moved to stale/, never deleted nor reported, and trained again, and their
# translations and Table 1 are redone; runs recording no fingerprint stay.


def _prepare(out: Path, seed: int, eval_size: int) -> str:
    """A toy corpus (``force``: replacing the one there); returns its data fingerprint."""
    prepare(PrepareRequest("toy", out, train_size=600, eval_size=eval_size, toy_vocab=150,
                           merges=200, seed=seed, force=True))
    found = data_fingerprint(read_meta(out))
    assert found is not None
    return found


def _call(request: Request) -> tuple[str, set[str]]:
    """One reproduce: its console text (one line per console line) and the steps it ran."""
    console = Console(record=True, width=100)
    reproduce(request, console)
    text = console.export_text()
    return text, set(re.findall(r"^(.+): \d+ s$", text, re.M))


def _moved_line(text: str, run: str, old: str, out: Path) -> str:
    lines = [line for line in text.splitlines() if line.startswith(str(out / run) + " was")]
    assert len(lines) == 1, text
    assert f"(data fingerprint {old[:12]}, now " in lines[0]
    assert lines[0].endswith(f"moved to {out / 'stale' / f'data-{old[:12]}' / run}, "
                             "training it again")
    return lines[0]


def test_runs_of_another_data_version_are_moved_aside_and_trained_again(tmp_path, tiny_model,
                                                                      one_thread, monkeypatch):
    data = tmp_path / "toy"
    first = _prepare(data, seed=0, eval_size=12)
    recipe = write_recipe(tmp_path / "tiny.toml", data, tiny_model, transforms=["softmax"],
                          tau_sweep=[0.3], sweep_steps=1, beams=[1])
    request = Request(recipe, tmp_path / "results")
    out = request.out
    _call(request)
    run, sweep = out / "runs" / "softmax", out / "tau-sweep" / "tau-0.3"
    assert recorded_fingerprint(run) == recorded_fingerprint(sweep) == first

    # The corpus is prepared again with other options: another version, 16 test sentences.
    second = _prepare(data, seed=1, eval_size=16)
    assert second != first
    text, redone = _call(request)
    _moved_line(text, "runs/softmax", first, out)
    _moved_line(text, "tau-sweep/tau-0.3", first, out)
    old = out / "stale" / f"data-{first[:12]}"
    for kept in (old / "runs" / "softmax", old / "tau-sweep" / "tau-0.3"):
        assert recorded_fingerprint(kept) == first and (kept / "last.pt").is_file()
        assert (kept / SUMMARY).is_file()
    assert recorded_fingerprint(run) == recorded_fingerprint(sweep) == second
    assert json.loads((run / SUMMARY).read_text())["steps"] == 6
    assert {"train softmax", "tau sweep 0.3", "translate softmax (beam 2)",
            "score (Table 1)"} <= redone
    # Table 1 is of the new model on the new test set: 16 sentences, not the old 12.
    hyps = (out / "translations" / "softmax.test.txt").read_text(encoding="utf-8")
    assert len(hyps.splitlines()) == 16
    assert pd.read_csv(out / "table1_significance.csv")["sentences"].tolist() == [16]
    assert (out / "table1_bleu.csv").stat().st_mtime_ns >= (run / "best.pt").stat().st_mtime_ns
    # What a report reads holds no stale run.
    assert find_run_dirs(out / "runs") == [run] and find_run_dirs(out / "tau-sweep") == [sweep]

    # A run killed before its end (last.pt, no summary) of an older version is not resumed
    # on the new data (nor refused): it is moved aside and trained from the start.
    (run / SUMMARY).unlink()
    third = _prepare(data, seed=2, eval_size=16)
    text, redone = _call(request)
    _moved_line(text, "runs/softmax", second, out)
    assert not (out / "stale" / f"data-{second[:12]}" / "runs" / "softmax" / SUMMARY).exists()
    assert recorded_fingerprint(run) == third and (run / SUMMARY).is_file()
    assert "train softmax" in redone and "translate softmax (beam 2)" in redone

    # Nothing changed: every step is skipped, nothing more is moved.
    text, redone = _call(request)
    assert not redone and "moved to" not in text


def _run(folder: Path, fingerprint: str | None) -> Path:
    folder.mkdir(parents=True)
    resolved = {} if fingerprint is None else {"data_fingerprint": fingerprint}
    (folder / "config.json").write_text(json.dumps({"resolved": resolved}))
    (folder / "last.pt").write_text("weights")
    return folder


def test_a_run_recording_no_fingerprint_is_kept_and_moves_never_overwrite(tmp_path):
    data = tmp_path / "toy"
    data.mkdir()
    (data / "meta.json").write_text(json.dumps({"corpus": "toy", "checksums": {"a": "1"}}))
    now = data_fingerprint(read_meta(data))
    out = tmp_path / "results"
    assert stale_data(_run(out / "runs" / "legacy", None), data) is None  # cannot be told
    assert stale_data(_run(out / "runs" / "current", now), data) is None
    assert stale_data(_run(out / "runs" / "broken", None), tmp_path / "nothing") is None
    (out / "runs" / "broken" / "config.json").write_text("{not json")
    assert recorded_fingerprint(out / "runs" / "broken") is None
    assert stale_data(_run(out / "runs" / "old", "ab" * 32), data) == ("ab" * 32, now)
    first = move_aside(out / "runs" / "old", out, "ab" * 32)
    assert first == out / "stale" / f"data-{'ab' * 6}" / "runs" / "old"
    again = move_aside(_run(out / "runs" / "old", "ab" * 32), out, "ab" * 32)
    assert again == out / "stale" / f"data-{'ab' * 6}-2" / "runs" / "old"
    assert (first / "last.pt").is_file() and (again / "last.pt").is_file()
    assert not (out / "runs" / "old").exists()
