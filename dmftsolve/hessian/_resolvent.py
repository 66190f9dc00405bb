"""Resolvent internals shared by the bulk (``spectrum``) and outlier (``outlier_equation``) modules.

Private module (leading underscore); the names inside are public so that the
two modules share them without importing private names. The mathematics is
described in the docstring of :mod:`dmftsolve.hessian.spectrum`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

from dmftsolve.checks import check_delta, check_real
from dmftsolve.hessian.law import Law
from dmftsolve.results import SolverError

TAIL_INDEX_THRESHOLD = -0.5


# --------------------------------------------------------------------------- the law of D
@dataclass(frozen=True)
class WeightLaw:
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

    # cached: asked on every Newton step (frozen dataclass: cached_property writes __dict__ directly)
    @cached_property
    def bound(self) -> float:
        """``max ‖D‖ (1 + δ^{-1/2})²``: the spectrum lies in ``λ ± bound``."""
        c = max(float(np.max(np.abs(self.eig_min))), float(np.max(np.abs(self.eig_max))))
        return c * (1.0 + self.delta**-0.5) ** 2

    @cached_property
    def scale(self) -> float:
        return max(self.bound, 1e-300)

    @cached_property
    def lower(self) -> float:
        """A point below the support: ``λ + min(0, min λ_min(D)) (1 + δ^{-1/2})²``."""
        return self.lam + min(0.0, float(self.eig_min.min())) * (1.0 + self.delta**-0.5) ** 2

    @cached_property
    def upper(self) -> float:
        return self.lam + max(0.0, float(self.eig_max.max())) * (1.0 + self.delta**-0.5) ** 2

    @property
    def trivial(self) -> bool:
        """``D ≡ 0``: then ``H = λ I``."""
        return self.D.shape[0] == 0

    def negated(self) -> WeightLaw:
        """The law of ``−D`` with ``−λ`` (the spectrum of ``−H``)."""
        return dataclasses.replace(
            self, D=-self.D, lam=-self.lam, eig_min=-self.eig_max, eig_max=-self.eig_min
        )

    def expect(self, values: np.ndarray) -> np.ndarray:
        """``E[·]`` of per-sample values over the non-zero samples (zero samples contribute 0)."""
        # einsum, not BLAS: multithreaded BLAS on tall-skinny products is very slow on a busy machine
        return np.einsum("i,i...->...", self.w, values)


def split_law(D: ArrayLike | Law, weights: ArrayLike | None) -> tuple[ArrayLike, ArrayLike | None]:
    """``(D, weights)`` from a :class:`~dmftsolve.hessian.law.Law` or from arrays."""
    if isinstance(D, Law):
        if weights is not None:
            raise ValueError("weights must be None when D is a Law (the Law carries its weights)")
        return D.D, D.weights
    return D, weights


def law_flag(D: ArrayLike | Law, flag: bool | None, side: str) -> bool | None:
    """``flag``, or when it is None and ``D`` is a Law, the Law's ``diagnostics["unbounded_<side>"]``.

    A quadrature law knows whether ``D`` is bounded (:meth:`Law.initial` probes
    ``D`` on growing boxes); a tail-index estimate on quadrature atoms would be
    meaningless.
    """
    if flag is None and isinstance(D, Law):
        value = D.diagnostics.get(f"unbounded_{side}")
        if isinstance(value, bool):
            return value
    return flag


def prepare_law(D: ArrayLike | Law, delta: Any, lam: Any, weights: ArrayLike | None) -> WeightLaw:
    """Validate ``D`` (array or :class:`Law`), ``delta``, ``lam``, ``weights``; the normalised law."""
    D, weights = split_law(D, weights)
    delta = check_delta(delta)
    lam_f = check_real("lam", lam)
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
    return WeightLaw(
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
def d_times_inverse(D: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``D_i (D_i + S)^{-1}`` for each sample ``i``: ``D`` is ``(N, m, m)`` symmetric, ``S`` is
    ``(m, m)`` symmetric (complex allowed, not Hermitian).

    Both ``D_i`` and ``M_i = D_i + S`` are symmetric, so ``D_i M_i^{-1} = (M_i^{-1} D_i)^T``.
    For ``m = 2`` the solve ``M_i X_i = D_i`` is Gaussian elimination with partial pivoting
    written out on the ``N``-vectors of entries (what LAPACK's ``getrf``/``getrs`` do on a
    2 × 2 system, without its per-matrix call overhead; the speed-up over
    ``numpy.linalg.solve`` is measured by ``benchmarks/bench_threshold.py --small-solve`` and
    quoted in ``docs/findings.md`` §7), and backward stable like it. The adjugate formula
    (Cramer's rule) is not: on nearly singular ``M_i`` with ``D_i`` in its well-conditioned
    part (neurons that have merged, ``D_i ∝ (1, 1)(1, 1)ᵀ``) it left the resolvent's Newton
    stalled at a residual of 1e-12 where ``solve`` converges (``tests/test_spectrum.py``).
    A singular ``M_i`` raises :class:`numpy.linalg.LinAlgError`, as ``solve`` does.
    """
    m = D.shape[-1]
    M = D + S[None, :, :]
    if m != 2:
        return np.swapaxes(np.linalg.solve(M, D), 1, 2)
    a, b, c, d = M[:, 0, 0], M[:, 0, 1], M[:, 1, 0], M[:, 1, 1]
    swap = np.abs(c) > np.abs(a)  # pivot on the larger entry of the first column
    p, q = np.where(swap, c, a), np.where(swap, d, b)  # pivot row
    r, s = np.where(swap, a, c), np.where(swap, b, d)  # other row
    if not np.all(p != 0):
        raise np.linalg.LinAlgError("Singular matrix")
    ell = r / p
    u = s - ell * q
    if not np.all(u != 0):
        raise np.linalg.LinAlgError("Singular matrix")
    B = np.empty(M.shape, dtype=M.dtype)
    for j in (0, 1):  # column j of D is a right-hand side; column j of X = M^{-1} D is row j of B
        top = np.where(swap, D[:, 1, j], D[:, 0, j])
        x1 = (np.where(swap, D[:, 0, j], D[:, 1, j]) - ell * top) / u
        B[:, j, 1] = x1
        B[:, j, 0] = (top - q * x1) / p
    return B


def pieces(law: WeightLaw, R: np.ndarray, *, jac: bool = True) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """``E[A]``, the Jacobian part ``K`` (``m² × m²``) and the per-sample ``B`` at ``R``."""
    m, delta = law.m, law.delta
    if m == 1:
        d = law.D[:, 0, 0]
        B = d / (d + delta * R[0, 0])
        EA = np.array([[delta * R[0, 0] * np.einsum("i,i->", law.w, B)]])
        K = np.array([[delta * np.einsum("i,i,i->", law.w, B, B)]]) if jac else None
        return EA, K, B
    B = d_times_inverse(law.D, delta * R)  # D (D + δR)^{-1}
    # A = D − D (D + δR)^{-1} D = δ B R: no cancellation when R is small (near atoms)
    EA = delta * law.expect(B) @ R
    EA = 0.5 * (EA + EA.T)
    K = None
    if jac:
        Bf = B.reshape(B.shape[0], m * m)  # row (a, c)
        # a (m² × N) @ (N × m²) product: not threaded at these shapes, and 8x faster than einsum
        K = (law.w[:, None] * Bf).T @ Bf  # [(a, c), (b, d)]
        K = delta * K.reshape(m, m, m, m).transpose(0, 2, 1, 3).reshape(m * m, m * m)
    return EA, K, B


def residual(law: WeightLaw, zeta: complex | float, R: np.ndarray, *, jac: bool = True):
    EA, K, B = pieces(law, R, jac=jac)
    G = R - (law.lam - zeta) * np.eye(law.m) - EA
    return G, K, B


def converged(law: WeightLaw, zeta: complex | float, R: np.ndarray, gnorm: float, tol: float) -> bool:
    """Residual test relative to the size of the terms (``R → 0`` at atoms), with an absolute floor."""
    size = max(norm(R), abs(law.lam - zeta))
    return gnorm <= tol * size + 1e-15 * law.scale


def norm(a: np.ndarray) -> float:
    return float(np.max(np.abs(a))) if a.size else 0.0


def branch_ok(R: np.ndarray, branch: str) -> bool:
    if not np.all(np.isfinite(R)):
        return False
    if branch == "upper":
        im = R.imag
        top = float(np.linalg.eigvalsh(0.5 * (im + im.T))[-1])
        return top <= 1e-13 * max(norm(R), 1e-300)
    return True


def newton(
    law: WeightLaw, zeta: complex | float, R0: np.ndarray, *, branch: str, tol: float, maxiter: int
) -> tuple[np.ndarray, bool, int]:
    """Newton with backtracking on ``G(R) = 0``; keeps ``Im R ≼ 0`` when ``branch == 'upper'``."""
    m = law.m
    R = np.array(R0, dtype=complex if branch == "upper" else float)
    eye = np.eye(m * m)
    try:
        G, K, _ = residual(law, zeta, R)
    except np.linalg.LinAlgError:
        return R, False, 0
    gnorm = norm(G)
    for it in range(maxiter):
        if not np.isfinite(gnorm):
            return R, False, it
        if converged(law, zeta, R, gnorm, tol):
            return R, True, it
        try:
            step = -np.linalg.solve(eye - K, G.reshape(-1)).reshape(m, m)
        except np.linalg.LinAlgError:
            return R, False, it
        t = 1.0
        while t > 1e-2:
            Rn = R + t * step
            Rn = 0.5 * (Rn + Rn.T)
            if branch_ok(Rn, branch):
                try:
                    Gn, Kn, _ = residual(law, zeta, Rn)
                except np.linalg.LinAlgError:
                    Gn = None
                if Gn is not None and norm(Gn) < (1.0 - 1e-4 * t) * gnorm:
                    R, G, K, gnorm = Rn, Gn, Kn, norm(Gn)
                    break
            t *= 0.5
        else:
            return R, converged(law, zeta, R, gnorm, tol), it
    return R, converged(law, zeta, R, gnorm, tol), maxiter


def fixed_point(
    law: WeightLaw, zeta: complex, R0: np.ndarray, *, iters: int, damping: float = 0.5
) -> np.ndarray:
    """Damped iteration ``R ← (1 − α) R + α ((λ − ζ) I + E[A(R)])`` (a contraction for ``Im ζ > 0``)."""
    R = np.array(R0, dtype=complex)
    eye = np.eye(law.m)
    for _ in range(iters):
        EA, _, _ = pieces(law, R, jac=False)
        Rn = (law.lam - zeta) * eye + EA
        R = (1.0 - damping) * R + damping * 0.5 * (Rn + Rn.T)
    return R


def solve_upper(
    law: WeightLaw,
    zeta: complex,
    R_start: np.ndarray | None,
    *,
    tol: float,
    maxiter: int,
) -> tuple[np.ndarray, bool]:
    """``R(ζ)`` for ``Im ζ > 0``: Newton from ``R_start``, else continuation in ``Im ζ``."""
    if R_start is not None:
        R, ok, _ = newton(law, zeta, R_start, branch="upper", tol=tol, maxiter=maxiter)
        if ok:
            return R, True
    x, eta = zeta.real, zeta.imag
    eta0 = max(eta, 2.0 * law.scale, 2.0 * abs(x - law.lam), 1e-300)
    eye = np.eye(law.m)
    z0 = complex(x, eta0)
    R = (law.lam - z0) * eye + law.expect(law.D)
    R = fixed_point(law, z0, R, iters=30)
    levels = [eta0]
    while levels[-1] > eta:
        levels.append(max(levels[-1] * 0.25, eta))
    ok = False
    for e in levels:
        zz = complex(x, e)
        Rn, ok, _ = newton(law, zz, R, branch="upper", tol=tol, maxiter=maxiter)
        if not ok:
            Rn = fixed_point(law, zz, R, iters=400)
            Rn, ok, _ = newton(law, zz, Rn, branch="upper", tol=tol, maxiter=maxiter)
        R = Rn
    return R, ok


def default_eta(law: WeightLaw) -> float:
    return 1e-9 * law.scale




# --------------------------------------------------------------------------- atoms
def atom_mass(law: WeightLaw, *, tol: float, maxiter: int) -> tuple[float, dict[str, Any]]:
    """Mass at ``λ``: closed form for ``m = 1``, ``lim η Im s(λ + iη)`` otherwise."""
    if law.trivial:
        return 1.0, {"atom_method": "D == 0"}
    if law.m == 1:
        return max(0.0, 1.0 - law.delta * (1.0 - law.p_zero)), {"atom_method": "rank count"}
    est = []
    R = None
    for e in (1e-8 * law.scale, 1e-10 * law.scale):
        R, ok = solve_upper(law, complex(law.lam, e), R, tol=tol, maxiter=maxiter)
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




# --------------------------------------------------------------------------- density
def density_on(
    law: WeightLaw, x: np.ndarray, *, eta: float, atom: float, tol: float, maxiter: int
) -> tuple[np.ndarray, np.ndarray]:
    """Absolutely continuous density on ``x`` and a per-point convergence flag."""
    order = np.argsort(x)
    rho = np.empty(x.size)
    okv = np.zeros(x.size, dtype=bool)
    R_prev = None
    for j in order:
        zz = complex(x[j], eta)
        R, ok = solve_upper(law, zz, R_prev, tol=tol, maxiter=maxiter)
        s = np.trace(np.linalg.inv(R)) / law.m
        rho[j] = s.imag / math.pi - atom * eta / (math.pi * ((x[j] - law.lam) ** 2 + eta**2))
        okv[j] = ok
        R_prev = R if ok else None
    return np.maximum(rho, 0.0), okv




# --------------------------------------------------------------------------- real branch
def spectral_radius(K: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(K))))


def real_solve(
    law: WeightLaw, x: float, R0: np.ndarray, *, tol: float, maxiter: int
) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Real Newton at real ``x``; accepted only on the physical branch ``ρ(K) < 1``."""
    R, ok, _ = newton(law, x, np.real(R0), branch="real", tol=tol, maxiter=maxiter)
    if not ok:
        return R, None, False
    try:
        _, K, _ = residual(law, x, R)
    except np.linalg.LinAlgError:
        return R, None, False
    return R, K, spectral_radius(K) < 1.0 - 1e-12


def tangent(law: WeightLaw, K: np.ndarray) -> np.ndarray:
    """``dR/dx = −(I − K)^{-1} I`` along the real branch."""
    m = law.m
    return -np.linalg.solve(np.eye(m * m) - K, np.eye(m).reshape(-1)).reshape(m, m)


def real_start(law: WeightLaw, x: float, *, tol: float, maxiter: int) -> tuple[np.ndarray, bool]:
    """Physical real ``R(x)`` at a point ``x`` far below the support."""
    R = (law.lam - x) * np.eye(law.m) + law.expect(law.D)
    for _ in range(50):
        EA, _, _ = pieces(law, R, jac=False)
        R = (law.lam - x) * np.eye(law.m) + 0.5 * (EA + EA.T)
    R, _, ok = real_solve(law, x, R, tol=tol, maxiter=maxiter)
    return R, ok


def real_step(
    law: WeightLaw, x_new: float, x_old: float, R_old: np.ndarray, K_old: np.ndarray | None, *, tol: float,
    maxiter: int,
) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Continue the physical real branch from ``x_old`` to ``x_new`` (tangent predictor, Newton corrector)."""
    starts = [R_old]
    if K_old is not None:
        try:
            starts.insert(0, R_old + (x_new - x_old) * tangent(law, K_old))
        except np.linalg.LinAlgError:
            pass
    for R0 in starts:
        R, K, ok = real_solve(law, x_new, R0, tol=tol, maxiter=maxiter)
        if ok:
            return R, K, True
    return R_old, None, False


def far_left(law: WeightLaw) -> float:
    return law.lower - 0.1 * law.scale


def march_to_fold(law: WeightLaw, x: float, R: np.ndarray, K: np.ndarray, hmax: float, *, xtol: float,
                  tol: float, maxiter: int, target: float | None = None, approach: float | None = 8.0,
                  target_tol: float = 0.0) -> tuple[float, np.ndarray, np.ndarray, int, bool]:
    """Continue the physical real branch rightwards in steps of at most ``hmax``; where it stops.

    A failed step is halved, an accepted one grown by 1.5. Without ``target`` the march stops
    at the first fold (a step below ``xtol`` fails). With a ``target`` and ``approach = a`` the
    cap also shrinks geometrically, to 1/a of the distance left, and the march stops within
    ``max(target_tol, a·xtol)`` of the target; with ``approach=None`` it goes exactly to the
    target (last step clipped). Either way a fold can stop it first. Returns
    ``(x, R, K, steps, folded)``; ``folded`` is True iff a fold (or the step limit) stopped it.
    """
    h = hmax
    steps = 0
    while steps < 20_000:
        cap = hmax
        if target is not None:
            left = target - x
            if left <= (0.0 if approach is None else max(target_tol, approach * xtol)):
                return x, R, K, steps, False
            if approach is not None:
                cap = min(hmax, left / approach)
        h = min(h, cap)
        if h <= xtol:
            return x, R, K, steps, True
        steps += 1
        x_try = x + h if target is None or approach is not None else min(x + h, target)
        R_try, K_try, ok = real_step(law, x_try, x, R, K, tol=tol, maxiter=maxiter)
        if ok:
            x, R, K = x_try, R_try, K_try
            h = 1.5 * h
        else:
            h *= 0.5
    return x, R, K, steps, True


def left_edge_march(law: WeightLaw, *, xtol: float, tol: float, maxiter: int,
                    passes: int = 5, verify_steps: int = 400) -> tuple[float, dict[str, Any]]:
    """Left edge as the fold of the physical real branch continued from far below the support.

    Steps are capped: an accepted step may not jump over a thin piece of the support into a
    gap, where the physical real branch exists again (found by hypothesis: D = diag(0, c),
    c ∈ {1, 0.062}, δ = 0.5). The first pass caps steps at 1/400 of the distance from the start
    to the top of the support. One extreme sample can make that cap larger than the whole
    bulk: on m = 1 laws with one large sample the march stepped over the bulk and stopped at
    the far sample's fold, and on r² plug-in laws at m = 2 it stepped over islands of a few
    extreme samples (``tests/test_outlier_equation.py``). Each further pass re-marches from the start
    towards the fold found last, with steps of at most 1/``verify_steps`` of that distance and
    1/8 of the distance left, down to 10⁻⁴ of that distance from it, and moves the edge to any fold
    it meets first. Passes stop when one meets no fold, when the fold it meets is less than
    halfway closer to the start (the next pass would be at most twice finer), or after
    ``passes``. A piece thinner than those steps can still be
    missed; the outlier scan (:mod:`dmftsolve.hessian.outlier_equation`) checks the edge again
    on its own grid.
    """
    x0 = far_left(law)
    R0, ok = real_start(law, x0, tol=tol, maxiter=maxiter)
    if not ok:
        raise SolverError(f"real branch: no physical solution at x={x0!r} below the support")
    _, K0, _ = residual(law, x0, R0)
    x, _, K, steps, _ = march_to_fold(law, x0, R0, K0, (law.upper - x0) / 400.0, xtol=xtol, tol=tol,
                                       maxiter=maxiter)
    n_pass = 1
    while n_pass < passes:
        n_pass += 1
        x2, _, K2, s2, folded = march_to_fold(law, x0, R0, K0, (x - x0) / verify_steps, xtol=xtol,
                                               tol=tol, maxiter=maxiter, target=x, target_tol=1e-4 * (x - x0))
        steps += s2
        if not folded:
            break
        # a fold less than halfway closer to the start: the next pass's steps would be at most
        # twice finer than this one's, which just met that fold
        closer_by = (x2 - x0) / (x - x0)
        x, K = x2, K2
        if closer_by > 0.5:
            break
    return x, {"edge_method": "real-branch fold", "edge_steps": steps, "edge_passes": n_pass,
               "edge_rho": spectral_radius(K)}


def left_edge_sc(law: WeightLaw) -> tuple[float, dict[str, Any]]:
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


def left_edge(law: WeightLaw, method: str, *, xtol: float, tol: float, maxiter: int):
    if law.trivial:
        return law.lam, {"edge_method": "D == 0"}
    if method == "sc" or (method == "auto" and law.m == 1):
        if law.m != 1:
            raise ValueError(f"method='sc' needs m = 1, got m={law.m}")
        return left_edge_sc(law)
    return left_edge_march(law, xtol=xtol, tol=tol, maxiter=maxiter)


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


def unbounded(law: WeightLaw, flag: bool | None, side: str) -> tuple[bool, dict[str, Any]]:
    if flag is not None:
        return bool(flag), {f"unbounded_{side}": "user flag"}
    vals = -law.eig_min if side == "below" else law.eig_max
    ok = np.isfinite(vals)
    g = tail_index(vals[ok], law.w_all[ok])
    decided = bool(np.isfinite(g) and g > TAIL_INDEX_THRESHOLD) or g == math.inf
    return decided, {f"tail_index_{side}": g}


