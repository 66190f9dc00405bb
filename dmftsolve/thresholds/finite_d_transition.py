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

δ_50 is the maximum-likelihood probit fit ``P = Φ((δ − δ_50)/w)`` to all draws, with a
bootstrap standard error (:func:`probit_fit`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_ndtr, ndtri

from dmftsolve.problem import Problem, check_delta, check_integer
from dmftsolve.results import Result, SolverError, Status

__all__ = ["TransitionSettings", "SuccessProbability", "TransitionCurve", "success_probability",
           "transition", "probit_fit"]


_CONSTRUCTIONS = {
    "forced": "finite-n force on reflection-paired kernels (weights of n = δd samples; see force_weights)",
    "finite_n": "finite-n DMFT (N = n unpaired paths)",
    "initial": "initial overlap only (reflection-paired paths)",
    "quenched": "GD's gradient over n = δd quenched label samples, kernels over copies of them "
                "with independent innovations (reflection-paired)",
}


@dataclass(frozen=True)
class TransitionSettings:
    """Settings of :func:`success_probability` and :func:`transition`.

    Attributes
    ----------
    steps : int, optional
        GD steps ``T`` (default: the problem's).
    draws : int
        DMFT draws per δ (stratified ``m_0``, independent path seeds).
    seed : int
        Root seed; draw ``k`` at ``(δ, d)`` uses ``[seed, round(1000 δ), d, k]``.
    success_cosine : float
        Success: cosine at ``T`` above this (GD's criterion: 1/2).
    construction : {"forced", "finite_n", "initial"}
        How a draw carries GD's finite-``n`` sources (module docstring): ``"forced"``
        (reflection-paired kernels + bootstrap force of ``n`` samples), ``"finite_n"``
        (``N = n`` unpaired paths), ``"initial"`` (no finite-``n`` sources).
    n_paths : int
        Kernel paths of the ``"forced"`` and ``"initial"`` constructions.
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
    """

    steps: int | None = None
    draws: int = 24
    seed: int = 0
    success_cosine: float = 0.5
    construction: str = "forced"
    n_paths: int = 20_000
    copies: int = 2
    workers: int = 1
    paths_per_sample: float | None = None
    force_weights: str = "paired"

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_integer("steps", self.steps, 1)
        check_integer("draws", self.draws, 2)
        check_integer("seed", self.seed, 0)
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
        if not 0.0 < float(self.success_cosine) < 1.0:
            raise ValueError(f"success_cosine must lie in (0, 1), got {self.success_cosine!r}")


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class SuccessProbability(Result):
    """``P(success | δ, d, T)``: ``p`` with its binomial standard error ``p_err``.

    ``m0`` (draws,) the initial ``√d M_0``; ``final_cosine`` (draws,, the last value before a
    blow-up of the solve if any); ``escape_step``
    (draws,) first step with cosine above ``success_cosine`` (−1 if none). The
    stratification of ``m_0`` makes the binomial error an upper bound.
    """

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


def stratified_starts(problem: Problem, delta: float, d: int, s: TransitionSettings) -> np.ndarray:
    """The draws' initial ``√d M_0``: ``√q0 Φ⁻¹((k + U_k)/K)``, ``k < K = s.draws``, seeded by
    ``(s.seed, δ, d)`` (stratified, so the binomial error of ``p`` is an upper bound)."""
    q0 = float(problem.training.init.q0)
    rng = np.random.default_rng([s.seed, int(round(1000 * delta)), d])
    return math.sqrt(q0) * ndtri((np.arange(s.draws) + rng.random(s.draws)) / s.draws)


def kernel_paths(s: TransitionSettings, n: int) -> int:
    """Kernel paths ``N`` of a ``"forced"`` / ``"initial"`` draw at sample size ``n``."""
    return s.n_paths if s.paths_per_sample is None else max(40, int(round(s.paths_per_sample * n)))


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


def curvature_warning(s: TransitionSettings, d: int, deltas: Sequence[float]) -> str | None:
    """A warning when a ``"forced"`` draw's curvature along θ* carries more of the kernel
    paths' own noise than GD's (:data:`CURVATURE_EXCESS_WARN`) at some δ of ``deltas``;
    None otherwise. Names the δ, the paths and the remedy (``paths_per_sample=2``)."""
    n = max(int(round(x * d)) for x in deltas)  # the excess grows with n
    ex = curvature_excess(s, n)
    if not ex > CURVATURE_EXCESS_WARN:  # NaN (not "forced") or small
        return None
    x = n / d
    return (f"the kernel paths' own noise in the curvature along theta* is {ex:.2g} x GD's at "
            f"delta = {x:g} (N = {kernel_paths(s, n)} paths, n = {n} samples; {s.force_weights} "
            f"weights): delta_50 may be too high; pass paths_per_sample=2 (--paths-per-sample 2) "
            f"for N = 2n")


def solve_draw(problem: Problem, delta: float, d: int, k: int, m0: float,
               s: TransitionSettings, T: int) -> Any:
    """The DMFT solve of draw ``k`` (start ``√d M_0 = m0``, ``s.construction``), as
    :func:`success_probability` runs it: a :class:`~dmftsolve.dynamics.dmft.DMFTResult`
    (``throw=False``; check ``.ok``)."""
    from dmftsolve.dynamics.dmft import solve_dmft

    q0 = float(problem.training.init.q0)
    n = int(round(delta * d))
    N = kernel_paths(s, n)
    p = problem.replace(M0=[[m0 / math.sqrt(d)]], Q0=[[q0]], steps=T, hold_zero=[])
    kw: dict[str, Any] = {
        "finite_n": {"n_paths": n, "antithetic": False},
        "forced": {"n_paths": N, "reflect": (0,), "force_samples": n, "force_weights": s.force_weights},
        "initial": {"n_paths": N, "reflect": (0,)},
        "quenched": {"n_paths": 2 * s.copies * n, "reflect": (0,), "antithetic": False,
                     "n_batches": 2, "force_samples": n, "quenched_labels": True},
    }[s.construction]
    return solve_dmft(p, delta, seed=_draw_seed(s.seed, delta, d, k), errors="none",
                      test_loss="none", throw=False, **kw)


def sane_steps(r: Any) -> int:
    """Number of leading steps of a draw's solve ``r`` (from :func:`solve_draw`) before any
    blow-up: finite cosine, ``|M| < 1e3`` and ``Q < 1e3``. The N-path Stein kernels can diverge
    long after the escape (e.g. ``M ~ 1e62`` at t ~ 300 with N = 4250 paths), and a solve that
    stopped on non-finite kernels is NaN from there on."""
    cosine = np.asarray(r.cosine, dtype=float)
    with np.errstate(invalid="ignore"):
        sane = np.isfinite(cosine) & (np.abs(r.M[:, 0, 0]) < 1e3) & (r.q_diag[:, 0, 0] < 1e3)
    return int(np.argmin(sane)) if not sane.all() else sane.size


def _draw(problem: Problem, delta: float, d: int, k: int, m0: float,
          s: TransitionSettings, T: int) -> tuple[float, int, bool, str]:
    """One DMFT draw: ``(last sane cosine, escape step or −1, diverged, failure message)``."""
    r = solve_draw(problem, delta, d, k, m0, s, T)
    # first passage, before any blow-up (:func:`sane_steps`); a solve that stopped on
    # non-finite kernels counts if it escaped before.
    cosine = np.asarray(r.cosine, dtype=float)
    upto = sane_steps(r)
    above = np.nonzero(cosine[:upto] > s.success_cosine)[0]
    if not r.ok and not above.size:
        return math.nan, -1, False, f"draw {k}: {r.message}"
    last = float(cosine[upto - 1]) if upto > 0 else math.nan
    return last, int(above[0]) if above.size else -1, upto < cosine.size, ""


def success_probability(problem: Problem, delta: float, d: int, *,
                        settings: TransitionSettings | None = None,
                        throw: bool = True, executor: Executor | None = None) -> SuccessProbability:
    """Predicted probability that GD at ``(δ, d)`` reaches cosine > 1/2 by step ``T``.

    Parameters
    ----------
    problem : Problem
        Single neuron (``m = k = 1``), random start (``q0``), label even in ``z``.
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

    Returns
    -------
    SuccessProbability
    """
    from dmftsolve.dynamics.hard_overlap import check_hard_overlap_problem

    t0 = time.perf_counter()
    check_hard_overlap_problem(problem)
    delta = check_delta(delta)
    d = check_integer("d", d, 2)
    s = TransitionSettings() if settings is None else settings
    if not isinstance(s, TransitionSettings):
        raise ValueError(f"settings must be a TransitionSettings, got {settings!r}")
    T = problem.training.steps if s.steps is None else s.steps
    K = s.draws
    m0 = stratified_starts(problem, delta, d, s)
    n = int(round(delta * d))
    if executor is None:
        outs = [_draw(problem, delta, d, k, float(m0[k]), s, T) for k in range(K)]
    else:
        outs = list(executor.map(_draw, *zip(*[(problem, delta, d, k, float(m0[k]), s, T)
                                               for k in range(K)], strict=True)))
    cos = np.array([o[0] for o in outs])
    esc = np.array([o[1] for o in outs])
    diverged = sum(o[2] for o in outs)
    failures = [o[3] for o in outs if o[3]]
    ok = esc >= 0
    succ = int(ok.sum())
    p_hat = succ / K
    status = Status.SUCCESS if not failures else Status.FAILED
    message = "" if not failures else f"{len(failures)} DMFT draws failed: {failures[:3]}"
    warning = curvature_warning(s, d, [delta])
    res = SuccessProbability(
        status=status, message=message, warnings=() if warning is None else (warning,),
        settings={**dataclasses.asdict(s), "steps": T, "problem": problem.to_dict(), "n": n},
        diagnostics={"construction": _CONSTRUCTIONS[s.construction], "failures": failures,
                     "diverged_draws": diverged, "kernel_paths": kernel_paths(s, n),
                     "curvature_excess": curvature_excess(s, n),
                     "criterion": "first passage of the cosine above success_cosine by step T "
                                  "(GD's escapes are permanent: no late escapes or relapses "
                                  "were seen in 4x longer runs)"},
        elapsed=time.perf_counter() - t0, delta=delta, d=d, p=p_hat,
        p_err=math.sqrt(max(p_hat * (1 - p_hat), 0.25 / K) / K), successes=succ, draws=K,
        m0=m0, final_cosine=cos, escape_step=esc)
    if throw and not res.ok:
        raise SolverError(f"SuccessProbability {status.value}: {message}", res)
    return res


def _probit_mle(x: np.ndarray, k: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    def nll(theta: np.ndarray) -> float:
        mu, logw = theta
        u = (x - mu) / math.exp(logw)
        return float(-(k * log_ndtr(u) + (n - k) * log_ndtr(-u)).sum())

    p = k / n
    i = int(np.argmin(np.abs(p - 0.5)))
    start = np.array([x[i], math.log(max(0.1 * (x.max() - x.min()), 0.05))])
    res = minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-5, "fatol": 1e-8})
    return float(res.x[0]), float(math.exp(res.x[1]))


def probit_fit(deltas: np.ndarray, successes: np.ndarray, trials: np.ndarray, *,
               bootstrap: int = 200, seed: int = 0) -> tuple[float, float, float]:
    """Maximum-likelihood ``P = Φ((δ − δ_50)/w)``: returns ``(δ_50, se(δ_50), w)``.

    The standard error is a bootstrap over the counts: ``k*_i ~ Bin(n_i, (k_i + ½)/(n_i + 1))``
    (the observed rates shrunk towards ½, so an observed 0 or 1 still fluctuates), refitted;
    resamples with every count 0 or every count ``n`` are skipped. The observed-information
    error is useless here: with few trials per δ the curve is often nearly a step, the fitted
    width collapses and its curvature says nothing about δ_50. If every point is 0 or every
    point is 1, δ_50 lies outside the grid and ``(nan, nan, nan)`` is returned.
    """
    x = np.asarray(deltas, float)
    k = np.asarray(successes, float)
    n = np.asarray(trials, float)
    if not (x.shape == k.shape == n.shape) or x.size < 2:
        raise ValueError(f"deltas, successes, trials must be equal-length arrays of >= 2, got shapes "
                         f"{x.shape}, {k.shape}, {n.shape}")
    if np.all(k == 0) or np.all(k == n):
        return math.nan, math.nan, math.nan
    mu, w = _probit_mle(x, k, n)
    rng = np.random.default_rng(seed)
    ks = rng.binomial(n.astype(int), (k + 0.5) / (n + 1), size=(int(bootstrap), x.size)).astype(float)
    keep = ~(np.all(ks == 0, axis=1) | np.all(ks == n, axis=1))
    lo, hi = x.min() - (x.max() - x.min()), x.max() + (x.max() - x.min())
    boot = np.array([min(max(_probit_mle(x, kb, n)[0], lo), hi) for kb in ks[keep]])
    se = float(boot.std(ddof=1)) if boot.size > 1 else math.nan
    return mu, se, w


def transition(problem: Problem, d: int, deltas: Sequence[float], *,
               settings: TransitionSettings | None = None, throw: bool = True,
               progress: bool = False) -> TransitionCurve:
    """The predicted success curve over ``deltas`` at dimension ``d`` and its δ_50 ± error.

    Parameters
    ----------
    problem : Problem
        As for :func:`success_probability`.
    d : int
        Input dimension.
    deltas : sequence of float
        Sample ratios (at least 2, distinct).
    settings : TransitionSettings, optional
        See :class:`TransitionSettings` (``workers``: processes for the draws).
    throw : bool
        Raise :class:`SolverError` on a failed point or a δ_50 outside the grid.
    progress : bool
        Print one line per δ on stderr.

    Returns
    -------
    TransitionCurve
    """
    import sys

    t0 = time.perf_counter()
    d = check_integer("d", d, 2)
    grid = np.array(sorted({check_delta(x) for x in deltas}), float)
    if grid.size < 2:
        raise ValueError(f"deltas must hold at least 2 distinct values, got {list(deltas)!r}")
    s = TransitionSettings() if settings is None else settings
    points = []
    pool = ProcessPoolExecutor(s.workers) if s.workers > 1 else None
    try:
        for x in grid:
            pt = success_probability(problem, float(x), d, settings=s, throw=throw, executor=pool)
            points.append(pt)
            if progress:
                print(f"[transition d={d}] δ={x:g}: {pt.successes}/{pt.draws} ({pt.elapsed:.0f} s)",
                      file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    k = np.array([p.successes for p in points])
    n = np.array([p.draws for p in points])
    mu, se, w = probit_fit(grid, k, n)
    bad = [p for p in points if not p.ok]
    status, message = Status.SUCCESS, ""
    if bad:
        status, message = Status.FAILED, (
            f"{len(bad)} of {len(points)} points had failed draws: "
            + "; ".join(f"δ = {p.delta:g}: {p.message[:160]}" for p in bad[:3]))
    elif not math.isfinite(mu):
        status, message = Status.NO_ROOT, "success rate is 0 or 1 at every δ: δ_50 outside the grid"
    warning = curvature_warning(s, d, grid)
    res = TransitionCurve(
        status=status, message=message, warnings=() if warning is None else (warning,),
        settings={**dataclasses.asdict(s), "problem": problem.to_dict(), "d": d},
        diagnostics={"fit": "probit maximum likelihood, bootstrap se (probit_fit)"},
        elapsed=time.perf_counter() - t0, d=d, deltas=grid,
        p=np.array([p.p for p in points]), p_err=np.array([p.p_err for p in points]),
        successes=k, draws=n, delta_50=mu, delta_50_err=se, width=w, points=tuple(points))
    if throw and not res.ok:
        raise SolverError(f"TransitionCurve {status.value}: {message}", res)
    return res
