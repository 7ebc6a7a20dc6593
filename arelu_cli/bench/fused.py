"""``arelu bench fused-linear``: the output projection + alpha-ReLU loss, fused vs unfused.

The fused loss (:func:`arelu_cli.transforms.linear_alpha_relu_loss`) computes the loss of
the paper's eq. (sp_loss) on ``hidden @ weight.T`` and its gradients without the N x V
logits. Here each case (tokens N x vocabulary V, model width d) times forward+backward
(gradients of hidden and weight) of:

* ``fused``: the fused loss as it runs by default (``loop="vocab"``, ``skip_zeros=None``): on
  CPU the gradient products of each tile run on its nonzeros where few, on CUDA they are
  dense cuBLAS matmuls;
* ``fused-vocab``, ``fused-tokens``: the vocabulary-blocked loop and the token-chunked one
  (``loop=``), each with the default zero skipping;
* ``fused-dense``, ``fused-tokens-dense``: the two loops with ``skip_zeros=False`` (dense
  products everywhere; on CUDA the same paths as ``fused``, ``fused-tokens``);
* ``fused-tiles``: ``skip_zeros=True``, on CUDA the Triton GEMMs that skip the all-zero
  ``128 x 128`` tiles of the gradient (on CPU the same path as ``fused``);
* on CUDA, for reference, two fused linear + *softmax cross-entropy* losses (the bench
  extra, ``pip install arelu[bench]``; a ``not installed`` row otherwise): ``liger``
  (Liger-Kernel's ``LigerFusedLinearCrossEntropyLoss``) and ``cce`` (Apple's Cut
  Cross-Entropy, ``linear_cross_entropy``);

each alternately against ``unfused`` (``F.linear`` + ``alpha_relu_loss`` with
``reuse_logits``, the fastest unfused path) in the same process, and measures the peak
memory of all of them; ``unfused`` named in the methods gets a row of its own too.
``hidden ~ N(0, 1)`` and ``weight ~ N(0, 1/d)`` make the logits N(0, 1) as for an untrained
model, and tau is the paper's analytic estimate for V (Table 3), so the support has the few
dozen entries per row it has in training. The compute floor is one ``N x d x V`` matmul (the
forward projection, which every method does); ``x matmul`` is a method's time over it.

On CUDA (``--device cuda``) the defaults are the GPU cases: N in {16384, 65536} x
d in {2048, 4096} x V in {32K, 128K, 256K}, bf16; times come from CUDA events, peaks from
``torch.cuda.max_memory_allocated``, a case that runs out of memory gets a row saying so,
and every row carries the GPU's name (the CLI puts it in the file name too). ``methods``
(``--methods``) picks a subset, so that a time-limited GPU run can do the cases that matter;
``chunk`` (``--chunk``, tokens per tile) and ``vocab_chunk`` (``--vocab-chunk``, vocabulary
columns per tile of the vocabulary loops) override the library's tile rule (both in the
rows' signatures).
"""

from __future__ import annotations

import importlib.util
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from arelu_cli.bench import timing
from arelu_cli.bench.loss import DTYPES, parse_sizes
from arelu_cli.util.errors import UserError
from arelu_cli.util.options import parse_list
from arelu_cli.util.signatures import machine, signature
from arelu_cli.util.results import write_rows
from arelu_cli.transforms.tau import analytic_tau
from arelu_cli.transforms import alpha_relu_kernels, alpha_relu_loss, linear_alpha_relu_loss
from arelu_cli.transforms.checks import check_alpha

FULL_SIZES = ((8192, 40000),)
QUICK_SIZES = ((256, 4000),)
CUDA_SIZES = tuple((n, v) for n in (16384, 65536) for v in (32768, 131072, 262144))
CUDA_WIDTHS = (2048, 4096)
# The fused loss's methods: name -> its options of ``linear_alpha_relu_loss``.
FUSED = {"fused": {}, "fused-vocab": dict(loop="vocab"), "fused-tokens": dict(loop="tokens"),
         "fused-dense": dict(skip_zeros=False),
         "fused-tokens-dense": dict(loop="tokens", skip_zeros=False),
         "fused-tiles": dict(skip_zeros=True)}
BASELINE = "unfused"
METHODS = ("fused", "fused-tokens", "fused-dense", "fused-tokens-dense")
CUDA_METHODS = ("fused", "fused-tokens", "fused-tiles")
# Fused linear + cross-entropy losses of other packages: method -> (module, how to install).
EXTERNAL = {"liger": ("liger_kernel", "pip install liger-kernel"),
            "cce": ("cut_cross_entropy", "pip install cut-cross-entropy")}


@dataclass(frozen=True)
class FusedPlan:
    sizes: tuple[tuple[int, int], ...]
    widths: tuple[int, ...]
    dtype: str
    alpha: float
    repeats: int
    device: str
    methods: tuple[str, ...] = METHODS
    seed: int = 0
    chunk: int | None = None  # tokens per tile of the fused loss (None: its own rule)
    vocab_chunk: int | None = None  # vocabulary columns per tile of its vocabulary loop


def make_plan(quick: bool = False, sizes: str | None = None, width: int | None = None,
              dtype: str | None = None, alpha: float = 1.5, repeats: int | None = None,
              device: str = "auto", methods: str | None = None,
              chunk: int | None = None, vocab_chunk: int | None = None) -> FusedPlan:
    """Resolve the command-line options; bad values raise :class:`UserError`."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise UserError(f"--device must be cpu, cuda or auto (and cuda needs a GPU), got {device!r}")
    cuda = device == "cuda" and not quick
    dtype = dtype or ("bfloat16" if cuda else "float32")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    alpha = check_alpha(alpha)  # a ValueError: the CLI says it in one line
    if width is not None and width < 1:
        raise UserError(f"--d must be a positive model width, got {width}")
    if chunk is not None and chunk < 1:
        raise UserError(f"--chunk must be a positive number of tokens, got {chunk}")
    if vocab_chunk is not None and vocab_chunk < 1:
        raise UserError(f"--vocab-chunk must be a positive number of columns, got {vocab_chunk}")
    widths = (width,) if width else (CUDA_WIDTHS if cuda else (64 if quick else 512,))
    default_sizes = CUDA_SIZES if cuda else (QUICK_SIZES if quick else FULL_SIZES)
    default_methods = CUDA_METHODS + tuple(EXTERNAL) if device == "cuda" else METHODS
    chosen = tuple(parse_list(methods, str, "--methods")) if methods else default_methods
    known = (*FUSED, BASELINE, *EXTERNAL)
    if unknown := [m for m in chosen if m not in known]:
        raise UserError(f"unknown method {unknown[0]!r}; use one of {', '.join(known)}")
    return FusedPlan(sizes=parse_sizes(sizes) if sizes else default_sizes, widths=widths,
                     dtype=dtype, alpha=alpha, repeats=repeats or (2 if quick else 3),
                     device=device, methods=chosen, chunk=chunk, vocab_chunk=vocab_chunk)


def unavailable(method: str, device: str) -> str | None:
    """Why ``method`` cannot run here (a row's status), or None."""
    if method not in EXTERNAL:
        return None
    module, install = EXTERNAL[method]
    if importlib.util.find_spec(module) is None:
        return f"not installed ({install})"
    return None if device == "cuda" else "skipped: needs CUDA"


def _inputs(plan: FusedPlan, n: int, v: int, d: int):
    dtype, device = DTYPES[plan.dtype], torch.device(plan.device)
    gen = torch.Generator(device=device).manual_seed(plan.seed)
    hidden = torch.randn(n, d, generator=gen, device=device).to(dtype)
    weight = (torch.randn(v, d, generator=gen, device=device) / d ** 0.5).to(dtype)
    target = torch.randint(0, v, (n,), generator=gen, device=device)
    return hidden, weight.requires_grad_(True), target


def external_loss(method: str):
    """``loss(hidden, weight, target)`` of a fused linear + cross-entropy package."""
    if method == "liger":
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        liger = LigerFusedLinearCrossEntropyLoss()
        return lambda h, w, y: liger(w, h, y)
    from cut_cross_entropy import linear_cross_entropy
    return linear_cross_entropy


def _steps(plan: FusedPlan, weight: torch.Tensor, target: torch.Tensor, tau: float) -> dict:
    """One fwd+bwd call per runnable method, each taking a fresh leaf ``hidden``."""
    def unfused(h):
        loss = alpha_relu_loss(F.linear(h, weight), target, plan.alpha, tau, reuse_logits=True)
        return torch.autograd.grad(loss, (h, weight))

    def fused(options):
        if options.get("loop") != "tokens":
            options = options | dict(vocab_chunk=plan.vocab_chunk)

        def step(h):
            loss = linear_alpha_relu_loss(h, weight, target, plan.alpha, tau, chunk=plan.chunk,
                                          **options)
            return torch.autograd.grad(loss, (h, weight))
        return step

    def external(loss_fn):
        return lambda h: torch.autograd.grad(loss_fn(h, weight, target), (h, weight))
    steps = {BASELINE: unfused} | {name: fused(options) for name, options in FUSED.items()}
    for name in plan.methods:
        if name in EXTERNAL and unavailable(name, plan.device) is None:
            steps[name] = external(external_loss(name))
    return steps


def _peak(name: str, step, setup, device) -> float | str | None:
    """Peak extra bytes of one call of method ``name`` (None where unmeasurable), or why it
    failed: out of memory, or (another package's loss) the error it raised."""
    try:
        return timing.peak_extra_bytes(step, setup, device)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return f"skipped: {name} out of memory"
    except Exception as err:  # e.g. Cut Cross-Entropy's backward asserts bf16/fp16 inputs
        if name not in EXTERNAL:
            raise
        return f"error: {type(err).__name__}: {err}"


def _mib(peak) -> float | None:
    return None if peak is None else round(peak / 2**20, 1)


def _alone(step, setup, device, repeats: int) -> timing.PairTiming:
    """The baseline's own row: its median time, as a pair with itself."""
    step(setup())  # warm-up
    ms = statistics.median(timing.time_once(step, setup, device) for _ in range(repeats))
    return timing.PairTiming(ms, ms, 1.0, repeats)


def _method_row(plan: FusedPlan, name: str, steps: dict, setup, peaks: dict,
                matmul_ms: float) -> dict:
    """``name`` timed against ``unfused`` (paired), or the reason it was not."""
    device = torch.device(plan.device)
    if (status := unavailable(name, plan.device)) is not None:
        return dict(method=name, status=status)
    for failed in (name, BASELINE):
        if isinstance(peaks[failed], str):
            return dict(method=name, status=peaks[failed])
    try:
        if name == BASELINE:
            pair = _alone(steps[name], setup, device, plan.repeats)
        else:
            steps[name](setup())  # warm-up
            pair = timing.time_pair(steps[name], steps[BASELINE], setup, device, plan.repeats)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return dict(method=name, status="skipped: out of memory")
    peak, unfused_peak = peaks[name], peaks[BASELINE]
    return dict(method=name, status="ok", repeats=pair.repeats, median_ms=round(pair.ms, 2),
                unfused_ms=round(pair.baseline_ms, 2), ratio=round(pair.ratio, 3),
                x_matmul=round(pair.ms / matmul_ms, 2), peak_mib=_mib(peak),
                unfused_peak_mib=_mib(unfused_peak),
                memory_ratio=None if None in (peak, unfused_peak) or not unfused_peak
                else round(peak / unfused_peak, 3))


def _tile(plan: FusedPlan, name: str, n: int, v: int, d: int, engine: str) -> str | None:
    """The tile (tokens x vocabulary columns) fused method ``name`` runs with here, as the
    library's rule (:func:`~arelu_cli.transforms.fused_linear.tile_shape`) gives it; None for
    a method that is not ours."""
    from arelu_cli.transforms.fused_linear import tile_shape

    if name not in FUSED:
        return None
    loop = FUSED[name].get("loop", "vocab")
    rows, cols = tile_shape(n, d, v, plan.device, engine == "triton", loop, plan.chunk,
                            plan.vocab_chunk if loop == "vocab" else None)
    return f"{rows}x{cols}"


def _case_rows(plan: FusedPlan, n: int, v: int, d: int) -> list[dict]:
    """The rows of one N x V x d case: every method of the plan against unfused."""
    device = torch.device(plan.device)
    hidden, weight, target = _inputs(plan, n, v, d)
    tau = analytic_tau(v, sigma=1.0, alpha=plan.alpha).tau
    setup = lambda: hidden.detach().clone().requires_grad_(True)  # noqa: E731
    steps = _steps(plan, weight, target, tau)
    w = weight.detach()
    matmul_ms = min(timing.time_once(lambda h: h @ w.t(), setup, device) for _ in range(3))
    # Fused first: the unfused step's freed N x V pages would otherwise be reused unseen.
    order = [name for name in plan.methods if name != BASELINE] + [BASELINE]
    peaks = {name: _peak(name, steps[name], setup, device) for name in order if name in steps}
    base = dict(n=n, v=v, d=d, dtype=plan.dtype, device=plan.device,
                gpu=timing.device_label(device), machine=machine(device),
                threads=torch.get_num_threads(),
                alpha=plan.alpha, tau=round(tau, 5),
                engine=alpha_relu_kernels.engine_for(hidden), matmul_ms=round(matmul_ms, 2))
    rows = []
    for name in plan.methods:
        row = base | {"tile": _tile(plan, name, n, v, d, base["engine"])} | \
            _method_row(plan, name, steps, setup, peaks, matmul_ms)
        row["signature"] = signature(method=name, data=f"randn{n}x{v}x{d}", seed=plan.seed,
                                     alpha=plan.alpha, chunk=plan.chunk,
                                     vocab_chunk=plan.vocab_chunk, dtype=plan.dtype,
                                     device=plan.device,
                                     threads=torch.get_num_threads())
        rows.append(row)
    return rows


@timing.frozen_heap()
def run(plan: FusedPlan, out: Path) -> pd.DataFrame:
    """Every case of ``plan``; the CSV is rewritten after each case."""
    rows: list[dict] = []
    for d in plan.widths:
        for n, v in plan.sizes:
            rows += _case_rows(plan, n, v, d)
            write_rows(rows, out)
    return pd.DataFrame(rows)


def print_table(frame: pd.DataFrame, console: Console) -> None:
    """Time and peak memory of each fused method against the unfused loss."""
    table = Table(title="linear + alpha-ReLU loss fwd+bwd: fused vs unfused")
    for col in ("method", "N x V x d", "ms", "unfused", "x time", "x matmul", "MiB",
                "unfused", "x memory"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in frame.to_dict("records"):
        case = f"{r['n']}x{r['v']}x{r['d']}"
        if r["status"] != "ok":
            table.add_row(r["method"], case, "-", "-", r["status"], *["-"] * 4)
            continue
        table.add_row(r["method"], case, f"{r['median_ms']:.0f}",
                      f"{r['unfused_ms']:.0f}", f"{r['ratio']:.2f}", f"{r['x_matmul']:.1f}",
                      *("-" if pd.isna(r[k]) else f"{r[k]:.4g}"
                        for k in ("peak_mib", "unfused_peak_mib", "memory_ratio")))
    console.print(table)
