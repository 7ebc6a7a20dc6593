"""Where each (transform, seed) cell of a results folder lives."""

from pathlib import Path

from arelu_cli.report import layout


def test_one_seed_keeps_the_flat_layout_several_nest_a_seed_folder():
    out = Path("r")
    assert layout.run_dir(out, "softmax", 1, (1,)) == Path("r/runs/softmax")
    assert layout.run_dir(out, "softmax", 2, (1, 2)) == Path("r/runs/softmax/seed-2")
    assert layout.sweep_dir(out, 0.3, 2, (1, 2)) == Path("r/tau-sweep/tau-0.3/seed-2")
    assert layout.translation(out, "softmax", 1, (1,), "test") == Path(
        "r/translations/softmax.test.txt")
    assert layout.translation(out, "softmax", 2, (1, 2), "test") == Path(
        "r/translations/softmax/seed-2.test.txt")
    assert layout.analysis_dir(out, 1, (1,)) == Path("r/analysis")
    assert layout.analysis_dir(out, 3, (1, 3)) == Path("r/analysis/seed-3")
    assert layout.cell_name("softmax/seed-2") == "softmax" == layout.cell_name("softmax")
    assert layout.cell_name("a/seed-x") == "a/seed-x"


def test_find_run_dirs_prefers_seed_runs_over_an_older_single_run(tmp_path):
    for folder in ("b", "a/seed-10", "a/seed-2", "a", "c/seed-1", "empty"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        if folder not in ("empty",):
            (tmp_path / folder / "log.csv").write_text("x\n")
    found = [p.relative_to(tmp_path).as_posix() for p in layout.find_run_dirs(tmp_path)]
    assert found == ["a/seed-2", "a/seed-10", "b", "c/seed-1"]
    assert layout.find_run_dirs(tmp_path / "absent") == []
