"""``arelu bench hf``: a tiny run writes one row per family x transform x vocabulary with
ratios to softmax's step (a soft-capped family included); bad options fail in one line
(exit 2)."""

import pandas as pd
import pytest

pytest.importorskip("transformers")

from typer.testing import CliRunner  # noqa: E402

from arelu_cli.bench.hf import make_plan  # noqa: E402
from arelu_cli.cli import app  # noqa: E402
from arelu_cli.util.errors import UserError  # noqa: E402


def test_tiny_bench_writes_a_row_per_transform_and_vocabulary(tmp_path):
    out = tmp_path / "hf.csv"
    result = CliRunner().invoke(app, ["bench", "hf", "--vocabs", "64,96", "--d-model", "16",
                                      "--layers", "1", "--batch", "2", "--seq", "8",
                                      "--repeats", "1", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame["transform"]) == ["softmax", "1.5-relu", "1.5-relu+fused"] * 2
    assert list(frame["vocab"]) == [64] * 3 + [96] * 3
    assert (frame["family"] == "llama").all()
    assert (frame["status"] == "ok").all() and (frame["time_ms"] > 0).all()
    assert (frame.loc[frame["transform"] == "softmax", "time_ratio"] == 1.0).all()
    assert (frame["time_ratio"] > 0).all() and (frame["tau"] > 0).all()
    assert {"peak_mib", "peak_mem_ratio", "other_cpu", "machine", "signature"} <= set(frame)
    assert frame["signature"].str.contains("transform:1.5-relu+fused", regex=False).any()
    assert not out.with_name(out.name + ".tmp").exists()


@pytest.mark.parametrize("kwargs, match", [
    (dict(vocabs=(4,)), "--vocabs"), (dict(d_model=30), "multiple of 8"),
    (dict(batch=0), "--batch"), (dict(device="tpu"), "--device"),
    (dict(families=("llama", "nosuch")), "not nosuch")])
def test_bad_options_are_user_errors(kwargs, match):
    with pytest.raises(UserError, match=match):
        make_plan(**kwargs)


def test_bad_option_is_a_user_error_before_anything_is_written(tmp_path):
    result = CliRunner().invoke(app, ["bench", "hf", "--vocabs", "32768,lots",
                                      "--out", str(tmp_path / "x.csv")])
    assert isinstance(result.exception, UserError) and "--vocabs" in str(result.exception)
    assert not (tmp_path / "x.csv").exists()


def test_families_each_get_their_rows_and_a_soft_capped_one_runs_fused(tmp_path):
    out = tmp_path / "hf.csv"
    result = CliRunner().invoke(app, ["bench", "hf", "--families", "qwen2,gemma2",
                                      "--vocabs", "64", "--d-model", "16", "--layers", "1",
                                      "--batch", "2", "--seq", "8", "--repeats", "1",
                                      "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out).set_index(["family", "transform"])
    assert (frame.loc["qwen2", "status"] == "ok").all()
    assert (frame.loc["gemma2", "status"] == "ok").all()       # its soft-cap applied fused
    assert frame["signature"].str.contains("model:gemma2-d16-l1", regex=False).any()
