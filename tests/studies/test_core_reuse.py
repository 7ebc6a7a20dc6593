"""The one rule by which a study reuses a run (:func:`arelu_cli.studies.core.reuse`):
only with the settings it was trained with; a larger step budget continues it from its
``last.pt``; any other difference is one line naming the setting."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from arelu_cli.config import load_config
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.run_dir import SUMMARY
from arelu_cli.studies.core import LONGER, NEW, SAME, reuse

BASE = load_config(None, {("train", "max_steps"): 6, ("train", "lr"): 0.5,
                          ("train", "device"): "cpu"})


@pytest.fixture(autouse=True)
def cpu_without_bf16(monkeypatch):
    """This CPU has no native bf16 (as an AVX2-only machine): ``auto`` means fp32."""
    from arelu_cli.train import precision

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)


def _with(config, section: str, **values):
    return dataclasses.replace(config, **{section: dataclasses.replace(
        getattr(config, section), **values)})


def _run(folder: Path, config=BASE, last: bool = True, **resolved) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**config.to_dict(), "resolved": resolved}))
    (folder / SUMMARY).write_text("{}")
    if last:
        (folder / checkpoint.LAST).write_bytes(b"")
    return folder


def test_nothing_there_is_new_and_the_same_settings_are_reused(tmp_path):
    assert reuse(tmp_path / "none", BASE) == NEW
    run = _run(tmp_path / "run")
    assert reuse(run, BASE) == SAME
    # where and how fast it runs, what it logs: not what it trains
    moved = _with(_with(BASE, "train", device="cpu", threads=1, log_every=7, save_every=3,
                        compile=True), "data", path="elsewhere")
    assert reuse(run, moved) == SAME
    assert reuse(run, _with(BASE, "decode", beam=9)) == SAME  # decoding is not training


@pytest.mark.parametrize("section, key, value", [
    ("train", "lr", 2.0), ("train", "label_smoothing", 0.1), ("train", "warmup", 7),
    ("model", "dropout", 0.0), ("model", "attention", "sparsemax"), ("data", "max_tokens", 99),
    ("train", "transform", "1.5-relu")])
def test_another_setting_is_refused_in_one_line_naming_it(tmp_path, section, key, value):
    run = _run(tmp_path / "run")
    old = getattr(getattr(BASE, section), key)
    with pytest.raises(UserError) as refused:
        reuse(run, _with(BASE, section, **{key: value}))
    message = str(refused.value)
    assert f"was trained with {section}.{key} = {json.dumps(old)}" in message
    assert f"now asks for {json.dumps(value)}" in message and "\n" not in message
    assert f"delete {run}" in message


def test_two_settings_are_both_named(tmp_path):
    run = _run(tmp_path / "run")
    with pytest.raises(UserError, match=r"model\.dropout = 0\.3.*\(and 1 more: train\.lr\)"):
        reuse(run, _with(_with(BASE, "train", lr=1.0), "model", dropout=0.0))


def test_a_larger_step_budget_continues_a_run_that_can_be_continued(tmp_path):
    longer = _with(BASE, "train", max_steps=12)
    assert reuse(_run(tmp_path / "a"), longer) == LONGER
    with pytest.raises(UserError, match=r"its last\.pt is gone, so it cannot be continued"):
        reuse(_run(tmp_path / "b", last=False), longer)
    with pytest.raises(UserError, match=r"train\.max_steps = 6, more than the 3"):
        reuse(_run(tmp_path / "c"), _with(BASE, "train", max_steps=3))


def test_a_run_resumed_with_changed_settings_is_described_by_none(tmp_path):
    changes = [{"step": 3, "setting": "train.lr", "from": 1.0, "to": 0.5}]
    run = _run(tmp_path / "run", setting_changes=changes)
    with pytest.raises(UserError, match=r"resumed with train\.lr changed from 1\.0 to 0\.5"):
        reuse(run, BASE)
    # a budget raised on the way (a convergence run) is no mixture of settings
    steps = [{"step": 6, "setting": "train.max_steps", "from": 3, "to": 6}]
    assert reuse(_run(tmp_path / "steps", setting_changes=steps), BASE) == SAME


def test_a_run_without_a_readable_record_is_refused(tmp_path):
    run = _run(tmp_path / "run")
    (run / "config.json").write_text('{"train": ')
    with pytest.raises(UserError, match=r"config\.json is missing or unreadable"):
        reuse(run, BASE)
    (run / "config.json").write_text(json.dumps({"train": {"bogus": 1}, "resolved": {}}))
    with pytest.raises(UserError, match=r"does not hold a configuration this version reads"):
        reuse(run, BASE)


def test_precision_is_compared_as_what_the_run_trains_in(tmp_path, monkeypatch):
    """A run recorded "fp32" serves a recipe saying "auto" where auto means fp32 (a recipe
    moved to auto changes nothing there) and is refused where auto means bf16."""
    from arelu_cli.train import precision

    run = _run(tmp_path / "run", _with(BASE, "train", precision="fp32"))
    assert reuse(run, BASE) == SAME
    with pytest.raises(UserError, match=r'train\.precision = "fp32", but the plan now asks '
                                        r'for "bf16"'):
        reuse(run, _with(BASE, "train", precision="bf16"))
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    with pytest.raises(UserError, match=r"train\.precision"):
        reuse(run, BASE)
    # what the run recorded it resolved to wins over what auto means here
    assert reuse(_run(tmp_path / "bf16", BASE, precision="bf16"), BASE) == SAME
