"""The weak-recovery threshold ``δ_alg`` of optimal first-order methods (``docs/theory.md`` §5.5).

For latents ``z ~ N(0, I_k)`` and a label ``y = h(z, ε)``:

1. **Trivial part.** If ``E[z | y] ≠ 0`` on a set of positive probability
   (``E_y[E[z|y] E[z|y]ᵀ] ≠ 0``), the directions in its range are learned by
   one linear step at any ``δ > 0``: ``δ_alg = 0`` for them.
2. **Otherwise** with ``G(y) = E[zzᵀ − I | y]`` and the completely positive
   map ``F(M) = E_y[G(y) M G(y)]`` on symmetric ``k×k`` matrices,
   ``δ_alg = 1/ρ(F)``; for ``k = 1`` this is ``1/E_y[(E[z²|y] − 1)²]``.
   ``F`` is self-adjoint for the Frobenius inner product, so it is built as a
   symmetric ``k(k+1)/2`` matrix and ``ρ(F)`` is its top eigenvalue (Perron:
   its eigenmatrix is positive semidefinite and spans the easy subspace).
   ``G ≡ 0`` (parity-like targets) gives ``δ_alg = ∞``.

Everything needs ``E_y[A(y) ⊗ B(y)]`` for conditional expectations
``A, B``; by the tower property ``E_y[E[a|y] E[b|y]] = E[a(z) E[b|y](h(z))]``.
Before any method runs, the label is standardised (:func:`_standardize`): an
additive constant and a constant factor are removed symbolically (``δ_alg`` is
invariant under ``y ↦ a·y + b``, and ``1e-300*z**2`` or ``z**2 + 1e300`` would
lose every digit of ``y`` in double precision), with ``method="auto"`` the
latents the label does not use are dropped (they add a zero block to ``F``),
and a label that double precision cannot resolve (``log(1 + 1e-20*z**2)``) is
refused. The exact methods take at most ``max_pieces`` monotone pieces of ``h``
(their time grows like the square of the count); past it ``"auto"`` uses
``"binned"``.

Four methods, picked by ``method="auto"``:

``"preimage"`` (noiseless, ``k = 1``; exact)
    The real line is split at the critical points of ``h`` (sign changes of
    ``h'`` on a grid of ``[-12, 12]`` refined by root finding) into strictly
    monotone pieces and flat pieces (atoms of ``y``). For ``y`` in the range
    of monotone pieces, ``E[ψ|y] = Σ_b ψ(z_b) w_b / Σ_b w_b`` over the
    preimages ``z_b`` (one per piece, by bracketing root finding), with
    ``w_b = φ(z_b)/|h'(z_b)|``. Then ``E_y[G²] = E_z[(z²−1) G(h(z))]`` is
    integrated piece by piece with tanh-sinh quadrature, split where the set
    of preimages changes (so the integrand is smooth inside each part); atoms
    contribute ``A²/P`` in closed form. Error: the quadrature's estimate plus
    bounds on what it cannot see: the stretches near a critical value where
    ``y = h(z)`` rounds onto it (``|z| < 1e-8`` for ``z**2 - 1``), and pieces
    flat only to the flatness cut (the tails of ``exp(-z**2)``) taken as atoms.
    Critical points closer together than the grid step (1e-3) are missed.
``"fibred"`` (noiseless ``k = 2``, ``h`` monotone along one coordinate on every line, no atoms; exact)
    The coarea formula along the monotone coordinate, say ``z2``:
    ``p(y) E[ψ|y] = ∫ φ(z1) Σ_b ψ(z1, z2_b) φ(z2_b)/|∂₂h(z1, z2_b)| dz1``
    over the preimages ``z2_b`` of ``y`` on the line (found as in
    ``"preimage"``), the ``z1``-integral adaptive for all ``y``-nodes at once;
    ``E_y[G ⊗ G] = ∫ N ⊗ N / p dy`` by tanh-sinh rules on the ``y``-segments
    between the critical values of ``h`` (where ``p`` is singular). Error: the
    difference of the tanh-sinh rules at steps 1/8 and 1/16 plus the
    ``z1``-quadrature estimate. ``z1*z2``: 0.5937511018 ± 1.4e-8 against the
    closed form 0.59375109822 (the Monte Carlo ``"binned"`` method gave
    0.594177 ± 0.00065 there).
``"additive"`` (``y = h0(z) + c ε`` with ``c`` a nonzero constant, any small ``k``)
    ``G(y) = E_z[(zzᵀ−I) p(y|z)] / E_z[p(y|z)]`` with ``p(y|z)`` the
    ``N(h0(z), c²)`` density. The ``z``-integrals use a product trapezoid
    rule on ``[-10, 10]^k`` (geometrically convergent for these analytic,
    fast-decaying integrands; it beats Gauss–Hermite here because the
    integrand is a ridge of width ``~c/|∇h0|`` away from the origin, where
    Gauss–Hermite nodes are sparse), the ``y``-integral uses
    :func:`scipy.integrate.quad_vec`. The grid is refined until two successive
    grids agree to ``rtol``; error = their difference plus ``quad_vec``'s.
``"binned"`` (anything else: other noiseless ``k > 1``, non-additive noise; Monte Carlo)
    ``y`` is replaced by a discretisation ``Y_n`` of itself: its atoms (values
    taken repeatedly by the sample) are kept exactly and the continuous part
    is cut into ``n`` equiprobable bins. Then ``G_n(Y_n) = E[zzᵀ−I | Y_n]``
    and ``F_n = Σ_b P_b G_b ⊗ G_b`` are estimated from scrambled-Sobol samples
    of ``(z, ε)``, each point used with its ``2^k`` sign flips of ``z`` (the
    law of ``z`` is invariant; this makes the estimates respect the symmetries
    of ``h`` exactly) and moment-matched within each scrambling. Conditioning
    on the coarser ``Y_n`` can only shrink ``F`` (Jensen), so ``ρ(F_n) ≤ ρ(F)``
    and it increases with ``n`` for nested bins; the bias is ``O(1/n)`` for a
    smooth ``G``, removed by first-order Richardson steps on
    ``n = 128, 256, 512``. The Monte Carlo error and the ``O(1/N)`` ratio bias
    are handled by a jackknife over the independent scramblings. Reported
    error = the difference of the two Richardson values + 3 jackknife standard
    errors. For a purely discrete ``y`` (e.g. ``sign(z1*z2)``) there is no
    binning error at all. ``E[z|y] = 0`` is decided exactly when ``h`` is
    invariant under ``z → −z`` (checked numerically on random points), else by
    the jackknife (``> 5`` standard errors).

Examples
--------
>>> from dmftsolve.thresholds.weak_recovery import alg_threshold
>>> r = alg_threshold("z**2")
>>> round(r.delta_alg, 10), r.trivial
(0.5, False)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp
from scipy.integrate import quad, quad_vec, tanhsinh
from scipy.optimize import brentq
from scipy.optimize.elementwise import find_root
from scipy.special import ndtr, ndtri
from scipy.stats import qmc

from dmftsolve._symbolic import compile_expression, derivatives
from dmftsolve.admissibility import label_resolution
from dmftsolve.gaussian import as_generator
from dmftsolve.problem import Problem, Target
from dmftsolve.results import Result, SolverError, Status

__all__ = ["AlgThreshold", "alg_threshold"]

_METHODS = ("auto", "preimage", "fibred", "additive", "binned")
_SQRT2PI = math.sqrt(2 * math.pi)


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class AlgThreshold(Result):
    """Result of :func:`alg_threshold`.

    Attributes
    ----------
    delta_alg : float
        The threshold ``δ_alg``; ``0`` if a trivial (linearly learnable) part
        exists, ``inf`` if ``G ≡ 0``.
    trivial : bool
        Whether ``E[z | y] ≠ 0``: some directions are learned at any ``δ > 0``.
    error : float
        Error estimate of ``delta_alg`` (quadrature difference, or Monte Carlo
        standard errors plus extrapolation for ``"binned"``).
    method : str
        ``"preimage"``, ``"additive"`` or ``"binned"``.
    status, message, settings, diagnostics, elapsed
        See :class:`~dmftsolve.results.Result`. ``diagnostics`` holds
        ``spectral_radius`` (``ρ(F)``) and its error, the eigenvalues of ``F``,
        the Perron eigenmatrix (``easy_subspace``), the trivial statistic
        ``E_y‖E[z|y]‖²``-type top eigenvalue (``trivial_statistic``) and
        method-specific numbers.
    """

    _headline = ("delta_alg", "error")  # shown by the repr (Result.__repr__)

    delta_alg: float
    trivial: bool
    error: float
    method: str
    status: Status = Status.SUCCESS
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0


# --------------------------------------------------------------------------- helpers
def _as_target(obj: Any) -> Target:
    if isinstance(obj, Problem):
        return obj.target
    if isinstance(obj, Target):
        return obj
    if isinstance(obj, str):
        return Target(obj)
    raise ValueError(f"target_or_problem must be a Target, a Problem or an expression string, "
                     f"got {obj!r}")


def _sym_basis(k: int) -> np.ndarray:
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


def _spectral(T4: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``ρ(F)``, eigenvalues and Perron eigenmatrix from ``T4[j,k,l,i] = E[G_jk G_li]``."""
    k = T4.shape[0]
    B = _sym_basis(k)
    Fop = np.einsum("aij,jkli,bkl->ab", B, T4, B)
    Fop = (Fop + Fop.T) / 2
    w, v = np.linalg.eigh(Fop)
    top = np.einsum("a,aij->ij", v[:, -1], B)
    if np.trace(top) < 0:
        top = -top
    return float(w[-1]), w, top


def _gram_top(Tm: np.ndarray) -> float:
    return float(np.linalg.eigvalsh((Tm + Tm.T) / 2)[-1])


# --------------------------------------------------------------------------- preimage (k = 1)
_L = 12.0          # |z| > 12 carries probability < 4e-33
_GRID = 24001      # step 1e-3


class _Pieces:
    """Monotone and flat pieces of a scalar link ``h`` on the real line.

    Built from a sympy expression (``_Pieces(expr, z)``) or from vectorised
    callables ``h`` and ``h'`` (``_Pieces(None, None, h=..., dh=...)``), with a
    scanning grid of ``grid`` points on ``[-12, 12]``.
    """

    def __init__(self, expr: sp.Expr | None, z: sp.Symbol | None, *, h: Any = None, dh: Any = None,
                 grid: int = _GRID, max_pieces: int | None = None):
        if expr is not None:
            self.h = compile_expression(expr, [z])
            self.dh = compile_expression(derivatives(expr, z, 1, parameter="target")[1], [z])
        else:
            self.h, self.dh = h, dh
        grid = np.linspace(-_L, _L, grid)
        d = self.dh(grid)
        if not np.all(np.isfinite(d)) or not np.all(np.isfinite(self.h(grid))):
            raise _NotFinite("target: h or h' is not finite everywhere on [-12, 12] (a pole, a log "
                             "singularity or a cusp like sqrt(abs(z)) at a grid point); use the binned "
                             "method (method 'binned')")
        scale = max(1.0, float(np.abs(d).max()))
        cls = np.sign(np.where(np.abs(d) <= 1e-14 * scale, 0.0, d)).astype(int)
        # an isolated zero of h' at a grid node is a crossing, not a flat piece
        iso = (cls == 0) & (np.r_[cls[1:], 0] != 0) & (np.r_[0, cls[:-1]] != 0)
        cls[iso] = np.r_[cls[1:], cls[-2]][iso]
        # jumps of h: a change of h between nodes far larger than h' allows
        hv = self.h(grid)
        step = grid[1] - grid[0]
        dmax = np.maximum(np.abs(d[1:]), np.abs(d[:-1]))
        jump = np.abs(np.diff(hv)) > 10 * dmax * step + 1e-12 * (1 + np.abs(hv[1:]))
        change = np.nonzero((cls[1:] != cls[:-1]) | jump)[0]
        n_pieces = len(change) + 1
        cap = MAX_PIECES if max_pieces is None else max_pieces
        if n_pieces > cap:
            raise _TooManyPieces(n_pieces, cap)
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
            flo, fhi = max(lo, -_L), min(hi, _L)
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


def _phi(x: float) -> float:
    return 0.0 if math.isinf(x) else math.exp(-x * x / 2) / _SQRT2PI


def _xphi(x: float) -> float:
    return 0.0 if math.isinf(x) else x * math.exp(-x * x / 2) / _SQRT2PI


def _dropped_ends(raw: Any, a: float, b: float) -> np.ndarray:
    """Bound on the integrals of ``raw`` (both rows) over the ends of ``[a, b]`` where it is not finite.

    Near a critical value of ``h`` (an end of a monotone piece) ``y = h(x)`` rounds onto
    the end value for ``|x - end|`` up to about ``sqrt(eps)`` (``1e-8`` at a quadratic
    minimum), where the conditional expectations are undefined and the quadrature
    integrand is set to 0. Scanning ``2^-j (b - a)`` from each end finds the widest
    such stretch ``w``; its integral is bounded by ``2 w`` times ``|raw|`` at ``2 w``. A
    segment non-finite throughout (a sliver between two nearly equal critical values) is
    bounded by its width times ``|x| L`` and ``|x² − 1| (L² + 1)`` times the Gaussian density
    (``|E[z|y]| <= L``, ``|E[z² − 1|y]| <= L² + 1`` for preimages in ``[-L, L]``).
    """
    which = np.array([0, 1])
    steps = (b - a) * 2.0 ** -np.arange(1.0, 60.0)
    total = np.zeros(2)
    for end, sign in ((a, 1.0), (b, -1.0)):
        x = end + sign * steps
        vals = np.stack([raw(x, np.full_like(x, w)) for w in which])   # (2, len(steps))
        bad = ~np.isfinite(vals).all(axis=0)
        if not bad.any():
            continue
        i = int(np.nonzero(bad)[0][0])          # the widest non-finite stretch, steps[i]
        if i == 0:                              # the whole segment
            xm = max(abs(a), abs(b)) if a * b > 0 else max(abs(a), abs(b), 1.0)
            dens = math.exp(-min(abs(a), abs(b)) ** 2 / 2) / _SQRT2PI if a * b > 0 else 1 / _SQRT2PI
            total += (b - a) * dens * np.array([xm * _L, (xm * xm + 1) * (_L * _L + 1)])
            break
        total += 2 * steps[i] * np.abs(vals[:, i - 1])
    return total


def _preimage(target: Target, rtol: float, max_pieces: int | None = None) -> dict[str, Any]:
    z = target.symbols[0]
    pieces = _Pieces(target.sympy_expr, z, max_pieces=max_pieces)
    crit_values = sorted({v for (_, _, a, b) in pieces.monotone for v in (a, b)})

    def raw(x: np.ndarray, which: np.ndarray) -> np.ndarray:
        y = pieces.h(x)
        m, g = pieces.conditional(y)
        return np.where(which == 0, x * m, (x * x - 1) * g) * np.exp(-x * x / 2) / _SQRT2PI

    def integrand(x: np.ndarray, which: np.ndarray) -> np.ndarray:
        out = raw(x, which)
        return np.where(np.isfinite(out), out, 0.0)

    total = np.zeros(2)
    err = np.zeros(2)      # the quadrature's own error estimate (what rtol asks of it)
    floor = np.zeros(2)    # what finer quadrature cannot remove: rounding near critical values and
    n_segments = 0         # nearly flat pieces taken as flat; added to the reported error
    ok = True
    for lo, hi, ylo, yhi in pieces.monotone:
        cuts = [c for c in crit_values if ylo < c < yhi]
        pts = [lo, hi]
        if cuts:
            res = find_root(lambda x, t: pieces.h(x) - t,
                            (np.full(len(cuts), lo), np.full(len(cuts), hi)),
                            args=(np.array(cuts),), tolerances={"xatol": 1e-14, "xrtol": 1e-15})
            pts += list(res.x)
        pts = np.unique(pts)
        for a, b in zip(pts[:-1], pts[1:], strict=True):
            if b - a <= 0:
                continue
            res = tanhsinh(integrand, np.array([a, a]), np.array([b, b]), args=(np.array([0, 1]),),
                           rtol=rtol / 10, atol=rtol * 1e-4, maxlevel=12)
            ok &= bool(np.all(np.isfinite(res.integral)))
            total += res.integral
            # + the part the integrand drops (set to 0) near the ends, where y = h(x) rounds onto
            # the piece's end value: tanhsinh's own estimate cannot see it (issue 29: z**2 - 1 lost
            # 6.5e-9 of ρ(F) = 2 within |z| < 1e-8 while reporting 1.5e-15)
            err += res.error
            floor += _dropped_ends(raw, a, b)
            n_segments += 1
    # atoms: flat pieces grouped by value
    atoms: dict[float, np.ndarray] = {}
    for lo, hi, v in pieces.flat:
        key = min(atoms, key=lambda u: abs(u - v), default=None)
        if key is None or abs(key - v) > 1e-12 * max(1.0, abs(v)):
            key = v
            atoms[key] = np.zeros(3)
        atoms[key] += [ndtr(hi) - ndtr(lo), _phi(lo) - _phi(hi), _xphi(lo) - _xphi(hi)]
        flo, fhi = max(lo, -_L), min(hi, _L)
        # compare h inside the piece, one grid step (1e-3) from a finite end: at the end itself h
        # leaves the flat value (relu(z)**2 is 1.4e-26 at the cut 1.2e-13), which is no tail
        flo, fhi = flo + (1e-3 if math.isfinite(lo) else 0.0), fhi - (1e-3 if math.isfinite(hi) else 0.0)
        # h at 9 points across the piece, not only its ends: z**10 is even, equal at both ends of
        # its "flat" piece |z| < 0.083, which is no atom (δ_alg read 0.500071 ± 2.5e-14)
        hv = pieces.h(np.linspace(flo, fhi, 9)) if fhi > flo else np.zeros(1)
        if fhi > flo and float(np.ptp(hv)) > 1e-12 * float(np.max(np.abs(hv))):
            # h' only below the flatness cut (e.g. the tails of exp(-z**2)): taken as an atom, the
            # piece's share of E[z²-1|y]-moments is off by at most its own, by Cauchy-Schwarz
            floor += [quad(lambda x: x * x * _phi(x), flo, fhi)[0],
                      quad(lambda x: (x * x - 1) ** 2 * _phi(x), flo, fhi)[0]]
    for P, Az, Ag in atoms.values():
        if P > 0:
            total += [Az * Az / P, Ag * Ag / P]
    return {
        "Tm": np.array([[total[0]]]), "T4": np.full((1, 1, 1, 1), total[1]),
        "triv_err": float(err[0] + floor[0]), "lam_err": float(err[1] + floor[1]),
        "converged": ok and bool(err[1] <= rtol * abs(total[1]) + 1e-14),
        "diagnostics": {"critical_points": pieces.critical_points,
                        "rounding_error": [float(f) for f in floor],
                        "monotone_pieces": len(pieces.monotone),
                        "atoms": {repr(v): float(a[0]) for v, a in atoms.items()},
                        "segments": n_segments},
    }


# --------------------------------------------------------------------------- fibred (noiseless k = 2)
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


def _has_atoms(h2: Any, rng: np.random.Generator) -> bool:
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


def _fibre_axis(target: Target) -> int | None:
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


def _fibred(target: Target, rtol: float, axis: int = 1, max_pieces: int | None = None) -> dict[str, Any]:
    """Noiseless ``k = 2``: ``p(y) E[ψ | y] = ∫ φ(z1) Σ_b ψ(z1, z2_b) φ(z2_b)/|∂₂h| dz1`` (coarea along z2).

    ``z2_b`` runs over the preimages of ``y`` on the fibre ``z2 ↦ h(z1, z2)``
    (its monotone pieces, as in the ``"preimage"`` method); the ``z1``-integral
    is adaptive (:func:`scipy.integrate.quad_vec`) for all ``y``-nodes at once,
    and ``E_y[G ⊗ G] = ∫ N ⊗ N / p dy`` uses tanh-sinh rules on the ``y``-segments
    between the critical values of ``h`` (where the density of ``y`` is
    singular). Error: the difference between the tanh-sinh rules at steps
    ``1/8`` and ``1/16`` plus the ``z1``-quadrature's estimate.
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
        pieces = _Pieces(None, None, h=lambda v: h2(c, v), dh=lambda v: d2(c, v), grid=_FIBRE_GRID,
                         max_pieces=max_pieces)
        for lo, hi, ya, yb in pieces.monotone:
            inside = (yf > ya) & (yf < yb)
            if not inside.any():
                continue
            yi = yf[inside]
            res = find_root(lambda v, t: h2(c, v) - t, (np.full_like(yi, lo), np.full_like(yi, hi)),
                            args=(yi,), tolerances={"xatol": 1e-14, "xrtol": 1e-15})
            zb = res.x
            w = np.exp(-zb * zb / 2) / np.maximum(np.abs(d2(c, zb)), 1e-300) / _SQRT2PI
            acc[:, inside] += np.array([w, (c * c - 1) * w, c * zb * w, (zb * zb - 1) * w, c * w, zb * w])
        return (acc * math.exp(-c * c / 2) / _SQRT2PI).ravel()

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
    lam_f, lam_c = _spectral(T4_f)[0], _spectral(T4_c)[0]
    scale = float(np.max(np.abs(N))) if N.size else 1.0
    rel_q = float(qerr) / max(scale, 1e-300)
    # + the relative tolerance asked of the z1-rule (its own estimate can be optimistic)
    lam_err = abs(lam_f - lam_c) + (2 * rel_q + min(rtol, 1e-9)) * abs(lam_f)
    triv_err = abs(_gram_top(Tm_f) - _gram_top(Tm_c)) + 2 * rel_q * abs(_gram_top(Tm_f)) + 1e-12
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


# --------------------------------------------------------------------------- additive noise
_LZ = 10.0


def _additive_level(h0, c: float, k: int, n: int, rtol: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    x = np.linspace(-_LZ, _LZ, n)
    w1 = (x[1] - x[0]) * np.exp(-x * x / 2) / _SQRT2PI
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
        D = s * math.exp(mx) / (abs(c) * _SQRT2PI) if mx > -745 else 0.0
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


def _additive(target: Target, h0_expr: sp.Expr, c: float, rtol: float) -> dict[str, Any]:
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
        lam = _spectral(T4)[0]
        triv = _gram_top(Tm)
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


# --------------------------------------------------------------------------- binned Monte Carlo
def _flip_symmetric(target: Target, rng: np.random.Generator) -> tuple[bool, list[bool]]:
    """Numerical identity test of ``h(−z, ±ε) = h(z, ε)`` and of each ``z_i → −z_i``."""
    k = target.k
    z = rng.standard_normal((512, k)) * 1.5
    e = rng.standard_normal(512)
    y = target(z, e)

    def same(y2):
        return bool(np.all(np.abs(y2 - y) <= 1e-12 * (1 + np.abs(y))))

    glob = same(target(-z, e)) or same(target(-z, -e))
    coords = []
    for i in range(k):
        zf = z.copy()
        zf[:, i] *= -1
        coords.append(same(target(zf, e)) or same(target(zf, -e)))
    return glob, coords


def _binned(target: Target, n_samples: int, n_scrambles: int, rng: np.random.Generator,
            levels: tuple[int, ...] = (128, 256, 512), moment_match: bool = True,
            reflect: bool = True) -> dict[str, Any]:
    k = target.k
    noisy = target.noisy
    dim = k + int(noisy)
    R = n_scrambles
    copies = 2**k if reflect else 1
    mexp = max(int(math.ceil(math.log2(max(n_samples // (R * copies), 2)))), 4)
    per = 2**mexp
    Zs, Ys = [], []
    for _ in range(R):
        u = np.clip(qmc.Sobol(d=dim, scramble=True, rng=rng).random_base2(mexp), 1e-16, 1 - 1e-16)
        g = ndtri(u)
        if moment_match:  # exact zero mean and identity covariance within each scramble
            g = g - g.mean(axis=0)
            g = g @ np.linalg.inv(np.linalg.cholesky(g.T @ g / len(g))).T
        if reflect:  # average over the 2^k sign flips of z (the law of z is invariant)
            flips = np.array(np.meshgrid(*([[1.0, -1.0]] * k), indexing="ij")).reshape(k, -1).T
            zf = (g[None, :, :k] * flips[:, None, :]).reshape(-1, k)
            ef = np.tile(g[:, k], len(flips)) if noisy else 0.0
            Zs.append(zf)
            Ys.append(target(zf, ef))
        else:
            Zs.append(g[:, :k])
            Ys.append(target(g[:, :k], g[:, k] if noisy else 0.0))
    Z = np.concatenate(Zs)
    Y = np.concatenate(Ys)
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"target={target.expr!r} gives non-finite labels")
    rep = np.repeat(np.arange(R), len(Y) // R)
    # atoms: values repeated among the unreflected points (reflections duplicate values)
    base = Y.reshape(R, copies, per)[:, 0, :].ravel()
    vals, counts = np.unique(base, return_counts=True)
    atom_vals = vals[counts >= 3]
    n_atoms = len(atom_vals)
    pos = np.searchsorted(atom_vals, Y)
    hit = (pos < n_atoms) & (atom_vals[np.minimum(pos, max(n_atoms - 1, 0))] == Y) if n_atoms \
        else np.zeros(len(Y), dtype=bool)
    cont = ~hit
    cont_fraction = float(cont.mean())
    finest = levels[-1] if cont.any() else 1
    # continuous part: equiprobable bins between pooled quantiles, nested across levels;
    # bins are intervals of y, so equal values always share a bin
    labels = np.empty(len(Y), dtype=int)
    labels[hit] = pos[hit]
    if cont.any():
        yc = np.sort(Y[cont])
        edges = yc[(np.arange(1, finest) * len(yc)) // finest]
        labels[cont] = n_atoms + np.searchsorted(edges, Y[cont], side="right")
    nb = n_atoms + finest
    ZZ = (Z[:, :, None] * Z[:, None, :] - np.eye(k)).reshape(len(Y), k * k)
    # per-scramble sums per finest bin: counts, Σz, Σ(zzᵀ−I)
    idx = rep * nb + labels
    cnt = np.bincount(idx, minlength=R * nb).reshape(R, nb).astype(float)
    sz = np.stack([np.bincount(idx, weights=Z[:, j], minlength=R * nb) for j in range(k)], -1)
    sg = np.stack([np.bincount(idx, weights=ZZ[:, j], minlength=R * nb) for j in range(k * k)], -1)
    sz = sz.reshape(R, nb, k)
    sg = sg.reshape(R, nb, k * k)

    def merge(arr: np.ndarray, n: int) -> np.ndarray:
        """Coarsen the continuous bins of ``arr`` (axis 1) from ``finest`` to ``n``."""
        if not cont.any():
            return arr
        head, tail = arr[:, :n_atoms], arr[:, n_atoms:]
        tail = tail.reshape(arr.shape[0], n, finest // n, *arr.shape[2:]).sum(axis=2)
        return np.concatenate([head, tail], axis=1)

    def stats(c, a, g) -> tuple[float, float]:
        """(ρ(F), trivial statistic) from pooled sums (c: (nb,), a: (nb,k), g: (nb,k*k))."""
        N = c.sum()
        P = c / N
        good = P > 0
        A = a[good] / N
        Gm = g[good].reshape(-1, k, k) / N
        Gm = (Gm + np.swapaxes(Gm, 1, 2)) / 2
        Pg = P[good]
        T4 = np.einsum("bjk,bli->jkli", Gm, Gm / Pg[:, None, None])
        Tm = np.einsum("bj,bk->jk", A, A / Pg[:, None])
        return _spectral(T4)[0], _gram_top(Tm)

    def jackknife(n: int) -> tuple[float, float, float, float]:
        c, a, g = merge(cnt, n), merge(sz, n), merge(sg, n)
        full = stats(c.sum(0), a.sum(0), g.sum(0))
        loo = np.array([stats(c.sum(0) - c[r], a.sum(0) - a[r], g.sum(0) - g[r]) for r in range(R)])
        est = R * np.array(full) - (R - 1) * loo.mean(0)
        se = np.sqrt((R - 1) / R * ((loo - loo.mean(0)) ** 2).sum(0))
        return float(est[0]), float(se[0]), float(est[1]), float(se[1])

    use_levels = levels if cont.any() else (1,)
    results = {n: jackknife(n) for n in use_levels}
    lam_f, se_f, triv_f, triv_se = results[use_levels[-1]]
    if len(use_levels) >= 3:
        # first-order Richardson in the bin count on the two finest pairs; their difference
        # estimates what the extrapolation leaves
        lam_1 = 2 * results[use_levels[-2]][0] - results[use_levels[-3]][0]
        lam = 2 * lam_f - results[use_levels[-2]][0]
        lam_err = abs(lam - lam_1) + 3 * se_f
    else:
        lam, lam_err = lam_f, 3 * se_f
    return {
        "lam": lam, "lam_err": lam_err, "lam_se": se_f,
        "triv": triv_f, "triv_se": triv_se,
        "diagnostics": {
            "n_points": int(len(Y)), "n_scrambles": R, "reflected": reflect,
            "atoms": [float(v) for v in atom_vals],
            "continuous_fraction": cont_fraction,
            "levels": {str(n): {"spectral_radius": r[0], "standard_error": r[1]}
                       for n, r in results.items()},
        },
    }


# --------------------------------------------------------------------------- standardisation
#: Largest latent dimension the binned Monte Carlo method takes (it averages over 2^k sign flips).
MAX_BINNED_K = 10
#: Most monotone pieces of ``h`` on [-12, 12] the exact methods work through. Every
#: quadrature node solves for the preimages on every piece, so the time grows like the
#: square of the count: measured 17 s for ``sin(2*z)`` (15 pieces), 56 s for ``sin(4*z)``
#: (31), 204 s for ``sin(8*z)`` (61); ``sin(1000*z)`` has about 7600.
MAX_PIECES = 20
#: Seconds per squared piece count of the "preimage" method (the measurements above).
_SECONDS_PER_PIECE2 = 0.06


class _NotFinite(ValueError):
    """``h`` or ``h'`` is not finite on the scanning grid of an exact method."""


class _TooManyPieces(ValueError):
    """``h`` has more monotone pieces than :data:`MAX_PIECES`: the exact methods would crawl."""

    def __init__(self, pieces: int, cap: int) -> None:
        self.pieces = pieces
        self.seconds = _SECONDS_PER_PIECE2 * pieces**2
        super().__init__(
            f"the link has {pieces} monotone or flat pieces on [-12, 12], more than the "
            f"{cap} the exact quadrature works through (its time grows like the square "
            f"of the count: about {self.seconds:.3g} s here); use method 'binned' (Monte Carlo)")


def _strip_constants(expr: sp.Expr, syms: list[sp.Symbol]) -> sp.Expr:
    """``expr`` without an additive constant and a constant factor (repeatedly).

    ``δ_alg`` depends on the label only through the σ-algebra it generates, so
    ``y ↦ a·y + b`` (``a ≠ 0``) leaves it unchanged; removing ``a`` and ``b``
    symbolically keeps ``1e-300*z**2`` and ``z**2 + 1e300`` from losing every
    digit of ``y`` in double precision.
    """
    for _ in range(8):
        previous = expr
        const, rest = expr.as_independent(*syms, as_Add=True)
        if rest != 0 and const != 0:
            expr = rest
        coeff, rest = expr.as_independent(*syms, as_Add=False)
        if rest != 1 and coeff != 1 and coeff.is_nonzero:
            expr = rest
        if expr.is_Add:  # a common scale of the terms: divide by the largest numeric coefficient
            coeffs = [term.as_coeff_Mul()[0] for term in expr.args]
            big = max(coeffs, key=lambda c: abs(float(c)) if abs(c) < _HUGE else math.inf)
            if big != 1 and big.is_nonzero:
                expr = sp.Add(*[term / big for term in expr.args])
        if expr == previous:
            break
    return expr


_HUGE = sp.Float(1e300)


def _precision_loss(target: Target) -> str | None:
    """Why ``y`` evaluated in double precision does not resolve the label, or None.

    See :func:`dmftsolve.admissibility.label_resolution`: when the double-precision
    values miss the variation of the exact ones (``log(1 + 1e-20*z**2)`` is 0 in
    doubles), every method would see a constant label and report ``δ_alg = ∞``.
    """
    res = label_resolution(target)
    if res is None or res[3] <= 1e-3:
        return None
    spread, center, miss, _ = res
    return (f"target={target.expr!r} is too flat for double precision: the label varies by "
            f"{spread} around {center}, and double-precision "
            f"evaluation misses that by {miss}; rewrite it without the constant it is "
            "dominated by (δ_alg is unchanged by y -> a*y + b and by any invertible map of y)")


def _standardize(target: Target, reduce: bool) -> tuple[Target, list[int], list[str]]:
    """An equivalent target for the computation, the latents it keeps, and notes.

    Removes an additive constant and a constant factor from the label (see
    :func:`_strip_constants`) and, with ``reduce``, the latents the label does
    not depend on: a latent independent of ``y`` contributes a zero row and
    column to ``G(y) = E[zzᵀ − I | y]``, so ``ρ(F)`` is that of the label in the
    latents it uses (``z2**2`` with ``k = 2`` has the ``δ_alg = 1/2`` of ``z**2``).

    Raises
    ------
    ValueError
        If the label is too flat for double precision (:func:`_precision_loss`).
    """
    expr = target.sympy_expr
    zs, eps = list(target.symbols[:-1]), target.symbols[-1]
    free = expr.free_symbols
    used = [i for i, z in enumerate(zs) if z in free] if reduce else list(range(len(zs)))
    if not used:  # the label does not depend on z: G ≡ 0 whatever the rest
        return target, list(range(len(zs))), []
    notes: list[str] = []
    stripped = _strip_constants(expr, [*(zs[i] for i in used), eps])
    if stripped != expr:
        notes.append("computed for the equivalent label without its additive constant and constant "
                     "factor (δ_alg is invariant under y -> a*y + b)")
    kept = len(used)
    if kept < len(zs):
        names = ["z"] if kept == 1 else [f"z{j + 1}" for j in range(kept)]
        new = [sp.Symbol(n, real=True) for n in names]
        stripped = stripped.xreplace({zs[i]: new[j] for j, i in enumerate(used)})
        notes.append(f"the label depends on {kept} of the k={len(zs)} latents; the others "
                     "are independent of y and add nothing to F")
    work = target if (stripped == expr and kept == len(zs)) else Target._from_sympy(stripped, kept)
    # a scale left inside a product or a function (z**2*(1e-301*z + 1e-300)): rescale numerically
    pts = np.random.default_rng(7).standard_normal((256, kept + 1))
    with np.errstate(all="ignore"):
        yv = work(pts[:, :-1], pts[:, -1])
    if np.all(np.isfinite(yv)):
        scale = float(np.median(np.abs(yv - np.median(yv))))
        if scale > 0 and not 1e-100 < scale < 1e100:
            stripped = stripped / sp.Float(scale, 30)
            work = Target._from_sympy(stripped, kept)
    reason = _precision_loss(work)
    if reason is not None:
        raise ValueError(reason)
    return work, used, notes


def _embed(diagnostics: dict[str, Any], used: list[int], k: int) -> None:
    """Map the ``k'×k'`` matrices of a reduced computation back to the ``k`` latents."""
    if len(used) == k:
        return
    idx = np.asarray(used)
    for key in ("easy_subspace", "trivial_gram"):
        if key in diagnostics:
            small = np.asarray(diagnostics[key], dtype=float)
            full = np.zeros((k, k))
            full[np.ix_(idx, idx)] = small
            diagnostics[key] = full
    if "F_eigenvalues" in diagnostics:
        w = np.asarray(diagnostics["F_eigenvalues"], dtype=float)
        diagnostics["F_eigenvalues"] = np.sort(np.r_[np.zeros(k * (k + 1) // 2 - w.size), w])
    diagnostics["latents_used"] = [int(i) for i in used]


# --------------------------------------------------------------------------- driver
def _additive_noise(target: Target) -> tuple[sp.Expr, float] | None:
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


def _check_alg_inputs(method: Any, rtol: Any, n_samples: Any, n_scrambles: Any) -> None:
    """Raise ``ValueError`` naming the first invalid argument of :func:`alg_threshold`."""
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if not (isinstance(rtol, (int, float)) and not isinstance(rtol, bool)
            and math.isfinite(rtol) and 0 < rtol < 1):
        raise ValueError(f"rtol must be a number in (0, 1), got {rtol!r}")
    for name, v, lo in (("n_samples", n_samples, 2**10), ("n_scrambles", n_scrambles, 4)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


#: Smallest noise scale ``|c|`` of ``h0(z) + c·eps``, relative to the spread of ``h0``, the
#: "additive" method resolves: below it the ridge ``p(y|z)`` falls between the grid nodes and
#: every integral reads 0 (``z**2 + 1e-3*eps`` gave ρ(F) = 6e-22, δ_alg = ∞ with success).
_ADDITIVE_MIN_RATIO = 5e-3


def _noise_ratio(target: Target, additive: tuple[sp.Expr, float]) -> float:
    """``|c| / std(h0(z))`` for ``y = h0(z) + c·eps`` (``inf`` for a constant ``h0``)."""
    h0_expr, c = additive
    h0 = compile_expression(h0_expr, list(target.symbols[:-1]))
    z = np.random.default_rng(11).standard_normal((4096, target.k))
    with np.errstate(all="ignore"):
        v = h0(*z.T)
        top = float(np.max(np.abs(v))) if v.size else 0.0
        spread = top * float(np.std(v / top)) if top > 0 and math.isfinite(top) else 0.0
    return math.inf if not spread > 0 else abs(c) / spread


def _choose_method(target: Target, method: str, additive: tuple[sp.Expr, float] | None) -> str:
    """Resolve ``"auto"`` and check that an explicit method applies to ``target``."""
    k = target.k
    if method == "auto":
        if not target.noisy and k == 1:
            method = "preimage"
        elif (not target.noisy and k == 2 and _fibre_axis(target) is not None
              and not _has_atoms(target_h2(target), as_generator(12345))):
            method = "fibred"
        elif additive is not None and k <= 2 and _noise_ratio(target, additive) >= _ADDITIVE_MIN_RATIO:
            method = "additive"
        else:
            method = "binned"
    if method == "preimage" and (target.noisy or k != 1):
        raise ValueError(f"method='preimage' needs a noiseless k=1 target, got {target.expr!r}")
    if method == "fibred" and (target.noisy or k != 2):
        raise ValueError(f"method='fibred' needs a noiseless k=2 target, got {target.expr!r}")
    if method == "fibred" and _fibre_axis(target) is None:
        raise ValueError(f"method='fibred' needs h monotone along z1 or z2 on every line, "
                         f"got {target.expr!r}")
    if method == "additive" and additive is None:
        raise ValueError(f"method='additive' needs y = h0(z) + c*eps with constant c != 0, "
                         f"got {target.expr!r}")
    if method == "additive" and _noise_ratio(target, additive) < _ADDITIVE_MIN_RATIO:
        raise ValueError(
            f"method='additive': the noise c = {additive[1]:.3g} is {_noise_ratio(target, additive):.2g} "
            f"of the spread of h0 in {target.expr!r}, below the {_ADDITIVE_MIN_RATIO} its grid resolves "
            "(it read ρ(F) = 0 and answered ∞); use the binned method")
    return method


def _deterministic_branch(out: dict, rtol: float, diagnostics: dict, notes: list[str]) -> tuple:
    """Spectral radius, trivial statistic and tolerances from a quadrature method's output."""
    status = Status.SUCCESS
    lam, eigs, top = _spectral(out["T4"])
    lam_err = out["lam_err"]
    triv = _gram_top(out["Tm"])
    trivial = triv > max(1e-9, 10 * out["triv_err"])
    diagnostics.update(out["diagnostics"])
    diagnostics.update({"trivial_statistic": triv, "trivial_error": out["triv_err"],
                        "trivial_gram": out["Tm"], "F_eigenvalues": eigs,
                        "easy_subspace": top})
    zero_tol = max(1e-12, 10 * lam_err)
    if not out["converged"]:
        status = Status.NOT_CONVERGED
        notes.append(f"quadrature did not reach rtol={rtol:g} (error estimate "
                     f"{lam_err:.3g} on ρ(F))")
    return status, lam, lam_err, triv, trivial, zero_tol, rtol


def _binned_branch(target: Target, n_samples: int, n_scrambles: int, gen: np.random.Generator,
                   rtol: float, diagnostics: dict, notes: list[str]) -> tuple:
    """Spectral radius, trivial statistic and tolerances from the binned Monte Carlo method."""
    out = _binned(target, n_samples, n_scrambles, gen)
    lam, lam_err = out["lam"], out["lam_err"]
    glob, coords = _flip_symmetric(target, gen)
    if glob or all(coords):
        triv, trivial = 0.0, False
        notes.append("E[z|y] = 0 by the sign symmetry of h")
    else:
        triv = out["triv"]
        trivial = triv > 5 * out["triv_se"] and triv > 1e-6
    diagnostics.update(out["diagnostics"])
    diagnostics.update({"trivial_statistic": triv, "trivial_error": out["triv_se"],
                        "sign_symmetric": glob, "coordinate_sign_symmetric": coords,
                        "spectral_radius_standard_error": out["lam_se"]})
    return Status.SUCCESS, lam, lam_err, triv, trivial, 3 * out["lam_se"], max(rtol, 1e-2)


def _conclude(k: int, method: str, status: Status, lam: float, lam_err: float, trivial: bool,
              zero_tol: float, accept: float, notes: list[str]) -> tuple[float, float, Status]:
    """``(δ_alg, error, status)`` from the spectral radius ``ρ(F)`` and the trivial test."""
    if trivial:
        notes.insert(0, "E[z|y] ≠ 0: the directions in the range of E_y[E[z|y]E[z|y]ᵀ] are "
                        "learned by a linear step at any δ > 0, so δ_alg = 0"
                     + ("" if k == 1 else "; for the threshold of the remaining directions "
                        "once the learned ones are known, see dmftsolve.staged_alg_threshold"))
        return 0.0, 0.0, status
    if lam <= zero_tol and max(lam, 0.0) + lam_err > 1e-2:
        # an error this large is no evidence that ρ(F) = 0
        if lam > 2 * lam_err:  # resolved from 0, not to the tolerance: a value with its error
            notes.append(f"ρ(F) = {lam:.3g} ± {lam_err:.2g}: the error exceeds the tolerance")
            return 1.0 / lam, lam_err / lam**2, Status.NOT_CONVERGED
        # only δ_alg >= 1/(ρ + error) is known
        notes.insert(0, f"ρ(F) = {lam:.3g} ± {lam_err:.2g} cannot be told from 0 at this accuracy: "
                        f"δ_alg >= {1 / (max(lam, 0.0) + lam_err):.3g} is all that is known")
        return math.inf, math.inf, Status.NOT_CONVERGED
    if lam <= zero_tol:
        if lam > 10 * lam_err and lam > 0:  # resolved, but below the absolute floor of 1e-12
            notes.insert(0, f"ρ(F) = {lam:.3g} ± {lam_err:.2g} is below {zero_tol:.0e}, taken as 0: "
                            f"δ_alg >= {1 / zero_tol:.0e} (about {1 / lam:.3g}), reported as ∞")
        else:
            notes.insert(0, f"G(y) = E[zzᵀ − I | y] ≡ 0 (ρ(F) = {lam:.3g} ± {lam_err:.2g}): no "
                            "first-order method recovers the hard directions at any δ, δ_alg = ∞")
        return math.inf, math.inf, status
    delta = 1.0 / lam
    err = lam_err / lam**2
    if method == "binned" and err > accept * delta:
        status = Status.NOT_CONVERGED
        notes.append(f"Monte Carlo/binning error {err:.3g} exceeds {accept:g}·δ_alg; "
                     "raise n_samples")
    return delta, err, status


def alg_threshold(
    target_or_problem: Any,
    *,
    method: str = "auto",
    rtol: float = 1e-8,
    n_samples: int = 2**20,
    n_scrambles: int = 16,
    seed: Any = 0,
    throw: bool = True,
    max_pieces: int = MAX_PIECES,
) -> AlgThreshold:
    """Weak-recovery threshold ``δ_alg`` of the target (see the module docstring).

    Parameters
    ----------
    target_or_problem : Target, Problem or str
        The link ``y = h(z, ε)`` (a :class:`~dmftsolve.problem.Problem`
        contributes its target; a string is parsed as :class:`Target`).
    method : {"auto", "preimage", "additive", "binned"}
        ``"auto"``: ``"preimage"`` for noiseless ``k = 1``, ``"fibred"`` for
        noiseless ``k = 2`` targets monotone along a coordinate on every line
        and without atoms, ``"additive"`` for ``h0(z) + c·eps`` with ``k <= 2``,
        else ``"binned"``.
    rtol : float
        Relative accuracy asked of the deterministic methods; ``"binned"`` is
        accepted if its error is below ``max(rtol, 1e-2)`` relative.
    n_samples, n_scrambles : int
        Sobol points (total) and independent scramblings for ``"binned"``.
    seed : None, int, SeedSequence or numpy.random.Generator
        Randomness for ``"binned"`` (default 0, reproducible; ``dmftsolve.seeds``).
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` unless the status is
        ``SUCCESS`` (default).
    max_pieces : int
        Most monotone pieces of ``h`` (on ``[-12, 12]``, or on a fibre) the exact
        methods take on (default :data:`MAX_PIECES`); their time grows like the
        square of the count (about ``0.06 s × pieces²``). Past it ``"auto"`` uses
        ``"binned"`` and an explicit ``"preimage"``/``"fibred"`` is refused at once.

    Returns
    -------
    AlgThreshold

    Raises
    ------
    ValueError
        Invalid inputs, or a method that does not apply to the target.
    NotImplementedError
        Cases no method handles reliably (e.g. ``"additive"`` with large ``k``).
    SolverError
        If ``throw`` and the result did not reach its tolerance.

    Examples
    --------
    For ``y = z²`` the label fixes ``z²``, so ``δ_alg = 1/Var(z²) = 1/2``:

    >>> from dmftsolve import alg_threshold
    >>> r = alg_threshold("z**2")
    >>> abs(r.delta_alg - 0.5) <= r.error < 1e-8, r.method
    (True, 'preimage')
    """
    start = time.perf_counter()
    original = _as_target(target_or_problem)
    _check_alg_inputs(method, rtol, n_samples, n_scrambles)
    if isinstance(max_pieces, bool) or not isinstance(max_pieces, (int, np.integer)) or max_pieces < 1:
        raise ValueError(f"max_pieces must be an integer >= 1, got {max_pieces!r}")
    gen = as_generator(seed)
    auto = method == "auto"
    # the computation runs on an equivalent label: no constant offset or factor, and (auto)
    # only the latents it depends on; results are mapped back to original.k below
    target, used, notes = _standardize(original, reduce=auto)
    k = target.k
    additive = _additive_noise(target)
    method = _choose_method(target, method, additive)
    settings = {"target": original.expr, "k": original.k, "method": method, "rtol": rtol}
    diagnostics: dict[str, Any] = {"k": original.k, "noisy": target.noisy}
    if target is not original:
        diagnostics["standardized_target"] = target.expr

    fibred_out = None
    fell_back = False  # from an exact method to the binned one, for too many pieces
    if method in ("preimage", "fibred"):
        try:
            if method == "preimage":
                preimage_out = _preimage(target, rtol, max_pieces)
            else:
                fibred_out = _fibred(target, rtol, _fibre_axis(target), max_pieces)
        except _TooManyPieces as exc:
            if not auto:
                raise ValueError(f"method={method}: {str(exc).split('; use method')[0]}; use the "
                                 "binned method (Monte Carlo), or raise max_pieces to wait") from None
            notes.append(f"{exc.pieces} monotone pieces: the exact quadrature would take about "
                         f"{exc.seconds:.2g} s, used the binned Monte Carlo method")
            fell_back = True
            method = "binned"
            settings["method"] = method
        except _NotFinite as exc:
            if not auto:
                raise ValueError(f"method={method}: {exc}") from None
            notes.append("h or h' is not finite at a point of the exact method's grid: used the "
                         "binned Monte Carlo method")
            fell_back = True
            method = "binned"
            settings["method"] = method
    if method == "binned" and k > MAX_BINNED_K:
        raise ValueError(
            f"k={original.k}: the binned Monte Carlo method, the only one that applies to "
            f"target={original.expr!r}, handles at most {MAX_BINNED_K} latent directions (it "
            f"averages over the 2^k sign flips of z); use a smaller k")

    if method == "fibred":
        if auto and not fibred_out["converged"]:
            notes.append(f"fibred quadrature did not converge (error {fibred_out['lam_err']:.2g} on ρ(F)); "
                         "used the binned Monte Carlo method")
            diagnostics["fibred_attempt"] = {"spectral_radius": _spectral(fibred_out["T4"])[0],
                                             "error": fibred_out["lam_err"]}
            method = "binned"
            settings["method"] = method
    if method in ("preimage", "fibred", "additive"):
        if method == "preimage":
            out = preimage_out
        elif method == "fibred":
            out = fibred_out
        else:
            out = _additive(target, *additive, rtol)
        branch = _deterministic_branch(out, rtol, diagnostics, notes)
    else:
        settings.update({"n_samples": int(n_samples), "n_scrambles": int(n_scrambles),
                         "seed": seed if isinstance(seed, (int, np.integer)) else None})
        branch = _binned_branch(target, int(n_samples), int(n_scrambles), gen, rtol, diagnostics, notes)
    status, lam, lam_err, triv, trivial, zero_tol, accept = branch
    diagnostics.update({"spectral_radius": lam, "spectral_radius_error": lam_err})
    delta, err, status = _conclude(k, method, status, lam, lam_err, trivial, zero_tol, accept, notes)
    if method == "additive" and math.isinf(delta) and not trivial:
        ratio = _noise_ratio(target, additive)
        if 1e4 < ratio < math.inf:  # a signal drowned in noise: ρ(F) ~ ratio^-4 is tiny, not 0
            notes[0] = (f"the noise is {ratio:.2g} times the spread of the rest of the label, so ρ(F) "
                        f"= {lam:.3g} ± {lam_err:.2g} is below what double precision resolves: δ_alg is "
                        "beyond 1e12, reported as ∞ (it is finite for any nonzero signal)")
    if fell_back and math.isinf(delta):
        # the Monte Carlo cannot tell a small ρ(F) (or a weak E[z|y]) from 0: a bound, not ∞
        status = Status.NOT_CONVERGED
        bound = 1.0 / (max(lam, 0.0) + lam_err) if lam_err > 0 else math.inf
        notes[0] = (f"the binned Monte Carlo cannot tell ρ(F) = {lam:.3g} ± {lam_err:.2g} from 0, so "
                    f"δ_alg >= {bound:.3g} is all it shows (a weak E[z|y] ≠ 0 would go unseen too)")
    _embed(diagnostics, used, original.k)
    result = AlgThreshold(delta_alg=delta, trivial=bool(trivial), error=err, method=method,
                          status=status, message="; ".join(notes), settings=settings,
                          diagnostics=diagnostics, elapsed=time.perf_counter() - start)
    if throw and not result.ok:
        raise SolverError(f"alg_threshold {status.value}: {result.message}", result)
    return result
