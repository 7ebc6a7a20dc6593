"""What ``/proc/cpuinfo`` says of this CPU: its model name and its flags, read in one place
for the machine column of results, the native-bf16 check and the C++ kernels' ISA flags;
and how many CPUs this process may use.
Linux only; elsewhere (or unreadable) no model and no flags. Not cached: callers cache."""

from __future__ import annotations

import os
from pathlib import Path


def usable_cpus() -> int:
    """The logical CPUs this process may use (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpuinfo() -> tuple[str | None, set[str]]:
    """``(model name, flags)`` of the first processor in /proc/cpuinfo; ``(None, set())``
    without one."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None, set()
    model = next((" ".join(line.split(":", 1)[1].split()) for line in lines
                  if line.startswith("model name")), None)
    flags = next((set(line.split(":", 1)[1].split()) for line in lines
                  if line.startswith("flags")), set())
    return model, flags
