"""What the commands share: --max-tokens; the entry point's one-line stops."""

import pytest
from typer.testing import CliRunner

from arelu_cli.cli import app


@pytest.mark.parametrize("command", [["translate"], ["empty-check"], ["sparsity"], ["self-norm"],
                                     ["bench", "translate"]])
def test_decoding_commands_take_max_tokens(command):
    runner = CliRunner()
    shown = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert "--max-tokens" in shown.output
    bad = runner.invoke(app, [*command, "--max-tokens", "many"])
    assert bad.exit_code == 2 and "Invalid value for '--max-tokens'" in bad.output


def _main_raising(monkeypatch, error, argv):
    """Run the console entry point with the app replaced by one that raises ``error``."""
    import sys

    import arelu_cli.cli as cli

    def stopped():
        raise error

    monkeypatch.setattr(cli, "app", stopped)
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exited:
        cli.main()
    return exited.value.code


def test_a_study_stopped_in_a_training_run_says_to_run_the_study_again(monkeypatch, capsys,
                                                                        tmp_path):
    from arelu_cli.train.stop_signals import interrupted

    run = tmp_path / "runs" / "1.5-relu" / "lr-0.3"
    error = interrupted("stopped by SIGINT after step 638", 130, run, 638, 0)
    # arelu train keeps saying how to resume the run itself
    assert str(error) == (f"stopped by SIGINT after step 638: {run / 'last.pt'} keeps step 638; "
                          f"resume with: arelu train --resume {run}")
    code = _main_raising(monkeypatch, error, ["arelu", "study", "multi30k-study", "--set",
                                              "study.seeds=[1, 2]"])
    err = capsys.readouterr().err
    assert code == 130 and "Traceback" not in err and "arelu train" not in err
    assert " ".join(err.split()) == (
        f"stopped by SIGINT after step 638; {run / 'last.pt'} keeps step 638. What is finished "
        "is kept: run `arelu study multi30k-study --set 'study.seeds=[1, 2]'` again to continue")


def test_a_run_stopped_before_its_first_save_and_other_ranks(monkeypatch, capsys, tmp_path):
    from arelu_cli.train.stop_signals import interrupted

    first = interrupted("stopped by SIGTERM after step 3", 143, tmp_path, None, 0)
    assert _main_raising(monkeypatch, first, ["arelu", "reproduce", "toy"]) == 143
    assert f"no last.pt was saved yet in {tmp_path}" in " ".join(capsys.readouterr().err.split())
    other = interrupted("stopped by SIGTERM after step 3", 143, tmp_path, 2, 1)
    assert _main_raising(monkeypatch, other, ["arelu", "reproduce", "toy"]) == 143
    assert capsys.readouterr().err == ""  # rank 0 alone speaks under torchrun


def test_ctrl_c_before_a_command_has_started_is_one_line(monkeypatch, capsys):
    assert _main_raising(monkeypatch, KeyboardInterrupt(), ["arelu", "train"]) == 130
    err = capsys.readouterr().err
    assert err == "arelu: interrupted (Ctrl-C)\n"


def test_ctrl_c_while_the_command_line_loads_is_one_line():
    """SIGINT delivered while ``arelu_cli.cli`` imports its commands (torch and all, seconds
    on a slow machine): one line, exit 130, no import traceback."""
    import subprocess
    import sys

    code = ("import builtins, os, signal\n"
            "real = builtins.__import__\n"
            "def hooked(name, *args, **kwargs):\n"
            "    if name == 'arelu_cli.train':\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(name, *args, **kwargs)\n"
            "builtins.__import__ = hooked\n"
            "import arelu_cli.cli\n"
            "print('imported')\n")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 130 and ran.stdout == ""
    assert ran.stderr == "arelu: interrupted (Ctrl-C) while starting; nothing was written\n"


def test_help_lists_at_most_14_commands_each_in_one_line():
    """Besides the bench and human-eval groups; a command's help is one line, the card's
    commands among them."""
    import click
    import typer.main

    group = typer.main.get_command(app)
    names = [n for n in group.list_commands(click.Context(group)) if n not in ("bench",
                                                                                 "human-eval")]
    assert len(names) <= 14
    assert {"prepare", "estimate-tau", "train", "translate", "score", "empty-check",
            "sparsity", "reproduce", "study", "report"} <= set(names)
    for name in names:
        short = (group.get_command(click.Context(group), name).help or "").split("\n\n")[0]
        assert "\n" not in short.strip(), name
