"""Settings of the Hessian-threshold search, kept apart from the problem.

:class:`ThresholdSettings` holds the options of :func:`~dmftsolve.thresholds.hessian_threshold.delta_nn`
and of the hard spectra it evaluates (:func:`~dmftsolve.thresholds.restricted_hessian.hard_spectra`):
the law's source and its Monte Carlo paths, the search bracket and tolerance, the replicates and
the worker processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dmftsolve.checks import check_delta
from dmftsolve.dynamics.dmft import check_null_rtol
from dmftsolve.dynamics.fixed_point import FixedPointSettings

__all__ = ["ThresholdSettings", "available_cores"]


def available_cores() -> int:
    """Cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` elsewhere)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


@dataclass(frozen=True)
class ThresholdSettings:
    """Settings of the threshold search, kept apart from the problem.

    Parameters
    ----------
    criterion : {"negative", "separated"}
        What counts as "the Hessian has a hard outlier" (module docstring).
    bracket : (float, float)
        Range of ``δ`` searched.
    grid : int
        Points of the initial geometric grid over ``bracket``.
    xtol : float
        Width of the final bracket in ``δ``. With replicates there is no
        point in a bracket much narrower than the replicate standard error:
        the seed-to-seed spread dominates (for ``y = z²`` at ``10⁴`` paths it
        is about 2 in ``δ``, a standard error of about 1.1 over 3 seeds), and
        each halving of the bracket costs one DMFT run per seed and time.
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
        (square loss with unbounded ``y``, ``docs/theory.md`` §3.5): ``"strict"``
        fails (the bulk has no finite left edge), ``"sample"`` (default) uses the
        law of the ``n_paths`` Monte Carlo samples as it is, whose edge is that
        of a system with about ``n_paths`` samples, and reports the tail index
        in the diagnostics and a warning.
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
    workers : int or None
        Processes over which the replicates' evaluations are spread (default
        None: the available cores, :func:`available_cores`); 1 runs everything
        in this process. The result does not depend on it.
    null_rtol : float or None
        ``null_rtol`` of each DMFT run (:class:`~dmftsolve.dynamics.dmft.DMFTSettings`; None:
        its default, ``1e-4`` for the Stein responses; for the long-time rule at width ``m >= 2``,
        :data:`~dmftsolve.thresholds.hessian_threshold.LONG_NULL_RTOL_WIDE` = ``1e-3``). At
        width 2 over long horizons ``1e-4`` can let the recursion diverge (the run fails with
        "the DMFT diverged"); ``1e-3`` cures it without moving ``Q`` beyond its Monte Carlo
        error (``docs/findings.md`` §4.9).
    outlier_points : int
        Scan points of the outlier search below the bulk (``npoints`` of
        :func:`~dmftsolve.hessian.outlier_equation.outliers`, default 100, which
        locates the edges and outliers as 400 points do, at a quarter of the cost;
        ``benchmarks/bench_threshold.py`` compares them).

    Examples
    --------
    >>> from dmftsolve import ThresholdSettings
    >>> s = ThresholdSettings(bracket=(1.0, 3.0), n_paths=2000, replicates=2)
    >>> s.bracket, s.seed, s.criterion
    ((1.0, 3.0), 0, 'negative')
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
    workers: int | None = None
    outlier_points: int = 100
    null_rtol: float | None = None

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
        if self.workers is not None:
            integer("workers", 1)
        integer("outlier_points", 16)
        check_null_rtol(self.null_rtol)

    @property
    def n_workers(self) -> int:
        """``workers``, or the available cores when None."""
        return available_cores() if self.workers is None else self.workers

    def fixed_point_settings(self, m: int) -> FixedPointSettings:
        if self.fixed_point is not None:
            return self.fixed_point
        return FixedPointSettings(branch="global" if m == 1 else "newton", nodes=None)
