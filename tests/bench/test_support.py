"""arelu_cli.bench.support: the rows are the model's own, the support is the exact
entmax's (checked against bisection in float64), every timed partial sort gives the full
sort's loss, and careless options are one-line errors. Times are never asserted beyond being
positive."""

import dataclasses

import pandas as pd
import pytest
import torch
from entmax import entmax_bisect

from arelu_cli.bench import support as S
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.decode.translate import open_checkpoint, resolve_checkpoint
from arelu_cli.registry import get_transform


@pytest.fixture(scope="module")
def lm_plan(lm_runs):
    return S.SupportPlan(checkpoint=lm_runs["1.5-entmax"], rows=48, ks=(2, 8, 100000),
                         repeats=2)


@pytest.fixture(scope="module")
def lm_rows(lm_plan, one_thread_module):
    return S.measure(lm_plan)


@pytest.fixture(scope="module")
def one_thread_module():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_rows_are_the_models_teacher_forced_logits(lm_runs):
    decoder = open_checkpoint(lm_runs["1.5-entmax"], None, "cpu", task="lm")
    logits, target = S.model_rows(decoder, "train", 40, seed=3, dropout=False)
    assert logits.shape == (40, decoder.data.vocab_size) and target.shape == (40,)
    batch = next(S.batches(decoder, "train", 40, seed=3))
    keep = batch.tgt_out != decoder.data.pad_id
    with torch.no_grad():
        again = decoder.model(batch.tgt_in)[keep][:40]
    torch.testing.assert_close(logits, again)
    assert torch.equal(target, batch.tgt_out[keep][:40])
    other, _ = S.model_rows(decoder, "train", 40, seed=4, dropout=False)
    assert not torch.equal(logits, other)


def test_rows_have_trainings_dropout_seeded(lm_runs):
    from arelu_cli.model.transformer import Dropout

    decoder = open_checkpoint(lm_runs["1.5-entmax"], None, "cpu", task="lm")
    for module in decoder.model.modules():
        if isinstance(module, Dropout):
            module.p = 0.5
    plain, _ = S.model_rows(decoder, "train", 40, seed=3, dropout=False)
    dropped, _ = S.model_rows(decoder, "train", 40, seed=3)
    again, _ = S.model_rows(decoder, "train", 40, seed=3)
    assert not torch.allclose(plain, dropped) and torch.equal(dropped, again)
    assert not decoder.model.training


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_support_is_the_exact_entmaxs(alpha):
    z = torch.randn(64, 300, dtype=torch.float64) * 3
    reference = (entmax_bisect(z, alpha, n_iter=200) > 1e-12).sum(-1)
    assert torch.equal(S.support_sizes(z, alpha), reference)


def test_every_partial_sort_gives_the_full_sorts_loss():
    torch.manual_seed(0)
    z, y = torch.randn(32, 500) * 4, torch.randint(0, 500, (32,))
    chosen = S.losses(1.5, (1, 4, 64, 499, 500, 800), vocab=500)
    assert list(chosen) == ["1.5-entmax-k1", "1.5-entmax-k4", "1.5-entmax-k64",
                            "1.5-entmax-k499", "1.5-entmax"]
    full = chosen["1.5-entmax"].loss(z, y, reduction="none")
    for t in chosen.values():
        torch.testing.assert_close(t.loss(z, y, reduction="none"), full)


def test_the_csv_rows(lm_rows, lm_runs):
    decoder = open_checkpoint(lm_runs["1.5-entmax"], None, "cpu", task="lm")
    logits, _ = S.model_rows(decoder, "train", 48, seed=0)
    sizes = S.support_sizes(logits, 1.5)
    assert [r["loss"] for r in lm_rows] == ["1.5-entmax-k2", "1.5-entmax-k8", "1.5-entmax",
                                           S.BASELINE]
    saved_at = checkpoint.load(resolve_checkpoint(lm_runs["1.5-entmax"]))["step"]
    for row in lm_rows:
        assert row["rows"] == 48 and row["trained"] == "1.5-entmax" and row["ms"] > 0
        assert row["step"] == saved_at > 0 and f"step:{saved_at}|" in row["signature"]
        assert row["support_mean"] == pytest.approx(sizes.double().mean().item())
        assert row["support_max"] == int(sizes.max())
        assert "transform:" in row["signature"] and "rows:48" in row["signature"]
    by = {r["loss"]: r for r in lm_rows}
    assert by["1.5-entmax-k2"]["widened"] == pytest.approx((sizes >= 2).double().mean().item())
    assert by["1.5-entmax-k8"]["widened"] == pytest.approx((sizes >= 8).double().mean().item())
    assert by["1.5-entmax"]["k"] == decoder.data.vocab_size and by["1.5-entmax"]["widened"] == 0
    assert by[S.BASELINE]["k"] is None and by[S.BASELINE]["fastest"] is None
    assert by[S.BASELINE]["ratio_to_cross_entropy"] == 1.0
    fastest = [r["loss"] for r in lm_rows if r["fastest"] is True]
    assert fastest == [min((r for r in lm_rows[:3]), key=lambda r: r["ms"])["loss"]]


def test_run_writes_the_csv(lm_rows, lm_plan, tmp_path, one_thread_module):
    frame = S.run(dataclasses.replace(lm_plan, ks=(4,), repeats=1), tmp_path / "s.csv")
    assert (tmp_path / "s.csv").is_file() and list(frame["loss"]) == [
        "1.5-entmax-k4", "1.5-entmax", S.BASELINE]


def test_a_translation_model(toy_runs, one_thread_module):
    rows = S.measure(S.SupportPlan(checkpoint=toy_runs["1.5-entmax"], rows=30, ks=(4,),
                                   repeats=1))
    assert rows[0]["rows"] == 30 and rows[0]["trained"] == "1.5-entmax"


def test_another_transforms_model_needs_alpha(lm_runs, one_thread_module):
    plan = S.SupportPlan(checkpoint=lm_runs["softmax"], rows=16, ks=(4,), repeats=1)
    with pytest.raises(UserError, match="give --alpha 1.5 or --alpha 2"):
        S.measure(plan)
    rows = S.measure(dataclasses.replace(plan, alpha=2.0))
    assert rows[0]["loss"] == "2-entmax-k4" and rows[0]["trained"] == "softmax"
    assert get_transform(rows[1]["loss"]).name == "2-entmax"


@pytest.mark.parametrize("change, message", [
    ({"rows": 0}, "--rows must be at least 1"),
    ({"repeats": 0}, "--repeats must be at least 1"),
    ({"ks": (0, 4)}, "--k must list sizes of at least 1"),
    ({"alpha": 1.7}, "--alpha must be 1.5"),
    ({"split": "nope"}, "has no split 'nope'"),
])
def test_careless_options(lm_plan, change, message):
    with pytest.raises(UserError, match=message):
        S.measure(dataclasses.replace(lm_plan, **change))


def test_the_command(cli, lm_runs, tmp_path, one_thread_module):
    out = tmp_path / "support.csv"
    ran = cli("bench", "support", lm_runs["1.5-entmax"], "--rows", "32", "--k", "4,16",
              "--repeats", "1", "--device", "cpu", "--out", out)
    assert ran.code == 0, ran.out + ran.err
    assert "fastest: 1.5-entmax" in ran.out and out.is_file()
    assert " at step " in ran.out and "step" in pd.read_csv(out).columns
    bad = cli("bench", "support", lm_runs["1.5-entmax"], "--k", "many", "--out", out)
    assert bad.code == 2 and "--k" in bad.err + bad.out
    other = cli("bench", "support", lm_runs["softmax"], "--out", tmp_path / "other.csv")
    assert other.code == 2 and "give --alpha 1.5 or --alpha 2" in other.err + other.out
    assert not (tmp_path / "other.csv").exists()
