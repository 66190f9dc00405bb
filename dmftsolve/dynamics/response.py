"""The interface between the DMFT driver and its response estimators.

At step ``t`` the driver (:func:`dmftsolve.dynamics.dmft.solve_dmft`) has
drawn the innovations ``ζ^t``, formed the fields ``V^t`` and the gradients
``g^t`` of every path, and accumulated per-batch moments. A response
estimator turns them into row ``t`` of ``Γ`` (``Γ(t, s)`` for ``s ≤ t``),
once from all paths and once per batch (for the batch-means errors).
The solver's ``method`` is a :class:`ResponseMethod` (the options of an estimator), which
builds the :class:`ResponseEstimator` of one solve. Two implement them:

* :class:`dmftsolve.dynamics.stein.Stein` — Gaussian integration by parts on the
  innovations (default; needs no second derivatives);
* :class:`dmftsolve.dynamics.pathwise.Pathwise` — forward differentiation of every
  path (needs ``D^t`` and ``O(N T² m²)`` memory).

The mathematics of both is in the module docstring of
:mod:`dmftsolve.dynamics.dmft`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["StepMoments", "ResponseEstimator", "ResponseMethod"]


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


class ResponseEstimator(Protocol):
    """Row ``t`` of ``Γ`` from the step's moments; called once per step, in order."""

    #: whether the driver must evaluate ``D^t`` on every path at every step
    needs_D: bool
    #: whether ``Γ(t, u)`` is zero at every zero-variance innovation ``u`` (then the parameter
    #: side reads the kernels at the non-null innovations only); False when not set
    zero_at_null: bool

    def row(self, step: StepMoments) -> tuple[np.ndarray, np.ndarray]:
        """``(Γ(t, ≤t) from all paths (m, t1m), per-batch estimates (B, m, t1m))``."""
        ...

    def diagnostics(self) -> dict[str, np.ndarray]:
        """Estimator-specific per-step diagnostics for :attr:`DMFTResult.diagnostics`."""
        ...


class ResponseMethod(Protocol):
    """The options of a response estimator (``DMFTSettings.method``), frozen and checked on
    construction; :meth:`build` makes the estimator of one solve."""

    #: the name in records and on the command line (``"stein"``, ``"pathwise"``)
    name: str
    #: ``DMFTSettings.null_rtol`` when it is None
    default_null_rtol: float
    #: whether the driver must evaluate ``D^t`` on every path at every step
    needs_D: bool

    def build(self, *, n_batches: int, batch_size: int, steps: int, m: int,
              antithetic: bool) -> ResponseEstimator:
        """The estimator of one solve: ``n_batches`` batches of ``batch_size`` paths."""
        ...

    def memory_bytes(self, *, n_paths: int, n_batches: int, steps: int, m: int) -> int:
        """Bytes of the estimator's own store."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        ...
