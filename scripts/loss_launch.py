"""GPU diagnostic of the alpha-ReLU loss kernel (``_triton_kernels``), for the lead's GPU run:
where a forward's time goes (the host dispatching it, or the kernel), and the kernel's time
under a few launch configurations (``loss_launch``'s BLOCK, num_warps, num_stages).

Per case (N x V, bf16): ``call_ms``, one ``alpha_relu_loss`` forward timed from an idle GPU
as ``arelu bench loss`` times it (host time included); ``queued_ms``, the same call queued
20 times back to back, per call (the host is hidden where the GPU is the slower);
``host_ms``, the host time to enqueue one call. Per launch configuration: the loss kernel
alone replayed from a CUDA graph (no host time), without (``fwd``) and with (``grad``) the
gradient written, and its bandwidth (read, or read + write). CUDA only; writes a CSV.
Usage: python3 scripts/loss_launch.py OUT.csv
"""

import csv
import sys
import time

import torch
from triton.testing import do_bench_cudagraph

from arelu_cli.transforms import _triton_kernels as K
from arelu_cli.transforms import alpha_relu_loss

SIZES = ((8192, 32768), (32768, 262144))
# The first is the production choice (``loss_launch``).
CONFIGS = (dict(BLOCK=4096, num_warps=8), dict(BLOCK=4096, num_warps=8, num_stages=1),
           dict(BLOCK=2048, num_warps=8), dict(BLOCK=2048, num_warps=4),
           dict(BLOCK=8192, num_warps=16))


def from_idle_ms(fn, repeats=10):
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def queued_ms(fn, calls=20):
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def host_ms(fn, calls=20):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - start) * 1e3 / calls
    torch.cuda.synchronize()
    return elapsed


def case_rows(n, vocab):
    gen = torch.Generator(device="cuda").manual_seed(0)
    z = torch.randn(n, vocab, generator=gen, device="cuda", dtype=torch.bfloat16)
    y = torch.randint(0, vocab, (n,), generator=gen, device="cuda")
    gbytes = z.numel() * z.element_size() / 1e9

    def forward():
        with torch.no_grad():
            return alpha_relu_loss(z, y, 1.5, 0.3)
    forward()
    base = dict(n=n, v=vocab, call_ms=from_idle_ms(forward), queued_ms=queued_ms(forward),
                host_ms=host_ms(forward))
    rows, losses, grad = [], torch.empty(n, device="cuda"), torch.empty_like(z)
    production = K.loss_launch
    for config in CONFIGS:
        K.loss_launch = lambda v, c=config: dict(c)
        row = base | dict(config=" ".join(f"{k}={v}" for k, v in config.items()))
        try:
            for mode, out, passes in (("fwd", None, 1), ("grad", grad, 2)):
                ms = do_bench_cudagraph(lambda: K.loss_pass(z, y, 1.5, 0.3, grad=out, rows=losses))
                row[f"{mode}_kernel_ms"] = round(ms, 4)
                row[f"{mode}_gb_per_s"] = round(passes * gbytes / ms * 1e3)
        except Exception as err:  # a configuration the compiler refuses: say so, go on
            row["error"] = f"{type(err).__name__}: {err}"[:200]
        finally:
            K.loss_launch = production
        print(row, flush=True)
        rows.append(row)
    return rows


def main(out):
    rows = [row for n, vocab in SIZES for row in case_rows(n, vocab)]
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "loss_launch.csv")
