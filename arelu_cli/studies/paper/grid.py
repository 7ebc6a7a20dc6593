"""The paper's grid of runs: where each (transform, seed) cell lives in its results folder.

:mod:`arelu_cli.studies.paper.study` (prepare, tau, training) and
:mod:`arelu_cli.studies.paper.steps` (the analyses after training) both build
:class:`~arelu_cli.studies.core.Task` s over one :class:`Grid`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arelu_cli.config import Config
from arelu_cli.studies.translation import TEST


@dataclass(frozen=True)
class Grid:
    """One grid of ``arelu reproduce``: its checked config, results folder, decoding device
    and recipe name; where each (transform, seed) cell lives (the layout
    :mod:`arelu_cli.studies.paper.layout` describes and reads back)."""

    config: Config
    out: Path
    device: str = "auto"
    recipe: str = ""

    @property
    def seeds(self) -> tuple[int, ...]:
        """The training seeds: ``[reproduce] seeds``, else ``[train] seed`` alone."""
        return self.config.reproduce.seeds or (self.config.train.seed,)

    def cell(self, name: str, seed: int) -> str:
        """``name`` in a single-seed grid, ``name/seed-S`` when the grid has several seeds."""
        return name if len(self.seeds) <= 1 else f"{name}/seed-{seed}"

    def run_folder(self, name: str, seed: int) -> Path:
        return self.out / "runs" / self.cell(name, seed)

    def sweep_folder(self, tau: float, seed: int) -> Path:
        return self.out / "tau-sweep" / self.cell(f"tau-{tau:g}", seed)

    def translation(self, name: str, seed: int) -> Path:
        return self.out / "translations" / f"{self.cell(name, seed)}.{TEST}.txt"

    def analysis(self, seed: int) -> Path:
        return self.out / "analysis" / ("" if len(self.seeds) <= 1 else f"seed-{seed}")

    def label(self, name: str, seed: int) -> str:
        """A step's subject: ``softmax``, or ``softmax seed 2`` in a grid of several seeds."""
        return name if len(self.seeds) <= 1 else f"{name} seed {seed}"
