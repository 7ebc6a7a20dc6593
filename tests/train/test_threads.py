"""The thread governor: its decisions as a table of simulated machines (one character per
step: the thread count it ran at), the side effect on torch, the ``[train] threads`` key,
and the ``threads`` column of the training log."""

from __future__ import annotations

import pytest
import torch

from arelu_cli.train import log as train_log
from arelu_cli.config import load_config, parse_override
from arelu_cli.train.distributed import Context
from arelu_cli.util.errors import UserError
from arelu_cli.train.threads import Governor, Policy, governed, initial, observe, run_delay
from arelu_cli.train.loop import train

# Small windows and backoffs so that every behaviour shows within a few dozen steps: the
# first 2 steps are warm-up, then windows of 2 steps; re-probes after 4, 8, 8 ... steps.
POLICY = Policy(window=2, window_seconds=float("inf"), backoff=4, max_backoff=8, history=4)
TOKENS = 100.0

QUIET = {4: 110.0, 2: 100.0, 1: 60.0}
LOADED = {4: 15.0, 2: 18.0, 1: 50.0}
"""tokens/s by thread count; beside an equal-priority competitor 2 threads fall to 0.18x."""


def quiet(step, n):
    return QUIET[n], 0.0


def noisy(step, n):
    # Window speeds 100, 75, 100, 75 ...: 0.75 of the best is within the 0.7 tolerance.
    return (75.0 if step // 2 % 2 else 100.0) if n == 2 else QUIET[n], 0.0


def arrives(step, n):
    return quiet(step, n) if step < 10 else (LOADED[n], 0.5)


def arrives_then_leaves(step, n):
    return arrives(step, n) if step < 30 else quiet(step, n)


def from_start(step, n):
    return LOADED[n], 0.5


def waits_but_two_win(step, n):
    # A competitor that makes our threads wait, yet 2 threads stay faster than 1.
    return {2: 80.0, 1: 50.0}[n], 0.4


def slows_but_two_win(step, n):
    # Speed drops from step 10 on (contention), but 1 thread would be slower still.
    return ({2: 60.0, 1: 40.0}[n], 0.0) if step >= 10 else quiet(step, n)


def slow_first_steps(step, n):
    # Warm-up: the first steps are slow and the threads wait; they are not measured.
    return (1.0, 0.9) if step < 2 else quiet(step, n)


def unknown_wait(step, n):
    return LOADED[n], None


CASES = [
    # name, machine, steps, top, expected thread count per step
    ("quiet machine never probes", quiet, 40, 2, "2" * 40),
    ("noise within tolerance, no switch", noisy, 40, 2, "2" * 40),
    ("first steps are warm-up", slow_first_steps, 20, 2, "2" * 20),
    # Steps 10-11 run at 0.18x: probe 1 thread at 12-13, faster, kept. The maximum is
    # re-probed after 4 steps at 18, after 8 at 27 and 36 (capped); each probe of the
    # maximum ends after one step, once it has taken as long as a window at 1 thread.
    ("contention appears -> probe -> switch, re-probes back off", arrives, 40, 2,
     "2" * 12 + "1" * 6 + "2" + "1" * 8 + "2" + "1" * 8 + "2" + "111"),
    ("competitor leaves -> re-probe -> back to the maximum", arrives_then_leaves, 60, 2,
     "2" * 12 + "1" * 6 + "2" + "1" * 8 + "2" + "1" * 8 + "2" * 24),
    # No drop from a level it never had: the waiting threads trigger the probe.
    ("competitor from the start: waiting triggers the probe", from_start, 20, 2,
     "2222" + "1" * 6 + "2" + "1" * 8 + "2"),
    ("no run-queue reading and no drop: nothing to act on", unknown_wait, 20, 2, "2" * 20),
    # Waiting, but 1 thread loses each probe: probes of 2 steps after 4, 8, 8 steps.
    ("lost probes of fewer threads back off", waits_but_two_win, 40, 2,
     "2222" + "11" + "2222" + "11" + "2" * 8 + "11" + "2" * 8 + "11" + "2" * 8),
    # The probe at 12-13 loses; the slower speed becomes the reference: no more probes.
    ("lost probe resets the reference", slows_but_two_win, 40, 2,
     "2" * 12 + "11" + "2" * 26),
    ("one thread: nothing to decide", arrives, 20, 1, "1" * 20),
    # 4 threads under load: halve to 2 (faster); still waiting there: halve to 1 (faster);
    # the maximum, 4, is re-probed 4 steps later.
    ("more threads: halve while it helps", arrives, 30, 4,
     "4" * 12 + "2" * 4 + "1" * 6 + "4" + "1" * 7),
]


def _trace(machine, steps: int, top: int) -> str:
    state, counts = initial(top, POLICY), []
    for step in range(steps):
        counts.append(state.threads)
        rate, waiting = machine(step, state.threads)
        state = observe(state, POLICY, TOKENS, TOKENS / rate, waiting)
    return "".join(map(str, counts))


@pytest.mark.parametrize("name, machine, steps, top, expected", CASES,
                         ids=[case[0] for case in CASES])
def test_decisions(name, machine, steps, top, expected):
    assert _trace(machine, steps, top) == expected


def test_slow_steps_close_a_window_sooner():
    """Windows of 10 steps, or of 2+ once they have lasted 3 s: quiet steps of 1 s give
    windows of 3 steps; beside the competitor a step at 2 threads takes 5.6 s, so 2 loaded
    steps are enough to probe 1 thread (steps 12-13, faster, kept), where a 10-step window
    would run 10 slow steps first."""
    policy = Policy(window=10, window_seconds=3.0, min_window=2, backoff=50, history=4)
    state, counts = initial(2, policy), []
    for step in range(30):
        counts.append(state.threads)
        rate, waiting = arrives(step, state.threads)
        state = observe(state, policy, TOKENS, TOKENS / rate, waiting)
    # warm-up 0-9; the load arrives at step 10, so the window 10-11 is loaded (2 x 5.6 s
    # >= 3 s) and waits: the probe runs 12-13 and 1 thread stays.
    assert "".join(map(str, counts)) == "2" * 12 + "1" * 18
    slow = Policy(window=10, window_seconds=float("inf"), backoff=50, history=4)
    state, counts = initial(2, slow), []
    for step in range(30):
        counts.append(state.threads)
        rate, waiting = arrives(step, state.threads)
        state = observe(state, slow, TOKENS, TOKENS / rate, waiting)
    assert "".join(map(str, counts)) == "2" * 20 + "1" * 10  # a full 10-step window first


def test_speed_is_tokens_per_second_not_steps():
    """Windows of bigger batches take longer; the same tokens/s is no drop."""
    state = initial(2, POLICY)
    for step in range(40):
        tokens = 400.0 if step // 2 % 2 else 100.0
        state = observe(state, POLICY, tokens, tokens / 100.0, 0.0)
        assert state.threads == 2


def test_run_delay_reads_the_schedulers_accounts():
    first = run_delay()
    if first is None:
        pytest.skip("the kernel does not report run-queue delays")
    assert 0.0 <= first <= run_delay() + 1e-9


@pytest.fixture
def two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


CPU = Context(0, 1, torch.device("cpu"))


def test_governor_sets_torch_threads_and_governed_restores_them(two_threads):
    with governed("auto", CPU, POLICY) as governor:
        assert isinstance(governor, Governor) and governor.threads == 2
        for step in range(30):  # contention from step 4 on (waits measured for real)
            rate = (QUIET if step < 4 else LOADED)[governor.threads]
            governor.after_step(TOKENS, TOKENS / rate)
            assert torch.get_num_threads() == governor.threads
        assert governor.state.home == 1
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("ctx", [Context(0, 2, torch.device("cpu")),
                                 Context(0, 1, torch.device("cuda", 0))], ids=["ddp", "cuda"])
def test_no_governor_under_ddp_or_on_cuda(two_threads, ctx):
    with governed("auto", ctx) as governor:
        assert governor is None and torch.get_num_threads() == 2


def test_fixed_count_is_set_and_restored(two_threads):
    with governed(1, CPU) as governor:
        assert governor is None and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_config_key(tmp_path):
    assert load_config(None).train.threads == "auto"
    recipe = tmp_path / "r.toml"
    recipe.write_text("[train]\nthreads = 3\n")
    assert load_config(recipe).train.threads == 3
    section, key, value = parse_override("train.threads=1")
    assert load_config(None, {(section, key): value}).train.threads == 1
    assert load_config(None, {("train", "threads"): "auto"}).train.threads == "auto"


@pytest.mark.parametrize("value, message", [
    (0, "positive integer"), ("two", "'auto' or a positive integer"),
    (1.5, "must be an integer or a string"), (True, "must be an integer or a string")])
def test_bad_threads_are_user_errors(value, message):
    with pytest.raises(UserError, match=message):
        load_config(None, {("train", "threads"): value})


@pytest.mark.parametrize("setting", [1, "auto"])
def test_training_logs_the_thread_count(tiny_corpus, tiny_config, tmp_path, two_threads,
                                        setting):
    train(tiny_config(tiny_corpus, threads=setting, max_steps=4, valid_every=4, save_every=4),
          tmp_path / "r")
    log = train_log.read_log(tmp_path / "r" / "log.csv")
    counts = log["threads"].dropna()
    assert len(counts) == 2  # log_every = 2
    # Fewer steps than the warm-up window: the governor has not switched yet.
    assert set(counts) == {setting if setting != "auto" else 2}
    assert torch.get_num_threads() == 2

