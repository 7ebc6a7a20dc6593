"""Adam, Noam decay and OpenNMT-py's weight averaging."""

import pytest
import torch

from arelu_cli.config import TrainConfig
from arelu_cli.train.schedule import adam, average_weight, noam_lr, update_average


@pytest.mark.parametrize("step, expected", [
    (1, 2.0 * 512 ** -0.5 * 4000 ** -1.5),
    (4000, 2.0 * 512 ** -0.5 * 4000 ** -0.5),     # the peak
    (16000, 2.0 * 512 ** -0.5 * 16000 ** -0.5),
    (0, 2.0 * 512 ** -0.5 * 4000 ** -1.5),        # step 0 is treated as 1
])
def test_noam(step, expected):
    assert noam_lr(step, 2.0, 512, 4000) == pytest.approx(expected)


def test_noam_peaks_at_warmup():
    rates = [noam_lr(s, 2.0, 512, 100) for s in range(1, 400)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 100


def test_average_weight_starts_large_then_settles():
    assert average_weight(1, 0.0005) == pytest.approx(1 - 2 / 11)
    assert average_weight(10**6, 0.0005) == 0.0005


def test_update_average_in_place():
    avg, new = [torch.zeros(3)], [torch.ones(3)]
    update_average(avg, new, 0.25)
    assert torch.allclose(avg[0], torch.full((3,), 0.25))


def _adam_steps(optimizer: torch.optim.Adam, params: list[torch.Tensor], steps: int) -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)
        optimizer.step()


def test_adam_is_fused_on_cpu_and_makes_the_per_tensor_update():
    """Fused on CPU, with [train]'s betas and epsilon, and the same update as torch's default
    Adam up to float rounding (float64 here)."""
    t = TrainConfig(adam_beta1=0.8, adam_beta2=0.95, adam_eps=1e-7)
    start = [torch.randn(7, 5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)]
    ours = [torch.nn.Parameter(x.clone()) for x in start]
    theirs = [torch.nn.Parameter(x.clone()) for x in start]
    optimizer = adam(ours, t, lr=0.01)
    group = optimizer.param_groups[0]
    assert group["fused"] and group["betas"] == (0.8, 0.95) and group["eps"] == 1e-7
    _adam_steps(optimizer, ours, 5)
    _adam_steps(torch.optim.Adam(theirs, lr=0.01, betas=(0.8, 0.95), eps=1e-7), theirs, 5)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
        assert not torch.equal(a, torch.zeros_like(a))


def test_adam_resumes_a_state_saved_by_the_per_tensor_optimizer():
    """A checkpoint of an earlier version (torch's default Adam) loads and keeps its
    implementation, so a resumed run is not a mix of two."""
    params = [torch.nn.Parameter(torch.randn(4, 3))]
    before = torch.optim.Adam(params, lr=0.01)
    _adam_steps(before, params, 2)
    resumed = adam(params, TrainConfig())
    resumed.load_state_dict(before.state_dict())
    assert not resumed.param_groups[0]["fused"]
    assert float(resumed.state[params[0]]["step"]) == 2.0
    _adam_steps(resumed, params, 1)
    assert float(resumed.state[params[0]]["step"]) == 3.0


def test_adam_of_no_parameters_is_torchs_error():
    with pytest.raises(ValueError, match="empty parameter list"):
        adam([], TrainConfig())
