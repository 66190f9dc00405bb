"""Population (test) loss of a two-layer network described by its overlaps.

For a fresh sample the pre-activations are ``V = Mᵀ V* + Ξ (+ b)`` with
``V* ~ N(0, I_k)``, ``Ξ ~ N(0, Q)`` independent (``docs/theory.md`` §2.2, test
averages), where ``M = Θ*ᵀW`` (``k×m``) are the overlaps with the target
directions and ``Q = W_⊥ᵀW_⊥`` (``m×m``) is the Gram of the part of ``W``
orthogonal to them, and ``b ∈ R^m`` the bias of the network (if it has
one; zero otherwise). The label is ``y = h(V*, ε)`` with ``ε ~ N(0, 1)``
(integrated over only when the target is noisy).

Examples
--------
>>> from dmftsolve import Problem
>>> from dmftsolve.population import population_loss
>>> p = Problem.build(target="z**2", activation="quad")
>>> round(population_loss(p, [[0.0]], [[1.0]]).value, 12)   # (3 + 3 − 2)/2
2.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmftsolve.gaussian import Expectation, expect
from dmftsolve.problem import Problem
from dmftsolve.seeds import SeedLike

__all__ = ["population_loss", "label_kurtosis", "samples_needed", "check_sampling"]


def _check_overlaps(problem: Problem, M: Any, Q: Any) -> tuple[np.ndarray, np.ndarray]:
    k, m = problem.k, problem.m
    try:
        M = np.asarray(M, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"M must be a real (k, m)=({k}, {m}) array, got {M!r}") from None
    if M.ndim < 2 and M.size == k * m:  # a scalar or a flat vector when k or m is 1
        M = M.reshape(k, m)
    if M.shape != (k, m) or not np.all(np.isfinite(M)):
        raise ValueError(f"M must be a finite (k, m)=({k}, {m}) array, got {M!r}")
    try:
        Q = np.asarray(Q, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"Q must be a real (m, m)=({m}, {m}) array, got {Q!r}") from None
    if Q.ndim == 0 and m == 1:
        Q = Q.reshape(1, 1)
    if Q.shape != (m, m) or not np.all(np.isfinite(Q)):
        raise ValueError(f"Q must be a finite (m, m)=({m}, {m}) array, got {Q!r}")
    scale = max(1.0, float(np.abs(Q).max()))
    if not np.allclose(Q, Q.T, rtol=1e-12, atol=1e-12 * scale):
        raise ValueError(f"Q must be symmetric, got {Q!r}")
    if np.linalg.eigvalsh((Q + Q.T) / 2).min() < -1e-12 * scale:
        raise ValueError(f"Q must be positive semidefinite, got {Q!r}")
    return M, (Q + Q.T) / 2


def population_loss(
    problem: Problem,
    M: Any,
    Q: Any,
    b: Any = None,
    *,
    method: str = "auto",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    n_samples: int = 2**16,
    seed: SeedLike = None,
    throw: bool = True,
) -> Expectation:
    """Test loss ``E[loss(y, Σ_j a_j σ(V_j))]`` at overlaps ``M``, orthogonal Gram ``Q`` and bias ``b``.

    Parameters
    ----------
    problem : Problem
        Supplies the target ``h``, the network ``(σ, a)`` and the loss.
    M : array_like, shape (k, m)
        Overlaps ``Θ*ᵀW``.
    Q : array_like, shape (m, m)
        Gram of the orthogonal part of ``W``, symmetric positive semidefinite
        (singular allowed, e.g. ``0`` for a network inside the target span).
    b : array_like, shape (m,), optional
        Bias added to every unit's pre-activation, ``V = MᵀV* + Ξ + b``
        (default: none, i.e. ``b = 0``).
    method : {"auto", "quadrature", "qmc", "mc"}
        Passed to :func:`dmftsolve.gaussian.expect`; the Gaussian vector is
        ``(V*, Ξ, ε)`` of dimension ``k + m (+1 if noisy)`` (quadrature runs in
        the rank of its covariance).
    rtol, atol : float
        Quadrature tolerances.
    n_samples : int
        Points for ``qmc``/``mc``.
    seed : int, SeedSequence, Generator or None
        Randomness for ``qmc``/``mc`` (``dmftsolve.seeds``).
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` on failure (default).

    Returns
    -------
    Expectation
        ``value`` is the population loss, ``error`` its error estimate
        (quadrature difference or Monte Carlo standard error).

    Examples
    --------
    The r² neuron on ``y = z²``: at ``W = Θ*`` (``M = 1``, ``Q = 0``) it is the
    target, loss 0; at ``W = 0`` the loss is ``E[y²]/2 = E[z⁴]/2 = 3/2``:

    >>> from dmftsolve import Problem, population_loss
    >>> p = Problem.build(target="z**2", activation="quad", eta=0.05)
    >>> round(population_loss(p, M=[[1.0]], Q=[[0.0]]).value, 12)
    0.0
    >>> round(population_loss(p, M=[[0.0]], Q=[[0.0]]).value, 12)
    1.5
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    M, Q = _check_overlaps(problem, M, Q)
    k, m = problem.k, problem.m
    if b is not None:
        try:
            b = np.asarray(b, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"b must be a real (m,)=({m},) array, got {b!r}") from None
        if b.shape != (m,) or not np.all(np.isfinite(b)):
            raise ValueError(f"b must be a finite (m,)=({m},) array, got {b!r}")
    noisy = problem.target.noisy
    dim = k + m + int(noisy)
    cov = np.zeros((dim, dim))
    cov[:k, :k] = np.eye(k)
    cov[k:k + m, k:k + m] = Q
    if noisy:
        cov[-1, -1] = 1.0

    def integrand(pts: np.ndarray) -> np.ndarray:
        z = pts[:, :k]
        V = z @ M + pts[:, k:k + m]
        if b is not None:
            V = V + b
        eps = pts[:, -1] if noisy else 0.0
        return problem.loss_value(problem.labels(z, eps), V)

    return expect(integrand, np.zeros(dim), cov, method=method, rtol=rtol, atol=atol,
                  n_samples=n_samples, seed=seed, throw=throw)


def label_kurtosis(problem: Problem) -> float | None:
    """``E[y⁴] / E[y²]²`` of the centred label ``y − E[y]`` by quadrature, or None if a moment
    is infinite or the quadrature does not resolve it (then nothing is claimed).

    It sets how many samples a Monte Carlo mean of ``y²`` (a loss) needs: its relative standard
    error is ``sqrt((κ − 1)/N)``, and with ``N`` far below ``κ`` the sample mean misses the tail
    that carries ``E[y²]`` and is typically orders of magnitude too small, with a standard
    error just as wrong.
    """
    k = problem.k
    noisy = problem.target.noisy
    dim = k + int(noisy)

    def moments(pts: np.ndarray) -> np.ndarray:
        y = np.asarray(problem.labels(pts[:, :k], pts[:, -1] if noisy else 0.0), float)
        return np.stack([y, y * y], axis=-1)

    try:
        with np.errstate(all="ignore"):
            second = expect(lambda pts: moments(pts)[:, 1], np.zeros(dim), np.eye(dim),
                            method="quadrature", rtol=1e-8, throw=False)
            if not second.ok or not second.value > 0:
                return None
            # the mean to a precision relative to the label's scale (a zero mean by symmetry is
            # a sum of cancelling terms, resolved only to that scale)
            first = expect(lambda pts: moments(pts)[:, 0], np.zeros(dim), np.eye(dim),
                           method="quadrature", rtol=1e-8, atol=1e-8 * math.sqrt(second.value),
                           throw=False)
            if not first.ok:
                return None
            mu = float(first.value)

            def centred(pts: np.ndarray) -> np.ndarray:
                c = np.asarray(problem.labels(pts[:, :k], pts[:, -1] if noisy else 0.0), float) - mu
                return np.stack([c ** 2, c ** 4], axis=-1)

            res = expect(centred, np.zeros(dim), np.eye(dim), method="quadrature", rtol=1e-6,
                         atol=0.0, throw=False)
    except (ValueError, FloatingPointError, OverflowError):
        return None
    if not res.ok or not np.all(np.isfinite(res.value)) or res.value[0] <= 0:
        return None
    return float(res.value[1] / res.value[0] ** 2)


def samples_needed(problem: Problem) -> float | None:
    """Samples below which a Monte Carlo loss of ``problem``'s label is meaningless: the
    relative standard error of the sampled ``E[(y − E y)²]`` reaches 1 at ``κ − 1`` samples
    (:func:`label_kurtosis`); None where the fourth moment is not resolved."""
    kappa = label_kurtosis(problem)
    return None if kappa is None else kappa - 1.0


def check_sampling(problem: Problem, n: int, what: str) -> None:
    """Refuse (``ValueError``) a Monte Carlo estimate over ``n`` samples of the label that
    cannot resolve the label's second moment (``n`` below :func:`samples_needed`).

    Such a label (``z**40``: ``κ ≈ 10⁶⁰``) has finite moments, but ``n`` samples miss the tail
    that carries them: the sampled loss came out 24 orders of magnitude below ``E[y²]/2``,
    with a standard error of 0.24 %.
    """
    need = samples_needed(problem)
    if need is not None and n < need:
        raise ValueError(
            f"target={str(problem.target.expr)[:60]!r} has moments too heavy for {what} = {n}: "
            f"E[y⁴]/E[y²]² = {need + 1:.3g} (centred), so a mean over {n} samples misses the tail that "
            f"carries E[y²] and the losses would be wrong by orders of magnitude; it needs more than "
            f"{need:.3g} samples, or a label with lighter tails")
