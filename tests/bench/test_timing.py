"""Timing helpers: results files and columns carry the GPU's name; collections before a
measurement scan only what the benchmark made."""

import gc
import weakref
from pathlib import Path

import pytest

from arelu_cli.bench import timing


def test_the_gpu_name_goes_into_the_file_name(monkeypatch):
    monkeypatch.setattr(timing.torch.cuda, "get_device_name",
                        lambda device: "NVIDIA H100 80GB HBM3")
    assert timing.device_label(timing.torch.device("cuda")) == "NVIDIA H100 80GB HBM3"
    assert timing.device_path(Path("results/bench/loss.csv"), "cuda") == Path(
        "results/bench/loss-nvidia-h100-80gb-hbm3.csv")
    assert timing.device_path(Path("results/bench/loss.csv"), "cpu") == Path(
        "results/bench/loss.csv")
    assert timing.device_label(timing.torch.device("cpu")) == "cpu"


def test_other_load_subtracts_this_process_from_the_machine(monkeypatch):
    samples = iter([(1000, 100), (1300, 250)])  # (all CPUs' busy jiffies, this process's)
    clock = iter([10.0, 11.0])
    monkeypatch.setattr(timing, "_cpu_jiffies", lambda: next(samples))
    monkeypatch.setattr(timing.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(timing.os, "sysconf", lambda name: 100)
    with timing.OtherLoad() as load:
        pass
    assert load.cores == (300 - 150) / 100 / 1.0  # 1.5 cores by others


def test_other_load_is_none_where_proc_cannot_say(monkeypatch):
    monkeypatch.setattr(timing, "_cpu_jiffies", lambda: None)
    with timing.OtherLoad() as load:
        pass
    assert load.cores is None


def test_a_competing_process_shows_as_other_load():
    import subprocess
    import sys

    if timing._cpu_jiffies() is None:
        import pytest
        pytest.skip("no /proc on this system")
    spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        with timing.OtherLoad() as load:
            child.wait()
    finally:
        child.kill()
    assert load.cores >= 0.5  # the child spun one core (and anything else only adds)


def test_busy_warning_only_above_the_threshold():
    assert timing.busy_warning([]) is None
    assert timing.busy_warning([{"other_cpu": None}, {"x": 1}]) is None
    assert timing.busy_warning([{"other_cpu": float("nan")}]) is None
    assert timing.busy_warning([{"other_cpu": timing.BUSY_CORES}]) is None
    text = timing.busy_warning([{"other_cpu": 0.1}, {"other_cpu": 1.3}], "the step times")
    assert "1.30 CPU cores busy while the step times were measured" in text


def test_queued_time_is_per_call_with_the_setup_loop_subtracted(monkeypatch):
    """On a fake clock where ``setup`` takes 1 ms and ``fn`` 3 ms: 3 ms per call, for any
    number of calls; each call gets a fresh ``setup()``."""
    clock = [0.0]
    states = []

    def setup():
        clock[0] += 1e-3
        states.append(object())
        return states[-1]

    def fn(state):
        assert state is states[-1]
        clock[0] += 3e-3
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    for calls in (1, 10):
        states.clear()
        ms = timing.time_queued(fn, setup, timing.torch.device("cpu"), calls)
        assert abs(ms - 3.0) < 1e-9 and len(states) == 2 * calls


class _Cycle:
    def __init__(self):
        self.me = self


@pytest.fixture
def unfrozen():
    """A process whose heap is not frozen (the suite freezes what its workers imported)."""
    gc.unfreeze()
    yield
    gc.freeze()


def test_a_frozen_heap_freezes_what_exists_and_still_collects_new_garbage(unfrozen):
    """Inside the block (nested or not) what existed before is frozen and a collection frees
    the cyclic garbage made since; after the outermost block nothing stays frozen, and
    garbage made before it is collected again as usual."""
    old = _Cycle()
    old_ref = weakref.ref(old)
    assert gc.get_freeze_count() == 0
    with timing.frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with timing.frozen_heap():  # nested: no second freeze
            assert gc.get_freeze_count() == frozen
            new = _Cycle()
            new_ref = weakref.ref(new)
            del new
            gc.collect()
            assert new_ref() is None
        assert gc.get_freeze_count() == frozen
        del old
        gc.collect()
        assert old_ref() is not None  # frozen: a collection inside the block skips it
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert old_ref() is None


def test_a_freeze_made_before_the_block_stays_with_what_the_block_froze(unfrozen):
    old = _Cycle()
    old_ref = weakref.ref(old)
    gc.freeze()
    del old
    mid = _Cycle()
    mid_ref = weakref.ref(mid)
    with timing.frozen_heap():
        del mid
        new = _Cycle()
        new_ref = weakref.ref(new)
        del new
        gc.collect()
        assert new_ref() is None and mid_ref() is not None  # made before the block: frozen
    gc.collect()
    assert old_ref() is not None and mid_ref() is not None  # both freezes stay


def test_each_timing_collects_inside_one_freeze(unfrozen, monkeypatch):
    """A pair timing freezes the heap once and collects before every timed call."""
    calls = []
    monkeypatch.setattr(timing.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(timing.gc, "unfreeze", lambda: calls.append("unfreeze"))
    monkeypatch.setattr(timing.gc, "collect", lambda *a: calls.append("collect"))
    def timer(fn, setup, device):
        calls.append("time")
        return 1.0
    timing.time_pair(lambda x: x, lambda x: x, lambda: None, timing.torch.device("cpu"),
                     repeats=2, warmup=0, timer=timer)
    assert calls == ["collect", "freeze"] + ["collect", "time"] * 4 + ["unfreeze"]
