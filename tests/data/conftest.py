"""A machine with no network (the in-process ``cli`` fixture is the suite's, tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def offline(monkeypatch):
    """No network: every connection attempt fails at once."""
    def refuse(*args, **kwargs):
        raise OSError("network is unreachable")
    monkeypatch.setattr("arelu_cli.data.download.socket.create_connection", refuse)
