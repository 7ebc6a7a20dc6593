"""Where ``arelu reproduce`` keeps each (transform, seed) cell of its grid."""

import dataclasses
from pathlib import Path

import pytest

from arelu_cli.config import load_config, resolve_recipe
from arelu_cli.studies.paper.grid import Grid


def test_one_seed_keeps_the_flat_layout_several_nest_a_seed_folder():
    config = load_config(resolve_recipe("toy"))
    one, two = (Grid(dataclasses.replace(config, reproduce=dataclasses.replace(
        config.reproduce, seeds=seeds)), Path("r")) for seeds in ((1,), (1, 2)))
    assert one.run_folder("softmax", 1) == Path("r/runs/softmax")
    assert two.run_folder("softmax", 2) == Path("r/runs/softmax/seed-2")
    assert one.sweep_folder(0.3, 1) == Path("r/tau-sweep/tau-0.3")
    assert two.sweep_folder(0.3, 2) == Path("r/tau-sweep/tau-0.3/seed-2")
    assert one.translation("softmax", 1) == Path("r/translations/softmax.test.txt")
    assert two.translation("softmax", 2) == Path("r/translations/softmax/seed-2.test.txt")
    assert one.analysis(1) == Path("r/analysis")
    assert two.analysis(3) == Path("r/analysis/seed-3")
    assert (one.label("softmax", 1), two.label("softmax", 2)) == ("softmax", "softmax seed 2")


def test_a_bad_jobs_setting_is_refused_before_any_work():
    from arelu_cli.config import load_config
    from arelu_cli.studies.paper import study
    from arelu_cli.util.errors import UserError

    with pytest.raises(UserError, match=r"\[reproduce\] jobs must be \"auto\" or a number"):
        study.check(load_config(None, {("reproduce", "jobs"): 0}))
    study.check(load_config(None, {("reproduce", "jobs"): 2}))
