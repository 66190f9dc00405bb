"""Settings of the finite-d transition, and the kernel-path policy of its draws.

:class:`TransitionSettings` holds the options of :func:`~dmftsolve.finite_d.success_probability`
and :func:`~dmftsolve.finite_d.transition`, apart from the problem. The number of Monte Carlo
kernel paths of a draw, when not given, comes from one table (:data:`KERNEL_PATHS`): by width, and
larger on labels with a non-zero mean, where the theory needs more paths to come to GD's δ_50
(``docs/findings.md`` §9.2, §10.1).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmftsolve.checks import check_integer
from dmftsolve.finite_d.force import FORCE_WEIGHTS
from dmftsolve.finite_d.stopping import GIVE_UP_FACTOR
from dmftsolve.problem import Problem

__all__ = ["TransitionSettings", "CONSTRUCTIONS", "INITS", "KERNEL_PATHS", "NULL_RTOL",
           "default_kernel_paths", "default_paths_per_sample", "default_null_rtol",
           "recommended_kernel_paths", "resolve_settings", "kernel_paths", "label_moments",
           "label_is_uncentred", "LABEL_MEAN_WARN"]

#: How a draw carries GD's finite-``n`` sources (``TransitionSettings.construction``)
CONSTRUCTIONS = {
    "forced": "finite-n force on reflection-paired kernels (weights of n = δd samples; see force_weights)",
    "finite_n": "finite-n DMFT (N = n unpaired paths)",
    "initial": "initial overlap only (reflection-paired paths)",
}

#: GD's starts (``TransitionSettings.init``)
INITS = ("random", "spectral")

#: The kernel-path policy of a draw when neither ``TransitionSettings.n_paths`` nor
#: ``paths_per_sample`` is given: for each width, the paths on a centred label and on one with a
#: non-zero mean (:func:`label_is_uncentred`); ``None`` is every width not listed. Where
#: ``centred_per_sample`` is listed, a draw on a centred label uses that many paths per GD sample
#: (``N = 2n``, the fewest with which the paired force weights give GD's curvature along θ*), and
#: at least ``centred``. The entries hold with the width's cut-off of :data:`NULL_RTOL`
#: (``docs/findings.md`` §10.6, §10.7). ``recommended_uncentred`` is what
#: :func:`~dmftsolve.finite_d.diagnostics.label_mean_warning` asks for on an uncentred label.
KERNEL_PATHS: dict[int | None, dict[str, float]] = {
    1: {"centred": 5_000, "centred_per_sample": 2.0, "uncentred": 80_000, "recommended_uncentred": 80_000},
    2: {"centred": 5_000, "centred_per_sample": 2.0, "uncentred": 80_000, "recommended_uncentred": 80_000},
    None: {"centred": 5_000, "centred_per_sample": 2.0, "uncentred": 20_000, "recommended_uncentred": 40_000},
}

#: The zero-variance cut-off of a draw's innovations (``DMFTSettings.null_rtol``) when
#: ``TransitionSettings.null_rtol`` is None, by width (``None``: every width not listed) and then
#: label (:func:`label_is_uncentred`). An innovation whose conditional variance is below this
#: fraction of ``Q(t,t)`` is treated as deterministic; Stein's response to one just above it is its
#: moment divided by its standard deviation, so its noise grows as the cut-off falls
#: (``docs/findings.md`` §10.6, §10.7).
NULL_RTOL: dict[int | None, dict[str, float]] = {
    1: {"centred": 3e-3, "uncentred": 1e-4},
    None: {"centred": 3e-3, "uncentred": 3e-3},
}

#: ``|E[y]|`` above this fraction of ``sd(y)`` makes a label "uncentred" (:func:`label_is_uncentred`)
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


def _policy(m: int) -> dict[str, float]:
    return KERNEL_PATHS.get(int(m), KERNEL_PATHS[None])


def default_kernel_paths(m: int, uncentred: bool = False) -> int:
    """Kernel paths of a draw at width ``m`` when neither ``TransitionSettings.n_paths`` nor
    ``paths_per_sample`` is given (:data:`KERNEL_PATHS`); where the width's policy scales the
    paths with the samples (:func:`default_paths_per_sample`), the least number.

    Examples
    --------
    >>> default_kernel_paths(1), default_kernel_paths(1, uncentred=True), default_kernel_paths(3)
    (5000, 80000, 5000)
    """
    return int(_policy(m)["uncentred" if uncentred else "centred"])


def default_paths_per_sample(m: int, uncentred: bool = False) -> float | None:
    """Kernel paths per GD sample of a draw at width ``m`` when neither ``n_paths`` nor
    ``paths_per_sample`` is given (:data:`KERNEL_PATHS`), or None where the policy is a fixed
    number.

    Examples
    --------
    >>> default_paths_per_sample(1), default_paths_per_sample(2), default_paths_per_sample(2, uncentred=True)
    (2.0, 2.0, None)
    """
    return None if uncentred else _policy(m).get("centred_per_sample")


def default_null_rtol(m: int, uncentred: bool = False) -> float:
    """The zero-variance cut-off of a draw's innovations at width ``m`` on a centred label, or
    on one with a non-zero mean if ``uncentred``, when ``TransitionSettings.null_rtol`` is None
    (:data:`NULL_RTOL`).

    Examples
    --------
    >>> default_null_rtol(1), default_null_rtol(1, uncentred=True), default_null_rtol(2)
    (0.003, 0.0001, 0.003)
    """
    return NULL_RTOL.get(int(m), NULL_RTOL[None])["uncentred" if uncentred else "centred"]


def recommended_kernel_paths(m: int, uncentred: bool) -> int:
    """The kernel paths :func:`~dmftsolve.finite_d.diagnostics.label_mean_warning` asks for
    (:data:`KERNEL_PATHS`)."""
    return int(_policy(m)["recommended_uncentred" if uncentred else "centred"])


@dataclass(frozen=True)
class TransitionSettings:
    """Settings of :func:`~dmftsolve.finite_d.success_probability` and
    :func:`~dmftsolve.finite_d.transition`.

    Attributes
    ----------
    steps : int, optional
        GD steps ``T`` (default: the problem's).
    draws : int
        DMFT draws per δ on a grid, or per batch of the adaptive search (stratified starts,
        independent path seeds). The same default as ``dmftsolve transition --draws``.
    seed : int
        Root seed; draw ``k`` at ``(δ, d)`` uses ``[seed, round(1000 δ), d, k]``.
    success_cosine : float
        Success: every hard direction's projection onto ``span(W)`` above this by step ``T``.
    construction : {"forced", "finite_n", "initial"}
        How a draw carries GD's finite-``n`` sources (:data:`CONSTRUCTIONS`; ``docs/theory.md``
        §7.2): ``"forced"`` (reflection-paired kernels and GD's finite-``n`` gradient on the
        overlaps), ``"finite_n"`` (``N = n`` unpaired paths, everything at GD's sample size),
        ``"initial"`` (no finite-``n`` source: only the random start).
    n_paths : int, optional
        Kernel paths of the ``"forced"`` and ``"initial"`` constructions; with
        ``paths_per_sample`` also given, the least number. None with ``paths_per_sample`` None
        (default): the policy of the problem's width and label (:data:`KERNEL_PATHS`,
        :func:`resolve_settings`).
    null_rtol : float, optional
        Zero-variance cut-off of each draw's innovations (``DMFTSettings.null_rtol``), in
        ``[0, 1)``. None (default): :func:`default_null_rtol` of the problem's width and label.
    workers : int
        Processes for the draws in :func:`~dmftsolve.finite_d.transition` (1: in this
        process). Each draw keeps one BLAS thread; the result does not depend on ``workers``.
    paths_per_sample : float, optional
        If given, the kernels use ``round(paths_per_sample · n)`` paths (``n = δd``), and at
        least ``n_paths`` when that is given too.
    force_weights : {"paired", "poisson"}
        The weights of the ``"forced"`` construction's force
        (:class:`~dmftsolve.finite_d.force.BootstrapForce`).
    tol : float
        Adaptive search: stop once the standard error of δ_50 is at most this.
    max_draws : int
        Adaptive search: the largest number of draws in all; the result says so if ``tol``
        was not reached.
    start : float, optional
        Adaptive search: the first δ tried (default 6).
    stop_at_passage : bool
        End each draw's solve at its first passage; the counts do not depend on it, only the cost.
    path_dtype : {"float32", "float64"}
        Storage of each draw's path history (``DMFTSettings.path_dtype``).
    stein_regression : bool
        Estimate each draw's responses by regression on the innovations
        (:class:`~dmftsolve.dynamics.stein.Stein`); the plain Stein mean's own noise raises the
        late kernels like ``1/N`` (``docs/findings.md`` §9.5).
    history : {"compact", "full"}
        What each draw's paths keep of their past (``DMFTSettings.history``).
    give_up_factor : float, optional
        With ``stop_at_passage``: the factor ``F`` of the give-up rule
        (:mod:`dmftsolve.finite_d.stopping`); None: every draw that does not pass runs to ``T``.
    init : {"random", "spectral"}
        GD's start. ``"random"``: ``W⁰`` with ``N(0, q0/d)`` entries, success at the first passage
        by step ``T``. ``"spectral"``: the top eigenvector of the optimally preprocessed spectral
        matrix (:mod:`dmftsolve.finite_d.spectral`, one neuron and one direction), each draw from its
        own sample of the start's finite-d overlap; a spectral start may begin above the success
        cosine and lose it, so success is the success statistic at step ``T`` and every draw runs
        to ``T`` (``stop_at_passage`` and ``give_up_factor`` do not apply).
    """

    steps: int | None = None
    draws: int = 8
    seed: int = 0
    success_cosine: float = 0.5
    construction: str = "forced"
    n_paths: int | None = None
    null_rtol: float | None = None
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
    init: str = "random"

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_integer("steps", self.steps, 1)
        check_integer("draws", self.draws, 2)
        check_integer("seed", self.seed, 0)
        if self.n_paths is not None:
            check_integer("n_paths", self.n_paths, 40)
        check_integer("workers", self.workers, 1)
        from dmftsolve.dynamics.dmft import check_null_rtol

        check_null_rtol(self.null_rtol)
        pps = self.paths_per_sample
        if pps is not None and (isinstance(pps, bool) or not isinstance(pps, (int, float))
                                or not 0 < pps <= 1000):
            raise ValueError(f"paths_per_sample must be a number in (0, 1000] or None, "
                             f"got {self.paths_per_sample!r}")
        if self.force_weights not in FORCE_WEIGHTS:
            raise ValueError(f"force_weights must be 'poisson' or 'paired', got {self.force_weights!r}")
        if self.construction not in CONSTRUCTIONS:
            raise ValueError(f"construction must be one of {sorted(CONSTRUCTIONS)}, "
                             f"got {self.construction!r}")
        for name in ("tol", "start"):
            v = getattr(self, name)
            if v is None and name == "start":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        check_integer("max_draws", self.max_draws, 2)
        for name in ("stop_at_passage", "stein_regression"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.path_dtype not in ("float64", "float32"):
            raise ValueError(f"path_dtype must be 'float32' or 'float64', got {self.path_dtype!r}")
        if self.history not in ("full", "compact"):
            raise ValueError(f"history must be 'compact' or 'full', got {self.history!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be 'random' or 'spectral', got {self.init!r}")
        if not 0.0 < float(self.success_cosine) < 1.0:
            raise ValueError(f"success_cosine must lie in (0, 1), got {self.success_cosine!r}")
        g = self.give_up_factor
        if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float))
                              or not 1 <= g < math.inf):
            raise ValueError(f"give_up_factor must be a finite number >= 1 or None, got {g!r}")


def resolve_settings(s: TransitionSettings, problem: Problem) -> TransitionSettings:
    """``s`` with the kernel-path policy and ``null_rtol`` filled in for ``problem`` where they
    are None: with neither ``n_paths`` nor ``paths_per_sample`` given, both from the policy of
    the problem's width and label (:func:`default_kernel_paths`, :func:`default_paths_per_sample`);
    ``null_rtol`` from :func:`default_null_rtol` of its width and label.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> s = resolve_settings(TransitionSettings(), Problem.build(target="z**2 - 1", m=2))
    >>> s.n_paths, s.paths_per_sample, s.null_rtol
    (5000, 2.0, 0.003)
    """
    fill_paths = s.n_paths is None and s.paths_per_sample is None
    if not fill_paths and s.null_rtol is not None:
        return s
    uncentred = label_is_uncentred(problem)
    fill: dict[str, Any] = {}
    if fill_paths:
        fill["n_paths"] = default_kernel_paths(problem.m, uncentred)
        fill["paths_per_sample"] = default_paths_per_sample(problem.m, uncentred)
    if s.null_rtol is None:
        fill["null_rtol"] = default_null_rtol(problem.m, uncentred)
    return dataclasses.replace(s, **fill)


def kernel_paths(s: TransitionSettings, n: int) -> int:
    """Kernel paths ``N`` of a ``"forced"`` / ``"initial"`` draw at sample size ``n``:
    ``n_paths``, or ``round(paths_per_sample · n)`` and at least ``n_paths``.

    Raises ``ValueError`` when that is below 40 paths.

    Examples
    --------
    >>> kernel_paths(TransitionSettings(n_paths=5000, paths_per_sample=2.0), 1000)
    5000
    >>> kernel_paths(TransitionSettings(n_paths=5000, paths_per_sample=2.0), 7000)
    14000
    """
    if s.paths_per_sample is None:
        if s.n_paths is None:
            raise ValueError("n_paths is None: resolve it for the problem's width first "
                             "(resolve_settings)")
        return s.n_paths
    N = max(int(round(s.paths_per_sample * n)), s.n_paths or 0)
    if N < 40:
        raise ValueError(f"paths_per_sample={s.paths_per_sample:g} gives {N} kernel paths at n = {n} "
                         "samples; at least 40 are needed (raise it, or give n_paths instead)")
    return N
