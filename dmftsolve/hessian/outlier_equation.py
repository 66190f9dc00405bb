"""Outliers of ``H = (1/n) Σ_i x_i x_iᵀ ⊗ D_i + λ I`` along the hard latent directions.

Setting (docs/theory.md §4.2): ``x_i = (z_i, x_i^⊥)`` with hard coordinates
``z_i ∈ R^k`` and ``D_i`` depending on ``x_i`` only through ``(z_i, y_i, …)``,
not on ``x_i^⊥`` (for GD Hessians this needs the sign symmetry of docs/theory.md §4.2).
A real ``x`` outside the bulk is an eigenvalue of ``H`` with an eigenvector
in ``(hard subspace) ⊗ R^m`` iff ``det M(x) = 0``, where

    M(x) = I_k ⊗ S(x)^{-1} + E[ (z zᵀ − I_k) ⊗ D (I_m + S(x) D/δ)^{-1} ]      (km × km)
         = (λ − x) I_{km} + E[ z zᵀ ⊗ A(x) ],      A = D (I_m + S D/δ)^{-1},

the second form by the bulk equation ``S^{-1} = (λ − x) I + E[A]``.

Derivation of the overlap
-------------------------
Split ``R^d ⊗ R^m = (R^k ⊗ R^m) ⊕ (R^{d−k} ⊗ R^m)`` and write ``H`` in blocks
``H_11, H_12, H_22``. For ``x ∉ spec(H_22)``, ``x`` is an eigenvalue iff the Schur
complement ``T(x) = H_11 − x − H_12 (H_22 − x)^{-1} H_21`` is singular; the
eigenvector is ``v = (a, −(H_22 − x)^{-1} H_21 a)`` with ``T(x) a = 0``. Hence

    ‖v‖² = ‖a‖² + aᵀ H_12 (H_22 − x)^{-2} H_21 a = −aᵀ T'(x) a,

because ``T'(x) = −I − H_12 (H_22 − x)^{-2} H_21``. The squared overlap of the
unit eigenvector with the hard subspace is therefore, exactly at finite ``d``,

    overlap² = ‖a‖² / ‖v‖² = 1 / (−aᵀ T'(x) a)     (‖a‖ = 1).

``T(x) → M(x)`` (the deterministic equivalent: diagonal resolvent blocks give
``A_i``, off-diagonal ones average out), locally uniformly off the bulk, so
``T' → M'`` and ``overlap² = 1/(−aᵀ M'(x) a)`` with ``a`` the unit null vector of
``M(x*)``. The derivative is explicit: with ``R = S^{-1}``, ``B = D (D + δR)^{-1}``
and ``K[E] = δ E[B E Bᵀ]``,

    R'(x) = −(I − K)^{-1}[I],    A'(x) = δ B R'(x) Bᵀ,    M'(x) = −I_{km} + E[z zᵀ ⊗ A'(x)].

For ``m = k = 1``: ``overlap² = 1/(1 + δ E[z² B²]/(1 − δ E[B²]))`` with
``B = D/(D + δ/s)``; equivalently ``1/(1 + Σ'(x))`` with
``Σ(x) = E[D² (s/δ) z²/(1 + D s/δ)]`` (literature notes §2.2). The tests check
``M'`` against finite differences of ``M`` and the overlap against finite-``d``
eigenvectors.

Algorithm: the physical real branch ``R(x)`` is continued from far below
the support to ``edge − edge_gap`` on a grid (uniform plus geometric towards
the edge); the sorted eigenvalues of ``M`` are tracked (``M ≻ 0`` far below
the support), every sign change of an eigenvalue is refined with
:func:`scipy.optimize.brentq`, the root is verified by its residual
``|eig(M(x*))|``, and its bracket is reported. Right outliers are the left
outliers of ``−H`` (``D → −D``, ``λ → −λ``). An atom of the bulk at ``λ`` lying in
the scan range (``M(λ) = 0`` there) is cut out of the scan.

Caveat for plug-in (empirical) laws: an isolated extreme sample ``D_i`` makes a
tiny island of the sample law's spectrum near the edge, and ``M`` can vanish
next to it; such roots sit at the (island) edge with overlap² ≈ 0 and are the
finite-sample eigenvalue carried by that sample, not a hard-direction outlier
(seen once in five ``d = 500`` runs of the ``tanh(1 − z²)`` example at ``δ = 0.5``:
root −3.1463 with overlap² 0.002). Quadrature or large-N laws do not show it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

from dmftsolve.hessian._resolvent import (
    WeightLaw,
    atom_mass,
    d_times_inverse,
    far_left,
    law_flag,
    left_edge,
    march_to_fold,
    prepare_law,
    real_start,
    real_step,
    residual,
    spectral_radius,
    tangent,
    unbounded,
)
from dmftsolve.hessian.law import Law
from dmftsolve.results import Result, SolverError, Status

__all__ = ["Outlier", "Outliers", "outliers", "outlier_matrix", "spike_coordinates", "training_outliers"]


# --------------------------------------------------------------------------- core
def _law_z(D: ArrayLike | Law, z: ArrayLike | None) -> ArrayLike:
    """``z``, or the target coordinates of the Law ``D`` when ``z`` is None."""
    if z is None:
        if not isinstance(D, Law):
            raise ValueError("z must be given when D is an array (z=None means all of Law.Vstar)")
        return D.Vstar
    return z


def _prepare_z(z: ArrayLike, law: WeightLaw) -> np.ndarray:
    za = np.asarray(z, dtype=float)
    if za.ndim == 1:
        za = za[:, None]
    n_all = law.keep.size
    if za.ndim != 2 or za.shape[0] != n_all or za.shape[1] == 0:
        raise ValueError(f"z must have shape (N,) or (N, k) with N={n_all}, got shape {np.shape(z)}")
    if not np.all(np.isfinite(za)):
        raise ValueError("z must be finite")
    return za[law.keep]


def _kron_expect(w: np.ndarray, z: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``Σ_i w_i (z_i z_iᵀ) ⊗ A_i`` as a ``km × km`` matrix."""
    N, k = z.shape
    m = A.shape[-1]
    Zf = (z[:, :, None] * z[:, None, :]).reshape(N, k * k)
    T = (w[:, None] * Zf).T @ A.reshape(N, m * m)  # [(a, b), (c, d)]
    return T.reshape(k, k, m, m).transpose(0, 2, 1, 3).reshape(k * m, k * m)


def _m_and_derivative(
    law: WeightLaw, z: np.ndarray, R: np.ndarray, K: np.ndarray | None, *, derivative: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """``M(x)`` and ``M'(x)`` at the real-branch point ``R = R(x)``."""
    m, delta = law.m, law.delta
    k = z.shape[1]
    if m == 1:
        d = law.D[:, 0, 0]
        B = (d / (d + delta * R[0, 0]))[:, None, None]
    else:
        B = d_times_inverse(law.D, delta * R)  # D (D + δR)^{-1}
    A = delta * (B @ R)  # = D − D (D + δR)^{-1} D
    A = 0.5 * (A + np.swapaxes(A, 1, 2))
    EA = law.expect(A)
    M = np.kron(np.eye(k), R - EA) + _kron_expect(law.w, z, A)
    M = 0.5 * (M + M.T)
    if not derivative:
        return M, None
    dR = tangent(law, K)
    dA = delta * (B @ dR @ np.swapaxes(B, 1, 2))
    dM = -np.eye(k * m) + _kron_expect(law.w, z, dA)
    return M, 0.5 * (dM + dM.T)


@dataclass
class _Branch:
    """The physical real branch on a grid, with ``M`` eigenvalues."""

    x: list[float] = field(default_factory=list)
    R: list[np.ndarray] = field(default_factory=list)
    K: list[np.ndarray] = field(default_factory=list)
    eig: list[np.ndarray] = field(default_factory=list)


def _march(law: WeightLaw, z: np.ndarray, grid: np.ndarray, R0: np.ndarray, K0: np.ndarray, x0: float,
           *, tol: float, maxiter: int, max_halvings: int = 30) -> tuple[_Branch, bool, tuple | None]:
    """Continue the real branch through ``grid``, recording ``M``'s eigenvalues at every grid point.

    A grid step that Newton cannot take at once is taken in adaptive sub-steps (halved on
    failure, grown by 1.5 on success), as in the left-edge march: the branch can need short
    steps away from the fold (r² at m = 2, δ = 1.5: spectral radius 0.2 where a step of
    0.18 failed and 0.09 held). The branch is lost only when a sub-step shorter than
    ``2⁻³⁰`` of the grid step fails; the third return value is then the last point reached,
    ``(x, R, K)``, where the caller can tell a fold (spectral radius of ``K`` near 1: the
    support starts there) from a Newton failure.
    """
    br = _Branch()
    x_old, R_old, K_old = x0, R0, K0
    for x in grid:
        x = float(x)
        R, K, ok = real_step(law, x, x_old, R_old, K_old, tol=tol, maxiter=maxiter)
        if not ok:
            full = x - x_old
            x_old, R, K, _, folded = march_to_fold(law, x_old, R_old, K_old, 0.5 * full,
                                                   xtol=full * 2.0**-max_halvings, tol=tol, maxiter=maxiter,
                                                   target=x, approach=None)
            if folded:
                return br, False, (x_old, R, K)
        M, _ = _m_and_derivative(law, z, R, K, derivative=False)
        br.x.append(x)
        br.R.append(R)
        br.K.append(K)
        br.eig.append(np.linalg.eigvalsh(M))
        x_old, R_old, K_old = x, R, K
    return br, True, None


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Outlier:
    """One outlier eigenvalue of ``H``.

    Attributes
    ----------
    location : float
        The eigenvalue (limit ``d → ∞``).
    overlap2 : float
        Squared overlap of its unit eigenvector with ``(hard subspace) ⊗ R^m``.
    bracket : (float, float)
        Bracket in which Brent's method found the root.
    residual : float
        ``|eigenvalue of M(location)|`` that crossed zero.
    direction : numpy.ndarray, shape (k, m)
        Unit null vector of ``M``: the eigenvector's component in ``R^k ⊗ R^m``, normalised.
    side : {"left", "right"}
    parts : dict
        Only from :func:`training_outliers`: ``overlap2`` split over the hard
        directions, the other target directions and the learned ones
        (the part of ``span(W)`` orthogonal to ``span(Θ*)``); the parts sum to
        ``overlap2``.
    """

    location: float
    overlap2: float
    bracket: tuple[float, float]
    residual: float
    direction: np.ndarray
    side: str
    parts: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "location": self.location, "overlap2": self.overlap2, "bracket": list(self.bracket),
            "residual": self.residual, "direction": self.direction.tolist(), "side": self.side,
        }
        if self.parts:
            out["parts"] = dict(self.parts)
        return out


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class Outliers(Result):
    """Outliers of ``H`` along the hard directions, sorted by location.

    Attributes
    ----------
    outliers : list of Outlier
    left_edge, right_edge : float or None
        Bulk edges used (``None``: unbounded, or side not requested).
    """

    _headline = ("locations", "overlaps2")  # shown by the repr (Result.__repr__)

    outliers: list[Outlier]
    left_edge: float | None
    right_edge: float | None
    status: Status = Status.SUCCESS
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def locations(self) -> np.ndarray:
        return np.array([o.location for o in self.outliers])

    @property
    def overlaps2(self) -> np.ndarray:
        return np.array([o.overlap2 for o in self.outliers])


# --------------------------------------------------------------------------- scanning
#: A march that stalls where the spectral radius of ``K`` exceeds this has reached a fold of
#: the physical real branch: the support of the bulk begins there.
FOLD_RHO = 1.0 - 1e-3
#: How many times a scan may move the left edge to a fold the edge march stepped over.
MAX_EDGE_CORRECTIONS = 5


def _scan_left(
    law: WeightLaw, z: np.ndarray, *, npoints: int, edge_gap: float, method: str, xtol: float, tol: float,
    maxiter: int, atom_mass: float,
) -> tuple[float, list[tuple[float, float, tuple[float, float], float, np.ndarray]], dict[str, Any], bool]:
    """Left outliers of the law: ``[(x, overlap², bracket, residual, direction)]``.

    The edge march takes capped steps and can step over a piece of the support thinner
    than its cap (an island of a few extreme samples of a plug-in law; seen for r² at
    m = 2, δ = 1.5: an island on [−2.22, −1.98] of mass 3·10⁻⁴ left of a bulk edge at
    −1.50). The scan's grid is finer; when it stalls at a fold (spectral radius of ``K``
    above :data:`FOLD_RHO`) left of the march's edge, that fold is the left edge: the scan
    is redone up to it and ``edge_corrections`` in the diagnostics records the move.
    """
    edge, info = left_edge(law, method, xtol=xtol, tol=tol, maxiter=maxiter)
    diag: dict[str, Any] = dict(info)
    corrections: list[dict[str, float]] = []
    while True:
        found, scan_diag, ok, stall = _scan_to(law, z, edge, npoints=npoints, edge_gap=edge_gap, tol=tol,
                                               maxiter=maxiter, atom_mass=atom_mass)
        if ok or stall is None or len(corrections) >= MAX_EDGE_CORRECTIONS:
            break
        x_s, _, K_s = stall
        rho = spectral_radius(K_s) if K_s is not None else math.nan
        if not (rho > FOLD_RHO and x_s < edge):
            break
        corrections.append({"march_edge": edge, "fold": x_s, "rho": rho})
        edge = x_s
    diag |= {"edge": edge} | scan_diag
    if corrections:
        diag["edge_corrections"] = corrections
    return edge, found, diag, ok


def _scan_to(
    law: WeightLaw, z: np.ndarray, edge: float, *, npoints: int, edge_gap: float, tol: float, maxiter: int,
    atom_mass: float,
) -> tuple[list, dict[str, Any], bool, tuple | None]:
    """Scan the real branch from far left to ``edge − edge_gap``; the stall point if it is lost."""
    x_far = far_left(law)
    x_end = edge - edge_gap
    diag: dict[str, Any] = {"scan_start": x_far, "scan_end": x_end}
    if law.trivial or x_end <= x_far:
        return [], diag, True, None
    n1 = max(npoints // 2, 8)
    span = x_end - x_far
    grid = np.unique(np.concatenate([
        np.linspace(x_far, x_end, n1),
        x_end - span * np.geomspace(1.0, max(edge_gap / span, 1e-12), n1),
    ]))
    # the two grids can hold points an ulp apart (x_far and x_end − span·1.0, or interior
    # coincidences); over such a step R cannot decrease measurably and rounding could make it
    # look as if it jumped over the support: keep the later point of each such pair
    grid = grid[np.concatenate([np.diff(grid) > 1e-9 * span, [True]])]
    # segments separated by an atom at λ (M(λ) = 0 there: not an outlier)
    segments = [grid]
    if atom_mass != 0 and x_far < law.lam < x_end:  # an atom, or one not ruled out (nan)
        cut = max(edge_gap, 1e-6 * law.scale)
        segments = [grid[grid < law.lam - cut], grid[grid > law.lam + cut]]
        diag["atom_cut"] = (law.lam - cut, law.lam + cut)
    R0, ok = real_start(law, x_far, tol=tol, maxiter=maxiter)
    if not ok:
        return [], diag | {"failure": f"no physical real solution at x={x_far!r}"}, False, None
    _, K0, _ = residual(law, x_far, R0)
    found = []
    x_prev, R_prev, K_prev = x_far, R0, K0
    last_eig = None
    for seg in segments:
        if seg.size < 2:
            continue
        br, ok, stall = _march(law, z, seg, R_prev, K_prev, x_prev, tol=tol, maxiter=maxiter)
        if not ok:
            return found, diag | {"failure": "real branch lost during the scan"}, False, stall
        x_prev, R_prev, K_prev = br.x[-1], br.R[-1], br.K[-1]
        last_eig = br.eig[-1]
        eigs = np.array(br.eig)
        for j in range(len(br.x) - 1):
            # R(x) decreases (R' = −(I − K)^{-1}[I] ≺ 0) left of the support; a step whose R
            # does not decrease jumped over a piece of it
            jumped = np.linalg.eigvalsh(br.R[j + 1] - br.R[j])[-1] >= 0
            roots = []
            if not jumped:
                try:
                    roots = [_refine(law, z, br, j, int(i), tol=tol, maxiter=maxiter)
                             for i in np.nonzero(np.sign(eigs[j]) != np.sign(eigs[j + 1]))[0]]
                except SolverError:  # the bracket straddles a piece of the support
                    jumped = True
            if jumped:
                # where a march in steps of 1/1024 of this one stalls: the fold the step jumped
                cap = (br.x[j + 1] - br.x[j]) / 1024
                xs, Rs, Ks, _, folded = march_to_fold(
                    law, br.x[j], br.R[j], br.K[j], cap, xtol=cap * 2.0**-30, tol=tol, maxiter=maxiter,
                    target=br.x[j + 1], approach=None)
                stall = (xs, Rs, Ks) if folded else None
                failure = f"the scan stepped over a piece of the support in [{br.x[j]!r}, {br.x[j + 1]!r}]"
                return found, diag | {"failure": failure}, False, stall
            found.extend(roots)
    diag["min_eig_M_at_scan_end"] = float(last_eig[0]) if last_eig is not None else math.nan
    return found, diag, True, None


def _refine(law: WeightLaw, z: np.ndarray, br: _Branch, j: int, i: int, *, tol: float, maxiter: int):
    """Brent on the ``i``-th eigenvalue of ``M`` between grid points ``j`` and ``j + 1``."""
    xa, xb = br.x[j], br.x[j + 1]
    Ra, Ka = br.R[j], br.K[j]
    cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def solve(x: float) -> tuple[np.ndarray, np.ndarray]:
        if x not in cache:
            R, K, ok = real_step(law, x, xa, Ra, Ka, tol=tol, maxiter=maxiter)
            if not ok:
                raise SolverError(f"real branch lost at x={x!r} while refining an outlier")
            cache[x] = (R, K)
        return cache[x]

    def f(x: float) -> float:
        R, K = solve(x)
        M, _ = _m_and_derivative(law, z, R, K, derivative=False)
        return float(np.linalg.eigvalsh(M)[i])

    span = max(abs(xa), abs(xb), law.scale)
    x_star = brentq(f, xa, xb, xtol=1e-14 * span, rtol=4 * np.finfo(float).eps, maxiter=200)
    R, K = solve(x_star)
    M, dM = _m_and_derivative(law, z, R, K)
    vals, vecs = np.linalg.eigh(M)
    a = vecs[:, i]
    curvature = float(-a @ dM @ a)
    overlap2 = 1.0 / curvature if curvature > 0 else math.nan
    return (x_star, overlap2, (xa, xb), float(abs(vals[i])), a.reshape(z.shape[1], law.m))


# --------------------------------------------------------------------------- public
def outlier_matrix(
    D: ArrayLike | Law,
    z: ArrayLike | None,
    delta: float,
    x: float,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    derivative: bool = False,
    method: Literal["auto", "sc", "march"] = "auto",
    tol: float = 1e-11,
    maxiter: int = 60,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The ``km × km`` matrix ``M(x)`` whose singularity locates outliers (and ``M'(x)``).

    Parameters
    ----------
    D : array_like, shape (N, m, m) or (N,), or Law
        Samples of ``D``, or a :class:`~dmftsolve.hessian.law.Law` (with its weights).
    z : array_like, shape (N, k) or (N,), or None
        Hard latent coordinates of the same samples (``None`` with a Law:
        all of ``Law.Vstar``).
    delta : float
        Sample ratio.
    x : float
        A real point outside the bulk (below the left edge or above the right edge).
    lam, weights, method, tol, maxiter
        As in :func:`dmftsolve.hessian.spectrum.bulk_spectrum`.
    derivative : bool
        Also return ``M'(x)``.

    Returns
    -------
    M or (M, dM) : numpy.ndarray
        Indexing ``(a, c) → a m + c`` with ``a`` the latent and ``c`` the neuron index.
    """
    z = _law_z(D, z)
    law = prepare_law(D, delta, lam, weights)
    zk = _prepare_z(z, law)
    xf = float(x)
    if not math.isfinite(xf):
        raise ValueError(f"x must be finite, got {x!r}")
    xtol = 1e-10 * law.scale
    left, _ = left_edge(law, method, xtol=xtol, tol=tol, maxiter=maxiter)
    neg = law.negated()
    right = -left_edge(neg, method, xtol=xtol, tol=tol, maxiter=maxiter)[0]
    if xf < left:
        use, xx, sign = law, xf, 1.0
    elif xf > right:
        use, xx, sign = neg, -xf, -1.0
    else:
        raise ValueError(f"x must lie outside the bulk [{left:.6g}, {right:.6g}], got {x!r}")
    x0 = min(far_left(use), xx - 1.0)
    R, ok = real_start(use, x0, tol=tol, maxiter=maxiter)
    _, K, _ = residual(use, x0, R)
    br, ok2, _ = _march(use, zk, np.linspace(x0, xx, 65)[1:], R, K, x0, tol=tol, maxiter=maxiter)
    if not (ok and ok2):
        raise SolverError(f"real branch not found at x={x!r}")
    M, dM = _m_and_derivative(use, zk, br.R[-1], br.K[-1])
    # M(−H) at −x equals −M(H) at x; dM/dx is the same for both
    return (sign * M, dM) if derivative else sign * M


def outliers(
    D: ArrayLike | Law,
    z: ArrayLike | None,
    delta: float,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    side: Literal["left", "right", "both"] = "left",
    npoints: int = 400,
    edge_gap: float | None = None,
    unbounded_below: bool | None = None,
    unbounded_above: bool | None = None,
    method: Literal["auto", "sc", "march"] = "auto",
    xtol: float | None = None,
    tol: float = 1e-11,
    maxiter: int = 60,
    throw: bool = True,
) -> Outliers:
    """Outlier eigenvalues of ``H`` along the hard directions and their overlaps.

    Parameters
    ----------
    D : array_like, shape (N, m, m) or (N,), or Law
        Samples of ``D``, or a :class:`~dmftsolve.hessian.law.Law` (with its weights).
    z : array_like, shape (N, k) or (N,), or None
        Hard latent coordinates, jointly with ``D`` (``None`` with a Law: all
        of ``Law.Vstar``; for the hard ones pass ``law.Vstar[:, hard]``).
    delta : float
        Sample ratio ``δ = n/d``.
    lam : float, optional
        Ridge ``λ``.
    weights : array_like, shape (N,), optional
        Sample weights.
    side : {"left", "right", "both"}
        Below the left edge, above the right edge, or both.
    npoints : int
        Scan grid size per side (half uniform, half geometric towards the edge).
        Two crossings of the same eigenvalue within one grid cell are missed.
    edge_gap : float, optional
        The scan stops at ``edge − edge_gap`` (default ``1e-8 × scale``):
        outliers closer to the edge than that are not resolved; the smallest
        eigenvalue of ``M`` there is in ``diagnostics`` (its sign tells whether
        an outlier is about to emerge).
    unbounded_below, unbounded_above : bool or None
        As in :func:`dmftsolve.hessian.spectrum.edges`. An unbounded side makes
        outliers on that side ill-posed: status ``FAILED``.
    method, xtol, tol, maxiter
        As in :func:`dmftsolve.hessian.spectrum.bulk_spectrum`.
    throw : bool
        Raise :class:`SolverError` unless the status is ``SUCCESS``.

    Returns
    -------
    Outliers

    Examples
    --------
    The r² neuron on ``min(z², 3)`` at initialisation, ``δ = 3``: the exact law
    of ``(D, z)`` by quadrature, and the hard outlier below the bulk (the value
    ``dmftsolve spectrum --activation quad --target "Min(z**2, 3)" --delta 3
    --t 0`` prints, to its error):

    >>> from dmftsolve import Law, Problem, outliers, restricted
    >>> q, hard = restricted(Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05))
    >>> law = Law.initial(q, nodes=60)
    >>> res = outliers(law, law.Vstar[:, list(hard)], 3.0)
    >>> [round(float(x), 2) for x in res.locations]
    [-2.2]
    """
    t0 = time.perf_counter()
    unbounded_below = law_flag(D, unbounded_below, "below")
    unbounded_above = law_flag(D, unbounded_above, "above")
    z = _law_z(D, z)
    law = prepare_law(D, delta, lam, weights)
    zk = _prepare_z(z, law)
    if side not in ("left", "right", "both"):
        raise ValueError(f"side must be 'left', 'right' or 'both', got {side!r}")
    if method not in ("auto", "sc", "march"):
        raise ValueError(f"method must be 'auto', 'sc' or 'march', got {method!r}")
    if isinstance(npoints, bool) or not isinstance(npoints, (int, np.integer)) or npoints < 16:
        raise ValueError(f"npoints must be an integer >= 16, got {npoints!r}")
    gap = 1e-8 * law.scale if edge_gap is None else float(edge_gap)
    if not (gap > 0 and math.isfinite(gap)):
        raise ValueError(f"edge_gap must be > 0 and finite, got {edge_gap!r}")
    xtol_r = 1e-10 * law.scale if xtol is None else float(xtol)
    if not (xtol_r > 0 and math.isfinite(xtol_r)):
        raise ValueError(f"xtol must be > 0 and finite, got {xtol!r}")
    settings = {
        "delta": law.delta, "lam": law.lam, "m": law.m, "k": zk.shape[1], "n_samples": int(law.keep.size),
        "side": side, "npoints": npoints, "edge_gap": gap, "method": method, "xtol": xtol_r, "tol": tol,
        "unbounded_below": unbounded_below, "unbounded_above": unbounded_above,
    }
    diagnostics: dict[str, Any] = {}
    messages: list[str] = []
    warnings: list[str] = []
    status = Status.SUCCESS
    mass, _ = atom_mass(law, tol=tol, maxiter=maxiter)
    found: list[Outlier] = []
    edges_out: dict[str, float | None] = {"left": None, "right": None}
    for s in ("left", "right"):
        if side not in (s, "both"):
            continue
        unb, info = unbounded(law, unbounded_below if s == "left" else unbounded_above,
                               "below" if s == "left" else "above")
        diagnostics |= info
        if unb:
            status = Status.FAILED
            messages.append(
                f"law of D unbounded {'below' if s == 'left' else 'above'}: the bulk has no {s} edge "
                f"and {s} outliers are ill-posed"
            )
            continue
        use = law if s == "left" else law.negated()
        edge, roots, info, ok = _scan_left(
            use, zk, npoints=int(npoints), edge_gap=gap, method=method, xtol=xtol_r, tol=tol,
            maxiter=maxiter, atom_mass=mass,
        )
        diagnostics |= {f"{s}_{key}": v for key, v in info.items()}
        sign = 1.0 if s == "left" else -1.0
        edges_out[s] = sign * edge
        if not ok:
            status = Status.NOT_CONVERGED
            messages.append(f"{s} scan: {info.get('failure', 'failed')}")
        for x_star, ov, (xa, xb), res, a in roots:
            Mnorm = 1.0 + law.scale
            if not res <= 1e-8 * Mnorm:
                status = Status.NOT_CONVERGED
                messages.append(f"{s} outlier at {sign * x_star:.6g} has residual {res:.3g}")
            if not (0.0 < ov <= 1.0 + 1e-8):
                warnings.append(f"{s} outlier at {sign * x_star:.6g}: overlap² = {ov!r} outside (0, 1]")
            lo, hi = sorted((sign * xa, sign * xb))
            found.append(Outlier(sign * x_star, ov, (lo, hi), res, a, s))
    found.sort(key=lambda o: o.location)
    return Outliers.finish(outliers=found, left_edge=edges_out["left"], right_edge=edges_out["right"],
                           status=status, warnings=warnings, settings=settings, diagnostics=diagnostics,
                           start=t0, messages=messages, throw=throw)


# --------------------------------------------------------------------------- learned directions
def spike_coordinates(
    Vstar: ArrayLike, V: ArrayLike, M: ArrayLike, Q: ArrayLike, *, rtol: float = 1e-8
) -> np.ndarray:
    """Orthonormal coordinates of each sample in ``span(Θ*) ⊕ span(W)``.

    Parameters
    ----------
    Vstar : array_like, shape (N, k)
        ``Θ*ᵀx`` (standard Gaussian coordinates along the target directions).
    V : array_like, shape (N, m)
        Pre-activations ``Wᵀx`` at the same samples (DMFT samples, or ``X @ W``),
        without a bias (subtract ``DMFTResult.b[t]`` when the network has one).
    M : array_like, shape (k, m)
        Overlaps ``Θ*ᵀW``.
    Q : array_like, shape (m, m)
        Gram of the part of ``W`` orthogonal to ``Θ*`` (``WᵀW − MᵀM``).
    rtol : float
        Eigenvalues of ``Q`` below ``rtol·max`` are dropped (``W`` of lower rank).

    Returns
    -------
    numpy.ndarray, shape (N, k + r)
        ``[Vstar, Λ^{-1/2} Uᵀ (V − Vstar M)]`` with ``Q = U Λ Uᵀ`` restricted to
        its ``r`` non-null eigenvalues: the first ``k`` columns are the target
        coordinates, the last ``r`` the learned ones, all with unit variance
        and uncorrelated in the ``d → ∞`` law.
    """
    Vs = np.asarray(Vstar, dtype=float)
    Va = np.asarray(V, dtype=float)
    Vs = Vs[:, None] if Vs.ndim == 1 else Vs
    Va = Va[:, None] if Va.ndim == 1 else Va
    if Vs.ndim != 2 or Va.ndim != 2 or Vs.shape[0] != Va.shape[0]:
        raise ValueError(f"Vstar and V must be (N, k) and (N, m) with the same N, got shapes "
                         f"{np.shape(Vstar)} and {np.shape(V)}")
    k, m = Vs.shape[1], Va.shape[1]
    if np.size(M) != k * m:
        raise ValueError(f"M must have shape (k, m) = ({k}, {m}), got shape {np.shape(M)}")
    Ma = np.asarray(M, dtype=float).reshape(k, m)
    if not np.all(np.isfinite(Ma)):
        raise ValueError(f"M must be finite, got {M!r}")
    Qa = np.atleast_2d(np.asarray(Q, dtype=float))
    if Qa.shape != (m, m) or not np.all(np.isfinite(Qa)):
        raise ValueError(f"Q must be a finite ({m}, {m}) matrix, got shape {np.shape(Q)}")
    if not (rtol > 0 and math.isfinite(rtol)):
        raise ValueError(f"rtol must be > 0 and finite, got {rtol!r}")
    lam, U = np.linalg.eigh(0.5 * (Qa + Qa.T))
    if lam[-1] <= 0:
        return Vs.copy()
    keep = lam > rtol * lam[-1]
    resid = Va - Vs @ Ma
    learned = resid @ (U[:, keep] / np.sqrt(lam[keep]))
    return np.concatenate([Vs, learned], axis=1)


def training_outliers(
    D: ArrayLike | Law,
    Vstar: ArrayLike | None,
    V: ArrayLike | None,
    M: ArrayLike,
    Q: ArrayLike,
    delta: float,
    *,
    hard: tuple[int, ...] | list[int] = (),
    side: Literal["left", "right", "both"] = "both",
    **kwargs: Any,
) -> Outliers:
    """Outliers of the GD Hessian along the target *and* the learned directions.

    :func:`outliers` with the spike subspace ``span(Θ*) ⊕ span(W_t)``: the
    outlier equation is solved with ``z`` = :func:`spike_coordinates`, so that
    ``D`` depends on the data only through ``z`` and the label. Each outlier's
    ``overlap2`` is its squared overlap with the whole spike subspace and
    ``parts`` splits it into ``hard`` (the indices ``hard``), ``target`` (the
    other target directions, e.g. easy ones) and ``learned``.

    For a ``W`` independent of the data (``t = 0``) this is the exact
    spiked-model equation. For ``t > 0`` ``W_t`` depends on the data and the
    same equation, fed with the DMFT law of ``(V^t, V*, D)``, is a conjecture
    that matches finite-``d`` GD Hessians (``docs/findings.md`` §6,
    ``python -m validation.learned_outliers_vs_simulation``); its derivation is open.
    When the hard directions are uncorrelated with the learned ones in the
    outlier matrix (sign symmetry, docs/theory.md §4.2), the hard outliers coincide
    with those of :func:`outliers` on the hard coordinates alone.

    Parameters
    ----------
    D : array_like, shape (N, m, m) or (N,), or Law
        Samples of ``D``, or a :class:`~dmftsolve.hessian.law.Law` (with its weights).
    Vstar, V, M, Q
        As in :func:`spike_coordinates`. With a Law, ``Vstar`` and ``V`` may be
        ``None`` (then ``Law.Vstar`` and ``Law.V``; pass ``V`` explicitly to remove
        a trained bias).
    delta : float
        Sample ratio ``δ = n/d``.
    hard : sequence of int
        Indices of the hard target directions (columns of ``Vstar``).
    side : {"left", "right", "both"}
        Default both: learned-direction outliers are often above the bulk.
    **kwargs
        Passed to :func:`outliers` (``lam``, ``weights``, ``unbounded_below``, …).

    Returns
    -------
    Outliers

    Examples
    --------
    At ``t = 0`` (``M = 0``, ``Q = I``) on a sign-symmetric problem the hard
    outlier is the one :func:`outliers` finds on the hard coordinates alone,
    with no overlap with the learned directions:

    >>> from dmftsolve import Law, Problem, outliers, restricted, training_outliers
    >>> q, hard = restricted(Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05))
    >>> law = Law.initial(q, nodes=60)
    >>> res = training_outliers(law, None, None, [[0.0]], [[1.0]], 3.0, hard=hard, side="left")
    >>> alone = outliers(law, law.Vstar[:, list(hard)], 3.0)
    >>> bool(abs(res.locations[0] - alone.locations[0]) < 1e-8), res.outliers[0].parts["learned"] < 1e-12
    (True, True)
    """
    if Vstar is None or V is None:
        if not isinstance(D, Law):
            raise ValueError("Vstar and V must be given when D is an array (None is only for a Law)")
        if V is None and D.V is None:
            raise ValueError("V is None and the Law has no V")
        Vstar = D.Vstar if Vstar is None else Vstar
        V = D.V if V is None else V
    Vs = np.asarray(Vstar, dtype=float)
    k = 1 if Vs.ndim == 1 else Vs.shape[1]
    hard_idx = [int(h) for h in hard]
    if any(h < 0 or h >= k for h in hard_idx):
        raise ValueError(f"hard must hold indices in [0, {k}), got {tuple(hard)!r}")
    z = spike_coordinates(Vstar, V, M, Q)
    res = outliers(D, z, delta, side=side, **kwargs)
    other = [j for j in range(k) if j not in hard_idx]
    split = []
    for o in res.outliers:
        w2 = np.sum(np.asarray(o.direction) ** 2, axis=1)  # per spike coordinate (unit direction)
        split.append(dataclasses.replace(o, parts={"hard": float(o.overlap2 * w2[hard_idx].sum()),
                                                   "target": float(o.overlap2 * w2[other].sum()),
                                                   "learned": float(o.overlap2 * w2[k:].sum())}))
    spike = {"k": k, "learned": int(z.shape[1] - k), "hard": hard_idx}
    return dataclasses.replace(res, outliers=split, settings=res.settings | {"spike": spike})
