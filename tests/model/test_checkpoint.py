"""Checkpoints: atomic writes, self-description, refusing a mismatched vocabulary/transform."""

import argparse
import os
import shutil

import pytest
import torch

from arelu_cli.model import checkpoint
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError
from arelu_cli.train.loop import train


@pytest.fixture(scope="module")
def trained(tiny_corpus, tiny_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "relu"
    train(tiny_config(tiny_corpus, transform="1.5-relu", tau=0.2, max_steps=3), out)
    return out


@pytest.fixture(scope="module")
def other_corpus(tmp_path_factory):
    """A second toy corpus with another vocabulary."""
    out = tmp_path_factory.mktemp("other") / "toy"
    prepare(PrepareRequest("toy", out, train_size=300, eval_size=10, toy_vocab=100, merges=50))
    return out


def test_save_is_atomic_and_leaves_no_temporary(tmp_path):
    path = checkpoint.save({"x": torch.ones(2)}, tmp_path / "a.pt")
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["a.pt"]


def test_checkpoints_describe_themselves(trained, tiny_corpus):
    last = checkpoint.load(trained)
    assert last["kind"] == "last" and last["step"] == 3 and last["transform"] == "1.5-relu"
    assert last["tau"] == 0.2 and last["config"]["train"]["max_steps"] == 3
    assert last["vocab"]["checksum"] == checkpoint.vocab_checksum(load_prepared(tiny_corpus))
    assert {"model", "optimizer", "rng", "state", "versions"} <= set(last)
    assert last["state"]["epoch"] == 0 and last["state"]["position"] == 3
    best = checkpoint.load(trained / checkpoint.BEST)
    assert best["kind"] == "best" and "optimizer" not in best
    model, config, transform = checkpoint.load_model(trained / checkpoint.BEST)
    assert transform.name == "1.5-relu" and transform.tau == 0.2 and not model.training


def test_a_mismatched_checkpoint_is_refused(trained, tiny_corpus, other_corpus):
    data = load_prepared(tiny_corpus)
    last = checkpoint.load(trained)
    with pytest.raises(UserError, match=r"trained with the transform 1.5-relu, but the recipe and options ask for softmax"):
        checkpoint.check_compatible(last, trained, data=data, transform="softmax", tau=None)
    with pytest.raises(UserError, match=r"trained with tau=0.2, not 0.3"):
        checkpoint.check_compatible(last, trained, data=data, transform="1.5-relu", tau=0.3)
    with pytest.raises(UserError, match=r"trained with another vocabulary"):
        checkpoint.check_compatible(last, trained, data=load_prepared(other_corpus),
                                    transform="1.5-relu", tau=None)


def test_resume_refuses_another_transform_or_vocabulary(trained, tiny_corpus, other_corpus,
                                                        tiny_config, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    with pytest.raises(UserError, match=r"the transform 1.5-relu, but the recipe and options ask for softmax"):
        train(tiny_config(tiny_corpus, transform="softmax", max_steps=4), run, resume=True)
    with pytest.raises(UserError, match=r"another vocabulary") as raised:
        train(tiny_config(other_corpus, transform="1.5-relu", max_steps=4), run, resume=True)
    assert "\n" not in str(raised.value)
    assert str(raised.value).endswith("use the prepared folder it was trained on, or start a "
                                      "new run with another --out")


def test_a_new_run_never_overwrites_an_old_one(trained, tiny_corpus, tiny_config):
    with pytest.raises(UserError, match=r"already holds a run; continue it with --resume"):
        train(tiny_config(tiny_corpus, transform="1.5-relu", max_steps=3), trained)


def test_unreadable_files(tmp_path):
    with pytest.raises(UserError, match="no checkpoint at"):
        checkpoint.load(tmp_path)
    (tmp_path / "last.pt").write_text("not a checkpoint")
    with pytest.raises(UserError, match="not a readable arelu checkpoint"):
        checkpoint.load(tmp_path)
    # torch's message for a pickle it will not load runs over lines of (unsafe) advice
    torch.save(argparse.Namespace(weights=1), tmp_path / "other.pt")
    with pytest.raises(UserError) as raised:
        checkpoint.load(tmp_path / "other.pt")
    assert str(raised.value) == (
        f"{tmp_path / 'other.pt'} is not a readable arelu checkpoint (UnpicklingError: Weights "
        "only load failed); give a last.pt or best.pt that arelu train wrote")


def test_save_follows_the_umask_and_keeps_a_replaced_files_mode(tmp_path):
    old = os.umask(0o027)
    try:
        path = checkpoint.save({"x": torch.ones(1)}, tmp_path / "a.pt")
        assert path.stat().st_mode & 0o777 == 0o640
        path.chmod(0o644)
        checkpoint.save({"x": torch.zeros(1)}, path)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.zeros(1))
