"""Values over seeds: mean ± std (per-seed values), one seed printed as before, the summary."""

import pandas as pd
import pytest

from arelu_cli.studies import seeds
from arelu_cli.studies.paper.build import seed_summary_table
from arelu_cli.studies.paper.columns import COLUMNS, read_csv


def test_spread_orders_by_seed_and_drops_missing_values():
    frame = pd.DataFrame({"seed": [3, 1, 2, 4], "bleu": [30.0, 10.0, 20.0, None]})
    s = seeds.spread(frame, "bleu")
    assert s.seeds == (1, 2, 3) and s.values == (10.0, 20.0, 30.0)
    assert (s.n, s.mean, s.std) == (3, 20.0, pytest.approx(10.0))  # sample std, ddof = 1


@pytest.mark.parametrize("values, text", [
    ([], "-"), ([34.25], "34.25"), ([34.0, 35.0, 36.0], "35.00 ± 1.00 (34.00 / 35.00 / 36.00)"),
    ([0.2, 0.2], "0.20 (all 2 seeds)")])
def test_show(values, text):
    frame = pd.DataFrame({"seed": list(range(1, len(values) + 1)), "x": values}, dtype=float)
    assert seeds.show(seeds.spread(frame, "x")) == text


def test_one_seed_has_no_std_and_no_note():
    frame = pd.DataFrame({"seed": [1], "x": [2.0]})
    assert seeds.spread(frame, "x").std is None and seeds.seeds_note(frame) == []
    assert seeds.n_seeds(pd.DataFrame({"x": [1.0, 2.0]})) == 1


def test_summary_has_one_row_per_cell_and_metric(seeded_csvs):
    rows = seed_summary_table(seeded_csvs).rows
    assert all(set(r) == set(COLUMNS["seed_summary.csv"]) for r in rows)
    by = {(r["csv"], r["transform"], r["setting"], r["metric"]): r for r in rows}
    bleu = by["table1_bleu.csv", "1.5-relu", "", "bleu"]
    assert (bleu["n"], bleu["values"], bleu["seeds"]) == (3, "37 / 37.1 / 37.2", "1 / 2 / 3")
    assert bleu["mean"] == pytest.approx(37.1) and bleu["std"] == pytest.approx(0.1)
    assert by["fig_inference_time.csv", "1.5-relu", "beam=1", "seconds"]["values"] == \
        "10.5 / 10.6 / 10.7"
    assert by["fig_tau_sweep.csv", "1.5-relu", "tau=0.1", "final_bleu"]["n"] == 3
    assert by["fig_sparsity.csv", "1.5-relu", "split=test", "mean_zero_fraction"]["n"] == 3
    assert by["training_time.csv", "softmax", "", "best_bleu"]["values"] == "4 / 4.4 / 4.8"
    written = read_csv(seeded_csvs, "seed_summary.csv")
    assert len(written) == len(rows)


def test_summary_of_one_seed_has_no_std(all_csvs):
    rows = seed_summary_table(all_csvs).rows
    assert rows and all(r["n"] == 1 and r["std"] is None for r in rows)
