"""``[train] precision`` (:mod:`arelu_cli.train.precision`): ``auto`` is bf16 only where the
hardware computes it natively (CUDA, a CPU with AVX512-BF16 or AMX), fp32 elsewhere; an
explicit bf16 on a CPU without it warns once, with its cost; no shipped recipe forces bf16."""

from __future__ import annotations

import pytest
import torch

from arelu_cli.config import RECIPES, load_config
from arelu_cli.train import precision
from arelu_cli.util import cpuinfo


@pytest.fixture
def cpu_flags(monkeypatch):
    """``cpu_flags(*flags)``: pretend /proc/cpuinfo lists ``flags``; the warning unsaid."""
    def pretend(*flags: str) -> None:
        text = f"processor\t: 0\nflags\t\t: fpu sse2 avx2 {' '.join(flags)}\n"
        monkeypatch.setattr(cpuinfo.Path, "read_text", lambda self, **kw: text)
        precision.cpu_has_bf16.cache_clear()
    monkeypatch.setattr(precision, "_warned", set())
    yield pretend
    precision.cpu_has_bf16.cache_clear()


@pytest.mark.parametrize("flags, cpu", [((), "fp32"), (("avx512_bf16",), "bf16"),
                                        (("amx_bf16", "amx_tile"), "bf16"),
                                        (("avx512f", "avx512bw"), "fp32")])
def test_auto_is_bf16_only_where_the_hardware_has_it(cpu_flags, flags, cpu):
    cpu_flags(*flags)
    assert precision.resolve("auto", "cpu") == cpu
    assert precision.resolve("auto", "cuda") == "bf16"
    assert precision.resolve("fp32", "cuda") == "fp32" and precision.resolve("bf16", "cpu") == "bf16"


def test_this_machines_cpuinfo_is_read():
    flags = open("/proc/cpuinfo").read() if cpuinfo.Path("/proc/cpuinfo").exists() else ""
    precision.cpu_has_bf16.cache_clear()
    assert precision.cpu_has_bf16() == ("avx512_bf16" in flags or "amx_bf16" in flags)


def test_an_explicit_bf16_on_an_emulating_cpu_warns_once_with_the_cost(cpu_flags, capsys):
    cpu_flags()
    context = precision.autocast("bf16", "cpu")
    precision.autocast("bf16", "cpu")
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "far slower than fp32" in err
    assert "use precision \"auto\"" in err
    with context():
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.is_autocast_enabled("cpu")
    with precision.autocast("auto", "cpu")():
        assert not torch.is_autocast_enabled("cpu")
    cpu_flags("avx512_bf16")
    precision.autocast("bf16", "cpu")
    assert capsys.readouterr().err == ""  # native: nothing to say


@pytest.mark.parametrize("recipe", sorted(p.stem for p in RECIPES.glob("*.toml")
                                           if p.stem != "ptb-convert"))  # its own tables, fp32
def test_no_recipe_forces_bf16(recipe):
    """The recipes let the hardware choose; those whose committed runs are fp32 (the studies
    and the main job's toy) say fp32, so that a bf16 machine reuses them instead of refusing
    them, and so do the LM study's recipes, whose runs span sessions on machines with and
    without native bf16."""
    found = load_config(RECIPES / f"{recipe}.toml").train.precision
    studies = {"toy", "multi30k-study", "multi30k-attention", "toy-attention", "ptb-lm",
               "tinyshakespeare-lm", "ptb-lm-study", "tinyshakespeare-lm-study"}
    assert found == ("fp32" if recipe in studies else "auto")
