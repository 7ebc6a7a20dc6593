"""Resuming a run (:mod:`arelu_cli.train.state`): only on the version of the prepared
folder it was trained on, unless the change is allowed (and then recorded); a checkpoint's
[model] is read through the schema (keys added since take their defaults), and another [model] is
refused."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from arelu_cli.data.prepared import data_fingerprint, read_meta, write_meta
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.loop import train

pytestmark = pytest.mark.usefixtures("one_thread")


def change_data(folder) -> str:
    """Another version of the prepared folder ``folder`` (one dev reference edited, its
    meta.json rewritten as ``prepare`` writes it); returns its new data fingerprint."""
    meta = read_meta(folder)
    reference = folder / f"dev.{meta['tgt_lang']}"
    lines = reference.read_text(encoding="utf-8").split("\n")
    lines[0] += " again"
    reference.write_text("\n".join(lines), encoding="utf-8")
    write_meta(folder, {k: v for k, v in meta.items() if k != "checksums"})
    return data_fingerprint(read_meta(folder))


def _resolved(run) -> dict:
    return json.loads((run / "config.json").read_text(encoding="utf-8"))["resolved"]


def test_resume_checks_the_data_fingerprint(tiny_corpus, tiny_config, tmp_path, capsys):
    data, run = tmp_path / "data", tmp_path / "run"
    shutil.copytree(tiny_corpus, data)
    config = lambda steps: tiny_config(data, max_steps=steps, save_every=1,  # noqa: E731
                                       valid_every=100)
    train(config(2), run)
    before = _resolved(run)["data_fingerprint"]
    assert before == data_fingerprint(read_meta(data))
    train(config(3), run, resume=True)  # the same data: resumed without a word
    assert checkpoint.load(run)["step"] == 3 and capsys.readouterr().err == ""

    after = change_data(data)
    with pytest.raises(UserError) as refused:
        train(config(4), run, resume=True)
    message = str(refused.value)
    assert f"data fingerprint {before[:12]}, now {after[:12]}" in message and "\n" not in message
    assert "train into a new --out" in message and "--allow-data-change" in message
    assert checkpoint.load(run)["step"] == 3 and _resolved(run)["data_fingerprint"] == before

    train(config(4), run, resume=True, allow_data_change=True)
    resolved = _resolved(run)
    assert checkpoint.load(run)["step"] == 4 and resolved["data_fingerprint"] == after
    assert resolved["data_changes"] == [{"step": 3, "from": before, "to": after}]
    err = capsys.readouterr().err.strip()
    assert "goes on from step 3 on changed data" in err and len(err.splitlines()) == 1
    train(config(5), run, resume=True)  # the recorded version now: resumed without a word
    assert capsys.readouterr().err == ""



def _edit_last(run, edit) -> None:
    ckpt = torch.load(run / checkpoint.LAST, weights_only=False)
    edit(ckpt["config"]["model"])
    torch.save(ckpt, run / checkpoint.LAST)


def test_resume_reads_the_checkpoints_model_through_the_schema(tiny_corpus, tiny_config,
                                                               tmp_path):
    """A [model] key added since a checkpoint was written takes its default there, so the
    run resumes; a [model] that really differs is refused in one line."""
    run = tmp_path / "run"
    config = lambda steps: tiny_config(tiny_corpus, max_steps=steps, save_every=1,  # noqa: E731
                                       valid_every=100)
    train(config(2), run)
    _edit_last(run, lambda model: model.pop("attention_eps"))  # written before the key
    train(config(3), run, resume=True)
    assert checkpoint.load_model(run / checkpoint.LAST)[1].model == config(3).model
    _edit_last(run, lambda model: model.update(d_ff=model["d_ff"] * 2, d_model=16))
    with pytest.raises(UserError, match=r"has another \[model\] than the recipe \(d_model 16 "
                       r"there, 32 now, d_ff 128 there, 64 now\); resume with the \[model\] it "
                       r"was trained with") as refused:
        train(config(4), run, resume=True)
    assert "\n" not in str(refused.value) and checkpoint.load(run)["step"] == 3


def test_a_run_resumed_with_other_settings_records_them_and_the_step(tiny_corpus, tiny_config,
                                                                     tmp_path, capsys):
    """``train --resume RUN --set train.lr=2.0 --max-steps 8`` goes on with
    lr 2.0 for 8 steps; its config.json says so, and from which step."""
    run = tmp_path / "run"
    config = lambda **t: tiny_config(tiny_corpus, save_every=1, valid_every=100,  # noqa: E731
                                     **({"max_steps": 3, "lr": 0.5} | t))
    train(config(), run)
    capsys.readouterr()
    train(config(lr=2.0, label_smoothing=0.1, max_steps=5), run, resume=True)
    record = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert record["train"]["lr"] == 2.0 and record["train"]["max_steps"] == 5
    assert record["train"]["label_smoothing"] == 0.1
    assert record["resolved"]["setting_changes"] == [
        {"step": 3, "setting": "train.lr", "from": 0.5, "to": 2.0},
        {"step": 3, "setting": "train.max_steps", "from": 3, "to": 5},
        {"step": 3, "setting": "train.label_smoothing", "from": 0.0, "to": 0.1}]
    assert "data_fingerprint" in record["resolved"]  # the rest of the record kept
    err = capsys.readouterr().err.strip()
    assert "goes on from step 3 with changed settings (train.lr 0.5 -> 2.0" in err
    assert len(err.splitlines()) == 1
    assert checkpoint.load(run)["config"]["train"]["lr"] == 2.0
    # a longer budget alone is recorded without a word
    train(config(lr=2.0, label_smoothing=0.1, max_steps=6), run, resume=True)
    assert capsys.readouterr().err == ""
    changes = json.loads((run / "config.json").read_text())["resolved"]["setting_changes"]
    assert changes[-1] == {"step": 5, "setting": "train.max_steps", "from": 5, "to": 6}


def test_resuming_with_fewer_steps_than_done_is_refused(tiny_corpus, tiny_config, tmp_path):
    run = tmp_path / "run"
    train(tiny_config(tiny_corpus, max_steps=3, save_every=3, valid_every=100), run)
    with pytest.raises(UserError, match=r"is at step 3 already, past the max_steps of 2 asked "
                                        r"for now; give a larger --max-steps"):
        train(tiny_config(tiny_corpus, max_steps=2, save_every=3, valid_every=100), run,
              resume=True)
