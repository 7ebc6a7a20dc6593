"""``arelu train`` from the command line: flags override the recipe, errors are one line."""

import json

import pytest

from arelu_cli import checkpoint
from arelu_cli.cli import main


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


@pytest.mark.parametrize("args, message", [
    (["--tau", "big"], "--tau takes auto, analytic or a number"),
    (["--transform", "2.5-relu"], "alpha 2.5 is outside (1, 2]"),
    (["--set", "train.warmpu=3"], "unknown key(s) warmpu in [train]"),
    (["--fused-output"], "fused_output works only with alpha-ReLU transforms"),
])
def test_errors_are_one_line(monkeypatch, capsys, tiny_corpus, tmp_path, args, message):
    code, captured = _run(monkeypatch, capsys, "train", "--recipe", _recipe(tmp_path, tiny_corpus),
                          "--out", tmp_path / "x", *args)
    assert code == 2 and message in captured.err and "Traceback" not in captured.err
