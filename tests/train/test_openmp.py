"""The CLI's libgomp spin: set before torch loads, never over a user's setting; and the
environment of a process that must wait at libgomp's defaults."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from arelu_cli.train import openmp


@pytest.mark.parametrize("environ, loaded, expected", [
    ({}, {}, openmp.SPINCOUNT),                              # nothing set: the short spin
    ({"GOMP_SPINCOUNT": "300000"}, {}, "300000"),              # the user's count is kept
    ({"OMP_WAIT_POLICY": "PASSIVE"}, {}, None),               # so is the user's policy
    ({}, {"torch": object()}, None),                          # too late: libgomp has read it
])
def test_short_spin_sets_the_count_only_where_it_takes_effect(environ, loaded, expected):
    before = dict(environ)
    changed = openmp.short_spin(environ, loaded)
    assert environ.get("GOMP_SPINCOUNT") == expected
    assert changed == (environ != before)


def test_default_wait_drops_only_the_wait_variables():
    environ = {"GOMP_SPINCOUNT": "1000", "OMP_WAIT_POLICY": "ACTIVE", "PATH": "/bin",
               "OMP_NUM_THREADS": "2"}
    assert openmp.default_wait(environ) == {"PATH": "/bin", "OMP_NUM_THREADS": "2"}


def test_the_cli_sets_the_spin_before_it_imports_torch():
    """Importing the CLI (as ``arelu`` and ``python -m arelu_cli.cli`` do first) sets the
    variable; :func:`short_spin` sets nothing once torch is loaded, so the variable being set
    means libgomp, which torch loads later, reads it."""
    environ = openmp.default_wait(os.environ)
    code = "import os; import arelu_cli.cli; print(os.environ.get('GOMP_SPINCOUNT'))"
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [openmp.SPINCOUNT]
