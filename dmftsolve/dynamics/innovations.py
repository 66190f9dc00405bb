"""The innovations of the Gaussian fields: a growing Cholesky factor of ``Q`` (``docs/theory.md`` §2.4).

The Gaussian part of the sample process is ``Ξ^t = Σ_{u≤t} L(t,u) ζ^u`` with standard normal
innovations ``ζ^u`` and ``L`` the block-lower Cholesky factor of ``Q``, extended by one block row per
step. A diagonal pivot below ``null_rtol · Q(t,t)_jj`` is a *zero-variance* (null) innovation: its
column of ``L`` is zero and the paths never store its ``ζ``. :class:`InnovationBasis` holds the factor
and the list of non-null innovations; it is deterministic linear algebra on ``Q`` and needs no paths.
"""

from __future__ import annotations

import math

import numpy as np

from dmftsolve._lapack import solve_lower

__all__ = ["InnovationBasis", "psd_cholesky"]


def psd_cholesky(S: np.ndarray, ref: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower factor ``L`` with ``L Lᵀ = S`` for a positive semidefinite ``S``.

    Parameters
    ----------
    S : numpy.ndarray
        Symmetric ``(m, m)`` matrix.
    ref : numpy.ndarray
        ``(m, m)`` matrix whose diagonal sets the scale of the pivots (``Q(t,t)``).
    rtol : float
        A pivot ``<= rtol · ref_jj`` (or ``<= 0``) is null: its column of ``L`` is zero.

    Returns
    -------
    L, null : numpy.ndarray
        The factor and the boolean mask of null pivots.

    Examples
    --------
    >>> L, null = psd_cholesky(np.array([[4.0, 2.0], [2.0, 1.0]]), np.eye(2), 1e-9)
    >>> L.tolist(), null.tolist()
    ([[2.0, 0.0], [1.0, 0.0]], [False, True])
    """
    m = S.shape[0]
    L = np.zeros_like(S)
    null = np.zeros(m, dtype=bool)
    for j in range(m):
        piv = S[j, j] - L[j, :j] @ L[j, :j]
        if piv <= rtol * max(ref[j, j], 0.0) or piv <= 0.0:
            null[j] = True
            continue
        L[j, j] = math.sqrt(piv)
        L[j + 1:, j] = (S[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L, null


class InnovationBasis:
    """The block-lower Cholesky factor ``L̃`` of ``Q(≤t, ≤t)``, grown one block row a step.

    ``L̃`` is ``L`` with 1 on the diagonal at null pivots. :attr:`rows` lists the non-null
    innovations (indices into the ``(T+1)m`` innovation coordinates) in the order the paths store
    their ``ζ``; :attr:`Lc` is ``L̃`` restricted to them, which is all a triangular solve on them
    needs (``L̃`` is zero below the diagonal in a null column).

    Parameters
    ----------
    steps, m : int
        ``T`` and the width.
    rtol : float
        The null pivot tolerance (``DMFTSettings.null_rtol``).
    """

    def __init__(self, steps: int, m: int, rtol: float) -> None:
        size = (steps + 1) * m
        self.m, self.rtol = m, float(rtol)
        self.L = np.zeros((size, size))
        self.Lc = np.zeros((size, size))
        self.rows = np.zeros(size, dtype=np.intp)
        self.n = 0
        self.null_mask = np.zeros(size, dtype=bool)
        self.min_pivot = np.full(steps + 1, np.nan)
        self.n_null = np.zeros(steps + 1, dtype=int)

    @property
    def nonnull(self) -> np.ndarray:
        """The non-null innovations so far, in storage order."""
        return self.rows[: self.n]

    def extend(self, Q: np.ndarray, t: int) -> np.ndarray:
        """Add block row ``t`` from ``Q`` (the kernel store, rows and columns ``≤ (t+1)m`` filled);
        returns the null mask of step ``t``'s ``m`` innovations and appends its non-null ones to
        :attr:`rows`."""
        m = self.m
        blk, tm = slice(t * m, (t + 1) * m), t * m
        Qtt = Q[blk, blk]
        k = self.n
        sol = np.zeros((m, 0))
        if t > 0:
            nn = self.rows[:k]
            Lrow = np.zeros((m, tm))
            if k:
                sol = solve_lower(self.Lc[:k, :k], Q[blk, nn].T).T
                Lrow[:, nn] = sol
            self.L[blk, :tm] = Lrow
            S = Qtt - Lrow @ Lrow.T
        else:
            S = Qtt.copy()
        Ltt, null = psd_cholesky((S + S.T) / 2, Qtt, self.rtol)
        keep = np.flatnonzero(~null)
        self.min_pivot[t] = float(np.diag(Ltt)[keep].min()) ** 2 if keep.size else 0.0
        self.n_null[t] = int(null.sum())
        if keep.size:
            k1 = k + keep.size
            self.Lc[k:k1, :k] = sol[keep]
            self.Lc[k:k1, k:k1] = Ltt[np.ix_(keep, keep)]
            self.rows[k:k1] = tm + keep
            self.n = k1
        Ltt[null, null] = 1.0
        self.L[blk, blk] = Ltt
        self.null_mask[blk] = null
        return null

    def row(self, t: int) -> np.ndarray:
        """``L̃(t, ·)`` on the non-null innovations, shape ``(m, n)``."""
        return self.L[t * self.m:(t + 1) * self.m][:, self.nonnull]
