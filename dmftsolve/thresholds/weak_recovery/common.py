"""What the four methods of :func:`~dmftsolve.thresholds.weak_recovery.threshold.alg_threshold` share.

* the spectral radius ``ρ(F)`` of ``F(M) = E_y[G(y) M G(y)]`` from the moments
  ``E_y[G ⊗ G]`` (:func:`spectral`) and the trivial statistic (:func:`gram_top`);
* the monotone and flat pieces of a scalar link (:class:`Pieces`), used by the
  ``"preimage"`` method on ``h`` and by the ``"fibred"`` method on each fibre,
  with its limits (:data:`MAX_PIECES`, :class:`TooManyPieces`, :class:`NotFinite`);
* the uniform call of a method, ``estimate(target, options) -> Estimate``
  (:class:`MethodOptions`, :class:`Estimate`), and the conversion of a
  quadrature method's moments into an :class:`Estimate`
  (:func:`quadrature_estimate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp
from scipy.optimize import brentq
from scipy.optimize.elementwise import find_root

from dmftsolve._symbolic import compile_expression, derivatives

__all__ = ["GRID_POINTS", "MAX_PIECES", "SECONDS_PER_PIECE2", "SQRT2PI", "Z_RANGE", "Estimate",
           "MethodOptions", "NotFinite", "Pieces", "TooManyPieces", "gram_top", "quadrature_estimate",
           "spectral", "sym_basis"]

SQRT2PI = math.sqrt(2 * math.pi)
#: Half-width of the range ``[-12, 12]`` the exact methods scan (``|z| > 12`` carries probability < 4e-33).
Z_RANGE = 12.0
#: Points of the scanning grid on ``[-12, 12]`` (step 1e-3).
GRID_POINTS = 24001

#: Most monotone pieces of ``h`` on [-12, 12] the exact methods work through. Every
#: quadrature node solves for the preimages on every piece, so the time grows like the
#: square of the count: measured 17 s for ``sin(2*z)`` (15 pieces), 56 s for ``sin(4*z)``
#: (31), 204 s for ``sin(8*z)`` (61); ``sin(1000*z)`` has about 7600.
MAX_PIECES = 20
#: Seconds per squared piece count of the "preimage" method (the measurements above).
SECONDS_PER_PIECE2 = 0.06


class NotFinite(ValueError):
    """``h`` or ``h'`` is not finite on the scanning grid of an exact method."""


class TooManyPieces(ValueError):
    """``h`` has more monotone pieces than :data:`MAX_PIECES`: the exact methods would crawl."""

    def __init__(self, pieces: int, cap: int) -> None:
        self.pieces = pieces
        self.seconds = SECONDS_PER_PIECE2 * pieces**2
        super().__init__(
            f"the link has {pieces} monotone or flat pieces on [-12, 12], more than the "
            f"{cap} the exact quadrature works through (its time grows like the square "
            f"of the count: about {self.seconds:.3g} s here); use method 'binned' (Monte Carlo)")


# --------------------------------------------------------------------------- F and its spectral radius
def sym_basis(k: int) -> np.ndarray:
    """Frobenius-orthonormal basis of symmetric ``k×k`` matrices, shape ``(k(k+1)/2, k, k)``."""
    out = []
    for a in range(k):
        for b in range(a, k):
            B = np.zeros((k, k))
            if a == b:
                B[a, a] = 1.0
            else:
                B[a, b] = B[b, a] = 1 / math.sqrt(2)
            out.append(B)
    return np.array(out)


def spectral(T4: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``ρ(F)``, the eigenvalues of ``F`` and its Perron eigenmatrix, from ``T4[j,k,l,i] = E[G_jk G_li]``.

    ``F(M) = E_y[G M G]`` is self-adjoint for the Frobenius inner product, so it is
    written in the orthonormal basis of :func:`sym_basis` as a symmetric
    ``k(k+1)/2`` matrix; its top eigenvalue is ``ρ(F)`` and the eigenmatrix is
    signed to have a nonnegative trace.
    """
    k = T4.shape[0]
    B = sym_basis(k)
    Fop = np.einsum("aij,jkli,bkl->ab", B, T4, B)
    Fop = (Fop + Fop.T) / 2
    w, v = np.linalg.eigh(Fop)
    top = np.einsum("a,aij->ij", v[:, -1], B)
    if np.trace(top) < 0:
        top = -top
    return float(w[-1]), w, top


def gram_top(Tm: np.ndarray) -> float:
    """Largest eigenvalue of the symmetrised ``Tm`` (``E_y[E[z|y] E[z|y]ᵀ]``): the trivial statistic."""
    return float(np.linalg.eigvalsh((Tm + Tm.T) / 2)[-1])


# --------------------------------------------------------------------------- monotone pieces
def switch_points(expr: sp.Expr, z: sp.Symbol) -> np.ndarray:
    """The real points of ``[-Z_RANGE, Z_RANGE]`` where a ``Min``/``Max`` of ``expr`` switches branch or
    an ``Abs``/``Heaviside``/``sign`` argument changes sign, for the arguments that are polynomials in
    ``z`` (their real roots, by :func:`numpy.roots`); others give none. Such kinks can sit closer
    together than any scanning grid (``Min(z**2, 1e-9)`` at ``±3.2e-5``)."""
    out: list[float] = []
    for node in sp.preorder_traversal(expr):
        if isinstance(node, (sp.Min, sp.Max)):
            diffs = [a - b for i, a in enumerate(node.args) for b in node.args[i + 1:]]
        elif isinstance(node, (sp.Abs, sp.Heaviside, sp.sign)):
            diffs = [node.args[0]]
        else:
            continue
        for u in diffs:
            try:
                poly = sp.Poly(u, z)
            except (sp.PolynomialError, sp.GeneratorsNeeded):
                continue
            if poly.degree() < 1 or poly.degree() > 16 or not all(c.is_number for c in poly.all_coeffs()):
                continue
            roots = np.roots([float(c) for c in poly.all_coeffs()])
            real = roots[np.abs(roots.imag) <= 1e-9 * np.maximum(1.0, np.abs(roots.real))].real
            out.extend(float(r) for r in real if abs(r) < Z_RANGE)
    return np.unique(np.array(out, dtype=float))


def switch_nodes(expr: sp.Expr, z: sp.Symbol) -> np.ndarray:
    """Scanning nodes that resolve the :func:`switch_points` of ``expr``: each point, a node on either
    side of it at a thousandth of the distance to its nearest neighbour (among the points and the
    scanning grid's step), and the midpoints between neighbouring points."""
    pts = switch_points(expr, z)
    if pts.size == 0:
        return pts
    step = 2 * Z_RANGE / (GRID_POINTS - 1)
    gaps = np.diff(pts)
    near = np.minimum(np.r_[step, gaps], np.r_[gaps, step])
    return np.r_[pts, pts - 1e-3 * near, pts + 1e-3 * near, pts[:-1] + gaps / 2]


class Pieces:
    """Monotone and flat pieces of a scalar link ``h`` on the real line.

    Built from a sympy expression (``Pieces(expr, z)``) or from vectorised
    callables ``h`` and ``h'`` (``Pieces(None, None, h=..., dh=...)``), with a
    scanning grid of ``grid`` points on ``[-12, 12]``.
    """

    def __init__(self, expr: sp.Expr | None, z: sp.Symbol | None, *, h: Any = None, dh: Any = None,
                 grid: int = GRID_POINTS, max_pieces: int | None = None):
        extra = np.zeros(0)
        if expr is not None:
            self.h = compile_expression(expr, [z])
            self.dh = compile_expression(derivatives(expr, z, 1, parameter="target")[1], [z])
            extra = switch_nodes(expr, z)
        else:
            self.h, self.dh = h, dh
        base = np.linspace(-Z_RANGE, Z_RANGE, grid)
        if extra.size:  # an extra node within rounding of a grid node would make a sliver piece
            nearest = np.abs(extra[:, None] - base[None, :]).min(axis=1)
            extra = extra[nearest > 1e-9 * (base[1] - base[0])]
        grid = np.unique(np.r_[base, extra])
        d = self.dh(grid)
        if not np.all(np.isfinite(d)) or not np.all(np.isfinite(self.h(grid))):
            raise NotFinite("target: h or h' is not finite everywhere on [-12, 12] (a pole, a log "
                             "singularity or a cusp like sqrt(abs(z)) at a grid point); use the binned "
                             "method (method 'binned')")
        scale = max(1.0, float(np.abs(d).max()))
        cls = np.sign(np.where(np.abs(d) <= 1e-14 * scale, 0.0, d)).astype(int)
        # an isolated zero of h' at a grid node is a crossing, not a flat piece
        iso = (cls == 0) & (np.r_[cls[1:], 0] != 0) & (np.r_[0, cls[:-1]] != 0)
        cls[iso] = np.r_[cls[1:], cls[-2]][iso]
        # jumps of h: a change of h between nodes far larger than h' allows
        hv = self.h(grid)
        step = np.diff(grid)
        dmax = np.maximum(np.abs(d[1:]), np.abs(d[:-1]))
        jump = np.abs(np.diff(hv)) > 10 * dmax * step + 1e-12 * (1 + np.abs(hv[1:]))
        change = np.nonzero((cls[1:] != cls[:-1]) | jump)[0]
        n_pieces = len(change) + 1
        cap = MAX_PIECES if max_pieces is None else max_pieces
        if n_pieces > cap:
            raise TooManyPieces(n_pieces, cap)
        bounds = []
        for i in change:
            a, b, ca = grid[i], grid[i + 1], cls[i]
            if jump[i]:                  # h jumps: locate the jump by bisection
                ha, hb = float(hv[i]), float(hv[i + 1])

                def nearer(x, ha=ha, hb=hb):
                    hx = float(self.h(x))
                    return 0.5 if abs(hx - ha) <= abs(hx - hb) else -0.5
                bounds.append(brentq(nearer, a, b, xtol=1e-15, rtol=1e-15))
            elif ca * cls[i + 1] == -1:  # h' changes sign (smoothly or by a jump)
                bounds.append(brentq(self.dh, a, b, xtol=1e-15, rtol=1e-15))
            else:                        # enters or leaves a flat piece
                def side(x, ca=ca):
                    dx = self.dh(x)
                    c = 0 if abs(dx) <= 1e-14 * scale else int(np.sign(dx))
                    return 0.5 if c == ca else -0.5
                bounds.append(brentq(side, a, b, xtol=1e-15, rtol=1e-15))
        edges = np.r_[-np.inf, bounds, np.inf]
        kinds = np.r_[cls[0], cls[change + 1]]
        self.jumps = [float(grid[i]) for i in np.nonzero(jump)[0]]
        self.monotone = []   # (lo, hi, ylo, yhi) with finite lo, hi in [-L, L]
        self.flat = []       # (lo, hi, value) with exact (possibly infinite) ends
        for lo, hi, kind in zip(edges[:-1], edges[1:], kinds, strict=True):
            flo, fhi = max(lo, -Z_RANGE), min(hi, Z_RANGE)
            if kind == 0:
                mid = 0.5 * (flo + fhi)
                self.flat.append((lo, hi, float(self.h(mid))))
            else:
                eps_lo = 1e-13 * (1 + abs(flo))
                eps_hi = 1e-13 * (1 + abs(fhi))
                ya, yb = float(self.h(flo + eps_lo)), float(self.h(fhi - eps_hi))
                self.monotone.append((flo, fhi, min(ya, yb), max(ya, yb)))
        self.critical_points = [float(b) for b in bounds]

    def conditional(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(E[z|y], E[z²−1|y])`` for ``y`` (array) in the range of the monotone pieces."""
        num_z = np.zeros_like(y)
        num_g = np.zeros_like(y)
        den = np.zeros_like(y)
        for lo, hi, ylo, yhi in self.monotone:
            inside = (y > ylo) & (y < yhi)
            if not inside.any():
                continue
            yi = y[inside]
            res = find_root(lambda x, t: self.h(x) - t, (np.full_like(yi, lo), np.full_like(yi, hi)),
                            args=(yi,), tolerances={"xatol": 1e-14, "xrtol": 1e-15})
            zb = res.x
            w = np.exp(-zb * zb / 2) / np.maximum(np.abs(self.dh(zb)), 1e-300)
            num_z[inside] += zb * w
            num_g[inside] += (zb * zb - 1) * w
            den[inside] += w
        with np.errstate(invalid="ignore", divide="ignore"):
            return num_z / den, num_g / den



# --------------------------------------------------------------------------- the uniform call
@dataclass(frozen=True)
class MethodOptions:
    """The settings every method receives (each uses the ones it needs).

    Parameters
    ----------
    rtol : float
        Relative accuracy asked of the quadrature methods.
    max_pieces : int
        Most monotone pieces the exact methods (``"preimage"``, ``"fibred"``) take on.
    n_samples, n_scrambles : int
        Sobol points and independent scramblings of the ``"binned"`` method.
    rng : numpy.random.Generator
        Randomness of the ``"binned"`` method.
    additive : tuple or None
        ``(h0, c)`` of a label ``h0(z) + c·eps`` when the caller has found it
        (:func:`~dmftsolve.thresholds.weak_recovery.additive.additive_noise`);
        the ``"additive"`` method finds it itself otherwise.
    """

    rtol: float = 1e-8
    max_pieces: int = MAX_PIECES
    n_samples: int = 2**20
    n_scrambles: int = 16
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    additive: tuple[sp.Expr, float] | None = None


@dataclass(frozen=True)
class Estimate:
    """What a method reports: ``ρ(F)``, the trivial test, and how to judge them.

    Attributes
    ----------
    spectral_radius, spectral_radius_error : float
        ``ρ(F)`` and its error estimate.
    trivial_statistic : float
        Top eigenvalue of ``E_y[E[z|y] E[z|y]ᵀ]`` (0 when it vanishes by symmetry).
    trivial : bool
        Whether ``E[z|y] ≠ 0`` was detected.
    zero_tol : float
        ``ρ(F)`` at or below this is taken as 0.
    accept : float
        Largest relative error of ``δ_alg`` accepted as converged (``"binned"``).
    converged : bool
        Whether the method reached its tolerance.
    notes : tuple of str
        Remarks for the result's message.
    diagnostics : dict
        Method-specific numbers for the result's diagnostics.
    """

    spectral_radius: float
    spectral_radius_error: float
    trivial_statistic: float
    trivial: bool
    zero_tol: float
    accept: float
    converged: bool = True
    notes: tuple[str, ...] = ()
    diagnostics: dict[str, Any] = field(default_factory=dict)


def quadrature_estimate(out: dict[str, Any], rtol: float) -> Estimate:
    """The :class:`Estimate` of a quadrature method from its moments.

    Parameters
    ----------
    out : dict
        ``Tm`` (``E_y[E[z|y] E[z|y]ᵀ]``), ``T4`` (``E_y[G ⊗ G]``), their errors
        ``triv_err`` and ``lam_err``, ``converged`` and ``diagnostics``, as returned
        by the ``*_moments`` function of a quadrature method.
    rtol : float
        The tolerance asked (named in the note when it was not reached).

    Returns
    -------
    Estimate
    """
    lam, eigs, top = spectral(out["T4"])
    lam_err = out["lam_err"]
    triv = gram_top(out["Tm"])
    trivial = triv > max(1e-9, 10 * out["triv_err"])
    diagnostics = dict(out["diagnostics"])
    diagnostics.update({"trivial_statistic": triv, "trivial_error": out["triv_err"],
                        "trivial_gram": out["Tm"], "F_eigenvalues": eigs,
                        "easy_subspace": top})
    notes: tuple[str, ...] = ()
    if not out["converged"]:
        notes = (f"quadrature did not reach rtol={rtol:g} (error estimate "
                 f"{lam_err:.3g} on ρ(F))",)
    return Estimate(spectral_radius=lam, spectral_radius_error=lam_err, trivial_statistic=triv,
                    trivial=bool(trivial), zero_tol=max(1e-12, 10 * lam_err), accept=rtol,
                    converged=bool(out["converged"]), notes=notes, diagnostics=diagnostics)
