"""GD's finite-d success probability and its 50 % point δ_50(d), predicted by DMFT draws.

``P(success | δ, d, T)`` is the fraction of draws (:mod:`dmftsolve.finite_d.draws`) whose success
statistic passes the success cosine by step ``T`` (first passage), with the starts stratified, so
the binomial error is an upper bound. δ_50 is the maximum-likelihood probit fit
``P = Φ((δ − δ_50)/w)`` to all draws (:func:`~dmftsolve.thresholds.delta50.probit_fit`), with a
bootstrap standard error on a fixed grid and the posterior standard deviation (over the curve's
width as well) for the self-bracketing search (:func:`adaptive_search`), which places batches of
draws at ``δ_50 ± 0.8 w`` until the error reaches ``tol``. ``docs/theory.md`` §7.2.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmftsolve.checks import check_delta, check_integer
from dmftsolve.finite_d.diagnostics import curvature_excess, curvature_warning, label_mean_warning
from dmftsolve.finite_d.directions import transition_directions
from dmftsolve.finite_d.draws import draw_starts, run_draw
from dmftsolve.finite_d.settings import CONSTRUCTIONS, TransitionSettings, kernel_paths, resolve_settings
from dmftsolve.finite_d.spectral import check_above_spectral_threshold, check_spectral_problem
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status, binomial_error
from dmftsolve.thresholds.delta50 import probit_fit, search_delta_50

__all__ = ["SuccessProbability", "TransitionCurve", "success_probability", "transition", "adaptive_search"]


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class SuccessProbability(Result):
    """``P(success | δ, d, T)``: ``p`` with its binomial error ``p_err``
    (:func:`dmftsolve.results.binomial_error`: the one-sided 95 % bound at 0 or all).

    ``m0`` (draws,) the initial ``√d M_0`` (spectral start: the overlap ρ); ``final_cosine``
    (draws,) the last value before a blow-up of the solve if any; ``escape_step`` (draws,) the
    step of success (first passage above ``success_cosine``; ``T`` for a spectral start), −1 if
    none. The stratification of ``m_0`` makes the binomial error an upper bound.
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


def success_probability(problem: Problem, delta: float, d: int, *,
                        settings: TransitionSettings | None = None,
                        throw: bool = True, executor: Executor | None = None,
                        batch: int = 0) -> SuccessProbability:
    """Predicted probability that GD at ``(δ, d)`` learns every hard direction by step ``T``.

    Parameters
    ----------
    problem : Problem
        Any width ``m`` and number of directions ``k``, random start (``q0``), a ridge
        below ``1/η`` and a trained bias allowed, hard directions sign-symmetric
        (:func:`transition_directions`).
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
    spectral = s.init == "spectral"
    if spectral:  # each draw samples its own start's overlap (in its worker)
        check_spectral_problem(problem)
        starts = [None] * K
    else:
        starts = draw_starts(problem, delta, d, s, hard, batch)
    first = batch * K
    args = [(problem, delta, d, first + j, starts[j], s, T, hard, s.stop_at_passage) for j in range(K)]
    if executor is None:
        outs = [run_draw(*a) for a in args]
    else:
        outs = list(executor.map(run_draw, *zip(*args, strict=True)))
    cos = np.array([o[0] for o in outs])
    esc = np.array([o[1] for o in outs])
    diverged = sum(o[2] for o in outs)
    failures = [o[3] for o in outs if o[3]]
    gave_up = sum(o[4] for o in outs)
    retried = sum(o[6] for o in outs)
    ok = esc >= 0
    succ = int(ok.sum())
    p_hat = succ / K
    status = Status.SUCCESS if not failures else Status.FAILED
    message = "" if not failures else f"{len(failures)} DMFT draws failed: {failures[:3]}"
    warning = curvature_warning(s, d, [delta])
    if spectral:
        m0 = np.array([o[5] for o in outs], dtype=float)
    else:
        m0 = starts[:, 0, 0] if problem.k == problem.m == 1 else starts
    res = SuccessProbability(
        status=status, message=message, warnings=() if warning is None else (warning,),
        settings={**dataclasses.asdict(s), "steps": T, "problem": problem.to_dict(), "n": n,
                  "batch": batch},
        diagnostics={"construction": CONSTRUCTIONS[s.construction], "failures": failures,
                     "diverged_draws": diverged, "given_up_draws": gave_up, "retried_draws": retried,
                     "kernel_paths": kernel_paths(s, n),
                     "curvature_excess": curvature_excess(s, n), "hard_directions": list(hard),
                     "init": s.init,
                     "criterion": ("the smallest hard-direction projection onto span(W) above "
                                   "success_cosine at step T (dmftsolve.success); every draw runs to T"
                                   if spectral else
                                   "first passage of the smallest hard-direction projection onto "
                                   "span(W) above success_cosine by step T (dmftsolve.success); each "
                                   "draw stops there")},
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
                     "given_up_draws": sum(p.diagnostics.get("given_up_draws", 0) for p in points),
                     "retried_draws": sum(p.diagnostics.get("retried_draws", 0) for p in points)},
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
    if s.init == "spectral":
        check_spectral_problem(problem)
    grid = None
    if deltas is not None:
        if isinstance(deltas, (str, bytes)) or not hasattr(deltas, "__iter__"):
            raise ValueError(f"deltas must be a sequence of numbers or None, got {deltas!r}")
        grid = np.array(sorted({check_delta(x) for x in deltas}), float)
        if grid.size < 2:
            raise ValueError(f"deltas must hold at least 2 distinct values, got {list(deltas)!r}")
        if s.init == "spectral":
            check_above_spectral_threshold(problem, grid)
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
                     "retried_draws": sum(p.diagnostics.get("retried_draws", 0) for p in points),
                     "hard_directions": points[0].diagnostics.get("hard_directions") if points else None},
        elapsed=time.perf_counter() - t0, d=d, deltas=xs,
        p=np.array([p.p for p in points]), p_err=np.array([p.p_err for p in points]),
        successes=k, draws=n, delta_50=mu, delta_50_err=se, width=w, points=tuple(points))
    if throw and not res.ok:
        raise SolverError(f"TransitionCurve {status.value}: {message}", res)
    return res
