"""What "GD learned the hidden directions" means, defined once.

A run (GD, or one DMFT draw of :mod:`dmftsolve.finite_d`) *succeeds*
when **every hard direction** ``θ*_j`` of the target has a projection onto ``span(W)`` above
``c`` (default 1/2)::

    ‖P_W θ*_j‖ > c   for every hard j,     P_W = W (WᵀW)⁺ Wᵀ.

With ``M = Θ*ᵀW`` (``k×m``) and ``G = WᵀW`` (``m×m``; in the DMFT ``G = MᵀM + Q(t,t)``),
``Θ*ᵀ P_W Θ* = M G⁺ Mᵀ``, so ``‖P_W θ*_j‖² = (M G⁺ Mᵀ)_jj``. For one neuron and one
direction this is the cosine ``|M|/√(M² + Q)`` used everywhere before. The simulator
(:mod:`dmftsolve.simulation.simulator`), the DMFT (:func:`~dmftsolve.dynamics.dmft.solve_dmft`
with a stopping rule) and the finite-d transition all call :func:`direction_projections`.

Examples
--------
>>> import numpy as np
>>> M = np.array([[[0.6], [0.0]]])         # k = 2 directions, m = 1 neuron
>>> G = np.array([[[0.36 + 0.64]]])        # W = 0.6 θ1 + 0.8 u, u ⟂ Θ*
>>> direction_projections(M, G).round(6)
array([[0.6, 0. ]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["direction_projections", "success_statistic", "success_directions", "largest_cosine",
           "largest_cosines", "projections_and_largest_cosine"]


def direction_projections(M: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``‖P_W θ*_j‖`` for every direction ``j``, for a stack of networks.

    Parameters
    ----------
    M : ndarray, shape (B, k, m) or (k, m)
        Overlaps ``Θ*ᵀW``.
    G : ndarray, shape (B, m, m) or (m, m)
        Gram ``WᵀW`` (positive semidefinite).

    Returns
    -------
    ndarray, shape (B, k) or (k,)
        Projections in ``[0, 1]``; NaN for a stack entry with a non-finite ``M`` or ``G``
        (a diverged run). The pseudo-inverse drops eigenvalues of ``G`` below ``1e-12``
        times its largest (merged neurons).
    """
    M = np.asarray(M, dtype=float)
    G = np.asarray(G, dtype=float)
    single = M.ndim == 2
    if single:
        M, G = M[None], G[None]
    if M.ndim != 3 or G.shape != (M.shape[0], M.shape[2], M.shape[2]):
        raise ValueError(f"M must be (B, k, m) and G (B, m, m), got shapes {M.shape} and {G.shape}")
    out = np.full(M.shape[:2], np.nan)
    finite = np.isfinite(M).all(axis=(1, 2)) & np.isfinite(G).all(axis=(1, 2))
    if finite.any() and M.shape[2] == 1:  # one neuron: ‖P_w θ*_j‖ = |M_j| / ‖w‖, no eigh
        Mf, Gs = M[finite][:, :, 0], G[finite][:, 0, 0]
        keep = Gs > 1e-12 * np.maximum(Gs, 1e-300)
        inv = np.where(keep, 1.0 / np.where(keep, Gs, 1.0), 0.0)
        out[finite] = np.sqrt(np.clip(Mf * inv[:, None] * Mf, 0.0, 1.0))
    elif finite.any():
        Mf, Gf = M[finite], G[finite]
        w, U = np.linalg.eigh(0.5 * (Gf + np.swapaxes(Gf, 1, 2)))
        scale = np.maximum(w.max(axis=1, initial=0.0), 1e-300)
        keep = w > 1e-12 * scale[:, None]
        inv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
        MU = Mf @ U  # (B, k, m)
        sq = np.einsum("bkm,bm,bkm->bk", MU, inv, MU)
        out[finite] = np.sqrt(np.clip(sq, 0.0, 1.0))
    return out[0] if single else out


def success_statistic(M: np.ndarray, G: np.ndarray, directions: Sequence[int]) -> np.ndarray:
    """The smallest projection ``min_j ‖P_W θ*_j‖`` over ``directions`` (the hard ones).

    A run succeeds when this exceeds the success cosine (1/2). ``M``, ``G`` as in
    :func:`direction_projections`; returns shape ``(B,)`` (or a float array of shape ``()``
    for a single network). ``directions`` must be non-empty.

    Examples
    --------
    >>> import numpy as np
    >>> float(success_statistic(np.array([[0.6], [0.9]]), np.array([[1.17]]), [0, 1]).round(4))
    0.5547
    """
    idx = [int(j) for j in directions]
    if not idx:
        raise ValueError("directions must name at least one target direction, got []")
    P = direction_projections(M, G)
    return P[..., idx].min(axis=-1)


def success_directions(problem: Any) -> tuple[int, ...]:
    """The directions a run must learn to succeed: the target's hard directions
    (:func:`~dmftsolve.thresholds.directions.split_directions`) when they are coordinate
    directions and not empty; otherwise every direction ``0 … k−1``.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> success_directions(Problem.build(target="z1 + z2**2 - 1"))
    (1,)
    >>> success_directions(Problem.build(target="z1 + z2"))
    (0, 1)
    """
    from dmftsolve.thresholds.directions import split_directions

    k = int(problem.k)
    if k == 1:
        return (0,)
    hard = split_directions(problem).hard_indices
    return tuple(int(j) for j in hard) if hard else tuple(range(k))


def largest_cosines(M: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """:func:`largest_cosine` for a stack: ``M`` (B, k, m), ``Q`` (B, m, m) → (B,).

    A stack entry with a non-finite ``M``, ``Q`` or Gram (a diverged run) gives NaN
    instead of an error from the linear algebra.
    """
    M = np.asarray(M, dtype=float)
    Q = np.asarray(Q, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        G = np.swapaxes(M, 1, 2) @ M + Q
    finite = np.isfinite(G).all(axis=(1, 2)) & np.isfinite(M).all(axis=(1, 2))
    if not finite.all():
        out = np.full(M.shape[0], np.nan)
        if finite.any():
            out[finite] = largest_cosines(M[finite], Q[finite])
        return out
    if M.shape[2] == 1:  # one neuron: the cosine ‖Θ*ᵀw‖ / ‖w‖, no eigh or svd
        g = G[:, 0, 0]
        keep = g > 1e-12 * np.maximum(g, 1e-300)
        inv = np.where(keep, 1.0 / np.sqrt(np.where(keep, g, 1.0)), 0.0)
        s = np.sqrt((M[:, :, 0] ** 2).sum(axis=1)) * inv
        return np.minimum(1.0, s)
    G = (G + np.swapaxes(G, 1, 2)) / 2
    w, U = np.linalg.eigh(G)
    scale = np.maximum(w.max(axis=1, initial=0.0), 1e-300)
    keep = w > 1e-12 * scale[:, None]
    inv = np.where(keep, 1.0 / np.sqrt(np.where(keep, w, 1.0)), 0.0)
    Gih = (U * inv[:, None, :]) @ np.swapaxes(U, 1, 2)
    s = np.linalg.svd(M @ Gih, compute_uv=False).max(axis=1, initial=0.0)
    return np.minimum(1.0, s)


def largest_cosine(M: np.ndarray, Q: np.ndarray) -> float:
    """Largest principal cosine between ``span(W)`` and ``span(Θ*)``.

    ``M = Θ*ᵀW`` (``k×m``), ``Q`` the Gram of the orthogonal part (``m×m``).
    With ``G = WᵀW = MᵀM + Q``, an orthonormal basis of ``span(W)`` is
    ``W G^{-1/2}``, so the cosines are the singular values of ``M G^{-1/2}``
    (pseudo-inverse on the null space; 0 when ``W = 0``). For ``m = k = 1``
    this is ``|M|/√(M² + Q)``.
    """
    return float(largest_cosines(np.atleast_2d(M)[None], np.atleast_2d(Q)[None])[0])


def projections_and_largest_cosine(M: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, float]:
    """:func:`direction_projections` and :func:`largest_cosine` of one network from one
    eigendecomposition of its Gram ``G = MᵀM + Q`` (what a DMFT step needs of both).

    Parameters
    ----------
    M : ndarray, shape (k, m)
        Overlaps ``Θ*ᵀW``.
    Q : ndarray, shape (m, m)
        Gram of the orthogonal part.

    Returns
    -------
    projections : ndarray, shape (k,)
        ``‖P_W θ*_j‖``, NaN if ``M`` or ``G`` is not finite.
    cosine : float
        The largest principal cosine, NaN likewise.

    Examples
    --------
    >>> import numpy as np
    >>> p, c = projections_and_largest_cosine(np.array([[0.6, 0.0]]), np.diag([0.64, 1.0]))
    >>> p.round(6), round(c, 6)
    (array([0.6]), 0.6)
    """
    M = np.asarray(M, dtype=float)
    Q = np.asarray(Q, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        G = M.T @ M + Q
    if not (np.isfinite(G).all() and np.isfinite(M).all()):
        return np.full(M.shape[0], np.nan), math.nan
    w, U = np.linalg.eigh(0.5 * (G + G.T))
    keep = w > 1e-12 * max(float(w.max(initial=0.0)), 1e-300)
    MU = (M @ U)[:, keep]
    wk = w[keep]
    proj = np.sqrt(np.clip((MU**2 / wk).sum(axis=1), 0.0, 1.0))
    if not MU.size:
        return proj, 0.0
    s = np.linalg.svd(MU / np.sqrt(wk), compute_uv=False)
    return proj, float(min(1.0, s.max()))

