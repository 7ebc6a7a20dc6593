"""GPU diagnostic: where a small alpha-ReLU loss call's time goes, beside F.cross_entropy's.

At N 8192 x V 32768 (bf16) ``arelu bench loss`` timed alpha-ReLU's fwd+bwd at 1.43x
cross-entropy's on an H100 (0.90-1.03x in a later session's runs; 0.37-0.40x with the calls
queued back to back) while its kernel alone takes 0.37 ms (``loss_launch.py``): the rest is
host work. This runs each side's fwd+bwd as the benchmark does (a fresh copy of the
logits, ``torch.autograd.grad``; tau 0.12, about the analytic tau at this V, where the
benchmark passes 0: one pass over the logits either way) under ``torch.profiler`` and
prints, per side, the wall time per call (synchronized after each call, and queued back
to back as a training loop issues them; and single calls from an idle GPU as ``bench
loss`` times them, after a synchronize, a ``gc.collect()`` or 20 ms of idling, to find why
such a call costs more than the loop's) and the operators that take the host's and the
device's time.
Usage: python3 scripts/loss_profile.py [OUT.txt]
"""

import gc
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from arelu_cli.registry import get_transform
from arelu_cli.transforms import alpha_relu_loss

N, V, CALLS = 8192, 32768, 30


# What precedes each call timed from an idle GPU: nothing but a synchronize; a
# gc.collect() first, as ``arelu bench loss`` does; 20 ms of sleep first (an idle device).
IDLE = {"after a synchronize": None, "after gc.collect()": "gc", "after 20 ms idle": 0.02}


def from_idle(loss, leaf, pause) -> float:
    """Median CUDA-event milliseconds of one fwd+bwd call started on an idle device, timed
    as ``arelu bench loss`` times it (``timing.time_once``), after ``pause``."""
    times = []
    for _ in range(10):
        z = leaf.clone()
        if pause == "gc":
            gc.collect()
        elif pause:
            time.sleep(pause)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.autograd.grad(loss(z), z)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(out: str | None) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, V, device="cuda", dtype=torch.bfloat16, generator=gen)
    y = torch.randint(0, V, (N,), device="cuda", generator=gen)
    leaf = x.detach().requires_grad_(True)
    transform = get_transform("1.5-relu", tau=0.12)
    sides = {"F.cross_entropy": lambda z: F.cross_entropy(z, y),
             "transform.loss (bench)": lambda z: transform.loss(z, y),
             "alpha_relu_loss": lambda z: alpha_relu_loss(z, y, alpha=1.5, tau=0.12)}
    lines = [f"{torch.cuda.get_device_name()} torch {torch.__version__} N {N} V {V} bf16"]
    for name, loss in sides.items():
        def step():
            z = leaf.clone()
            torch.autograd.grad(loss(z), z)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(CALLS):
            step()
            torch.cuda.synchronize()
        wall = (time.perf_counter() - start) / CALLS * 1e3
        start = time.perf_counter()  # back to back, as in training: host and device overlap
        for _ in range(CALLS):
            step()
        torch.cuda.synchronize()
        queued = (time.perf_counter() - start) / CALLS * 1e3
        idle = {how: from_idle(loss, leaf, pause) for how, pause in IDLE.items()}
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(CALLS):
                step()
                torch.cuda.synchronize()
        lines += [f"\n== {name}: {wall:.3f} ms per synchronized call (wall), {queued:.3f} ms "
                  "per call queued back to back; one call from an idle GPU (CUDA events, the "
                  "copy excluded, median of 10): "
                  + ", ".join(f"{ms:.3f} ms {how}" for how, ms in idle.items()),
                  prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18,
                                            max_name_column_width=60),
                  prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8,
                                            max_name_column_width=60)]
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
