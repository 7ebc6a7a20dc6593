"""The conversion study on the one runner (:mod:`arelu_cli.studies.runner`): ``arelu study
recipes/ptb-convert.toml`` runs or continues it, ``arelu report DIR`` rebuilds its tables,
figure and ``REPORT.md`` from its folder. Its recipe has tables of its own, read and checked by
:func:`~arelu_cli.studies.convert.recipe.from_tables` (the study's schema)."""

from __future__ import annotations

from arelu_cli.studies.contract import Study
from arelu_cli.studies.convert import report
from arelu_cli.studies.convert.recipe import KIND, check, from_tables
from arelu_cli.studies.convert.stages import stages
from arelu_cli.studies.convert.tables import OUTPUTS, tables

STUDY = Study(KIND, check, stages, tables, report.claims, report.document, OUTPUTS,
              ("ratios.png",), schema=from_tables)
