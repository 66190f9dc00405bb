"""Feature-learning thresholds ``δ_NN(t)`` and ``δ_NN(∞)`` (THEORY.md §5).

``δ_NN(t)`` is the smallest ``δ`` at which the Hessian ``∇²L(W^t)`` of the
restricted dynamics (hard directions held at zero overlap) has an outlier
below the bulk whose eigenvector overlaps the hard subspace, and which is
negative (``criterion="negative"``, the default: GD then escapes along it)
or merely separated from the bulk (``criterion="separated"``: the BBP point).

* finite ``t``: the law of ``(D, z_hard)`` comes from the DMFT samples at
  step ``t`` (:func:`dmftsolve.dynamics.dmft.solve_dmft`), re-run at every ``δ``;
* ``t = None`` (the long-time limit): ``δ_NN(T)`` and ``δ_NN(T/2)`` from the
  same DMFT runs, ``T = settings.long_time``; the answer is accepted when the
  two brackets overlap (the stated convergence rule), and flagged
  ``NOT_CONVERGED`` otherwise;
* ``t = "tti"``: from the time-translation-invariant fixed point
  (:func:`dmftsolve.dynamics.fixed_point.solve_fixed_point`). This is fast, but only
  valid where GD converges to the fixed point it selects: for square loss on
  ``y = z²`` with GeLU or ``r²`` neurons the global proximal branch does not
  match long GD runs (see ``docs/findings.md``), so it is not the default.

The outliers come from :func:`dmftsolve.hessian.outlier_equation.outliers`. The threshold is
located by scanning a grid of ``δ`` for the first change of the predicate
"has such an outlier" and refining that bracket with
:func:`scipy.optimize.bisect` on the ±1 indicator; both ends of the final
bracket are evaluated, so the answer is verified to lie inside it.
``δ_alg`` (:mod:`dmftsolve.thresholds.weak_recovery`) is reported beside it.

Each evaluation samples the law of ``D`` by Monte Carlo, so one search's
bracket is one draw: ``ThresholdSettings(replicates=R)`` repeats the search
with ``R`` DMFT seeds and reports the mean and its standard error
(``Threshold.stderr``); the long-time rule is then applied to the means.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from scipy.optimize import bisect

from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.dynamics.fixed_point import FixedPointSettings, solve_fixed_point
from dmftsolve.hessian.outlier_equation import Outliers, outliers
from dmftsolve.hessian.spectrum import TAIL_INDEX_THRESHOLD, tail_index
from dmftsolve.problem import Problem, check_delta
from dmftsolve.results import ResultBase, SolverError, Status
from dmftsolve.thresholds.directions import DirectionSplit, split_directions
from dmftsolve.thresholds.weak_recovery import alg_threshold

__all__ = ["ThresholdSettings", "HardSpectrum", "Threshold", "hard_spectrum", "delta_nn", "restricted"]



@dataclass(frozen=True)
class ThresholdSettings:
    """Settings of the threshold search, kept apart from the problem.

    Attributes
    ----------
    criterion : {"negative", "separated"}
        What counts as "the Hessian has a hard outlier" (module docstring).
    bracket : (float, float)
        Range of ``δ`` searched.
    grid : int
        Points of the initial geometric grid over ``bracket``.
    xtol : float
        Width of the final bracket in ``δ``.
    n_paths, seed : int
        Monte Carlo paths and seed of each DMFT run (finite ``t``).
    long_time : int
        ``T`` of the long-time rule (``t=None``): steps of each DMFT run.
    time_rtol : float
        The long-time rule accepts ``δ_NN(T)`` when the brackets at ``T/2``
        and ``T`` are within ``max(xtol, time_rtol·δ_NN(T))`` of each other
        (the Monte Carlo noise of the sampled law of ``D`` moves the bracket
        by a few per cent at ``10⁴`` paths).
    tails : {"sample", "strict"}
        What to do when the law of ``D`` at a finite step looks unbounded below
        (square loss with unbounded ``y``, THEORY.md §3): ``"strict"`` fails
        (the bulk has no finite left edge), ``"sample"`` (default) uses the
        law of the ``n_paths`` Monte Carlo samples as it is, whose edge is that
        of a system with about ``n_paths`` samples, and reports the tail index
        in the diagnostics and the message.
    fixed_point : FixedPointSettings or None
        Settings of the fixed point (``t = ∞``); default by width: the global
        proximal branch for ``m = 1``, Newton otherwise.
    replicates : int
        Independent searches with DMFT seeds ``seed, seed + 1, …`` (finite
        ``t`` and the long-time rule). With two or more, ``delta_nn`` is the
        mean of their bracket midpoints and ``stderr`` its standard error: the
        Monte Carlo error of the threshold, which the bisection bracket of a
        single seed does not show (for ``y = z²`` at ``10⁴`` paths the seed
        spread is about 1.5 in ``δ`` against a bracket width of 0.15).
    """

    criterion: Literal["negative", "separated"] = "negative"
    bracket: tuple[float, float] = (1.0, 40.0)
    grid: int = 8
    xtol: float = 0.05
    n_paths: int = 20_000
    seed: int = 0
    long_time: int = 400
    time_rtol: float = 0.05
    tails: Literal["sample", "strict"] = "sample"
    fixed_point: FixedPointSettings | None = None
    replicates: int = 1

    def __post_init__(self) -> None:
        def integer(name: str, minimum: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r:.80}")

        def real(name: str, positive: bool) -> None:
            v = getattr(self, name)
            if (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                    or not np.isfinite(v) or (v <= 0 if positive else v < 0)):
                raise ValueError(f"{name} must be a finite number {'>' if positive else '>='} 0, "
                                 f"got {v!r:.80}")

        if self.criterion not in ("negative", "separated"):
            raise ValueError(f"criterion must be 'negative' or 'separated', got {self.criterion!r:.80}")
        if isinstance(self.bracket, (str, bytes)) or not hasattr(self.bracket, "__len__") \
                or len(self.bracket) != 2:
            raise ValueError(f"bracket must be a pair (low, high), got {self.bracket!r:.80}")
        lo, hi = (check_delta(v) for v in self.bracket)
        if not lo < hi:
            raise ValueError(f"bracket must be (low, high) with low < high, got {self.bracket!r:.80}")
        integer("grid", 2)
        real("xtol", positive=True)
        integer("n_paths", 100)
        integer("seed", 0)
        integer("long_time", 2)
        real("time_rtol", positive=False)
        if self.tails not in ("sample", "strict"):
            raise ValueError(f"tails must be 'sample' or 'strict', got {self.tails!r:.80}")
        if self.fixed_point is not None and not isinstance(self.fixed_point, FixedPointSettings):
            raise ValueError(f"fixed_point must be a FixedPointSettings or None, got "
                             f"{self.fixed_point!r:.80}")
        integer("replicates", 1)

    def fixed_point_settings(self, m: int) -> FixedPointSettings:
        if self.fixed_point is not None:
            return self.fixed_point
        return FixedPointSettings(branch="global" if m == 1 else "newton", nodes=None)


def restricted(problem: Problem, split: DirectionSplit | None = None) -> tuple[Problem, tuple[int, ...]]:
    """The problem with its hard directions held at zero overlap, and their indices.

    Raises
    ------
    ValueError
        If the target has no hard direction, or its hard subspace is not
        spanned by coordinate axes (then rewrite the target in rotated coordinates).
    """
    split = split or split_directions(problem.target)
    hard = split.hard_indices
    if hard is None:
        raise ValueError(
            f"target={problem.target.expr!r}: the hard subspace is not spanned by coordinate axes; "
            "rewrite the target so that it is"
        )
    if not hard:
        raise ValueError(f"target={problem.target.expr!r} has no hard direction: every direction is "
                         "learned in O(1) steps, so there is no δ_NN")
    held = tuple(sorted(set(problem.training.hold_zero) | set(hard)))
    return problem.replace(hold_zero=list(held)), hard


Time = int | Literal["tti"]


@dataclass(repr=False)
class HardSpectrum(ResultBase):
    """Bulk edge and hard-direction outliers of the Hessian at one ``(δ, t)``."""

    delta: float
    t: Time
    outliers: Outliers
    hard: tuple[int, ...]
    status: Status = Status.SUCCESS
    message: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def left_edge(self) -> float | None:
        return self.outliers.left_edge

    def has_outlier(self, criterion: str = "negative") -> bool:
        locs = [o.location for o in self.outliers.outliers if o.side == "left"]
        if criterion == "separated":
            return bool(locs)
        return any(x < 0 for x in locs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["outliers"] = [o.to_dict() for o in self.outliers.outliers]
        out["left_edge"] = self.left_edge
        return out


def _check_time(t: Any) -> Time:
    if t == "tti":
        return "tti"
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
        raise ValueError(f"t must be a step >= 0 or 'tti', got {t!r}")
    return int(t)


def _spectra(problem: Problem, delta: float, times: tuple[Time, ...], settings: ThresholdSettings,
             split: DirectionSplit | None) -> dict[Time, HardSpectrum]:
    """Hard spectra of the restricted problem at ``δ`` for each of ``times`` (one DMFT run)."""
    start = time.perf_counter()
    prob, hard = restricted(problem, split)
    lam = prob.training.lam
    laws: dict[Time, tuple[Any, ...]] = {}
    steps = [t for t in times if t != "tti"]
    if "tti" in times:
        fp = solve_fixed_point(prob, delta, settings=settings.fixed_point_settings(prob.m), throw=False)
        s = fp.samples()
        # 1 + κD > 0 on every node: the law of D is bounded below
        laws["tti"] = (s["D"], s["Vstar"][:, list(hard)], s["weights"], False, fp.status, fp.message,
                       {"fixed_point": fp.to_dict()})
    if steps:
        # error bars of the observables are not used here: cheap batch errors
        res = solve_dmft(prob, delta, n_paths=settings.n_paths, seed=settings.seed, steps=max(steps),
                         keep_samples_at=tuple(steps), throw=False, errors="batch")
        for t in steps:
            if res.ok:
                s = res.samples(t)
                unbounded = None if settings.tails == "strict" else False
                law = (s["D"], s["Vstar"][:, list(hard)], None, unbounded)
            else:
                law = (np.zeros((0, prob.m, prob.m)), np.zeros((0, len(hard))), None, None)
            diag = {"dmft_train_loss": float(res.train_loss[t])}
            if res.ok:
                eig_min = np.linalg.eigvalsh(law[0])[:, 0]
                diag["tail_index_below"] = tail_index(-eig_min)
                diag["tail_unbounded"] = bool(diag["tail_index_below"] > TAIL_INDEX_THRESHOLD)
            laws[t] = (*law, res.status, res.message, diag)
    out: dict[Time, HardSpectrum] = {}
    for t, (D, z, w, unbounded, status, message, diag) in laws.items():
        if status.ok:
            o = outliers(D, z, delta, lam=lam, weights=w, unbounded_below=unbounded, throw=False)
            if not o.ok:
                status, message = o.status, o.message
            elif diag.get("tail_unbounded"):
                message = ("the law of D looks unbounded below (tail index "
                           f"{diag['tail_index_below']:.2f}); edge and outliers are those of the "
                           f"{settings.n_paths}-sample law")
        else:
            o = Outliers(outliers=[], left_edge=None, right_edge=None, status=status, message=message)
        out[t] = HardSpectrum(
            delta=delta, t=t, outliers=o, hard=hard, status=status, message=message,
            settings={"problem": prob.to_dict(), "delta": delta, "t": t, "n_paths": settings.n_paths,
                      "seed": settings.seed},
            diagnostics=diag, elapsed=time.perf_counter() - start,
        )
    return out


def hard_spectrum(
    problem: Problem,
    delta: float,
    t: Time,
    *,
    settings: ThresholdSettings | None = None,
    throw: bool = True,
) -> HardSpectrum:
    """Hard-direction outliers of the restricted-dynamics Hessian at step ``t``.

    Parameters
    ----------
    problem : Problem
    delta : float
    t : int or "tti"
        GD step (law of ``D`` from the DMFT) or ``"tti"`` (fixed point).
    settings : ThresholdSettings, optional
    throw : bool
        Raise :class:`SolverError` on failure (default True).
    """
    delta = check_delta(delta)
    t = _check_time(t)
    result = _spectra(problem, delta, (t,), settings or ThresholdSettings(), None)[t]
    if throw and not result.ok:
        raise SolverError(f"hard spectrum at delta={delta}, t={t}: {result.message}", result)
    return result


@dataclass(repr=False)
class Threshold(ResultBase):
    """``δ_NN`` with its verified bracket, ``δ_alg`` beside it, and every evaluation.

    For the long-time rule (``t=None``), ``brackets`` holds the bracket at
    ``T/2`` and at ``T`` (of the first seed); ``delta_nn`` is the one at ``T``.
    With ``settings.replicates >= 2``, ``delta_nn`` is the mean of the
    replicates' bracket midpoints, ``stderr`` its standard error, ``bracket``
    the hull of the replicates' verified brackets and ``replicates`` lists
    each seed's search; with one replicate ``stderr`` is ``None`` (unknown).
    """

    delta_nn: float | None
    bracket: tuple[float, float] | None
    t: Time | None
    delta_alg: float | None
    hard: tuple[int, ...]
    evaluations: list[dict[str, Any]]
    stderr: float | None = None
    replicates: list[dict[str, Any]] = field(default_factory=list)
    brackets: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.SUCCESS
    message: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0


def _search(has: Any, settings: ThresholdSettings) -> tuple[Status, str, tuple[float, float] | None]:
    """Ascending grid scan to the first δ with an outlier, then bisection of that cell."""
    lo, hi = settings.bracket
    grid = [float(x) for x in np.geomspace(lo, hi, settings.grid)]
    if has(grid[0]):
        return Status.NO_ROOT, f"an outlier exists already at δ={lo}: δ_NN is below the bracket", None
    prev = grid[0]
    for x in grid[1:]:
        if has(x):
            break
        prev = x
    else:
        return Status.NO_ROOT, f"no hard outlier up to δ={hi}: δ_NN is above the bracket", None
    a, b = prev, x
    bisect(lambda v: 1.0 if has(v) else -1.0, a, b, xtol=settings.xtol, disp=False)
    seen = [(v, has(v)) for v in has.cache if a <= v <= b]
    below = max(v for v, f in seen if not f)
    above = min(v for v, f in seen if f and v > below)
    return Status.SUCCESS, f"δ_NN in [{below:.5g}, {above:.5g}]", (below, above)


class _Predicate:
    """Cached ``δ ↦ has outlier at time t``; one DMFT run serves every time requested."""

    def __init__(self, problem: Problem, times: tuple[Time, ...], settings: ThresholdSettings,
                 split: DirectionSplit, progress: bool) -> None:
        self.problem, self.times, self.settings, self.split = problem, times, settings, split
        self.progress = progress
        self.spectra: dict[float, dict[Time, HardSpectrum]] = {}
        self.t: Time = times[-1]

    @property
    def cache(self) -> list[float]:
        return sorted(self.spectra)

    def __call__(self, delta: float) -> bool:
        import sys

        if delta not in self.spectra:
            sp = _spectra(self.problem, delta, self.times, self.settings, self.split)
            self.spectra[delta] = sp
            if self.progress:
                for t, hs in sp.items():
                    locs = ", ".join(f"{o.location:.4g}" for o in hs.outliers.outliers) or "none"
                    edge = "none" if hs.left_edge is None else f"{hs.left_edge:.4g}"
                    print(f"  δ={delta:.5g} t={t}: outliers [{locs}], left edge {edge}, "
                          f"{hs.status.value} ({hs.elapsed:.1f}s)", file=sys.stderr, flush=True)
        hs = self.spectra[delta][self.t]
        if not hs.ok:
            raise SolverError(f"evaluation at delta={delta}, t={self.t} failed: {hs.message}", hs)
        return hs.has_outlier(self.settings.criterion)


def _search_once(problem: Problem, t: Time | None, times: tuple[Time, ...], settings: ThresholdSettings,
                 split: DirectionSplit, progress: bool
                 ) -> tuple[Status, str, tuple[float, float] | None, dict[str, Any], _Predicate]:
    """One threshold search (one DMFT seed): status, message, bracket, per-time brackets."""
    pred = _Predicate(problem, times, settings, split, progress)
    brackets: dict[str, Any] = {}
    status, message, bracket = Status.SUCCESS, "", None
    try:
        for tt in reversed(times):  # the last time first: it is the answer
            pred.t = tt
            st, msg, br = _search(pred, settings)
            brackets[str(tt)] = {"status": st.value, "message": msg, "bracket": br}
            if tt == times[-1]:
                status, message, bracket = st, msg, br
            if not st.ok:
                break
        if t is None and status.ok:
            half = brackets[str(times[0])]["bracket"]
            slack = max(settings.xtol, settings.time_rtol * bracket[1])
            if half is None or half[0] > bracket[1] + slack or half[1] < bracket[0] - slack:
                status = Status.NOT_CONVERGED
                message += f"; not converged in time: at T/2={times[0]} the bracket is {half}"
            else:
                message += (f"; converged in time: at T/2={times[0]} the bracket is "
                            f"[{half[0]:.5g}, {half[1]:.5g}]")
        if bracket is not None:
            final = times[-1]
            early = [d for d in pred.cache if d < bracket[0] and pred.spectra[d][final].ok
                     and pred.spectra[d][final].has_outlier(settings.criterion)]
            tails = [d for d in pred.cache if pred.spectra[d][final].diagnostics.get("tail_unbounded")]
            if tails:
                message += (f"; warning: the law of D looks unbounded below at t={final} (at "
                            f"{len(tails)} of {len(pred.cache)} δ): the bulk then has no finite left edge, "
                            f"and this δ_NN is that of the {settings.n_paths}-sample law, which moves "
                            "with n_paths like a finite-d threshold")
            if early:
                message += (f"; warning: not monotone in δ, an outlier also at δ="
                            f"{', '.join(f'{v:.4g}' for v in early)} (Monte Carlo noise of the sampled "
                            "law of D: more paths narrow it)")
    except SolverError as exc:
        status, message = Status.FAILED, str(exc)
    return status, message, bracket, brackets, pred


def _combine_replicates(replicates: list[dict[str, Any]], times: tuple[Time, ...], t: Time | None,
                        settings: ThresholdSettings
                        ) -> tuple[Status, str, float | None, float | None, tuple[float, float] | None]:
    """Mean and standard error over replicate searches; the long-time rule on the means.

    A replicate's own time rule compares two single-seed brackets and fails on Monte Carlo noise
    alone, so with replicates the rule is applied to the means: ``δ_NN(T/2)`` and ``δ_NN(T)``
    agree when they differ by at most ``max(xtol, time_rtol·δ_NN(T), 2·(combined standard
    error))``.
    """
    allowed = {Status.SUCCESS.value} | ({Status.NOT_CONVERGED.value} if t is None else set())
    bad = [r for r in replicates if r["bracket"] is None or r["status"] not in allowed]
    if bad:
        return (Status(bad[0]["status"]), f"replicate with seed {bad[0]['seed']}: {bad[0]['message']}",
                None, None, None)

    def mean_se(brs: list[tuple[float, float]]) -> tuple[float, float]:
        mids = np.array([0.5 * (a + b) for a, b in brs])
        return float(mids.mean()), float(mids.std(ddof=1) / np.sqrt(mids.size))

    brs = [r["bracket"] for r in replicates]
    mean, se = mean_se(brs)
    hull = (min(a for a, _ in brs), max(b for _, b in brs))
    n = len(replicates)
    message = (f"δ_NN = {mean:.5g} ± {se:.2g} (mean ± standard error over {n} independent DMFT "
               "seeds; replicate brackets " + ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in brs) + ")")
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
    return status, message, mean, se, hull


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
    """
    start = time.perf_counter()
    settings = settings or ThresholdSettings()
    split = split_directions(problem.target)
    _, hard = restricted(problem, split)
    if t is None:
        T = settings.long_time
        times: tuple[Time, ...] = (T // 2, T)
    else:
        times = (_check_time(t),)
    n_rep = 1 if times == ("tti",) else settings.replicates
    runs = [_search_once(problem, t, times, replace(settings, seed=settings.seed + j), split, progress)
            for j in range(n_rep)]
    status, message, bracket, brackets, _ = runs[0]
    evaluations = [
        {"seed": settings.seed + j, "delta": d, "t": tt,
         "has_outlier": hs.has_outlier(settings.criterion) if hs.ok else None,
         "outliers": [o.to_dict() for o in hs.outliers.outliers], "left_edge": hs.left_edge,
         "status": hs.status.value, "elapsed": hs.elapsed}
        for j, run in enumerate(runs) for d in run[4].cache for tt, hs in run[4].spectra[d].items()
    ]
    replicates = [{"seed": settings.seed + j, "status": st.value, "message": msg, "bracket": br,
                   "brackets": brs} for j, (st, msg, br, brs, _) in enumerate(runs)]
    delta_mid: float | None = None if bracket is None else 0.5 * (bracket[0] + bracket[1])
    stderr: float | None = None
    if n_rep > 1:
        status, message, delta_mid, stderr, bracket = _combine_replicates(replicates, times, t, settings)
        message += f"; first replicate: {runs[0][1]}"
    try:
        alg = alg_threshold(problem.target, throw=False)
        d_alg = alg.delta_alg if alg.ok else None
    except (NotImplementedError, ValueError):
        d_alg = None
    result = Threshold(
        delta_nn=delta_mid, bracket=bracket, t=t, stderr=stderr, replicates=replicates,
        delta_alg=d_alg, hard=hard, evaluations=evaluations, brackets=brackets,
        status=status, message=message,
        settings={"problem": problem.to_dict(), "t": t,
                  **{k: v for k, v in vars(replace(settings)).items() if k != "fixed_point"},
                  "fixed_point": vars(settings.fixed_point_settings(problem.m))},
        diagnostics={"split": split.to_dict(), "evaluations": len(evaluations)},
        elapsed=time.perf_counter() - start,
    )
    if throw and not result.ok:
        raise SolverError(f"delta_nn: {message}", result)
    return result
