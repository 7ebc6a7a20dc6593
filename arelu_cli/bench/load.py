"""``arelu bench train --under-load``: training speed while another process competes for the cores.

Why (not a result of the paper; it guards the paper's training-time comparison, Appendix
"training hours", on shared CPUs): torch's intra-op threads meet at a barrier after every
op, so beside another busy process each op waits for the thread the scheduler has put
aside. This runs real training steps (the trainer's own step function on the recipe's
model and batches, :func:`arelu_cli.train.step.optimizer_step`) for each transform and
each thread setting, ``fixed`` (torch's count throughout) and ``auto`` (the governor of
:mod:`arelu_cli.train.threads`, as ``[train] threads = "auto"`` trains): first ``warmup``
unmeasured and ``steps`` measured steps on the quiet machine, then ``steps`` more while a
competitor runs. The governor's state carries over, as in a run that another process
joins, so the loaded speed includes the time it takes to notice.

The competitor is one process (started once, paused with SIGSTOP while nothing is
loaded) of the same priority doing ``size`` x ``size`` matmuls on ``load_threads``
threads; it is killed when the benchmark ends, also on an error or Ctrl-C, and it dies
with its parent if the parent is killed. Both phases of a setting run the same batches.
``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` (which the CLI sets: :mod:`arelu_cli.train.openmp`)
are recorded because libgomp reads them once at start-up: compare settings by running the
benchmark under each; the competitor always runs at libgomp's defaults, so that it stays the
same job whichever setting is measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import torch
from rich.console import Console
from rich.table import Table

from arelu_cli.train import openmp

from arelu_cli.train import threads
from arelu_cli.config import Config
from arelu_cli.data.prepared import load_prepared
from arelu_cli.train.distributed import Context
from arelu_cli.util.errors import UserError
from arelu_cli.registry import get_transform
from arelu_cli.util.signatures import signature
from arelu_cli.train.loop import setup_run
from arelu_cli.train.state import Session, State
from arelu_cli.train.step import micro_batches, optimizer_step

MODES = ("fixed", "auto")
COLUMNS = ("transform", "mode", "threads_max", "quiet_tokens_per_s", "loaded_tokens_per_s",
           "loaded_ratio", "quiet_switches", "loaded_switches", "loaded_share_at_max",
           "threads_end", "steps", "warmup", "load_threads", "load_size", "tokens_per_step",
           "alpha", "tau", "label_smoothing", "precision", "omp_wait_policy", "gomp_spincount",
           "nice", "device", "signature")
"""The columns of a row (:func:`_row`), known before anything is measured."""
READY_SECONDS = 300.0
"""How long the competitor may take to start (importing torch on a busy machine)."""


def compete(threads_: int, size: int) -> None:
    """The competitor's main loop, run in its own process: matmuls on ``threads_`` threads
    until it is killed or its parent exits."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the parent
    torch.set_num_threads(threads_)
    a, b = torch.randn(size, size), torch.randn(size, size)
    c = a @ b
    print("ready", flush=True)
    while os.getppid() == parent:  # the parent exited before prctl took effect
        torch.mm(a, b, out=c)


@contextlib.contextmanager
def competitor(threads_: int, size: int) -> Iterator[subprocess.Popen]:
    """A started, paused competitor process (resume it with :func:`loaded`); killed and
    reaped on exit whatever happens. Its own session keeps Ctrl-C in the parent's hands; it
    waits at barriers as libgomp does by default, whatever this process was started with."""
    code = f"from arelu_cli.bench.load import compete; compete({threads_}, {size})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env={**openmp.default_wait(os.environ),
                                 "OMP_NUM_THREADS": str(threads_)})
    try:
        ready, _, _ = select.select([proc.stdout], [], [], READY_SECONDS)
        if not ready or proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the competitor process did not start: {_stderr_tail(proc)}")
        proc.send_signal(signal.SIGSTOP)
        yield proc
    finally:
        proc.kill()  # SIGKILL also ends a stopped process
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _stderr_tail(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        return f"no 'ready' within {READY_SECONDS:.0f} s"
    lines = proc.stderr.read().strip().splitlines()
    return lines[-1] if lines else f"exit code {proc.returncode}"


@contextlib.contextmanager
def loaded(proc: subprocess.Popen) -> Iterator[None]:
    """The competitor runs inside the block and is paused again after it."""
    proc.send_signal(signal.SIGCONT)
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGSTOP)


@dataclasses.dataclass(frozen=True)
class Phase:
    """What a phase measured: training tokens and step seconds, and the thread count of
    each step."""

    tokens: float
    seconds: float
    counts: tuple[int, ...]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(self.seconds, 1e-12)


def _run(s: Session, governor: threads.Governor | None, steps: int) -> Phase:
    """``steps`` training steps from the first batch on, timed and governed as ``_loop``
    does it."""
    s.state = state = State()
    batches = micro_batches(s)
    counts = []
    for _ in range(steps):
        began, tokens = time.perf_counter(), state.totals["tokens"]
        counts.append(torch.get_num_threads())
        optimizer_step(s, [next(batches) for _ in range(s.config.train.accum)], False)
        spent = time.perf_counter() - began
        state.totals["seconds"] += spent
        if governor is not None:
            governor.after_step(state.totals["tokens"] - tokens, spent)
    return Phase(state.totals["tokens"], state.totals["seconds"], tuple(counts))


def _switches(counts: tuple[int, ...], before: int) -> int:
    return sum(a != b for a, b in zip((before,) + counts, counts))


def bench_under_load(config: Config, transforms: list[str], steps: int = 100, warmup: int = 20,
                     load_threads: int = 2, load_size: int = 1024, device_name: str = "auto",
                     policy: threads.Policy = threads.Policy(),
                     console: Console | None = None) -> list[dict]:
    """One row per transform and thread setting (:data:`MODES`): quiet and loaded tokens/s,
    their ratio, and how the thread count moved."""
    if steps < 1 or warmup < 0 or load_threads < 1 or load_size < 1:
        raise UserError("--load-steps, --load-threads and --load-size must be >= 1 and "
                        f"--load-warmup >= 0, got {steps}, {load_threads}, {load_size}, {warmup}")
    if device_name not in ("auto", "cpu"):
        raise UserError(f"--under-load measures CPU training (threads compete for cores); use "
                        f"--device cpu, not {device_name}")
    for name in transforms:
        get_transform(name)  # names and data are checked before the competitor starts
    load_prepared(config.data.path)
    ctx, top = Context(0, 1, torch.device("cpu")), torch.get_num_threads()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, competitor(load_threads, load_size) as proc:
        for name in transforms:
            run_config = dataclasses.replace(config, train=dataclasses.replace(
                config.train, transform=name, device="cpu"))
            for mode in MODES:
                if console:
                    console.log(f"{name}, threads {mode}: quiet, then beside the competitor")
                session = setup_run(run_config, Path(tmp) / f"{name}-{mode}", ctx, False, None)
                with threads.governed(top if mode == "fixed" else "auto", ctx,
                                      policy) as governor:
                    _run(session, governor, warmup)
                    quiet = _run(session, governor, steps)
                    with loaded(proc):
                        load = _run(session, governor, steps)
                rows.append(_row(session, mode, top, quiet, load, steps, warmup, load_threads,
                                 load_size))
                del session
    return rows


def _row(s: Session, mode: str, top: int, quiet: Phase, load: Phase, steps: int, warmup: int,
         load_threads: int, load_size: int) -> dict:
    transform, t = s.transform, s.config.train
    return {
        "transform": transform.name, "mode": mode, "threads_max": top,
        "quiet_tokens_per_s": quiet.tokens_per_s, "loaded_tokens_per_s": load.tokens_per_s,
        "loaded_ratio": load.tokens_per_s / quiet.tokens_per_s,
        "quiet_switches": _switches(quiet.counts, quiet.counts[0]),
        "loaded_switches": _switches(load.counts, quiet.counts[-1]),
        "loaded_share_at_max": load.counts.count(top) / len(load.counts),
        "threads_end": load.counts[-1],
        "steps": steps, "warmup": warmup, "load_threads": load_threads, "load_size": load_size,
        "tokens_per_step": quiet.tokens / steps, "alpha": transform.alpha, "tau": transform.tau,
        "label_smoothing": t.label_smoothing, "precision": t.precision,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT", ""),
        "nice": os.getpriority(os.PRIO_PROCESS, 0), "device": "cpu",
        "signature": signature(transform=transform.name, alpha=transform.alpha,
                               tau=transform.tau, label_smoothing=t.label_smoothing or None,
                               data=s.data.corpus, seed=t.seed, device="cpu",
                               threads=mode, load=f"{load_threads}x{load_size}"),
    }


def print_table(frame: pd.DataFrame, console: Console) -> None:
    table = Table(title="training beside a competing process (same model and batches)")
    for col in ("transform", "threads", "quiet tok/s", "loaded tok/s", "loaded / quiet",
                "switches", "loaded at max"):
        table.add_column(col, justify="right", no_wrap=col == "transform")
    for r in frame.to_dict("records"):
        table.add_row(r["transform"], r["mode"], f"{r['quiet_tokens_per_s']:,.0f}",
                      f"{r['loaded_tokens_per_s']:,.0f}", f"{r['loaded_ratio']:.2f}",
                      f"{r['quiet_switches']} / {r['loaded_switches']}",
                      f"{r['loaded_share_at_max']:.0%}")
    console.print(table)
