"""Discrete-time DMFT of full-batch gradient descent (``docs/theory.md`` §2).

The limit ``n, d → ∞``, ``n/d = δ`` of GD on a two-layer network with ``m``
hidden units and a ``k``-index target is described by

* a **parameter process** ``ω^t ∈ R^m`` (a row of ``√d W^t_⊥``), linear and
  Gaussian::

      ω^{t+1} = (1 − ηλ) ω^t − η [ ν^t + Σ_{s≤t} Γ(t,s) ω^s ],
      Cov(ν^t, ν^s) = Cν(t,s) = (1/δ) E[g^t g^{sᵀ}];

* a **sample process** (one training sample), non-linear with memory::

      V^t = M_tᵀ V* + U^t + b_t,   U^t = Ξ^t − (η/δ) Σ_{s<t} R(t,s+1) g^s,
      g^t = g(y, V^t),   (Ξ^t) ~ N(0, Q),   Q(t,s) = E[ω^t ω^{sᵀ}];

* kernels ``Γ(t,s) = E[∂g^t/∂Ξ^s]`` (response of the sample side),
  ``R`` (response of the parameter side, ``R(s,s) = I``,
  ``R(t+1,s) = (1−ηλ)R(t,s) − η Σ_{u=s}^{t} Γ(t,u) R(u,s)``) and overlaps
  ``M_{t+1} = (1 − ηλ) M_t − η E[V* g^{tᵀ}]``.

* with a trained bias (``problem.bias``), a deterministic ``b_t ∈ R^m``,
  ``b_0 = 0``, ``b_{t+1} = b_t − η E[g^t]`` (no ridge); otherwise ``b_t = 0``.
  The kernel recursions keep their form: ``b`` enters only through ``g`` and
  ``D`` evaluated at the shifted ``V^t``.

The scheme is causal and solved in one forward pass (:func:`solve_dmft`,
options in :class:`DMFTSettings`). The responses are estimated by one of two
interchangeable estimators (:mod:`dmftsolve.dynamics.stein`,
:mod:`dmftsolve.dynamics.pathwise`, interface in
:mod:`dmftsolve.dynamics.response`); this module holds the driver loop.

Parameter side (deterministic linear algebra, not sampled)
    With ``φ^t = λω^t + ν^t + Σ_s Γ(t,s) ω^s`` the (√d-scaled) orthogonal
    part of the gradient, ``ω^{t+1} = ω^t − η φ^t`` and, since
    ``E[ν^t ω^{uᵀ}] = −η Σ_{b<u} Cν(t,b) R(u,b+1)ᵀ =: N(u)``::

        E[φ^t ω^{sᵀ}] = N(s) + Σ_u Γ̃(t,u) Q(u,s)          (Γ̃ = Γ + λ I δ_{u,t})
        E[φ^t φ^{tᵀ}] = Cν(t,t) + N Γ̃ᵀ + Γ̃ Nᵀ + Γ̃ Q Γ̃ᵀ
        Q(t+1,s)      = Q(t,s) − η E[φ^t ω^{sᵀ}]                    (s ≤ t)
        Q(t+1,t+1)    = Q(t,t) − η (E[φ^t ω^{tᵀ}] + ᵀ) + η² E[φ^t φ^{tᵀ}]

    which is equivalent to ``Q(t,s) = R(t,0)Q0R(s,0)ᵀ + η² Σ R(t,a+1) Cν(a,b)
    R(s,b+1)ᵀ`` (checked in the tests) and costs ``O(T² m³)`` per step.

Sample side (Monte Carlo over ``N`` paths)
    ``Ξ^t = Σ_{u≤t} L(t,u) ζ^u`` with standard normal innovations ``ζ^u`` and
    ``L`` the block-lower-triangular Cholesky factor of ``Q``, extended by one
    block row per step. Diagonal blocks are factored by a semidefinite
    Cholesky: a pivot below ``null_rtol · Q(t,t)_jj`` is a *zero-variance
    innovation*; its column of ``L`` and its ``ζ`` component are set to zero
    (so ``Q0 = 0`` or a rank-deficient warm start are handled).

Responses ``Γ`` two ways
    ``method="pathwise"``: ``J(t,s) = ∂V^t/∂Ξ^s`` by forward differentiation,
    ``J(s,s) = I``, ``J(t,s) = −(η/δ) Σ_{u=s}^{t−1} R(t,u+1) D^u J(u,s)``,
    ``Γ(t,s) = E[D^t J(t,s)]``: ``O(N T³ m³)`` time and ``O(N T² m²)`` memory.

    ``method="stein"`` (default): Gaussian integration by parts on the
    innovations, ``E[g^t ζ^{uᵀ}] = Σ_{s≥u} Γ(t,s) L(s,u)``, solved for row
    ``t`` of ``Γ`` by one block triangular solve: ``O(N T² m²)`` time and
    ``O(N T m)`` memory, and no second derivatives. Responses to zero-variance
    innovations are set to zero: Stein's lemma cannot see them. This is exact
    when the only degenerate directions are at ``t = 0`` (``Γ(t,0)`` then acts
    only on ``ω^0``, which has no variance there); a degeneracy at a later time
    (e.g. two units with identical weights forever) makes ``Γ`` differ from the
    pathwise one in directions the process never visits — use ``"pathwise"``
    to get those. Variance reduction: antithetic pairs ``ζ → −ζ`` (same
    ``V*``, ``ε``), which cancel the part of ``g`` even in ``ζ`` (e.g. the
    label), and centring ``g`` by its batch mean.

    **Caveat (measured).** GD trajectories are smooth in ``t``, so the
    innovation variances of ``Ξ`` collapse within a few steps (``~1e-5·Q(t,t)``
    at t = 5 for GeLU, η = 0.5, δ = 4). Stein identifies ``Γ`` only through
    ``E[g^t Ξ^{sᵀ}] = Σ_u Γ(t,u) Q(u,s)``, so in those directions it is pure
    noise (or zero once the innovation is dropped by ``null_rtol``). The
    observables (``Q``, ``M``, losses, cosine) are insensitive to that freedom
    and agree with the simulator (and with the pathwise method wherever its
    noise allows, see below), but the *individual*
    entries of ``Gamma`` and ``R`` from ``"stein"`` are not the physical
    response kernels beyond the first few steps. Use ``method="pathwise"``
    when the kernels themselves are wanted.

    Why the observables are unaffected (gauge argument, exact when ``Q`` is
    exactly singular, approximate with the cutoff): Stein returns some
    ``Γ̃ = Γ + Δ`` with ``Δ Q = 0``. If ``v`` spans the null space of ``Q``
    then ``Σ_s v_s ω^s = 0`` a.s., so ``Γ̃`` and ``Γ`` act identically on the
    parameter process; ``ν`` (and each path's series ``g^·``) lies in the range
    of ``Cν``, and responses to inputs in that range stay inside the range of
    ``Q``, so ``R̃ h = R h`` for every ``h`` the recursion applies ``R`` to
    (``E[ν ωᵀ]`` and the memory term ``Σ_s R(t,s+1) g^s``). Invariant
    combinations such as ``E[g^t Ξ^{sᵀ}] = Σ_u Γ(t,u) Q(u,s)`` and
    ``Σ_a R(t,a+1) Cg(a,s)`` agree between the two methods (tested); with the
    cutoff the invariance holds up to the dropped variance (``Q(100,100)``
    moved by < 1 % for ``null_rtol`` from 1e-6 to 1e-3).

    **Long times** (measured, ``validation/investigations/dmft_long_time.py``; GeLU, y = z²,
    hard direction held, δ = 4, η = 0.5). Stein with 1e5 paths matches GD at
    d = 4000 to ≈ 1 % up to t = 400 (‖w‖² 6.16 ± 0.02 vs 6.14 ± 0.12). The
    Stein ``Q`` carries a finite-``N`` bias of order ``1/N`` (upwards; for
    t ≥ 200 ≈ +8 % at 2e4 paths and ≈ +1.5 % at 1e5 relative to the ``N → ∞``
    fit, which agrees with GD extrapolated to ``d → ∞`` within ~1 %) and a
    seed-to-seed spread far above the
    ``errors="batch"`` error bars (≈ 0.2 at 2e4 paths vs 0.02 reported): use
    ≥ 1e5 paths and ``errors="replicate"`` (or several seeds) for long runs.
    ``"pathwise"`` is *worse* at long times: the per-path ``D^t J(t,s)`` is
    heavy-tailed (kurtosis ~1e4 at t = 60; the largest values come from paths
    where the per-sample loss is concave, ``D < 0``, ~16 % of paths), and its
    ``Q(t,t)`` at t = 50–100 scattered by ±0.5 between seeds at 1e4–7e4 paths
    (4.2–5.8), ~7 % below GD on average at t = 100 with 4e4 paths.

Monte Carlo errors
    ``errors="replicate"`` (default): spread of ``n_batches`` independent
    solves with ``n_paths/n_batches`` paths each, divided by
    ``√n_batches`` — includes the propagation of kernel noise.
    ``errors="batch"``: batch means over the main paths, conditional on
    the kernels of earlier steps (see ``diagnostics["error_model"]``).
    ``errors="none"``: no errors (NaN), and no per-batch estimates at all
    (the kernels and paths are those of ``"batch"``: bit for bit with Stein,
    to rounding, ~1e-9, with the pathwise method).
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.linalg as sla

from dmftsolve._blas import blas_threads as blas_threads_limit
from dmftsolve.checks import check_delta
from dmftsolve.dynamics.pathwise import PATHWISE_MAX_BYTES, PathwiseResponse
from dmftsolve.dynamics.response import ResponseEstimator, StepMoments
from dmftsolve.dynamics.stein import SteinResponse, control_pairs, label_controls
from dmftsolve.hessian.law import Law
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.seeds import SeedLike, as_generator, as_seed_sequence, child, seed_record
from dmftsolve.success import direction_projections

__all__ = ["DMFTSettings", "DMFTResult", "solve_dmft", "largest_cosine", "largest_cosines",
           "available_memory_bytes", "PATHWISE_MAX_BYTES"]

Method = Literal["stein", "pathwise"]


# --------------------------------------------------------------------------- settings
def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_ints(name: str, values: Any) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of integers, got {values!r}")
    values = list(values)
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must hold integers >= 0, got {values!r}")
    return tuple(sorted({int(v) for v in values}))


def check_null_rtol(value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is None or a real number in ``[0, 1)``
    (``null_rtol`` of :class:`DMFTSettings`, also taken by the threshold search's settings)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 <= value < 1:
        raise ValueError(f"null_rtol must be a number in [0, 1) or None, got {value!r:.80}")


@dataclass(frozen=True, kw_only=True)
class DMFTSettings:
    """Options of :func:`solve_dmft`, validated on construction.

    Parameters
    ----------
    n_paths : int
        Monte Carlo paths ``N`` of the sample process (rounded up to a multiple
        of ``n_batches`` — of ``2·n_batches`` with antithetic pairs, doubled
        again with ``reflect``; see :meth:`total_paths`).
    seed : int, SeedSequence, Generator or None
        Seed of the paths (:mod:`dmftsolve.seeds`); fresh entropy if None,
        recorded in the result's ``settings``. The paths use the stream of
        ``as_generator(seed)``; the Monte Carlo test sample child 0 and the
        replicate solves children ``1 … n_batches`` of ``as_seed_sequence(seed)``.
    steps : int, optional
        Number of GD steps ``T`` (default ``problem.training.steps``).
    method : {"stein", "pathwise"}
        How ``Γ`` is estimated (module docstring). ``"stein"`` is
        ``O(N T² m²)``; ``"pathwise"`` is ``O(N T³ m³)`` with ``O(N T² m²)``
        memory and is the reference.
    antithetic : bool
        Pair every path with its mirror ``ζ → −ζ``.
    reflect : sequence of int
        Target directions ``j`` (columns of ``V*``) to pair by reflection:
        every path is repeated with ``V*_j → −V*_j`` (same innovations and
        noise). Unbiased for any target (``V*`` is symmetric); for a target
        even in ``z_j`` it makes ``E[V*_j g]`` vanish exactly while
        ``M_j = 0``, so a small warm-start overlap ``M0`` along ``j`` (the
        ``1/√d`` overlap of a finite-d random start) is not swamped by the
        ``N^{-1/2}`` Monte Carlo noise that otherwise seeds that direction.
    n_batches : int
        Batches for the batch-means standard errors (``>= 2``), and the
        number of replicate solves of ``errors="replicate"``.
    keep_samples_at : sequence of int
        Steps at which the paths are kept (:meth:`DMFTResult.law`,
        :meth:`DMFTResult.samples`).
    errors : {"replicate", "batch", "none"}
        How the ``*_err`` arrays are estimated. ``"replicate"`` (default): the
        standard deviation over ``n_batches`` independent solves with
        ``n_paths / n_batches`` paths each (own kernels), divided by
        ``√n_batches`` — an honest error of the full solve including the
        propagation of kernel noise through the recursion; it doubles the cost.
        ``"batch"``: batch means over the main solve's paths, conditional on
        the kernels of earlier steps (cheap; underestimates the error of
        long-time quantities, by ~3× for ``Q(20,20)`` in the GeLU example).
        ``"none"``: not estimated (NaN); skips the per-batch kernels (for
        callers that only need the kernels or the paths, e.g. the threshold search).
    null_rtol : float, optional
        Relative pivot (innovation variance / ``Q(t,t)_jj``) below which an
        innovation counts as zero-variance. Default ``1e-4`` for ``"stein"``
        and ``1e-10`` for ``"pathwise"``. GD trajectories are smooth in ``t``,
        so the innovations of ``Ξ`` decay fast (``~1e-5`` of ``Q(t,t)`` after 5
        steps of the GeLU example); Stein divides by them, and with
        ``null_rtol = 1e-10`` its ``Γ``/``R`` noise grew without bound
        (overflow at step 167 of a 200-step run). Dropping them changes
        ``Q`` by a relative ``≤ null_rtol``. At width 2 over long horizons even
        ``1e-4`` can be too small: the recursion then loses positive
        semidefiniteness and the run fails ("the DMFT diverged"); ``1e-3``
        cured every such run seen (``docs/findings.md`` §4.9).
    test_loss : {"mc", "population", "none"}
        ``"mc"`` (default, ~5 ms a step): Monte Carlo over the paths' ``V*``,
        ``ε`` and fresh Gaussian fields ``Ξ ~ N(0, Q(t,t))``;
        ``"population"``: :func:`dmftsolve.population.population_loss`
        (quadrature/QMC, ~40 ms a step; replicates for the errors still use
        Monte Carlo, so its error bar is conservative); ``"none"``: not
        computed (NaN), for callers that only need the kernels or the paths.
    stein_regression : bool
        With ``method="stein"``: replace ``E[g ζᵀ]`` by the least-squares
        coefficients of ``g`` on the innovations (sample Gram instead of ``I``),
        a control variate for the part of ``g`` linear in ``ζ``. Off by
        default: it reduced the spread of ``Γ`` only marginally in the tests.
    stein_controls : bool
        With ``stein_regression`` (and ``antithetic``, ``errors="none"``): regress ``g`` on
        ``f_k(y) ζ^u`` as well as on the innovations ``ζ^u``, for two centred functions of
        the label, ``f_1 ∝ y − ȳ`` and ``f_2`` (``f_1²`` centred, made orthogonal to
        ``f_1``), and keep the coefficients of the ``ζ^u``. The products are uncorrelated
        with every ``ζ^v`` in law (the innovations are independent of the label), so the
        coefficients estimate the same ``E[g ζᵀ]``, with less noise: the part of ``g``
        whose response to ``ζ`` changes with the label leaves the residual. On GeLU ``z²``
        (δ = 11, 2·10⁴ paths) the summed variance of the coefficients fell to 0.3–0.4 of the
        regression's, but the late kernels did not move (``docs/findings.md`` §8), so it is
        off by default. Needs the label to be the same on every copy of a distinct column (a
        label symmetric under the reflected directions).
    stein_crossfit : bool
        With ``stein_regression`` (and ``antithetic``, ``errors="none"``): fit the regression's
        coefficients on each half of the distinct columns and use them as control variates on
        the other half, ``Ŝ = ½ Σ_h [E_h(g ζᵀ) − β_{h'} (E_h(ζ ζᵀ) − I)]`` (``h'`` the other
        half), so the coefficients are independent of the moments they correct. The
        in-sample regression is the same with ``h' = h``; it removes the linear part of ``g``
        from the noise but leaves an ``O(p/N)`` bias of its own (``p`` regressors). On GeLU
        ``z²`` (δ = 11, 2·10⁴ paths, 30 seeds) the late kernels did not move
        (``docs/findings.md`` §8), so it is off by default.
    force_samples : int, optional
        GD's sample size ``n``: the overlap update sees the finite-``n`` gradient along
        ``V*`` as GD does, while the kernels keep the precision of ``N`` paths. The update
        becomes ``M_{t+1} = (1 − ηλ) M_t − η (1/N) Σ_p w_p V*_p g_p^{tᵀ}`` with quenched
        Poisson bootstrap weights ``w_p = (N/n)·Poisson(n/N)`` (mean 1, variance ``N/n``;
        drawn once from child ``2**20`` of the seed): the weighted sum is, in law, a sum
        over ``n`` samples of the ``N``-path population, so its fluctuation has GD's
        covariance ``(1/n) E[V* V*ᵀ ⊗ g^t g^{sᵀ}]`` (the force ``ν*`` of
        :mod:`dmftsolve.dynamics.hard_overlap` along a hard direction) and its derivative in
        ``M`` the finite-``n`` curvature along ``V*``. The ``Q, R, Γ`` kernels and the test
        loss use the unweighted paths. Pair with ``reflect`` along the hard directions so the
        ``N``-path mean adds no ``N^{-1/2}`` noise of its own there; without it the
        fluctuation variance is ``1/n + 1/N``. With ``errors="replicate"`` each replicate
        draws its own weights, so the error bars include the force's spread (a physical,
        not a Monte Carlo, spread). ``None`` (default): no force.
    force_weights : {"poisson", "paired"}
        The weights of ``force_samples``. ``"poisson"`` (default): independent bootstrap
        weights as above. The reflection pairs cancel the ``N``-path noise only in the part
        of the sum that is odd under the reflection (the force at ``M = 0``); the even part
        (its derivative in ``M``, the curvature along ``V*``) keeps the noise of the ``N/2``
        independent pairs, and the independent weights add ``E[c²]/n`` for a summand ``c``
        where a sample mean has ``Var(c)/n``: its variance is ``E[c²]/n + 2 Var(c)/N``
        against GD's ``Var(c)/n``; the paths' part alone is 2.4× GD's at ``n = 2.4·10⁴``,
        ``N = 2·10⁴``. ``"paired"`` (needs ``reflect``): Gaussian weights ``1 + a ± b`` on a
        path and its reflection, ``Var b = N/(2n)`` (the force, as before) and
        ``Var a = max(N/(2n) − 1, 0)`` with ``Σ a = 0`` (:func:`paired_force_weights`), so the
        even part's variance is GD's ``Var(c)/n`` when ``N ≥ 2n`` and the paths' own
        ``2 Var(c)/N`` otherwise. This counts the
        ``N/2`` pairs as independent; with ``antithetic`` (the default) the two members of
        an antithetic pair share ``V*``, their even parts are correlated, the paths' own
        noise lies between ``2/N`` and ``4/N``, and the top-up is approximate.
    quenched_labels : bool
        With ``force_samples=n``: the label randomness (``V*``, ``ε``) of the paths is that
        of ``n`` samples, each repeated over ``N/n`` paths with independent innovations
        (keeping the antithetic and reflection structure), so the kernels see the law of the
        labels at GD's sample size, the innovations averaged over the copies; and the
        overlap update is GD's gradient over the ``n`` samples, one designated path each
        (weights ``w_p = N/n`` on those paths, 0 elsewhere), instead of bootstrap weights.
        Needs ``(N / (2 if antithetic) / (2 if reflect))`` to be a multiple of ``n``.
    stop_cosine : float, optional
        Stop the solve at the first step ``t`` at which every direction of
        ``stop_directions`` has a projection onto ``span(W^t)`` above this
        (:func:`dmftsolve.success.success_statistic`): GD's success criterion, for callers
        that only need the first passage (:mod:`dmftsolve.thresholds.finite_d_transition`).
        The result keeps status success; every array after that step is NaN and
        ``diagnostics["stopped_at"]`` names the step. ``None`` (default): run all steps.
    stop_directions : sequence of int
        Target directions of ``stop_cosine`` (default: all ``k``).
    give_up_factor : float, optional
        With ``stop_cosine``: also stop, as a draw that will not pass, at the first step
        ``t ≥ T/4`` at which the smallest projection ``p_t`` of ``stop_directions`` satisfies
        ``p_t + F·max(p_t − p_{t−W}, 0)·(T − t)/W < stop_cosine − GIVE_UP_MARGIN`` with ``F``
        this factor, ``W = max(1, round(T/8))`` and :data:`GIVE_UP_MARGIN` 0.1: even ``F``
        times its growth over the last ``W`` steps, sustained to ``T``, would leave it short of
        ``stop_cosine`` by the margin (a draw hovering just below ``stop_cosine`` is never given
        up). Not exact: a draw whose
        growth later speeds up more than ``F``-fold is stopped as a failure
        (:data:`dmftsolve.thresholds.finite_d_transition.GIVE_UP_FACTOR`). The
        result keeps status success, every array after the step is NaN and
        ``diagnostics["gave_up_at"]`` names the step. ``None`` (default): never.
    path_dtype : {"float64", "float32"}
        Storage and products of the path history (innovations ``ζ^u`` and gradients ``g^u``
        of every step, read twice a step: ``O(N T)`` bytes, the solve's main cost). The
        kernels, overlaps and each step's fields and gradients stay in float64.
        ``"float32"`` halves the memory and the time of those products. Its rounding
        (relative ``~1e-7`` per entry) is far below the paths' Monte Carlo error
        ``N^{-1/2}`` over a few steps (``tests/test_dmft.py``), but it flips some of the
        Stein solve's zero-variance decisions (``null_rtol``), so over hundreds of steps a
        single solve's kernels can move by a few percent, as another seed moves them
        (``docs/findings.md`` §7: the success curve of ``dmftsolve transition`` did not move).
    history : {"full", "compact"}
        What each path keeps of its past. ``"full"`` (default): the gradients ``g^u`` of
        every step; each step reads all of them twice, for the memory term of the next
        fields and for the row ``Cg(t, ·)``. ``"compact"`` (needs ``method="stein"`` and
        ``errors="none"``): the memory terms ``−(η/δ) Σ_u R(v, u+1) g^u`` at the steps ``v``
        whose innovation is not null, advanced by the recursion of ``R``
        (:meth:`_Run._compact_pass`). The Stein ``Γ`` is zero at null innovations, so these
        are all that the next memory term and the kernel rows ``Q(t+1, ·)`` that later steps
        read need; at width 1 about one step in five is kept. The overlaps, cosines,
        ``Q(t, t)``, ``R`` and ``Γ`` are those of ``"full"`` up to round-off; ``Cg`` outside
        its diagonal blocks and the entries ``Q(s, u)`` with ``u`` null and ``s ≥ u + 2`` are
        not computed (NaN). For callers that need the overlaps and cosines only
        (:func:`dmftsolve.thresholds.finite_d_transition.solve_draw`).
    progress : bool
        Show a tqdm progress bar.
    blas_threads : int or None
        BLAS threads during the solve (default 1; None leaves the setting alone).
        The per-step linear algebra is small, and multi-threaded OpenBLAS on
        small matrices on a loaded machine was 20× slower (31 s vs 1.5 s for
        200 steps with 5000 paths).
    throw : bool
        Raise :class:`SolverError` on failure (non-finite values); otherwise
        return a result with a failure status and NaN after the failing step.

    Examples
    --------
    >>> DMFTSettings(n_paths=1000, seed=0).total_paths()
    1000
    >>> DMFTSettings(n_batches=1)
    Traceback (most recent call last):
    ...
    ValueError: n_batches must be an integer >= 2, got 1
    """

    n_paths: int = 100_000
    seed: SeedLike = None
    steps: int | None = None
    method: Method = "stein"
    antithetic: bool = True
    reflect: tuple[int, ...] = ()
    n_batches: int = 20
    keep_samples_at: tuple[int, ...] = ()
    errors: Literal["replicate", "batch", "none"] = "replicate"
    null_rtol: float | None = None
    test_loss: Literal["mc", "population", "none"] = "mc"
    stein_regression: bool = False
    stein_controls: bool = False
    stein_crossfit: bool = False
    force_samples: int | None = None
    force_weights: Literal["poisson", "paired"] = "poisson"
    quenched_labels: bool = False
    stop_cosine: float | None = None
    stop_directions: tuple[int, ...] = ()
    give_up_factor: float | None = None
    path_dtype: Literal["float64", "float32"] = "float64"
    history: Literal["full", "compact"] = "full"
    progress: bool = False
    blas_threads: int | None = 1
    throw: bool = True

    def __post_init__(self) -> None:
        B = _check_int("n_batches", self.n_batches, 2)
        n = _check_int("n_paths", self.n_paths, 1)
        if n < 2 * B:
            raise ValueError(f"n_paths must be at least 2*n_batches={2 * B}, got {self.n_paths!r}")
        if self.steps is not None:
            object.__setattr__(self, "steps", _check_int("steps", self.steps, 0))
        if self.method not in ("stein", "pathwise"):
            raise ValueError(f"method must be 'stein' or 'pathwise', got {self.method!r}")
        if self.errors not in ("replicate", "batch", "none"):
            raise ValueError(f"errors must be 'replicate', 'batch' or 'none', got {self.errors!r}")
        if self.test_loss not in ("mc", "population", "none"):
            raise ValueError(f"test_loss must be 'mc', 'population' or 'none', got {self.test_loss!r}")
        check_null_rtol(self.null_rtol)
        if self.blas_threads is not None:
            _check_int("blas_threads", self.blas_threads, 1)
        if self.force_samples is not None:
            object.__setattr__(self, "force_samples", _check_int("force_samples", self.force_samples, 1))
        if self.force_weights not in ("poisson", "paired"):
            raise ValueError(f"force_weights must be 'poisson' or 'paired', got {self.force_weights!r}")
        if self.force_weights == "paired" and not self.reflect:
            raise ValueError("force_weights='paired' needs reflection pairs (reflect=(0,) or more), "
                             f"got reflect={self.reflect!r}")
        if self.stop_cosine is not None and (
                isinstance(self.stop_cosine, (bool, np.bool_))
                or not isinstance(self.stop_cosine, (int, float, np.integer, np.floating))
                or not 0 < self.stop_cosine < 1):
            raise ValueError(f"stop_cosine must be a number in (0, 1) or None, got {self.stop_cosine!r}")
        if self.give_up_factor is not None:
            if (isinstance(self.give_up_factor, (bool, np.bool_))
                    or not isinstance(self.give_up_factor, (int, float, np.integer, np.floating))
                    or not 1 <= self.give_up_factor < math.inf):
                raise ValueError("give_up_factor must be a finite number >= 1 or None, got "
                                 f"{self.give_up_factor!r}")
            if self.stop_cosine is None:
                raise ValueError("give_up_factor needs stop_cosine (the level a draw gives up on "
                                 f"reaching), got stop_cosine=None, give_up_factor={self.give_up_factor!r}")
            object.__setattr__(self, "give_up_factor", float(self.give_up_factor))
        if self.path_dtype not in ("float64", "float32"):
            raise ValueError(f"path_dtype must be 'float64' or 'float32', got {self.path_dtype!r}")
        if self.history not in ("full", "compact"):
            raise ValueError(f"history must be 'full' or 'compact', got {self.history!r}")
        if self.history == "compact" and (self.method != "stein" or self.errors != "none"):
            raise ValueError("history='compact' needs method='stein' and errors='none', got "
                             f"method={self.method!r}, errors={self.errors!r}")
        if self.quenched_labels and self.force_samples is None:
            raise ValueError("quenched_labels=True needs force_samples (the number n of samples), got None")
        if self.stein_controls and not (self.method == "stein" and self.stein_regression
                                        and self.antithetic and self.errors == "none"):
            raise ValueError("stein_controls=True needs method='stein', stein_regression=True, "
                             f"antithetic=True and errors='none', got method={self.method!r}, "
                             f"stein_regression={self.stein_regression!r}, "
                             f"antithetic={self.antithetic!r}, errors={self.errors!r}")
        if self.stein_crossfit and not (self.method == "stein" and self.stein_regression
                                        and self.antithetic and self.errors == "none"
                                        and not self.stein_controls):
            raise ValueError("stein_crossfit=True needs method='stein', stein_regression=True, "
                             "antithetic=True, errors='none' and stein_controls=False, got "
                             f"method={self.method!r}, stein_regression={self.stein_regression!r}, "
                             f"antithetic={self.antithetic!r}, errors={self.errors!r}, "
                             f"stein_controls={self.stein_controls!r}")
        for name in ("antithetic", "stein_regression", "stein_controls", "stein_crossfit", "progress",
                     "throw", "quenched_labels"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not (self.seed is None or isinstance(self.seed, (np.random.SeedSequence, np.random.Generator))):
            as_seed_sequence(self.seed)  # raises ValueError naming the seed
        object.__setattr__(self, "n_paths", n)
        object.__setattr__(self, "n_batches", B)
        object.__setattr__(self, "reflect", _check_ints("reflect", self.reflect))
        object.__setattr__(self, "keep_samples_at", _check_ints("keep_samples_at", self.keep_samples_at))
        object.__setattr__(self, "stop_directions", _check_ints("stop_directions", self.stop_directions))

    # ------------------------------------------------------------------ derived
    @property
    def rtol(self) -> float:
        """``null_rtol`` with its method default filled in."""
        if self.null_rtol is not None:
            return float(self.null_rtol)
        return 1e-4 if self.method == "stein" else 1e-10

    def total_paths(self) -> int:
        """``n_paths`` rounded up to whole batches of antithetic (and reflected) pairs."""
        unit = self.n_batches * (2 if self.antithetic else 1) * (2 if self.reflect else 1)
        return int(math.ceil(self.n_paths / unit) * unit)

    def resolved_steps(self, problem: Problem) -> int:
        """``steps``, or the problem's ``training.steps`` when None."""
        return problem.training.steps if self.steps is None else self.steps

    def check(self, problem: Problem) -> None:
        """The checks that need the problem (``reflect`` within ``k``, kept steps within ``T``,
        ``quenched_labels`` copies)."""
        if self.quenched_labels and self.errors == "replicate":
            raise ValueError("quenched_labels=True needs errors='batch' or 'none' (the replicate solves "
                             "could not tile the n samples), got errors='replicate'")
        if self.quenched_labels:
            base = self.total_paths() // ((2 if self.antithetic else 1) * (2 if self.reflect else 1))
            if base % self.force_samples:
                unit = self.total_paths() // base
                raise ValueError(
                    f"quenched_labels needs the {base} distinct label draws (n_paths={self.total_paths()} "
                    f"/ {unit}) to be a multiple of force_samples={self.force_samples}: use n_paths = "
                    f"{unit * self.force_samples} × (copies), with n_batches dividing the copies' total")
        T = self.resolved_steps(problem)
        if any(j >= problem.k for j in self.reflect):
            raise ValueError(f"reflect must hold target directions in [0, {problem.k}), got "
                             f"{list(self.reflect)!r}")
        if any(j >= problem.k for j in self.stop_directions):
            raise ValueError(f"stop_directions must hold target directions in [0, {problem.k}), got "
                             f"{list(self.stop_directions)!r}")
        if any(t > T for t in self.keep_samples_at):
            raise ValueError(f"keep_samples_at must lie in 0..{T}, got {list(self.keep_samples_at)!r}")

    def memory_bytes(self, problem: Problem) -> int:
        """Estimated peak memory of :func:`solve_dmft` with these settings, in bytes.

        Counts the arrays whose size grows with ``N``, ``T`` and ``m``: the
        path history (``(T+1) m × N`` gradients and ``(T+1) m × N/c`` distinct
        innovations, ``c`` the antithetic and reflected copies), one history-sized temporary, the
        ``((T+2) m)²`` kernel stores (``Q, R, Γ`` and its error, ``Cg, L`` and
        the assembled copies), the estimator's store (pathwise
        ``N ((T+1) m)²``; Stein regression ``(B+1) ((T+1) m)²``), the kept
        paths, and with ``errors="replicate"`` the main result held while the
        replicates run and each replicate's ``Γ``.
        """
        T, m, k = self.resolved_steps(problem), problem.m, problem.k
        N, B = self.total_paths(), self.n_batches
        Tm1, Tm2 = (T + 1) * m, (T + 2) * m
        unit = (2 if self.antithetic else 1) * (2 if self.reflect else 1)
        size = np.dtype(self.path_dtype).itemsize / 8
        # path history (g on every path, ζ on the distinct ones) and one temporary of its size
        n = 2 * size * Tm1 * N * (1 + 1 / unit)
        n += 2 * Tm2 * Tm2 + 4 * Tm1 * Tm1 + 5 * Tm1 * Tm1  # Q, R; Γ, Γ_err, Cg, L; assembled blocks
        n += len(self.keep_samples_at) * N * (2 * m + k + 1 + m * m)
        n += N * (8 * m + 2 * k + 2 * m * m + 8)  # per-step path arrays
        if self.method == "pathwise":
            n += PathwiseResponse.memory_bytes(n_paths=N, steps=T, m=m) // 8
        elif self.stein_regression:
            n += SteinResponse.memory_bytes(n_paths=N, n_batches=B, steps=T, m=m, regression=True,
                                            n_controls=2 if self.stein_controls else 0,
                                            crossfit=self.stein_crossfit) // 8
        if self.errors == "replicate":  # the main result, and each replicate's Γ kept for the spread
            n += (5 + B) * Tm1 * Tm1
        return 8 * int(n)

    def to_dict(self, problem: Problem | None = None) -> dict[str, Any]:
        """JSON-ready record (the seed as given; ``n_paths`` both requested and total)."""
        seed = self.seed
        if isinstance(seed, np.random.SeedSequence):
            seed = seed_record(seed)
        elif isinstance(seed, np.random.Generator):
            seed = "Generator"
        out = {"n_paths": self.total_paths(), "n_paths_requested": self.n_paths, "seed": seed,
               "steps": self.steps if problem is None else self.resolved_steps(problem),
               "method": self.method, "antithetic": self.antithetic, "reflect": list(self.reflect),
               "n_batches": self.n_batches, "keep_samples_at": list(self.keep_samples_at),
               "null_rtol": self.rtol, "test_loss": self.test_loss,
               "stein_regression": self.stein_regression, "errors": self.errors,
               "force_samples": self.force_samples, "force_weights": self.force_weights,
               "quenched_labels": self.quenched_labels}
        if self.path_dtype != "float64":  # recorded only when used (older records keep their keys)
            out["path_dtype"] = self.path_dtype
        if self.stein_controls:  # recorded only when used
            out["stein_controls"] = True
        if self.stein_crossfit:  # recorded only when used
            out["stein_crossfit"] = True
        if self.history != "full":  # recorded only when used
            out["history"] = self.history
        if self.stop_cosine is not None:  # recorded only when used (older records keep their keys)
            out["stop_cosine"] = float(self.stop_cosine)
            out["stop_directions"] = list(self.stop_directions)
        if self.give_up_factor is not None:  # recorded only when used
            out["give_up_factor"] = self.give_up_factor
        return out


def available_memory_bytes() -> int | None:
    """Memory available to a new allocation (``MemAvailable`` of ``/proc/meminfo``), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class DMFTResult(Result):
    """Output of :func:`solve_dmft`.

    Kernels are indexed by times ``0…T`` and hold ``m×m`` blocks:
    ``Q[t, s] = E[ω^t ω^{sᵀ}]`` (Gram of the part of ``W`` orthogonal to ``Θ*``;
    ``W_tᵀW_s → M_tᵀM_s + Q[t, s]``), ``Gamma[t, s] = E[∂g^t/∂Ξ^s]`` (0 for
    ``s > t``), ``R[t, s]`` (0 for ``s > t``, ``R[s, s] = I``),
    ``Cg[t, s] = E[g^t g^{sᵀ}]``. ``M[t]`` is ``M_t = Θ*ᵀW^t`` (``k×m``).

    Per step (length ``T + 1``): ``train_loss`` ``E[ℓ(y, V^t)]`` (data term,
    no ridge penalty), ``test_loss`` (population loss at ``(M_t, Q(t,t))``),
    ``grad_norm`` ``‖∇L(W^t)‖_F²`` (unprojected gradient of the empirical
    risk including the ridge term), ``cosine`` (largest principal cosine
    between ``span(W^t)`` and ``span(Θ*)``), each with ``*_err`` (standard
    error as chosen by ``errors``; ``diagnostics["error_model"]``).
    ``cosine_per_direction`` (``(T+1, k)``) is each target direction's projection
    ``‖P_W θ*_j‖`` onto ``span(W^t)`` (:mod:`dmftsolve.success`).

    ``b`` (shape ``(T+1, m)``) is the trained bias ``b_t`` (exactly zero when
    the problem has ``bias=False``) and ``b_err`` its error; ``grad_norm``
    does not include the bias gradient. The paths kept at the steps
    ``keep_samples_at`` are returned by :meth:`law` (and :meth:`samples`).
    """

    Q: np.ndarray
    Gamma: np.ndarray
    R: np.ndarray
    Cg: np.ndarray
    M: np.ndarray
    train_loss: np.ndarray
    train_loss_err: np.ndarray
    test_loss: np.ndarray
    test_loss_err: np.ndarray
    grad_norm: np.ndarray
    grad_norm_err: np.ndarray
    cosine: np.ndarray
    cosine_err: np.ndarray
    Gamma_err: np.ndarray
    M_err: np.ndarray
    Q_err: np.ndarray
    b: np.ndarray
    b_err: np.ndarray
    cosine_per_direction: np.ndarray | None = None
    kept: dict[int, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def steps(self) -> int:
        """Number of GD steps ``T``."""
        return self.M.shape[0] - 1

    @property
    def times(self) -> np.ndarray:
        return np.arange(self.steps + 1)

    @property
    def gram(self) -> np.ndarray:
        """``W_tᵀW_t = M_tᵀM_t + Q(t,t)``, shape ``(T+1, m, m)``."""
        Qd = np.einsum("ttab->tab", self.Q)
        return np.einsum("tka,tkb->tab", self.M, self.M) + Qd

    @property
    def q_diag(self) -> np.ndarray:
        """``Q(t,t)``, shape ``(T+1, m, m)``."""
        return np.einsum("ttab->tab", self.Q).copy()

    def samples(self, t: int) -> dict[str, np.ndarray]:
        """Sample-process arrays kept at step ``t`` (see ``keep_samples_at``).

        Returns a dict with ``V`` (N, m) the training pre-activations ``V^t``
        (memory term and bias included), ``Vstar`` (N, k), ``y`` (N,), ``D`` (N, m, m)
        ``= ∇²_V ℓ(y, V^t)``. :meth:`law` returns the same as a typed
        :class:`~dmftsolve.hessian.law.Law`.
        """
        if t not in self.kept:
            raise KeyError(f"samples at t={t} were not kept; kept: {sorted(self.kept)} "
                           "(use keep_samples_at)")
        return self.kept[t]

    def law(self, t: int) -> Law:
        """The Monte Carlo law of the training fields ``(D, V*, V, y)`` at step ``t``.

        Raises
        ------
        KeyError
            If the paths at ``t`` were not kept (``keep_samples_at``).
        """
        s = self.samples(t)
        return Law(D=s["D"], Vstar=s["Vstar"], V=s["V"], y=s["y"], kind="monte_carlo",
                   n_paths=int(s["D"].shape[0]), t=int(t),
                   diagnostics={"source": "dmft", "delta": self.settings.get("delta"),
                                "seed": self.settings.get("seed")})

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.pop("kept", None)
        return d


#: ``DMFTSettings.give_up_factor``: a draw whose success statistic is within this of
#: ``stop_cosine`` is never given up. Without it a draw that stalled at 0.48–0.49 for 60 steps and
#: then passed at step 350 of 600 was given up at any factor (r², ``z² − 1``, d = 2000, δ = 4;
#: ``validation/investigations/give_up.py``).
GIVE_UP_MARGIN = 0.1


def give_up_window(T: int) -> int:
    """``W``, the steps over which ``DMFTSettings.give_up_factor`` measures a draw's growth."""
    return max(1, round(T / 8))


def gives_up(now: float, before: float, t: int, T: int, factor: float, level: float) -> bool:
    """The give-up rule of ``DMFTSettings.give_up_factor`` at step ``t`` of ``T``: ``now`` is the
    success statistic at ``t`` and ``before`` at ``t − W`` (:func:`give_up_window`); true when
    ``t ≥ T/4`` and ``now + factor·max(now − before, 0)·(T − t)/W < level − GIVE_UP_MARGIN``."""
    W = give_up_window(T)
    if 4 * t < T or t < W:
        return False
    return now + factor * max(now - before, 0.0) * (T - t) / W < level - GIVE_UP_MARGIN


# --------------------------------------------------------------------------- helpers
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


#: Relative tolerance of the check that ``Q(t, t)`` stays positive semidefinite
#: (:meth:`_Run._lost_psd`): Monte Carlo noise in the recursion leaves a singular direction
#: at most this far below zero; a diverged run goes far beyond it.
PSD_RTOL = 1e-6


def _psd_cholesky(S: np.ndarray, ref: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower factor ``L`` with ``L Lᵀ = S`` for PSD ``S``; columns whose pivot is
    ``<= rtol * ref_jj`` are zero. Returns ``(L, null)`` with ``null`` a bool mask."""
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


def _sym_sqrt(S: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh((S + S.T) / 2)
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


def _batch_se(values: np.ndarray) -> np.ndarray:
    """Standard error of the mean from per-batch values (batch axis first)."""
    B = values.shape[0]
    if B < 2:
        return np.full(values.shape[1:], np.nan)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging replicate gives inf/nan
        return values.std(axis=0, ddof=1) / math.sqrt(B)


def _test_sample(problem: Problem, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh test points: ``V*`` (k, n), ``y`` (n,), ``zeta`` (m, n) standard normals."""
    Vs = rng.standard_normal((problem.k, n))
    eps = rng.standard_normal(n) if problem.target.noisy else np.zeros(n)
    y = np.broadcast_to(np.asarray(problem.labels(Vs.T, eps), dtype=float), (n,)).copy()
    return {"Vstar": Vs, "y": y, "zeta": rng.standard_normal((problem.m, n))}


def _test_loss(problem: Problem, source: str, M: np.ndarray, Q: np.ndarray, b: np.ndarray | None,
               sample: dict[str, np.ndarray] | None) -> tuple[float, float]:
    """Test loss at ``(M_t, Q(t,t), b_t)`` with its error, from ``source`` (``test_loss`` setting)."""
    if source == "none":
        return math.nan, math.nan
    if source == "population":
        from dmftsolve.population import population_loss

        e = population_loss(problem, M, (Q + Q.T) / 2, b)
        return float(e.value), float(e.error)
    assert sample is not None
    V = M.T @ sample["Vstar"] + _sym_sqrt(Q) @ sample["zeta"]
    if b is not None:
        V = V + np.asarray(b, dtype=float)[:, None]
    lv = problem.loss_value(sample["y"], V.T)
    return float(lv.mean()), float(lv.std(ddof=1) / math.sqrt(lv.size))


def paired_force_weights(rng: np.random.Generator, n_batches: int, batch: int,
                         n_samples: int) -> np.ndarray:
    """Force weights ``1 + a ± b`` on each path and its reflection (``DMFTSettings.force_weights``).

    The paths are laid out as ``n_batches`` batches of ``batch`` paths whose second half
    reflects the first (``_Run._draw_shared``), so path ``j < batch/2`` of a batch pairs with
    ``j + batch/2``. ``b ~ N(0, N/(2n))`` gives the odd part of the weighted sum (the force)
    GD's variance ``1/n``; ``a ~ N(0, max(N/(2n) − 1, 0))``, centred to sum to zero over the
    pairs, tops the even part up from the pairs' own ``2/N`` to ``1/n``, with
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


def _estimator(cfg: DMFTSettings, B: int, nb: int, T: int, m: int) -> ResponseEstimator:
    if cfg.method == "pathwise":
        return PathwiseResponse(n_batches=B, batch_size=nb, steps=T, m=m)
    return SteinResponse(n_batches=B, batch_size=nb, steps=T, m=m, antithetic=cfg.antithetic,
                         regression=cfg.stein_regression, n_controls=2 if cfg.stein_controls else 0,
                         crossfit=cfg.stein_crossfit)


# --------------------------------------------------------------------------- driver
_OBSERVABLES = ("train_loss", "train_loss_err", "test_loss", "test_loss_err", "grad_norm",
                "grad_norm_err", "cosine", "cosine_err")


class _Run:
    """One forward pass of the DMFT (state of the driver loop; see :func:`solve_dmft`)."""

    #: errors="none": one pass over the g history a step (:meth:`_history_pass`); False reads
    #: it twice, as before 0.4.0 (the baseline of ``benchmarks/bench_draw.py --history``).
    fuse_history = True
    #: widths up to which :meth:`_history_pass` reads each cached block with matrix-vector
    #: products (above it, one matrix product per block); 0 gives the matrix products of
    #: 0.5.0 (the baseline of ``benchmarks/bench_draw.py --compare gemv``).
    GEMV_MAX_WIDTH = 4

    def __init__(self, problem: Problem, delta: float, cfg: DMFTSettings, root: np.random.SeedSequence,
                 test: dict[str, np.ndarray] | None) -> None:
        self.problem, self.delta, self.cfg = problem, delta, cfg
        k, m = problem.k, problem.m
        T = self.T = cfg.resolved_steps(problem)
        B = self.B = cfg.n_batches
        N = self.N = cfg.total_paths()
        nb = self.nb = N // B
        self.k, self.m = k, m
        tr = problem.training
        self.eta, self.lam = tr.eta, tr.lam
        self.held = list(tr.hold_zero)
        self.keep = set(cfg.keep_samples_at)
        self.pooled_only = cfg.errors == "none"
        pooled_stein = self.pooled_only and cfg.method == "stein"
        self.estimator = _estimator(cfg, 1 if pooled_stein else B, N if pooled_stein else nb, T, m)
        self.rng = as_generator(root)
        self.n_base = nb // ((2 if cfg.antithetic else 1) * (2 if cfg.reflect else 1))
        ql = cfg.quenched_labels  # label draws of n samples, tiled over the copies
        self.Vstar = self._draw_shared(k, cfg.reflect, quenched=ql)  # (k, N)
        eps = self._draw_shared(1, quenched=ql)[0] if problem.target.noisy else np.zeros(N)
        self.y = np.broadcast_to(np.asarray(problem.labels(self.Vstar.T, eps), dtype=float), (N,)).copy()
        if test is None and cfg.test_loss == "mc":
            test = _test_sample(problem, N, as_generator(child(root, 0)))
        self.test = test
        self.Vstar_b = self.Vstar.reshape(k, B, nb).transpose(1, 0, 2)  # (B, k, nb)
        self.Vstar_force = None  # (k, N): V*_p (w_p − 1)/N, the finite-n force's weights
        if cfg.quenched_labels:  # GD's gradient over one designated path per sample
            first = np.zeros((self.B, nb), dtype=bool)
            base_first = (np.arange(self.B * self.n_base) < cfg.force_samples).reshape(self.B, self.n_base)
            first[:, : self.n_base] = base_first  # antithetic member 0, unreflected copy
            w = np.where(first.reshape(N), N / cfg.force_samples, 0.0)
            self.Vstar_force = self.Vstar * ((w - 1.0) / N)
        elif cfg.force_samples is not None:
            rng_w = as_generator(child(root, 2**20))
            if cfg.force_weights == "paired":
                w = paired_force_weights(rng_w, B, nb, cfg.force_samples)
            else:
                lam_w = cfg.force_samples / N
                w = rng_w.poisson(lam_w, size=N) / lam_w
            self.Vstar_force = self.Vstar * ((w - 1.0) / N)
        Tm1, Tm2 = (T + 1) * m, (T + 2) * m
        # The innovations repeat over each antithetic / reflected copy with a fixed sign
        # (:meth:`_draw`), so only the ``B·n_base`` distinct columns are stored; ``rep_sign``
        # is the sign of each of the ``N / (B·n_base)`` copies inside a batch.
        sign = np.array([1.0, -1.0]) if cfg.antithetic else np.array([1.0])
        self.rep_sign = np.concatenate([sign, sign]) if cfg.reflect else sign
        dt = np.dtype(cfg.path_dtype)
        # ζ^t (m rows a step), distinct columns. Only the rows with non-zero variance are
        # stored (compactly, in order; ``z_rows`` gives each its row of L̃): a zero-variance
        # innovation is zero on every path, adds nothing to a field or a moment, and at m = 1
        # about four steps in five have one, so skipping them cuts the reads of the history.
        self.Z = np.zeros((Tm1, B * self.n_base), dtype=dt)
        self.z_rows = np.zeros(Tm1, dtype=np.intp)
        self.n_z = 0
        # errors="none": the memory term of the next step's fields, computed in the same pass
        # over the g history as this step's E[g^t g^u] (:meth:`_history_pass`)
        self.memory_next: tuple[int, np.ndarray] | None = None
        self.mean_weights = np.full(N, 1.0 / N)  # E over the paths as a matrix-vector product
        # history="compact": the memory terms at the non-null innovations (rows in the order of
        # Z) instead of the g history, and the current memory term (:meth:`_compact_pass`)
        self.compact = cfg.history == "compact"
        self.Gh = np.zeros((0 if self.compact else Tm1, N), dtype=dt)  # g^t (m rows a step), every path
        self.Mh = np.zeros((Tm1 if self.compact else 0, N), dtype=dt)
        self.mem = np.zeros((m, N))
        # stein_controls: the label functions f_k and the products w_a w_b (w_0 = 1) on the
        # distinct columns, for the regressors f_k ζ^u of the Stein regression
        self.controls, self.control_pairs = self._label_controls(cfg, dt)
        self.loss_paths = np.zeros(N)  # ℓ(y, V^t) of each path at the current step (from _fields)
        self.Qb, self.Rb = np.zeros((Tm2, Tm2)), np.zeros((Tm2, Tm2))
        self.Gb, self.Gb_err = np.zeros((Tm1, Tm1)), np.zeros((Tm1, Tm1))
        self.Cb = np.zeros((Tm1, Tm1))
        self.Lb = np.zeros((Tm1, Tm1))  # L̃: L with 1 on the diagonal at null pivots
        self.Lc = np.zeros((Tm1, Tm1))  # L̃ on the non-null innovations, in the order of Z
        self.null_mask = np.zeros(Tm1, dtype=bool)
        self.M, self.M_err = np.zeros((T + 2, k, m)), np.zeros((T + 2, k, m))
        self.bvec, self.b_err = np.zeros((T + 2, m)), np.zeros((T + 2, m))  # b_t: 0 without a bias
        self.Q_err = np.zeros((T + 2, m, m))
        if self.pooled_only:  # errors="none": not estimated (NaN after the start)
            self.M_err[1:] = np.nan
            self.Q_err[1:] = np.nan
        self.out = {name: np.full(T + 1, np.nan) for name in _OBSERVABLES}
        self.cos_dir = np.full((T + 1, k), np.nan)
        self.stop_rows = list(cfg.stop_directions) or list(range(k))
        self.kept: dict[int, dict[str, np.ndarray]] = {}
        self.min_pivot = np.full(T + 1, np.nan)
        self.n_null = np.zeros(T + 1, dtype=int)
        self.zmean = np.zeros((B, Tm1))
        self.eye = np.eye(m)
        M0 = np.array(tr.init.overlaps(k, m), dtype=float)
        M0[self.held, :] = 0.0
        self.M[0] = M0
        Q0 = np.array(tr.init.gram(m), dtype=float)
        self.Qb[:m, :m] = (Q0 + Q0.T) / 2
        self.Rb[:m, :m] = self.eye

    # ------------------------------------------------------------------ random inputs
    def _draw(self, rows: int) -> np.ndarray:
        """The distinct standard normals (rows, ``B·n_base``) of the innovations; the paths
        see them through :meth:`_expand` (antithetic pairs inside each batch, and the whole
        batch repeated for the reflected copies)."""
        return self.rng.standard_normal((rows, self.B * self.n_base))

    def _expand(self, u: np.ndarray) -> np.ndarray:
        """(rows, ``B·n_base``) → (rows, N): each batch's columns repeated over its copies,
        times the copy's sign (``rep_sign``)."""
        rows = u.shape[0]
        full = u.reshape(rows, self.B, 1, self.n_base) * self.rep_sign[:, None].astype(u.dtype)
        return full.reshape(rows, self.N)

    def _contract(self, g: np.ndarray) -> np.ndarray:
        """The adjoint of :meth:`_expand`: (rows, N) → (rows, ``B·n_base``), the copies of each
        column summed with their signs (so ``g·expand(ζ) = contract(g)·ζ``)."""
        rows = g.shape[0]
        c = self.rep_sign.size
        return np.einsum("rbcn,c->rbn", g.reshape(rows, self.B, c, self.n_base),
                         self.rep_sign).reshape(rows, self.B * self.n_base)

    def _draw_shared(self, rows: int, flip: tuple[int, ...] = (), quenched: bool = False) -> np.ndarray:
        """Normals shared by the two members of an antithetic pair (V*, ε); rows ``flip``
        change sign in the reflected copies. ``quenched``: ``force_samples`` distinct draws,
        repeated in order over the ``B × n_base`` base slots."""
        if quenched:
            n = int(self.cfg.force_samples)
            reps = self.B * self.n_base // n
            h = np.tile(self.rng.standard_normal((rows, n)), (1, reps)).reshape(rows, self.B, self.n_base)
        else:
            h = self.rng.standard_normal((rows, self.B, self.n_base))
        return self._shared_copies(h, flip)

    def _shared_copies(self, h: np.ndarray, flip: tuple[int, ...] = ()) -> np.ndarray:
        """Base normals ``h`` (rows, ``B``, ``n_base``) → (rows, N): both members of an
        antithetic pair get the same value, and rows ``flip`` change sign in the reflected
        copies (:meth:`_draw_shared`)."""
        rows = h.shape[0]
        if self.cfg.antithetic:
            h = np.concatenate([h, h], axis=2)
        if self.cfg.reflect:
            sign = np.ones((rows, 1, 1))
            sign[list(flip)] = -1.0
            h = np.concatenate([h, sign * h], axis=2)
        return h.reshape(rows, self.N)

    def _blk(self, t: int) -> slice:
        return slice(t * self.m, (t + 1) * self.m)

    def _label_controls(self, cfg: DMFTSettings, dt: np.dtype
                        ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``stein_controls``: the two label functions ``f_k`` on the distinct columns
        (``(2, B·n_base)``) and the products ``w_a w_b`` (``a ≤ b``, ``w_0 = 1``, in the order
        of :func:`~dmftsolve.dynamics.stein.control_pairs`), both in the path dtype; else
        ``(None, None)``."""
        if not cfg.stein_controls:
            return None, None
        c = self.rep_sign.size
        yb = self.y.reshape(self.B, c, self.n_base)
        if not np.array_equal(yb, np.broadcast_to(yb[:, :1], yb.shape)):
            raise ValueError("stein_controls=True needs the same label on every copy of a distinct "
                             "column (a label symmetric under the reflected directions)")
        F = label_controls(yb[:, 0, :].reshape(-1))
        if F.shape[0] != 2:  # the estimator holds the regressors of two label functions
            raise ValueError("stein_controls=True needs a label that takes three values or more on "
                             f"the paths, got {len(np.unique(self.y))} distinct value(s)")
        W = np.vstack([np.ones(F.shape[1]), F])
        pairs = np.array([W[a] * W[b] for a, b in control_pairs(F.shape[0])], dtype=dt)
        return F.astype(dt), pairs

    # ------------------------------------------------------------------ one step
    def _cholesky_row(self, t: int) -> np.ndarray:
        """Block row ``t`` of ``L̃`` (Cholesky of ``Q``); returns the zero-variance mask of step ``t``."""
        blk, tm = self._blk(t), t * self.m
        Qtt = self.Qb[blk, blk]
        k = self.n_z  # the non-null innovations before step t (rows of Z, columns of Lc)
        sol = np.zeros((self.m, 0))
        if t > 0:
            # the solve on the non-null innovations only: L̃ is zero below the diagonal in a
            # null column, so those give the same entries, and the null ones are zero
            nn = self.z_rows[:k]
            Lrow = np.zeros((self.m, tm))
            if k:
                sol = sla.solve_triangular(self.Lc[:k, :k], self.Qb[blk, nn].T, lower=True,
                                           check_finite=False).T
                Lrow[:, nn] = sol
            self.Lb[blk, :tm] = Lrow
            S = Qtt - Lrow @ Lrow.T
        else:
            S = Qtt.copy()
        Ltt, null = _psd_cholesky((S + S.T) / 2, Qtt, self.cfg.rtol)
        keep = np.flatnonzero(~null)
        self.min_pivot[t] = float(np.diag(Ltt)[keep].min()) ** 2 if keep.size else 0.0
        self.n_null[t] = int(null.sum())
        if keep.size:  # Lc grows by the rows of the non-null innovations of step t
            k1 = k + keep.size
            self.Lc[k:k1, :k] = sol[keep]
            self.Lc[k:k1, k:k1] = Ltt[np.ix_(keep, keep)]
        Ltt[null, null] = 1.0
        self.Lb[blk, blk] = Ltt
        self.null_mask[blk] = null
        return null

    def _fields(self, t: int, null: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Innovations ``ζ^t`` (the distinct columns, (m, ``B·n_base``)), fields
        ``V^t = M_tᵀV* + U^t + b_t`` and gradients ``g^t`` (each (m, N))."""
        m, blk = self.m, self._blk(t)
        tm, t1m = t * m, (t + 1) * m
        dt = self.Z.dtype
        z = self._draw(m)  # distinct columns only
        z[null] = 0.0
        keep = np.flatnonzero(~null)
        n0, n1 = self.n_z, self.n_z + keep.size
        self.Z[n0:n1] = z[keep]
        self.z_rows[n0:n1] = tm + keep
        self.n_z = n1
        # U^t = Σ_u L(t,u) ζ^u over the non-null innovations (the null columns of L̃, which
        # holds 1 on their diagonal, are left out), expanded to the paths
        Lrow = self.Lb[blk][:, self.z_rows[:n1]]
        V = self.M[t].T @ self.Vstar + self._expand(Lrow.astype(dt) @ self.Z[:n1])  # (m, N)
        if self.compact:
            V += self.mem  # −(η/δ) Σ_{u<t} R(t, u+1) g^u, from the recursion of _compact_pass
            self.Mh[n0:n1] = self.mem[keep]  # kept where the innovation is not null
        elif self.memory_next is not None and self.memory_next[0] == t:
            V += self.memory_next[1]  # from the previous step's pass over the history
        elif t > 0:  # −(η/δ) Σ_{u<t} R(t, u+1) g^u
            V += (-(self.eta / self.delta) * self.Rb[blk, m:t1m]).astype(dt) @ self.Gh[:tm]
        if self.problem.bias:
            V += self.bvec[t][:, None]
        lv, g = self.problem.loss_and_grad_rows(self.y, V)  # (N,), (m, N) C-ordered
        self.loss_paths = np.asarray(lv, dtype=float)  # the training loss of each path
        return z, V, g

    def _train_observables(self, t: int, V: np.ndarray) -> np.ndarray | None:
        """Training loss at ``t``; ``D^t`` when the estimator or ``keep_samples_at`` needs it."""
        lv = self.loss_paths  # from _fields, with g
        per_loss = lv.reshape(self.B, self.nb).mean(axis=1)
        self.out["train_loss"][t] = per_loss.mean()
        self.out["train_loss_err"][t] = _batch_se(per_loss[:, None])[0]
        if not (self.estimator.needs_D or t in self.keep):
            return None
        D = np.asarray(self.problem.hess(self.y, V.T), dtype=float)  # (N, m, m)
        if t in self.keep:
            self.kept[t] = {"V": V.T.copy(), "Vstar": self.Vstar.T.copy(), "y": self.y.copy(),
                            "D": D.copy()}
        return D

    def _moments(self, t: int, z: np.ndarray, g: np.ndarray, null: np.ndarray,
                 D: np.ndarray | None) -> tuple[StepMoments, np.ndarray, np.ndarray, np.ndarray]:
        """Per-batch moments of step ``t``: the estimator's input, ``Cν`` row, ``E[V* gᵀ]``, ``g``."""
        m, B, nb, nz = self.m, self.B, self.nb, self.n_base
        tm, t1m = t * m, (t + 1) * m
        dt = self.Z.dtype
        if not self.compact:
            self.Gh[tm:t1m] = g
        g_b = g.reshape(m, B, nb).transpose(1, 0, 2)  # (B, m, nb)
        # E[g^t ζ^u] over the paths is contract(g)·ζ^u over the distinct columns, and
        # E[ζ^t ζ^u] the mean over the distinct columns (the copies' signs square to 1)
        G = self._contract(g)
        gzz = np.concatenate([G / nb, z / nz], axis=0).astype(dt)  # (2m, B·nz)
        self.zmean[:, self._blk(t)] = z.reshape(m, B, nz).mean(axis=-1).T * self.rep_sign.mean()
        rows, nzr = self.z_rows[: self.n_z], self.n_z  # the non-null innovations (zero moments elsewhere)
        half_moms = None  # stein_crossfit: the moments of each half of the columns
        if self.pooled_only:  # one "batch": the pooled moments (the mean of equal batches)
            mom = np.zeros((1, 2 * m, t1m), dtype=dt)
            if self.cfg.stein_crossfit:  # each half of the distinct columns apart, then their mean
                h = gzz.shape[1] // 2
                half_moms = ((self.Z[:nzr, :h] @ gzz[:, :h].T).T * (2.0 / B),
                             (self.Z[:nzr, h:] @ gzz[:, h:].T).T * (2.0 / B))
                mom[0][:, rows] = (half_moms[0] + half_moms[1]) / 2
            else:
                mom[0][:, rows] = (self.Z[:nzr] @ gzz.T).T / B  # (2m, n_z)
            gg = None if self.fuse_history or self.compact else \
                (self.Gh[:t1m] @ g.T.astype(dt, copy=False)).T[None] / self.N
            # the mean of the equal batches' means, as a matrix-vector product: g is the
            # transpose of an (N, m) array, and numpy's reduction over it took 0.2 ms at m = 2
            gmean = (g @ self.mean_weights)[None]
            zmean = self.zmean[:, :t1m].mean(axis=0)[None]
        else:
            Zb = self.Z[:nzr].reshape(nzr, B, nz).transpose(1, 2, 0)  # (B, nz, n_z)
            mom = np.zeros((B, 2 * m, t1m), dtype=dt)
            mom[:, :, rows] = gzz.reshape(2 * m, B, nz).transpose(1, 0, 2) @ Zb  # (B, 2m, n_z)
            Gb = self.Gh[:t1m].reshape(t1m, B, nb).transpose(1, 2, 0)  # (B, nb, t1m)
            gg = (g_b.astype(dt, copy=False) @ Gb) / nb
            gmean, zmean = g_b.mean(axis=2), self.zmean[:, :t1m]
        mom = mom.astype(float, copy=False)
        gz = mom[:, :m]  # E_b[g^t ζ^{uᵀ}]
        zz = mom[:, m:]  # E_b[ζ^t ζ^{uᵀ}]
        controls = None
        if self.controls is not None:  # E[g f_k ζ^u] and, for the new innovations, E[w_a w_b ζ^t ζ^u]
            Zs = self.Z[:nzr]
            gw = np.stack([(Zs @ (G * f).astype(dt).T).T for f in self.controls]) / self.N
            znew = z[~null]
            zw = np.stack([(Zs @ (znew * w).astype(dt).T).T for w in self.control_pairs]) / (B * nz)
            controls = (gw.astype(float), zw.astype(float))
        step = StepMoments(
            t=t, m=m, gmean=gmean, gz=gz, zz=zz, zmean=zmean, null=null,
            null_mask=self.null_mask[:t1m].copy(), L=self.Lb[:t1m, :t1m], D=D,
            R_row=self.Rb[self._blk(t), m:t1m], eta_over_delta=self.eta / self.delta,
            L_nonnull=self.Lc[:nzr, :nzr], controls=controls,
            halves=None if half_moms is None else tuple(x.astype(float) for x in half_moms),
        )
        Cn_b = None if gg is None else gg.astype(float, copy=False) / self.delta  # E_b[g^t g^{uᵀ}]/δ
        EVg_b = (self.Vstar_b @ g_b.transpose(0, 2, 1)) / nb  # (B, k, m)
        if self.Vstar_force is not None:  # quenched finite-n force, the same in every batch
            EVg_b = EVg_b + (self.Vstar_force @ g.T)[None]
        return step, Cn_b, EVg_b, g_b

    def _next_R_row(self, t: int, Gam: np.ndarray) -> np.ndarray:
        """``R(t+1, ≤t) = R(t, ≤t) − η (Γ(t, ·) + λ) R``: stored by :meth:`_advance`, and the
        weights of the next memory term in :meth:`_history_pass`."""
        tm, t1m = t * self.m, (t + 1) * self.m
        G = Gam.copy()
        G[:, tm:t1m] += self.lam * self.eye
        return self.Rb[self._blk(t), :t1m] - self.eta * (G @ self.Rb[:t1m, :t1m])

    def _history_pass(self, t: int, g: np.ndarray, R_row: np.ndarray) -> np.ndarray:
        """``E[g^t g^{uᵀ}]/δ`` for ``u ≤ t`` (``(1, m, (t+1)m)``), and, for ``t < T``, the memory
        term ``−(η/δ) Σ_{u≤t} R(t+1, u+1) g^u`` of the next step's fields (kept for
        :meth:`_fields`), in one pass over the stored ``g`` history.

        The two products contract the history ``(t+1)m × N`` along different axes; done in
        column blocks that stay in cache, the history is read from memory once a step instead
        of twice. ``R(t+1, ·)`` depends on ``Γ(t, ·)`` and not on ``E[g g]``, which is what
        allows it. ``R_row`` is ``R(t+1, ≤t)`` (:meth:`_next_R_row`). Up to width
        :attr:`GEMV_MAX_WIDTH` each block is read by ``2m`` matrix-vector products, which
        stream it at close to the memory bandwidth; a matrix product with ``m`` columns
        packs its operands and ran at half that at width 2."""
        m, N = self.m, self.N
        t1m = (t + 1) * m
        dt = self.Z.dtype
        H = self.Gh[:t1m]
        if t >= self.T:
            return (H @ np.ascontiguousarray(g.T, dtype=dt)).T.astype(float)[None] / (self.N * self.delta)
        coef = np.empty((m, t1m))
        coef[:, : t1m - m] = R_row[:, m:t1m]  # R(t+1, u+1), u < t
        coef[:, t1m - m:] = self.eye  # R(t+1, t+1) = I
        coef = (-(self.eta / self.delta) * coef).astype(dt)
        mem = np.empty((m, N), dtype=dt)
        if m <= self.GEMV_MAX_WIDTH:
            # one matrix-vector product per neuron and per product on a column block of about
            # 4 MiB: the block is read from memory once and from the cache 2m − 1 times. A
            # matrix product with m columns packs its operands: a width-2 draw was 1.5× slower
            # (python benchmarks/bench_draw.py --compare gemv)
            gv = self.Gh[t * m:t1m]  # g^t as stored by _moments, (m, N) in the path dtype
            gg = np.zeros((m, t1m))
            width = max(256, (1 << 22) // max(1, t1m * H.itemsize))
            for j in range(0, N, width):
                blk = H[:, j:j + width]
                for i in range(m):
                    gg[i] += blk @ gv[i, j:j + width]
                    mem[i, j:j + width] = coef[i] @ blk
            self.memory_next = (t + 1, mem)
            return gg[None] / (self.N * self.delta)
        gT = np.ascontiguousarray(g.T, dtype=dt)  # (N, m)
        width = max(256, (1 << 19) // max(1, t1m * H.itemsize))  # a block of about 512 KiB
        if width >= N:
            gg = (H @ gT).astype(float)
            mem = coef @ H
        else:
            gg = np.zeros((t1m, m))
            for j in range(0, N, width):
                blk = H[:, j:j + width]
                gg += blk @ gT[j:j + width]
                mem[:, j:j + width] = coef @ blk
        self.memory_next = (t + 1, mem)
        return gg.T[None] / (self.N * self.delta)

    def _compact_pass(self, t: int, g: np.ndarray, Gam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``history="compact"``: the row ``E[g^t mem_jᵀ]`` (``(m, (t+1)m)``, zero where not
        needed) and ``Cg(t, t)/δ``; for ``t < T`` it also advances the memory term to ``t+1``.

        With ``mem_v = −(η/δ) Σ_{u<v} R(v, u+1) g^u`` (the memory term of the fields at ``v``),
        the recursion ``R(t+1, ·) = R(t, ·) − η (Γ(t, ·) + λ) R`` (:meth:`_next_R_row`) gives

            mem_{t+1} = mem_t − η Σ_v (Γ(t, v) + λ δ_{vt}) mem_v − (η/δ) g^t,

        and the term ``−η Σ_{u<t} Cg(t, u) R(j, u+1)/δ`` of ``Q(t+1, j)`` (``Nrow`` of
        :meth:`_advance`) is ``E[g^t mem_jᵀ]``. The Stein ``Γ(t, v)`` is zero at null
        innovations ``v``, and ``Q(t+1, j)`` is read later only at non-null ``j`` (the Cholesky
        rows, ``Γ Q``) and at ``j = t`` (the next ``Q(t+1, t+1)``), so both products need the
        memory terms at the non-null innovations only: one pass over ``n_z × N`` instead of
        ``(t+1)m × N``, in column blocks as :meth:`_history_pass`."""
        m, N = self.m, self.N
        tm, t1m = t * m, (t + 1) * m
        dt = self.Z.dtype
        nz = self.n_z
        rows = self.z_rows[:nz]
        S = self.Mh[:nz]
        gv = np.ascontiguousarray(g, dtype=dt)
        Egm = np.zeros((m, nz))
        advance = t < self.T
        if advance:
            Gz = (-self.eta * Gam[:, rows]).astype(dt)  # (m, n_z)
            P = np.zeros((m, N), dtype=dt)
        if nz:
            width = max(256, (1 << 22) // max(1, nz * S.itemsize))
            for j in range(0, N, width):
                blk = S[:, j:j + width]
                if m <= self.GEMV_MAX_WIDTH:
                    for i in range(m):
                        Egm[i] += blk @ gv[i, j:j + width]
                        if advance:
                            P[i, j:j + width] = Gz[i] @ blk
                else:
                    Egm += (blk @ gv[:, j:j + width].T).T
                    if advance:
                        P[:, j:j + width] = Gz @ blk
        Nrow = np.zeros((m, t1m))
        Nrow[:, rows] = Egm / N
        Nrow[:, tm:t1m] = (g @ self.mem.T) / N  # the memory term of step t itself, in float64
        Ctt = (g @ g.T) / (N * self.delta)
        if advance:  # in place: the rows kept in Mh are copies
            if self.lam:
                self.mem *= 1.0 - self.eta * self.lam
            self.mem += P
            self.mem -= (self.eta / self.delta) * g
        return Nrow, Ctt

    def _advance(self, t: int, Gam: np.ndarray, Gam_b: np.ndarray, Cn_b: np.ndarray | None,
                 EVg_b: np.ndarray, g_b: np.ndarray, R_row: np.ndarray,
                 compact: tuple[np.ndarray, np.ndarray] | None = None) -> bool:
        """Store row ``t`` of ``Γ, Cg`` and advance ``Q, R, M, b`` to ``t+1``; False if non-finite.

        The per-batch arrays (``Gam_b, Cn_b, EVg_b``) are advanced beside the pooled ones for
        the batch errors; with ``errors="none"`` only the pooled ones are. ``compact``: the
        ``(E[g^t memᵀ], Cg(t,t)/δ)`` of :meth:`_compact_pass` in place of ``Cn_b``."""
        m, eta, lam, held, eye = self.m, self.eta, self.lam, self.held, self.eye
        blk, blk2 = self._blk(t), self._blk(t + 1)
        tm, t1m = t * m, (t + 1) * m
        if compact is not None:  # Cg(t, ·) is known on its diagonal block only
            Cn_b = np.full((1, m, t1m), np.nan)
            Cn_b[0, :, tm:t1m] = compact[1]
        pooled = self.pooled_only  # errors="none": no per-batch arrays (their errors stay NaN)
        EVg = EVg_b.mean(axis=0)  # (the batches' E[V* gᵀ] are formed even when pooled)
        if pooled:  # E[g gᵀ] is the pooled one itself
            Cn = Cn_b[0]
            Gam_b, Cn_b, EVg_b = Gam_b[:0], Cn_b[:0], EVg_b[:0]
            self.Gb_err[blk, :t1m] = np.nan
        else:
            Cn = Cn_b.mean(axis=0)
            self.Gb_err[blk, :t1m] = _batch_se(Gam_b)
        self.Gb[blk, :t1m] = Gam
        self.Cb[blk, :t1m] = Cn * self.delta
        self.Cb[:t1m, blk] = (Cn * self.delta).T
        # stack the overall estimate (index 0) with the per-batch ones
        Gt = np.concatenate([Gam[None], Gam_b])  # (B+1, m, t1m)
        Gt[:, :, tm:t1m] += lam * eye
        Cs = np.concatenate([Cn[None], Cn_b])
        Qtt_ = self.Qb[:t1m, :t1m]
        if compact is None:
            Nrow = -eta * (Cs[:, :, :tm] @ self.Rb[:t1m, m:t1m].T)  # (B+1, m, t1m); R(u, b+1) blocks
        else:
            Nrow = compact[0][None]
        GQ = Gt @ Qtt_
        F = Nrow + GQ  # E[φ ω^{≤tᵀ}]
        GtT = Gt.transpose(0, 2, 1)
        NG = Nrow @ GtT
        Ephi = Cs[:, :, tm:t1m] + NG + NG.transpose(0, 2, 1) + GQ @ GtT
        Ft = F[:, :, tm:t1m]
        Qnext = self.Qb[blk, blk][None] - eta * (Ft + Ft.transpose(0, 2, 1)) + eta**2 * Ephi
        Qnext = (Qnext + Qnext.transpose(0, 2, 1)) / 2
        Qrow = self.Qb[blk, :t1m] - eta * F[0]  # Q(t+1, ≤t)
        Mt = self.M[t]
        Mnext = (1 - eta * lam) * Mt[None] - eta * EVg_b
        Mnext_all = (1 - eta * lam) * Mt - eta * EVg
        Mnext[:, held, :] = 0.0
        Mnext_all[held, :] = 0.0
        # ‖∇L‖_F: parallel part (held rows excluded, as in projected GD) + orthogonal part
        par_b = EVg_b + lam * Mt[None]
        par_b[:, held, :] = 0.0
        par = EVg + lam * Mt
        par[held, :] = 0.0
        self.out["grad_norm"][t] = math.sqrt(max(float((par**2).sum() + np.trace(Ephi[0])), 0.0))
        if not pooled:
            gn_b = np.sqrt(np.clip((par_b**2).sum(axis=(1, 2)) + np.trace(Ephi[1:], axis1=1, axis2=2),
                                   0.0, None))
            self.out["grad_norm_err"][t] = _batch_se(gn_b[:, None])[0]
        self.Qb[blk2, :t1m] = Qrow
        self.Qb[:t1m, blk2] = Qrow.T
        self.Qb[blk2, blk2] = Qnext[0]
        self.Rb[blk2, :t1m] = R_row
        self.Rb[blk2, blk2] = eye
        self.M[t + 1] = Mnext_all
        if not pooled:
            self.M_err[t + 1] = _batch_se(Mnext)
        if self.problem.bias:  # b_{t+1} = b_t − η E[g^t]
            Eg_batches = g_b.mean(axis=2)  # (B, m)
            self.bvec[t + 1] = self.bvec[t] - eta * Eg_batches.mean(axis=0)
            self.b_err[t + 1] = _batch_se(self.bvec[t][None] - eta * Eg_batches)
        if pooled:
            self.out["cosine"][t] = largest_cosines(Mt[None], self.Qb[blk, blk][None])[0]
        else:  # cosine at t (all paths) and the batch spread of the cosine at t+1, in one call
            self.Q_err[t + 1] = _batch_se(Qnext[1:])
            cos = largest_cosines(np.concatenate([Mt[None], Mnext]),
                                  np.concatenate([self.Qb[blk, blk][None], Qnext[1:]]))
            self.out["cosine"][t] = cos[0]
            if t + 1 <= self.T:
                self.out["cosine_err"][t + 1] = _batch_se(cos[1:, None])[0]
        new = (Gam, Cn[:, tm:t1m], Nrow, Qnext[0], Qrow, Mnext_all, self.Rb[blk2, :t1m], self.bvec[t + 1])
        # one sum first (an overflowing sum of finite values is checked entry by entry)
        with np.errstate(over="ignore", invalid="ignore"):
            total = sum(float(np.sum(a)) for a in new)
        return math.isfinite(total) or all(np.all(np.isfinite(a)) for a in new)

    def _lost_psd(self, t: int) -> str:
        """A message if ``Q(t, t)`` (from the kernel recursion, not a sample moment) has an
        eigenvalue below ``−PSD_RTOL`` times its largest diagonal entry, else ``""``.

        A covariance cannot do that; when it does the recursion has diverged. Seen with the
        Stein responses at width 2 over long horizons (GeLU, ``y = z² + 0.5 ε``, δ = 40,
        restricted dynamics, 10⁴ paths: ``Q(t, t)`` healthy to step 134, smallest eigenvalue
        −1.28 of 1.96 at step 137, then ``1e68`` by step 200), where the run had reported
        success and the threshold search read a law of ``D`` from it.

        The cause is Monte Carlo noise amplified by the Stein solve: it divides by the
        innovations' standard deviations, and innovations with a variance just above
        ``null_rtol·Q(t,t)_jj`` (``1e-4``) carry ``Γ`` entries of order ``10⁷`` whose noise the
        gauge argument of the module docstring no longer cancels once ``R`` has compounded
        them. With ``null_rtol = 1e-3`` the same runs stay positive semidefinite (7 of 7 runs,
        seeds 0–2 at 2000 paths and 0–3 at 10⁴, against 1 of 7 at 1e-4) and their ``Q`` agrees with the
        ``1e-4`` runs that survive (``docs/findings.md`` §4.9)."""
        blk = self._blk(t)
        Q = self.Qb[blk, blk]
        scale = float(np.max(np.abs(np.diag(Q))))
        lo = float(np.linalg.eigvalsh((Q + Q.T) / 2)[0])
        if lo < -PSD_RTOL * scale:
            hint = ""
            if self.cfg.method == "stein":
                hint = (f"; Stein divides by innovations just above null_rtol={self.cfg.rtol:g}, "
                        f"so try a larger null_rtol (1e-3 cured the width-2 cases seen) or more "
                        f"paths")
            return (f"the DMFT diverged at step {t}: Q(t,t) is not positive semidefinite (smallest "
                    f"eigenvalue {lo:.3g}, largest diagonal entry {scale:.3g}){hint}")
        return ""

    # ------------------------------------------------------------------ the loop
    def run(self, settings: dict[str, Any], t_start: float) -> DMFTResult:
        status, message, last = Status.SUCCESS, "", self.T
        steps = range(self.T + 1)
        if self.cfg.progress:
            from tqdm import tqdm

            steps = tqdm(steps, desc=f"DMFT ({self.cfg.method})", unit="step")
        stopped = gave_up = None
        give_up = self.cfg.give_up_factor
        window = give_up_window(self.T)
        for t in steps:
            blk = self._blk(t)
            G = self.M[t].T @ self.M[t] + self.Qb[blk, blk]
            self.cos_dir[t] = direction_projections(self.M[t], G)
            if self.cfg.stop_cosine is not None:
                now = self.cos_dir[t, self.stop_rows].min()
                if now > self.cfg.stop_cosine:
                    stopped = t
                elif give_up is not None and t >= window and gives_up(
                        now, self.cos_dir[t - window, self.stop_rows].min(), t, self.T, give_up,
                        self.cfg.stop_cosine):
                    gave_up = t
                if stopped is not None or gave_up is not None:
                    self.out["cosine"][t] = largest_cosine(self.M[t], self.Qb[blk, blk])
                    break
            null = self._cholesky_row(t)
            z, V, g = self._fields(t, null)
            # one sum, not a mask of N·m entries; an overflowing sum of finite values is checked again
            if not math.isfinite(float(g.sum())) and not np.all(np.isfinite(g)):
                status, message, last = Status.NONFINITE, f"non-finite gradient g at step {t}", t - 1
                break
            D = self._train_observables(t, V)
            step, Cn_b, EVg_b, g_b = self._moments(t, z, g, null, D)
            Gam, Gam_b = self.estimator.row(step)
            R_row = self._next_R_row(t, Gam)  # R(t+1, ≤t)
            compact = None
            if self.compact:  # the memory terms at the non-null innovations, one pass
                compact = self._compact_pass(t, g, Gam)
            elif Cn_b is None:  # errors="none": E[g g] and the next memory term in one pass
                Cn_b = self._history_pass(t, g, R_row)
            finite = self._advance(t, Gam, Gam_b, Cn_b, EVg_b, g_b, R_row, compact)
            self.out["test_loss"][t], self.out["test_loss_err"][t] = _test_loss(
                self.problem, self.cfg.test_loss, self.M[t], self.Qb[blk, blk],
                self.bvec[t] if self.problem.bias else None, self.test)
            if not finite:
                status, message, last = Status.NONFINITE, f"non-finite kernels at step {t}", t
                break
            lost = self._lost_psd(t + 1)
            if lost:
                status, message, last = Status.FAILED, lost, t - 1
                break
        self.out["cosine_err"][0] = 0.0
        return self._assemble(status, message, last, settings, t_start, stopped, gave_up)

    def _assemble(self, status: Status, message: str, last: int, settings: dict[str, Any],
                  t_start: float, stopped: int | None = None, gave_up: int | None = None
                  ) -> DMFTResult:
        m, n1 = self.m, self.T + 1

        def blocks(A: np.ndarray) -> np.ndarray:
            return A[: n1 * m, : n1 * m].reshape(n1, m, n1, m).transpose(0, 2, 1, 3).copy()

        Qfull = self.Qb
        if self.compact:  # Q(s, u) with u null and s ≥ u + 2 was not computed (_compact_pass)
            idx = np.arange(self.Qb.shape[0])
            step = idx // m
            nm = np.zeros(idx.size, dtype=bool)
            nm[: self.null_mask.size] = self.null_mask
            lost = nm[None, :] & (step[:, None] >= step[None, :] + 2)
            Qfull = np.where(lost | lost.T, np.nan, self.Qb)
        Qk, Rk, Gk, Ck, Gek = (blocks(A) for A in (Qfull, self.Rb, self.Gb, self.Cb, self.Gb_err))
        Mk, bk = self.M[:n1].copy(), self.bvec[:n1].copy()
        out = self.out
        cos_dir = self.cos_dir.copy()
        def blank_from(step: int) -> None:  # nothing from ``step`` on was computed (or it failed)
            for A in (Gk, Ck, Gek):
                A[step:, :] = np.nan
                A[:, step:] = np.nan
            for A in (Qk, Rk):
                A[step + 1:, :] = np.nan
                A[:, step + 1:] = np.nan
            Mk[step + 1:] = np.nan
            bk[step + 1:] = np.nan
            for arr in out.values():
                arr[step:] = np.nan

        end = stopped if stopped is not None else gave_up
        if end is not None:  # the first passage, or given up: the cosine at that step is kept
            cos_t = out["cosine"][end]
            blank_from(end)
            out["cosine"][end] = cos_t
        if status is not Status.SUCCESS:
            bad = max(last + 1, 0)
            cos_dir[bad:] = np.nan
            blank_from(bad)
        T1 = self._blk(self.T + 1)
        diagnostics = {
            "n_paths": self.N,
            "innovation_min_pivot": self.min_pivot,
            "zero_variance_innovations": self.n_null,
            "stein_regressed": np.zeros(n1, dtype=bool),
            "error_model": "none (errors='none')" if self.pooled_only else
                           "batch means over n_batches, conditional on earlier kernels "
                           "(propagated kernel error not included)",
            "test_loss_source": self.cfg.test_loss,
            "Q_next": self.Qb[T1, T1].copy() if status is Status.SUCCESS and end is None else None,
        } | self.estimator.diagnostics()
        if self.cfg.stop_cosine is not None:
            diagnostics["stopped_at"] = stopped
        if self.cfg.give_up_factor is not None:
            diagnostics["gave_up_at"] = gave_up
        return DMFTResult(
            status=status, message=message, settings=settings, diagnostics=diagnostics,
            elapsed=time.perf_counter() - t_start,
            Q=Qk, Gamma=Gk, R=Rk, Cg=Ck, M=Mk, Gamma_err=Gek, M_err=self.M_err[:n1].copy(),
            Q_err=self.Q_err[:n1].copy(), b=bk, b_err=self.b_err[:n1].copy(), kept=self.kept,
            cosine_per_direction=cos_dir, **out,
        )


# --------------------------------------------------------------------------- solver
_ERR_FIELDS = (("train_loss", "train_loss_err"), ("test_loss", "test_loss_err"),
               ("grad_norm", "grad_norm_err"), ("cosine", "cosine_err"),
               ("Gamma", "Gamma_err"), ("M", "M_err"), ("b", "b_err"))

_REPLICATE_MODEL = ("replicates: std over n_batches independent solves of n_paths/n_batches "
                    "paths, divided by sqrt(n_batches)")


def _solve_once(problem: Problem, delta: float, cfg: DMFTSettings, root: np.random.SeedSequence,
                test: dict[str, np.ndarray] | None) -> DMFTResult:
    """One forward pass with batch-means errors (``test``: the test sample, drawn if None)."""
    t_start = time.perf_counter()
    settings = {"problem": problem.to_dict(), "delta": delta} | cfg.to_dict(problem)
    if cfg.seed is None:
        settings["seed"] = seed_record(root)
    return _Run(problem, delta, cfg, root, test).run(settings, t_start)


def _replicate_errors(res: DMFTResult, problem: Problem, delta: float, cfg: DMFTSettings,
                      root: np.random.SeedSequence, test: dict[str, np.ndarray] | None) -> DMFTResult:
    """``res`` with its ``*_err`` arrays replaced by the spread of ``n_batches`` replicate solves.

    Replicate ``j`` has ``n_paths/n_batches`` paths and seed ``child(root, 1 + j)``; all of
    them evaluate the test loss on the same test sample (common random numbers), so their
    spread is the propagated kernel error only, and the main solve's own test-sample error
    is added to it.
    """
    B, N = cfg.n_batches, res.diagnostics["n_paths"]
    n_test = min(N, 2**14)
    shared = None if test is None else {key: v[..., :n_test] for key, v in test.items()}
    rep_cfg = dataclasses.replace(
        cfg, n_paths=max(N // B, 8), n_batches=2, errors="batch", keep_samples_at=(), progress=False,
        throw=False, null_rtol=cfg.rtol, test_loss="none" if cfg.test_loss == "none" else "mc")
    reps = []  # only what the spread needs (a replicate's full result holds five (T+1)² kernels)
    for j in range(B):
        r = _solve_once(problem, delta, rep_cfg, child(root, 1 + j), shared)
        if r.ok:
            reps.append({val: getattr(r, val) for val, _ in _ERR_FIELDS} | {"q_diag": r.q_diag})
    conditional = {err: getattr(res, err) for _, err in _ERR_FIELDS} | {"Q_err": res.Q_err}
    diagnostics = res.diagnostics | {"conditional_err": conditional, "replicates": len(reps),
                                     "error_model": _REPLICATE_MODEL}
    warnings = list(res.warnings)
    if len(reps) < 2:
        warnings.append(f"only {len(reps)} of {B} replicate solves succeeded: the errors are NaN")
        errs = {err: np.full_like(getattr(res, err), np.nan) for _, err in _ERR_FIELDS}
        errs["Q_err"] = np.full_like(res.Q_err, np.nan)
    else:
        n = len(reps)
        with np.errstate(over="ignore", invalid="ignore"):
            errs = {err: np.stack([r[val] for r in reps]).std(axis=0, ddof=1) / math.sqrt(n)
                    for val, err in _ERR_FIELDS}
            errs["Q_err"] = np.stack([r["q_diag"] for r in reps]).std(axis=0, ddof=1) / math.sqrt(n)
        errs["test_loss_err"] = np.hypot(errs["test_loss_err"], res.test_loss_err)
    return dataclasses.replace(res, diagnostics=diagnostics, warnings=warnings, **errs)


def solve_dmft(problem: Problem, delta: float, settings: DMFTSettings | None = None,
               **overrides: Any) -> DMFTResult:
    """Solve the discrete-time DMFT of GD for ``problem`` at sample ratio ``delta``.

    Parameters
    ----------
    problem : Problem
        Target, network, loss, ``η``, ``λ``, initialisation and ``hold_zero``
        (rows of ``M_t`` zeroed at every step, mirroring projected GD). With
        ``problem.bias`` the deterministic bias ``b_t`` is evolved too
        (``DMFTResult.b``).
    delta : float
        ``δ = n/d``.
    settings : DMFTSettings, optional
        The solver's options (defaults: ``DMFTSettings()``).
    **overrides
        Fields of :class:`DMFTSettings` given as keywords (``n_paths``, ``seed``,
        ``steps``, ``method``, ``antithetic``, ``reflect``, ``n_batches``,
        ``keep_samples_at``, ``errors``, ``null_rtol``, ``test_loss``,
        ``stein_regression``, ``progress``, ``blas_threads``, ``throw``); they
        replace the corresponding fields of ``settings``.

    Returns
    -------
    DMFTResult

    Raises
    ------
    ValueError
        On invalid options, or if the estimated memory
        (:meth:`DMFTSettings.memory_bytes`) exceeds the memory available.
    SolverError
        If ``settings.throw`` and the solve produced non-finite values.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> p = Problem.build(target="z**2", activation="gelu", eta=0.5, steps=5)
    >>> r = solve_dmft(p, 4.0, n_paths=2000, seed=0, errors="batch", keep_samples_at=(5,))
    >>> r.ok, r.Q.shape, r.law(5).n
    (True, (6, 6, 1, 1), 2000)
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    delta = check_delta(delta)
    if settings is not None and not isinstance(settings, DMFTSettings):
        raise ValueError(f"settings must be a DMFTSettings or None, got {settings!r}")
    names = {f.name for f in dataclasses.fields(DMFTSettings)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise TypeError(f"solve_dmft got unexpected keyword(s) {unknown}; the options are the fields of "
                        f"DMFTSettings: {sorted(names)}")
    cfg = settings or DMFTSettings()
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    cfg.check(problem)
    need, avail = cfg.memory_bytes(problem), available_memory_bytes()
    if avail is not None and need > avail:
        raise ValueError(
            f"solve_dmft would need about {need / 2**30:.1f} GiB (n_paths={cfg.total_paths()}, "
            f"steps={cfg.resolved_steps(problem)}, m={problem.m}, method={cfg.method!r}, "
            f"errors={cfg.errors!r}) but {avail / 2**30:.1f} GiB are available; use fewer paths or steps"
        )
    t_start = time.perf_counter()
    root = as_seed_sequence(cfg.seed)
    # overflow in a diverging run is reported by the status (NONFINITE), not by numpy warnings
    with blas_threads_limit(cfg.blas_threads), np.errstate(over="ignore", invalid="ignore"):
        test = _test_sample(problem, cfg.total_paths(), as_generator(child(root, 0))) \
            if cfg.test_loss == "mc" else None
        res = _solve_once(problem, delta, cfg, root, test)
        if cfg.errors == "replicate" and res.ok:
            res = _replicate_errors(res, problem, delta, cfg, root, test)
    res = dataclasses.replace(res, elapsed=time.perf_counter() - t_start)
    if cfg.throw and not res.ok:
        raise SolverError(f"DMFTResult {res.status.value}: {res.message}", res)
    return res
