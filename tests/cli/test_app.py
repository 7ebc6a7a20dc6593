"""What the commands share: --max-tokens and its hidden old name --batch-tokens."""

import pytest
from typer.testing import CliRunner

from arelu_cli.cli import app
from arelu_cli.cli.app import max_tokens
from arelu_cli.errors import UserError


def test_the_old_option_name_is_an_alias():
    assert max_tokens(None, None) is None
    assert max_tokens(300, None) == max_tokens(None, 300) == max_tokens(300, 300) == 300
    with pytest.raises(UserError, match="--batch-tokens is the old name of --max-tokens"):
        max_tokens(300, 400)


@pytest.mark.parametrize("command", [["translate"], ["empty-check"], ["sparsity"], ["self-norm"],
                                     ["bench", "translate"]])
def test_decoding_commands_show_max_tokens_and_accept_batch_tokens(command):
    runner = CliRunner()
    shown = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert "--max-tokens" in shown.output and "--batch-tokens" not in shown.output
    bad = runner.invoke(app, [*command, "--batch-tokens", "many"])
    assert bad.exit_code == 2 and "No such option" not in bad.output
