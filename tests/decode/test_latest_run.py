"""Without --checkpoint, every command that decodes takes the run ``arelu train`` made most
recently under ./runs (:func:`arelu_cli.decode.translate.latest_run`), names it on stderr, and
with no run there fails in one line; the design card's commands run verbatim."""

import os
import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.cli import app, main
from arelu_cli.util.errors import UserError
from arelu_cli.decode.translate import latest_run

pytestmark = pytest.mark.usefixtures("one_thread")


def _touch(path, seconds, data=b"checkpoint"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (seconds, seconds))


def test_the_newest_last_or_best_checkpoint_wins(tmp_path):
    runs = tmp_path / "runs"
    _touch(runs / "toy" / "softmax" / "last.pt", 100)
    _touch(runs / "toy" / "softmax" / "best.pt", 300)
    _touch(runs / "default" / "1.5-relu" / "last.pt", 200)
    _touch(runs / "mine" / "last.pt", 250)
    assert latest_run(runs) == runs / "toy" / "softmax"  # its best.pt is the newest file
    _touch(runs / "default" / "1.5-relu" / "last.pt", 400)  # a resumed run saved again
    assert latest_run(runs) == runs / "default" / "1.5-relu"


def test_an_empty_last_checkpoint_is_no_run(tmp_path):
    """A valid older run is preferred over a newer 0-byte last.pt."""
    runs = tmp_path / "runs"
    _touch(runs / "valid" / "last.pt", 100)
    _touch(runs / "empty" / "last.pt", 900, data=b"")
    assert latest_run(runs) == runs / "valid"


def test_only_runs_with_a_last_checkpoint_count(tmp_path):
    runs = tmp_path / "runs"
    _touch(runs / "done" / "last.pt", 100)
    _touch(runs / "weights-only" / "best.pt", 500)  # neither finished nor resumable
    _touch(runs / "killed" / ".last.pt.abc.tmp", 600)  # a checkpoint half written
    (runs / "empty").mkdir()
    assert latest_run(runs) == runs / "done"


def test_no_run_is_a_one_line_error(tmp_path):
    with pytest.raises(UserError, match=r"no trained run under .*runs/.*train one first.*"
                                        r"--checkpoint"):
        latest_run(tmp_path / "runs")
    (tmp_path / "runs" / "x").mkdir(parents=True)
    with pytest.raises(UserError, match="no trained run"):
        latest_run(tmp_path / "runs")


@pytest.fixture
def trained_here(toy_runs, tmp_path, monkeypatch):
    """A folder where `arelu train` made runs/toy/softmax, then runs/default/1.5-relu."""
    for age, (name, folder) in enumerate([("softmax", "toy/softmax"),
                                          ("1.5-relu", "default/1.5-relu")]):
        run = shutil.copytree(toy_runs[name], tmp_path / "runs" / folder)
        for ckpt in run.glob("*.pt"):
            os.utime(ckpt, (1_000_000 + age, 1_000_000 + age))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _used(stderr: str) -> bool:
    return "using runs/default/1.5-relu, the most recently trained run under runs/" in stderr


def test_the_design_card_commands_run_verbatim(trained_here):
    runner = CliRunner()
    result = runner.invoke(app, ["empty-check", "--split", "dev"])
    assert result.exit_code == 0, result.output
    assert _used(result.stderr) and "using" not in result.stdout
    summary = pd.read_csv(trained_here / "results" / "empty_check.csv")
    assert summary[["transform", "split", "sentences"]].values.tolist() == [["1.5-relu", "dev", 40]]
    result = runner.invoke(app, ["sparsity", "--plot"])
    assert result.exit_code == 0, result.output
    assert _used(result.stderr)
    frame = pd.read_csv(trained_here / "results" / "sparsity.csv")
    assert set(frame["split"]) == {"test"} and set(frame["transform"]) == {"1.5-relu"}
    assert (trained_here / "results" / "sparsity.png").stat().st_size > 1000


@pytest.mark.parametrize("args, written", [
    (["self-norm", "--max-sentences", "4", "--out", "sn.csv"], "sn.csv"),
    (["bench", "translate", "--beams", "1", "--max-sentences", "3", "--out", "bt.csv"], "bt.csv"),
    (["translate", "--split", "test", "--beam", "1", "--out", "t.txt"], "t.txt.json"),
])
def test_every_decoding_command_defaults_to_the_latest_run(trained_here, args, written):
    result = CliRunner().invoke(app, [*args, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert _used(result.stderr)
    assert "1.5-relu" in (trained_here / written).read_text()
    assert "softmax" not in (trained_here / written).read_text()


@pytest.mark.parametrize("command", [["empty-check"], ["sparsity"], ["self-norm"],
                                     ["translate", "--split", "test"], ["bench", "translate"]])
def test_without_a_run_each_command_says_to_train_first(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["arelu", *command])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "train one first" in err and "--checkpoint" in err
