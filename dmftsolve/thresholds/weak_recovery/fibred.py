"""The ``"fibred"`` method of ``δ_alg``: noiseless links of two latents, monotone along one, exact.

For ``h`` monotone along one coordinate on every line (say ``z2``, found by
:func:`fibre_axis`) and without atoms (:func:`has_atoms`), the coarea formula
along that coordinate gives
``p(y) E[ψ|y] = ∫ φ(z1) Σ_b ψ(z1, z2_b) φ(z2_b)/|∂₂h(z1, z2_b)| dz1``
over the preimages ``z2_b`` of ``y`` on the line (found as in ``"preimage"``),
the ``z1``-integral adaptive for all ``y``-nodes at once;
``E_y[G ⊗ G] = ∫ N ⊗ N / p dy`` by tanh-sinh rules on the ``y``-segments between
the critical values of ``h`` (where ``p`` is singular).

Error: the difference of the tanh-sinh rules at steps 1/8 and 1/16 plus the
``z1``-quadrature estimate. ``z1*z2``: 0.5937511018 ± 1.4e-8 against the
closed form 0.59375109822 (the Monte Carlo ``"binned"`` method gave
0.594177 ± 0.00065 there).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp
from scipy.integrate import quad_vec
from scipy.optimize.elementwise import find_root

from dmftsolve._symbolic import compile_expression
from dmftsolve.problem import Target
from dmftsolve.thresholds.weak_recovery.common import (
    SQRT2PI,
    Estimate,
    MethodOptions,
    Pieces,
    gram_top,
    quadrature_estimate,
    spectral,
)

__all__ = ["estimate", "fibre_axis", "fibred_moments", "has_atoms", "target_h2"]

_FIBRE_GRID = 2001   # scanning grid of each fibre z2 -> h(z1, z2) on [-12, 12]
_FIBRE_L = 9.0       # |z1| > 9 carries probability < 3e-19
_TS_TMAX = 3.6       # tanh-sinh half-range in t
_TS_GAP = 1e-11      # y-nodes closer than this (relative) to a segment end are dropped
_FIBRE_LIMIT = 300   # z1-subintervals of the adaptive rule: a time budget (auto falls back to binned)
_FIBRE_ACCEPT = 1e-6  # relative error on ρ(F) the fibred method must reach (then δ_alg is good to 1e-6)


def _tanh_sinh(a: float, b: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Tanh-sinh nodes and weights on ``[a, b]`` (``t = j·step``; halving ``step`` nests the nodes)."""
    t = np.arange(-math.floor(_TS_TMAX / step), math.floor(_TS_TMAX / step) + 1) * step
    sh = 0.5 * math.pi * np.sinh(t)
    frac = 1.0 / (1.0 + np.exp(-2.0 * sh))  # (1 + tanh(sh)) / 2, accurate near both ends
    x = np.where(t <= 0, a + (b - a) * frac, b - (b - a) * (1.0 / (1.0 + np.exp(2.0 * sh))))
    w = (b - a) * step * 0.5 * math.pi * np.cosh(t) / (2.0 * np.cosh(sh) ** 2)
    gap = _TS_GAP * (b - a)
    keep = (x - a > gap) & (b - x > gap)
    return x[keep], w[keep]


def target_h2(target: Target) -> Any:
    """``h(z1, z2)`` of a noiseless ``k = 2`` target, vectorised."""
    return compile_expression(target.sympy_expr, list(target.symbols[:2]))


def has_atoms(h2: Any, rng: np.random.Generator) -> bool:
    """Whether ``y = h(z1, z2)`` takes some value with positive probability (repeated values)."""
    z = rng.standard_normal((8192, 2)) * 1.3
    y = h2(z[:, 0], z[:, 1])
    if not np.all(np.isfinite(y)):
        raise ValueError("target gives non-finite labels")
    _, counts = np.unique(y, return_counts=True)
    return bool(np.any(counts >= 3))


def _critical_values(expr: sp.Expr, z1: sp.Symbol, z2: sp.Symbol) -> list[float]:
    """Values of ``h`` at its critical points in ``[-9, 9]²`` (where the density of ``y`` is singular)."""
    from scipy.optimize import root

    g1 = compile_expression(sp.diff(expr, z1), [z1, z2])
    g2 = compile_expression(sp.diff(expr, z2), [z1, z2])
    h2 = compile_expression(expr, [z1, z2])
    x = np.linspace(-_FIBRE_L, _FIBRE_L, 361)
    X, Y = np.meshgrid(x, x, indexing="ij")
    a, b = g1(X, Y), g2(X, Y)
    # cells where both partial derivatives change sign
    def flips(f: np.ndarray) -> np.ndarray:
        s = np.sign(f)
        return ((s[:-1, :-1] != s[1:, :-1]) | (s[:-1, :-1] != s[:-1, 1:]) | (s[:-1, :-1] != s[1:, 1:])
                | (s[:-1, :-1] == 0))
    cand = np.argwhere(flips(a) & flips(b))
    values: list[float] = []
    gscale = float(np.max(np.hypot(a, b)))
    for i, j in cand[:200]:
        x0 = np.array([0.5 * (x[i] + x[i + 1]), 0.5 * (x[j] + x[j + 1])])
        sol = root(lambda u: [float(g1(u[0], u[1])), float(g2(u[0], u[1]))], x0, tol=1e-14)
        if sol.success and np.all(np.abs(sol.x - x0) < 0.2):
            values.append(float(h2(sol.x[0], sol.x[1])))
            continue
        # degenerate critical sets (a line of them): take a corner of the cell where ∇h vanishes
        corners = [(i + di, j + dj) for di in (0, 1) for dj in (0, 1)]
        gi = [float(np.hypot(a[c], b[c])) for c in corners]
        best = int(np.argmin(gi))
        if gi[best] <= 1e-10 * max(gscale, 1e-300):
            values.append(float(h2(x[corners[best][0]], x[corners[best][1]])))
    out: list[float] = []
    for v in sorted(values):
        if not out or abs(v - out[-1]) > 1e-9 * max(1.0, abs(v)):
            out.append(v)
    return out


def fibre_axis(target: Target) -> int | None:
    """A coordinate along which ``h`` is monotone on every line (``1`` for z2, ``0`` for z1), else None.

    The ``"fibred"`` method needs fibres without critical points: a critical
    point on the fibre makes a singularity that moves with the other
    coordinate and the adaptive quadrature crawls (``z1**2 - z2**2``).
    """
    z1, z2 = target.symbols[:2]
    x = np.linspace(-_FIBRE_L, _FIBRE_L, 241)
    X, Y = np.meshgrid(x, x, indexing="ij")
    for axis, var in ((1, z2), (0, z1)):
        d = compile_expression(sp.diff(target.sympy_expr, var), [z1, z2])(X, Y)
        if not np.all(np.isfinite(d)):
            return None
        lines = d if axis == 1 else d.T  # rows: one line along the fibre variable
        sgn = np.sign(np.where(np.abs(lines) <= 1e-12 * max(1.0, float(np.abs(lines).max())), 0.0, lines))
        pos, neg = np.any(sgn > 0, axis=1), np.any(sgn < 0, axis=1)
        # strictly monotone: h must also move along (almost) every line; a fibre on which h is
        # constant (z2**2 along z1) makes y an atom there, and the coarea formula sees nothing
        flat_lines = int(np.count_nonzero(~(pos | neg)))
        if not np.any(pos & neg) and flat_lines <= 2:
            return axis
    return None


def fibred_moments(target: Target, rtol: float, axis: int = 1,
                   max_pieces: int | None = None) -> dict[str, Any]:
    """The moments ``E_y[E[z|y] E[z|y]ᵀ]`` and ``E_y[G ⊗ G]`` of a noiseless ``k = 2`` link (coarea).

    ``p(y) E[ψ | y] = ∫ φ(z1) Σ_b ψ(z1, z2_b) φ(z2_b)/|∂₂h| dz1``: ``z2_b`` runs
    over the preimages of ``y`` on the fibre ``z2 ↦ h(z1, z2)`` (its monotone
    pieces, as in the ``"preimage"`` method); the ``z1``-integral is adaptive
    (:func:`scipy.integrate.quad_vec`) for all ``y``-nodes at once, and
    ``E_y[G ⊗ G] = ∫ N ⊗ N / p dy`` uses tanh-sinh rules on the ``y``-segments
    between the critical values of ``h`` (where the density of ``y`` is
    singular). Error: the difference between the tanh-sinh rules at steps
    ``1/8`` and ``1/16`` plus the ``z1``-quadrature's estimate.

    Parameters
    ----------
    target : Target
        A noiseless label of two latents.
    rtol : float
        Relative accuracy asked.
    axis : {1, 0}, optional
        The fibre coordinate: ``1`` for fibres along ``z2`` (default), ``0`` along ``z1``.
    max_pieces : int, optional
        Most monotone pieces a fibre may have (default :data:`~.common.MAX_PIECES`).

    Returns
    -------
    dict
        ``Tm``, ``T4``, ``triv_err``, ``lam_err``, ``converged`` and ``diagnostics``:
        the input of :func:`~.common.quadrature_estimate`.
    """
    z1, z2 = target.symbols[:2]
    if axis == 0:  # fibres along z1: swap the roles (F is permuted back below)
        z1, z2 = z2, z1
    expr = target.sympy_expr
    h2 = compile_expression(expr, [z1, z2])
    d2 = compile_expression(sp.diff(expr, z2), [z1, z2])
    x = np.linspace(-_FIBRE_L, _FIBRE_L, 721)
    hv = h2(*np.meshgrid(x, x, indexing="ij"))
    ylo, yhi = float(hv.min()), float(hv.max())
    crit = [c for c in _critical_values(expr, z1, z2) if ylo < c < yhi]
    # quantiles of y as extra (harmless) cuts: the range of h on the box can be far wider
    # than where the law of y lives, and one tanh-sinh rule over it would miss the bulk
    gx, gw = np.polynomial.hermite_e.hermegauss(80)
    gw = gw / gw.sum()
    yq = h2(*np.meshgrid(gx, gx, indexing="ij")).ravel()
    wq = np.multiply.outer(gw, gw).ravel()
    order = np.argsort(yq)
    probs = [1e-6, 1e-3, 0.05, 0.25, 0.5, 0.75, 0.95, 1 - 1e-3, 1 - 1e-6]
    quant = np.interp(probs, np.cumsum(wq[order]), yq[order])
    cuts = [ylo, yhi, *crit]
    span = yhi - ylo
    for q in quant:
        if ylo < q < yhi and all(abs(q - c) > 1e-3 * span for c in cuts):
            cuts.append(float(q))
    cuts = sorted(cuts)
    nodes = {1: [], 2: []}
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        for level, step in ((1, 0.125), (2, 0.0625)):
            nodes[level].append(_tanh_sinh(a, b, step))
    yf = np.concatenate([n for n, _ in nodes[2]])
    wf = np.concatenate([w for _, w in nodes[2]])
    yc = np.concatenate([n for n, _ in nodes[1]])
    wc = np.concatenate([w for _, w in nodes[1]])
    coarse = np.isin(yf, yc)

    def fibre(c: float) -> np.ndarray:
        acc = np.zeros((6, yf.size))
        pieces = Pieces(None, None, h=lambda v: h2(c, v), dh=lambda v: d2(c, v), grid=_FIBRE_GRID,
                         max_pieces=max_pieces)
        for lo, hi, ya, yb in pieces.monotone:
            inside = (yf > ya) & (yf < yb)
            if not inside.any():
                continue
            yi = yf[inside]
            res = find_root(lambda v, t: h2(c, v) - t, (np.full_like(yi, lo), np.full_like(yi, hi)),
                            args=(yi,), tolerances={"xatol": 1e-14, "xrtol": 1e-15})
            zb = res.x
            w = np.exp(-zb * zb / 2) / np.maximum(np.abs(d2(c, zb)), 1e-300) / SQRT2PI
            acc[:, inside] += np.array([w, (c * c - 1) * w, c * zb * w, (zb * zb - 1) * w, c * w, zb * w])
        return (acc * math.exp(-c * c / 2) / SQRT2PI).ravel()

    N, qerr = quad_vec(fibre, -_FIBRE_L, _FIBRE_L, epsabs=1e-13, epsrel=min(rtol, 1e-9), norm="max",
                       limit=_FIBRE_LIMIT)
    N = N.reshape(6, yf.size)
    ok = bool(np.all(np.isfinite(N)))

    def moments(sel: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        P = N[0, sel]
        good = P > 0
        P, w = P[good], w[good]
        G = np.array([[N[1, sel][good], N[2, sel][good]], [N[2, sel][good], N[3, sel][good]]])  # (2,2,ny)
        M = np.array([N[4, sel][good], N[5, sel][good]])
        T4 = np.einsum("y,jky,liy->jkli", w / P, G, G)
        Tm = np.einsum("y,jy,ky->jk", w / P, M, M)
        return Tm, T4, float(np.sum(w * P))

    Tm_f, T4_f, mass_f = moments(np.ones(yf.size, dtype=bool), wf)
    if axis == 0:
        Tm_f, T4_f = Tm_f[::-1, ::-1], T4_f[::-1, ::-1, ::-1, ::-1]
    Tm_c, T4_c, mass_c = moments(coarse, _match_weights(yf[coarse], yc, wc))
    lam_f, lam_c = spectral(T4_f)[0], spectral(T4_c)[0]
    scale = float(np.max(np.abs(N))) if N.size else 1.0
    rel_q = float(qerr) / max(scale, 1e-300)
    # + the relative tolerance asked of the z1-rule (its own estimate can be optimistic)
    lam_err = abs(lam_f - lam_c) + (2 * rel_q + min(rtol, 1e-9)) * abs(lam_f)
    triv_err = abs(gram_top(Tm_f) - gram_top(Tm_c)) + 2 * rel_q * abs(gram_top(Tm_f)) + 1e-12
    return {"Tm": Tm_f, "T4": T4_f, "triv_err": triv_err, "lam_err": lam_err,
            "converged": ok and lam_err <= max(rtol, _FIBRE_ACCEPT) * abs(lam_f) + 1e-14,
            "diagnostics": {"fibre_axis": f"z{axis + 1}", "critical_values": crit, "y_range": [ylo, yhi],
                            "y_nodes": int(yf.size),
                            "mass": mass_f, "mass_coarse": mass_c, "z1_quadrature_error": float(qerr),
                            "spectral_radius_coarse": lam_c}}


def _match_weights(y_sel: np.ndarray, y_all: np.ndarray, w_all: np.ndarray) -> np.ndarray:
    """Weights ``w_all`` of the nodes ``y_all`` reordered to match ``y_sel`` (same values)."""
    order = np.argsort(y_all)
    pos = np.searchsorted(y_all[order], y_sel)
    return w_all[order][np.clip(pos, 0, len(order) - 1)]



def estimate(target: Target, options: MethodOptions) -> Estimate:
    """``ρ(F)`` and the trivial test of a noiseless ``k = 2`` target, fibred along :func:`fibre_axis`
    (uses ``rtol``, ``max_pieces``)."""
    out = fibred_moments(target, options.rtol, fibre_axis(target), options.max_pieces)
    return quadrature_estimate(out, options.rtol)
