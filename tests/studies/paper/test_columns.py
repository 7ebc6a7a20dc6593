"""The CSV catalog: documented columns, strict writing and reading."""

import pandas as pd
import pytest

from arelu_cli.analysis import tau_table
from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper import columns, reproduction_report
from arelu_cli.studies.paper.columns import CATALOG, COLUMNS, columns_of, read_csv
from arelu_cli.util.results import write_rows

FIXED_NAMES = {"table1_bleu.csv", "table2_empty.csv", "table3_tau.csv", "training_time.csv",
               "fig_alpha_relu_curves.csv", "fig_training_dynamics.csv", "fig_inference_time.csv",
               "fig_sparsity.csv", "fig_tau_norm_evolution.csv", "fig_tau_sweep.csv",
               "fig_self_norm.csv", "translation_examples.csv", "table_human_eval.csv",
               "human_eval_kappa.csv", "table1_significance.csv", "seed_summary.csv"}


def test_catalog_holds_the_fixed_names_each_documented():
    assert set(CATALOG) == FIXED_NAMES
    for name, spec in CATALOG.items():
        assert spec.paper and all(spec.columns.values()), name
        assert len(set(COLUMNS[name])) == len(COLUMNS[name])


def test_docstrings_and_markdown_list_every_column():
    for name, cols in COLUMNS.items():
        for doc in (columns.__doc__, reproduction_report.__doc__, columns.catalog_markdown()):
            assert f"### `{name}`" in doc
            assert all(f"- `{col}`:" in doc for col in cols)


def test_table3_columns_are_those_of_estimate_tau():
    (row,) = tau_table.tau_rows("analytic", [1000], [1.5])
    assert tuple(row) == COLUMNS["table3_tau.csv"]


def test_catalog_columns_order_rows_and_refuse_strays(tmp_path):
    name = "table_human_eval.csv"
    row = {c: 1 for c in reversed(COLUMNS[name])}
    frame = write_rows([row], tmp_path / name, columns_of(name))
    assert tuple(frame.columns) == COLUMNS[name]
    assert tuple(pd.read_csv(tmp_path / name).columns) == COLUMNS[name]
    with pytest.raises(ValueError, match="differ"):
        write_rows([row | {"extra": 1}], tmp_path / name, columns_of(name))
    with pytest.raises(UserError, match="unknown results CSV"):
        columns_of("table9.csv")


def test_empty_rows_still_write_the_header(tmp_path):
    write_rows([], tmp_path / "human_eval_kappa.csv", COLUMNS["human_eval_kappa.csv"])
    assert tuple(read_csv(tmp_path, "human_eval_kappa.csv").columns) == COLUMNS["human_eval_kappa.csv"]


def test_read_csv_missing_is_none_and_wrong_columns_an_error(tmp_path):
    assert read_csv(tmp_path, "table1_bleu.csv") is None
    pd.DataFrame({"bleu": [1.0]}).to_csv(tmp_path / "table1_bleu.csv", index=False)
    with pytest.raises(UserError, match="expected"):
        read_csv(tmp_path, "table1_bleu.csv")
