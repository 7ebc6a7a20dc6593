"""Timing and peak-memory primitives shared by the ``arelu bench`` commands.

Times are medians of repeats after a warm-up (on CUDA measured with CUDA events, on CPU
with the wall clock); a ratio against a baseline is the median of per-pair ratios, the pair timed alternately in the same process so that machine noise
hits both sides alike. Peak memory is the extra memory a call needs beyond what was
allocated before it: the CUDA allocator's peak on GPU, the process's peak resident set
(reset through ``/proc/self/clear_refs``) on CPU, after ``malloc_trim`` has handed the
freed heap back: pages freed by an earlier call and kept by glibc would otherwise be
reused unseen (a training step measured after another read as 0 MiB).
"""

from __future__ import annotations

import ctypes
import gc
import re
import statistics
import time
from collections.abc import Callable
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


def time_once(fn: Callable[[object], object], setup: Setup, device: torch.device) -> float:
    """Milliseconds one call ``fn(setup())`` takes, device work included, setup excluded."""
    state = setup()
    synchronize(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(state)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    start = time.perf_counter()
    fn(state)
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def time_pair(candidate: Callable[[object], object], baseline: Callable[[object], object],
              setup: Setup, device: torch.device, repeats: int, warmup: int = 1) -> PairTiming:
    """Time ``candidate(setup())`` and ``baseline(setup())`` alternately, ``repeats`` times."""
    for _ in range(warmup):
        candidate(setup())
        baseline(setup())
    ours, theirs = [], []
    for i in range(repeats):
        # Alternate which side goes first so that neither always runs on a warmer cache.
        order = ((candidate, ours), (baseline, theirs))
        for fn, sink in (order if i % 2 == 0 else order[::-1]):
            gc.collect()
            sink.append(time_once(fn, setup, device))
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
