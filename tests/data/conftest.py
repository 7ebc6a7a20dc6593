"""A way to run the ``arelu`` CLI in-process, and a machine with no network."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from arelu_cli.cli import main


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run ``arelu ARGS...`` through its console entry point; returns exit code and output."""
    def run(*args: str | Path) -> Ran:
        monkeypatch.setattr(sys, "argv", ["arelu", *map(str, args)])
        with pytest.raises(SystemExit) as exited:
            main()
        captured = capsys.readouterr()
        return Ran(exited.value.code or 0, captured.out, captured.err)
    return run


@pytest.fixture
def offline(monkeypatch):
    """No network: every connection attempt fails at once."""
    def refuse(*args, **kwargs):
        raise OSError("network is unreachable")
    monkeypatch.setattr("arelu_cli.data.download.socket.create_connection", refuse)
