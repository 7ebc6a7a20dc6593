"""Processes and devices for training: one process, or ``torchrun --nproc_per_node=N``.

Under ``torchrun`` (``WORLD_SIZE`` > 1 in the environment) every process joins one group:
gloo on CPU, nccl on CUDA (one GPU per process, ``cuda:LOCAL_RANK``). Data parallelism
itself is :class:`torch.nn.parallel.DistributedDataParallel`; this module holds the few
collectives the trainer needs besides the gradient all-reduce.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from arelu_cli.model.device import pick_device


@dataclass(frozen=True)
class Context:
    """Where this process runs: its rank among ``world_size`` and its device."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup(device_name: str) -> Context:
    """Join the process group when launched by torchrun; otherwise a single process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name, local_rank)
    if world_size == 1:
        return Context(0, 1, device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Context(dist.get_rank(), dist.get_world_size(), device)


def teardown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


def all_sum(ctx: Context, values: list[float]) -> list[float]:
    """Element-wise sum of ``values`` over all processes."""
    if not ctx.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def any_true(ctx: Context, flag: bool) -> bool:
    """True on every process when ``flag`` is true on any (e.g. rank 0's clock ran out)."""
    return all_sum(ctx, [float(flag)])[0] > 0 if ctx.distributed else flag


def barrier(ctx: Context) -> None:
    if ctx.distributed:
        dist.barrier()


def gather(ctx: Context, obj: object) -> list[object]:
    """Every process's ``obj``, indexed by rank (on every process)."""
    if not ctx.distributed:
        return [obj]
    found: list[object] = [None] * ctx.world_size
    dist.all_gather_object(found, obj)
    return found
