"""Gaussian expectations ``E[φ(G)]``, ``G ~ N(mean, cov)``.

Three methods, chosen by :func:`expect`:

``"quadrature"``
    Tensor Gauss–Hermite rule (probabilists' weight ``e^{−x²/2}``) in the
    range of ``cov``, with error control: the number of nodes per dimension
    is doubled until two successive rules agree to ``atol + rtol·|value|``;
    the error estimate is their difference. Exact for polynomials of degree
    ``< 2n`` in every coordinate, so very fast for smooth integrands in low
    dimension; slow (algebraic) for kinks and jumps.
``"qmc"``
    Scrambled Sobol points (:class:`scipy.stats.qmc.Sobol`) mapped through
    the normal quantile function; several independent scramblings give a
    standard error.
``"mc"``
    Plain Monte Carlo with its standard error.

``"auto"`` uses quadrature when the effective dimension (the rank of
``cov``) is at most 3, and also tries it up to rank 6 with at most 2**20
nodes (enough for polynomial integrands); above that, QMC. If the
quadrature does not reach the tolerance (a non-smooth integrand), it also
runs QMC and returns whichever estimate has the smaller error estimate.

Singular (positive semidefinite) covariances are handled through the
eigendecomposition ``cov = U Λ Uᵀ``: ``G = mean + U Λ^{1/2} g`` with ``g``
standard normal in the range of ``cov`` only, so the rule lives in
``rank(cov)`` dimensions.

Examples
--------
>>> import numpy as np
>>> from dmftsolve.gaussian import expect
>>> r = expect(lambda x: x[:, 0] ** 4, [0.0], [[2.0]])
>>> round(float(r.value), 12)        # E[G⁴] = 3σ⁴ = 12
12.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import ndtri, roots_hermitenorm
from scipy.stats import qmc

from dmftsolve.results import SolverError, Status
from dmftsolve.seeds import SeedLike
from dmftsolve.seeds import as_generator as _as_generator

__all__ = ["Expectation", "gauss_hermite_rule", "expect", "as_generator"]

#: numpy's ``hermegauss`` overflows somewhere between 300 and 400 nodes;
#: above this size the rule comes from scipy's asymptotic algorithm.
_HERMEGAUSS_MAX = 150
_METHODS = ("auto", "quadrature", "qmc", "mc")
#: ``"auto"`` tries quadrature up to this rank (above 3 with at most 2**20 nodes).
_AUTO_MAX_RANK = 6
#: Relative rounding error of a Gauss–Hermite sum, per unit of ``Σ w |f|``: 64 ulps (a sum of
#: up to 2**22 terms, pairwise in numpy, loses far fewer).
_ROUNDING = 64 * np.finfo(float).eps


@dataclass(frozen=True)
class Expectation:
    """A Gaussian expectation with its error estimate.

    Attributes
    ----------
    value : float or ndarray
        The estimate of ``E[φ(G)]`` (shape of one value of ``φ``).
    error : float or ndarray
        Same shape as ``value``: for quadrature the difference between the
        last two rules, for ``qmc``/``mc`` the standard error.
    method : str
        ``"quadrature"``, ``"qmc"`` or ``"mc"`` (the method actually used).
    n_points : int
        Number of integrand evaluations of the returned estimate.
    status : Status
        ``SUCCESS``, ``NOT_CONVERGED`` (quadrature ran out of nodes) or
        ``NONFINITE``.
    message : str
        Human-readable note on the status.
    """

    value: Any
    error: Any
    method: str
    n_points: int
    status: Status = Status.SUCCESS
    message: str = ""

    @property
    def ok(self) -> bool:
        """Whether :attr:`status` is ``SUCCESS``."""
        return self.status.ok


def as_generator(rng: SeedLike) -> np.random.Generator:
    """Return ``rng`` as a :class:`numpy.random.Generator` (see :func:`dmftsolve.seeds.as_generator`)."""
    return _as_generator(rng, parameter="rng")


def gauss_hermite_rule(dim: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor-product Gauss–Hermite rule for the standard normal ``N(0, I_dim)``.

    Parameters
    ----------
    dim : int
        Dimension, ``>= 1``.
    n : int
        Nodes per dimension, ``>= 1``.

    Returns
    -------
    nodes : ndarray, shape (n**dim, dim)
    weights : ndarray, shape (n**dim,)
        Positive weights summing to 1: ``Σ w_i f(x_i) ≈ E[f(g)]``,
        exact when ``f`` is a polynomial of degree ``< 2n`` in each coordinate.
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if n ** dim > 2**27:
        raise ValueError(f"n**dim = {n}**{dim} nodes is too many (limit 2**27)")
    if n <= _HERMEGAUSS_MAX:
        x, w = hermegauss(int(n))
    else:
        x, w = roots_hermitenorm(int(n))
    w = w / w.sum()
    if dim == 1:
        return x[:, None].copy(), w
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=-1)
    weights = np.ones(1)
    for _ in range(dim):
        weights = np.multiply.outer(weights, w).ravel()
    return nodes, weights


def _check_gaussian(mean: Any, cov: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``(mean, cov)``; return ``mean`` and the factor ``A`` (dim×rank) with ``AAᵀ = cov``."""
    mean = np.atleast_1d(np.asarray(mean, dtype=float))
    if mean.ndim != 1 or not np.all(np.isfinite(mean)):
        raise ValueError(f"mean must be a finite 1-d array, got {mean!r}")
    dim = mean.size
    cov = np.asarray(cov, dtype=float)
    if cov.ndim == 0 and dim == 1:
        cov = cov.reshape(1, 1)
    if cov.shape != (dim, dim):
        raise ValueError(f"cov must have shape ({dim}, {dim}) to match mean, got {cov.shape}")
    if not np.all(np.isfinite(cov)):
        raise ValueError(f"cov must be finite, got {cov!r}")
    scale = max(1.0, float(np.abs(cov).max()))
    if not np.allclose(cov, cov.T, rtol=1e-12, atol=1e-12 * scale):
        raise ValueError(f"cov must be symmetric, got {cov!r}")
    lam, U = np.linalg.eigh((cov + cov.T) / 2)
    tol = 1e-12 * dim * max(float(lam.max(initial=0.0)), 1e-300)
    if lam.min(initial=0.0) < -max(tol, 1e-12 * scale):
        raise ValueError(f"cov must be positive semidefinite, smallest eigenvalue {lam.min():.3g}")
    keep = lam > tol
    return mean, U[:, keep] * np.sqrt(lam[keep]), cov


def _evaluate(func: Callable[[np.ndarray], Any], points: np.ndarray) -> np.ndarray:
    vals = np.asarray(func(points), dtype=float)
    if vals.ndim == 0 or vals.shape[0] != points.shape[0]:
        raise ValueError(
            f"func must map points of shape (N, dim)=({points.shape[0]}, {points.shape[1]}) "
            f"to values of shape (N, ...), got shape {vals.shape}"
        )
    return vals


def _finish(result: Expectation, throw: bool) -> Expectation:
    if np.ndim(result.value) == 0:  # scalars as plain floats
        result = Expectation(float(result.value), float(result.error), result.method,
                             result.n_points, result.status, result.message)
    if not np.all(np.isfinite(result.value)) and result.status is Status.SUCCESS:
        result = Expectation(result.value, result.error, result.method, result.n_points,
                             Status.NONFINITE, "the integrand produced non-finite values")
    if throw and not result.ok:
        raise SolverError(f"expect {result.status.value}: {result.message}", result)
    return result


def _quadrature(func, mean, A, rtol, atol, max_nodes, max_points) -> Expectation:
    dim, rank = A.shape
    sizes = []
    n = 4
    while n <= max_nodes and n ** rank <= max_points:
        sizes.append(n)
        n *= 2
    if sizes and sizes[-1] < max_nodes and max_nodes ** rank <= max_points:
        sizes.append(max_nodes)
    if len(sizes) < 2:
        raise ValueError(
            f"max_nodes={max_nodes} (with max_points={max_points}) leaves fewer than two rules "
            f"in dimension {rank}; increase max_nodes"
        )
    prev = None
    for n in sizes:
        g, w = gauss_hermite_rule(rank, n)
        vals = _evaluate(func, mean + g @ A.T)
        value = np.tensordot(w, vals, axes=(0, 0))
        with np.errstate(over="ignore", invalid="ignore"):
            # rounding floor of the sum: where the terms cancel, two rules can agree to the last
            # digit and still be wrong in every digit; the error never claims less than this
            floor = _ROUNDING * np.tensordot(w, np.abs(vals), axes=(0, 0))
        if prev is not None:
            err = np.maximum(np.abs(value - prev), floor)
            if not np.all(np.isfinite(value)):
                return Expectation(value, err, "quadrature", n ** rank, Status.NONFINITE,
                                   "the integrand produced non-finite values")
            if np.all(err <= atol + rtol * np.abs(value)):
                return Expectation(value, err, "quadrature", n ** rank)
            if np.any(floor > atol + rtol * np.abs(value)):
                return Expectation(
                    value, err, "quadrature", n ** rank, Status.NOT_CONVERGED,
                    "precision exhausted: the integrand's terms cancel to "
                    f"{float(np.max(np.abs(value))):.3g} "
                    f"from a sum of magnitudes {float(np.max(floor)) / _ROUNDING:.3g}, below what double "
                    "precision resolves (error floor "
                    f"{float(np.max(floor)):.3g} > atol + rtol·|value|); subtract the large part "
                    "analytically or rescale")
        prev = value
    return Expectation(
        value, err, "quadrature", n ** rank, Status.NOT_CONVERGED,
        f"Gauss–Hermite rules with {sizes[-2]} and {sizes[-1]} nodes per dimension differ by "
        f"{float(np.max(err)):.3g} (> atol + rtol·|value|); the integrand is probably not smooth: "
        "use method='qmc' or raise max_nodes",
    )


def _qmc(func, mean, A, n_samples, n_scrambles, rng) -> Expectation:
    dim, rank = A.shape
    m = max(int(np.ceil(np.log2(max(n_samples // n_scrambles, 2)))), 1)
    estimates = []
    for _ in range(n_scrambles):
        u = qmc.Sobol(d=rank, scramble=True, rng=rng).random_base2(m)
        u = np.clip(u, 1e-16, 1 - 1e-16)
        vals = _evaluate(func, mean + ndtri(u) @ A.T)
        estimates.append(vals.mean(axis=0))
    est = np.stack(estimates)
    with np.errstate(invalid="ignore", over="ignore"):
        value = est.mean(axis=0)
        err = est.std(axis=0, ddof=1) / np.sqrt(n_scrambles)
    return Expectation(value, err, "qmc", n_scrambles * 2**m)


def _mc(func, mean, A, n_samples, rng) -> Expectation:
    dim, rank = A.shape
    g = rng.standard_normal((n_samples, rank))
    vals = _evaluate(func, mean + g @ A.T)
    with np.errstate(invalid="ignore", over="ignore"):
        value = vals.mean(axis=0)
        err = vals.std(axis=0, ddof=1) / np.sqrt(n_samples)
    return Expectation(value, err, "mc", n_samples)


def expect(
    func: Callable[[np.ndarray], Any],
    mean: Any,
    cov: Any,
    *,
    method: str = "auto",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_nodes: int = 256,
    max_points: int = 2**22,
    n_samples: int = 2**16,
    n_scrambles: int = 16,
    seed: SeedLike = None,
    throw: bool = True,
) -> Expectation:
    """Compute ``E[func(G)]`` for ``G ~ N(mean, cov)``.

    Parameters
    ----------
    func : callable
        Maps points of shape ``(N, dim)`` to values of shape ``(N, ...)``
        (scalar or vector/matrix valued).
    mean : array_like, shape (dim,)
    cov : array_like, shape (dim, dim)
        Symmetric positive semidefinite; singular covariances are allowed.
    method : {"auto", "quadrature", "qmc", "mc"}
        See the module docstring. ``"auto"``: quadrature if ``rank(cov) <= 3``
        (tried up to rank 6 with at most 2**20 nodes), falling back to QMC if
        it does not converge and QMC does better; else ``"qmc"``.
    rtol, atol : float
        Quadrature stops when two successive rules agree to
        ``atol + rtol·|value|`` (elementwise).
    max_nodes : int
        Largest number of Gauss–Hermite nodes per dimension (rules double from 4).
    max_points : int
        Largest total number of quadrature nodes ``n**rank``.
    n_samples : int
        Total number of points for ``qmc`` (split over ``n_scrambles`` scramblings,
        each rounded up to a power of two) and ``mc``.
    n_scrambles : int
        Independent Sobol scramblings for the ``qmc`` standard error (>= 2).
    seed : int, SeedSequence, Generator or None
        Source of randomness for ``qmc`` and ``mc`` (``dmftsolve.seeds``).
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` if the status is not
        ``SUCCESS`` (default); otherwise return the result with its status.

    Returns
    -------
    Expectation

    Raises
    ------
    ValueError
        On invalid inputs.
    SolverError
        If ``throw`` and quadrature did not converge or values are non-finite.

    Examples
    --------
    ``E[z²] = 2`` for ``z ~ N(0, 2)``:

    >>> from dmftsolve import expect
    >>> r = expect(lambda z: z[..., 0] ** 2, mean=[0.0], cov=[[2.0]])
    >>> abs(r.value - 2.0) < 1e-12, r.method
    (True, 'quadrature')
    """
    if not callable(func):
        raise ValueError(f"func must be callable, got {func!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    for name, v in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(v, (int, float, np.floating)) and np.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    for name, v, lo in (("max_nodes", max_nodes, 2), ("max_points", max_points, 2),
                        ("n_samples", n_samples, 2), ("n_scrambles", n_scrambles, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    mean, A, _ = _check_gaussian(mean, cov)
    rng = as_generator(seed)
    rank = A.shape[1]
    if rank == 0:  # degenerate: G = mean almost surely
        vals = _evaluate(func, mean[None, :])
        return _finish(Expectation(vals[0], np.zeros_like(vals[0]), "quadrature", 1), throw)
    if method == "auto" and rank <= _AUTO_MAX_RANK:
        cap = int(max_points) if rank <= 3 else min(int(max_points), 2**20)
        try:
            res = _quadrature(func, mean, A, rtol, atol, int(max_nodes), cap)
        except ValueError:  # not even two rules fit: QMC only
            return _finish(_qmc(func, mean, A, int(n_samples), int(n_scrambles), rng), throw)
        if res.status is Status.NOT_CONVERGED:  # not smooth: QMC if it does better
            alt = _qmc(func, mean, A, int(n_samples), int(n_scrambles), rng)
            if np.max(alt.error) < np.max(res.error):
                res = Expectation(alt.value, alt.error, alt.method, alt.n_points, alt.status,
                                  "quadrature did not converge; QMC estimate returned")
        return _finish(res, throw)
    if method == "auto":
        method = "qmc"
    if method == "quadrature":
        res = _quadrature(func, mean, A, rtol, atol, int(max_nodes), int(max_points))
    elif method == "qmc":
        res = _qmc(func, mean, A, int(n_samples), int(n_scrambles), rng)
    else:
        res = _mc(func, mean, A, int(n_samples), rng)
    return _finish(res, throw)
