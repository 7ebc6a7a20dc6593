"""``arelu bench fused-linear``: the output projection + alpha-ReLU loss, fused vs unfused.

The fused loss (:func:`arelu_cli.transforms.linear_alpha_relu_loss`) computes the loss of
the paper's eq. (sp_loss) on ``hidden @ weight.T`` and its gradients without the N x V
logits. Here each case (tokens N x vocabulary V, model width d) times forward+backward
(gradients of hidden and weight) of:

* ``fused``: the fused loss, skipping the exact zeros of alpha-ReLU's gradient;
* ``fused-dense``: the same with ``skip_zeros=False``;

each alternately against ``unfused`` (``F.linear`` + ``alpha_relu_loss`` with
``reuse_logits``, the fastest unfused path) in the same process, and measures the peak
memory of all three. ``hidden ~ N(0, 1)`` and ``weight ~ N(0, 1/d)`` make the logits
N(0, 1) as for an untrained model, and tau is the paper's analytic estimate for V
(Table 3), so the support has the few dozen entries per row it has in training. The
compute floor is one ``N x d x V`` matmul (the forward projection, which every method
does); ``x matmul`` is a method's time over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from arelu_cli.analysis import timing
from arelu_cli.analysis.bench_loss import DTYPES, parse_sizes
from arelu_cli.errors import UserError
from arelu_cli.results import signature, write_rows
from arelu_cli.tau import analytic_tau
from arelu_cli.transforms import _alpha_relu_kernels, alpha_relu_loss, linear_alpha_relu_loss
from arelu_cli.transforms._checks import check_alpha

FULL_SIZES = ((8192, 40000),)
QUICK_SIZES = ((256, 4000),)
METHODS = ("fused", "fused-dense")


@dataclass(frozen=True)
class FusedPlan:
    sizes: tuple[tuple[int, int], ...]
    width: int
    dtype: str
    alpha: float
    repeats: int
    device: str
    seed: int = 0


def make_plan(quick: bool = False, sizes: str | None = None, width: int | None = None,
              dtype: str = "float32", alpha: float = 1.5, repeats: int | None = None,
              device: str = "auto") -> FusedPlan:
    """Resolve the command-line options; bad values raise :class:`UserError`."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise UserError(f"--device must be cpu, cuda or auto (and cuda needs a GPU), got {device!r}")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    try:
        alpha = check_alpha(alpha)
    except ValueError as err:
        raise UserError(str(err)) from None
    width = (64 if quick else 512) if width is None else width
    if width < 1:
        raise UserError(f"--d must be a positive model width, got {width}")
    return FusedPlan(sizes=parse_sizes(sizes) if sizes else (QUICK_SIZES if quick else FULL_SIZES),
                     width=width, dtype=dtype, alpha=alpha, repeats=repeats or (2 if quick else 3),
                     device=device)


def _inputs(plan: FusedPlan, n: int, v: int):
    gen = torch.Generator().manual_seed(plan.seed)
    dtype, device = DTYPES[plan.dtype], torch.device(plan.device)
    hidden = torch.randn(n, plan.width, generator=gen).to(device, dtype)
    weight = (torch.randn(v, plan.width, generator=gen) / plan.width ** 0.5).to(device, dtype)
    target = torch.randint(0, v, (n,), generator=gen).to(device)
    return hidden, weight.requires_grad_(True), target


def _steps(plan: FusedPlan, weight: torch.Tensor, target: torch.Tensor, tau: float) -> dict:
    """One fwd+bwd call per method, each taking a fresh leaf ``hidden``."""
    def unfused(h):
        loss = alpha_relu_loss(F.linear(h, weight), target, plan.alpha, tau, reuse_logits=True)
        return torch.autograd.grad(loss, (h, weight))

    def fused(skip):
        def step(h):
            loss = linear_alpha_relu_loss(h, weight, target, plan.alpha, tau, skip_zeros=skip)
            return torch.autograd.grad(loss, (h, weight))
        return step
    return {"unfused": unfused, "fused": fused(True), "fused-dense": fused(False)}


def _case_rows(plan: FusedPlan, n: int, v: int) -> list[dict]:
    """The rows of one N x V case: fused, fused-dense and unfused."""
    device = torch.device(plan.device)
    hidden, weight, target = _inputs(plan, n, v)
    tau = analytic_tau(v, sigma=1.0, alpha=plan.alpha).tau
    setup = lambda: hidden.detach().clone().requires_grad_(True)  # noqa: E731
    steps = _steps(plan, weight, target, tau)
    w = weight.detach()
    matmul_ms = min(timing.time_once(lambda h: h @ w.t(), setup, device) for _ in range(3))
    # Fused first: the unfused step's freed N x V pages would otherwise be reused unseen.
    peaks = {name: timing.peak_extra_bytes(steps[name], setup, device)
             for name in (*METHODS, "unfused")}
    base = dict(n=n, v=v, d=plan.width, dtype=plan.dtype, device=plan.device,
                threads=torch.get_num_threads(), alpha=plan.alpha, tau=round(tau, 5),
                engine=_alpha_relu_kernels.engine_for(hidden), matmul_ms=round(matmul_ms, 2))
    rows = []
    for name in METHODS:
        steps[name](setup())  # warm-up
        pair = timing.time_pair(steps[name], steps["unfused"], setup, device, plan.repeats)
        peak, unfused_peak = peaks[name], peaks["unfused"]
        rows.append(base | dict(
            method=name, status="ok", repeats=pair.repeats, median_ms=round(pair.ms, 2),
            unfused_ms=round(pair.baseline_ms, 2), ratio=round(pair.ratio, 3),
            x_matmul=round(pair.ms / matmul_ms, 2),
            peak_mib=None if peak is None else round(peak / 2**20, 1),
            unfused_peak_mib=None if unfused_peak is None else round(unfused_peak / 2**20, 1),
            memory_ratio=None if None in (peak, unfused_peak) or not unfused_peak
            else round(peak / unfused_peak, 3),
            signature=signature(method=name, data=f"randn{n}x{v}x{plan.width}", seed=plan.seed,
                                alpha=plan.alpha, dtype=plan.dtype, device=plan.device,
                                threads=torch.get_num_threads())))
    return rows


def run(plan: FusedPlan, out: Path) -> pd.DataFrame:
    """Every case of ``plan``; the CSV is rewritten after each case."""
    rows: list[dict] = []
    for n, v in plan.sizes:
        rows += _case_rows(plan, n, v)
        write_rows(rows, out)
    return pd.DataFrame(rows)


def print_table(frame: pd.DataFrame, console: Console) -> None:
    """Time and peak memory of each fused method against the unfused loss."""
    table = Table(title="linear + alpha-ReLU loss fwd+bwd: fused vs unfused")
    for col in ("method", "N x V x d", "ms", "unfused", "x time", "x matmul", "MiB",
                "unfused", "x memory"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in frame.to_dict("records"):
        table.add_row(r["method"], f"{r['n']}x{r['v']}x{r['d']}", f"{r['median_ms']:.0f}",
                      f"{r['unfused_ms']:.0f}", f"{r['ratio']:.2f}", f"{r['x_matmul']:.1f}",
                      *("-" if pd.isna(r[k]) else f"{r[k]:.4g}"
                        for k in ("peak_mib", "unfused_peak_mib", "memory_ratio")))
    console.print(table)
