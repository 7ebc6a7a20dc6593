"""tau for alpha-ReLU (given, auto = the paper's first-batch method, analytic) and the logged
statistics of the output layer."""

import math

import pytest
import torch

from arelu_cli.data.prepared import load_prepared
from arelu_cli.model.transformer import Transformer
from arelu_cli.model.output_stats import batch_stats, first_batch, model_tau, resolve_tau
from arelu_cli.registry import get_transform
from arelu_cli.transforms.tau import analytic_tau, empirical_tau


@pytest.fixture(scope="module")
def setup(tiny_corpus, tiny_config):
    config = tiny_config(tiny_corpus)
    data = load_prepared(tiny_corpus)
    torch.manual_seed(0)
    model = Transformer(config.model, data.src_vocab_size, data.tgt_vocab_size, data.pad_id)
    return model, data


def test_resolve_tau(setup):
    model, data = setup
    relu = get_transform("1.5-relu")
    assert resolve_tau(0.25, relu, model, data, 256, 0) == 0.25
    assert resolve_tau("auto", get_transform("softmax"), model, data, 256, 0) is None
    analytic = analytic_tau(d_vocab=data.vocab_size, d_model=32).tau
    assert resolve_tau("analytic", relu, model, data, 256, 0) == pytest.approx(analytic)
    auto = resolve_tau("auto", relu, model, data, 256, 0)
    assert auto == pytest.approx(model_tau(model, first_batch(data, 256, 0)))
    # the untrained model's logits are N(0, sigma^2): the empirical tau is near the analytic one
    assert auto == pytest.approx(analytic, abs=0.05)


def test_model_tau_is_empirical_tau_of_the_target_positions(setup):
    model, data = setup
    batch = first_batch(data, 256, 0)
    with torch.no_grad():
        logits = model.eval()(batch.src, batch.tgt_in, batch.tgt_out != data.pad_id)
    assert model_tau(model, batch) == pytest.approx(empirical_tau(logits))
    assert model_tau(model, batch, alpha=2.0) == pytest.approx(empirical_tau(logits, 2.0))


@pytest.mark.parametrize("name, tau_kind", [("softmax", None), ("1.5-entmax", "entmax"),
                                            ("sparsemax", "entmax"), ("1.5-relu", "fixed")])
def test_batch_stats(name, tau_kind):
    logits = torch.randn(50, 300) * 0.5
    transform = get_transform(name, tau=0.3)
    stats = batch_stats(logits, transform, rows=20)
    assert stats["logit_norm"] == pytest.approx(float(logits.norm(dim=-1).mean()), rel=1e-5)
    assert 0 < stats["nnz"] <= 300 and stats["sum_p"] > 0
    if tau_kind is None:
        assert stats["tau"] is None and stats["nnz"] == 300
    elif tau_kind == "fixed":
        assert stats["tau"] == 0.3
    else:
        assert stats["sum_p"] == pytest.approx(1.0, abs=1e-4)
    assert stats["tau_z"] == pytest.approx(empirical_tau(logits[torch.linspace(0, 49, 20).long()]))


@pytest.mark.parametrize("name", ["softmax", "1.5-entmax", "sparsemax", "1.5-entmax-k10",
                                  "1.5-relu"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_stats_of_logits_that_are_not_finite_are_nan(name, bad):
    """A diverging run's logits: NaN statistics, never an error (the sort-based entmax
    transforms would index out of range), so that the trainer can report the divergence."""
    logits = torch.randn(50, 300)
    logits[7, 11] = bad
    transform = get_transform(name, tau=0.3)
    stats = batch_stats(logits, transform, rows=50)
    assert all(math.isnan(stats[key]) for key in ("tau_z", "sum_p", "nnz"))
    if name in ("softmax", "1.5-relu"):
        assert stats["tau"] == transform.tau  # none, or the fixed one
    else:
        assert math.isnan(stats["tau"])
    assert not math.isfinite(stats["logit_norm"])


def test_logit_norm_of_bf16_logits_is_taken_in_fp32():
    logits = (torch.randn(40, 300) * 3).to(torch.bfloat16)
    stats = batch_stats(logits, get_transform("1.5-relu", tau=0.3), rows=8)
    expected = float(logits.double().norm(dim=-1).mean())
    assert stats["logit_norm"] == pytest.approx(expected, rel=1e-6)
