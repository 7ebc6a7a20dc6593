"""The shared vocabulary of ``arelu reproduce``: a grid of runs, its steps and make's rule.

:mod:`arelu_cli.pipeline.reproduce` (prepare, tau, training) and
:mod:`arelu_cli.pipeline.reproduce_steps` (the analyses after training) both build
:class:`Step` s over one :class:`Grid`; neither imports the other for these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from arelu_cli.config import Config
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import check_ours, csv_starting_with, markdown_ours

TEST, DEV = "test", "dev"


@dataclass(frozen=True)
class Step:
    name: str
    done: Callable[[], bool]
    run: Callable[[], None]


@dataclass(frozen=True)
class Grid:
    """One grid of ``arelu reproduce``: its checked config, results folder, decoding device
    and recipe name; where each (transform, seed) cell lives (the layout
    :mod:`arelu_cli.report.layout` describes and reads back)."""

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


def results_folder(out: Path) -> Path:
    """Make the results folder ``out`` of a pipeline, or refuse in one line what cannot be
    one (a file, a place that cannot be written)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a results folder; give --out a folder (new, or "
                        "the one an earlier run of this command wrote, to continue it)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot make the results folder {out} ({err.strerror or err}); give "
                        "--out a folder you can write") from None
    return out


def check_outputs(out: Path, tables: Mapping[str, str]) -> None:
    """Refuse, before any work, a file in ``out`` of the name of an output of the pipeline
    that it did not write: each CSV of ``tables`` (``{name: its first column}``) and
    ``REPORT.md`` (:func:`~arelu_cli.util.ownership.markdown_ours`), so that hours of training
    never end on a user's file that cannot be replaced."""
    advice = "move that file away or give another --out"
    for name, first in tables.items():
        check_ours(out / name, csv_starting_with(first), advice=advice)
    check_ours(out / "REPORT.md", markdown_ours, advice=advice)
