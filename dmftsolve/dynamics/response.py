"""The interface between the DMFT driver and its response estimators.

At step ``t`` the driver (:func:`dmftsolve.dynamics.dmft.solve_dmft`) has
drawn the innovations ``ζ^t``, formed the fields ``V^t`` and the gradients
``g^t`` of every path, and accumulated per-batch moments. A response
estimator turns them into row ``t`` of ``Γ`` (``Γ(t, s)`` for ``s ≤ t``),
once from all paths and once per batch (for the batch-means errors).
Two estimators implement :class:`ResponseEstimator`:

* :class:`dmftsolve.dynamics.stein.SteinResponse` — Gaussian integration by
  parts on the innovations (default; needs no second derivatives);
* :class:`dmftsolve.dynamics.pathwise.PathwiseResponse` — forward
  differentiation of every path (needs ``D^t`` and ``O(N T² m²)`` memory).

The mathematics of both is in the module docstring of
:mod:`dmftsolve.dynamics.dmft`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["StepMoments", "ResponseEstimator"]


@dataclass(frozen=True)
class StepMoments:
    """What the driver knows at step ``t`` that a response estimator may use.

    ``B`` batches of ``nb`` paths each (``N = B·nb``); ``t1m = (t+1)·m``. Without batch
    errors (``errors="none"``) the moments are pooled into one batch (``B = 1``).

    Attributes
    ----------
    t, m : int
        Step and network width.
    gmean : ndarray, shape (B, m)
        Batch means of the gradients ``g^t``.
    gz : ndarray, shape (B, m, t1m)
        Batch means ``E_b[g^t ζ^{uᵀ}]`` for ``u ≤ t`` (blocks of ``m`` columns).
    zz : ndarray, shape (B, m, t1m)
        Batch means ``E_b[ζ^t ζ^{uᵀ}]``.
    zmean : ndarray, shape (B, t1m)
        Batch means of the innovations ``ζ^u``, ``u ≤ t``.
    null : ndarray of bool, shape (m,)
        Zero-variance innovations at step ``t``.
    null_mask : ndarray of bool, shape (t1m,)
        Zero-variance innovations at every step ``≤ t``.
    L : ndarray, shape (t1m, t1m)
        Block-lower Cholesky factor of ``Q(≤t, ≤t)``, with 1 on the diagonal
        at zero-variance pivots.
    L_nonnull : ndarray, shape (n, n)
        ``L`` on the ``n`` innovations with non-zero variance (rows and columns where
        ``null_mask`` is False, in order): zero below the diagonal in a null column, ``L``
        needs no more for a triangular solve on them.
    D : ndarray, shape (N, m, m), or None
        ``∇²_V ℓ(y, V^t)`` per path (only for estimators with ``needs_D``).
    R_row : ndarray, shape (m, t·m)
        Blocks ``R(t, u+1)`` for ``u < t``.
    eta_over_delta : float
        ``η/δ``.
    controls : tuple of ndarray, or None
        ``DMFTSettings.stein_controls``: ``(gw, zw)``, the pooled moments ``E[g^t f_k ζ^u]``
        (shape ``(K, m, n)``) and, for the ``n_t`` non-null innovations of step ``t``,
        ``E[w_a w_b ζ^t ζ^u]`` (shape ``(P, n_t, n)``, the pairs of
        :func:`dmftsolve.dynamics.stein.control_pairs`), over the ``n`` non-null innovations
        ``u ≤ t`` in order.
    halves : tuple of ndarray, or None
        ``DMFTSettings.stein_crossfit``: for each half of the distinct columns, the moments
        ``[E_h(g^t ζ^{uᵀ}); E_h(ζ^t ζ^{uᵀ})]`` (shape ``(2m, n)``) over the ``n`` non-null
        innovations ``u ≤ t`` in order (the rows of a null innovation of step ``t`` are zero).
    """

    t: int
    m: int
    gmean: np.ndarray
    gz: np.ndarray
    zz: np.ndarray
    zmean: np.ndarray
    null: np.ndarray
    null_mask: np.ndarray
    L: np.ndarray
    D: np.ndarray | None
    R_row: np.ndarray
    eta_over_delta: float
    L_nonnull: np.ndarray | None = None
    controls: tuple[np.ndarray, np.ndarray] | None = None
    halves: tuple[np.ndarray, ...] | None = None


class ResponseEstimator(Protocol):
    """Row ``t`` of ``Γ`` from the step's moments; called once per step, in order."""

    #: whether the driver must evaluate ``D^t`` on every path at every step
    needs_D: bool

    def row(self, step: StepMoments) -> tuple[np.ndarray, np.ndarray]:
        """``(Γ(t, ≤t) from all paths (m, t1m), per-batch estimates (B, m, t1m))``."""
        ...

    def diagnostics(self) -> dict[str, np.ndarray]:
        """Estimator-specific per-step diagnostics for :attr:`DMFTResult.diagnostics`."""
        ...
