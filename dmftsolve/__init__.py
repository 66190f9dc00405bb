"""dmftsolve: DMFT, Hessian spectra and feature-learning thresholds for GD on two-layer networks.

The problem object (:mod:`dmftsolve.problem`) and the solvers, in five sub-packages
along the flow of data, have their public names re-exported here lazily, so
``import dmftsolve`` stays fast (and the command line sets its signal handlers
before anything heavy is imported):

* :mod:`dmftsolve.dynamics` — the DMFT of GD and its fixed point;
* :mod:`dmftsolve.hessian` — bulk spectrum and outliers of the Hessian;
* :mod:`dmftsolve.thresholds` — easy/hard directions, ``δ_alg`` and ``δ_NN``;
* :mod:`dmftsolve.simulation` — the finite-d GD simulator and sweeps;
* :mod:`dmftsolve.finite_d` — GD's finite-d success probability and δ_50 from DMFT draws.
"""

from __future__ import annotations

from dmftsolve._lazy import lazy_getattr
from dmftsolve._version import __version__ as __version__

_LAZY = {
    "Init": "dmftsolve.problem",
    "Loss": "dmftsolve.problem",
    "Network": "dmftsolve.problem",
    "Problem": "dmftsolve.problem",
    "Target": "dmftsolve.problem",
    "Training": "dmftsolve.problem",
    "check_delta": "dmftsolve.checks",
    "SolverError": "dmftsolve.results",
    "Status": "dmftsolve.results",
    "solve_dmft": "dmftsolve.dynamics.dmft",
    "DMFTSettings": "dmftsolve.dynamics.dmft",
    "simulate": "dmftsolve.simulation.simulator",
    "sweep": "dmftsolve.simulation.sweeps",
    "alg_threshold": "dmftsolve.thresholds.weak_recovery",
    "staged_alg_threshold": "dmftsolve.thresholds.staged",
    "bulk_spectrum": "dmftsolve.hessian.spectrum",
    "outliers": "dmftsolve.hessian.outlier_equation",
    "split_directions": "dmftsolve.thresholds.directions",
    "delta_nn": "dmftsolve.thresholds.hessian_threshold",
    "ThresholdSettings": "dmftsolve.thresholds.settings",
    "restricted": "dmftsolve.thresholds.restricted_hessian",
    "training_outliers": "dmftsolve.hessian.outlier_equation",
    "solve_fixed_point": "dmftsolve.dynamics.fixed_point",
    "Law": "dmftsolve.hessian.law",
    "hard_spectrum": "dmftsolve.thresholds.restricted_hessian",
    "transition": "dmftsolve.finite_d",
    "success_probability": "dmftsolve.finite_d",
    "population_loss": "dmftsolve.population",
    "expect": "dmftsolve.gaussian",
}

__all__ = list(_LAZY)
__getattr__ = lazy_getattr(__name__, _LAZY)
