"""The Hessian of the empirical risk along training.

* :mod:`dmftsolve.hessian.spectrum` — the bulk spectrum from the matrix Stieltjes equation;
* :mod:`dmftsolve.hessian.outlier_equation` — outliers along the hard, target and learned directions;
* :mod:`dmftsolve.hessian.law` — :class:`Law`, the law of the training fields at one time (Monte Carlo
  or quadrature atoms), accepted by every function above in place of the ``D`` array.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "Law": "dmftsolve.hessian.law",
    "BulkSpectrum": "dmftsolve.hessian.spectrum",
    "bulk_spectrum": "dmftsolve.hessian.spectrum",
    "Outliers": "dmftsolve.hessian.outlier_equation",
    "outliers": "dmftsolve.hessian.outlier_equation",
    "training_outliers": "dmftsolve.hessian.outlier_equation",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
