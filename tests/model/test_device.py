"""Tests for arelu_cli.model.device: a device name torch cannot run on is refused in one line,
by pick_device and so by every command that takes --device."""

import pytest
import torch

from arelu_cli.model.device import pick_device
from arelu_cli.util.errors import UserError


@pytest.mark.parametrize("name", ["tpu", "mps", "CUDA", "gpu", ""])
def test_unknown_devices_are_refused(name):
    with pytest.raises(UserError, match=rf"--device must be one of auto, cpu, cuda, got '{name}'"):
        pick_device(name)


def test_cpu_and_auto():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_generate_refuses_tpu(cli, lm_runs, tmp_path):
    ran = cli("generate", "--checkpoint", lm_runs["softmax"], "--unconditional", "1",
              "--device", "tpu", "--out", tmp_path / "g.txt")
    assert ran.code == 2 and "--device must be one of auto, cpu, cuda, got 'tpu'" in ran.err
    assert not (tmp_path / "g.txt").exists()
