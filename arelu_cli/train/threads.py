"""The thread governor: torch's intra-op thread count picked from measured training speed.

Not part of the paper; it keeps the training-time comparisons measurable on a shared CPU.
torch's intra-op threads meet at a barrier after every op, so when another process takes a
core every op waits for the thread set aside (measured: ``results/bench/README.md``); with
fewer threads than free cores nobody waits. How the waiting thread waits matters more: the CLI
shortens libgomp's spin (:mod:`arelu_cli.train.openmp`), after which two threads beside a
competitor keep about a fair share and a probe of fewer threads loses.

:func:`observe` is the pure decision (a :class:`GovernorState` and one step's tokens,
seconds and run-queue wait in, the next state out); :class:`Governor` and :func:`governed`
apply it (``torch.set_num_threads``) and read the wait from ``/proc``. The :class:`Policy`:
windows of ``window`` steps (or fewer, at least ``min_window``, once they have lasted
``window_seconds``: slow steps, where a contended window costs most, decide sooner) measured
in tokens/s, the first ``window`` steps warm-up; at ``c > 1`` threads
a window below ``drop`` x the recent best, or with more than ``busy`` of it spent waiting for
a CPU, probes ``c // 2`` for one window, kept only if faster by ``margin``; below the
maximum, the maximum is probed again after ``backoff`` steps, doubling up to
``max_backoff`` each time it loses; a probe window ends once it has taken as long as the
window before it; a quiet machine is never probed. A governed run is reproducible only to
rounding once it has switched; ``[train] threads = N`` fixes the count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from arelu_cli.train.distributed import Context


@dataclass(frozen=True)
class Policy:
    """Parameters of the governor (see the module docstring)."""

    window: int = 10
    """Steps per measured window (a probe lasts one window)."""
    window_seconds: float = 10.0
    """A window of at least ``min_window`` steps closes once it has lasted this long."""
    min_window: int = 2
    drop: float = 0.7
    """A window slower than ``drop`` x the best recent window at its count means contention."""
    busy: float = 0.25
    """A window in which the threads waited for a CPU more than this fraction of the time
    means contention (an equal-priority competitor as busy as us: about 0.5)."""
    margin: float = 0.05
    """A probed count is kept only if its tokens/s beat the current count's by this fraction."""
    history: int = 10
    """Windows the recent best at the current count looks back on."""
    backoff: int = 50
    """Steps at fewer threads before the first re-probe of the maximum (and steps after a
    lost probe before waiting alone may trigger another); doubles after each lost probe."""
    max_backoff: int = 400
    """The cap of the doubling backoff, in steps."""


@dataclass(frozen=True)
class GovernorState:
    """Where the governor stands; :attr:`threads` is the count for the next step."""

    threads: int
    top: int
    """The maximum: torch's count when training started."""
    home: int
    """The settled count (``threads`` differs from it only during a probe)."""
    recent: tuple[float, ...] = ()
    """tokens/s of the last windows at ``home`` since it was settled."""
    warmup: int = 0
    """Steps still to ignore."""
    steps: int = 0
    tokens: float = 0.0
    seconds: float = 0.0
    waited: float = 0.0
    """Sums over the open window; ``waited`` is waiting fraction x seconds."""
    home_rate: float = 0.0
    home_seconds: float = 0.0
    """tokens/s and duration of the home window before the running probe."""
    up_in: int = 0
    up_backoff: int = 0
    """Steps at ``home`` until the maximum is probed again, and that wait after the next
    lost probe of the maximum."""
    down_in: int = 0
    down_backoff: int = 0
    """Steps at ``home`` until waiting alone may trigger a probe of fewer threads, and that
    wait after the next lost probe of fewer threads."""


def initial(top: int, policy: Policy) -> GovernorState:
    """The state at the start of training: ``top`` threads, nothing measured."""
    return GovernorState(threads=top, top=top, home=top, warmup=policy.window,
                         up_backoff=policy.backoff, down_backoff=policy.backoff)


def observe(state: GovernorState, policy: Policy, tokens: float, seconds: float,
            waiting: float | None = None) -> GovernorState:
    """The state after one step of ``tokens`` tokens in ``seconds`` at ``state.threads``
    threads, during which they waited for a CPU ``waiting`` of the time (None: unknown)."""
    if state.top < 2:
        return state
    if state.warmup > 0:
        return dataclasses.replace(state, warmup=state.warmup - 1)
    probing = state.threads != state.home
    state = dataclasses.replace(
        state, steps=state.steps + 1, tokens=state.tokens + tokens,
        seconds=state.seconds + seconds, waited=state.waited + (waiting or 0.0) * seconds,
        up_in=state.up_in - (not probing), down_in=state.down_in - (not probing))
    if probing:
        if state.steps < policy.window and state.seconds < state.home_seconds:
            return state
        return _end_probe(state, policy)
    if state.steps < policy.window and (state.steps < policy.min_window
                                         or state.seconds < policy.window_seconds):
        return state
    return _end_window(state, policy, known_wait=waiting is not None)


def _closed(state: GovernorState, **changes: object) -> GovernorState:
    """``state`` with its window emptied and ``changes`` applied."""
    return dataclasses.replace(state, steps=0, tokens=0.0, seconds=0.0, waited=0.0, **changes)


def _rate(state: GovernorState) -> float:
    return state.tokens / max(state.seconds, 1e-12)


def _end_window(state: GovernorState, policy: Policy, known_wait: bool) -> GovernorState:
    """A full window at ``home``: probe fewer threads on contention, the maximum when its
    backoff is over, or record the window's speed."""
    rate, count = _rate(state), state.home
    dropped = bool(state.recent) and rate < policy.drop * max(state.recent)
    waiting = known_wait and state.waited / max(state.seconds, 1e-12) > policy.busy
    contended = dropped or (waiting and state.down_in <= 0)
    probe = None
    if count > 1 and contended:
        probe = count // 2
    elif count < state.top and state.up_in <= 0:
        probe = state.top
    if probe is not None:
        return _closed(state, threads=probe, home_rate=rate, home_seconds=state.seconds)
    return _closed(state, recent=(state.recent + (rate,))[-policy.history:])


def _end_probe(state: GovernorState, policy: Policy) -> GovernorState:
    """A finished probe: settle at the probed count if it was faster, else go home."""
    rate, probe = _rate(state), state.threads
    if rate > state.home_rate * (1.0 + policy.margin):
        return _closed(state, home=probe, recent=(rate,), up_in=policy.backoff,
                       up_backoff=min(2 * policy.backoff, policy.max_backoff), down_in=0,
                       down_backoff=policy.backoff)
    if probe > state.home:  # the maximum lost: wait longer before the next try
        return _closed(state, threads=state.home, up_in=state.up_backoff,
                       up_backoff=min(2 * state.up_backoff, policy.max_backoff),
                       recent=(state.recent + (state.home_rate,))[-policy.history:])
    # Fewer threads lost: the current speed is the new normal at home.
    return _closed(state, threads=state.home, recent=(state.home_rate,),
                   down_in=state.down_backoff,
                   down_backoff=min(2 * state.down_backoff, policy.max_backoff))


def run_delay() -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU (Linux
    ``/proc/self/task/*/schedstat``); None where the kernel does not say."""
    total = 0.0
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # a thread that has just exited
    return total


class Governor:
    """Applies :func:`observe` to the running process: measures the run-queue wait between
    calls and sets torch's thread count when the decision changes it."""

    def __init__(self, top: int, policy: Policy = Policy()) -> None:
        self.policy = policy
        self.state = initial(top, policy)
        self._mark = (run_delay(), time.perf_counter())

    @property
    def threads(self) -> int:
        return self.state.threads

    def after_step(self, tokens: float, seconds: float) -> None:
        """Record one step of ``tokens`` tokens in ``seconds``; maybe change the count."""
        delay, now = run_delay(), time.perf_counter()
        (last_delay, last_now), self._mark = self._mark, (delay, now)
        waiting = None
        if delay is not None and last_delay is not None and now > last_now:
            waiting = max(0.0, delay - last_delay) / ((now - last_now) * self.state.threads)
        before = self.state.threads
        self.state = observe(self.state, self.policy, tokens, seconds, waiting)
        if self.state.threads != before:
            torch.set_num_threads(self.state.threads)


def _openmp() -> bool:
    """Whether ATen runs its intra-op work on OpenMP, whose thread count can change at any
    time (the native pool ignores changes once it has started)."""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


@contextlib.contextmanager
def governed(setting: str | int, ctx: Context,
             policy: Policy = Policy()) -> Iterator[Governor | None]:
    """Training's thread count (``[train] threads``): an integer fixes it; ``auto`` yields a
    :class:`Governor` for a single CPU process with 2+ threads, else None (torch's count:
    under DDP a rank's step time includes waiting for the slowest rank, so its speed says
    little about its own threads; on CUDA the threads do not bound the step). torch's count
    is restored on exit."""
    before = torch.get_num_threads()
    try:
        if setting != "auto":
            torch.set_num_threads(int(setting))
            yield None
        elif ctx.distributed or ctx.device.type != "cpu" or before < 2 or not _openmp():
            yield None
        else:
            yield Governor(before, policy)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
