"""Timing and peak-memory primitives shared by the ``arelu bench`` commands.

Times are medians of repeats after a warm-up (on CUDA measured with CUDA events, on CPU
with the wall clock); a ratio against a baseline is the median of per-pair ratios, the pair timed alternately in the same process so that machine noise
hits both sides alike. Peak memory is the extra memory a call needs beyond what was
allocated before it: the CUDA allocator's peak on GPU, the process's peak resident set
(reset through ``/proc/self/clear_refs``) on CPU, after ``malloc_trim`` has handed the
freed heap back: pages freed by an earlier call and kept by glibc would otherwise be
reused unseen (a training step measured after another read as 0 MiB).

Every measurement starts after a full garbage collection, so that no earlier call's garbage
is freed inside it. With torch (and pandas, transformers) imported a full collection scans
millions of objects, a fifth of a second each on a small CPU, more than the timed call
itself; :func:`frozen_heap` moves what exists when a benchmark starts into the collector's
permanent generation, so that each later collection scans only what the benchmark made.

A time is only worth quoting when nothing else ran: :class:`OtherLoad` measures how many
cores other processes kept busy during a measurement (Linux ``/proc``), which the benchmarks
record in an ``other_cpu`` column and :func:`busy_warning` turns into a warning, so that a
timing taken beside a training job is never silently presented as a quiet one.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class PairTiming:
    """Median milliseconds of a candidate and its baseline, and the median of their ratios."""

    ms: float
    baseline_ms: float
    ratio: float
    repeats: int


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


Setup = Callable[[], object]


def _elapsed_ms(body: Callable[[], object], device: torch.device) -> float:
    """Milliseconds ``body()`` takes from a synchronized device, its device work included:
    CUDA events on CUDA, else the wall clock."""
    synchronize(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        body()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    start = time.perf_counter()
    body()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def time_once(fn: Callable[[object], object], setup: Setup, device: torch.device) -> float:
    """Milliseconds one call ``fn(setup())`` takes, device work included, setup excluded."""
    state = setup()
    return _elapsed_ms(lambda: fn(state), device)


def time_queued(fn: Callable[[object], object], setup: Setup, device: torch.device,
                calls: int) -> float:
    """Milliseconds per call of ``calls`` calls ``fn(setup())`` issued back to back, as a
    training loop issues its steps, minus the same loop of ``setup()`` alone (a copy of the
    logits, say). On CUDA the host runs ahead of the device here, so host work hides under
    device work where there is enough of it: this is what a call costs inside a loop, where
    :func:`time_once` (from an idle device) also counts every gap in which the device waits
    for the host. On CPU the two are the same measurement."""
    def loop(body: Callable[[], object]) -> float:
        def calls_of_body():
            for _ in range(calls):
                body()
        return _elapsed_ms(calls_of_body, device) / calls
    return loop(lambda: fn(setup())) - loop(setup)


_freeze = {"open": 0, "ours": False}
"""How many :func:`frozen_heap` blocks are open, and whether the freeze is theirs (the
freeze is the process's)."""


@contextlib.contextmanager
def frozen_heap():
    """A block whose garbage collections scan only objects made inside it: one full
    collection, then ``gc.freeze()`` until the outermost block ends (blocks nest). In a
    process that had frozen its heap before (a test runner freezing what it imported), what
    the block froze stays frozen with the rest."""
    if _freeze["open"] == 0:
        gc.collect()
        _freeze["ours"] = gc.get_freeze_count() == 0
        gc.freeze()
    _freeze["open"] += 1
    try:
        yield
    finally:
        _freeze["open"] -= 1
        if _freeze["open"] == 0 and _freeze["ours"]:
            gc.unfreeze()


def time_pair(candidate: Callable[[object], object], baseline: Callable[[object], object],
              setup: Setup, device: torch.device, repeats: int, warmup: int = 1,
              timer: Callable[..., float] = time_once) -> PairTiming:
    """Time ``candidate(setup())`` and ``baseline(setup())`` alternately, ``repeats`` times,
    each with ``timer(fn, setup, device)`` (:func:`time_once`; or a :func:`time_queued`
    with its ``calls`` bound)."""
    for _ in range(warmup):
        candidate(setup())
        baseline(setup())
    ours, theirs = [], []
    with frozen_heap():
        for i in range(repeats):
            # Alternate which side goes first so that neither always runs on a warmer cache.
            order = ((candidate, ours), (baseline, theirs))
            for fn, sink in (order if i % 2 == 0 else order[::-1]):
                gc.collect()
                sink.append(timer(fn, setup, device))
    ratios = [a / b for a, b in zip(ours, theirs)]
    return PairTiming(statistics.median(ours), statistics.median(theirs),
                      statistics.median(ratios), repeats)


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _trim_heap() -> None:
    """Return glibc's free heap pages to the system (a no-op without glibc)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_extra_bytes(fn: Callable[[object], object], setup: Setup,
                     device: torch.device) -> float | None:
    """Extra memory (bytes) at the peak of one call ``fn(setup())`` beyond what ``setup``
    allocated; None where it can't be measured."""
    state = setup()
    with frozen_heap():
        gc.collect()
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn(state)
        synchronize(device)
        return float(torch.cuda.max_memory_allocated(device) - before)
    _trim_heap()
    if not _reset_peak_rss():
        return None
    before = _status_kib("VmRSS")
    fn(state)
    return float(max(0, _status_kib("VmHWM") - before) * 1024)


def available_bytes(device: torch.device) -> float:
    """Memory free for new tensors on ``device`` (MemAvailable on CPU)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        # Blocks the caching allocator holds but no tensor uses are free to torch too.
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return float(free + cached)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return float(int(line.split()[1]) * 1024)
    return float("inf")


def device_label(device: torch.device) -> str:
    """The accelerator's name for a results column: the GPU's (``NVIDIA H100 80GB HBM3``)
    on CUDA, ``cpu`` otherwise."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def device_path(out: Path, device: torch.device | str) -> Path:
    """``out`` with the GPU's name in the file name on CUDA (``loss.csv`` ->
    ``loss-nvidia-h100-80gb-hbm3.csv``), so results of different GPUs sit side by side;
    ``out`` itself on CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return out
    slug = re.sub(r"[^a-z0-9]+", "-", device_label(device).lower()).strip("-")
    return out.with_name(f"{out.stem}-{slug}{out.suffix}")


BUSY_CORES = 0.25
"""Other processes' CPU use (cores, averaged over a measurement) above which its times are
flagged as not quiet: more than what a shell, an editor and the kernel's own work take."""


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy jiffies of all CPUs, this process's jiffies, all its threads) from /proc."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
        own = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return user + nice + system + irq + softirq + steal, int(own[11]) + int(own[12])
    except (OSError, ValueError, IndexError):
        return None


class OtherLoad:
    """Within ``with``: the CPU cores other processes kept busy, on average (:attr:`cores`;
    None where ``/proc`` cannot say, e.g. not Linux). This process's own threads and its
    children-free work are excluded; a GPU measurement is judged by the CPU too, since a
    competing process slows the launches."""

    def __enter__(self) -> OtherLoad:
        self._start, self._began, self.cores = _cpu_jiffies(), time.monotonic(), None
        return self

    def __exit__(self, *exc: object) -> None:
        end, seconds = _cpu_jiffies(), time.monotonic() - self._began
        if self._start is None or end is None or seconds <= 0:
            return
        busy, own = (e - s for e, s in zip(end, self._start))
        self.cores = max(0.0, (busy - own) / os.sysconf("SC_CLK_TCK") / seconds)


def busy_warning(rows: Sequence[Mapping[str, object]], what: str = "these times") -> str | None:
    """A one-line warning when, for any of the benchmark ``rows``, other processes used more
    than :data:`BUSY_CORES` cores (column ``other_cpu``) while ``what`` were measured; None
    when the machine was quiet (or cannot tell)."""
    loads = [float(r["other_cpu"]) for r in rows if r.get("other_cpu") is not None]
    cores = max(loads, default=None)
    if cores is None or cores != cores or cores <= BUSY_CORES:
        return None
    return (f"other processes kept up to {cores:.2f} CPU cores busy while {what} were measured, so "
            "they are not quiet measurements (column other_cpu); measure again on an idle "
            "machine before quoting them")


def warn_if_busy(rows: Sequence[Mapping[str, object]], console, what: str = "these times",
                 advice: str = "") -> None:
    """Print :func:`busy_warning` (and ``advice``) on the rich ``console`` when it applies."""
    from rich.markup import escape

    text = busy_warning(rows, what)
    if text:
        console.print(f"[bold yellow]warning:[/] {escape(text + advice)}", highlight=False,
                      soft_wrap=True)
