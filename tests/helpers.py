"""Independent reference constructions shared by several test modules."""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import integrate, optimize

SQ3 = math.sqrt(3.0)


def build_hessian(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Dense ``(1/n) Σ x_i x_iᵀ ⊗ D_i`` with index ``(a, c) → a m + c`` (test reference)."""
    n, d = X.shape
    m = D.shape[1]
    H = np.empty((d, m, d, m))
    for c in range(m):
        for e in range(m):
            H[:, c, :, e] = (X.T * D[:, c, e]) @ X / n
    return H.reshape(d * m, d * m)


@functools.cache
def t0_min_quad_reference(delta: float = 3.0) -> tuple[float, float]:
    """Left edge and hard outlier at t = 0 for r² on ``min(z², 3)``, q0 = 1, computed without the
    library: ``D = 6v² − 2 min(z², 3)`` with ``v, z ~ N(0, 1)``; ``E`` by scipy ``quad`` over ``z``
    split at ``±√3`` and 300 Hermite nodes in ``v`` (the integrand is smooth in ``v`` there); for
    m = 1, ``ζ(s) = E[D/(1 + sD/δ)] − 1/s``, the left edge is ``ζ`` at its critical point and the
    outlier is ``ζ`` at the root of ``1/s + E[D(z² − 1)/(1 + sD/δ)]`` below it (docs/theory.md §3–4).
    300 vs 200 nodes: the edge moves by 1e-7, the outlier by 1e-8."""
    xv, wv = hermegauss(300)
    wv = wv / math.sqrt(2 * math.pi)

    def expect(f):  # f(D, z) -> array over the v nodes
        def inner(z: float) -> float:
            D = 6 * xv**2 - 2 * min(z * z, 3.0)
            return float(wv @ f(D, z)) * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

        pieces = ((-np.inf, -SQ3), (-SQ3, SQ3), (SQ3, np.inf))
        return sum(integrate.quad(inner, a, b, limit=200, epsabs=1e-13, epsrel=1e-12)[0] for a, b in pieces)

    def zeta(s: float) -> float:
        return expect(lambda D, z: D / (1 + s * D / delta)) - 1 / s

    s_max = delta / 6  # 1 + sD/δ > 0 for D >= −6
    def dzeta(s: float) -> float:
        return 1 / s**2 - expect(lambda D, z: D**2 / delta / (1 + s * D / delta) ** 2)

    s_edge = optimize.brentq(dzeta, 0.05, s_max * (1 - 1e-9), xtol=1e-14)
    s_out = optimize.brentq(lambda s: 1 / s + expect(lambda D, z: D * (z * z - 1) / (1 + s * D / delta)),
                            0.05, s_edge, xtol=1e-14)
    return zeta(s_edge), zeta(s_out)

