"""``python -m arelu_cli.cli``: the ``arelu`` command (e.g. under ``torchrun --module``)."""

from arelu_cli.cli import main

main()
