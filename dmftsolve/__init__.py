"""dmftsolve: DMFT, Hessian spectra and feature-learning thresholds for GD on two-layer networks.

The problem object is imported eagerly; solvers live in their own modules
(``dmftsolve.dmft``, ``dmftsolve.simulator``, ``dmftsolve.spectrum``,
``dmftsolve.outliers``, ``dmftsolve.thresholds``, ``dmftsolve.alg_threshold``)
and are re-exported here lazily, so ``import dmftsolve`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from dmftsolve.problem import Init, Loss, Network, Problem, Target, Training, check_delta
from dmftsolve.results import SolverError, Status

_LAZY = {
    "solve_dmft": "dmftsolve.dmft",
    "simulate": "dmftsolve.simulator",
    "sweep": "dmftsolve.sweep",
    "alg_threshold": "dmftsolve.alg_threshold",
    "bulk_spectrum": "dmftsolve.spectrum",
    "outliers": "dmftsolve.outliers",
    "split_directions": "dmftsolve.directions",
    "delta_nn": "dmftsolve.thresholds",
    "solve_fixed_point": "dmftsolve.fixed_point",
    "population_loss": "dmftsolve.population",
    "expect": "dmftsolve.gaussian",
}

__all__ = [
    "Init", "Loss", "Network", "Problem", "Target", "Training", "check_delta",
    "SolverError", "Status", *_LAZY,
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dmftsolve' has no attribute {name!r}")
