"""The dynamics of gradient descent in the proportional limit.

* :mod:`dmftsolve.dynamics.dmft` — the discrete-time DMFT of full-batch GD
  (kernels ``Q, Γ, R``, overlaps, losses, the law of the training fields), its
  settings (:class:`DMFTSettings`) and driver loop;
* :mod:`dmftsolve.dynamics.stein`, :mod:`dmftsolve.dynamics.pathwise` — the two
  estimators of the response ``Γ``, behind :mod:`dmftsolve.dynamics.response`;
* :mod:`dmftsolve.dynamics.fixed_point` — its time-translation-invariant fixed point;
* :mod:`dmftsolve.dynamics.hard_overlap` — the finite-d law of the hard overlap.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "HardOverlapSettings": "dmftsolve.dynamics.hard_overlap",
    "hard_overlap_law": "dmftsolve.dynamics.hard_overlap",
    "DMFTResult": "dmftsolve.dynamics.dmft",
    "DMFTSettings": "dmftsolve.dynamics.dmft",
    "solve_dmft": "dmftsolve.dynamics.dmft",
    "FixedPoint": "dmftsolve.dynamics.fixed_point",
    "FixedPointSettings": "dmftsolve.dynamics.fixed_point",
    "solve_fixed_point": "dmftsolve.dynamics.fixed_point",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
