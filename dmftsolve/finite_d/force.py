"""GD's finite-``n`` gradient on the overlaps of a draw (``docs/theory.md`` §7.2).

A draw's kernels use ``N`` Monte Carlo paths, but GD's gradient along the target is a sum over its
``n = δd`` samples. :class:`BootstrapForce` gives the DMFT's overlap update that gradient: with
quenched weights ``w_p`` (mean 1, drawn once per solve),

    M_{t+1} = (1 − ηλ) M_t − η (1/N) Σ_p w_p V*_p g_p^{tᵀ},

which is, in law, a sum over ``n`` samples of the ``N``-path population: its fluctuation at ``M = 0``
has the covariance of GD's force and its derivative in ``M`` the finite-``n`` curvature along ``V*``.
The ``Q, R, Γ`` kernels and the test loss use the unweighted paths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmftsolve.dynamics.paths import PathSet
from dmftsolve.seeds import as_generator, child

__all__ = ["BootstrapForce", "paired_force_weights", "FORCE_WEIGHTS"]

#: the weightings of :class:`BootstrapForce`
FORCE_WEIGHTS = ("paired", "poisson")

#: child of the solve's seed that draws the weights
_WEIGHT_STREAM = 2**20


def paired_force_weights(rng: np.random.Generator, n_batches: int, batch: int,
                         n_samples: int) -> np.ndarray:
    """Force weights ``1 + a ± b`` on each path and its reflection (``BootstrapForce(weights="paired")``).

    The paths are laid out as ``n_batches`` batches of ``batch`` paths whose second half
    reflects the first (:class:`~dmftsolve.dynamics.paths.PathSet`), so path ``j < batch/2`` of a
    batch pairs with ``j + batch/2``. ``b ~ N(0, N/(2n))`` gives the odd part of the weighted sum
    (the force) GD's variance ``1/n``; ``a ~ N(0, max(N/(2n) − 1, 0))``, centred to sum to zero
    over the pairs, tops the even part up from the pairs' own ``2/N`` to ``1/n``, with
    ``N = n_batches · batch`` paths and ``n = n_samples``. The centring makes the even part's
    extra spread ``Var(c)/n`` of a summand ``c``, as a sample mean over ``n`` points has, not
    the ``E[c²]/n`` of independent (e.g. Poisson) weights, whose total weight fluctuates.
    Returns the ``(N,)`` weights (mean 1).

    Examples
    --------
    >>> paired_force_weights(np.random.default_rng(0), 2, 8, 2).shape
    (16,)
    """
    if batch % 2:
        raise ValueError(f"batch must be even (path / reflection halves), got {batch}")
    half = batch // 2
    v = n_batches * batch / (2.0 * n_samples)
    b = rng.standard_normal((n_batches, half)) * math.sqrt(v)
    a = rng.standard_normal((n_batches, half)) * math.sqrt(max(v - 1.0, 0.0))
    a -= a.mean()
    return np.concatenate([1.0 + a + b, 1.0 + a - b], axis=1).reshape(-1)


@dataclass(frozen=True)
class BootstrapForce:
    """GD's finite-``n`` gradient along the target, through quenched weights (module docstring).

    Parameters
    ----------
    samples : int
        GD's sample size ``n``.
    weights : {"paired", "poisson"}
        ``"poisson"``: independent bootstrap weights ``w_p = (N/n)·Poisson(n/N)`` (variance
        ``N/n``). The reflection pairs cancel the ``N``-path noise only in the part of the sum that
        is odd under the reflection (the force at ``M = 0``); the even part (the curvature along
        ``V*``) keeps the noise of the ``N/2`` pairs, and independent weights add ``E[c²]/n`` for a
        summand ``c`` where a sample mean has ``Var(c)/n``. ``"paired"`` (needs reflection pairs):
        :func:`paired_force_weights`, which give the even part GD's ``Var(c)/n`` when ``N ≥ 2n``
        and the paths' own ``2 Var(c)/N`` otherwise.

    Examples
    --------
    >>> BootstrapForce(samples=3000).to_dict()
    {'force_samples': 3000, 'force_weights': 'paired'}
    """

    samples: int
    weights: str = "paired"

    def __post_init__(self) -> None:
        n = self.samples
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"force_samples must be an integer >= 1, got {n!r}")
        object.__setattr__(self, "samples", int(n))
        if self.weights not in FORCE_WEIGHTS:
            raise ValueError(f"force_weights must be 'poisson' or 'paired', got {self.weights!r}")

    def check(self, *, reflect: tuple[int, ...], n_paths: int) -> None:
        if self.weights == "paired" and not reflect:
            raise ValueError("force_weights='paired' needs reflection pairs (reflect=(0,) or more), "
                             f"got reflect={tuple(reflect)!r}")

    def build(self, paths: PathSet, root: np.random.SeedSequence) -> Any:
        rng = as_generator(child(root, _WEIGHT_STREAM))
        N = paths.N
        if self.weights == "paired":
            w = paired_force_weights(rng, paths.B, paths.nb, self.samples)
        else:
            rate = self.samples / N
            w = rng.poisson(rate, size=N) / rate
        weighted = paths.Vstar * ((w - 1.0) / N)  # (k, N): V*_p (w_p − 1)/N

        def term(g: np.ndarray) -> np.ndarray:
            return weighted @ g.T

        return term

    def to_dict(self) -> dict[str, Any]:
        return {"force_samples": self.samples, "force_weights": self.weights}
