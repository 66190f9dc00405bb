"""The spectral start of GD and the finite-d law of its overlap (``TransitionSettings.init="spectral"``).

GD from a spectral start begins at the top eigenvector ``v̂`` of

    D_n = (1/n) Σ_i T(y_i) x_i x_iᵀ

with the optimal preprocessing ``T*(y) = 1 − 1/E[z²|y]`` (Luo, Alghamdi and Lu, *Optimal
spectral initialization for signal recovery*, IEEE TSP 67, 2019: it maximises the limiting overlap
at every δ, and the overlap is positive exactly above the weak-recovery threshold δ_alg), scaled
to the norm of a random start. At finite ``d`` the overlap ``|⟨v̂, θ*⟩|`` is random;
:func:`spectral_overlaps` samples its law exactly, from the estimator itself on fresh Gaussian data of
``n = δd`` samples (the direction ``v̂`` is rotation-equivariant, so the overlap's law does not depend
on anything else). ``E[z²|y]`` is estimated from a large fixed Monte Carlo sample of the label, by
grouping equal labels or, for continuous labels, by equal-count bins of ``y``
(:func:`optimal_preprocessing`).

A draw started there is a warm-start DMFT with ``M_0 = ρ̂ √q0`` and ``Q_0 = q0 (1 − ρ̂²)``. The DMFT
takes the start's part orthogonal to ``θ*`` independent of the data, while the spectral vector's is
a function of ``X``: the comparison with GD is the check (``docs/findings.md`` §9.9).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dmftsolve.problem import Problem

__all__ = ["optimal_preprocessing", "spectral_overlaps", "spectral_vector", "spectral_start",
           "spectral_threshold", "check_spectral_problem", "check_above_spectral_threshold", "DENSE_LIMIT"]

#: up to this ``d`` the spectral matrix is formed densely (``n d²`` flops) and its top pair taken by
#: ``eigh``; above, Lanczos on ``v ↦ Xᵀ(T ∘ Xv)/n``
DENSE_LIMIT = 3000

#: the Monte Carlo sample of ``(z, y)`` behind :func:`optimal_preprocessing`, and its bins
_SAMPLE = 2**20
_BINS = 4096


def check_spectral_problem(problem: Problem) -> None:
    """Raise ``ValueError`` unless the spectral start applies: one neuron and one target direction
    (the estimator gives one direction; a second neuron or latent would need its own)."""
    if problem.m != 1 or problem.k != 1:
        raise ValueError("the spectral start is implemented for one neuron and one target direction "
                         f"(m = 1, k = 1), got m = {problem.m}, k = {problem.k}")


def spectral_threshold(problem: Problem) -> float:
    """The spectral threshold of the optimal preprocessing: the weak-recovery threshold δ_alg of the
    label (:func:`~dmftsolve.thresholds.weak_recovery.alg_threshold`), below which the spectral
    overlap vanishes as ``d → ∞``."""
    from dmftsolve.thresholds.weak_recovery import alg_threshold

    return float(alg_threshold(problem.target).delta_alg)


def check_above_spectral_threshold(problem: Problem, deltas: Any) -> None:
    """Raise ``ValueError`` if a spectral start is asked for at a δ at or below
    :func:`spectral_threshold` (there the start carries no overlap as ``d → ∞``)."""
    lo = spectral_threshold(problem)
    low = [float(x) for x in np.atleast_1d(deltas) if float(x) <= lo]
    if low:
        raise ValueError(f"--init spectral: delta {low[0]:g} is at or below the spectral threshold "
                         f"delta_alg = {lo:.4g} of this label, where the spectral start has no overlap; "
                         "use deltas above it")


@functools.lru_cache(maxsize=32)
def _conditional_z2(target: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    rng = np.random.default_rng(20261207)
    z = rng.standard_normal(_SAMPLE)
    eps = rng.standard_normal(_SAMPLE) if target.noisy else 0.0
    y = np.asarray(target(z[:, None], eps), dtype=float)
    y = np.broadcast_to(y, z.shape)
    values, inverse = np.unique(y, return_inverse=True)
    if values.size <= 64:  # a discrete label: E[z² | y = value]
        sums = np.bincount(inverse, weights=z * z, minlength=values.size)
        counts = np.bincount(inverse, minlength=values.size)
        return values, sums / counts, True
    order = np.argsort(y, kind="stable")
    ys, z2 = y[order], (z * z)[order]
    per = _SAMPLE // _BINS
    edges = ys[per::per][: _BINS - 1]  # upper edges of the first B − 1 bins
    means = z2[: per * _BINS].reshape(_BINS, per).mean(axis=1)
    return edges, means, False


def optimal_preprocessing(problem: Problem) -> Callable[[np.ndarray], np.ndarray]:
    """``T*(y) = 1 − 1/E[z²|y]`` for the problem's label (module docstring), as a vectorised function.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> T = optimal_preprocessing(Problem.build(target="z**2"))
    >>> [round(float(v), 2) for v in T(np.array([0.5, 2.0, 4.0]))]  # closed form 1 − 1/y
    [-1.0, 0.5, 0.75]
    """
    check_spectral_problem(problem)
    keys, ez2, discrete = _conditional_z2(problem.target)

    def T(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if discrete:
            idx = np.clip(np.searchsorted(keys, y), 0, keys.size - 1)
        else:
            idx = np.searchsorted(keys, y, side="right")
        return 1.0 - 1.0 / np.maximum(ez2[idx], 1e-12)

    return T


def spectral_vector(X: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """The unit top eigenvector of ``(1/n) Xᵀ diag(weights) X`` and its eigenvalue: dense (``eigh`` of
    the top pair) for ``d ≤`` :data:`DENSE_LIMIT`, Lanczos above (started from ``rng``)."""
    import scipy.linalg
    import scipy.sparse.linalg as spla

    n, d = X.shape
    w = np.asarray(weights, dtype=X.dtype)
    if d <= DENSE_LIMIT:
        A = (X.T @ (w[:, None] * X)).astype(np.float64) / n
        vals, vecs = scipy.linalg.eigh(A, subset_by_index=[d - 1, d - 1])
        v = vecs[:, 0]
        return v / np.linalg.norm(v), float(vals[0])

    def mv(v: np.ndarray) -> np.ndarray:
        vx = np.asarray(v, dtype=X.dtype).ravel()
        return (X.T @ (w * (X @ vx))).astype(np.float64) / n

    op = spla.LinearOperator((d, d), matvec=mv, dtype=np.float64)
    vals, vecs = spla.eigsh(op, k=1, which="LA", v0=rng.standard_normal(d), tol=1e-7, maxiter=20 * d)
    v = vecs[:, 0]
    return v / np.linalg.norm(v), float(vals[0])


def spectral_overlaps(problem: Problem, delta: float, d: int, count: int,
                      seed: Any) -> np.ndarray:
    """``count`` samples of the finite-d overlap ``|⟨v̂, θ*⟩|`` of the spectral start at ``(δ, d)``:
    each from the estimator with :func:`optimal_preprocessing` on its own ``n = δd`` Gaussian samples
    (float32 data, as GD's), seeded by ``seed`` (a seed of :func:`numpy.random.default_rng`).

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> r = spectral_overlaps(Problem.build(target="z**2"), 4.0, 400, 2, seed=0)
    >>> r.shape, bool(np.all((0.9 < r) & (r <= 1)))  # ρ(4) = 0.962 for d → ∞ (closed form)
    ((2,), True)
    """
    check_spectral_problem(problem)
    n = int(round(delta * d))
    if n < 2:
        raise ValueError(f"delta * d must give at least 2 samples, got delta={delta:g}, d={d}")
    from dmftsolve._blas import blas_threads

    T = optimal_preprocessing(problem)
    rng = np.random.default_rng(seed)
    out = np.empty(count)
    with blas_threads(1):
        for j in range(count):
            out[j] = _one_overlap(problem, T, n, d, rng)
    return out


def _one_overlap(problem: Problem, T: Callable[[np.ndarray], np.ndarray], n: int, d: int,
                 rng: np.random.Generator) -> float:
    """One sample of the overlap: ``n`` Gaussian samples in ``d`` dimensions, their labels, the
    estimator's top eigenvector."""
    X = rng.standard_normal((n, d), dtype=np.float32)
    eps = rng.standard_normal(n) if problem.target.noisy else 0.0
    y = np.broadcast_to(np.asarray(problem.labels(X[:, :1].astype(float), eps), dtype=float), (n,))
    v, _ = spectral_vector(X, T(y), rng)
    return min(1.0, abs(float(v[0])))


def spectral_start(rho: float, q0: float) -> tuple[float, float]:
    """The warm start of a draw from overlap ``rho``: ``(M_0, Q_0) = (ρ √q0, q0 (1 − ρ²))``."""
    return rho * math.sqrt(q0), q0 * (1.0 - rho * rho)
