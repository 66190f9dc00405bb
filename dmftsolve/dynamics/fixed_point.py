"""The time-translation-invariant (TTI) fixed point of the DMFT: where GD converges.

When GD converges, the DMFT kernels become time-translation invariant and the
long-time state solves static equations (docs/theory.md §5.4). With
``Γ = Σ_s Γ(t, s)`` the integrated response and ``χ = η Σ_τ R(τ)`` the
integrated parameter response, summing the recursions of docs/theory.md §2 gives
``χ = (λ I + Γ)^{-1}`` and a memory term ``−(η/δ) Σ_s R(t, s+1) g^s → −κ g``
with ``κ = χ/δ``. The sample process becomes a proximal map and the
parameter process a linear Gaussian equation:

* ``V + κ g(y, V) = Mᵀ V* + Ξ``,  ``Ξ ~ N(0, Q)``  (per sample);
* ``Γ = E[D (I + κ D)^{-1}]``,  ``κ = (1/δ) (λ I + Γ)^{-1}``;
* ``Q = (λ I + Γ)^{-1} (E[g gᵀ]/δ) (λ I + Γ)^{-ᵀ}``;
* ``λ M + E[V* gᵀ] = 0`` on the directions not held at zero.

For a non-convex loss the per-sample equation can have several stable
roots; which one GD reaches depends on its history. Two rules are offered:
``branch="global"`` takes the global minimiser of ``κ ℓ(y, V) + |V − u|²/2``
(``m = 1``, by a grid search refined by Newton), ``branch="newton"`` follows
Newton's method from the previous iterate (continuation from a start the
caller supplies, e.g. the last step of a long DMFT run). Expectations are
tensor Gauss–Hermite rules in ``(V*, ζ, ε)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dmftsolve.checks import check_delta
from dmftsolve.gaussian import gauss_hermite_rule
from dmftsolve.hessian.law import Law
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status

__all__ = ["FixedPointSettings", "FixedPoint", "solve_fixed_point"]


@dataclass(frozen=True)
class FixedPointSettings:
    """Solver settings, kept apart from the problem.

    Attributes
    ----------
    branch : {"global", "newton"}
        Root of the per-sample proximal equation (module docstring).
    nodes : int or None
        Gauss–Hermite nodes per dimension (default: about 2·10⁵ points in all).
    damping : float
        Weight of the new iterate in the damped fixed-point update, in (0, 1].
    tol : float
        Convergence: largest change of ``Q``, ``κ`` and ``M`` in one update.
    maxiter : int
        Largest number of updates.
    grid : tuple
        ``(low, high, points)`` of the grid search of ``branch="global"``.
    """

    branch: Literal["global", "newton"] = "global"
    nodes: int | None = None
    damping: float = 0.3
    tol: float = 1e-10
    maxiter: int = 1000
    grid: tuple[float, float, int] = (-12.0, 12.0, 481)

    def __post_init__(self) -> None:
        if self.branch not in ("global", "newton"):
            raise ValueError(f"branch must be 'global' or 'newton', got {self.branch!r}")
        if not 0 < self.damping <= 1:
            raise ValueError(f"damping must be in (0, 1], got {self.damping!r}")
        if not self.tol > 0:
            raise ValueError(f"tol must be > 0, got {self.tol!r}")
        if self.nodes is not None and self.nodes < 4:
            raise ValueError(f"nodes must be >= 4, got {self.nodes!r}")


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class FixedPoint(Result):
    """The TTI fixed point at one ``δ``, with the quadrature law it rests on (:meth:`law`)."""

    delta: float
    M: np.ndarray
    Q: np.ndarray
    kappa: np.ndarray
    Gamma: np.ndarray
    train_loss: float
    iterations: int
    weights: np.ndarray = field(repr=False)
    Vstar: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    D: np.ndarray = field(repr=False)

    def samples(self) -> dict[str, np.ndarray]:
        """Quadrature nodes of the fixed-point law: ``V``, ``Vstar``, ``y``, ``D`` and ``weights``."""
        return {"V": self.V, "Vstar": self.Vstar, "y": self.y, "D": self.D, "weights": self.weights}

    def law(self) -> Law:
        """The fixed-point law of ``(D, V*, V, y)`` as a quadrature :class:`~dmftsolve.hessian.law.Law`.

        Raises
        ------
        ValueError
            If the iterate is not finite (a failed solve).
        """
        return Law(D=self.D, Vstar=self.Vstar, V=self.V, y=self.y, weights=self.weights, kind="quadrature",
                   diagnostics={"source": "fixed_point", "delta": self.delta,
                                "nodes": self.settings.get("nodes"), "status": self.status.value})

    def to_dict(self) -> dict[str, Any]:
        skip = {"weights", "Vstar", "V", "y", "D"}
        out = super().to_dict()
        return {k: v for k, v in out.items() if k not in skip}


def _prox_global(problem: Problem, y: np.ndarray, u: np.ndarray, kappa: float,
                 grid: tuple[float, float, int]) -> np.ndarray:
    """argmin_V κ ℓ(y, V) + (V − u)²/2 for m = 1, vectorised over samples."""
    lo, hi, npts = grid
    g = np.linspace(lo, hi, int(npts))
    obj = kappa * problem.loss(y[:, None], problem.network.sigma(g)[None, :] * problem.network.a[0])
    obj = obj + (g[None, :] - u[:, None]) ** 2 / 2
    V = g[np.argmin(obj, axis=1)][:, None]
    return _prox_newton(problem, y, u[:, None], np.array([[kappa]]), V, max_step=(hi - lo) / npts)


def _prox_newton(problem: Problem, y: np.ndarray, u: np.ndarray, kappa: np.ndarray, V: np.ndarray,
                 *, max_step: float = 0.5, iters: int = 100) -> np.ndarray:
    """Newton on ``V + κ g(y, V) = u`` from ``V`` (shape (N, m)), steps clipped to ``max_step``."""
    m = V.shape[1]
    eye = np.eye(m)
    for _ in range(iters):
        F = V + problem.grad(y, V) @ kappa.T - u
        if np.max(np.abs(F)) < 1e-13:
            break
        J = eye + np.einsum("ij,njk->nik", kappa, problem.hess(y, V))
        step = np.linalg.solve(J, F[..., None])[..., 0]
        V = V - np.clip(step, -max_step, max_step)
    return V


def solve_fixed_point(
    problem: Problem,
    delta: float,
    *,
    M0: Any = None,
    Q0: Any = None,
    kappa0: Any = None,
    settings: FixedPointSettings | None = None,
    throw: bool = True,
) -> FixedPoint:
    """Solve the TTI fixed point of the DMFT of GD on ``problem`` at ``δ``.

    Parameters
    ----------
    problem : Problem
        The learning problem; ``training.hold_zero`` directions keep zero overlap.
        ``η`` only sets the step of the overlap update, not the fixed point.
    delta : float
        Sample ratio ``n/d > 0``.
    M0, Q0, kappa0 : array_like, optional
        Starting overlaps (``k×m``), Gram (``m×m``) and ``κ`` (``m×m``); by
        default the problem's initialisation and ``κ = I/δ``.
    settings : FixedPointSettings, optional
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` if the iteration does
        not converge or produces non-finite values (default True).

    Returns
    -------
    FixedPoint

    Raises
    ------
    ValueError
        If the problem has a trained bias (``bias=True``): not supported.

    Examples
    --------
    The r² neuron on ``z²`` with its hard direction held at zero, at a coarse
    quadrature (20 nodes) so that it runs in a fraction of a second:

    >>> from dmftsolve import Problem, solve_fixed_point
    >>> from dmftsolve.dynamics.fixed_point import FixedPointSettings
    >>> p = Problem.build(target="z**2", activation="quad", eta=0.05, hold_zero=[0])
    >>> fp = solve_fixed_point(p, 4.0, settings=FixedPointSettings(nodes=20, tol=1e-6))
    >>> fp.ok, fp.M.tolist(), fp.Q.shape
    (True, [[0.0]], (1, 1))
    """
    start = time.perf_counter()
    if problem.bias:
        raise ValueError("solve_fixed_point does not support a trained bias (problem has bias=True)")
    delta = check_delta(delta)
    settings = settings or FixedPointSettings()
    k, m = problem.k, problem.m
    if settings.branch == "global" and m != 1:
        raise ValueError(f"branch='global' needs m=1, got m={m}; use branch='newton' with a start")
    lam, eta = problem.training.lam, problem.training.eta
    M = problem.training.init.overlaps(k, m) if M0 is None else np.array(M0, dtype=float).reshape(k, m)
    Q = problem.training.init.gram(m) if Q0 is None else np.array(Q0, dtype=float).reshape(m, m)
    kappa = np.eye(m) / delta if kappa0 is None else np.array(kappa0, dtype=float).reshape(m, m)
    held = list(problem.training.hold_zero)
    M[held] = 0.0

    noisy = problem.target.noisy
    dim = k + m + (1 if noisy else 0)
    nodes = settings.nodes or int(min(80, max(8, np.floor(2e5 ** (1.0 / dim)))))
    x, w = gauss_hermite_rule(dim, nodes)
    Vstar, zeta = x[:, :k], x[:, k:k + m]
    y = problem.labels(Vstar, x[:, -1] if noisy else 0.0)

    def sqrtm(S: np.ndarray) -> np.ndarray:
        ev, U = np.linalg.eigh((S + S.T) / 2)
        return (U * np.sqrt(np.clip(ev, 0, None))) @ U.T

    eye = np.eye(m)
    V = Vstar @ M + zeta @ sqrtm(Q)
    status, message, it, change = Status.NOT_CONVERGED, "", 0, np.inf
    for it in range(1, settings.maxiter + 1):
        u = Vstar @ M + zeta @ sqrtm(Q)
        if settings.branch == "global":
            V = _prox_global(problem, y, u[:, 0], float(kappa[0, 0]), settings.grid)
        else:
            V = _prox_newton(problem, y, u, kappa, V)
        g = problem.grad(y, V)
        D = problem.hess(y, V)
        Gamma = np.einsum("n,nij,njk->ik", w, D, np.linalg.inv(eye + np.einsum("ij,njk->nik", kappa, D)))
        A = np.linalg.inv(lam * eye + Gamma)
        kappa_new = A / delta
        Q_new = A @ (np.einsum("n,ni,nj->ij", w, g, g) / delta) @ A.T
        M_new = M - eta * (lam * M + np.einsum("n,ni,nj->ij", w, Vstar, g))
        M_new[held] = 0.0
        if not (np.all(np.isfinite(Q_new)) and np.all(np.isfinite(kappa_new)) and np.all(np.isfinite(M_new))):
            status, message = Status.NONFINITE, f"non-finite iterate at update {it}"
            break
        change = max(np.abs(Q_new - Q).max(), np.abs(kappa_new - kappa).max(), np.abs(M_new - M).max())
        a = settings.damping
        Q = (1 - a) * Q + a * (Q_new + Q_new.T) / 2
        kappa = (1 - a) * kappa + a * kappa_new
        M = (1 - a) * M + a * M_new
        if change < settings.tol:
            status, message = Status.SUCCESS, f"converged in {it} updates"
            break
    else:
        message = f"no convergence in {settings.maxiter} updates (last change {change:.2e})"

    stable = np.linalg.eigvals(eye + np.einsum("ij,njk->nik", kappa, D)).real.min()
    result = FixedPoint(
        delta=delta, M=M, Q=Q, kappa=kappa, Gamma=Gamma,
        train_loss=float(w @ problem.loss_value(y, V)), iterations=it,
        weights=w, Vstar=Vstar, V=V, y=y, D=D, status=status, message=message,
        settings={"problem": problem.to_dict(), "delta": delta, "nodes": nodes,
                  **{f: getattr(settings, f) for f in ("branch", "damping", "tol", "maxiter")}},
        diagnostics={"last_change": float(change), "min_eig_I_plus_kappa_D": float(stable),
                     "points": int(w.size)},
        elapsed=time.perf_counter() - start,
    )
    if throw and not result.ok:
        raise SolverError(f"fixed point at delta={delta}: {message}", result)
    return result
