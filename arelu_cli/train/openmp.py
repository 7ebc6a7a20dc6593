"""libgomp's barrier spin for the ``arelu`` process: short, so that a shared CPU is shared.

Not part of the paper; like the thread governor (:mod:`arelu_cli.train.threads`) it keeps
training fast beside another busy process. torch's Linux CPU wheels run their intra-op
threads on libgomp, whose threads spin ``GOMP_SPINCOUNT`` times at a barrier before they sleep
(300,000 by default: milliseconds). Beside a competitor, the thread that arrived first spins
away the share of the CPU its descheduled partner needs to reach the barrier; with a short spin
it sleeps and the partner runs. libgomp reads the variable once, when torch loads it, so the
CLI calls :func:`short_spin` before anything imports torch; a setting of the user's (either
variable) is kept. Measured in ``results/bench/README.md``. Stdlib only: it runs before torch
is imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

SPINCOUNT = "10000"
"""The spin the CLI sets: a thirtieth of libgomp's default 300,000 (libgomp itself drops to 100
when a team has more threads than CPUs). Chosen by measurement: as fast as the default on a
quiet machine, over twice as fast beside a competitor."""
VARIABLES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
"""The variables that set libgomp's wait; a user's value of either is kept."""


def short_spin(environ: MutableMapping[str, str] = os.environ,
               loaded: Mapping[str, object] = sys.modules) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPINCOUNT` in ``environ`` unless one of
    :data:`VARIABLES` is set there or torch is among the ``loaded`` modules (then libgomp has
    read its settings already and the variable would only mislead child processes). Returns
    whether it set it."""
    if "torch" in loaded or any(name in environ for name in VARIABLES):
        return False
    environ["GOMP_SPINCOUNT"] = SPINCOUNT
    return True


def default_wait(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without :data:`VARIABLES`: for a process that must wait at libgomp's
    defaults (the competitor of ``arelu bench train --under-load``, another user's job)."""
    return {name: value for name, value in environ.items() if name not in VARIABLES}
