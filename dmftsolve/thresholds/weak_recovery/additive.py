"""The ``"additive"`` method of ``δ_alg``: labels ``y = h0(z) + c·eps`` with a constant ``c ≠ 0``.

``G(y) = E_z[(zzᵀ−I) p(y|z)] / E_z[p(y|z)]`` with ``p(y|z)`` the ``N(h0(z), c²)``
density. The ``z``-integrals use a product trapezoid rule on ``[-10, 10]^k``
(geometrically convergent for these analytic, fast-decaying integrands; it beats
Gauss–Hermite here because the integrand is a ridge of width ``~c/|∇h0|`` away
from the origin, where Gauss–Hermite nodes are sparse), the ``y``-integral uses
:func:`scipy.integrate.quad_vec`. The grid is refined until two successive grids
agree to ``rtol``; error = their difference plus ``quad_vec``'s.

The decomposition is found by :func:`additive_noise`; the method needs the noise
to be at least :data:`MIN_NOISE_RATIO` of the spread of ``h0``
(:func:`noise_ratio`), below which the ridge falls between the grid nodes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp
from scipy.integrate import quad_vec

from dmftsolve._symbolic import compile_expression, derivatives
from dmftsolve.problem import Target
from dmftsolve.thresholds.weak_recovery.common import (
    SQRT2PI,
    Estimate,
    MethodOptions,
    gram_top,
    quadrature_estimate,
    spectral,
)

__all__ = ["MIN_NOISE_RATIO", "additive_moments", "additive_noise", "estimate", "noise_ratio"]

#: Half-width of the trapezoid grid ``[-10, 10]^k`` of the z-integrals.
_LZ = 10.0


def _additive_level(h0, c: float, k: int, n: int, rtol: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    x = np.linspace(-_LZ, _LZ, n)
    w1 = (x[1] - x[0]) * np.exp(-x * x / 2) / SQRT2PI
    grids = np.meshgrid(*([x] * k), indexing="ij")
    Z = np.stack([g.ravel() for g in grids], axis=-1)
    W = np.ones(1)
    for _ in range(k):
        W = np.multiply.outer(W, w1).ravel()
    keep = W > 1e-300
    Z, W = Z[keep], W[keep]
    H = h0(*Z.T)
    ZZ = (Z[:, :, None] * Z[:, None, :] - np.eye(k)).reshape(len(W), k * k)

    def f(y: float) -> np.ndarray:
        e = -((y - H) ** 2) / (2 * c * c)
        mx = e.max()
        p = W * np.exp(e - mx)
        s = p.sum()
        D = s * math.exp(mx) / (abs(c) * SQRT2PI) if mx > -745 else 0.0
        if D == 0.0 or s == 0.0:
            return np.zeros(k * k + k**4)
        m = (p @ Z) / s
        G = (p @ ZZ).reshape(k, k) / s
        G = (G + G.T) / 2
        return D * np.concatenate([np.outer(m, m).ravel(), np.einsum("jk,li->jkli", G, G).ravel()])

    mu = float(W @ H / W.sum())
    sd = math.sqrt(float(W @ (H - mu) ** 2 / W.sum()) + c * c)
    cuts = [-np.inf, mu - 8 * sd, mu + 8 * sd, np.inf]
    total = np.zeros(k * k + k**4)
    err = 0.0
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        val, e = quad_vec(f, a, b, epsabs=1e-15, epsrel=rtol / 10, norm="max", limit=2000)
        total += val
        err += float(e)
    return total[: k * k].reshape(k, k), total[k * k:].reshape(k, k, k, k), err, len(W)


def additive_moments(target: Target, h0_expr: sp.Expr, c: float, rtol: float) -> dict[str, Any]:
    """The moments of ``y = h0(z) + c·eps``, on product trapezoid grids refined until two agree.

    Parameters
    ----------
    target : Target
        The noisy label (its latents fix ``k``).
    h0_expr : sympy expression
        The noiseless part ``h0(z)``.
    c : float
        The noise scale (nonzero).
    rtol : float
        Relative accuracy asked: the grid is refined until two successive grids
        agree on ``ρ(F)`` to ``rtol``.

    Returns
    -------
    dict
        ``Tm``, ``T4``, ``triv_err``, ``lam_err``, ``converged`` and ``diagnostics``:
        the input of :func:`~.common.quadrature_estimate`.

    Raises
    ------
    NotImplementedError
        If ``k`` is too large for two grid levels of at most 2**19 points.
    """
    k = target.k
    h0 = compile_expression(h0_expr, target.symbols[:-1])
    max_points = 2**19
    sizes = [n for n in (81, 161, 321, 641, 1281, 2561, 5121) if n**k <= max_points]
    if len(sizes) < 2:
        raise NotImplementedError(
            f"additive-noise method: k={k} is too large for the product trapezoid grid; "
            "use the binned method (method 'binned')")
    prev = None
    history = []
    for n in sizes:
        Tm, T4, qerr, npts = _additive_level(h0, c, k, n, rtol)
        lam = spectral(T4)[0]
        triv = gram_top(Tm)
        history.append({"nodes_per_dim": n, "spectral_radius": lam, "trivial_statistic": triv})
        if prev is not None:
            lam_err = abs(lam - prev[0]) + qerr
            triv_err = abs(triv - prev[1]) + qerr
            if lam_err <= rtol * abs(lam) + 1e-14 and (triv_err <= 1e-10 or triv > 1e3 * triv_err):
                break
        prev = (lam, triv)
    converged = lam_err <= rtol * abs(lam) + 1e-14
    return {"Tm": Tm, "T4": T4, "triv_err": triv_err, "lam_err": lam_err, "converged": converged,
            "diagnostics": {"noise_scale": c, "grid_points": npts, "levels": history}}


#: Smallest noise scale ``|c|`` of ``h0(z) + c·eps``, relative to the spread of ``h0``, the
#: "additive" method resolves: below it the ridge ``p(y|z)`` falls between the grid nodes and
#: every integral reads 0 (``z**2 + 1e-3*eps`` gave ρ(F) = 6e-22, δ_alg = ∞ with success).
MIN_NOISE_RATIO = 5e-3


def noise_ratio(target: Target, additive: tuple[sp.Expr, float]) -> float:
    """``|c| / std(h0(z))`` for ``y = h0(z) + c·eps`` (``inf`` for a constant ``h0``)."""
    h0_expr, c = additive
    h0 = compile_expression(h0_expr, list(target.symbols[:-1]))
    z = np.random.default_rng(11).standard_normal((4096, target.k))
    with np.errstate(all="ignore"):
        v = h0(*z.T)
        top = float(np.max(np.abs(v))) if v.size else 0.0
        spread = top * float(np.std(v / top)) if top > 0 and math.isfinite(top) else 0.0
    return math.inf if not spread > 0 else abs(c) / spread


def additive_noise(target: Target) -> tuple[sp.Expr, float] | None:
    """``(h0, c)`` if ``h = h0(z) + c·eps`` with ``c`` a nonzero constant, else ``None``."""
    if not target.noisy:
        return None
    eps = target.symbols[-1]
    d = derivatives(target.sympy_expr, eps, 1)[1]
    # a numerical look first: sp.simplify took 16 s on a sum of 39 tanh(i*z + i*eps) that is
    # plainly not additive; only a derivative that is constant at random points is simplified
    pts = np.random.default_rng(5).standard_normal((64, len(target.symbols))) * 1.5
    with np.errstate(all="ignore"):
        dv = compile_expression(d, list(target.symbols))(*pts.T)
    if not np.all(np.isfinite(dv)) or np.ptp(dv) > 1e-12 * (1.0 + float(np.abs(dv).max())):
        return None
    d = sp.expand(d)
    if d.free_symbols:
        d = sp.simplify(d)
    if d.free_symbols or d == 0:
        return None
    try:
        c = float(d)
    except TypeError:
        return None
    h0 = target.sympy_expr.subs(eps, 0)  # exact: h = h0(z) + c·eps with c constant
    if eps in h0.free_symbols:  # pragma: no cover - subs removes eps
        return None
    return h0, c



def estimate(target: Target, options: MethodOptions) -> Estimate:
    """``ρ(F)`` and the trivial test of ``y = h0(z) + c·eps`` (uses ``rtol``, and ``additive`` if given).

    Raises
    ------
    ValueError
        If the label is not of the form ``h0(z) + c·eps`` with a constant ``c ≠ 0``.
    """
    additive = options.additive if options.additive is not None else additive_noise(target)
    if additive is None:
        raise ValueError(f"method='additive' needs y = h0(z) + c*eps with constant c != 0, "
                         f"got {target.expr!r}")
    return quadrature_estimate(additive_moments(target, *additive, options.rtol), options.rtol)
