"""``arelu train`` from the command line: flags override the recipe, errors are one line."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from arelu_cli.model import checkpoint
from arelu_cli.cli import main
from arelu_cli.cli.train import check_tau_given
from arelu_cli.util.errors import UserError


def _run(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["arelu", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, capsys.readouterr()


def _recipe(tmp_path, corpus):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[data]\npath = "{corpus}"\nmax_tokens = 256\n[model]\nd_model = 16\n'
                      "encoder_layers = 1\ndecoder_layers = 1\nheads = 2\nd_ff = 32\n"
                      "[train]\nmax_steps = 2\naccum = 1\nvalid_every = 2\nlog_every = 1\n")
    return recipe


def test_train_then_resume_further(monkeypatch, capsys, tiny_corpus, tmp_path):
    recipe, out = _recipe(tmp_path, tiny_corpus), tmp_path / "run"
    code, _ = _run(monkeypatch, capsys, "train", "--recipe", recipe, "--transform", "1.5-relu",
                   "--tau", "analytic", "--out", out, "--set", "train.lr=0.5", "--device", "cpu")
    assert code == 0
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["lr"] == 0.5 and config["train"]["tau"] == "analytic"
    assert 0 < config["resolved"]["tau"] < 1
    code, _ = _run(monkeypatch, capsys, "train", "--resume", out, "--max-steps", "3")
    assert code == 0
    assert (out / "log.csv").read_text().count("\n3,") == 1


def test_fused_output_flag_is_kept_on_resume(monkeypatch, capsys, tiny_corpus, tmp_path):
    recipe, out = _recipe(tmp_path, tiny_corpus), tmp_path / "run"
    code, _ = _run(monkeypatch, capsys, "train", "--recipe", recipe, "--transform", "1.5-relu",
                   "--fused-output", "--out", out, "--device", "cpu")
    assert code == 0 and json.loads((out / "config.json").read_text())["train"]["fused_output"]
    code, _ = _run(monkeypatch, capsys, "train", "--resume", out, "--max-steps", "3")
    assert code == 0 and (out / "log.csv").read_text().count("\n3,") == 1
    assert checkpoint.load(out)["config"]["train"]["fused_output"]


def test_label_smoothing_set_on_the_command_line_reaches_the_loss(monkeypatch, capsys,
                                                                  tiny_corpus, tmp_path):
    """2 steps with ``--set train.label_smoothing=0.1`` log a finite loss that differs from
    the unsmoothed one at step 1 (same seed, same batch, same weights)."""
    recipe, first = _recipe(tmp_path, tiny_corpus), {}
    for eps in ("0.1", "0"):
        out = tmp_path / f"ls-{eps}"
        code, _ = _run(monkeypatch, capsys, "train", "--recipe", recipe, "--transform", "1.5-relu",
                       "--tau", "analytic", "--out", out, "--device", "cpu",
                       "--set", f"train.label_smoothing={eps}")
        assert code == 0
        config = json.loads((out / "config.json").read_text())
        assert config["train"]["label_smoothing"] == float(eps)
        rows = pd.read_csv(out / "log.csv")
        assert rows["step"].tolist() == [1, 2] and np.isfinite(rows["train_loss"]).all()
        assert np.isfinite(rows["val_loss"].dropna()).all() and rows["val_loss"].notna().any()
        first[eps] = rows["train_loss"].iloc[0]
    assert first["0.1"] != pytest.approx(first["0"], rel=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--tau", "big"], "--tau takes auto, analytic or a number"),
    (["--transform", "2.5-relu"], "alpha 2.5 is outside [1.05, 2]"),
    (["--set", "train.warmpu=3"], "unknown key(s) warmpu in [train]"),
    (["--set", "train.label_smoothing=1.0"], "[train] label_smoothing must be in [0, 1)"),
    (["--set", "train.label_smoothing=-0.1"], "[train] label_smoothing must be in [0, 1)"),
    (["--fused-output"], "--fused-output works only with alpha-ReLU transforms (<a>-relu, e.g. "
                         "1.5-relu), not 'softmax'; drop --fused-output"),
    (["--fused-output", "--transform", "1.5-entmax"], "not '1.5-entmax'; drop --fused-output"),
    (["--set", "train.fused_output=true"], "[train] fused_output works only with alpha-ReLU "
                                           "transforms"),
])
def test_errors_are_one_line(monkeypatch, capsys, tiny_corpus, tmp_path, args, message):
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, tiny_corpus),
                          "--out", tmp_path / "x", *args)
    assert code == 2 and message in captured.err and "Traceback" not in captured.err


def _one_line_error(code: int, captured, message: str) -> None:
    err = captured.err.strip()
    assert code == 2 and message in err and "\n" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("args, message", [
    (["--transform", "1.0001-relu"], "alpha 1.0001 is outside [1.05, 2]: alpha -> 1 is softmax "
                                     "(use 'softmax'), 2 is sparsemax, and below 1.05 alpha-ReLU's "
                                     "float32 loss overflows"),
    (["--transform", "1.5-relu", "--tau", "nan"], "[train] tau must be a finite number"),
    (["--transform", "1.5-relu", "--tau", "inf"], "[train] tau must be a finite number"),
    (["--transform", "1.5-relu", "--tau", "-inf"], "[train] tau must be a finite number"),
    (["--transform", "1.5-relu", "--tau", "1e308"], "tau 1e+308 is impossible for 1.5-relu: "
                                                   "with a vocabulary of"),
    (["--transform", "1.5-relu", "--tau", "-1e30"], "its float32 loss is finite only for tau in"),
])
def test_impossible_alpha_and_tau_are_refused_before_any_model(monkeypatch, capsys, tiny_corpus,
                                                               tmp_path, args, message):
    def no_model(*_, **__):
        raise AssertionError("a model was built")

    monkeypatch.setattr("arelu_cli.train.loop.build_model", no_model)
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, tiny_corpus),
                          "--out", tmp_path / "x", *args)
    _one_line_error(code, captured, message)


@pytest.mark.parametrize("transform, lr, valid, message", [
    ("1.5-relu", "1e12", 2, r"training diverged at step 2 \(loss nan, grad_norm nan\); that "
                            r"step was not saved\. \S+ keeps step 1; resume with: arelu train "
                            r"--resume"),
    ("1.5-entmax", "1e12", 2, r"training diverged at step 2 \(loss nan, grad_norm nan\)"),
    ("softmax", "1e41", 2, r"training diverged at step 1 \(weight_norm inf\); that step was not "
                           r"saved\. no last\.pt was saved yet; start again with --out"),
    # finite weights whose logits overflow: validation must not crash in the entmax loss
    ("1.5-entmax", "1e20", 1, r"training diverged at step 1 \(val_loss nan\)"),
])
def test_a_diverging_run_exits_2_and_never_saves_nan(monkeypatch, capsys, tiny_corpus, tmp_path,
                                                      transform, lr, valid, message):
    out = tmp_path / "run"
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, tiny_corpus),
                          "--transform", transform, "--out", out, "--max-steps", "4",
                          "--set", f"train.lr={lr}", "--set", "train.save_every=1",
                          "--set", f"train.valid_every={valid}")
    _one_line_error(code, captured, "training diverged at step")
    assert re.search(message, captured.err), captured.err
    assert not (out / "summary.json").exists() and (out / "diverged.json").exists()
    for name in (checkpoint.LAST, checkpoint.BEST):
        if (out / name).exists():
            saved = checkpoint.load(out / name)
            assert saved["step"] < json.loads((out / "diverged.json").read_text())["step"]
            assert all(torch.isfinite(w).all() for w in saved["model"].values())


@pytest.mark.parametrize("args, message", [
    (["--recipe", "{tmp}"], "no recipe"),
    (["--out", "{tmp}/file"], "is a file, not a run folder; give --out a folder"),
    (["--out", "{tmp}/file/run"], "cannot write the run folder"),
    (["--resume", "{tmp}/file"], "--resume takes a run folder (the --out of an earlier arelu "
                                 "train), not the file"),
    (["--resume", "{tmp}/empty"], "holds no last.pt, so there is no run to resume; start one "
                                  "with --out"),
    (["--resume", "{tmp}/missing"], "does not exist, so there is no run to resume"),
    (["--resume", "{tmp}/corrupt"], "last.pt is not a readable arelu checkpoint"),
    (["--resume", "{tmp}/empty", "--out", "{tmp}/other"], "--resume continues the run in its "
                                                         "own folder"),
])
def test_bad_recipes_and_run_folders_are_one_line_errors(monkeypatch, capsys, tiny_corpus,
                                                         tmp_path, args, message):
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "last.pt").write_text("not a checkpoint")
    given = [a.format(tmp=tmp_path) for a in args]
    recipe = [] if "--recipe" in given else ["--recipe", _recipe(tmp_path, tiny_corpus)]
    code, captured = _run(monkeypatch, capsys, "train", *recipe, *given)
    _one_line_error(code, captured, message)
    if "--resume" in given:  # with the recipe too (the checkpoint's config is not read first)
        code, captured = _run(monkeypatch, capsys, "train", "--recipe",
                              _recipe(tmp_path, tiny_corpus), *given)
        _one_line_error(code, captured, message)


@pytest.fixture(scope="module")
def two_step_run(tiny_corpus, tmp_path_factory):
    """A finished 2-step softmax run of :func:`_recipe` (``recipe:r``), trained once for the
    tests that resume it; each resumes a copy (:func:`_copy`)."""
    folder = tmp_path_factory.mktemp("two-step")
    args = ["arelu", "train", "--recipe", str(_recipe(folder, tiny_corpus)), "--out",
            str(folder / "run"), "--device", "cpu"]
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
        patch.setattr("sys.argv", args)
        main()
    assert not exited.value.code
    return folder / "run"


def _copy(run, tmp_path):
    import shutil

    return shutil.copytree(run, tmp_path / "run")


def _signatures(out) -> set[str]:
    rows = pd.read_csv(out / "log.csv")["signature"].tolist()
    return {*rows, json.loads((out / "summary.json").read_text())["signature"]}


def test_resume_without_recipe_keeps_the_recipe_in_every_signature(monkeypatch, capsys,
                                                                   two_step_run, tmp_path):
    """``--resume RUN`` alone signs its rows and summary with the recipe the run started
    with, from its checkpoint."""
    out = _copy(two_step_run, tmp_path)
    assert all("|recipe:r|" in s for s in _signatures(out))
    assert checkpoint.load(out / checkpoint.LAST)["recipe"] == "r"
    code, _ = _run(monkeypatch, capsys, "train", "--resume", out, "--max-steps", "3")
    assert code == 0 and (out / "log.csv").read_text().count("\n3,") == 1
    assert all("|recipe:r|" in s for s in _signatures(out)), _signatures(out)


def test_set_applies_where_no_flag_is_given(monkeypatch, capsys, tiny_corpus, tmp_path):
    """``--set train.max_steps=1`` was overwritten by the absent --max-steps flag."""
    out = tmp_path / "run"
    code, _ = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, tiny_corpus),
                   "--out", out, "--device", "cpu", "--set", "train.max_steps=1",
                   "--set", "train.seed=7")
    config = json.loads((out / "config.json").read_text())
    assert code == 0 and (config["train"]["max_steps"], config["train"]["seed"]) == (1, 7)
    assert pd.read_csv(out / "log.csv")["step"].max() == 1


@pytest.mark.parametrize("args", [["--transform", "softmax", "--tau", "0.3"],
                                  ["--transform", "1.5-entmax", "--tau", "0"],
                                  ["--transform", "sparsemax", "--set", "train.tau=0.2"]])
def test_a_numeric_tau_for_a_transform_without_one_is_refused(monkeypatch, capsys, tiny_corpus,
                                                              tmp_path, args):
    out = tmp_path / "run"
    code, captured = _run(monkeypatch, capsys, "train", "--recipe",
                          _recipe(tmp_path, tiny_corpus), "--out", out, *args)
    _one_line_error(code, captured, "applies only to alpha-ReLU transforms (<a>-relu")
    assert not out.exists()


def test_a_numeric_tau_is_refused_when_resuming_a_run_without_one(monkeypatch, capsys,
                                                                 two_step_run, tmp_path):
    out = _copy(two_step_run, tmp_path)
    code, captured = _run(monkeypatch, capsys, "train", "--resume", out, "--tau", "0.3")
    _one_line_error(code, captured, "--tau 0.3 applies only to alpha-ReLU transforms")


def test_out_holding_other_files_is_refused_and_left_alone(monkeypatch, capsys, tiny_corpus,
                                                          tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, tiny_corpus),
                          "--out", out, "--device", "cpu")
    _one_line_error(code, captured, "is not empty and not a run folder of arelu train (it holds "
                                    "notes.txt); give --out a new or empty folder")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_out_may_be_empty_or_a_run_folder_without_last_pt(monkeypatch, capsys, tiny_corpus,
                                                          tmp_path):
    """An empty folder is a new run's; a run folder whose run stopped before its first save
    is started again; one holding last.pt points to --resume."""
    recipe, out = _recipe(tmp_path, tiny_corpus), tmp_path / "run"
    out.mkdir()
    code, _ = _run(monkeypatch, capsys, "train", "--recipe", recipe, "--out", out, "--device", "cpu")
    assert code == 0
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", recipe, "--out", out)
    _one_line_error(code, captured, f"{out} already holds a run; continue it with --resume")
    for name in (checkpoint.LAST, checkpoint.BEST, "summary.json"):
        (out / name).unlink()
    code, _ = _run(monkeypatch, capsys, "train", "--recipe", recipe, "--out", out, "--device", "cpu")
    assert code == 0 and (out / checkpoint.LAST).is_file()


def test_resume_on_changed_data_is_one_line_unless_allowed(monkeypatch, capsys, tiny_corpus,
                                                          tmp_path):
    import shutil

    from arelu_cli.data.prepared import data_fingerprint, read_meta, write_meta

    data, out = tmp_path / "data", tmp_path / "run"
    shutil.copytree(tiny_corpus, data)
    code, _ = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, data), "--out",
                   out, "--device", "cpu")
    assert code == 0
    before = json.loads((out / "config.json").read_text())["resolved"]["data_fingerprint"]
    meta = read_meta(data)  # prepared again with one more test sentence: another version
    with open(data / f"test.{meta['tgt_lang']}", "a", encoding="utf-8") as handle:
        handle.write("one more\n")
    write_meta(data, {k: v for k, v in meta.items() if k != "checksums"})
    after = data_fingerprint(read_meta(data))
    code, captured = _run(monkeypatch, capsys, "train", "--resume", out, "--max-steps", "3")
    _one_line_error(code, captured, f"was trained on another version of {data} (data "
                                    f"fingerprint {before[:12]}, now {after[:12]})")
    code, captured = _run(monkeypatch, capsys, "train", "--resume", out, "--max-steps", "3",
                          "--allow-data-change")
    assert code == 0 and "on changed data" in captured.err
    assert checkpoint.load(out)["step"] == 3
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, data),
                          "--out", tmp_path / "new", "--allow-data-change")
    _one_line_error(code, captured, "--allow-data-change continues a run (--resume RUN)")


@pytest.mark.parametrize("transform, device, engine, built", [
    ("1.5-relu", "cpu", "auto", True), ("1.5-relu", "cpu", "cpp", True),
    ("softmax", "cpu", "auto", False), ("1.5-relu", "cpu", "eager", False),
    ("1.5-relu", "cuda", "auto", False)])
def test_train_builds_the_cpp_engine_before_training_only_where_it_runs(monkeypatch, transform,
                                                                         device, engine, built):
    from arelu_cli.cli.train import _build_engine
    from arelu_cli.transforms import engine as use_engine

    calls = []
    monkeypatch.setattr("arelu_cli.transforms.build_cpp", lambda: calls.append(1) or True)
    with use_engine(engine):
        _build_engine(device, transform)
    assert calls == ([1] if built else [])


@pytest.mark.parametrize("tau, transform, refused", [
    (0.3, "softmax", True), (0.0, "1.5-entmax", True), (0.3, "1.5-relu", False),
    ("auto", "softmax", False), (None, "sparsemax", False)])
def test_a_number_for_tau_needs_a_transform_with_one(tau, transform, refused):
    if refused:
        with pytest.raises(UserError, match=rf"--tau {tau:g} applies only to alpha-ReLU"):
            check_tau_given(tau, transform)
    else:
        check_tau_given(tau, transform)
