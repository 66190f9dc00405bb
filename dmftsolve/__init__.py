"""dmftsolve: DMFT, Hessian spectra and feature-learning thresholds for GD on two-layer networks."""

from dmftsolve.problem import Init, Loss, Network, Problem, Target, Training, check_delta
from dmftsolve.results import SolverError, Status

__all__ = [
    "Init", "Loss", "Network", "Problem", "Target", "Training", "check_delta",
    "SolverError", "Status",
]
__version__ = "0.1.0"
