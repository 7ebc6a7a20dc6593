"""Fixtures of the transforms' tests: the engine restored after each test, and the Triton
kernels under their CPU interpreter."""

import importlib

import pytest

from arelu_cli.transforms import engine, get_engine, set_engine

TRITON_MODULES = ("arelu_cli.transforms._triton_kernels", "arelu_cli.transforms._triton_linear")


@pytest.fixture(autouse=True)
def _restore_engine():
    """Tests choose engines with ``set_engine``; each starts from the engine before it."""
    before = get_engine()
    yield
    set_engine(before)


@pytest.fixture(scope="module")
def interpreted():
    """The Triton kernels re-decorated under the interpreter (``TRITON_INTERPRET=1``, so
    they run on CPU tensors) and alpha-ReLU's engine forced to them; afterwards the modules
    are reloaded as they were, for any later CUDA use. Yields ``_triton_kernels``."""
    pytest.importorskip("triton")
    with pytest.MonkeyPatch.context() as patch, engine("triton"):
        patch.setenv("TRITON_INTERPRET", "1")
        modules = [importlib.reload(importlib.import_module(name)) for name in TRITON_MODULES]
        yield modules[0]
    for name in TRITON_MODULES:
        importlib.reload(importlib.import_module(name))
