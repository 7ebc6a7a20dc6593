"""The one reader of /proc/cpuinfo: model name and flags, or nothing."""

from arelu_cli.util import cpuinfo


def test_model_and_flags_of_the_first_processor(monkeypatch):
    monkeypatch.setattr(cpuinfo.Path, "read_text", lambda self, **kw: (
        "processor\t: 0\nmodel name\t: Some  CPU\nflags\t\t: fpu avx2 fma\n"
        "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n"))
    assert cpuinfo.cpuinfo() == ("Some CPU", {"fpu", "avx2", "fma"})


def test_no_cpuinfo_gives_no_model_and_no_flags(monkeypatch):
    def missing(self, **kw):
        raise FileNotFoundError(self)
    monkeypatch.setattr(cpuinfo.Path, "read_text", missing)
    assert cpuinfo.cpuinfo() == (None, set())
