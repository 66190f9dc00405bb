"""Sweeps of the finite-d simulator over sample ratios ``δ`` × trials.

Each ``(δ, trial)`` pair is one job: an independent GD run
(:func:`dmftsolve.simulation.simulator.simulate` with one trial). Jobs go through any
:class:`concurrent.futures.Executor`: a
:class:`~concurrent.futures.ProcessPoolExecutor` on one machine, or
``distributed.Client(...).get_executor()`` on a dask cluster; with no
executor they run serially in this process. The seeds do not depend on the
executor, so every executor gives the same numbers.

Examples
--------
>>> from dmftsolve import Problem
>>> from dmftsolve.simulation.sweeps import sweep
>>> p = Problem.build(target="z**2", activation="quad", eta=0.05, steps=10)
>>> res = sweep(p, d=40, deltas=[2.0, 4.0], trials=2, seed=0, progress=False)
>>> res.success_rate.shape
(2,)
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmftsolve.checks import check_integer, check_real
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status, binomial_error, format_binomial
from dmftsolve.seeds import SeedLike, as_seed_sequence, child, seed_record
from dmftsolve.simulation.simulator import (
    SimulationResult,
    assemble_trials,
    prepare_simulation,
    run_trial,
)

__all__ = ["SweepResult", "sweep"]


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class SweepResult(Result):
    """Success rates and final statistics of GD runs over a grid of ``δ``.

    Arrays are indexed by the position of ``δ`` in :attr:`deltas`.

    Attributes
    ----------
    status, message, settings, diagnostics, elapsed, version, warnings
        See :class:`~dmftsolve.results.Result`. ``status`` is
        ``NONFINITE`` if any run produced non-finite values (such a run counts
        as a failure); ``diagnostics["nonfinite"]`` counts them per ``δ``.
    deltas : ndarray, shape (D,)
        Sample ratios.
    success_rate, success_stderr : ndarray, shape (D,)
        Fraction of trials with final cosine ``> success_threshold`` (with
        ``first_passage``: at some recorded step) and its
        binomial standard error ``√(p(1 − p)/trials)`` (0 at a rate of 0 or 1:
        the reported error is :attr:`success_error`).
    successes, success_error : ndarray, shape (D,)
        Properties: the count of successful trials, and the rate's error by the
        package's one binomial rule (:func:`~dmftsolve.results.binomial_error`),
        which the table (:meth:`rows`), the repr and ``dmftsolve simulate`` report.
    cosine_median, cosine_q30, cosine_q70 : ndarray, shape (D,)
        Median and 30/70 percentiles of the final cosine over trials
        (non-finite runs excluded).
    train_loss, train_loss_stderr, test_loss, test_loss_stderr : ndarray, shape (D,)
        Final training and test loss, mean over trials and standard error.
    runs : list of SimulationResult
        The full per-``δ`` results (trials stacked), as :func:`simulate`
        returns them.
    """

    _headline = ("deltas", "success_rate", "success_error")  # shown by the repr (Result.__repr__)

    deltas: np.ndarray
    success_rate: np.ndarray
    success_stderr: np.ndarray
    cosine_median: np.ndarray
    cosine_q30: np.ndarray
    cosine_q70: np.ndarray
    train_loss: np.ndarray
    train_loss_stderr: np.ndarray
    test_loss: np.ndarray
    test_loss_stderr: np.ndarray
    runs: list[SimulationResult] = field(default_factory=list)

    def to_dict(self, *, runs: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``runs=False`` leaves out the per-``δ`` trajectories."""
        out = super().to_dict()
        if not runs:
            out.pop("runs")
        return out

    @property
    def successes(self) -> np.ndarray:
        """Successful trials per ``δ`` (``success_rate × trials``, as integers)."""
        return np.rint(np.asarray(self.success_rate) * self.settings["trials"]).astype(int)

    @property
    def success_error(self) -> np.ndarray:
        """Error of each success rate by the package's one binomial rule
        (:func:`~dmftsolve.results.binomial_error`: the standard error, or for 0 or all
        of the trials the one-sided 95 % bound instead of 0)."""
        n = self.settings["trials"]
        return np.array([binomial_error(int(k), n) for k in self.successes])

    def rows(self) -> list[list[Any]]:
        """One row per ``δ``: δ, successes/trials, the rate with its error as text
        (:func:`~dmftsolve.results.format_binomial`), cosine quantiles, losses."""
        trials = self.settings["trials"]
        return [
            [float(self.deltas[i]), f"{k}/{trials}", format_binomial(int(k), trials),
             float(self.cosine_q30[i]), float(self.cosine_median[i]), float(self.cosine_q70[i]),
             float(self.train_loss[i]), float(self.test_loss[i])]
            for i, k in enumerate(self.successes)
        ]


def _stats(run: SimulationResult, threshold: float, first_passage: bool = False) -> dict[str, float]:
    final = run.cosine[:, -1]
    finite = final[np.isfinite(final)]
    rate, se = run.success_rate(threshold, first_passage=first_passage)
    q30, q50, q70 = (np.percentile(finite, [30, 50, 70]) if finite.size
                     else (math.nan, math.nan, math.nan))
    out = {"success_rate": rate, "success_stderr": se,
           "cosine_q30": float(q30), "cosine_median": float(q50), "cosine_q70": float(q70)}
    for name in ("train_loss", "test_loss"):
        out[name] = float(run.mean(name)[-1])
        out[f"{name}_stderr"] = float(run.stderr(name)[-1])
    return out


def _check_sweep_inputs(deltas: Any, trials: Any, success_threshold: Any, first_passage: Any,
                        executor: Any, simulate_kwargs: Mapping[str, Any]) -> tuple[np.ndarray, int, float]:
    """``(deltas, trials, success_threshold)`` checked, or a ``ValueError`` naming the first unfit one."""
    allowed = {"gram", "record_every", "n_test", "hessian_at", "n_eigs", "dense_hessian",
               "full_spectrum", "hard", "dtype", "block_rows", "blas_threads"}
    unknown = sorted(set(simulate_kwargs) - allowed)
    if unknown:
        raise ValueError(f"unknown simulate keyword(s) {unknown}; allowed: {sorted(allowed)}")
    if isinstance(deltas, (int, float, np.number)) and not isinstance(deltas, (bool, np.bool_)):
        deltas = [deltas]
    if isinstance(deltas, np.ndarray):
        deltas = deltas.ravel().tolist()
    if isinstance(deltas, (str, bytes, Mapping)) or not isinstance(deltas, Sequence):
        raise ValueError(f"deltas must be a number or a sequence of numbers, got {deltas!r:.80}")
    deltas_a = np.asarray([check_real("delta", x, positive=True) for x in deltas],
                          dtype=float)
    if deltas_a.size == 0:
        raise ValueError(f"deltas must be a non-empty sequence, got {deltas!r}")
    trials = check_integer("trials", trials, 1)
    threshold = check_real("success_threshold", success_threshold)
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"success_threshold must be in [0, 1), got {success_threshold!r}")
    if not isinstance(first_passage, (bool, np.bool_)):
        raise ValueError(f"first_passage must be True or False, got {first_passage!r}")
    if executor is not None and not isinstance(executor, Executor):
        raise ValueError(f"executor must be a concurrent.futures.Executor, got {executor!r}")
    return deltas_a, trials, threshold


def _run_jobs(problem: Problem, prepared: list[Any], delta_seeds: list[Any], trials: int,
              executor: Executor | None, progress: bool) -> dict[tuple[int, int], dict[str, Any]]:
    """The output of :func:`run_trial` for every ``(δ index, trial)``, serially or on ``executor``."""
    jobs = [(i, j) for j in range(trials) for i in range(len(prepared))]
    outputs: dict[tuple[int, int], dict[str, Any]] = {}

    from tqdm import tqdm

    bar = tqdm(total=len(jobs), file=sys.stderr, disable=not progress, unit="run",
               desc=f"sweep d={prepared[0][0]}")
    try:
        if executor is None:
            for i, j in jobs:
                dd, n, _, _, opts = prepared[i]
                outputs[i, j] = run_trial(problem, dd, n, child(delta_seeds[i], j), opts)
                bar.update(1)
        else:
            futures: dict[Future, tuple[int, int]] = {}
            for i, j in jobs:
                dd, n, _, _, opts = prepared[i]
                fut = executor.submit(run_trial, problem, dd, n, child(delta_seeds[i], j), opts)
                futures[fut] = (i, j)
            for fut in as_completed(futures):
                outputs[futures[fut]] = fut.result()
                bar.update(1)
    finally:
        bar.close()
    return outputs


def _assemble(problem: Problem, prepared: list[Any], outputs: dict[tuple[int, int], dict[str, Any]],
              delta_seeds: list[Any], trials: int, threshold: float,
              first_passage: bool) -> tuple[list[SimulationResult], list[dict[str, float]], list[int]]:
    """Per ``δ``: the trials stacked into one :class:`SimulationResult`, its statistics, and the
    count of non-finite runs."""
    runs: list[SimulationResult] = []
    stats: list[dict[str, float]] = []
    nonfinite: list[int] = []
    for i, (dd, n, delta, _, opts) in enumerate(prepared):
        outs = [outputs[i, j] for j in range(trials)]
        seeds = [child(delta_seeds[i], j) for j in range(trials)]
        elapsed = float(sum(o["elapsed"] for o in outs))
        run = assemble_trials(outs, problem, dd, n, delta, seeds, opts, elapsed, root=delta_seeds[i])
        runs.append(run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            stats.append(_stats(run, threshold, first_passage))
        nonfinite.append(sum(o["status"] is Status.NONFINITE for o in outs))
    return runs, stats, nonfinite


def sweep(
    problem: Problem,
    d: int,
    deltas: Sequence[float],
    *,
    trials: int,
    seed: SeedLike = None,
    executor: Executor | None = None,
    progress: bool = True,
    success_threshold: float = 0.5,
    first_passage: bool = False,
    **simulate_kwargs: Any,
) -> SweepResult:
    """Run ``trials`` GD runs at each ``δ`` in ``deltas`` and report success rates.

    Parameters
    ----------
    problem : Problem
        The learning problem (it is pickled to the workers).
    d : int
        Input dimension.
    deltas : sequence of float
        Sample ratios ``δ = n/d`` (each > 0).
    trials : int
        Runs per ``δ``.
    seed : int, SeedSequence, Generator or None
        Root seed. The ``i``-th ``δ`` uses the ``i``-th child of the root
        ``SeedSequence`` and trial ``j`` its ``j``-th child, so
        ``runs[i]`` equals ``simulate(problem, d, deltas[i],
        seed=SeedSequence(root.entropy, spawn_key=(*root.spawn_key, i)), trials=trials)``.
    executor : concurrent.futures.Executor, optional
        Where to run the ``len(deltas) × trials`` jobs (e.g. a
        ``ProcessPoolExecutor``, or a dask ``Client.get_executor()``); serial
        in this process if None.
    progress : bool
        Show a tqdm progress bar over jobs on stderr.
    success_threshold : float
        A run succeeds when its final cosine exceeds this (in ``[0, 1)``).
    first_passage : bool
        Count a run as a success when its success statistic exceeds ``success_threshold`` at
        some recorded step instead of the last: the criterion of the finite-d theory
        (``dmftsolve transition``), for a like-for-like comparison. Runs still go to step
        ``T``, so the cosine and loss columns stay those of the last step.
    **simulate_kwargs
        Passed to :func:`~dmftsolve.simulation.simulator.simulate` (``gram``,
        ``record_every``, ``hessian_at``, ``dtype``, …). ``throw`` defaults
        to False here: a run that blows up counts as a failure and the sweep
        reports ``NONFINITE``; with ``throw=True`` a :class:`SolverError` is
        raised at the end instead.

    Returns
    -------
    SweepResult

    Examples
    --------
    A tiny sweep (``d = 20``, two trials per ``δ``); the counts are what GD did:

    >>> from dmftsolve import Problem, sweep
    >>> p = Problem.build(target="z**2", activation="gelu", eta=0.5, steps=20)
    >>> res = sweep(p, d=20, deltas=[2.0, 4.0], trials=2, seed=0, progress=False)
    >>> res.ok, res.deltas.tolist(), res.success_rate.shape, len(res.runs)
    (True, [2.0, 4.0], (2,), 2)
    >>> all(0 <= k <= 2 for k in res.successes)
    True
    """
    t0 = time.perf_counter()
    throw = bool(simulate_kwargs.pop("throw", False))
    deltas_a, trials, threshold = _check_sweep_inputs(deltas, trials, success_threshold, first_passage,
                                                      executor, simulate_kwargs)
    prepared = [prepare_simulation(problem, d, x, trials=trials, **simulate_kwargs) for x in deltas_a]
    root = as_seed_sequence(seed)
    delta_seeds = [child(root, i) for i in range(len(deltas_a))]
    outputs = _run_jobs(problem, prepared, delta_seeds, trials, executor, progress)
    runs, stats, nonfinite = _assemble(problem, prepared, outputs, delta_seeds, trials, threshold,
                                       bool(first_passage))

    def col(name: str) -> np.ndarray:
        return np.asarray([s[name] for s in stats], dtype=float)

    bad = [r for r in runs if not r.ok]
    status = Status.SUCCESS
    message = ""
    if bad:
        status = (Status.NONFINITE if any(r.status is Status.NONFINITE for r in bad)
                  else bad[0].status)
        message = "; ".join(f"delta={r.settings['delta']:g}: {r.message}" for r in bad)
    settings = {
        "d": prepared[0][0], "deltas": deltas_a, "n": [p[1] for p in prepared], "trials": trials,
        "success_threshold": threshold, "first_passage": bool(first_passage),
        "root_seed": seed_record(root),
        "executor": None if executor is None else type(executor).__name__,
        "simulate": dataclasses.asdict(prepared[0][4]),
        "problem": problem.to_dict(),
    }
    result = SweepResult(
        status=status, message=message, settings=settings,
        diagnostics={"nonfinite": nonfinite, "run_elapsed": [r.elapsed for r in runs]},
        elapsed=time.perf_counter() - t0, deltas=deltas_a,
        success_rate=col("success_rate"), success_stderr=col("success_stderr"),
        cosine_median=col("cosine_median"), cosine_q30=col("cosine_q30"),
        cosine_q70=col("cosine_q70"), train_loss=col("train_loss"),
        train_loss_stderr=col("train_loss_stderr"), test_loss=col("test_loss"),
        test_loss_stderr=col("test_loss_stderr"), runs=runs,
    )
    if throw and not result.ok:
        raise SolverError(f"sweep {result.status.value}: {result.message}", result)
    return result
