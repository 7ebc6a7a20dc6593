"""Fixtures of the transforms' tests: the Triton kernels under their CPU interpreter."""

import importlib

import pytest

TRITON_MODULES = ("arelu_cli.transforms._triton_kernels", "arelu_cli.transforms._triton_linear")


@pytest.fixture(scope="module")
def interpreted():
    """The Triton kernels re-decorated under the interpreter (``TRITON_INTERPRET=1``, so
    they run on CPU tensors) and alpha-ReLU's engine forced to them; afterwards the modules
    are reloaded as they were, for any later CUDA use. Yields ``_triton_kernels``."""
    pytest.importorskip("triton")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        patch.setenv("ARELU_ENGINE", "triton")
        modules = [importlib.reload(importlib.import_module(name)) for name in TRITON_MODULES]
        yield modules[0]
    for name in TRITON_MODULES:
        importlib.reload(importlib.import_module(name))
