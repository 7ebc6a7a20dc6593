"""TensorBoard events of training runs (arelu_cli.train.events), read back with TensorBoard's
own reader: the scalars of every log.csv row, for translation and language-model runs; none
with ``[train] tensorboard = false``; a resumed run's events hide what a killed run wrote
after its last checkpoint."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from arelu_cli.train.events import FOLDER, TAGS
from arelu_cli.train.loop import train

pytest.importorskip("tensorboard")


def _scalars(run) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / FOLDER))
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)}
            for tag in events.Tags()["scalars"]}


def _same_as_the_log(run, vocab: int) -> dict[str, dict[int, float]]:
    """Every numeric cell of log.csv is its tag's value at the row's step, and nothing else
    is there; ``zero_share`` is ``1 - nnz / V``."""
    scalars = _scalars(run)
    log = pd.read_csv(run / "log.csv")
    expected: dict[str, dict[int, float]] = {}
    for _, row in log.iterrows():
        cells = {k: row[k] for k in TAGS if k in row and not pd.isna(row[k])}
        if "nnz" in cells:
            cells["zero_share"] = 1 - cells["nnz"] / vocab
        for key, value in cells.items():
            expected.setdefault(TAGS[key], {})[int(row["step"])] = float(value)
    assert set(scalars) == set(expected)
    for tag, values in expected.items():
        assert scalars[tag].keys() == values.keys(), tag
        for step, value in values.items():
            assert math.isclose(scalars[tag][step], value, rel_tol=1e-6, abs_tol=1e-7), tag
    return scalars


def test_translation_runs_log_their_scalars(toy_runs):
    from arelu_cli.data.prepared import load_prepared

    for name, run in toy_runs.items():
        vocab = load_prepared(pd.read_json(run / "config.json", typ="series")["data"]["path"]
                              ).tgt_vocab_size
        scalars = _same_as_the_log(run, vocab)
        assert {"loss/train", "loss/dev", "train/lr", "train/tokens_per_s", "dev/bleu",
                "output/support_size", "output/sum_p", "output/zero_share"} <= set(scalars)
        assert ("output/tau" in scalars) == (name != "softmax")


def test_language_model_runs_log_their_scalars(lm_runs):
    from arelu_cli.data.prepared import load_prepared

    for name, run in lm_runs.items():
        vocab = load_prepared(pd.read_json(run / "config.json", typ="series")["data"]["path"]
                              ).tgt_vocab_size
        scalars = _same_as_the_log(run, vocab)
        assert "dev/bleu" not in scalars and "loss/dev" in scalars
        assert ("dev/perplexity" in scalars) == (name == "softmax")


def test_off_writes_none_and_a_resumed_run_hides_what_a_killed_run_wrote(
        tiny_corpus, tiny_config, tmp_path, one_thread):
    off = tiny_config(tiny_corpus, max_steps=2, log_every=1, tensorboard=False)
    train(off, tmp_path / "off")
    assert not (tmp_path / "off" / FOLDER).exists() and (tmp_path / "off" / "log.csv").exists()

    run = tmp_path / "run"
    config = lambda steps: tiny_config(tiny_corpus, max_steps=steps, log_every=1,  # noqa: E731
                                       save_every=2, valid_every=100)
    train(config(2), run)
    saved = (run / "last.pt").read_bytes()
    train(config(3), run, resume=True)
    (run / "last.pt").write_bytes(saved)  # as if killed after logging step 3, before its save
    train(config(4), run, resume=True)  # from step 2: steps 3 and 4 logged (again)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / FOLDER))
    events.Reload()
    assert [e.step for e in events.Scalars("loss/train")] == [1, 2, 3, 4]  # step 3 once
    train(config(4), tmp_path / "straight")
    assert _scalars(run)["loss/train"] == pytest.approx(
        _scalars(tmp_path / "straight")["loss/train"])
