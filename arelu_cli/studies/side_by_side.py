"""A grid's training runs side by side on a CPU: each in its own process, with its share of
the cores as torch threads.

One small run cannot use a CPU's cores: torch's intra-op threads meet at a barrier after
every op, and the toy model's ops are small (its step is 1.17x faster on 2 threads than on
1, AMD EPYC with AVX2). Independent runs can: on that 2-core machine the toy grid's three
trainings took 439 s one after another on 2 threads, 335 s two at a time on 1 thread each,
and 303 s all three at once on 1 thread each (no core idles while one run is left alone).
So ``[reproduce] jobs = "auto"`` trains every run of the grid that is not done at once on a
CPU (at most twice as many as cores), each with ``cores // jobs`` threads (at least one);
on a GPU, or when the runs train against the clock (``max_minutes``: beside others a run
would do fewer steps in its minutes), one run at a time, as before. ``jobs = 1`` trains them
one after another, ``N`` at most ``N`` at a time; a ``[train] threads`` of the user's is
kept, and ``auto`` jobs are then as many as fit in the cores.

Each run is ``arelu train``'s own :func:`~arelu_cli.train.loop.train` in a spawned process
(fresh torch, its thread count fixed), its console output in a temporary file that the
parent echoes, line by line, prefixed by the run's name. Its ``summary.json`` records how
many other runs trained beside it (``beside``), and the study's training-time table says so:
tokens/s of runs that shared a CPU are speeds under that sharing. A run that fails or
diverges is reported with its log once the others have finished; a stop signal (Ctrl-C,
SIGTERM) is passed to every run, which saves its ``last.pt``, and the same command
continues them all.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arelu_cli.studies.core import Run, RunTrainer
from arelu_cli.util.cpuinfo import usable_cpus
from arelu_cli.util.errors import UserError

MAX_PER_CORE = 2
"""``auto`` trains at most this many runs per core at once."""
POLL_S = 0.5
"""How often the parent echoes the runs' output and checks whether they ended."""
OK, FAILED, DIVERGED, STOPPED = 0, 1, 3, 4
"""Exit statuses of a run's process (a stop signal: :data:`STOPPED`)."""


def check_jobs(jobs: object) -> None:
    """Refuse, in one line, a ``[reproduce] jobs`` that is neither ``auto`` nor a count."""
    if not (jobs == "auto" or (isinstance(jobs, int) and not isinstance(jobs, bool)
                               and jobs >= 1)):
        raise UserError(f"[reproduce] jobs must be \"auto\" or a number of runs >= 1, "
                        f"got {jobs!r}")


def plan(jobs: str | int, runs: int, device: str, threads: str | int,
         available: int | None = None, clock: bool = False) -> tuple[int, int | str]:
    """``(runs at a time, threads of each)`` for ``runs`` runs not done (module docstring):
    ``jobs`` and ``threads`` as the recipe gives them, ``device`` its ``[train] device``
    resolved (``cpu``/``cuda``), ``available`` the cores (default: all this process may use),
    ``clock``
    whether a run has a wall-clock budget (``auto`` then trains one at a time: a run beside
    others would do fewer steps in its minutes). One at a time keeps ``threads`` as it is."""
    check_jobs(jobs)
    available = available or usable_cpus()
    if jobs == "auto":
        if device != "cpu" or runs <= 1 or clock:
            return 1, threads
        most = available // threads if isinstance(threads, int) else MAX_PER_CORE * available
        jobs = max(1, min(runs, most))
    jobs = max(1, min(jobs, runs))
    if jobs == 1:
        return 1, threads
    return jobs, threads if isinstance(threads, int) else max(1, available // jobs)


def _child(trainer: RunTrainer, run: Run, resume: bool, log: str, beside: int) -> None:
    """One run in its own process (spawned: nothing of the parent's torch is inherited)."""
    from arelu_cli.train.divergence import Diverged
    from arelu_cli.train.stop_signals import Interrupted

    with open(log, "a", encoding="utf-8", buffering=1) as out:
        sys.stdout = sys.stderr = out  # warnings too, echoed under the run's name
        console = Console(file=out, width=100, no_color=True, soft_wrap=True)
        try:
            trainer.train(run.config, run.folder, resume, console=console, beside=beside)
        except Diverged as err:
            console.print(f"diverged: {err}", markup=False)
            raise SystemExit(DIVERGED) from None
        except Interrupted as err:
            console.print(str(err), markup=False)
            raise SystemExit(STOPPED) from None
        except UserError as err:
            console.print(f"error: {err}", markup=False)
            raise SystemExit(FAILED) from None
        except BaseException:
            console.print_exception()
            raise SystemExit(FAILED) from None


def _outcome(code: int) -> str:
    """What a run's exit status says."""
    return {DIVERGED: "diverged", STOPPED: "stopped"}.get(code, f"failed, exit status {code}")


@dataclass
class _Job:
    label: str
    run: Run
    log: Path
    process: multiprocessing.process.BaseProcess
    started: float = field(default_factory=time.perf_counter)
    read: int = 0
    """Bytes of the log already echoed."""

    def echo(self, console: Console, name: str) -> None:
        """Print the log's complete new lines, each prefixed by ``name``."""
        with open(self.log, "rb") as f:
            f.seek(self.read)
            text = f.read()
        end = text.rfind(b"\n") + 1
        self.read += end
        for line in text[:end].decode("utf-8", "replace").splitlines():
            if line.strip():
                console.print(f"{escape(name)} │ {escape(line)}", highlight=False,
                              soft_wrap=True)


def train(items: Sequence[tuple[str, Run, bool]], trainer: RunTrainer, jobs: int,
          console: Console) -> None:
    """Train ``items`` (each ``(label, run, resume)``), at most ``jobs`` at a time, each with
    the thread count of its ``[train] threads`` (module docstring)."""
    spawn = multiprocessing.get_context("spawn")
    waiting, running, failed, stop = list(items), [], [], None

    def on_signal(signum, frame):
        nonlocal stop
        if stop is None:
            stop = signum
            console.print(f"{signal.Signals(signum).name}: stopping every run after its "
                          "current step (each saves its last.pt)", highlight=False)
            for job in running:
                if job.process.is_alive():
                    os.kill(job.process.pid, signal.SIGTERM)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while waiting or running:
            while waiting and len(running) < jobs and stop is None:
                label, run, resume = waiting.pop(0)
                fd, log = tempfile.mkstemp(prefix=f"arelu-{run.folder.name}-", suffix=".log")
                os.close(fd)
                process = spawn.Process(target=_child, name=label,
                                        args=(trainer, run, resume, log,
                                              min(jobs, len(running) + len(waiting) + 1) - 1))
                process.start()
                running.append(_Job(label, run, Path(log), process))
                console.print(f"{label}: {'resumed from its last.pt' if resume else 'started'}"
                              f" ({run.folder})", highlight=False, soft_wrap=True)
            if stop is not None:
                waiting.clear()
            time.sleep(POLL_S)
            for job in list(running):
                job.echo(console, job.run.name)
                if job.process.exitcode is None:
                    continue
                job.process.join()
                running.remove(job)
                code = job.process.exitcode
                console.print(f"{job.label}: {time.perf_counter() - job.started:.0f} s"
                              + ("" if code == OK else f" ({_outcome(code)})"), highlight=False)
                if code == OK:
                    job.log.unlink(missing_ok=True)
                else:
                    failed.append((job, code))
    finally:
        for job in running:  # an error of the parent's own: no run is left behind
            if job.process.is_alive():
                os.kill(job.process.pid, signal.SIGTERM)
            job.process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop is not None:
        from arelu_cli.train.stop_signals import Interrupted

        name = signal.Signals(stop).name
        raise Interrupted(f"stopped by {name} while training side by side", 128 + stop,
                          stopped=f"stopped by {name} while training side by side",
                          kept="each run keeps its last.pt")
    if failed:
        lines = [f"{job.label} ({_outcome(code)}; its output: {job.log})" for job, code in failed]
        raise UserError("training side by side failed: " + "; ".join(lines))
