"""``arelu bench fused-linear``: the quick run writes a complete CSV; bad options fail in one line."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.bench.fused import METHODS, make_plan
from arelu_cli.cli import app

COLUMNS = {"method", "n", "v", "d", "dtype", "device", "alpha", "tau", "engine", "median_ms",
           "unfused_ms", "ratio", "x_matmul", "matmul_ms", "peak_mib", "unfused_peak_mib",
           "memory_ratio", "status", "signature"}


def test_quick_bench_writes_a_row_per_method(tmp_path):
    out = tmp_path / "fused.csv"
    result = CliRunner().invoke(app, ["bench", "fused-linear", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert COLUMNS <= set(frame.columns)
    assert list(frame["method"]) == list(METHODS)
    assert (frame["status"] == "ok").all()
    assert (frame["median_ms"] > 0).all() and (frame["unfused_ms"] > 0).all()
    assert (frame["tau"] > 0).all()  # the analytic estimate: a sparse support
    assert "fused" in result.output


@pytest.mark.parametrize("kwargs, match", [
    (dict(sizes="8192by4"), "--sizes"),
    (dict(dtype="float8"), "unknown dtype"),
    (dict(alpha=1.0), r"alpha 1.0 is outside \[1.05, 2\]"),
    (dict(width=0), "--d must"),
    (dict(device="tpu"), "--device"),
    (dict(methods="fused,fast"), "unknown method 'fast'"),
    (dict(chunk=0), "--chunk must"),
    (dict(vocab_chunk=0), "--vocab-chunk must"),
])
def test_bad_options_are_user_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):  # UserError, or the library's ValueError
        make_plan(**kwargs)


def test_missing_packages_give_not_installed_rows(tmp_path, monkeypatch):
    """The Liger-Kernel and Cut Cross-Entropy rows of a GPU run, on CPU with tiny sizes."""
    from arelu_cli.bench import fused as bench_fused

    monkeypatch.setitem(bench_fused.EXTERNAL, "liger",
                        ("arelu_not_a_module", "pip install liger-kernel"))
    monkeypatch.setitem(bench_fused.EXTERNAL, "cce",
                        ("arelu_not_a_module", "pip install cut-cross-entropy"))
    monkeypatch.setenv("ARELU_ENGINE", "eager")  # no C++ build for a tiny case
    plan = bench_fused.FusedPlan(sizes=((32, 300),), widths=(8,), dtype="float32", alpha=1.5,
                                 repeats=1, device="cpu", methods=("fused", "liger", "cce"))
    frame = bench_fused.run(plan, tmp_path / "fused.csv")
    assert (COLUMNS | {"gpu"}) <= set(pd.read_csv(tmp_path / "fused.csv"))
    assert list(frame["status"]) == ["ok", "not installed (pip install liger-kernel)",
                                     "not installed (pip install cut-cross-entropy)"]
    assert (frame["gpu"] == "cpu").all() and (frame["d"] == 8).all()


def test_cuda_defaults_are_the_gpu_cases(monkeypatch):
    from arelu_cli.bench import fused as bench_fused

    monkeypatch.setattr(bench_fused.torch.cuda, "is_available", lambda: True)
    plan = make_plan(device="cuda")
    assert plan.sizes == tuple((n, v) for n in (16384, 65536) for v in (32768, 131072, 262144))
    assert plan.widths == (2048, 4096) and plan.dtype == "bfloat16"
    assert plan.methods == ("fused", "fused-tokens", "fused-tiles", "liger", "cce")
    assert make_plan(device="cuda", methods="fused,liger").methods == ("fused", "liger")


def test_methods_pick_the_rows_and_each_runs_its_path(tmp_path, monkeypatch):
    """``--methods fused-tiles,fused-tokens-dense,unfused,fused``: those rows in that order;
    each fused method passes its own options (``fused``: none, the library's defaults) and
    the ``--chunk``/``--vocab-chunk`` asked for (the token loop takes no ``vocab_chunk``);
    ``unfused`` gets a row of its own, its time over itself."""
    from arelu_cli.bench import fused as bench_fused

    seen = []
    real = bench_fused.linear_alpha_relu_loss

    def spy(*args, **kwargs):
        seen.append(tuple(sorted(kwargs.items())))
        return real(*args, **kwargs)
    monkeypatch.setattr(bench_fused, "linear_alpha_relu_loss", spy)
    monkeypatch.setenv("ARELU_ENGINE", "eager")
    out = tmp_path / "fused.csv"
    result = CliRunner().invoke(app, ["bench", "fused-linear", "--quick", "--sizes", "32x300",
                                      "--d", "8", "--repeats", "1", "--device", "cpu",
                                      "--methods", "fused-tiles,fused-tokens-dense,unfused,fused",
                                      "--chunk", "8", "--vocab-chunk", "64", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame["method"]) == ["fused-tiles", "fused-tokens-dense", "unfused", "fused"]
    assert (frame["status"] == "ok").all()
    assert set(seen) == {(("chunk", 8), ("skip_zeros", True), ("vocab_chunk", 64)),
                         (("chunk", 8), ("loop", "tokens"), ("skip_zeros", False)),
                         (("chunk", 8), ("vocab_chunk", 64))}
    assert frame["signature"].str.contains("chunk:8").all()
    assert frame["signature"].str.contains("vocab_chunk:64").all()
    unfused = frame[frame["method"] == "unfused"].iloc[0]
    assert unfused["ratio"] == 1.0 and unfused["median_ms"] == unfused["unfused_ms"]
    # each row names the tile it ran with: tokens x columns (the token loop: all columns)
    assert list(frame["tile"].fillna("-")) == ["8x64", "8x300", "-", "8x64"]


def test_rows_name_the_tile_of_the_librarys_rule(tmp_path, monkeypatch):
    """Without --chunk/--vocab-chunk the ``tile`` column is what the library's rule gives
    for the case (so a table can say which tile a ratio belongs to)."""
    from arelu_cli.transforms.fused_linear import tile_shape

    monkeypatch.setenv("ARELU_ENGINE", "eager")
    out = tmp_path / "fused.csv"
    result = CliRunner().invoke(app, ["bench", "fused-linear", "--sizes", "40x3000", "--d", "8",
                                      "--repeats", "1", "--device", "cpu", "--methods",
                                      "fused,fused-tokens", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    vocab, tokens = (tile_shape(40, 8, 3000, "cpu", False, loop) for loop in ("vocab", "tokens"))
    assert list(frame["tile"]) == [f"{vocab[0]}x{vocab[1]}", f"{tokens[0]}x{tokens[1]}"]
