"""``arelu bench fused-linear``: the quick run writes a complete CSV; bad options fail in one line."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.analysis.bench_fused import METHODS, make_plan
from arelu_cli.cli import app
from arelu_cli.errors import UserError

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
    (dict(alpha=1.0), "alpha must"),
    (dict(width=0), "--d must"),
    (dict(device="tpu"), "--device"),
])
def test_bad_options_are_user_errors(kwargs, match):
    with pytest.raises(UserError, match=match):
        make_plan(**kwargs)
