"""The Monte Carlo paths of the DMFT's sample process (``docs/theory.md`` §2.4, §2.6).

``N`` paths in ``B`` batches of ``nb``. Each batch holds ``n_base`` *distinct* columns of random
inputs, repeated over its copies: an antithetic pair (``ζ → −ζ``, same ``V*`` and ``ε``) and, with
``reflect``, the whole batch again with the reflected target directions ``V*_j → −V*_j`` (same
innovations and noise). :class:`PathSet` draws the labels and the innovations in that layout,
stores the non-null innovations of every step on the distinct columns only, and forms the fields'
Gaussian part and the moments the response estimators need.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmftsolve.dynamics.innovations import InnovationBasis
from dmftsolve.problem import Problem

__all__ = ["PathSet"]


class PathSet:
    """The paths of one solve: labels, layout, stored innovations.

    Parameters
    ----------
    problem : Problem
        Supplies ``k``, ``m`` and the labels.
    n_paths, n_batches : int
        ``N`` (a multiple of the batch unit) and ``B``.
    antithetic : bool
        Antithetic pairs inside each batch.
    reflect : tuple of int
        Target directions reflected in the second half of each batch.
    steps : int
        ``T`` (sizes the innovation store).
    dtype : numpy.dtype
        Storage of the innovations.
    rng : numpy.random.Generator
        The paths' stream: ``V*``, then ``ε`` (noisy labels), then each step's innovations.
    """

    def __init__(self, problem: Problem, *, n_paths: int, n_batches: int, antithetic: bool,
                 reflect: tuple[int, ...], steps: int, dtype: Any, rng: np.random.Generator) -> None:
        k, m = problem.k, problem.m
        self.k, self.m = k, m
        self.N, self.B = n_paths, n_batches
        self.nb = n_paths // n_batches
        self.antithetic, self.reflect = antithetic, tuple(reflect)
        self.n_base = self.nb // ((2 if antithetic else 1) * (2 if reflect else 1))
        self.rng = rng
        self.Vstar = self._shared(self.rng.standard_normal((k, self.B, self.n_base)), self.reflect)  # (k, N)
        noise = self._shared(self.rng.standard_normal((1, self.B, self.n_base)))[0] \
            if problem.target.noisy else np.zeros(self.N)
        self.y = np.broadcast_to(np.asarray(problem.labels(self.Vstar.T, noise), dtype=float),
                                 (self.N,)).copy()
        self.Vstar_b = self.Vstar.reshape(k, self.B, self.nb).transpose(1, 0, 2)  # (B, k, nb)
        # The innovations repeat over each antithetic / reflected copy with a fixed sign, so only
        # the B·n_base distinct columns are stored; ``rep_sign`` is the sign of each copy.
        sign = np.array([1.0, -1.0]) if antithetic else np.array([1.0])
        self.rep_sign = np.concatenate([sign, sign]) if reflect else sign
        self.Z = np.zeros(((steps + 1) * m, self.B * self.n_base), dtype=np.dtype(dtype))
        self.zmean = np.zeros((self.B, (steps + 1) * m))
        self.mean_weights = np.full(self.N, 1.0 / self.N)  # E over the paths as a matrix-vector product

    # ------------------------------------------------------------------ layout
    def _shared(self, h: np.ndarray, flip: tuple[int, ...] = ()) -> np.ndarray:
        """Base normals ``h`` (rows, ``B``, ``n_base``) → (rows, N): both members of an antithetic
        pair get the same value, and rows ``flip`` change sign in the reflected copies."""
        rows = h.shape[0]
        if self.antithetic:
            h = np.concatenate([h, h], axis=2)
        if self.reflect:
            sign = np.ones((rows, 1, 1))
            sign[list(flip)] = -1.0
            h = np.concatenate([h, sign * h], axis=2)
        return h.reshape(rows, self.N)

    def expand(self, u: np.ndarray) -> np.ndarray:
        """(rows, ``B·n_base``) → (rows, N): each batch's columns repeated over its copies, times
        the copy's sign."""
        rows = u.shape[0]
        full = u.reshape(rows, self.B, 1, self.n_base) * self.rep_sign[:, None].astype(u.dtype)
        return full.reshape(rows, self.N)

    def contract(self, g: np.ndarray) -> np.ndarray:
        """The adjoint of :meth:`expand`: (rows, N) → (rows, ``B·n_base``), the copies of each
        column summed with their signs (so ``g·expand(ζ) = contract(g)·ζ``)."""
        rows = g.shape[0]
        c = self.rep_sign.size
        return np.einsum("rbcn,c->rbn", g.reshape(rows, self.B, c, self.n_base),
                         self.rep_sign).reshape(rows, self.B * self.n_base)

    # ------------------------------------------------------------------ innovations
    def draw(self, t: int, null: np.ndarray, basis: InnovationBasis) -> tuple[np.ndarray, int, int]:
        """Step ``t``'s innovations ``ζ^t`` on the distinct columns, ``(m, B·n_base)``, zero at the
        ``null`` ones; the non-null rows are stored at :attr:`Z` rows ``n0:n1`` (the positions
        :meth:`InnovationBasis.extend` gave them). Returns ``(ζ^t, n0, n1)``."""
        z = self.rng.standard_normal((self.m, self.B * self.n_base))
        z[null] = 0.0
        keep = np.flatnonzero(~null)
        n1 = basis.n
        n0 = n1 - keep.size
        self.Z[n0:n1] = z[keep]
        return z, n0, n1

    def gaussian_part(self, t: int, basis: InnovationBasis) -> np.ndarray:
        """``Ξ^t = Σ_u L(t,u) ζ^u`` over the non-null innovations, on every path, ``(m, N)``."""
        n = basis.n
        return self.expand(basis.row(t).astype(self.Z.dtype) @ self.Z[:n])

    def innovation_moments(self, t: int, z: np.ndarray, g: np.ndarray, basis: InnovationBasis,
                           pooled: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per-batch (or, ``pooled``, one pooled) moments ``[E_b(g^t ζ^{uᵀ}); E_b(ζ^t ζ^{uᵀ})]`` for
        ``u ≤ t``, shape ``(B or 1, 2m, (t+1)m)`` (zero at null innovations), and the batch means of
        the innovations, ``(B or 1, (t+1)m)``."""
        m, B, nb, nz = self.m, self.B, self.nb, self.n_base
        t1m = (t + 1) * m
        dt = self.Z.dtype
        # E[g^t ζ^u] over the paths is contract(g)·ζ^u over the distinct columns, and E[ζ^t ζ^u]
        # the mean over the distinct columns (the copies' signs square to 1)
        G = self.contract(g)
        gzz = np.concatenate([G / nb, z / nz], axis=0).astype(dt)  # (2m, B·nz)
        self.zmean[:, t * m:t1m] = z.reshape(m, B, nz).mean(axis=-1).T * self.rep_sign.mean()
        rows, n = basis.nonnull, basis.n
        if pooled:  # one "batch": the pooled moments (the mean of equal batches)
            mom = np.zeros((1, 2 * m, t1m), dtype=dt)
            mom[0][:, rows] = (self.Z[:n] @ gzz.T).T / B  # (2m, n)
            zmean = self.zmean[:, :t1m].mean(axis=0)[None]
        else:
            Zb = self.Z[:n].reshape(n, B, nz).transpose(1, 2, 0)  # (B, nz, n)
            mom = np.zeros((B, 2 * m, t1m), dtype=dt)
            mom[:, :, rows] = gzz.reshape(2 * m, B, nz).transpose(1, 0, 2) @ Zb  # (B, 2m, n)
            zmean = self.zmean[:, :t1m]
        return mom.astype(float, copy=False), zmean

    def gradient_means(self, g: np.ndarray, pooled: bool) -> np.ndarray:
        """Batch means of ``g^t``, ``(B, m)``, or the pooled mean ``(1, m)``."""
        if pooled:
            # as a matrix-vector product: g is the transpose of an (N, m) array, and numpy's
            # reduction over it took 0.2 ms at m = 2
            return (g @ self.mean_weights)[None]
        return self.batches(g).mean(axis=2)

    def batches(self, g: np.ndarray) -> np.ndarray:
        """(m, N) → (B, m, nb)."""
        return g.reshape(self.m, self.B, self.nb).transpose(1, 0, 2)

    def target_moments(self, g: np.ndarray) -> np.ndarray:
        """``E_b[V* g^{tᵀ}]`` per batch, ``(B, k, m)``."""
        return (self.Vstar_b @ self.batches(g).transpose(0, 2, 1)) / self.nb
