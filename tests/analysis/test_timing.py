"""Timing helpers: results files and columns carry the GPU's name."""

from pathlib import Path

from arelu_cli.analysis import timing


def test_the_gpu_name_goes_into_the_file_name(monkeypatch):
    monkeypatch.setattr(timing.torch.cuda, "get_device_name",
                        lambda device: "NVIDIA H100 80GB HBM3")
    assert timing.device_label(timing.torch.device("cuda")) == "NVIDIA H100 80GB HBM3"
    assert timing.device_path(Path("results/bench/loss.csv"), "cuda") == Path(
        "results/bench/loss-nvidia-h100-80gb-hbm3.csv")
    assert timing.device_path(Path("results/bench/loss.csv"), "cpu") == Path(
        "results/bench/loss.csv")
    assert timing.device_label(timing.torch.device("cpu")) == "cpu"
