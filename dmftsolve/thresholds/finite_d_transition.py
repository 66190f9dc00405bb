"""GD's finite-d success probability and its 50 % point δ_50(d) from the DMFT (issue 9).

Construction: the finite-n DMFT
    At finite ``d`` GD's hard overlap ``m_t = √d M_t`` is driven by two ``O(1)`` sources
    (:mod:`dmftsolve.dynamics.hard_overlap`): the random start ``m_0 ~ N(0, q0)`` and the
    quenched finite-``n`` force ``ν*`` with ``E[ν*_t ν*_s] = (1/δ) E[z² g^t g^s]``. One *draw*
    of GD's transition is the unrestricted DMFT (:func:`~dmftsolve.dynamics.dmft.solve_dmft`)
    started at ``M_0 = m_0/√d`` with ``N = n = δd`` Monte Carlo paths, **unpaired**
    (``antithetic=False``, no reflection). Its overlap update
    ``M_{t+1} = M_t − η (1/N) Σ_p z_p g_p^t`` is then a sum over ``n`` independent samples,
    exactly as in GD, so at ``M = 0`` its fluctuation has the covariance of ``ν*``
    (checked against GD: ``Var m_t`` of the force alone, ``tests/test_transition.py``); once
    ``M ≠ 0`` the same sum carries the finite-``n`` curvature along ``θ*`` and the
    law of ``D`` at its physical sample size, and the DMFT follows the escape non-linearly.
    ``P(success | δ, d, T)`` is the fraction of draws whose cosine exceeds 1/2 by step ``T``
    (first passage; GD's escapes are permanent, and the ``N``-path solve can blow up long
    after an escape, so the final value is not used), with ``m_0`` stratified over the
    quantiles of ``N(0, q0)`` and an independent path seed per draw.

    What it does not contain: the ``N``-path Monte Carlo noise of the orthogonal kernels
    (``Q``, ``Γ``, ``R``) is also ``O(N^{-1/2})``, as GD's ``O(d^{-1/2})`` fluctuations are,
    but not with the same law; the comparison with GD (``validation/transition_vs_simulation.py``)
    is the test.

Constructions (``TransitionSettings.construction``)
    ``"forced"`` (default): ``n_paths`` paths paired by reflection ``z → −z`` (``reflect=(0,)``)
    for the kernels, and the overlap update driven by GD's finite-``n`` gradient through quenched
    bootstrap weights of ``n = δd`` samples (``DMFTSettings.force_samples``). The force ``ν*``,
    the finite-``n`` curvature along ``θ*`` and the law of ``D`` at ``n`` act on ``M`` exactly as
    in ``"finite_n"``, but the orthogonal kernels carry only the ``n_paths``-path Monte Carlo
    noise, which GD does not have, instead of that of ``n`` paths.
    ``"finite_n"``: the construction above with ``N = n`` unpaired paths (everything at GD's
    sample size, kernel noise included; its curves are 1.4–1.7× wider than GD's,
    ``docs/findings.md``).
    ``"initial"``: paired paths without the force, so only ``m_0`` seeds the hard direction;
    the difference from the others isolates the ``O(1/√d)`` finite-``n`` effects.

Any width and any number of directions
    The construction is the same for ``m`` neurons and ``k`` target directions: a draw starts at
    ``M_0 = X/√d`` with ``X`` a ``k×m`` matrix of ``N(0, q0)`` entries (the overlaps of a random
    start; the Frobenius norm of its hard block stratified over its χ law), ``Q_0 = q0 I_m``; the
    paths are paired by a joint reflection of the **hard** directions (:func:`transition_directions`:
    the label must be invariant under it), and the force of ``n`` samples acts on every
    direction and neuron. Easy directions are learned by the DMFT itself, from their own random
    start. Success is defined once (:mod:`dmftsolve.success`): every hard direction's projection
    onto ``span(W)`` above ``success_cosine`` (for ``m = k = 1``, the cosine). Not included: the
    ``O(1/√d)`` off-diagonal fluctuation of the random start's Gram ``Q_0``.

δ_50 is the maximum-likelihood probit fit ``P = Φ((δ − δ_50)/w)`` to all draws, with a
bootstrap standard error on a grid and the posterior standard deviation (over the curve's
width as well) for the search (:func:`probit_fit`). Without a grid, :func:`transition` finds the
transition itself (:func:`adaptive_search`): batches of draws that first bracket the
transition from ``start`` and are then placed at ``δ_50 ± 0.8 w`` until the error reaches
``tol``. Each draw stops at its first passage (``DMFTSettings.stop_cosine``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from dmftsolve.checks import check_delta, check_integer
from dmftsolve.dynamics.dmft import give_up_window, gives_up
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status, binomial_error
from dmftsolve.thresholds.delta50 import probit_fit, search_delta_50

__all__ = ["TransitionSettings", "SuccessProbability", "TransitionCurve", "success_probability",
           "transition", "probit_fit", "adaptive_search", "transition_directions", "draw_starts",
           "default_kernel_paths", "resolve_settings", "give_up_step", "GIVE_UP_FACTOR",
           "label_is_uncentred", "label_moments", "recommended_kernel_paths"]


_CONSTRUCTIONS = {
    "forced": "finite-n force on reflection-paired kernels (weights of n = δd samples; see force_weights)",
    "finite_n": "finite-n DMFT (N = n unpaired paths)",
    "initial": "initial overlap only (reflection-paired paths)",
    "quenched": "GD's gradient over n = δd quenched label samples, kernels over copies of them "
                "with independent innovations (reflection-paired)",
}


#: :attr:`TransitionSettings.give_up_factor`'s default (since 0.9.0): a draw that has not passed
#: by step ``t ≥ T/4`` ends as a failure once even this many times its growth over the last
#: ``T/8`` steps, sustained to ``T``, would leave it more than 0.1 below ``success_cosine``.
#: Of 2, 3, 4 and 6, 6 was the smallest that stopped none of the 64 draws that passed among 128
#: (GeLU, ``z² − 1``, d = 2000; the rule before its margin was added), raised to 20 for margin;
#: on 1520 draws of thirteen problems none of the 757 that passed needed more than 3.7 with the
#: margin (``docs/findings.md`` §9.10).
GIVE_UP_FACTOR = 20.0


@dataclass(frozen=True)
class TransitionSettings:
    """Settings of :func:`success_probability` and :func:`transition`.

    Attributes
    ----------
    steps : int, optional
        GD steps ``T`` (default: the problem's).
    draws : int
        DMFT draws per δ on a grid, or per batch of the adaptive search (stratified
        ``m_0``, independent path seeds). Default 8, as ``dmftsolve transition --draws``
        (24 before 0.7.1: the same seed gave another search in Python than on the
        command line).
    seed : int
        Root seed; draw ``k`` at ``(δ, d)`` uses ``[seed, round(1000 δ), d, k]``.
    success_cosine : float
        Success: cosine at ``T`` above this (GD's criterion: 1/2).
    construction : {"forced", "finite_n", "initial"}
        How a draw carries GD's finite-``n`` sources (module docstring): ``"forced"``
        (reflection-paired kernels + bootstrap force of ``n`` samples), ``"finite_n"``
        (``N = n`` unpaired paths), ``"initial"`` (no finite-``n`` sources).
    n_paths : int, optional
        Kernel paths of the ``"forced"`` and ``"initial"`` constructions. None (default):
        :func:`default_kernel_paths` of the problem's width and label, 8·10⁴ at m = 2 and
        2·10⁴ otherwise (since 0.3.0; before, 2·10⁴ at every width), and 8·10⁴ at m = 1 on a
        label with a non-zero mean (:func:`label_is_uncentred`; since 0.10.0).
    copies : int
        ``"quenched"``: paths per label sample and reflection sign (``N = 2·copies·n``).
    workers : int
        Processes for the draws in :func:`transition` (1: in this process). Each draw keeps
        one BLAS thread; the result does not depend on ``workers``.
    paths_per_sample : float, optional
        If given, the ``"forced"`` and ``"initial"`` kernels use ``round(paths_per_sample · n)``
        paths (``n = δd``) instead of ``n_paths``: the law of the paths at GD's sample size.
    force_weights : {"paired", "poisson"}
        ``"forced"``: the weights of the force (``DMFTSettings.force_weights``). ``"paired"``
        (default) gives the curvature along θ* GD's noise ``Var(c)/n`` when ``N ≥ 2n``
        (beyond that, ``paths_per_sample=2`` keeps ``N = 2n``; :func:`curvature_excess`
        says what is left); ``"poisson"`` (the default before; kept for the committed
        comparisons) adds the paths' own ``2 Var(c)/N``. Measured in ``docs/findings.md``
        ("paired force weights").
    tol : float
        Adaptive search (:func:`transition` without ``deltas``): stop once the standard error
        of δ_50 is at most this.
    max_draws : int
        Adaptive search: the largest number of draws in all; the result says so if ``tol``
        was not reached (600 since 0.5.0, was 400: GeLU on ``z²`` at d = 1000, a curve of
        probit width 2, needed 240, 336 and over 400 draws for an error of 0.15 with seeds 2, 1, 0).
    start : float, optional
        Adaptive search: the first δ tried (default 6).
    stop_at_passage : bool
        End each draw's solve at its first passage (``DMFTSettings.stop_cosine``); the counts do
        not depend on it (a draw's steps up to the passage are the same), only the cost.
    path_dtype : {"float32", "float64"}
        Precision of each draw's stored path history (``DMFTSettings.path_dtype``). float32
        (the default since 0.3.0) makes a draw 1.6–1.9× faster than float64. Its rounding
        flips some of the Stein solve's zero-variance decisions, which moves a draw's
        late-time kernels by about as much as another seed would, but not the curve: on 192
        paired draws (GeLU, ``z² − 1``, m = 1 and 2, d = 2000) 191 had the same outcome and
        δ_50 moved by 0.02 and 0.00 (errors 0.09 and 0.22; ``docs/findings.md`` §7).
        ``"float64"`` gives the draws of earlier versions (up to the order of summation).
    stein_regression : bool
        Estimate each draw's responses by regressing ``g`` on the innovations
        (``DMFTSettings.stein_regression``) instead of the plain Stein mean (the default since
        0.5.0). The plain mean's own noise adds ``η² Σ_u Var(Ŝ_u)`` to ``Q(t+1,t+1)`` every
        step, which pushes the kernels up at late times like ``1/N`` and leaves too few late
        escapes; the regression removes the part of ``g`` linear in the innovations (about
        55 % of its variance) from that noise. On GeLU ``z²`` at d = 1000 the default search
        moved from 11.35 ± 0.14 to 11.05 ± 0.15 (GD 10.72 ± 0.15), on ``z² − 1`` from a
        four-seed mean of 7.11 to 6.85 (GD 6.89 ± 0.07), for 7 % more per draw
        (``docs/findings.md`` §9.5). ``False`` gives the draws of 0.4.
    history : {"compact", "full"}
        What each draw's paths keep of their past (``DMFTSettings.history``). ``"compact"``
        (the default since 0.7.0): the memory terms at the non-null innovations, advanced by
        the recursion of ``R``; a draw reads about a fifth of the history a step at width 1,
        and is 1.9× cheaper at width 1 and 1.6× at width 2 when run to step 400
        (``benchmarks/bench_draw.py --compare history``). In float64 its overlaps and
        cosines agree with ``"full"`` to 1e-9; in float32 both differ from float64 by
        round-off that flips some zero-variance decisions, by as much as each other.
        ``"full"`` gives the draws of 0.6.
    give_up_factor : float, optional
        With ``stop_at_passage``: end a draw as a failure once even this many times its
        growth over the last ``T/8`` steps, sustained to ``T``, would leave its success
        statistic more than ``GIVE_UP_MARGIN`` (0.1) below ``success_cosine`` (checked from
        step ``T/4``;
        ``DMFTSettings.give_up_factor``). Near δ_50 about half the draws never pass, and they
        cost about 80 % of a search's steps; giving up saves half the steps. Not exact (a draw
        whose growth later speeds up more than this is lost): :data:`GIVE_UP_FACTOR` (the
        default since 0.9.0) was checked on draws that passed, none of which it stopped
        (``docs/findings.md`` §9.10). None: every draw that does not pass runs to ``T``, as
        before 0.9.0.
    """

    steps: int | None = None
    draws: int = 8
    seed: int = 0
    success_cosine: float = 0.5
    construction: str = "forced"
    n_paths: int | None = None
    copies: int = 2
    workers: int = 1
    paths_per_sample: float | None = None
    force_weights: str = "paired"
    tol: float = 0.15
    max_draws: int = 600
    start: float | None = None
    stop_at_passage: bool = True
    path_dtype: str = "float32"
    stein_regression: bool = True
    history: str = "compact"
    give_up_factor: float | None = GIVE_UP_FACTOR

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_integer("steps", self.steps, 1)
        check_integer("draws", self.draws, 2)
        check_integer("seed", self.seed, 0)
        if self.n_paths is not None:
            check_integer("n_paths", self.n_paths, 40)
        check_integer("copies", self.copies, 1)
        check_integer("workers", self.workers, 1)
        pps = self.paths_per_sample
        if pps is not None and (isinstance(pps, bool) or not isinstance(pps, (int, float))
                                or not 0 < pps <= 1000):
            raise ValueError(f"paths_per_sample must be a number in (0, 1000] or None, "
                             f"got {self.paths_per_sample!r}")
        if self.force_weights not in ("poisson", "paired"):
            raise ValueError(f"force_weights must be 'poisson' or 'paired', got {self.force_weights!r}")
        if self.construction not in _CONSTRUCTIONS:
            raise ValueError(f"construction must be one of {sorted(_CONSTRUCTIONS)}, "
                             f"got {self.construction!r}")
        for name in ("tol", "start"):
            v = getattr(self, name)
            if v is None and name == "start":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        check_integer("max_draws", self.max_draws, 2)
        if not isinstance(self.stop_at_passage, bool):
            raise ValueError(f"stop_at_passage must be True or False, got {self.stop_at_passage!r}")
        if not isinstance(self.stein_regression, bool):
            raise ValueError(f"stein_regression must be True or False, got {self.stein_regression!r}")
        if self.path_dtype not in ("float64", "float32"):
            raise ValueError(f"path_dtype must be 'float32' or 'float64', got {self.path_dtype!r}")
        if self.history not in ("full", "compact"):
            raise ValueError(f"history must be 'compact' or 'full', got {self.history!r}")
        if not 0.0 < float(self.success_cosine) < 1.0:
            raise ValueError(f"success_cosine must lie in (0, 1), got {self.success_cosine!r}")
        g = self.give_up_factor
        if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float))
                              or not 1 <= g < math.inf):
            raise ValueError(f"give_up_factor must be a finite number >= 1 or None, got {g!r}")


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class SuccessProbability(Result):
    """``P(success | δ, d, T)``: ``p`` with its binomial error ``p_err``
    (:func:`dmftsolve.results.binomial_error`: the one-sided 95 % bound at 0 or all).

    ``m0`` (draws,) the initial ``√d M_0``; ``final_cosine`` (draws,, the last value before a
    blow-up of the solve if any); ``escape_step``
    (draws,) first step with cosine above ``success_cosine`` (−1 if none). The
    stratification of ``m_0`` makes the binomial error an upper bound.
    """

    _headline = ("p", "p_err")

    delta: float
    d: int
    p: float
    p_err: float
    successes: int
    draws: int
    m0: np.ndarray
    final_cosine: np.ndarray
    escape_step: np.ndarray


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class TransitionCurve(Result):
    """Success curve over δ at one ``d`` and its probit δ_50 (``delta_50 ± delta_50_err``).

    ``width`` is the probit width ``w`` (``P = Φ((δ − δ_50)/w)``); ``points`` the
    :class:`SuccessProbability` of each δ.
    """

    _headline = ("delta_50", "delta_50_err")

    d: int
    deltas: np.ndarray
    p: np.ndarray
    p_err: np.ndarray
    successes: np.ndarray
    draws: np.ndarray
    delta_50: float
    delta_50_err: float
    width: float
    points: tuple[SuccessProbability, ...]

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["points"] = [{k: v for k, v in p.to_dict().items() if k != "settings"} for p in self.points]
        return out


def _draw_seed(seed: int, delta: float, d: int, k: int) -> int:
    ss = np.random.SeedSequence([seed, int(round(1000 * delta)), int(d), int(k)])
    return int(ss.generate_state(1, dtype=np.uint64)[0] % (2**63))


def _start_rng(s: TransitionSettings, delta: float, d: int, batch: int) -> np.random.Generator:
    key = [s.seed, int(round(1000 * delta)), d] + ([batch] if batch else [])
    return np.random.default_rng(key)


def stratified_starts(problem: Problem, delta: float, d: int, s: TransitionSettings,
                      batch: int = 0) -> np.ndarray:
    """One neuron, one direction: the draws' initial ``√d M_0``, ``√q0 Φ⁻¹((k + U_k)/K)``,
    ``k < K = s.draws``, seeded by ``(s.seed, δ, d)`` (and ``batch`` when > 0; stratified, so the
    binomial error of ``p`` is an upper bound)."""
    q0 = float(problem.training.init.q0)
    rng = _start_rng(s, delta, d, batch)
    return math.sqrt(q0) * ndtri((np.arange(s.draws) + rng.random(s.draws)) / s.draws)


def draw_starts(problem: Problem, delta: float, d: int, s: TransitionSettings,
                hard: Sequence[int], batch: int = 0) -> np.ndarray:
    """The draws' initial overlaps ``√d M_0``, shape ``(s.draws, k, m)``.

    Entries ``N(0, q0)`` (a random start's overlaps times ``√d``); the Frobenius norm of the
    hard rows is stratified over its law (``√q0 χ`` with ``k_h m`` degrees of freedom), so the
    binomial error of ``p`` is an upper bound. For ``m = k = 1`` this is
    :func:`stratified_starts` (signed), as before.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> p = Problem.build(target="z1*z2", activation="gelu", m=2)
    >>> draw_starts(p, 4.0, 1000, TransitionSettings(draws=8), (0, 1)).shape
    (8, 2, 2)
    """
    k, m, K = problem.k, problem.m, s.draws
    if k == m == 1:
        return stratified_starts(problem, delta, d, s, batch)[:, None, None]
    from scipy.stats import chi2

    q0 = float(problem.training.init.q0)
    rng = _start_rng(s, delta, d, batch)
    X = rng.standard_normal((K, k, m)) * math.sqrt(q0)
    rows = list(hard)
    H = X[:, rows, :]
    norm = np.sqrt((H**2).sum(axis=(1, 2)))
    u = (rng.permutation(K) + rng.random(K)) / K
    want = np.sqrt(q0 * chi2.ppf(u, df=len(rows) * m))
    X[:, rows, :] = H * (want / np.maximum(norm, 1e-300))[:, None, None]
    return X


def transition_directions(problem: Problem) -> tuple[int, ...]:
    """The hard target directions whose learning decides success, after checking the problem.

    Raises ``ValueError`` unless: ``problem`` has no bias and no ridge; its hard subspace
    (:func:`~dmftsolve.thresholds.directions.split_directions`) is non-empty and spanned by
    coordinate directions; and the label is invariant under the joint reflection of those
    coordinates (so the random start's reflection pairing, and GD's force as a Rademacher sum,
    hold). Returns the hard directions' indices.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> transition_directions(Problem.build(target="z1 + z2**2 - 1", activation="gelu"))
    (1,)
    """
    from dmftsolve.thresholds.directions import split_directions

    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    if problem.bias or problem.training.lam != 0.0:
        raise ValueError("the finite-d transition is implemented without bias and ridge "
                         f"(bias={problem.bias}, lam={problem.training.lam})")
    split = split_directions(problem)
    hard = split.hard_indices
    if hard is None:
        raise ValueError(f"the hard directions of target {problem.target.expr!r} are not coordinate "
                         "directions; write the target in coordinates where they are")
    if not hard:
        raise ValueError(f"target {problem.target.expr!r} has no hard direction (every direction is "
                         "learned in O(1) steps): there is no transition to predict")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((512, problem.k)) * 1.5
    eps = rng.standard_normal(512) if problem.target.noisy else 0.0
    zr = z.copy()
    zr[:, list(hard)] *= -1.0
    y, yr = (np.asarray(problem.labels(a, eps), dtype=float) for a in (z, zr))
    if not np.allclose(y, yr, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(y).max()))):
        names = ", ".join(f"z{j + 1}" if problem.k > 1 else "z" for j in hard)
        raise ValueError(f"the label must be invariant under reflecting its hard direction(s) "
                         f"({names}) jointly, got target {problem.target.expr!r}")
    return tuple(int(j) for j in hard)


#: Default kernel paths of a draw by network width (:func:`default_kernel_paths`). Measured
#: (``docs/findings.md`` §10.1): at m = 2, 2·10⁴ paths left δ_50 above GD's by more than
#: max(0.3, 5 %) in 5 of 9 (case, d) checks and 8·10⁴ in 1 (mean |theory − GD| 0.31 against
#: 0.17); at m = 1, 3 and 4, 2·10⁴ was within in every case run on centred labels.
DEFAULT_KERNEL_PATHS = {2: 80_000}
DEFAULT_KERNEL_PATHS_OTHER = 20_000

#: Kernel paths for a label with a non-zero mean (:func:`label_is_uncentred`), as a multiple of
#: the width's default: the default at width 1 since 0.10.0, and what :func:`label_mean_warning`
#: names at the other widths. On such labels the theory ran high with the centred default and
#: came to GD with 4× at width 1 (GeLU on ``z²`` at d = 1000: six seeds +0.24 ± 0.11 with 2·10⁴
#: paths and +0.03 ± 0.11 with 8·10⁴; r² on ``z²``, ``min(z², 3)``: ``docs/findings.md`` §9.2,
#: §10.4) and closer with 2× at width 2 (``abs(z)``, +0.52 → +0.18, §10.1).
UNCENTRED_PATHS_FACTOR = {1: 4}
UNCENTRED_PATHS_FACTOR_OTHER = 2

#: ``|E[y]|`` above this fraction of ``sd(y)`` makes a label "uncentred"
#: (:func:`label_is_uncentred`; ``z**2``: 0.71; ``abs(z)``: 1.32; ``min(z**2, 3)``: 0.90;
#: ``z**2 - 1``, ``z1*z2``, ``z1 + z2**2 - 1``: 0 up to the Monte Carlo error).
LABEL_MEAN_WARN = 0.1


@functools.lru_cache(maxsize=64)
def _label_moments(target: Any, k: int) -> tuple[float, float]:
    rng = np.random.default_rng(20261206)
    z = rng.standard_normal((2**16, k))
    eps = rng.standard_normal(2**16) if target.noisy else 0.0
    y = np.asarray(target(z, eps), dtype=float)
    return float(np.mean(y)), float(np.std(y))


def label_moments(problem: Problem) -> tuple[float, float]:
    """The label's mean and standard deviation, a Monte Carlo estimate from 2¹⁶ fixed draws of
    ``z`` and ``ε`` (cached per target)."""
    return _label_moments(problem.target, problem.k)


def label_is_uncentred(problem: Problem) -> bool:
    """Whether the label's mean exceeds :data:`LABEL_MEAN_WARN` times its standard deviation
    (plus three Monte Carlo standard errors of :func:`label_moments`).

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> label_is_uncentred(Problem.build(target="z**2")), label_is_uncentred(Problem.build(target="z**2 - 1"))
    (True, False)
    """
    mean, sd = label_moments(problem)
    return math.isfinite(mean) and math.isfinite(sd) and abs(mean) > LABEL_MEAN_WARN * sd + 3 * sd / 2**8


def default_kernel_paths(m: int, uncentred: bool = False) -> int:
    """Kernel paths of a draw when ``TransitionSettings.n_paths`` is None: 8·10⁴ at width 2,
    2·10⁴ at every other width (:data:`DEFAULT_KERNEL_PATHS`); for a label with a non-zero mean
    (``uncentred``, :func:`label_is_uncentred`) 8·10⁴ at width 1 too
    (:data:`UNCENTRED_PATHS_FACTOR`, since 0.10.0)."""
    base = DEFAULT_KERNEL_PATHS.get(int(m), DEFAULT_KERNEL_PATHS_OTHER)
    return base * UNCENTRED_PATHS_FACTOR.get(int(m), 1) if uncentred else base


def recommended_kernel_paths(m: int, uncentred: bool) -> int:
    """The kernel paths :func:`label_mean_warning` asks for: the default, and on an uncentred
    label at widths other than 1, :data:`UNCENTRED_PATHS_FACTOR_OTHER` times it."""
    base = default_kernel_paths(m, uncentred)
    if uncentred and int(m) not in UNCENTRED_PATHS_FACTOR:
        return base * UNCENTRED_PATHS_FACTOR_OTHER
    return base


def resolve_settings(s: TransitionSettings, problem: Problem) -> TransitionSettings:
    """``s`` with ``n_paths`` filled in for ``problem`` when it is None
    (:func:`default_kernel_paths` of its width and of whether its label is centred)."""
    if s.n_paths is not None:
        return s
    return dataclasses.replace(s, n_paths=default_kernel_paths(problem.m, label_is_uncentred(problem)))


def kernel_paths(s: TransitionSettings, n: int) -> int:
    """Kernel paths ``N`` of a ``"forced"`` / ``"initial"`` draw at sample size ``n``.

    Raises ``ValueError`` when ``paths_per_sample · n`` is below 40 paths (it used to be raised
    to 40 silently)."""
    if s.paths_per_sample is None:
        if s.n_paths is None:
            raise ValueError("n_paths is None: resolve it for the problem's width first "
                             "(resolve_settings)")
        return s.n_paths
    N = int(round(s.paths_per_sample * n))
    if N < 40:
        raise ValueError(f"paths_per_sample={s.paths_per_sample:g} gives {N} kernel paths at n = {n} "
                         "samples; at least 40 are needed (raise it, or give n_paths instead)")
    return N


def curvature_excess(s: TransitionSettings, n: int) -> float:
    """The kernel paths' excess noise in a ``"forced"`` draw's curvature along θ*, as a
    fraction of GD's ``Var(c)/n`` (``DMFTSettings.force_weights``; the ``N/2`` reflection pairs
    counted as independent): ``2n/N`` with Poisson weights (which add a further
    ``E[c]²/n``), ``max(2n/N − 1, 0)`` with paired ones; NaN for the other constructions."""
    if s.construction != "forced":
        return math.nan
    r = 2.0 * n / kernel_paths(s, n)
    return r if s.force_weights == "poisson" else max(r - 1.0, 0.0)


#: :func:`curvature_excess` above which :func:`transition` warns: the paths' own noise in the
#: curvature along θ* then exceeds GD's. Measured (docs/findings.md, "Paired force weights"):
#: at d = 4000, removing an excess of 2.4–5.8 (N = 2·10⁴, Poisson weights) moved δ_50 by −0.4
#: and −0.7, onto GD's; at d = 2000, removing 0.2–0.6 (paired, N = 2·10⁴) moved it by +0.06
#: (errors ±0.12 and ±0.18 on the two, from the same seeds).
CURVATURE_EXCESS_WARN = 1.0


def label_mean_warning(problem: Problem, s: TransitionSettings) -> str | None:
    """A warning when the label has a non-zero mean (:func:`label_is_uncentred`) and the draws
    use fewer kernel paths than :func:`recommended_kernel_paths`; None otherwise.

    On uncentred labels the theory ran high with the centred default paths, and more paths
    brought it to GD's (``docs/findings.md`` §9.2, §10.1, §10.4): GeLU on ``z²`` at d = 1000,
    six seeds, +0.24 ± 0.11 with 2·10⁴ paths and +0.03 ± 0.11 with 8·10⁴; r² on ``z²`` at
    d = 1000, four runs, +0.24 to +0.60 with 2·10⁴ and +0.11 and −0.10 with 8·10⁴; GeLU on
    ``min(z², 3)`` at d = 500, +0.53 and −0.31; GeLU on ``abs(z)`` at width 2, two seeds, +0.52
    and +0.29 with 8·10⁴ and +0.18 with 1.6·10⁵. Since 0.10.0 the width-1 default on such a
    label is 8·10⁴ (:func:`default_kernel_paths`), so at width 1 it warns only when fewer are
    asked for; at width 2 it names 1.6·10⁵.
    """
    if s.construction != "forced" or s.paths_per_sample is not None:
        return None
    if not label_is_uncentred(problem):
        return None
    more = recommended_kernel_paths(problem.m, True)
    N = s.n_paths if s.n_paths is not None else default_kernel_paths(problem.m, True)
    if N >= more:
        return None
    mean, sd = label_moments(problem)
    return (f"the label's mean is {mean:.2g} (sd {sd:.2g}): on uncentred labels the theory ran 0.1-0.6 "
            f"above GD with the centred labels' default kernel paths and -0.3 to +0.35 from it with "
            f"2-4x as many (GeLU and r2 on z**2 at d = 1000, abs(z) at width 2; docs/findings.md 9.2, "
            f"10.1, 10.4); these draws use {N}: for a closer delta_50, pass n_paths={more} "
            f"(--paths {more}), at about {more / N:.2g}x the cost")


def curvature_warning(s: TransitionSettings, d: int, deltas: Sequence[float]) -> str | None:
    """A warning when a ``"forced"`` draw's curvature along θ* carries more of the kernel
    paths' own noise than GD's (:data:`CURVATURE_EXCESS_WARN`) at some δ of ``deltas``;
    None otherwise. Names the δ, the paths and the remedy (``paths_per_sample=2``, or 4). Of the
    10 one-neuron searches against GD at d = 2000–4000 on which the command warned, 6 were within
    max(0.3, 5 %) of GD at the defaults and 9 with ``paths_per_sample=2``; r² on ``z²`` at
    d = 3000 was 0.32 high with 2 on one CPU and 0.08 with 4 (``docs/findings.md`` §8, §9.2)."""
    n = max(int(round(x * d)) for x in deltas)  # the excess grows with n
    ex = curvature_excess(s, n)
    if not ex > CURVATURE_EXCESS_WARN:  # NaN (not "forced") or small
        return None
    x = n / d
    return (f"the kernel paths' own noise in the curvature along theta* is {ex:.2g} x GD's at "
            f"delta = {x:g} (N = {kernel_paths(s, n)} paths, n = {n} samples; {s.force_weights} "
            f"weights): delta_50 may be too high; pass paths_per_sample=2 (--paths-per-sample 2) "
            f"for N = 2n, or 4 if memory allows (of 10 one-neuron searches that warned, 6 were within "
            f"max(0.3, 5 %) of GD at the defaults and 9 with N = 2n; validation/transition_defaults.py)")


def solve_draw(problem: Problem, delta: float, d: int, k: int, m0: Any,
               s: TransitionSettings, T: int, hard: Sequence[int] | None = None,
               stop: bool = False) -> Any:
    """The DMFT solve of draw ``k`` (start ``√d M_0 = m0``, ``s.construction``), as
    :func:`success_probability` runs it: a :class:`~dmftsolve.dynamics.dmft.DMFTResult`
    (``throw=False``; check ``.ok``).

    ``m0`` is a number (``m = k = 1``) or a ``k×m`` array; ``hard`` the directions paired by
    reflection and tested for success (default :func:`transition_directions`); ``stop`` ends
    the solve at the first passage of the success criterion (:mod:`dmftsolve.success`).
    """
    from dmftsolve.dynamics.dmft import solve_dmft

    hard = transition_directions(problem) if hard is None else tuple(int(j) for j in hard)
    s = resolve_settings(s, problem)
    q0 = float(problem.training.init.q0)
    n = int(round(delta * d))
    N = kernel_paths(s, n)
    M0 = np.broadcast_to(np.asarray(m0, dtype=float), (problem.k, problem.m)) / math.sqrt(d)
    p = problem.replace(M0=M0.tolist(), Q0=(q0 * np.eye(problem.m)).tolist(), steps=T, hold_zero=[])
    kw: dict[str, Any] = {
        "finite_n": {"n_paths": n, "antithetic": False},
        "forced": {"n_paths": N, "reflect": hard, "force_samples": n, "force_weights": s.force_weights},
        "initial": {"n_paths": N, "reflect": hard},
        "quenched": {"n_paths": 2 * s.copies * n, "reflect": hard, "antithetic": False,
                     "n_batches": 2, "force_samples": n, "quenched_labels": True},
    }[s.construction]
    if stop:
        kw |= {"stop_cosine": float(s.success_cosine), "stop_directions": hard}
        if s.give_up_factor is not None:
            kw["give_up_factor"] = float(s.give_up_factor)
    if s.path_dtype != "float64":
        kw["path_dtype"] = s.path_dtype
    if s.stein_regression:
        kw["stein_regression"] = True
    if s.history != "full":
        kw["history"] = s.history
    return solve_dmft(p, delta, seed=_draw_seed(s.seed, delta, d, k), errors="none",
                      test_loss="none", throw=False, **kw)


def give_up_step(statistic: Any, T: int, factor: float, level: float = 0.5,
                 steps: Any = None) -> int | None:
    """The step at which a trajectory of the success statistic gives up
    (:attr:`TransitionSettings.give_up_factor`), or None if it passes ``level`` first or never
    gives up: the first ``t`` at which
    :func:`dmftsolve.dynamics.dmft.gives_up` holds (``t ≥ T/4`` and
    ``p_t + factor·max(p_t − p_{t−W}, 0)·(T − t)/W < level − 0.1``, ``W = T/8``), before any
    ``p_t > level``.

    ``steps`` are the steps of the entries of ``statistic`` (default ``0, 1, …``); on a
    recording grid (GD's every 5 steps) the rule is checked where ``t − W`` is recorded too.
    The DMFT applies the same rule step by step (``DMFTSettings.give_up_factor``).

    Examples
    --------
    >>> give_up_step([0.1] * 9, 8, 20.0)  # flat: gives up at T/4 = 2
    2
    >>> give_up_step([0.1, 0.2, 0.3, 0.4, 0.45, 0.49, 0.6, 0.7, 0.8], 8, 20.0) is None
    True
    """
    p = np.asarray(statistic, dtype=float)
    t_of = np.arange(p.size) if steps is None else np.asarray(steps, dtype=int)
    where = {int(t): i for i, t in enumerate(t_of)}
    for i, t in enumerate(t_of):
        if not np.isfinite(p[i]) or p[i] > level:
            return None
        j = where.get(int(t) - give_up_window(T))
        if j is not None and gives_up(p[i], p[j], int(t), T, factor, level):
            return int(t)
    return None


def _stopped_at(r: Any) -> int | None:
    """The step at which a draw's solve stopped at its first passage or gave up
    (``give_up_factor``), or None."""
    diag = getattr(r, "diagnostics", {})
    at = diag.get("stopped_at")
    return diag.get("gave_up_at") if at is None else at


def _gave_up(r: Any) -> bool:
    """Whether a draw's solve gave up before passing (``give_up_factor``)."""
    return getattr(r, "diagnostics", {}).get("gave_up_at") is not None


def sane_steps(r: Any) -> int:
    """Number of leading steps of a draw's solve ``r`` (from :func:`solve_draw`) before any
    blow-up: finite cosine, every ``|M| < 1e3`` and every ``Q(t,t)_jj < 1e3``. The N-path Stein
    kernels can diverge long after the escape (e.g. ``M ~ 1e62`` at t ~ 300 with N = 4250
    paths), and a solve that stopped on non-finite kernels is NaN from there on. A solve that
    stopped at its first passage (``diagnostics["stopped_at"]``) is sane up to that step."""
    cosine = np.asarray(r.cosine, dtype=float)
    M = np.asarray(r.M, dtype=float).reshape(cosine.size, -1)
    q = np.asarray(r.q_diag, dtype=float)
    qd = np.diagonal(q, axis1=1, axis2=2) if q.ndim == 3 else q.reshape(cosine.size, -1)
    with np.errstate(invalid="ignore"):
        sane = np.isfinite(cosine) & (np.abs(M) < 1e3).all(axis=1) & (qd < 1e3).all(axis=1)
    stopped = _stopped_at(r)
    if stopped is not None:
        sane[stopped] = np.isfinite(cosine[stopped])
        return int(np.argmin(sane[: stopped + 1])) if not sane[: stopped + 1].all() else stopped + 1
    return int(np.argmin(sane)) if not sane.all() else sane.size


def _draw(problem: Problem, delta: float, d: int, k: int, m0: Any,
          s: TransitionSettings, T: int, hard: Sequence[int] | None = None,
          stop: bool = False) -> tuple[float, int, bool, str, bool]:
    """One DMFT draw: ``(last sane success statistic, escape step or −1, diverged, failure
    message, gave up)``; the statistic is the smallest hard-direction projection
    (:mod:`dmftsolve.success`)."""
    r = solve_draw(problem, delta, d, k, m0, s, T, hard, stop)
    # first passage, before any blow-up (:func:`sane_steps`); a solve that stopped on
    # non-finite kernels counts if it escaped before.
    per = getattr(r, "cosine_per_direction", None)
    if per is None or hard is None:  # a stand-in solve (tests) or m = k = 1: the cosine
        stat = np.asarray(r.cosine, dtype=float)
    else:
        stat = np.asarray(per, dtype=float)[:, list(hard)].min(axis=1)
    upto = sane_steps(r)
    above = np.nonzero(stat[:upto] > s.success_cosine)[0]
    if not r.ok and not above.size:
        return math.nan, -1, False, f"draw {k}: {r.message}", False
    last = float(stat[upto - 1]) if upto > 0 else math.nan
    stopped = _stopped_at(r)
    diverged = upto < stat.size and stopped is None
    return last, int(above[0]) if above.size else -1, diverged, "", _gave_up(r) and not above.size


def success_probability(problem: Problem, delta: float, d: int, *,
                        settings: TransitionSettings | None = None,
                        throw: bool = True, executor: Executor | None = None,
                        batch: int = 0) -> SuccessProbability:
    """Predicted probability that GD at ``(δ, d)`` learns every hard direction by step ``T``.

    Parameters
    ----------
    problem : Problem
        Any width ``m`` and number of directions ``k``, random start (``q0``), no bias or
        ridge, hard directions sign-symmetric (:func:`transition_directions`).
    delta : float
        Sample ratio ``δ = n/d``.
    d : int
        Input dimension.
    settings : TransitionSettings, optional
        Draws, seed, horizon, construction.
    throw : bool
        Raise :class:`SolverError` if a DMFT draw fails; otherwise count it as a failure
        and return a result with status ``FAILED`` and a message.
    executor : concurrent.futures.Executor, optional
        Where the draws run (e.g. a ``ProcessPoolExecutor``); in this process if None. The
        result does not depend on it (each draw has its own seed).
    batch : int
        Index of this batch of ``settings.draws`` draws at ``δ`` (0: the first). Batch ``b``
        uses draw seeds ``b·draws …`` and its own stratified starts, so batches pool.

    Returns
    -------
    SuccessProbability
        ``p`` with its binomial error; ``m0`` holds the starts (``(draws,)`` for ``m = k = 1``,
        else ``(draws, k, m)``).

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=40)
    >>> r = success_probability(p, 20.0, 200, settings=TransitionSettings(draws=2, n_paths=2000))
    >>> r.successes, r.draws
    (2, 2)
    """
    t0 = time.perf_counter()
    hard = transition_directions(problem)
    delta = check_delta(delta)
    d = check_integer("d", d, 2)
    batch = check_integer("batch", batch, 0)
    s = TransitionSettings() if settings is None else settings
    if not isinstance(s, TransitionSettings):
        raise ValueError(f"settings must be a TransitionSettings, got {settings!r}")
    s = resolve_settings(s, problem)
    T = problem.training.steps if s.steps is None else s.steps
    K = s.draws
    n = int(round(delta * d))
    if n < 2:
        raise ValueError(f"delta * d must give at least 2 samples, got delta={delta:g}, d={d} "
                         f"(n = {n})")
    kernel_paths(s, n)  # refuses too few paths before any work
    starts = draw_starts(problem, delta, d, s, hard, batch)
    first = batch * K
    args = [(problem, delta, d, first + j, starts[j], s, T, hard, s.stop_at_passage) for j in range(K)]
    if executor is None:
        outs = [_draw(*a) for a in args]
    else:
        outs = list(executor.map(_draw, *zip(*args, strict=True)))
    cos = np.array([o[0] for o in outs])
    esc = np.array([o[1] for o in outs])
    diverged = sum(o[2] for o in outs)
    failures = [o[3] for o in outs if o[3]]
    gave_up = sum(o[4] for o in outs)
    ok = esc >= 0
    succ = int(ok.sum())
    p_hat = succ / K
    status = Status.SUCCESS if not failures else Status.FAILED
    message = "" if not failures else f"{len(failures)} DMFT draws failed: {failures[:3]}"
    warning = curvature_warning(s, d, [delta])
    m0 = starts[:, 0, 0] if problem.k == problem.m == 1 else starts
    res = SuccessProbability(
        status=status, message=message, warnings=() if warning is None else (warning,),
        settings={**dataclasses.asdict(s), "steps": T, "problem": problem.to_dict(), "n": n,
                  "batch": batch},
        diagnostics={"construction": _CONSTRUCTIONS[s.construction], "failures": failures,
                     "diverged_draws": diverged, "given_up_draws": gave_up,
                     "kernel_paths": kernel_paths(s, n),
                     "curvature_excess": curvature_excess(s, n), "hard_directions": list(hard),
                     "criterion": "first passage of the smallest hard-direction projection onto "
                                  "span(W) above success_cosine by step T (dmftsolve.success; GD's "
                                  "escapes are permanent: no late escapes or relapses were seen in "
                                  "4x longer runs); each draw stops there"},
        elapsed=time.perf_counter() - t0, delta=delta, d=d, p=p_hat,
        p_err=binomial_error(succ, K), successes=succ, draws=K,
        m0=m0, final_cosine=cos, escape_step=esc)
    if throw and not res.ok:
        raise SolverError(f"SuccessProbability {status.value}: {message}", res)
    return res


def _pool(points: Sequence[SuccessProbability]) -> SuccessProbability:
    """Batches at one δ as one point (counts, starts, escapes concatenated)."""
    if len(points) == 1:
        return points[0]
    K = sum(p.draws for p in points)
    succ = sum(p.successes for p in points)
    p_hat = succ / K
    bad = [p for p in points if not p.ok]
    failures = [f for p in points for f in p.diagnostics.get("failures", [])]
    first = points[0]
    return dataclasses.replace(
        first, status=bad[0].status if bad else Status.SUCCESS,
        message="" if not bad else f"{len(failures)} DMFT draws failed: {failures[:3]}",
        warnings=tuple(dict.fromkeys(w for p in points for w in p.warnings)),
        settings={**first.settings, "batch": [p.settings.get("batch", 0) for p in points]},
        diagnostics={**first.diagnostics, "failures": failures,
                     "diverged_draws": sum(p.diagnostics.get("diverged_draws", 0) for p in points),
                     "given_up_draws": sum(p.diagnostics.get("given_up_draws", 0) for p in points)},
        elapsed=sum(p.elapsed for p in points), p=p_hat,
        p_err=binomial_error(succ, K), successes=succ, draws=K,
        m0=np.concatenate([p.m0 for p in points]),
        final_cosine=np.concatenate([p.final_cosine for p in points]),
        escape_step=np.concatenate([p.escape_step for p in points]))


def adaptive_search(problem: Problem, d: int, settings: TransitionSettings, *,
                    throw: bool = True, progress: bool = False,
                    executor: Executor | None = None) -> tuple[list[SuccessProbability], str]:
    """The theory's δ_50 without a grid: :func:`~dmftsolve.thresholds.delta50.search_delta_50`
    over batches of ``settings.draws`` draws (:func:`success_probability` with ``batch``),
    from ``settings.start`` (default 6) to the error ``settings.tol``, at most
    ``settings.max_draws`` draws. Returns the points (one per δ, batches pooled) and the
    search's stop reason (``""`` when ``tol`` was reached)."""
    batches: dict[float, list[SuccessProbability]] = {}

    def run_batch(x: float, b: int) -> tuple[int, int]:
        pt = success_probability(problem, x, d, settings=settings, throw=throw, executor=executor, batch=b)
        batches.setdefault(x, []).append(pt)
        return pt.successes, pt.draws

    def run_batches(plan: list[tuple[float, int]]) -> list[tuple[int, int]]:
        # the search's two batches at once: one thread each hands its draws to the shared pool
        with ThreadPoolExecutor(len(plan)) as threads:
            return list(threads.map(lambda xb: run_batch(*xb), plan))

    out = search_delta_50(run_batch, start=6.0 if settings.start is None else float(settings.start),
                          tol=settings.tol, max_trials=settings.max_draws, label=f"[transition d={d}] ",
                          progress=progress, run_batches=run_batches if executor is not None else None)
    return [_pool(batches[x]) for x in sorted(batches)], out.reason


def transition(problem: Problem, d: int, deltas: Sequence[float] | None = None, *,
               settings: TransitionSettings | None = None, throw: bool = True,
               progress: bool = False) -> TransitionCurve:
    """The predicted success curve at dimension ``d`` and its δ_50 ± error.

    Parameters
    ----------
    problem : Problem
        As for :func:`success_probability` (any width, any number of directions).
    d : int
        Input dimension.
    deltas : sequence of float, optional
        Sample ratios (at least 2, distinct), ``settings.draws`` draws at each. If None, the
        transition is found by :func:`adaptive_search` (``settings.start``, ``tol``,
        ``max_draws``; batches of ``settings.draws``).
    settings : TransitionSettings, optional
        See :class:`TransitionSettings` (``workers``: processes for the draws).
    throw : bool
        Raise :class:`SolverError` on a failed point, or when δ_50 is not bracketed (on a
        fixed grid: outside it; adaptive: not found in ``DELTA_RANGE``).
    progress : bool
        Print a line per batch on stderr (with the adaptive search, the current δ_50 and an
        estimate of the time left).

    Returns
    -------
    TransitionCurve

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=40)
    >>> c = transition(p, 200, [2.0, 20.0], settings=TransitionSettings(draws=2, n_paths=2000),
    ...                throw=False)
    >>> c.successes.tolist(), bool(2 < c.delta_50 < 20)
    ([0, 2], True)
    """
    t0 = time.perf_counter()
    d = check_integer("d", d, 2)
    s = TransitionSettings() if settings is None else settings
    if not isinstance(s, TransitionSettings):
        raise ValueError(f"settings must be a TransitionSettings, got {settings!r}")
    transition_directions(problem)  # checks the problem before any work
    s = resolve_settings(s, problem)
    grid = None
    if deltas is not None:
        if isinstance(deltas, (str, bytes)) or not hasattr(deltas, "__iter__"):
            raise ValueError(f"deltas must be a sequence of numbers or None, got {deltas!r}")
        grid = np.array(sorted({check_delta(x) for x in deltas}), float)
        if grid.size < 2:
            raise ValueError(f"deltas must hold at least 2 distinct values, got {list(deltas)!r}")
    import sys

    pool = ProcessPoolExecutor(min(s.workers, s.draws)) if s.workers > 1 else None
    reason = ""
    try:
        if grid is None:
            points, reason = adaptive_search(problem, d, s, throw=throw, progress=progress, executor=pool)
        else:
            points = []
            for x in grid:
                pt = success_probability(problem, float(x), d, settings=s, throw=throw, executor=pool)
                points.append(pt)
                if progress:
                    print(f"[transition d={d}] δ={x:g}: {pt.successes}/{pt.draws} ({pt.elapsed:.0f} s)",
                          file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    xs = np.array([p.delta for p in points], float)
    k = np.array([p.successes for p in points])
    n = np.array([p.draws for p in points])
    # probit_fit: the search's far bracketing points, and its error model (search_delta_50)
    shrink, error = ("half", "bootstrap") if grid is not None else ("fit", "posterior")
    if xs.size >= 2:
        mu, se, w = probit_fit(xs, k, n, shrink=shrink, error=error)
    else:
        mu, se, w = math.nan, math.nan, math.nan
    bad = [p for p in points if not p.ok]
    status, message = Status.SUCCESS, ""
    rate = k / np.maximum(n, 1)
    if bad:
        status, message = Status.FAILED, (
            f"{len(bad)} of {len(points)} points had failed draws: "
            + "; ".join(f"δ = {p.delta:g}: {p.message[:160]}" for p in bad[:3]))
    elif not math.isfinite(mu):
        status = Status.NO_ROOT
        message = reason or "success rate is 0 or 1 at every δ: δ_50 outside the grid"
    elif not (xs.min() <= mu <= xs.max()) or not (rate.min() < 0.5 < rate.max()):
        status = Status.NO_ROOT
        message = (f"δ_50 = {mu:.3g} is not bracketed by the points (δ = {xs.min():g}–{xs.max():g}, "
                   f"success rates {rate.min():.2f}–{rate.max():.2f}): an extrapolation; "
                   + ("widen the grid or omit it for the adaptive search" if grid is not None else reason))
    elif reason:
        status = Status.NOT_CONVERGED
        message = f"{reason}: delta_50 error {se:.2g} > tol {s.tol:g}"
    warns = tuple(w for w in (curvature_warning(s, d, xs), label_mean_warning(problem, s)) if w)
    res = TransitionCurve(
        status=status, message=message, warnings=warns,
        settings={**dataclasses.asdict(s), "problem": problem.to_dict(), "d": d,
                  "search": "grid" if grid is not None else "adaptive"},
        diagnostics={"fit": f"probit maximum likelihood, {error} se (probit_fit, shrink={shrink!r})",
                     "total_draws": int(n.sum()),
                     "given_up_draws": sum(p.diagnostics.get("given_up_draws", 0) for p in points),
                     "hard_directions": points[0].diagnostics.get("hard_directions") if points else None},
        elapsed=time.perf_counter() - t0, d=d, deltas=xs,
        p=np.array([p.p for p in points]), p_err=np.array([p.p_err for p in points]),
        successes=k, draws=n, delta_50=mu, delta_50_err=se, width=w, points=tuple(points))
    if throw and not res.ok:
        raise SolverError(f"TransitionCurve {status.value}: {message}", res)
    return res
