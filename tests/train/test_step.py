"""Tests for arelu_cli.train.step: a step whose every target is padding (no counted token)
has loss 0 and zero gradients and leaves the weights finite, for every loss and for the
fused output layer (the losses' convention, :mod:`arelu_cli.transforms.reduction`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from arelu_cli.train.distributed import Context
from arelu_cli.train.loop import setup_run
from arelu_cli.train.state import State
from arelu_cli.train.step import micro_batches, optimizer_step


@pytest.mark.parametrize("transform, fused", [("softmax", False), ("1.5-entmax", False),
                                              ("sparsemax", False), ("1.5-relu", False),
                                              ("1.5-relu", True)])
def test_a_step_without_target_tokens_changes_nothing_and_stays_finite(
        tiny_corpus, tiny_config, tmp_path, one_thread, transform, fused):
    config = tiny_config(tiny_corpus, transform=transform, tau=0.1, fused_output=fused)
    s = setup_run(config, tmp_path / "run", Context(0, 1, torch.device("cpu")), False, None)
    s.state = State()
    batch = next(micro_batches(s))
    empty = dataclasses.replace(batch, tgt_out=torch.full_like(batch.tgt_out, batch.pad_id))
    before = [p.detach().clone() for p in s.model.parameters()]
    optimizer_step(s, [empty], with_stats=False)
    assert float(s.state.interval["loss"]) == 0.0 and s.state.interval["tgt"] == 0.0
    for old, new in zip(before, s.model.parameters()):
        assert bool(torch.isfinite(new).all())
        torch.testing.assert_close(new.detach(), old, rtol=0, atol=0)  # Adam: zero gradient
    optimizer_step(s, [batch], with_stats=False)  # and the next real batch trains
    assert float(s.state.interval["loss"]) > 0.0
    assert all(bool(torch.isfinite(p).all()) for p in s.model.parameters())
