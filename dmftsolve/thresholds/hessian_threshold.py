"""Feature-learning thresholds ``δ_NN(t)`` and ``δ_NN(∞)`` (``docs/theory.md`` §5).

``δ_NN(t)`` is the smallest ``δ`` at which the Hessian ``∇²L(W^t)`` of the
restricted dynamics (hard directions held at zero overlap) has an outlier
below the bulk whose eigenvector overlaps the hard subspace, and which is
negative (``criterion="negative"``, the default: GD then escapes along it)
or merely separated from the bulk (``criterion="separated"``: the BBP point).
Each ``δ`` is one evaluation of :func:`~dmftsolve.thresholds.restricted_hessian.hard_spectra`
with :class:`~dmftsolve.thresholds.settings.ThresholdSettings`.
For ``t = None`` (the long-time limit) ``δ_NN(T)`` and ``δ_NN(T/2)`` come from the same DMFT
runs, ``T = settings.long_time``; the answer is accepted when the two brackets overlap (the
stated convergence rule), and flagged ``NOT_CONVERGED`` otherwise.

The threshold is located by :func:`search_threshold` on a cached predicate
(:class:`ThresholdPredicate`): a scan of a geometric grid of ``δ`` for the
first change of "has such an outlier", then :func:`scipy.optimize.bisect` of
that cell on the ±1 indicator; both ends of the final bracket are evaluated,
so the answer is verified to lie inside it. ``δ_alg``
(:mod:`dmftsolve.thresholds.weak_recovery`) is reported beside it.

Each evaluation samples the law of ``D`` by Monte Carlo, so one search's
bracket is one draw: ``ThresholdSettings(replicates=R)`` repeats the search
with ``R`` DMFT seeds and reports the mean and its standard error
(``Threshold.stderr``); the long-time rule is then applied to the means. The
replicate searches run side by side, their evaluations spread over
``settings.workers`` processes (default: the available cores); the result is
identical to the serial run with the same seeds.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import bisect

from dmftsolve._blas import blas_threads
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.thresholds.directions import DirectionSplit, split_directions
from dmftsolve.thresholds.restricted_hessian import (
    HardSpectrum,
    Time,
    check_time,
    hard_spectra,
    restricted,
)
from dmftsolve.thresholds.settings import ThresholdSettings
from dmftsolve.thresholds.weak_recovery import alg_threshold

__all__ = ["Threshold", "delta_nn", "ThresholdPredicate", "SearchOutcome", "search_threshold",
           "combine_replicates"]


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class Threshold(Result):
    """``δ_NN`` with its verified bracket, ``δ_alg`` beside it, and every evaluation.

    For the long-time rule (``t=None``), ``brackets`` holds the bracket at
    ``T/2`` and at ``T`` (of the first seed); ``delta_nn`` is the one at ``T``.
    With ``settings.replicates >= 2``, ``delta_nn`` is the mean of the
    replicates' bracket midpoints, ``stderr`` its standard error, ``bracket``
    the hull of the replicates' verified brackets and ``replicates`` lists
    each seed's search; with one replicate ``stderr`` is ``None`` (unknown).
    Caveats (a law of ``D`` unbounded below, an outlier below the bracket)
    are in ``warnings``, prefixed by the seed they belong to.
    """

    _headline = ("delta_nn", "stderr", "bracket")  # shown by the repr (Result.__repr__)

    delta_nn: float | None
    bracket: tuple[float, float] | None
    t: Time | None
    delta_alg: float | None
    hard: tuple[int, ...]
    evaluations: list[dict[str, Any]]
    stderr: float | None = None
    replicates: list[dict[str, Any]] = field(default_factory=list)
    brackets: dict[str, Any] = field(default_factory=dict)


class SearchOutcome(NamedTuple):
    """Result of one :func:`search_threshold`: status, message and the verified bracket (or None)."""

    status: Status
    message: str
    bracket: tuple[float, float] | None


def search_threshold(has: ThresholdPredicate, settings: ThresholdSettings) -> SearchOutcome:
    """Ascending grid scan to the first δ with an outlier, then bisection of that cell.

    Parameters
    ----------
    has : ThresholdPredicate
        ``δ ↦ bool`` with a ``cache`` of the ``δ`` evaluated.
    settings : ThresholdSettings
        ``bracket``, ``grid`` and ``xtol`` are used.
    """
    lo, hi = settings.bracket
    grid = [float(x) for x in np.geomspace(lo, hi, settings.grid)]
    if has(grid[0]):
        return SearchOutcome(Status.NO_ROOT,
                             f"an outlier exists already at δ={lo}: δ_NN is below the bracket", None)
    prev = grid[0]
    for x in grid[1:]:
        if has(x):
            break
        prev = x
    else:
        return SearchOutcome(Status.NO_ROOT, f"no hard outlier up to δ={hi}: δ_NN is above the bracket", None)
    a, b = prev, x
    bisect(lambda v: 1.0 if has(v) else -1.0, a, b, xtol=settings.xtol, disp=False)
    seen = [(v, has(v)) for v in has.cache if a <= v <= b]
    below = max(v for v, f in seen if not f)
    above = min(v for v, f in seen if f and v > below)
    return SearchOutcome(Status.SUCCESS, f"δ_NN in [{below:.5g}, {above:.5g}]", (below, above))


Evaluate = Callable[[Problem, float, tuple[Time, ...], ThresholdSettings, DirectionSplit],
                    dict[Time, HardSpectrum]]


def _evaluate_here(problem: Problem, delta: float, times: tuple[Time, ...], settings: ThresholdSettings,
                   split: DirectionSplit) -> dict[Time, HardSpectrum]:
    """One evaluation in this process, on one BLAS thread (as in the worker processes)."""
    with blas_threads(1):
        return hard_spectra(problem, delta, times, settings=settings, split=split)


class ThresholdPredicate:
    """Cached ``δ ↦ has outlier at time t``; one DMFT run serves every time requested.

    Parameters
    ----------
    problem : Problem
    times : tuple
        Times evaluated together at each ``δ`` (:func:`hard_spectra`).
    settings : ThresholdSettings
    split : DirectionSplit
    progress : bool
        One line per evaluation on stderr.
    evaluate : callable, optional
        ``(problem, delta, times, settings, split) -> {t: HardSpectrum}``
        (default: in this process); :func:`delta_nn` passes one that runs in a
        process pool.

    Attributes
    ----------
    t : int or "tti"
        The time the predicate answers for (the last of ``times`` at first).
    spectra : dict
        ``{δ: {t: HardSpectrum}}`` of every evaluation. A ``δ`` first asked for
        at an earlier time ``t`` is evaluated at the times up to ``t`` only.
    """

    def __init__(self, problem: Problem, times: tuple[Time, ...], settings: ThresholdSettings,
                 split: DirectionSplit, progress: bool = False, evaluate: Evaluate | None = None) -> None:
        self.problem, self.times, self.settings, self.split = problem, tuple(times), settings, split
        self.progress = progress
        self.evaluate = evaluate or _evaluate_here
        self.spectra: dict[float, dict[Time, HardSpectrum]] = {}
        self.t: Time = self.times[-1]

    @property
    def cache(self) -> list[float]:
        return sorted(self.spectra)

    def __call__(self, delta: float) -> bool:
        known = self.spectra.get(delta, {})
        if self.t not in known:
            # the times up to t: the searches go from the last time back, so a δ first needed
            # at an earlier time runs a shorter DMFT (the paths up to t do not depend on the horizon)
            needed = self.times[: self.times.index(self.t) + 1]
            sp = self.evaluate(self.problem, delta, needed, self.settings, self.split)
            self.spectra[delta] = known | sp
            if self.progress:
                for t, hs in sp.items():
                    locs = ", ".join(f"{o.location:.4g}" for o in hs.outliers.outliers) or "none"
                    edge = "none" if hs.left_edge is None else f"{hs.left_edge:.4g}"
                    print(f"  seed {self.settings.seed} δ={delta:.5g} t={t}: outliers [{locs}], left edge "
                          f"{edge}, {hs.status.value} ({hs.elapsed:.1f}s)", file=sys.stderr, flush=True)
        hs = self.spectra[delta][self.t]
        if not hs.ok:
            raise SolverError(f"evaluation at delta={delta}, t={self.t} failed: {hs.message}", hs)
        return hs.has_outlier(self.settings.criterion)


@dataclass(frozen=True)
class _Replicate:
    """One threshold search (one DMFT seed)."""

    seed: int
    status: Status
    message: str
    bracket: tuple[float, float] | None
    brackets: dict[str, Any]
    warnings: list[str]
    predicate: ThresholdPredicate

    def record(self) -> dict[str, Any]:
        return {"seed": self.seed, "status": self.status.value, "message": self.message,
                "bracket": self.bracket, "brackets": self.brackets, "warnings": self.warnings}


def _time_rule(t: Time | None, times: tuple[Time, ...], settings: ThresholdSettings, status: Status,
               bracket: tuple[float, float] | None, brackets: dict[str, Any]) -> tuple[Status, str]:
    """The long-time rule of one seed: brackets at ``T/2`` and ``T`` within the slack."""
    if t is not None or not status.ok or bracket is None:
        return status, ""
    half = brackets[str(times[0])]["bracket"]
    slack = max(settings.xtol, settings.time_rtol * bracket[1])
    if half is None or half[0] > bracket[1] + slack or half[1] < bracket[0] - slack:
        return Status.NOT_CONVERGED, f"; not converged in time: at T/2={times[0]} the bracket is {half}"
    return status, f"; converged in time: at T/2={times[0]} the bracket is [{half[0]:.5g}, {half[1]:.5g}]"


def _search_warnings(pred: ThresholdPredicate, bracket: tuple[float, float], settings: ThresholdSettings
                     ) -> list[str]:
    final = pred.times[-1]
    spectra = [(d, pred.spectra[d][final]) for d in pred.cache if final in pred.spectra[d]]
    early = [d for d, hs in spectra if d < bracket[0] and hs.ok and hs.has_outlier(settings.criterion)]
    tails = [d for d, hs in spectra if hs.diagnostics.get("tail_unbounded")]
    out = []
    if tails:
        out.append(f"the law of D looks unbounded below at t={final} (at {len(tails)} of {len(spectra)} δ): "
                   f"the bulk then has no finite left edge, and this δ_NN is that of the "
                   f"{settings.n_paths}-sample law, which moves with n_paths like a finite-d threshold")
    if early:
        out.append(f"not monotone in δ, an outlier also at δ={', '.join(f'{v:.4g}' for v in early)} "
                   "(Monte Carlo noise of the sampled law of D: more paths narrow it)")
    return out


def _search_once(problem: Problem, t: Time | None, times: tuple[Time, ...], settings: ThresholdSettings,
                 split: DirectionSplit, progress: bool, evaluate: Evaluate | None = None) -> _Replicate:
    """One threshold search (one DMFT seed), at every time of ``times`` (the last first)."""
    pred = ThresholdPredicate(problem, times, settings, split, progress, evaluate)
    brackets: dict[str, Any] = {}
    status, message, bracket, warnings = Status.SUCCESS, "", None, []
    try:
        for tt in reversed(times):  # the last time first: it is the answer
            pred.t = tt
            st, msg, br = search_threshold(pred, settings)
            brackets[str(tt)] = {"status": st.value, "message": msg, "bracket": br}
            if tt == times[-1]:
                status, message, bracket = st, msg, br
            if not st.ok:
                break
        status, extra = _time_rule(t, times, settings, status, bracket, brackets)
        message += extra
        if bracket is not None:
            warnings = _search_warnings(pred, bracket, settings)
    except SolverError as exc:
        status, message = Status.FAILED, str(exc)
    return _Replicate(settings.seed, status, message, bracket, brackets, warnings, pred)


class Combined(NamedTuple):
    """Replicates combined: status, message, mean, standard error and the hull of the brackets."""

    status: Status
    message: str
    mean: float | None
    stderr: float | None
    hull: tuple[float, float] | None


def combine_replicates(replicates: list[dict[str, Any]], times: tuple[Time, ...], t: Time | None,
                       settings: ThresholdSettings) -> Combined:
    """Mean and standard error over replicate searches; the long-time rule on the means.

    The standard error is that of the bracket midpoints over the seeds combined with the
    bisection resolution (each midpoint uniform within ±half its bracket: variance ``w²/12``).
    A replicate's own time rule compares two single-seed brackets and fails on Monte Carlo noise
    alone, so with replicates the rule is applied to the means: ``δ_NN(T/2)`` and ``δ_NN(T)``
    agree when they differ by at most ``max(xtol, time_rtol·δ_NN(T), 2·(combined standard
    error))``.
    """
    allowed = {Status.SUCCESS.value} | ({Status.NOT_CONVERGED.value} if t is None else set())
    bad = [r for r in replicates if r["bracket"] is None or r["status"] not in allowed]
    if bad:
        return Combined(Status(bad[0]["status"]),
                        f"replicate with seed {bad[0]['seed']}: {bad[0]['message']}", None, None, None)

    def mean_se(brs: list[tuple[float, float]]) -> tuple[float, float]:
        # the spread of the midpoints, and the bisection resolution: a midpoint is off by up to
        # half its bracket, taken as uniform (variance w²/12); it keeps the error from reading 0
        # when the replicates fall into the same bracket (a coarse xtol)
        mids = np.array([0.5 * (a + b) for a, b in brs])
        widths = np.array([b - a for a, b in brs])
        spread = mids.std(ddof=1) / np.sqrt(mids.size)
        return float(mids.mean()), float(np.hypot(spread, np.sqrt(np.mean(widths**2) / 12 / mids.size)))

    brs = [r["bracket"] for r in replicates]
    mean, se = mean_se(brs)
    hull = (min(a for a, _ in brs), max(b for _, b in brs))
    n = len(replicates)
    message = (f"δ_NN = {mean:.5g} ± {se:.2g} (mean ± standard error over {n} independent DMFT "
               "seeds, bisection resolution included; replicate brackets "
               + ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in brs) + ")")
    status = Status.SUCCESS
    if t is None:
        halves = [r["brackets"].get(str(times[0]), {}).get("bracket") for r in replicates]
        if any(h is None for h in halves):
            status = Status.NOT_CONVERGED
            message += f"; long-time rule: no bracket at T/2={times[0]} for every seed"
        else:
            mh, seh = mean_se(halves)
            tol = max(settings.xtol, settings.time_rtol * mean, 2 * float(np.hypot(se, seh)))
            ok = abs(mean - mh) <= tol
            status = Status.SUCCESS if ok else Status.NOT_CONVERGED
            message += (f"; long-time rule {'met' if ok else 'NOT met'}: δ_NN(T/2={times[0]}) = "
                        f"{mh:.5g} ± {seh:.2g} vs δ_NN(T={times[1]}) = {mean:.5g} ± {se:.2g} "
                        f"(tolerance {tol:.3g})")
    return Combined(status, message, mean, se, hull)


def _init_worker() -> None:
    """Worker processes: one BLAS thread each (the evaluations are small and many)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def _ready() -> int:
    return os.getpid()


@contextmanager
def _evaluations(workers: int) -> Iterator[Evaluate | None]:
    """An ``evaluate`` that runs in a pool of ``workers`` processes (None: in this process)."""
    if workers <= 1:
        yield None
        return
    import multiprocessing as mp

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) as pool:
        # start every worker now, while this process has a single thread (fork safety)
        [f.result() for f in [pool.submit(_ready) for _ in range(workers)]]
        lock = threading.Lock()

        def evaluate(problem: Problem, delta: float, times: tuple[Time, ...], settings: ThresholdSettings,
                     split: DirectionSplit) -> dict[Time, HardSpectrum]:
            with lock:
                fut = pool.submit(hard_spectra, problem, delta, times, settings=settings, split=split)
            return fut.result()

        yield evaluate


def _run_replicates(problem: Problem, t: Time | None, times: tuple[Time, ...], settings: ThresholdSettings,
                    split: DirectionSplit, progress: bool, n_rep: int) -> list[_Replicate]:
    """The replicate searches (seeds ``seed + j``), side by side over ``settings.n_workers`` processes."""
    seeds = [replace(settings, seed=settings.seed + j) for j in range(n_rep)]
    workers = min(settings.n_workers, n_rep)
    with _evaluations(workers) as evaluate:
        if evaluate is None:
            return [_search_once(problem, t, times, s, split, progress) for s in seeds]
        with ThreadPoolExecutor(max_workers=n_rep) as searches:
            futures = [searches.submit(_search_once, problem, t, times, s, split, progress, evaluate)
                       for s in seeds]
            return [f.result() for f in futures]


#: ``null_rtol`` of the long-time rule (``t=None``) at width ``m >= 2`` when the settings leave it
#: None. With the DMFT's default ``1e-4`` the Stein recursion can diverge at width 2 over long
#: horizons; ``1e-3`` keeps it positive semidefinite without moving ``Q`` beyond its Monte Carlo
#: error (``docs/findings.md`` §4.9). The width-2 long-time cells of the results table use this
#: value; width 1 and every finite ``t`` keep the DMFT's default.
LONG_NULL_RTOL_WIDE = 1e-3


def delta_nn(
    problem: Problem,
    t: Time | None = None,
    *,
    settings: ThresholdSettings | None = None,
    progress: bool = False,
    throw: bool = True,
) -> Threshold:
    """The feature-learning threshold ``δ_NN(t)``.

    Parameters
    ----------
    problem : Problem
        Learning problem; its hard directions (:func:`split_directions`) are
        held at zero overlap for the first phase.
    t : int, "tti" or None
        GD step; ``"tti"`` for the fixed point; ``None`` (default) for the
        long-time rule at ``settings.long_time`` (module docstring).
    settings : ThresholdSettings, optional
    progress : bool
        Print one line per evaluation on stderr.
    throw : bool
        Raise :class:`SolverError` when no threshold is found in the bracket,
        an evaluation fails, or the long-time rule is not met (default True).

    Returns
    -------
    Threshold
        ``delta_nn`` is the midpoint of the final bracket, whose ends were
        both evaluated: no outlier at the lower end, an outlier at the upper.

    Examples
    --------
    A small search at initialisation (``t = 0``) for the r² neuron on
    ``min(z², 3)``, two DMFT seeds of 2000 paths (the exact value is 1.6696,
    ``tests/test_hessian_threshold.py``; the example's Monte Carlo error is large):

    >>> from dmftsolve import Problem, ThresholdSettings, delta_nn
    >>> p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05)
    >>> s = ThresholdSettings(bracket=(1.0, 3.0), grid=3, xtol=0.2, n_paths=2000, replicates=2)
    >>> th = delta_nn(p, t=0, settings=s)
    >>> th.ok, 1.0 < th.delta_nn < 3.0, len(th.replicates)
    (True, True, 2)
    """
    start = time.perf_counter()
    settings = settings or ThresholdSettings()
    if t is None and settings.null_rtol is None and problem.m >= 2:
        # the long-time rule at width >= 2: the cut-off that keeps the Stein recursion
        # positive semidefinite (LONG_NULL_RTOL_WIDE); width 1 keeps the DMFT's default
        settings = dataclasses.replace(settings, null_rtol=LONG_NULL_RTOL_WIDE)
    split = split_directions(problem.target)
    _, hard = restricted(problem, split)
    if t is None:
        T = settings.long_time
        times: tuple[Time, ...] = (T // 2, T)
    else:
        times = (check_time(t),)
    n_rep = 1 if times == ("tti",) else settings.replicates
    runs = _run_replicates(problem, t, times, settings, split, progress, n_rep)
    first = runs[0]
    evaluations = [
        {"seed": run.seed, "delta": d, "t": tt,
         "has_outlier": hs.has_outlier(settings.criterion) if hs.ok else None,
         "outliers": [o.to_dict() for o in hs.outliers.outliers], "left_edge": hs.left_edge,
         "status": hs.status.value, "elapsed": hs.elapsed}
        for run in runs for d in run.predicate.cache for tt, hs in run.predicate.spectra[d].items()
    ]
    replicates = [run.record() for run in runs]
    status, message, bracket = first.status, first.message, first.bracket
    delta_mid = None if bracket is None else 0.5 * (bracket[0] + bracket[1])
    stderr: float | None = None
    if n_rep > 1:
        status, message, delta_mid, stderr, bracket = combine_replicates(replicates, times, t, settings)
        message += f"; first replicate: {first.message}"
    warnings = [f"seed {run.seed}: {w}" if n_rep > 1 else w for run in runs for w in run.warnings]
    try:
        alg = alg_threshold(problem.target, throw=False)
        d_alg = alg.delta_alg if alg.ok else None
    except (NotImplementedError, ValueError):
        d_alg = None
    result = Threshold(
        delta_nn=delta_mid, bracket=bracket, t=t, stderr=stderr, replicates=replicates,
        delta_alg=d_alg, hard=hard, evaluations=evaluations, brackets=first.brackets,
        status=status, message=message, warnings=warnings,
        settings={"problem": problem.to_dict(), "t": t,
                  **{k: v for k, v in vars(replace(settings)).items() if k != "fixed_point"},
                  "workers": settings.n_workers,
                  "fixed_point": vars(settings.fixed_point_settings(problem.m))},
        diagnostics={"split": split.to_dict(), "evaluations": len(evaluations)},
        elapsed=time.perf_counter() - start,
    )
    if throw and not result.ok:
        raise SolverError(f"delta_nn: {message}", result)
    return result
