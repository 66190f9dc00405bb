"""The dynamics of gradient descent in the proportional limit.

* :mod:`dmftsolve.dynamics.dmft` — the discrete-time DMFT of full-batch GD
  (kernels ``Q, Γ, R``, overlaps, losses, the law of the training fields), its
  settings (:class:`DMFTSettings`) and driver loop, composed of:
* :mod:`dmftsolve.dynamics.paths` — the Monte Carlo paths of the sample process;
* :mod:`dmftsolve.dynamics.innovations` — the innovations' Cholesky factor of ``Q``;
* :mod:`dmftsolve.dynamics.history` — what each path keeps of its past;
* :mod:`dmftsolve.dynamics.stein`, :mod:`dmftsolve.dynamics.pathwise` — the two
  estimators of the response ``Γ``, behind :mod:`dmftsolve.dynamics.response`;
* :mod:`dmftsolve.dynamics.parameter_side` — the deterministic kernel recursion;
* :mod:`dmftsolve.dynamics.forcing`, :mod:`dmftsolve.dynamics.stopping` — the interfaces of an
  extra force on the overlaps and of a rule that ends a solve early;
* :mod:`dmftsolve.dynamics.fixed_point` — its time-translation-invariant fixed point.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "DMFTResult": "dmftsolve.dynamics.dmft",
    "DMFTSettings": "dmftsolve.dynamics.dmft",
    "solve_dmft": "dmftsolve.dynamics.dmft",
    "Stein": "dmftsolve.dynamics.stein",
    "Pathwise": "dmftsolve.dynamics.pathwise",
    "FixedPoint": "dmftsolve.dynamics.fixed_point",
    "FixedPointSettings": "dmftsolve.dynamics.fixed_point",
    "solve_fixed_point": "dmftsolve.dynamics.fixed_point",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
