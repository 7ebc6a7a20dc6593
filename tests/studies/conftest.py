"""What the studies' tests share: running a study through the one runner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.console import Console

QUIET = Console(quiet=True)


@pytest.fixture
def run_study():
    """``run_study(config, out, train, kind)``: the runner's :func:`run` of the study
    ``kind`` (default: the config's) with the trainer ``train`` (default: the real one)."""
    from arelu_cli.studies.contract import Context
    from arelu_cli.studies.core import trainer
    from arelu_cli.studies.runner import run

    def go(config, out: Path, train=None, kind: str | None = None, recipe: str = "test",
           allow_data_change: bool = False) -> Path:
        config = dataclasses.replace(config, study=dataclasses.replace(
            config.study, kind=kind or config.study.kind))
        train = train or trainer(recipe, QUIET, allow_data_change)
        return run(config, Path(out), Context(QUIET, train, recipe))
    return go
