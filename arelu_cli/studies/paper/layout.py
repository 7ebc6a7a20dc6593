"""Where a results folder keeps each (transform, seed) cell of the reproduction grid.

A grid trained with one seed keeps the layout it always had, so committed single-seed
results stay valid: ``runs/TRANSFORM/``, ``tau-sweep/tau-T/``,
``translations/TRANSFORM.test.txt`` and the raw analysis CSVs in ``analysis/``. A grid
trained with several seeds nests each seed under what it repeats:
``runs/TRANSFORM/seed-S/``, ``tau-sweep/tau-T/seed-S/``,
``translations/TRANSFORM/seed-S.test.txt``, and ``analysis/seed-S/`` (an analysis CSV covers
every transform of one seed, as the matching single command writes it). The seed of a row
is also in its ``seed`` column and its signature, so a CSV never depends on the layout.
"""

from __future__ import annotations

import re
from pathlib import Path

from arelu_cli.train.run_dir import is_run_folder

SEED_DIR = re.compile(r"^seed-(\d+)$")


def cell_name(run: str) -> str:
    """The run name without its seed folder: ``softmax/seed-2`` -> ``softmax``."""
    head, _, last = str(run).rpartition("/")
    return head if head and SEED_DIR.match(last) else str(run)


def _seed_runs(folder: Path) -> list[Path]:
    seeds = [p for p in folder.iterdir() if SEED_DIR.match(p.name) and is_run_folder(p)]
    return sorted(seeds, key=lambda p: int(SEED_DIR.match(p.name).group(1)))


def find_run_dirs(parent: str | Path) -> list[Path]:
    """Run folders (holding a ``log.csv``) directly under ``parent``, or the ``seed-S`` run
    folders of one of them, sorted by name and seed. A folder with seed runs is the cell of a
    grid of several seeds: a run of its own beside them is from an earlier single-seed grid
    of the same folder, and is left out."""
    parent = Path(parent)
    if not parent.is_dir():
        return []
    found = []
    for child in sorted(p for p in parent.iterdir() if p.is_dir()):
        seeds = _seed_runs(child)
        found += seeds or ([child] if is_run_folder(child) else [])
    return found
