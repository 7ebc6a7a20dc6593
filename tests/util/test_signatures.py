"""Run signatures (after sacrebleu's) and the machine a measurement names."""

import os

import pytest

from arelu_cli.util import signatures
from arelu_cli.util.signatures import Signature, machine, signature
from arelu_cli.util import cpuinfo


def test_signature_orders_known_fields_and_appends_versions():
    sig = signature(seed=1, transform="1.5-relu", tau=0.33, alpha=1.5, data="toy", extra="x")
    assert sig.startswith("transform:1.5-relu|alpha:1.5|tau:0.33|data:toy|seed:1|extra:x|")
    assert "|torch:" in sig and "|python:" in sig
    assert sig == str(Signature({"seed": 1, "transform": "1.5-relu", "tau": 0.33, "alpha": 1.5,
                                 "data": "toy", "extra": "x"}))


def test_none_fields_are_left_out():
    assert "tau:" not in signature(transform="softmax", tau=None)


def test_machine_names_the_cpu_model_and_the_usable_cpus(monkeypatch):
    signatures._cpu_model.cache_clear()
    monkeypatch.setattr(cpuinfo.Path, "read_text", lambda self, **kw: (
        "processor\t: 0\nmodel name\t: Some  CPU @ 2.0GHz\nflags\t: avx2\n"))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    try:
        assert machine("cpu") == "Some CPU @ 2.0GHz (AVX2), 3 CPUs"
    finally:
        signatures._cpu_model.cache_clear()


@pytest.mark.parametrize("flags, named", [
    ("fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 amx_tile", "AMD EPYC (AVX512-BF16)"),
    ("fpu sse2 avx avx2 avx512f avx512bw", "AMD EPYC (AVX512)"),
    ("fpu sse2 avx avx2", "AMD EPYC (AVX2)"),
    ("fpu sse2", "AMD EPYC"),  # none of the kinds: the model alone
])
def test_machine_tells_cpus_of_one_model_apart_by_their_widest_extension(monkeypatch, flags,
                                                                          named):
    signatures._cpu_model.cache_clear()
    monkeypatch.setattr(cpuinfo.Path, "read_text", lambda self, **kw: (
        f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {flags}\n"))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    try:
        assert machine("cpu") == f"{named}, 2 CPUs"
    finally:
        signatures._cpu_model.cache_clear()


def test_machine_without_proc_cpuinfo_falls_back_to_platform(monkeypatch):
    signatures._cpu_model.cache_clear()

    def missing(self, **kw):
        raise FileNotFoundError(self)
    monkeypatch.setattr(cpuinfo.Path, "read_text", missing)
    monkeypatch.setattr(signatures.platform, "processor", lambda: "")
    monkeypatch.setattr(signatures.platform, "machine", lambda: "x86_64")
    try:
        assert machine().startswith("x86_64, ")
    finally:
        signatures._cpu_model.cache_clear()
