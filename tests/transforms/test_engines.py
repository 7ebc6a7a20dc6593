"""Tests for transforms.engines and the choice in alpha_relu_kernels: set_engine, the context
manager, the variable read once, the fallback to eager, the announced C++ build."""

import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import arelu_cli.transforms as T
from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms import _cpp_kernels


# One interpreter for both import-time tests (an interpreter start with torch is seconds of
# CPU): each scenario drops every arelu_cli module and imports the package again under its
# environment, as a fresh process would; torch stays imported, it reads no ARELU_ variable.
_IMPORTS = """
import json, os, sys

def fresh(engine):
    for name in [m for m in sys.modules if m.split(".")[0] == "arelu_cli"]:
        del sys.modules[name]
    os.environ.pop("ARELU_ENGINE", None)
    if engine is not None:
        os.environ["ARELU_ENGINE"] = engine
    from arelu_cli import transforms
    return transforms

T = fresh(None)
os.environ["ARELU_ENGINE"] = "cpp"
later = [m for m in ("arelu_cli.cli", "arelu_cli.util.errors", "arelu_cli.config", "typer", "rich",
                     "pandas", "scipy", "entmax") if m in sys.modules]
print(json.dumps({"read_once": [T.get_engine(), later]}))
T = fresh("fast")  # the import itself works
try:
    T.get_engine()
    first = None
except ValueError as err:
    first = str(err)
with T.engine("eager"):
    inside = T.get_engine()
print(json.dumps({"bad": [first, inside, T.set_engine("cpp"), T.get_engine()]}))
"""


@pytest.fixture(scope="module")
def imported() -> dict:
    """What :data:`_IMPORTS` saw, by scenario."""
    clean = {k: v for k, v in os.environ.items() if k != "ARELU_ENGINE"}
    result = subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True,
                            env=clean)
    assert result.returncode == 0, result.stderr
    return {k: v for line in result.stdout.splitlines() for k, v in json.loads(line).items()}


def test_set_engine_returns_the_previous_one_and_refuses_unknown_names():
    T.set_engine("auto")
    assert T.set_engine("eager") == "auto"
    assert T.get_engine() == "eager"
    with pytest.raises(ValueError, match=r"engine must be one of auto, eager, compiled, cpp, "
                                         r"triton, got 'fast'"):
        T.set_engine("fast")
    assert T.get_engine() == "eager"  # a refused name changes nothing


def test_the_context_manager_restores_on_exit_nested_and_after_an_error():
    T.set_engine("cpp")
    with T.engine("eager") as name:
        assert name == "eager" and T.get_engine() == "eager"
        with T.engine("compiled"):
            assert T.get_engine() == "compiled"
        assert T.get_engine() == "eager"
    assert T.get_engine() == "cpp"
    with pytest.raises(RuntimeError, match="inside"):
        with T.engine("eager"):
            raise RuntimeError("inside")
    assert T.get_engine() == "cpp"
    with pytest.raises(ValueError):
        with T.engine("nope"):
            pass
    assert T.get_engine() == "cpp"


def test_each_engine_falls_back_to_eager_where_it_cannot_run(monkeypatch):
    z = torch.zeros(4, 4)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with T.engine("triton"):
        assert kernels.engine_for(z) == "eager"  # a CPU tensor, no interpreter
    with T.engine("compiled"):
        assert kernels.engine_for(z) == "compiled"
        assert kernels.engine_for(z.double()) == "eager"
    with T.engine("eager"):
        assert kernels.engine_for(z) == "eager"
    with T.engine("auto"):
        assert kernels.engine_for(z) == ("cpp" if _cpp_kernels.available() else "eager")


def test_every_engine_gives_the_eager_loss_and_gradient():
    z = torch.randn(6, 50, generator=torch.Generator().manual_seed(0)) * 2
    y = torch.randint(0, 50, (6,), generator=torch.Generator().manual_seed(1))
    out = {}
    for name in ("eager", "cpp", "triton", "auto"):  # compiled: test_alpha_relu
        with T.engine(name):
            x = z.clone().requires_grad_(True)
            loss = T.alpha_relu_loss(x, y, 1.5, 0.3)
            out[name] = (loss, torch.autograd.grad(loss, x)[0])
    for name, (loss, grad) in out.items():
        torch.testing.assert_close(loss, out["eager"][0], msg=name)
        torch.testing.assert_close(grad, out["eager"][1], msg=name)


def test_the_variable_is_read_once_and_only_torch_is_imported(imported):
    assert imported["read_once"] == ["auto", []]


def test_a_bad_variable_fails_at_first_use_naming_it_and_set_engine_still_works(imported):
    assert imported["bad"] == [
        "ARELU_ENGINE must be one of auto, eager, compiled, cpp, triton, got 'fast'",
        "eager", "fast", "cpp"]


@pytest.fixture
def fake_build(monkeypatch, tmp_path):
    """``build_cpp`` with the compiler replaced by a stub that writes the library file."""
    from torch.utils import cpp_extension

    calls = []

    def load_inline(name, build_directory, **_):
        calls.append(build_directory)
        (tmp_path / "done").write_text("")

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpp_extension, "load_inline", load_inline)
    monkeypatch.setattr(cpp_extension, "verify_ninja_availability", lambda: None)
    monkeypatch.setattr(_cpp_kernels, "_state", {"ops": None, "failed": False})
    return calls


def test_a_compile_is_announced_once_and_done_ahead_of_time(fake_build):
    with pytest.warns(UserWarning, match=r"arelu: compiling the C\+\+ alpha-ReLU kernels .*"
                                         r"about 10 s, once"):
        assert T.build_cpp() is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert T.build_cpp() is True  # built: neither a second build nor a second word
    assert len(fake_build) == 1


def test_loading_a_cached_build_says_nothing(fake_build, tmp_path):
    folder = _cpp_kernels._build_directory(_cpp_kernels._isa_flags())
    (folder / "arelu_alpha_relu_cpu.so").write_bytes(b"")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert T.build_cpp() is True
    assert fake_build == [str(folder)]
