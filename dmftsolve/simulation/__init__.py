"""The reference finite-d gradient-descent simulator.

* :mod:`dmftsolve.simulation.simulator` — GD on sampled data, overlaps, losses, Hessian eigenpairs;
* :mod:`dmftsolve.simulation.sweeps` — sweeps over δ × trials through any executor.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "SimulationResult": "dmftsolve.simulation.simulator",
    "simulate": "dmftsolve.simulation.simulator",
    "SweepResult": "dmftsolve.simulation.sweeps",
    "sweep": "dmftsolve.simulation.sweeps",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
