"""A diverging run: recorded in diverged.json, raised as one line; the gradient norm."""

import json

import pytest
import torch

from arelu_cli.util.errors import UserError
from arelu_cli.train.divergence import Diverged, diverged, grad_norm
from arelu_cli.train.run_dir import DIVERGED


def test_divergence_is_recorded_and_raised(tmp_path):
    what = {"loss": torch.tensor(float("nan")), "grad_norm": torch.tensor(float("inf"))}
    with pytest.raises(Diverged) as raised:
        diverged(tmp_path, 7, what, saved_step=6, record=True)
    message = str(raised.value)
    assert "\n" not in message and isinstance(raised.value, UserError)
    assert message.startswith("training diverged at step 7 (loss nan, grad_norm inf)")
    assert f"{tmp_path / 'last.pt'} keeps step 6; resume with: arelu train --resume" in message
    record = json.loads((tmp_path / DIVERGED).read_text())
    assert record["step"] == 7 and record["last_saved_step"] == 6
    assert record["message"] == message
    assert (record["loss"], record["grad_norm"]) == ("nan", "inf")  # strict JSON
    with pytest.raises(Diverged, match=r"no last.pt was saved yet; start again with --out"):
        diverged(tmp_path / "other", 1, {"loss": float("nan")}, saved_step=None, record=False)
    assert not (tmp_path / "other").exists()


def test_grad_norm_is_the_global_norm_and_clips():
    a, b = torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)
    a.grad, b.grad = torch.tensor([3.0, 0.0, 0.0]), torch.tensor([0.0, 4.0])
    assert float(grad_norm([a, b], 0.0)) == pytest.approx(5.0)
    assert float(grad_norm([a, b], 1.0)) == pytest.approx(5.0)  # the norm before clipping
    assert float(torch.cat([a.grad, b.grad]).norm()) == pytest.approx(1.0, rel=1e-5)
    b.grad[0] = float("nan")
    assert grad_norm([a, b], 0.0).isnan()
