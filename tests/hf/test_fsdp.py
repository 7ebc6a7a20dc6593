"""The fused output layer under FSDP2 (torch.distributed.fsdp.fully_shard), two CPU
processes on gloo: with the head sharded with the root module, loss and gradients equal one
process's; with the head sharded on its own, a one-line error says what to do."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
# Imported here, once: the forked workers inherit it.
from torch.distributed.fsdp import fully_shard  # noqa: E402

from arelu_cli.hf import use_transform  # noqa: E402

from .conftest import TAU, make_model, tokens  # noqa: E402

WORLD = 2

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="needs torch.distributed with gloo")


def _worker(rank: int, init: str, result: str, head_alone: bool) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        model = make_model("llama", scale=30.0).train()
        use_transform(model, "1.5-relu", tau=TAU, fused=True)
        for layer in model.model.layers:
            fully_shard(layer)
        if head_alone:
            fully_shard(model.lm_head)
        fully_shard(model)
        ids = tokens(2 * WORLD, 6)[2 * rank:2 * rank + 2]            # this rank's half
        try:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            grads = [None if p.grad is None else p.grad.full_tensor()
                     for p in model.parameters()]
            out = (loss.detach(), grads)
        except ValueError as err:
            out = str(err)
        if rank == 0:
            torch.save(out, result)
    finally:
        dist.destroy_process_group()


def _run(tmp_path, head_alone: bool):
    result = str(tmp_path / "result.pt")
    mp.start_processes(_worker, args=(f"file://{tmp_path / 'init'}", result, head_alone),
                       nprocs=WORLD, start_method="fork")
    return torch.load(result, weights_only=False)


def test_fused_loss_under_fsdp2_equals_one_process(tmp_path):
    model = make_model("llama", scale=30.0).train()      # first: the workers inherit imports
    use_transform(model, "1.5-relu", tau=TAU, fused=True)
    loss, grads = _run(tmp_path, head_alone=False)
    ids = tokens(2 * WORLD, 6)
    halves = [model(input_ids=ids[i:i + 2], labels=ids[i:i + 2]).loss for i in (0, 2)]
    (sum(halves) / WORLD).backward()                  # FSDP averages the ranks' gradients
    torch.testing.assert_close(loss, halves[0].detach(), rtol=1e-12, atol=1e-12)
    moved = 0.0
    for got, p in zip(grads, model.parameters()):
        torch.testing.assert_close(got, p.grad, rtol=1e-9, atol=1e-12)
        moved += float(got.abs().sum())
    assert moved > 0 and float(model.lm_head.weight.grad.abs().sum()) > 0


def test_a_head_sharded_on_its_own_is_refused_with_what_to_do(tmp_path):
    make_model("llama")                                   # the workers inherit its imports
    message = _run(tmp_path, head_alone=True)
    assert isinstance(message, str) and "\n" not in message
    assert "fully_shard(lm_head) on its own" in message and "fused=False" in message
