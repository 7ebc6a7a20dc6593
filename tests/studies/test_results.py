"""The committed results: every folder with a report is a study's folder (its record names
the study), and every CSV row names files by paths relative to its results folder."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from arelu_cli.studies.contract import RECORD
from arelu_cli.studies.runner import read, studies

RESULTS = Path(__file__).resolve().parents[2] / "results"
ABSOLUTE = re.compile(r"(?:^|[\s|;:=,\"'(])(/[^\s/|;,]+/)")
"""A path from the root of a file system: a slash that starts a cell or a field, followed
by a name and another slash (``1 / 2`` and ``a/b`` are not)."""


@pytest.mark.parametrize("folder", sorted(p.parent for p in RESULTS.glob("*/REPORT.md")),
                         ids=lambda p: p.name)
def test_a_folder_with_a_report_is_a_studys_folder(folder):
    study, config = read(folder)
    assert study.kind in studies() and config.study.kind == study.kind


def test_no_committed_csv_names_a_file_by_an_absolute_path():
    found = []
    for path in sorted(RESULTS.rglob("*.csv")):
        with open(path, encoding="utf-8", newline="") as handle:
            for i, row in enumerate(csv.reader(handle)):
                hits = [m.group(1) for cell in row for m in ABSOLUTE.finditer(cell)]
                if hits:
                    found.append(f"{path.relative_to(RESULTS)}:{i + 1}: {hits[0]}")
    assert found == []


def test_the_pattern_finds_absolute_paths_only():
    for text in ("/work/runs/x.pt", "checkpoint:/tmp/a/b|x", "a,/home/u/f.csv"):
        assert ABSOLUTE.search(text), text
    for text in ("seeds/softmax/seed-1/steps/step-2000.pt", "1 / 2 / 3", "../ptb-lm/a.pt",
                 "transform:softmax|data:ptb"):
        assert not ABSOLUTE.search(text), text


def test_every_study_folder_is_committed_with_its_record():
    assert {p.parent.name for p in RESULTS.glob(f"*/{RECORD}")} >= {
        "toy", "multi30k", "multi30k-study", "toy-attention", "multi30k-attention", "ptb-lm",
        "tinyshakespeare-lm"}
