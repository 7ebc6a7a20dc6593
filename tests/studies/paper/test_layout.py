"""Where each (transform, seed) cell of a results folder lives."""

from arelu_cli.studies.paper import layout


def test_cell_name_drops_the_seed_folder():
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
