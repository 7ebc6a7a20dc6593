"""``arelu bench loss``: speed and memory of every output loss against ``F.cross_entropy``.

For each case (tokens N x vocabulary V x dtype) and each loss, three modes are timed,
each against its softmax counterpart in the same process, pairs alternating:
``fwd+bwd`` (loss and gradient with respect to the logits, as in training), ``fwd`` (the
loss alone, as in validation) and ``transform`` (the output transform alone, as in
decoding, against ``torch.softmax``). The logits are N(0, 1), as for an untrained model.
Each row also reports the achieved bandwidth, the bytes a loss must move at the least (read
the logits; for ``fwd+bwd`` also write their gradient; for ``transform`` write the output)
over its time, next to the floor: an in-place elementwise pass over the same tensor, timed
in the same run.

Compiled variants run last, after every eager measurement: on CPU, once an inductor
kernel has run, the process's eager ops slow down (``results/bench/README.md``), so
their ratio is taken against the cross-entropy time measured before any compilation.

On CUDA (``--device cuda``) the defaults are the GPU cases: N in {8192, 32768} x V in
{32K, 128K, 256K}, bf16 logits, alpha-ReLU against ``F.cross_entropy``, the compiled
cross-entropy and Liger-Kernel's Triton cross-entropy (a ``not installed`` row where
``liger-kernel`` is missing: ``pip install arelu[bench]``); times come from CUDA events,
peaks from ``torch.cuda.max_memory_allocated``, and every row carries the GPU's name (the
CLI puts it in the file name too). Each case also times a device-to-device copy of the
logits, the bandwidth reference for the ``gb_per_s`` column. Every call above starts from
an idle device (``median_ms``); on CUDA each row also gives the time per call of ten calls
issued back to back (``queued_ms``, ``softmax_queued_ms``, ``queued_ratio``), as in a
training loop, where the host's launches overlap the device's work: for a small loss the
two differ by the host's time (measured in ``results/bench/``).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from arelu_cli.bench import timing
from arelu_cli.util.errors import UserError
from arelu_cli.util.options import parse_list
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.util.signatures import machine, signature
from arelu_cli.util.results import write_rows
from arelu_cli.transforms import alpha_relu_kernels
from arelu_cli.transforms import engine as use_engine

DEFAULT_TRANSFORMS = ("softmax", "sparsemax", "1.5-entmax", "1.5-entmax-k100",
                      "1.5-entmax-bisect", "1.5-relu")
FULL_SIZES = ((2048, 10000), (2048, 40000), (2048, 60000),
              (8192, 10000), (8192, 40000), (8192, 60000))
QUICK_SIZES = ((256, 8000),)
CUDA_SIZES = tuple((n, v) for n in (8192, 32768) for v in (32768, 131072, 262144))
CUDA_TRANSFORMS = ("1.5-relu", "softmax")  # alpha-ReLU first: a run cut short still has its rows
# Losses from other packages (the ``bench`` extra): variant -> (module, how to install).
EXTERNAL = {"liger": ("liger_kernel", "pip install liger-kernel")}
MODES = ("fwd+bwd", "fwd", "transform")
# Calls per back-to-back timing and paired repeats of the queued columns (CUDA only).
QUEUED_CALLS = 10
QUEUED_REPEATS = 5
# Passes over the N x V logits a mode needs at the least: read (+ write the gradient or output).
PASSES = {"fwd+bwd": 2, "fwd": 1, "transform": 2}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Peak memory in N x V logits copies, measured on CPU, used to skip cases that cannot fit.
_COPIES = {"sort": 13.0, "bisect": 6.0, "partial": 4.0, "dense": 4.0, "elementwise": 3.0}


@dataclass(frozen=True)
class Method:
    """One timed loss: a registered transform plus how it is called.

    ``variant``: ``default`` (alpha-ReLU: its ``auto`` engine, C++ on CPU, Triton on
    CUDA); ``reuse_logits`` (alpha-ReLU writing its gradient into the logits); ``eager`` and
    ``eager+reuse_logits`` (alpha-ReLU's chunked PyTorch engine); ``compiled``
    (``torch.compile``d cross-entropy, or alpha-ReLU's compiled engine);
    ``compiled+reuse_logits``; ``liger`` (Liger-Kernel's cross-entropy, CUDA only: it
    writes its gradient into the logits in forward, so only ``fwd+bwd`` is timed).
    """

    transform: str
    variant: str = "default"

    @property
    def compiled(self) -> bool:
        return self.variant.startswith("compiled")

    @property
    def engine(self) -> str:
        """The alpha-ReLU engine this method runs under (``arelu_cli.transforms.engine``)."""
        return self.variant.split("+")[0] if self.variant.startswith(("compiled", "eager")) else "auto"

    def unavailable(self, device: str) -> str | None:
        """Why this method cannot run here (a row's status), or None."""
        if self.variant not in EXTERNAL:
            return None
        module, install = EXTERNAL[self.variant]
        if importlib.util.find_spec(module) is None:
            return f"not installed ({install})"
        return None if device == "cuda" else "skipped: needs CUDA"


@dataclass(frozen=True)
class BenchPlan:
    methods: tuple[Method, ...]
    sizes: tuple[tuple[int, int], ...]
    dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    repeats: int
    device: str
    threads: int
    max_seconds: float
    seed: int = 0


def _parse_list(text: str | None, default: tuple[str, ...], valid, what: str,
                option: str) -> tuple[str, ...]:
    chosen = tuple(parse_list(text, str, option)) if text else default
    if valid is not None and (unknown := [x for x in chosen if x not in valid]):
        raise UserError(f"unknown {what} {unknown[0]!r}; use one of {', '.join(valid)}")
    return chosen


def parse_sizes(text: str) -> tuple[tuple[int, int], ...]:
    try:
        sizes = tuple(tuple(int(x) for x in part.lower().split("x")) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(len(s) != 2 or min(s) < 1 for s in sizes):
        raise UserError(f"--sizes must look like 2048x40000,8192x40000, got {text!r}")
    return sizes


# Each family's variants (``Method``), in the order they run.
FAMILY_VARIANTS = {"softmax": ("default", "compiled", "liger"),
                   "relu": ("default", "reuse_logits", "eager", "eager+reuse_logits", "compiled",
                            "compiled+reuse_logits")}
VARIANTS = tuple(dict.fromkeys(v for vs in FAMILY_VARIANTS.values() for v in vs))


def _methods(names: tuple[str, ...], quick: bool, device: str = "cpu",
             variants: tuple[str, ...] | None = None) -> tuple[Method, ...]:
    """Every variant of each transform (``variants``: only those; None: all but Liger on CPU
    and, with ``quick``, the compiled and eager ones)."""
    methods = []
    for name in names:
        family = get_transform(name).family  # validates the name
        for variant in FAMILY_VARIANTS.get(family, ("default",)):
            if variants is not None:
                chosen = variant in variants
            else:
                chosen = not (quick and variant.startswith(("compiled", "eager"))) and \
                    (variant != "liger" or device == "cuda")
            if chosen:
                methods.append(Method(name, variant))
    return tuple(methods)


def make_plan(quick: bool = False, transforms: str | None = None, sizes: str | None = None,
              repeats: int | None = None, dtypes: str | None = None, device: str = "auto",
              threads: int | None = None, max_seconds: float = 90.0,
              modes: str | None = None, variants: str | None = None) -> BenchPlan:
    """Resolve the command-line options into a plan; bad values raise :class:`UserError`."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise UserError(f"--device must be cpu, cuda or auto (and cuda needs a GPU), got {device!r}")
    if not max_seconds > 0:  # NaN too
        raise UserError(f"--max-seconds must be a positive number of seconds, got {max_seconds}")
    cuda = device == "cuda"
    names = _parse_list(transforms, CUDA_TRANSFORMS if cuda else DEFAULT_TRANSFORMS, None,
                        "transform", "--transforms")
    chosen_dtypes = _parse_list(dtypes, ("bfloat16",) if cuda else ("float32",), tuple(DTYPES),
                                "dtype", "--dtype")
    chosen_modes = _parse_list(modes, MODES, MODES, "mode", "--modes")
    chosen_variants = _parse_list(variants, VARIANTS, VARIANTS, "variant", "--variants") \
        if variants else None
    if threads is not None:
        torch.set_num_threads(threads)
    default_sizes = QUICK_SIZES if quick else (CUDA_SIZES if cuda else FULL_SIZES)
    return BenchPlan(methods=_methods(names, quick, device, chosen_variants),
                     sizes=parse_sizes(sizes) if sizes else default_sizes,
                     dtypes=chosen_dtypes, modes=chosen_modes, repeats=repeats or (3 if quick else 7),
                     device=device, threads=torch.get_num_threads(),
                     max_seconds=10.0 if quick else max_seconds)


def _loss_fn(method: Method, transform: OutputTransform):
    if transform.family == "softmax" and method.compiled:
        return torch.compile(F.cross_entropy, dynamic=False)
    if method.variant == "liger":
        from liger_kernel.transformers import LigerCrossEntropyLoss
        return LigerCrossEntropyLoss()
    reuse = method.variant.endswith("reuse_logits")
    return lambda z, y: transform.loss(z, y, reuse_logits=reuse)


def _grad_step(loss_fn, y):
    def step(logits):
        (grad,) = torch.autograd.grad(loss_fn(logits, y), logits)
        return grad
    return step


def _no_grad(fn):
    def run(z):
        with torch.no_grad():
            return fn(z)
    return run


def _calls(mode: str, method: Method, transform: OutputTransform, x: torch.Tensor,
           y: torch.Tensor):
    """``(candidate, baseline, setup)`` for one mode; each call gets ``setup()``'s logits."""
    if mode == "fwd+bwd":
        # A fresh non-leaf copy each time, as a model's final Linear would hand over; made
        # untimed, and needed because reuse_logits overwrites it.
        leaf = x.detach().requires_grad_(True)
        return (_grad_step(_loss_fn(method, transform), y),
                _grad_step(F.cross_entropy, y), lambda: leaf.clone())
    if mode == "fwd":
        loss_fn = _loss_fn(method, transform)
        return (_no_grad(lambda z: loss_fn(z, y)), _no_grad(lambda z: F.cross_entropy(z, y)),
                lambda: x)
    softmax = _no_grad(lambda z: torch.softmax(z, -1))
    return (softmax if transform.family == "softmax" else _no_grad(transform.probs)), softmax, lambda: x


def _modes(plan: BenchPlan, method: Method, transform: OutputTransform) -> tuple[str, ...]:
    """Variants only change the gradient path; the compiled softmax only the loss."""
    if method.variant.endswith("reuse_logits") or method.variant == "liger":
        return tuple(m for m in plan.modes if m == "fwd+bwd")
    if method.compiled and transform.family == "softmax":
        return tuple(m for m in plan.modes if m != "transform")
    return plan.modes


def _timed(plan: BenchPlan, candidate, baseline, setup, device):
    """``(pair, peak)``: the candidate paired with the baseline; where the pair runs out of
    GPU memory, the candidate alone (a ``PairTiming`` with NaN baseline). Out of memory
    alone too: raises.

    Both sides are called once, untimed, before anything is timed: a first call compiles
    (Triton, Liger) or loads kernels (cuBLAS, cross-entropy's), and where the time budget
    leaves one repeat, a cold baseline would be the whole of its median (a cold call takes
    many times a warm one, and the ratio would say nothing of the loss). The repeats are
    sized on a warm call."""
    timing.time_once(candidate, setup, device)
    pair = None
    try:
        timing.time_once(baseline, setup, device)
        first = timing.time_once(candidate, setup, device)
        repeats = max(1, min(plan.repeats, int(plan.max_seconds * 1e3 / max(first, 1e-3) / 2)))
        pair = timing.time_pair(candidate, baseline, setup, device, repeats, warmup=0)
    except torch.OutOfMemoryError:  # the N x V temporaries of cross-entropy, say
        pass  # out of the handler first: its traceback keeps the failed call's tensors alive
    if pair is None:
        torch.cuda.empty_cache()
        first = timing.time_once(candidate, setup, device)
        repeats = max(1, min(plan.repeats, int(plan.max_seconds * 1e3 / max(first, 1e-3))))
        ms = statistics.median(timing.time_once(candidate, setup, device)
                               for _ in range(repeats))
        pair = timing.PairTiming(ms, math.nan, math.nan, repeats)
    return pair, _queued(pair, candidate, baseline, setup, device), \
        timing.peak_extra_bytes(candidate, setup, device)


def _queued(pair: timing.PairTiming, candidate, baseline, setup,
            device: torch.device) -> timing.PairTiming | None:
    """On CUDA, both sides again with ``QUEUED_CALLS`` calls back to back per timing
    (:func:`timing.time_queued`), paired, at most ``QUEUED_REPEATS`` times: what a call costs
    inside a training loop, where the host's launches overlap the device's work. A
    ``time_once`` call from an idle device also counts the device's waits for the host,
    which for a small loss can be most of it. The candidate alone where the baseline ran
    out of memory; None on CPU (the same measurement as ``time_once`` there)."""
    if device.type != "cuda":
        return None
    queued = functools.partial(timing.time_queued, calls=QUEUED_CALLS)
    repeats = min(pair.repeats, QUEUED_REPEATS)
    try:
        if not math.isnan(pair.baseline_ms):
            return timing.time_pair(candidate, baseline, setup, device, repeats, warmup=0,
                                    timer=queued)
        ms = statistics.median(queued(candidate, setup, device) for _ in range(repeats))
        return timing.PairTiming(ms, math.nan, math.nan, repeats)
    except torch.OutOfMemoryError:  # the row keeps its single-call times
        return None


def _measure(plan: BenchPlan, method: Method, mode: str, x, y, clean_ce: dict) -> dict:
    """Time one (method, mode) on ``x``: median ms, ratio to cross-entropy, peak memory."""
    device = torch.device(plan.device)
    transform = get_transform(method.transform)
    need, have = _COPIES.get("partial" if transform.k else transform.method, 4.0) * x.numel() * 4, \
        timing.available_bytes(device)
    # On CPU running out of memory kills the process; on CUDA it raises, and is caught here
    # (the CPU copy counts would skip cases that a GPU engine fits).
    if device.type == "cpu" and need > 0.8 * have:
        return dict(status=f"skipped: needs ~{need / 2**30:.1f} GiB, {have / 2**30:.1f} GiB free")
    candidate, baseline, setup = _calls(mode, method, transform, x, y)
    try:
        pair, queued, peak = _timed(plan, candidate, baseline, setup, device)
    except torch.OutOfMemoryError:
        pair = None
    if pair is None:  # out of the handler, whose traceback holds the tensors, before emptying
        torch.cuda.empty_cache()
        return dict(status="skipped: out of memory")
    if method.compiled and mode in clean_ce:
        softmax_ms, ratio, against = clean_ce[mode], pair.ms / clean_ce[mode], "before compile"
    elif math.isnan(pair.baseline_ms):
        softmax_ms, ratio, against = math.nan, math.nan, "cross-entropy out of memory"
    else:
        softmax_ms, ratio, against = pair.baseline_ms, pair.ratio, "paired"
        clean_ce.setdefault(mode, pair.baseline_ms)
    traffic = PASSES[mode] * x.numel() * x.element_size()
    return dict(status="ok", repeats=pair.repeats, median_ms=round(pair.ms, 3),
                softmax_ms=round(softmax_ms, 3), ratio=round(ratio, 4), baseline=against,
                gb_per_s=round(traffic / pair.ms / 1e6, 2),
                peak_mib=None if peak is None else round(peak / 2**20, 1),
                copies=None if peak is None else round(peak / (x.numel() * x.element_size()), 2),
                **({} if queued is None else dict(
                    queued_ms=round(queued.ms, 3), softmax_queued_ms=round(queued.baseline_ms, 3),
                    queued_ratio=round(queued.ratio, 4))))


def _floors(x: torch.Tensor, device: torch.device) -> dict:
    """The memory-bandwidth references of one case: an in-place elementwise pass over the
    N x V logits (``floor``) and a device-to-device copy of them (``copy``), each read +
    write, fastest of six."""
    work = x.clone()
    floor = min(timing.time_once(lambda t: t.mul_(1.0), lambda: work, device) for _ in range(6))
    copy = min(timing.time_once(lambda t: t.copy_(x), lambda: work, device) for _ in range(6))
    traffic = 2 * x.numel() * x.element_size() / 1e6
    return dict(floor_ms=round(floor, 3), floor_gb_per_s=round(traffic / floor, 2),
                copy_ms=round(copy, 3), copy_gb_per_s=round(traffic / copy, 2))


def _inputs(plan: BenchPlan, n: int, v: int, dtype: str):
    if plan.device == "cuda":  # made on the GPU: the CUDA cases hold up to 8.6e9 logits
        gen = torch.Generator(device="cuda").manual_seed(plan.seed)
        x = torch.randn(n, v, generator=gen, device="cuda", dtype=DTYPES[dtype])
        return x, torch.randint(0, v, (n,), generator=gen, device="cuda")
    gen = torch.Generator(device="cpu").manual_seed(plan.seed)
    x = torch.randn(n, v, generator=gen).to(device=plan.device, dtype=DTYPES[dtype])
    y = torch.randint(0, v, (n,), generator=gen).to(plan.device)
    return x, y


def _unavailable_rows(plan: BenchPlan, method: Method, status: str) -> list[dict]:
    """One ``fwd+bwd`` row per case saying why ``method`` did not run."""
    gpu = timing.device_label(torch.device(plan.device))
    where = machine(plan.device)
    return [dict(transform=method.transform, variant=method.variant, mode="fwd+bwd", n=n, v=v,
                 dtype=dtype, device=plan.device, gpu=gpu, machine=where, threads=plan.threads,
                 engine=method.variant, status=status)
            for n, v in plan.sizes for dtype in plan.dtypes]


def _engine_name(method: Method, transform: OutputTransform, x: torch.Tensor) -> str:
    if transform.family == "relu":
        return alpha_relu_kernels.engine_for(x)
    if method.variant in EXTERNAL:
        return method.variant
    return "torch.compile" if method.compiled else "eager"


def _case_rows(plan: BenchPlan, method: Method, case: tuple, floors: dict,
               clean_ce: dict) -> list[dict]:
    """The rows of one method on one case (N, V, dtype), one per mode."""
    n, v, dtype = case
    device = torch.device(plan.device)
    transform = get_transform(method.transform)
    x, y = _inputs(plan, n, v, dtype)
    if case not in floors:
        floors[case] = _floors(x, device)
    rows = []
    with use_engine(method.engine):
        engine = _engine_name(method, transform, x)
        for mode in _modes(plan, method, transform):
            row = dict(transform=method.transform, variant=method.variant, mode=mode, n=n, v=v,
                       dtype=dtype, device=plan.device, gpu=timing.device_label(device),
                       machine=machine(device), threads=plan.threads, engine=engine, **floors[case])
            with timing.OtherLoad() as load:
                row.update(_measure(plan, method, mode, x, y, clean_ce[case]))
            row["other_cpu"] = load.cores
            row["signature"] = signature(
                transform=method.transform, data=f"randn{n}x{v}", seed=plan.seed,
                variant=method.variant, mode=mode, dtype=dtype, device=plan.device,
                threads=plan.threads)
            rows.append(row)
    return rows


@timing.frozen_heap()
def run(plan: BenchPlan, out: Path, console: Console | None = None) -> pd.DataFrame:
    """Run every case of ``plan`` (eager methods first, compiled ones after), writing the
    CSV atomically after each case; return the rows."""
    rows: list[dict] = []
    cases = [(n, v, d) for n, v in plan.sizes for d in plan.dtypes]
    ordered = [m for m in plan.methods if not m.compiled] + [m for m in plan.methods if m.compiled]
    clean_ce: dict[tuple, dict] = {case: {} for case in cases}
    floors: dict[tuple, dict] = {}
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("bench loss", total=len(cases) * len(ordered))
        for method in ordered:
            if (status := method.unavailable(plan.device)) is not None:
                rows += _unavailable_rows(plan, method, status)
                write_rows(rows, out)
                progress.advance(task, len(cases))
                continue
            for case in cases:
                progress.update(task, description=f"{method.transform} {method.variant} "
                                                  f"{case[0]}x{case[1]}")
                rows += _case_rows(plan, method, case, floors, clean_ce)
                write_rows(rows, out)
                progress.advance(task)
    return pd.DataFrame(rows)


def print_table(frame: pd.DataFrame, console: Console) -> None:
    """The fwd+bwd rows as a rich table: time, ratio to cross-entropy, bandwidth, memory."""
    table = Table(title="loss fwd+bwd vs F.cross_entropy (x CE < 1 is faster; queued: ten "
                        "calls back to back, as in training, CUDA only); x pass: time "
                        "over one in-place pass (the memory floor, its GB/s in brackets); "
                        "copy: a device-to-device copy of the logits in the same run")
    for col in ("loss", "N x V", "ms", "CE ms", "x CE", "x CE queued", "x pass", "GB/s",
                "copy GB/s", "copies"):
        table.add_column(col, justify="left" if col == "loss" else "right")
    for r in frame[frame["mode"] == "fwd+bwd"].to_dict("records"):
        ok = r.get("status") == "ok"
        label = r["transform"] + ("" if r["variant"] == "default" else f" ({r['variant']})")
        table.add_row(f"{label} {r['dtype']}" if r["dtype"] != "float32" else label,
                      f"{r['n']}x{r['v']}",
                      f"{r['median_ms']:.1f}" if ok else "-",
                      f"{r['softmax_ms']:.1f}" if ok else "-",
                      f"{r['ratio']:.2f}" if ok else r["status"],
                      "-" if not ok or pd.isna(r.get("queued_ratio"))
                      else f"{r['queued_ratio']:.2f}",
                      f"{r['median_ms'] / r['floor_ms']:.1f}" if ok else "-",
                      f"{r['gb_per_s']:.3g} [{r['floor_gb_per_s']:.3g}]" if ok else "-",
                      f"{r['copy_gb_per_s']:.3g}" if ok else "-",
                      "-" if not ok or pd.isna(r.get("copies")) else f"{r['copies']:.1f}")
    console.print(table)
