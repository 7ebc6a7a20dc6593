"""What ``/proc/cpuinfo`` says of this CPU: its model name and its flags, read in one place
for the machine column of results, the native-bf16 check and the C++ kernels' ISA flags.
Linux only; elsewhere (or unreadable) no model and no flags. Not cached: callers cache."""

from __future__ import annotations

from pathlib import Path


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
