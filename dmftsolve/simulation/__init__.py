"""The reference finite-d gradient-descent simulator.

* :mod:`dmftsolve.simulation.kernels` — the blocked GD pass over ``X`` and the Hessian of ``L``;
* :mod:`dmftsolve.simulation.trials` — the random layout of a trial (public, for exact replays);
* :mod:`dmftsolve.simulation.simulator` — GD on sampled data, overlaps, losses, Hessian eigenpairs;
* :mod:`dmftsolve.simulation.sweeps` — sweeps over δ × trials through any executor.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "SimulationResult": "dmftsolve.simulation.simulator",
    "simulate": "dmftsolve.simulation.simulator",
    "simulate_shared": "dmftsolve.simulation.simulator",
    "replay_trial": "dmftsolve.simulation.trials",
    "trial_seed": "dmftsolve.simulation.trials",
    "initial_weights": "dmftsolve.simulation.trials",
    "gd_step": "dmftsolve.simulation.kernels",
    "gd_step_batch": "dmftsolve.simulation.kernels",
    "SweepResult": "dmftsolve.simulation.sweeps",
    "sweep": "dmftsolve.simulation.sweeps",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
