"""The weak-recovery threshold ``δ_alg`` of optimal first-order methods (``docs/theory.md`` §5.5).

For latents ``z ~ N(0, I_k)`` and a label ``y = h(z, ε)``:

1. **Trivial part.** If ``E[z | y] ≠ 0`` on a set of positive probability
   (``E_y[E[z|y] E[z|y]ᵀ] ≠ 0``), the directions in its range are learned by
   one linear step at any ``δ > 0``: ``δ_alg = 0`` for them.
2. **Otherwise** with ``G(y) = E[zzᵀ − I | y]`` and the completely positive
   map ``F(M) = E_y[G(y) M G(y)]`` on symmetric ``k×k`` matrices,
   ``δ_alg = 1/ρ(F)``; for ``k = 1`` this is ``1/E_y[(E[z²|y] − 1)²]``.
   ``F`` is self-adjoint for the Frobenius inner product, so it is built as a
   symmetric ``k(k+1)/2`` matrix and ``ρ(F)`` is its top eigenvalue (Perron:
   its eigenmatrix is positive semidefinite and spans the easy subspace).
   ``G ≡ 0`` (parity-like targets) gives ``δ_alg = ∞``.

Everything needs ``E_y[A(y) ⊗ B(y)]`` for conditional expectations ``A, B``; by
the tower property ``E_y[E[a|y] E[b|y]] = E[a(z) E[b|y](h(z))]``. Before any
method runs, the label is standardised (:mod:`.standardize`). The exact methods
take at most ``max_pieces`` monotone pieces of ``h`` (their time grows like the
square of the count); past it ``"auto"`` uses ``"binned"``.

The modules, one per method behind the method table
:data:`~.threshold.METHODS` (each called as ``estimate(target, options)``):

* :mod:`.threshold` — the entry point :func:`~.threshold.alg_threshold`, the
  method choice and the result :class:`~.threshold.AlgThreshold`;
* :mod:`.preimage` — noiseless ``k = 1``, exact (preimages on monotone pieces);
* :mod:`.fibred` — noiseless ``k = 2`` monotone along a coordinate, exact (coarea);
* :mod:`.additive` — ``y = h0(z) + c·eps``, small ``k`` (trapezoid grids);
* :mod:`.binned` — anything else, Monte Carlo (binned ``y``, scrambled Sobol);
* :mod:`.common` — what they share: ``ρ(F)`` from the moments, monotone pieces,
  the call's options and estimate;
* :mod:`.standardize` — the equivalent label the methods run on.

Examples
--------
>>> from dmftsolve.thresholds.weak_recovery import alg_threshold
>>> r = alg_threshold("z**2")
>>> round(r.delta_alg, 10), r.trivial
(0.5, False)
"""

from dmftsolve.thresholds.weak_recovery.binned import MAX_BINNED_K
from dmftsolve.thresholds.weak_recovery.common import MAX_PIECES
from dmftsolve.thresholds.weak_recovery.threshold import METHODS, AlgThreshold, alg_threshold

__all__ = ["METHODS", "MAX_BINNED_K", "MAX_PIECES", "AlgThreshold", "alg_threshold"]
