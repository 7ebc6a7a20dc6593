"""``arelu bench loss``: the quick run writes a complete CSV; bad options fail in one line."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from arelu_cli.analysis.bench_loss import DEFAULT_TRANSFORMS, make_plan
from arelu_cli.cli import app
from arelu_cli.errors import UserError

COLUMNS = {"transform", "variant", "mode", "n", "v", "dtype", "device", "median_ms",
           "softmax_ms", "ratio", "peak_mib", "copies", "floor_ms", "engine", "status",
           "gb_per_s", "floor_gb_per_s",
           "signature"}


def test_quick_bench_writes_a_row_per_loss_and_mode(tmp_path):
    out = tmp_path / "loss.csv"
    result = CliRunner().invoke(app, ["bench", "loss", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert COLUMNS <= set(frame.columns)
    assert set(frame["transform"]) == set(DEFAULT_TRANSFORMS)
    grad_rows = frame[frame["mode"] == "fwd+bwd"]
    assert set(grad_rows["variant"]) == {"default", "reuse_logits"}
    assert (frame["status"] == "ok").all()
    assert (frame["median_ms"] > 0).all() and (frame["ratio"] > 0).all()
    assert frame["signature"].str.contains("torch:").all()
    assert "x CE" in result.output


@pytest.mark.parametrize("kwargs, match", [
    (dict(sizes="2048by4"), "--sizes"),
    (dict(dtypes="float8"), "unknown dtype"),
    (dict(modes="backward"), "unknown mode"),
    (dict(transforms="0.5-relu"), "outside"),
    (dict(device="tpu"), "--device"),
])
def test_bad_options_are_user_errors(kwargs, match):
    with pytest.raises(UserError, match=match):
        make_plan(**kwargs)
