"""Bulk spectrum of the weighted-Wishart Hessian ``H = (1/n) Σ_i x_i x_iᵀ ⊗ D_i + λ I``.

``x_i ~ N(0, I_d)``, ``n = δ d`` and the symmetric ``m×m`` weights ``D_i`` are
i.i.d. from a law given by samples (Monte Carlo paths of the DMFT, or
quadrature nodes with weights). The block-averaged resolvent
``S(ζ) = lim (1/d) Σ_j [(H − ζ)^{-1}]_{jj-block}`` solves (docs/theory.md §3.2)

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
has no finite left (right) edge (docs/theory.md §3.5). A finite sample cannot show
this, so it is decided by the flags ``unbounded_below`` / ``unbounded_above``
or, when these are ``None``, by a Pickands extreme-value-index estimate of
the tails of ``λ_min(D)`` / ``λ_max(D)`` (:func:`tail_index`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import trapezoid

from dmftsolve.hessian._resolvent import (
    TAIL_INDEX_THRESHOLD,
    WeightLaw,
    atom_mass,
    default_eta,
    density_on,
    law_flag,
    left_edge,
    prepare_law,
    solve_upper,
    tail_index,
    unbounded,
)
from dmftsolve.hessian.law import Law
from dmftsolve.results import Result, SolverError, Status

__all__ = [
    "BulkSpectrum",
    "stieltjes",
    "stieltjes_trace",
    "density",
    "atoms",
    "edges",
    "tail_index",
    "bulk_spectrum",
    "TAIL_INDEX_THRESHOLD",
]

#: Extreme-value index above which a tail is declared unbounded (see :func:`tail_index`).
# --------------------------------------------------------------------------- public: Stieltjes
def stieltjes(
    D: ArrayLike | Law,
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
    D : array_like, shape (N, m, m) or (N,), or Law
        Samples of the symmetric weight matrix (``(N,)`` means ``m = 1``), or a
        :class:`~dmftsolve.hessian.law.Law` (which carries its own weights).
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
    law = prepare_law(D, delta, lam, weights)
    z = np.asarray(zeta, dtype=complex)
    if not np.all(np.isfinite(z)):
        raise ValueError("zeta must be finite")
    if np.any(z.imag < 0):
        raise ValueError(f"zeta must have Im zeta >= 0, got min Im zeta = {float(z.imag.min())!r}")
    eta_r = default_eta(law) if eta is None else float(eta)
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
        R, ok = solve_upper(law, zz, R_prev, tol=tol, maxiter=maxiter)
        if not ok:
            raise SolverError(f"stieltjes did not converge at zeta={zz!r}")
        out[j] = np.linalg.inv(R)
        R_prev = R
    return out.reshape(z.shape + (law.m, law.m))


def stieltjes_trace(
    D: ArrayLike | Law,
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


def atoms(
    D: ArrayLike | Law,
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
    masses below ``1e-6`` are reported as no atom. Raises :class:`SolverError` when the
    limit cannot be computed (rather than reporting no atom).
    """
    law = prepare_law(D, delta, lam, weights)
    mass, info = atom_mass(law, tol=tol, maxiter=maxiter)
    if math.isnan(mass):
        raise SolverError(f"the mass at lam={law.lam!r} could not be computed ({info.get('atom_error')})")
    return [(law.lam, mass)] if mass > 0 else []


def density(
    D: ArrayLike | Law,
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
    law = prepare_law(D, delta, lam, weights)
    xa = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(xa)):
        raise ValueError("x must be finite")
    eta_r = default_eta(law) if eta is None else float(eta)
    if not (eta_r > 0 and math.isfinite(eta_r)):
        raise ValueError(f"eta must be > 0 and finite, got {eta!r}")
    if law.trivial:
        return np.zeros(xa.shape)
    mass, info = atom_mass(law, tol=tol, maxiter=maxiter)
    if math.isnan(mass):
        raise SolverError(f"the mass at lam={law.lam!r} could not be computed ({info.get('atom_error')}), "
                          "so neither can the density beside it")
    rho, ok = density_on(law, xa.reshape(-1), eta=eta_r, atom=mass, tol=tol, maxiter=maxiter)
    if not np.all(ok):
        bad = xa.reshape(-1)[~ok]
        raise SolverError(f"density did not converge at {bad.size} point(s), e.g. x={bad[0]!r}")
    return rho.reshape(xa.shape)


def edges(
    D: ArrayLike | Law,
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
@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class BulkSpectrum(Result):
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

    _headline = ("left_edge", "right_edge")  # shown by the repr (Result.__repr__)

    left_edge: float | None
    right_edge: float | None
    atoms: list[tuple[float, float]]
    x: np.ndarray
    density: np.ndarray
    status: Status = Status.SUCCESS
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def total_mass(self) -> float:
        """``∫ density`` (trapezoid on the grid) plus the atoms."""
        ac = float(trapezoid(self.density, self.x)) if self.x.size > 1 else 0.0
        return ac + sum(m for _, m in self.atoms)


def _edges_with_info(law: WeightLaw, method: str, *, xtol: float, tol: float, maxiter: int):
    left, info_l = left_edge(law, method, xtol=xtol, tol=tol, maxiter=maxiter)
    neg = law.negated()
    right_neg, info_r = left_edge(neg, method, xtol=xtol, tol=tol, maxiter=maxiter)
    info = {f"left_{k}": v for k, v in info_l.items()} | {f"right_{k}": v for k, v in info_r.items()}
    return left, -right_neg, info


def bulk_spectrum(
    D: ArrayLike | Law,
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

    Examples
    --------
    With ``D ≡ 1`` the Hessian is a sample covariance and its bulk is
    Marchenko–Pastur, with edges ``(1 ∓ 1/√δ)²``:

    >>> import numpy as np
    >>> from dmftsolve import bulk_spectrum
    >>> b = bulk_spectrum(np.ones(1), 4.0, npoints=5)
    >>> np.allclose([b.left_edge, b.right_edge], [(1 - 0.5) ** 2, (1 + 0.5) ** 2])
    True
    """
    t0 = time.perf_counter()
    unbounded_below = law_flag(D, unbounded_below, "below")
    unbounded_above = law_flag(D, unbounded_above, "above")
    law = prepare_law(D, delta, lam, weights)
    if method not in ("auto", "sc", "march"):
        raise ValueError(f"method must be 'auto', 'sc' or 'march', got {method!r}")
    if isinstance(npoints, bool) or not isinstance(npoints, (int, np.integer)) or npoints < 0:
        raise ValueError(f"npoints must be an integer >= 0, got {npoints!r}")
    xtol_r = 1e-10 * law.scale if xtol is None else float(xtol)
    if not (xtol_r > 0 and math.isfinite(xtol_r)):
        raise ValueError(f"xtol must be > 0 and finite, got {xtol!r}")
    eta_r = default_eta(law) if eta is None else float(eta)
    if not (eta_r > 0 and math.isfinite(eta_r)):
        raise ValueError(f"eta must be > 0 and finite, got {eta!r}")
    settings = {
        "delta": law.delta, "lam": law.lam, "m": law.m, "n_samples": int(law.keep.size),
        "method": method, "xtol": xtol_r, "eta": eta_r, "tol": tol, "maxiter": maxiter,
        "unbounded_below": unbounded_below, "unbounded_above": unbounded_above,
    }
    diagnostics: dict[str, Any] = {"p_zero": law.p_zero, "scale": law.scale}
    messages: list[str] = []
    warnings: list[str] = []
    left, right, info = _edges_with_info(law, method, xtol=xtol_r, tol=tol, maxiter=maxiter)
    diagnostics |= info
    diagnostics["sample_left_edge"], diagnostics["sample_right_edge"] = left, right
    ub, info_b = unbounded(law, unbounded_below, "below")
    ua, info_a = unbounded(law, unbounded_above, "above")
    diagnostics |= info_b | info_a
    if ub:
        warnings.append(
            "law of D unbounded below: the bulk has no finite left edge "
            f"(the edge {left:.6g} of the atoms' law is an artefact of their finite number)"
        )
    if ua:
        warnings.append(
            "law of D unbounded above: the bulk has no finite right edge "
            f"(the edge {right:.6g} of the atoms' law is an artefact of their finite number)"
        )
    mass, info_atom = atom_mass(law, tol=tol, maxiter=maxiter)
    diagnostics |= info_atom
    atom_list = [(law.lam, mass)] if mass > 0 else []
    status = Status.SUCCESS
    if math.isnan(mass):
        status = Status.NOT_CONVERGED
        messages.append(f"the mass at λ = {law.lam:.6g} could not be computed "
                        f"({info_atom.get('atom_error')}); density and total mass are unknown")
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
        rho, ok = density_on(law, xa, eta=eta_r, atom=mass, tol=tol, maxiter=maxiter)
        if not np.all(ok):
            status = Status.NOT_CONVERGED
            messages.append(f"density did not converge at {int((~ok).sum())} grid point(s)")
            diagnostics["density_failed_x"] = xa[~ok]
    else:
        rho = np.zeros(xa.size)
    if xa.size > 1:
        diagnostics["total_mass"] = (float(trapezoid(rho, xa)) + sum(w for _, w in atom_list))
    return BulkSpectrum.finish(left_edge=None if ub else left, right_edge=None if ua else right,
                               atoms=atom_list, x=xa, density=rho, status=status, warnings=warnings,
                               settings=settings, diagnostics=diagnostics,
                               start=t0, messages=messages, throw=throw)
