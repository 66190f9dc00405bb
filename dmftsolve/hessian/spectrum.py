"""Bulk spectrum of the weighted-Wishart Hessian ``H = (1/n) Σ_i x_i x_iᵀ ⊗ D_i + λ I``.

``x_i ~ N(0, I_d)``, ``n = δ d`` and the symmetric ``m×m`` weights ``D_i`` are
i.i.d. from a law given by samples (Monte Carlo paths of the DMFT, or
quadrature nodes with weights). The block-averaged resolvent
``S(ζ) = lim (1/d) Σ_j [(H − ζ)^{-1}]_{jj-block}`` solves (THEORY.md §3)

    S(ζ) = ( (λ − ζ) I_m + E[ D (I_m + S(ζ) D/δ)^{-1} ] )^{-1},

and ``s(ζ) = tr S(ζ)/m`` is the Stieltjes transform of the spectral measure
of ``H`` (normalised by ``dm``).

Numerics
--------
Everything is solved for ``R = S^{-1}``, which stays finite through atoms
(``S`` has a pole there). With ``B = D (D + δR)^{-1}`` the equation reads

    G(R) = R − (λ − ζ) I − E[A] = 0,   A = D − D (D + δR)^{-1} D = D (I + S D/δ)^{-1},

and ``dA = δ B dR Bᵀ``, so the Jacobian is ``I − K`` with the completely positive
map ``K[E] = δ E[B E Bᵀ]``. On the upper half plane the physical branch is the
unique solution with ``Im S ≻ 0`` (equivalently ``Im R ≺ 0``); it is found by
Newton's method with backtracking, warm-started, falling back to a damped
fixed point and to continuation in ``Im ζ`` from far above the real axis.

On the real axis outside the support, ``R`` is real and the physical branch
is the real solution with spectral radius ``ρ(K) < 1`` (for ``m = 1`` this is the
Silverstein–Choi criterion ``ψ'(μ) > 0``); the edges are where ``ρ(K) = 1``, the
fold of the real branch. For ``m = 1`` the edges come from the explicit
parametrisation ``x = ψ(μ) = λ + μ/δ + E[μ D/(μ − D)]`` (``μ = −δ/s``, the Lu–Li
function; literature notes §2.1 and §5b; it is the Silverstein–Choi inverse
``z(s) = λ + E[D/(1 + sD/δ)] − 1/s`` written in ``μ``, so "max of ``z`` over the
positive interval of ``s``" is the max of ``ψ`` below the smallest pole): ``ψ'`` is strictly monotone on each
outer interval, so Brent's method on ``ψ'`` gives the left edge
``max_{μ < min D} ψ(μ)`` and the right edge ``min_{μ > max D} ψ(μ)``. For
``m > 1`` the real branch is continued in ``x`` from far outside the support
towards the bulk (tangent predictor, Newton corrector) and the edge is the
last point where it exists with ``ρ(K) < 1``, bracketed to ``xtol``.

Atoms can only sit at ``λ`` (the perturbation is a sum of Gaussian rank-``rank(D_i)``
terms in generic position; checked on the decoupled and rank-one cases in
the tests). For ``m = 1`` the mass is ``max(0, 1 − δ P(D ≠ 0))`` (rank count: H − λ
has rank at most ``n P(D ≠ 0)``). For ``m > 1`` no such count is exact (null
spaces of the ``D_i`` may be aligned, e.g. ``D = diag(c, 0)`` has mass 1/2 for
every δ), so the mass is computed as ``lim_{η↓0} η Im s(λ + iη)`` (two values of ``η``
and a Richardson step in ``√η``, the error at a critical ratio where ``ρ ~ |x − λ|^{-1/2}``).

Unbounded weights: if the law of ``D`` is unbounded below (above) the bulk
has no finite left (right) edge (THEORY.md §3). A finite sample cannot show
this, so it is decided by the flags ``unbounded_below`` / ``unbounded_above``
or, when these are ``None``, by a Pickands extreme-value-index estimate of
the tails of ``λ_min(D)`` / ``λ_max(D)`` (:func:`tail_index`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import trapezoid
from scipy.optimize import brentq

from dmftsolve.problem import check_delta
from dmftsolve.results import ResultBase, SolverError, Status

__all__ = [
    "BulkSpectrum",
    "stieltjes",
    "stieltjes_trace",
    "density",
    "atoms",
    "edges",
    "tail_index",
    "bulk_spectrum",
]

#: Extreme-value index above which a tail is declared unbounded (see :func:`tail_index`).
TAIL_INDEX_THRESHOLD = -0.5


# --------------------------------------------------------------------------- the law of D
@dataclass(frozen=True)
class _Law:
    """Validated, normalised law of ``D``; zero samples are dropped (they only enter via ``p_zero``)."""

    D: np.ndarray  # (N, m, m) non-zero samples
    w: np.ndarray  # (N,) their probabilities (sum = 1 − p_zero)
    keep: np.ndarray  # (N_all,) boolean mask of the kept samples in the input
    w_all: np.ndarray  # (N_all,) normalised input weights
    p_zero: float
    delta: float
    lam: float
    m: int
    eig_min: np.ndarray  # (N_all,) smallest eigenvalue of each input sample
    eig_max: np.ndarray  # (N_all,)

    @property
    def bound(self) -> float:
        """``max ‖D‖ (1 + δ^{-1/2})²``: the spectrum lies in ``λ ± bound``."""
        c = max(float(np.max(np.abs(self.eig_min))), float(np.max(np.abs(self.eig_max))))
        return c * (1.0 + self.delta**-0.5) ** 2

    @property
    def scale(self) -> float:
        return max(self.bound, 1e-300)

    @property
    def lower(self) -> float:
        """A point below the support: ``λ + min(0, min λ_min(D)) (1 + δ^{-1/2})²``."""
        return self.lam + min(0.0, float(self.eig_min.min())) * (1.0 + self.delta**-0.5) ** 2

    @property
    def upper(self) -> float:
        return self.lam + max(0.0, float(self.eig_max.max())) * (1.0 + self.delta**-0.5) ** 2

    @property
    def trivial(self) -> bool:
        """``D ≡ 0``: then ``H = λ I``."""
        return self.D.shape[0] == 0

    def negated(self) -> _Law:
        """The law of ``−D`` with ``−λ`` (the spectrum of ``−H``)."""
        return dataclasses.replace(
            self, D=-self.D, lam=-self.lam, eig_min=-self.eig_max, eig_max=-self.eig_min
        )

    def expect(self, values: np.ndarray) -> np.ndarray:
        """``E[·]`` of per-sample values over the non-zero samples (zero samples contribute 0)."""
        # einsum, not BLAS: multithreaded BLAS on tall-skinny products is very slow on a busy machine
        return np.einsum("i,i...->...", self.w, values)


def _prepare_law(D: ArrayLike, delta: Any, lam: Any, weights: ArrayLike | None) -> _Law:
    """Validate ``D``, ``delta``, ``lam``, ``weights`` and return the normalised law."""
    delta = check_delta(delta)
    try:
        lam_f = float(lam)
    except (TypeError, ValueError):
        raise ValueError(f"lam must be a real number, got {lam!r}") from None
    if not math.isfinite(lam_f):
        raise ValueError(f"lam must be finite, got {lam!r}")
    Darr = np.asarray(D, dtype=float)
    if Darr.ndim == 1:
        Darr = Darr[:, None, None]
    if Darr.ndim != 3 or Darr.shape[1] != Darr.shape[2] or Darr.shape[0] == 0 or Darr.shape[1] == 0:
        raise ValueError(
            f"D must have shape (N,) or (N, m, m) with N, m >= 1, got shape {np.shape(D)}"
        )
    if not np.all(np.isfinite(Darr)):
        raise ValueError("D must be finite, got non-finite entries")
    size = float(np.max(np.abs(Darr)))
    asym = float(np.max(np.abs(Darr - np.swapaxes(Darr, 1, 2))))
    if asym > 1e-10 * max(size, 1.0):
        raise ValueError(f"D must be symmetric, got max |D - D^T| = {asym:.3g}")
    Darr = 0.5 * (Darr + np.swapaxes(Darr, 1, 2))
    N, m = Darr.shape[0], Darr.shape[1]
    if weights is None:
        w = np.full(N, 1.0 / N)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (N,):
            raise ValueError(f"weights must have shape (N,)=({N},), got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be finite and >= 0, got negative or non-finite entries")
        total = float(w.sum())
        if total <= 0:
            raise ValueError(f"weights must have a positive sum, got {total!r}")
        w = w / total
        # weights this small carry no measurable mass; dropping them avoids denormal arithmetic
        # (products of Gauss-Hermite weights) and spurious poles in the edge search
        w = np.where(w < 1e-200, 0.0, w)
        w = w / w.sum()
    if m == 1:
        eig_min = eig_max = Darr[:, 0, 0].copy()
    else:
        ev = np.linalg.eigvalsh(Darr)
        eig_min, eig_max = ev[:, 0], ev[:, -1]
    keep = np.any(Darr != 0.0, axis=(1, 2)) & (w > 0)
    return _Law(
        D=Darr[keep],
        w=w[keep],
        keep=keep,
        w_all=w,
        p_zero=max(0.0, float(1.0 - w[keep].sum())),
        delta=delta,
        lam=lam_f,
        m=m,
        eig_min=np.where(w > 0, eig_min, 0.0),
        eig_max=np.where(w > 0, eig_max, 0.0),
    )


# --------------------------------------------------------------------------- core map
def _pieces(law: _Law, R: np.ndarray, *, jac: bool = True) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """``E[A]``, the Jacobian part ``K`` (``m² × m²``) and the per-sample ``B`` at ``R``."""
    m, delta = law.m, law.delta
    if m == 1:
        d = law.D[:, 0, 0]
        B = d / (d + delta * R[0, 0])
        EA = np.array([[delta * R[0, 0] * np.einsum("i,i->", law.w, B)]])
        K = np.array([[delta * np.einsum("i,i,i->", law.w, B, B)]]) if jac else None
        return EA, K, B
    C = np.linalg.solve(law.D + delta * R[None, :, :], law.D)  # (D + δR)^{-1} D
    B = np.swapaxes(C, 1, 2)  # D (D + δR)^{-1}
    # A = D − D (D + δR)^{-1} D = δ B R: no cancellation when R is small (near atoms)
    EA = delta * law.expect(B) @ R
    EA = 0.5 * (EA + EA.T)
    K = None
    if jac:
        Bf = B.reshape(B.shape[0], m * m)  # row (a, c)
        K = np.einsum("i,ip,iq->pq", law.w, Bf, Bf)  # [(a, c), (b, d)]
        K = delta * K.reshape(m, m, m, m).transpose(0, 2, 1, 3).reshape(m * m, m * m)
    return EA, K, B


def _residual(law: _Law, zeta: complex | float, R: np.ndarray, *, jac: bool = True):
    EA, K, B = _pieces(law, R, jac=jac)
    G = R - (law.lam - zeta) * np.eye(law.m) - EA
    return G, K, B


def _converged(law: _Law, zeta: complex | float, R: np.ndarray, gnorm: float, tol: float) -> bool:
    """Residual test relative to the size of the terms (``R → 0`` at atoms), with an absolute floor."""
    size = max(_norm(R), abs(law.lam - zeta))
    return gnorm <= tol * size + 1e-15 * law.scale


def _norm(a: np.ndarray) -> float:
    return float(np.max(np.abs(a))) if a.size else 0.0


def _branch_ok(R: np.ndarray, branch: str) -> bool:
    if not np.all(np.isfinite(R)):
        return False
    if branch == "upper":
        im = R.imag
        top = float(np.linalg.eigvalsh(0.5 * (im + im.T))[-1])
        return top <= 1e-13 * max(_norm(R), 1e-300)
    return True


def _newton(
    law: _Law, zeta: complex | float, R0: np.ndarray, *, branch: str, tol: float, maxiter: int
) -> tuple[np.ndarray, bool, int]:
    """Newton with backtracking on ``G(R) = 0``; keeps ``Im R ≼ 0`` when ``branch == 'upper'``."""
    m = law.m
    R = np.array(R0, dtype=complex if branch == "upper" else float)
    eye = np.eye(m * m)
    try:
        G, K, _ = _residual(law, zeta, R)
    except np.linalg.LinAlgError:
        return R, False, 0
    gnorm = _norm(G)
    for it in range(maxiter):
        if not np.isfinite(gnorm):
            return R, False, it
        if _converged(law, zeta, R, gnorm, tol):
            return R, True, it
        try:
            step = -np.linalg.solve(eye - K, G.reshape(-1)).reshape(m, m)
        except np.linalg.LinAlgError:
            return R, False, it
        t = 1.0
        while t > 1e-2:
            Rn = R + t * step
            Rn = 0.5 * (Rn + Rn.T)
            if _branch_ok(Rn, branch):
                try:
                    Gn, Kn, _ = _residual(law, zeta, Rn)
                except np.linalg.LinAlgError:
                    Gn = None
                if Gn is not None and _norm(Gn) < (1.0 - 1e-4 * t) * gnorm:
                    R, G, K, gnorm = Rn, Gn, Kn, _norm(Gn)
                    break
            t *= 0.5
        else:
            return R, _converged(law, zeta, R, gnorm, tol), it
    return R, _converged(law, zeta, R, gnorm, tol), maxiter


def _fixed_point(law: _Law, zeta: complex, R0: np.ndarray, *, iters: int, damping: float = 0.5) -> np.ndarray:
    """Damped iteration ``R ← (1 − α) R + α ((λ − ζ) I + E[A(R)])`` (a contraction for ``Im ζ > 0``)."""
    R = np.array(R0, dtype=complex)
    eye = np.eye(law.m)
    for _ in range(iters):
        EA, _, _ = _pieces(law, R, jac=False)
        Rn = (law.lam - zeta) * eye + EA
        R = (1.0 - damping) * R + damping * 0.5 * (Rn + Rn.T)
    return R


def _solve_upper(
    law: _Law,
    zeta: complex,
    R_start: np.ndarray | None,
    *,
    tol: float,
    maxiter: int,
) -> tuple[np.ndarray, bool]:
    """``R(ζ)`` for ``Im ζ > 0``: Newton from ``R_start``, else continuation in ``Im ζ``."""
    if R_start is not None:
        R, ok, _ = _newton(law, zeta, R_start, branch="upper", tol=tol, maxiter=maxiter)
        if ok:
            return R, True
    x, eta = zeta.real, zeta.imag
    eta0 = max(eta, 2.0 * law.scale, 2.0 * abs(x - law.lam), 1e-300)
    eye = np.eye(law.m)
    z0 = complex(x, eta0)
    R = (law.lam - z0) * eye + law.expect(law.D)
    R = _fixed_point(law, z0, R, iters=30)
    levels = [eta0]
    while levels[-1] > eta:
        levels.append(max(levels[-1] * 0.25, eta))
    ok = False
    for e in levels:
        zz = complex(x, e)
        Rn, ok, _ = _newton(law, zz, R, branch="upper", tol=tol, maxiter=maxiter)
        if not ok:
            Rn = _fixed_point(law, zz, R, iters=400)
            Rn, ok, _ = _newton(law, zz, Rn, branch="upper", tol=tol, maxiter=maxiter)
        R = Rn
    return R, ok


def _default_eta(law: _Law) -> float:
    return 1e-9 * law.scale


# --------------------------------------------------------------------------- public: Stieltjes
def stieltjes(
    D: ArrayLike,
    delta: float,
    zeta: ArrayLike,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    tol: float = 1e-11,
    maxiter: int = 60,
    eta: float | None = None,
) -> np.ndarray:
    """Matrix Stieltjes transform ``S(ζ)`` of the bulk of ``H``.

    Parameters
    ----------
    D : array_like, shape (N, m, m) or (N,)
        Samples of the symmetric weight matrix (``(N,)`` means ``m = 1``).
    delta : float
        Sample ratio ``δ = n/d > 0``.
    zeta : complex or array_like of complex
        Points with ``Im ζ >= 0``. A real ``ζ = x`` means the boundary value
        ``S(x + i0⁺)``, computed at ``ζ = x + i·eta``.
    lam : float, optional
        Ridge ``λ``.
    weights : array_like, shape (N,), optional
        Non-negative sample weights (normalised internally); uniform by default.
    tol : float, optional
        Relative tolerance on the residual of ``S^{-1} = (λ − ζ) I + E[D (I + S D/δ)^{-1}]``.
    maxiter : int, optional
        Newton iterations per solve.
    eta : float, optional
        Imaginary part used for real ``ζ``; default ``1e-9 × max‖D‖ (1 + δ^{-1/2})²``.

    Returns
    -------
    numpy.ndarray
        Complex array of shape ``np.shape(zeta) + (m, m)``.

    Raises
    ------
    ValueError
        On invalid input.
    SolverError
        If the solve does not converge at some ``ζ``.

    Notes
    -----
    Points are solved in the order given, each warm-started from the previous
    solution; the branch ``Im S ≻ 0`` is enforced, so a warm start never
    selects a wrong root (the solution with ``Im S ≻ 0`` is unique).
    """
    law = _prepare_law(D, delta, lam, weights)
    z = np.asarray(zeta, dtype=complex)
    if not np.all(np.isfinite(z)):
        raise ValueError("zeta must be finite")
    if np.any(z.imag < 0):
        raise ValueError(f"zeta must have Im zeta >= 0, got min Im zeta = {float(z.imag.min())!r}")
    eta_r = _default_eta(law) if eta is None else float(eta)
    if not (eta_r > 0 and math.isfinite(eta_r)):
        raise ValueError(f"eta must be > 0 and finite, got {eta!r}")
    flat = z.reshape(-1)
    out = np.empty((flat.size, law.m, law.m), dtype=complex)
    if law.trivial:
        for j, zz in enumerate(flat):
            zz = complex(zz.real, max(zz.imag, eta_r))
            out[j] = np.eye(law.m) / (law.lam - zz)
        return out.reshape(z.shape + (law.m, law.m))
    R_prev = None
    for j, zz in enumerate(flat):
        zz = complex(zz.real, zz.imag if zz.imag > 0 else eta_r)
        R, ok = _solve_upper(law, zz, R_prev, tol=tol, maxiter=maxiter)
        if not ok:
            raise SolverError(f"stieltjes did not converge at zeta={zz!r}")
        out[j] = np.linalg.inv(R)
        R_prev = R
    return out.reshape(z.shape + (law.m, law.m))


def stieltjes_trace(
    D: ArrayLike,
    delta: float,
    zeta: ArrayLike,
    **kwargs: Any,
) -> np.ndarray | complex:
    """Normalised trace ``s(ζ) = tr S(ζ)/m``: the Stieltjes transform of the spectral measure of ``H``.

    Same parameters as :func:`stieltjes`; returns an array of shape ``np.shape(zeta)``.
    """
    S = stieltjes(D, delta, zeta, **kwargs)
    s = np.trace(S, axis1=-2, axis2=-1) / S.shape[-1]
    return complex(s) if np.ndim(zeta) == 0 else s


# --------------------------------------------------------------------------- atoms
def _atom_mass(law: _Law, *, tol: float, maxiter: int) -> tuple[float, dict[str, Any]]:
    """Mass at ``λ``: closed form for ``m = 1``, ``lim η Im s(λ + iη)`` otherwise."""
    if law.trivial:
        return 1.0, {"atom_method": "D == 0"}
    if law.m == 1:
        return max(0.0, 1.0 - law.delta * (1.0 - law.p_zero)), {"atom_method": "rank count"}
    est = []
    R = None
    for e in (1e-8 * law.scale, 1e-10 * law.scale):
        R, ok = _solve_upper(law, complex(law.lam, e), R, tol=tol, maxiter=maxiter)
        if not ok:
            return math.nan, {"atom_method": "limit", "atom_error": "solve failed"}
        est.append(e * float(np.trace(np.linalg.inv(R)).imag) / law.m)
    # the error is O(η) for a bounded density at λ and O(√η) at a 1/√x singularity
    # (critical ratio); Richardson for √η removes the latter and is harmless for the former
    mass = est[1] - (est[0] - est[1]) / 9.0
    return (mass if mass > 1e-6 else 0.0), {
        "atom_method": "eta * Im s(lam + i eta) at eta = 1e-8, 1e-10 (x scale), sqrt(eta) Richardson",
        "atom_estimates": est,
    }


def atoms(
    D: ArrayLike,
    delta: float,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    tol: float = 1e-11,
    maxiter: int = 60,
) -> list[tuple[float, float]]:
    """Atoms of the spectral measure of ``H`` as ``[(location, mass)]`` (only ever at ``λ``).

    For ``m = 1`` the mass is ``max(0, 1 − δ P(D ≠ 0))``. For ``m > 1`` it is the
    limit ``η Im s(λ + iη)`` (``η = 1e-8, 1e-10`` relative, extrapolated in ``√η``), which covers null
    spaces shared by all ``D_i`` (``D = diag(c, 0)``: mass 1/2 for every ``δ``);
    masses below ``1e-6`` are reported as no atom.
    """
    law = _prepare_law(D, delta, lam, weights)
    mass, _ = _atom_mass(law, tol=tol, maxiter=maxiter)
    return [(law.lam, mass)] if mass > 0 else []


# --------------------------------------------------------------------------- density
def _density(
    law: _Law, x: np.ndarray, *, eta: float, atom: float, tol: float, maxiter: int
) -> tuple[np.ndarray, np.ndarray]:
    """Absolutely continuous density on ``x`` and a per-point convergence flag."""
    order = np.argsort(x)
    rho = np.empty(x.size)
    okv = np.zeros(x.size, dtype=bool)
    R_prev = None
    for j in order:
        zz = complex(x[j], eta)
        R, ok = _solve_upper(law, zz, R_prev, tol=tol, maxiter=maxiter)
        s = np.trace(np.linalg.inv(R)) / law.m
        rho[j] = s.imag / math.pi - atom * eta / (math.pi * ((x[j] - law.lam) ** 2 + eta**2))
        okv[j] = ok
        R_prev = R if ok else None
    return np.maximum(rho, 0.0), okv


def density(
    D: ArrayLike,
    delta: float,
    x: ArrayLike,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    eta: float | None = None,
    tol: float = 1e-11,
    maxiter: int = 60,
) -> np.ndarray:
    """Absolutely continuous part of the spectral density of ``H`` at real points ``x``.

    ``ρ(x) = Im s(x + iη)/π`` with ``η ↓ 0`` (default ``η = 1e-9 × scale``),
    solved along the sorted grid with warm starts and, where Newton fails,
    continuation in ``η`` from far above the axis. The atom at ``λ`` (see
    :func:`atoms`) is subtracted, so ``∫ ρ + Σ atoms = 1``.

    Parameters
    ----------
    D, delta, lam, weights, tol, maxiter
        As in :func:`stieltjes`.
    x : array_like
        Real points.
    eta : float, optional
        Distance to the real axis.

    Returns
    -------
    numpy.ndarray
        Density values, shape ``np.shape(x)``.
    """
    law = _prepare_law(D, delta, lam, weights)
    xa = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(xa)):
        raise ValueError("x must be finite")
    eta_r = _default_eta(law) if eta is None else float(eta)
    if not (eta_r > 0 and math.isfinite(eta_r)):
        raise ValueError(f"eta must be > 0 and finite, got {eta!r}")
    if law.trivial:
        return np.zeros(xa.shape)
    mass, _ = _atom_mass(law, tol=tol, maxiter=maxiter)
    rho, ok = _density(law, xa.reshape(-1), eta=eta_r, atom=mass, tol=tol, maxiter=maxiter)
    if not np.all(ok):
        bad = xa.reshape(-1)[~ok]
        raise SolverError(f"density did not converge at {bad.size} point(s), e.g. x={bad[0]!r}")
    return rho.reshape(xa.shape)


# --------------------------------------------------------------------------- real branch
def _rho(K: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(K))))


def _real_solve(
    law: _Law, x: float, R0: np.ndarray, *, tol: float, maxiter: int
) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Real Newton at real ``x``; accepted only on the physical branch ``ρ(K) < 1``."""
    R, ok, _ = _newton(law, x, np.real(R0), branch="real", tol=tol, maxiter=maxiter)
    if not ok:
        return R, None, False
    try:
        _, K, _ = _residual(law, x, R)
    except np.linalg.LinAlgError:
        return R, None, False
    return R, K, _rho(K) < 1.0 - 1e-12


def _tangent(law: _Law, K: np.ndarray) -> np.ndarray:
    """``dR/dx = −(I − K)^{-1} I`` along the real branch."""
    m = law.m
    return -np.linalg.solve(np.eye(m * m) - K, np.eye(m).reshape(-1)).reshape(m, m)


def _real_start(law: _Law, x: float, *, tol: float, maxiter: int) -> tuple[np.ndarray, bool]:
    """Physical real ``R(x)`` at a point ``x`` far below the support."""
    R = (law.lam - x) * np.eye(law.m) + law.expect(law.D)
    for _ in range(50):
        EA, _, _ = _pieces(law, R, jac=False)
        R = (law.lam - x) * np.eye(law.m) + 0.5 * (EA + EA.T)
    R, _, ok = _real_solve(law, x, R, tol=tol, maxiter=maxiter)
    return R, ok


def _real_step(
    law: _Law, x_new: float, x_old: float, R_old: np.ndarray, K_old: np.ndarray | None, *, tol: float,
    maxiter: int,
) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Continue the physical real branch from ``x_old`` to ``x_new`` (tangent predictor, Newton corrector)."""
    starts = [R_old]
    if K_old is not None:
        try:
            starts.insert(0, R_old + (x_new - x_old) * _tangent(law, K_old))
        except np.linalg.LinAlgError:
            pass
    for R0 in starts:
        R, K, ok = _real_solve(law, x_new, R0, tol=tol, maxiter=maxiter)
        if ok:
            return R, K, True
    return R_old, None, False


def _far_left(law: _Law) -> float:
    return law.lower - 0.1 * law.scale


def _left_edge_march(law: _Law, *, xtol: float, tol: float, maxiter: int) -> tuple[float, dict[str, Any]]:
    """Left edge as the fold of the physical real branch continued from far below the support."""
    x = _far_left(law)
    R, ok = _real_start(law, x, tol=tol, maxiter=maxiter)
    if not ok:
        raise SolverError(f"real branch: no physical solution at x={x!r} below the support")
    _, K, _ = _residual(law, x, R)
    # Steps are capped: an accepted step may not jump over a thin piece of the
    # support into a gap, where the physical real branch exists again (found
    # by hypothesis: D = diag(0, c), c ∈ {1, 0.062}, δ = 0.5). Pieces thinner
    # than ``hmax`` can still be missed.
    hmax = (law.upper - x) / 400.0
    h = hmax
    steps = 0
    while h > xtol and steps < 20_000:
        steps += 1
        x_try = x + h
        R_try, K_try, ok = _real_step(law, x_try, x, R, K, tol=tol, maxiter=maxiter)
        if ok:
            x, R, K = x_try, R_try, K_try
            h = min(1.5 * h, hmax)
        else:
            h *= 0.5
    return x, {"edge_method": "real-branch fold", "edge_steps": steps, "edge_rho": _rho(K)}


def _left_edge_sc(law: _Law) -> tuple[float, dict[str, Any]]:
    """``m = 1``: left edge ``max_{μ < min D} ψ(μ)`` (Silverstein–Choi / Lu–Li), by Brent on ``ψ'``."""
    d, w, delta = law.D[:, 0, 0], law.w, law.delta

    def dpsi(mu: float) -> float:
        return 1.0 / delta - float(np.einsum("i,i->", w, (d / (mu - d)) ** 2))

    def psi(mu: float) -> float:
        return law.lam + mu / delta + float(np.einsum("i,i->", w, mu * d / (mu - d)))

    pole = float(d.min())
    span = max(float(np.max(np.abs(d))), 1e-300)
    hi = pole - 1e-13 * span
    if dpsi(hi) >= 0:  # ψ increasing up to the pole: edge at ψ(pole⁻)
        return psi(hi), {"edge_method": "Silverstein-Choi (edge at pole)", "edge_mu": hi}
    lo_step = span
    lo = pole - lo_step
    while dpsi(lo) <= 0:
        lo_step *= 2.0
        lo = pole - lo_step
    mu = brentq(dpsi, lo, hi, xtol=1e-15 * span, rtol=4 * np.finfo(float).eps, maxiter=500)
    return psi(mu), {"edge_method": "Silverstein-Choi", "edge_mu": mu}


def _left_edge(law: _Law, method: str, *, xtol: float, tol: float, maxiter: int):
    if law.trivial:
        return law.lam, {"edge_method": "D == 0"}
    if method == "sc" or (method == "auto" and law.m == 1):
        if law.m != 1:
            raise ValueError(f"method='sc' needs m = 1, got m={law.m}")
        return _left_edge_sc(law)
    return _left_edge_march(law, xtol=xtol, tol=tol, maxiter=maxiter)


# --------------------------------------------------------------------------- tails
def tail_index(values: ArrayLike, weights: ArrayLike | None = None, *, k: int | None = None) -> float:
    """Pickands estimate of the extreme-value index of the upper tail of ``values``.

    ``γ̂ = log₂[(Q(p) − Q(2p)) / (Q(2p) − Q(4p))]`` with ``Q(p)`` the (weighted)
    upper-tail quantile at level ``p = k/N_eff``, ``N_eff = 1/Σ w²`` and by
    default ``k = max(8, √N_eff)``. ``γ < 0`` means a bounded tail (Weibull
    domain: ``P(X > x* − ε) ~ ε^{-1/γ}``), ``γ ≈ 0`` an exponential-type tail
    (Gaussian, χ²) and ``γ > 0`` a power tail. Its standard error at ``γ = 0``
    is about ``1.8/√k`` (0.2 for ``N = 10⁴``). Returns ``-inf`` when the tail
    is flat (the top quantiles coincide: an atom at the endpoint) and ``nan``
    when the sample is too small (``N_eff < 64``).
    """
    v = np.asarray(values, dtype=float).reshape(-1)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("values must be a non-empty finite array")
    w = np.full(v.size, 1.0 / v.size) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != v.shape or np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
        raise ValueError(f"weights must be finite, >= 0, with shape {v.shape}, got shape {w.shape}")
    w = w / w.sum()
    n_eff = 1.0 / float(w @ w)
    if n_eff < 64:
        return math.nan
    kk = max(8, int(math.sqrt(n_eff))) if k is None else int(k)
    p = kk / n_eff
    if 4 * p > 0.5:
        return math.nan
    order = np.argsort(v)
    cw = np.cumsum(w[order])
    q = np.interp([1 - p, 1 - 2 * p, 1 - 4 * p], cw, v[order])
    num, den = q[0] - q[1], q[1] - q[2]
    if num <= 0:
        return -math.inf
    if den <= 0:
        return math.inf
    return float(math.log2(num / den))


def _unbounded(law: _Law, flag: bool | None, side: str) -> tuple[bool, dict[str, Any]]:
    if flag is not None:
        return bool(flag), {f"unbounded_{side}": "user flag"}
    vals = -law.eig_min if side == "below" else law.eig_max
    ok = np.isfinite(vals)
    g = tail_index(vals[ok], law.w_all[ok])
    decided = bool(np.isfinite(g) and g > TAIL_INDEX_THRESHOLD) or g == math.inf
    return decided, {f"tail_index_{side}": g}


def edges(
    D: ArrayLike,
    delta: float,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    unbounded_below: bool | None = None,
    unbounded_above: bool | None = None,
    method: Literal["auto", "sc", "march"] = "auto",
    xtol: float | None = None,
    tol: float = 1e-11,
    maxiter: int = 60,
) -> tuple[float | None, float | None]:
    """Left and right edges of the continuous part of the bulk.

    Parameters
    ----------
    D, delta, lam, weights, tol, maxiter
        As in :func:`stieltjes`.
    unbounded_below, unbounded_above : bool or None
        Whether the law of ``D`` is unbounded below (above). ``None`` decides
        from the sample by :func:`tail_index` (index > -0.5 means unbounded).
        An unbounded side gets ``None`` instead of an edge.
    method : {"auto", "sc", "march"}
        ``"sc"``: Silverstein–Choi for ``m = 1`` (exact up to Brent's
        tolerance); ``"march"``: fold of the real branch (any ``m``; accurate to
        ``xtol``, default ``1e-10 × scale``); ``"auto"``: ``"sc"`` if ``m = 1``.

    Returns
    -------
    (left, right) : tuple of float or None
    """
    res = bulk_spectrum(
        D, delta, lam=lam, weights=weights, unbounded_below=unbounded_below,
        unbounded_above=unbounded_above, method=method, xtol=xtol, tol=tol, maxiter=maxiter,
        npoints=0,
    )
    return res.left_edge, res.right_edge


# --------------------------------------------------------------------------- result
@dataclass(repr=False)
class BulkSpectrum(ResultBase):
    """Bulk spectrum of ``H``: edges, atoms and the density on a grid.

    Attributes
    ----------
    left_edge, right_edge : float or None
        Edges of the continuous part (``None`` if the law of ``D`` is unbounded
        on that side; the edges of the *sample* law are then in ``diagnostics``).
    atoms : list of (location, mass)
    x, density : numpy.ndarray
        Grid and absolutely continuous density on it.
    """

    left_edge: float | None
    right_edge: float | None
    atoms: list[tuple[float, float]]
    x: np.ndarray
    density: np.ndarray
    status: Status = Status.SUCCESS
    message: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def total_mass(self) -> float:
        """``∫ density`` (trapezoid on the grid) plus the atoms."""
        ac = float(trapezoid(self.density, self.x)) if self.x.size > 1 else 0.0
        return ac + sum(m for _, m in self.atoms)


def _edges_with_info(law: _Law, method: str, *, xtol: float, tol: float, maxiter: int):
    left, info_l = _left_edge(law, method, xtol=xtol, tol=tol, maxiter=maxiter)
    neg = law.negated()
    right_neg, info_r = _left_edge(neg, method, xtol=xtol, tol=tol, maxiter=maxiter)
    info = {f"left_{k}": v for k, v in info_l.items()} | {f"right_{k}": v for k, v in info_r.items()}
    return left, -right_neg, info


def bulk_spectrum(
    D: ArrayLike,
    delta: float,
    *,
    lam: float = 0.0,
    weights: ArrayLike | None = None,
    x: ArrayLike | None = None,
    npoints: int = 401,
    unbounded_below: bool | None = None,
    unbounded_above: bool | None = None,
    method: Literal["auto", "sc", "march"] = "auto",
    eta: float | None = None,
    xtol: float | None = None,
    tol: float = 1e-11,
    maxiter: int = 60,
    throw: bool = True,
) -> BulkSpectrum:
    """Edges, atoms and density of the bulk of ``H = (1/n) Σ x_i x_iᵀ ⊗ D_i + λ I``.

    Parameters
    ----------
    D, delta, lam, weights, tol, maxiter
        As in :func:`stieltjes`.
    x : array_like, optional
        Density grid; by default ``npoints`` points spanning the (sample-law)
        support with a 5% margin.
    npoints : int, optional
        Size of the default grid (0: no density).
    unbounded_below, unbounded_above, method, xtol
        As in :func:`edges`.
    eta : float, optional
        As in :func:`density`.
    throw : bool, optional
        Raise :class:`SolverError` if some density point does not converge.

    Returns
    -------
    BulkSpectrum
    """
    t0 = time.perf_counter()
    law = _prepare_law(D, delta, lam, weights)
    if method not in ("auto", "sc", "march"):
        raise ValueError(f"method must be 'auto', 'sc' or 'march', got {method!r}")
    if isinstance(npoints, bool) or not isinstance(npoints, (int, np.integer)) or npoints < 0:
        raise ValueError(f"npoints must be an integer >= 0, got {npoints!r}")
    xtol_r = 1e-10 * law.scale if xtol is None else float(xtol)
    if not (xtol_r > 0 and math.isfinite(xtol_r)):
        raise ValueError(f"xtol must be > 0 and finite, got {xtol!r}")
    eta_r = _default_eta(law) if eta is None else float(eta)
    if not (eta_r > 0 and math.isfinite(eta_r)):
        raise ValueError(f"eta must be > 0 and finite, got {eta!r}")
    settings = {
        "delta": law.delta, "lam": law.lam, "m": law.m, "n_samples": int(law.keep.size),
        "method": method, "xtol": xtol_r, "eta": eta_r, "tol": tol, "maxiter": maxiter,
        "unbounded_below": unbounded_below, "unbounded_above": unbounded_above,
    }
    diagnostics: dict[str, Any] = {"p_zero": law.p_zero, "scale": law.scale}
    messages = []
    left, right, info = _edges_with_info(law, method, xtol=xtol_r, tol=tol, maxiter=maxiter)
    diagnostics |= info
    diagnostics["sample_left_edge"], diagnostics["sample_right_edge"] = left, right
    ub, info_b = _unbounded(law, unbounded_below, "below")
    ua, info_a = _unbounded(law, unbounded_above, "above")
    diagnostics |= info_b | info_a
    if ub:
        messages.append(
            "law of D unbounded below: the bulk has no finite left edge "
            f"(sample-law edge {left:.6g} is a finite-sample artefact)"
        )
    if ua:
        messages.append(
            "law of D unbounded above: the bulk has no finite right edge "
            f"(sample-law edge {right:.6g} is a finite-sample artefact)"
        )
    mass, info_atom = _atom_mass(law, tol=tol, maxiter=maxiter)
    diagnostics |= info_atom
    atom_list = [(law.lam, mass)] if mass > 0 else []
    status = Status.SUCCESS
    if x is None:
        if npoints > 0 and not law.trivial:
            width = right - left
            xa = np.linspace(left - 0.05 * width, right + 0.05 * width, npoints)
        else:
            xa = np.zeros(0)
    else:
        xa = np.asarray(x, dtype=float).reshape(-1)
        if not np.all(np.isfinite(xa)):
            raise ValueError("x must be finite")
    if xa.size and not law.trivial:
        rho, ok = _density(law, xa, eta=eta_r, atom=mass, tol=tol, maxiter=maxiter)
        if not np.all(ok):
            status = Status.NOT_CONVERGED
            messages.append(f"density did not converge at {int((~ok).sum())} grid point(s)")
            diagnostics["density_failed_x"] = xa[~ok]
    else:
        rho = np.zeros(xa.size)
    res = BulkSpectrum(
        left_edge=None if ub else left,
        right_edge=None if ua else right,
        atoms=atom_list,
        x=xa,
        density=rho,
        status=status,
        message="; ".join(messages),
        settings=settings,
        diagnostics=diagnostics,
        elapsed=time.perf_counter() - t0,
    )
    if xa.size > 1:
        res.diagnostics["total_mass"] = res.total_mass
    if throw and not status.ok:
        res.raise_for_status()
    return res
