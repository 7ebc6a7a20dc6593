"""``arelu bench loss``: the quick run writes a complete CSV; bad options fail in one line."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.bench.loss import DEFAULT_TRANSFORMS, make_plan
from arelu_cli.cli import app

COLUMNS = {"transform", "variant", "mode", "n", "v", "dtype", "device", "median_ms",
           "softmax_ms", "ratio", "peak_mib", "copies", "floor_ms", "engine", "status",
           "gb_per_s", "floor_gb_per_s",
           "signature"}


def test_quick_bench_writes_a_row_per_loss_and_mode(tmp_path):
    """--quick's methods and modes (every loss, both alpha-ReLU variants) on a tiny case: the
    rows and columns do not depend on the size, and the quick size alone took minutes on a
    loaded 2-core machine."""
    out = tmp_path / "loss.csv"
    result = CliRunner().invoke(app, ["bench", "loss", "--quick", "--sizes", "32x300",
                                      "--repeats", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert COLUMNS <= set(frame.columns)
    assert set(frame["transform"]) == set(DEFAULT_TRANSFORMS)
    grad_rows = frame[frame["mode"] == "fwd+bwd"]
    assert set(grad_rows["variant"]) == {"default", "reuse_logits"}
    assert (frame["status"] == "ok").all()
    assert (frame["median_ms"] > 0).all() and (frame["ratio"] > 0).all()
    assert frame["signature"].str.contains("torch:").all()
    assert (frame["n"] == 32).all() and (frame["v"] == 300).all()
    assert "x CE" in result.output


@pytest.mark.parametrize("kwargs, match", [
    (dict(sizes="2048by4"), "--sizes"),
    (dict(dtypes="float8"), "unknown dtype"),
    (dict(modes="backward"), "unknown mode"),
    (dict(transforms="0.5-relu"), "outside"),
    (dict(device="tpu"), "--device"),
    (dict(variants="default,fastest"), "unknown variant 'fastest'"),
    (dict(max_seconds=-1), "--max-seconds"),
    (dict(max_seconds=float("nan")), "--max-seconds"),
])
def test_bad_options_are_user_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):  # UserError, or the registry's ValueError
        make_plan(**kwargs)


def test_a_missing_package_gives_a_not_installed_row(tmp_path, monkeypatch):
    """The Liger-Kernel row of a GPU run, on CPU with tiny sizes: every other row is timed
    and carries the device's name and the copy bandwidth measured in the same run."""
    from arelu_cli.bench import loss as bench_loss

    monkeypatch.setitem(bench_loss.EXTERNAL, "liger",
                        ("arelu_not_a_module", "pip install liger-kernel"))
    plan = bench_loss.BenchPlan(
        methods=(bench_loss.Method("softmax"), bench_loss.Method("softmax", "liger")),
        sizes=((16, 300),), dtypes=("float32",), modes=("fwd+bwd",), repeats=1, device="cpu",
        threads=1, max_seconds=1.0)
    frame = bench_loss.run(plan, tmp_path / "loss.csv")
    written = set(pd.read_csv(tmp_path / "loss.csv"))
    assert COLUMNS | {"gpu", "copy_ms", "copy_gb_per_s"} <= written
    liger = frame[frame["variant"] == "liger"]
    assert list(liger["status"]) == ["not installed (pip install liger-kernel)"]
    timed = frame[frame["variant"] != "liger"]
    assert (timed["status"] == "ok").all() and (timed["copy_gb_per_s"] > 0).all()
    assert (frame["gpu"] == "cpu").all()


def test_cuda_defaults_are_the_gpu_cases(monkeypatch):
    from arelu_cli.bench import loss as bench_loss

    monkeypatch.setattr(bench_loss.torch.cuda, "is_available", lambda: True)
    plan = make_plan(device="cuda")
    assert plan.sizes == tuple((n, v) for n in (8192, 32768) for v in (32768, 131072, 262144))
    assert plan.dtypes == ("bfloat16",)
    assert {(m.transform, m.variant) for m in plan.methods} >= {
        ("softmax", "default"), ("softmax", "compiled"), ("softmax", "liger"),
        ("1.5-relu", "default"), ("1.5-relu", "reuse_logits")}


def test_variants_pick_the_methods(monkeypatch):
    """``--variants`` keeps only the named variants of every transform, in their run order;
    liger asked for on CPU still gets its row (saying it needs CUDA)."""
    from arelu_cli.bench import loss as bench_loss

    monkeypatch.setattr(bench_loss.torch.cuda, "is_available", lambda: True)
    plan = make_plan(device="cuda", variants="liger,reuse_logits,default")
    assert [(m.transform, m.variant) for m in plan.methods] == [  # alpha-ReLU first on CUDA
        ("1.5-relu", "default"), ("1.5-relu", "reuse_logits"),
        ("softmax", "default"), ("softmax", "liger")]
    plan = make_plan(device="cpu", transforms="softmax,1.5-relu", variants="liger,eager")
    assert [(m.transform, m.variant) for m in plan.methods] == [
        ("softmax", "liger"), ("1.5-relu", "eager")]
    default = make_plan(device="cpu", transforms="softmax,1.5-relu")
    assert ("softmax", "liger") not in {(m.transform, m.variant) for m in default.methods}


def test_a_cold_first_call_of_either_side_is_never_timed():
    """A first call compiles or loads kernels. With one repeat, a cold cross-entropy was the
    whole of its median on the first GPU run (34.9 ms for 1.4 ms: a ratio of 0.05)."""
    import time

    import torch

    from arelu_cli.bench import loss as bench_loss

    def cold_once():
        calls = []

        def fn(_state):
            calls.append(None)
            if len(calls) == 1:
                time.sleep(0.3)
        return fn, calls

    candidate, ours = cold_once()
    baseline, theirs = cold_once()
    plan = make_plan(quick=True, repeats=1, max_seconds=0.1)
    pair, queued, _ = bench_loss._timed(plan, candidate, baseline, lambda: None,
                                        torch.device("cpu"))
    assert pair.repeats == 1 and len(theirs) == 2 and queued is None  # CUDA only
    assert pair.ms < 100 and pair.baseline_ms < 100, pair


def test_a_baseline_out_of_memory_times_the_candidate_alone():
    import torch

    from arelu_cli.bench import loss as bench_loss

    def baseline(_state):
        raise torch.OutOfMemoryError("CUDA out of memory")
    pair, _, _ = bench_loss._timed(make_plan(quick=True, repeats=2), lambda _s: None,
                                   baseline, lambda: None, torch.device("cpu"))
    assert pair.repeats == 2 and pair.ms >= 0 and pair.baseline_ms != pair.baseline_ms


def test_on_cuda_the_queued_columns_pair_both_sides_or_time_the_candidate_alone(monkeypatch):
    """The back-to-back timings (``queued_*``), with the timer replaced by a fake that says
    which side it timed: paired like the single calls, at most ``QUEUED_REPEATS`` times;
    where cross-entropy ran out of memory, the candidate alone; out of memory in the loop
    itself, no queued columns (the single-call times stay)."""
    import torch

    from arelu_cli.bench import loss as bench_loss

    from arelu_cli.bench import timing

    def candidate(_state):
        pass

    def baseline(_state):
        pass

    seen = []

    def fake_queued(fn, setup, device, calls):
        seen.append((fn, calls, device.type))
        return 1.0 if fn is candidate else 4.0
    monkeypatch.setattr(timing, "time_queued", fake_queued)
    cuda = torch.device("cuda")
    pair = timing.PairTiming(2.0, 3.0, 0.67, 9)
    queued = bench_loss._queued(pair, candidate, baseline, lambda: None, cuda)
    assert (queued.ms, queued.baseline_ms, queued.ratio) == (1.0, 4.0, 0.25)
    assert queued.repeats == bench_loss.QUEUED_REPEATS == 5
    assert len(seen) == 10 and {calls for _, calls, _ in seen} == {bench_loss.QUEUED_CALLS}
    seen.clear()
    alone = bench_loss._queued(timing.PairTiming(2.0, float("nan"), float("nan"), 3),
                               candidate, baseline, lambda: None, cuda)
    assert alone.ms == 1.0 and alone.baseline_ms != alone.baseline_ms and alone.repeats == 3
    assert [fn for fn, _, _ in seen] == [candidate] * 3

    def out_of_memory(*_args, **_kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")
    monkeypatch.setattr(timing, "time_queued", out_of_memory)
    assert bench_loss._queued(pair, candidate, baseline, lambda: None, cuda) is None
    assert bench_loss._queued(pair, candidate, baseline, lambda: None,
                              torch.device("cpu")) is None
