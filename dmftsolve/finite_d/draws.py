"""One draw of the finite-d transition: a DMFT solve started at a random start's overlap.

A draw of GD's transition at ``(δ, d)`` is the unrestricted DMFT (:func:`~dmftsolve.dynamics.dmft.
solve_dmft`) started at ``M_0 = X/√d`` with ``X`` a ``k×m`` matrix of ``N(0, q0)`` entries (the
overlaps of a random start; the norm of its hard block stratified over its χ law), ``Q_0 = q0 I_m``,
kernel paths paired by the joint reflection of the hard directions, and, in the ``"forced"``
construction, GD's finite-``n`` gradient on the overlaps
(:class:`~dmftsolve.finite_d.force.BootstrapForce`). It ends at its first passage, or gives up
(:class:`~dmftsolve.finite_d.stopping.FirstPassage`). ``docs/theory.md`` §7.2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import ndtri

from dmftsolve.dynamics.stein import Stein
from dmftsolve.finite_d.directions import transition_directions
from dmftsolve.finite_d.force import BootstrapForce
from dmftsolve.finite_d.settings import TransitionSettings, kernel_paths, resolve_settings
from dmftsolve.finite_d.spectral import spectral_overlaps, spectral_start
from dmftsolve.finite_d.stopping import FirstPassage
from dmftsolve.problem import Problem

__all__ = ["draw_starts", "stratified_starts", "draw_settings", "solve_draw", "run_draw", "sane_steps",
           "draw_seed", "spectral_seed", "RETRY_PATHS_FACTOR"]

#: A draw of the ``"forced"`` or ``"initial"`` construction whose DMFT fails before it passes
#: (non-finite or non-positive kernels from the paths' own noise, e.g. r² at a few thousand
#: paths) is solved once more from the same start and seed with this many times the kernel paths
#: (:func:`run_draw`); ``diagnostics["retried_draws"]`` counts them.
RETRY_PATHS_FACTOR = 4


def draw_seed(seed: int, delta: float, d: int, k: int) -> int:
    """The path seed of draw ``k`` at ``(δ, d)``: from ``SeedSequence([seed, round(1000 δ), d, k])``."""
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
    :func:`stratified_starts` (signed).

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


def draw_settings(problem: Problem, delta: float, d: int, s: TransitionSettings, T: int,
                  hard: Sequence[int], stop: bool) -> dict[str, Any]:
    """The :class:`~dmftsolve.dynamics.dmft.DMFTSettings` options of a draw at ``(δ, d)`` of
    construction ``s.construction`` (without its seed)."""
    n = int(round(delta * d))
    N = kernel_paths(s, n)
    kw: dict[str, Any] = {
        "finite_n": {"n_paths": n, "antithetic": False},
        "forced": {"n_paths": N, "reflect": tuple(hard),
                   "force": BootstrapForce(samples=n, weights=s.force_weights)},
        "initial": {"n_paths": N, "reflect": tuple(hard)},
    }[s.construction]
    if stop:
        kw["stop"] = FirstPassage(float(s.success_cosine), tuple(hard), s.give_up_factor)
    kw |= {"path_dtype": s.path_dtype, "method": Stein(regression=s.stein_regression),
           "null_rtol": s.null_rtol,
           "history": s.history, "errors": "none", "test_loss": "none", "throw": False, "steps": T}
    return kw


def solve_draw(problem: Problem, delta: float, d: int, k: int, m0: Any,
               s: TransitionSettings, T: int, hard: Sequence[int] | None = None,
               stop: bool = False) -> Any:
    """The DMFT solve of draw ``k`` (start ``m0``, ``s.construction``), as
    :func:`~dmftsolve.finite_d.success_probability` runs it: a
    :class:`~dmftsolve.dynamics.dmft.DMFTResult` (``throw=False``; check ``.ok``).

    With ``s.init="random"`` ``m0`` is ``√d M_0``, a number (``m = k = 1``) or a ``k×m`` array; with
    ``s.init="spectral"`` it is the start's overlap ``ρ`` (:func:`~dmftsolve.finite_d.spectral.
    spectral_start`). ``hard`` are the directions paired by reflection and tested for success
    (default :func:`transition_directions`); ``stop`` ends the solve at the first passage of the
    success criterion (:mod:`dmftsolve.success`).
    """
    from dmftsolve.dynamics.dmft import solve_dmft

    hard = transition_directions(problem) if hard is None else tuple(int(j) for j in hard)
    s = resolve_settings(s, problem)
    q0 = float(problem.training.init.q0)
    if s.init == "spectral":
        M, Q = spectral_start(float(m0), q0)
        M0, Q0 = np.array([[M]]), np.array([[Q]])
    else:
        M0 = np.broadcast_to(np.asarray(m0, dtype=float), (problem.k, problem.m)) / math.sqrt(d)
        Q0 = q0 * np.eye(problem.m)
    p = problem.replace(M0=M0.tolist(), Q0=Q0.tolist(), steps=T, hold_zero=[])
    return solve_dmft(p, delta, seed=draw_seed(s.seed, delta, d, k),
                      **draw_settings(problem, delta, d, s, T, hard, stop))


def _stopped_at(r: Any) -> int | None:
    """The step at which a draw's solve stopped at its first passage or gave up, or None."""
    diag = getattr(r, "diagnostics", {})
    at = diag.get("stopped_at")
    return diag.get("gave_up_at") if at is None else at


def sane_steps(r: Any) -> int:
    """Number of leading steps of a draw's solve ``r`` (from :func:`solve_draw`) before any
    blow-up: finite cosine, every ``|M| < 1e3`` and every ``Q(t,t)_jj < 1e3``. The N-path Stein
    kernels can diverge long after the escape, and a solve that stopped on non-finite kernels is
    NaN from there on. A solve that stopped at its first passage (``diagnostics["stopped_at"]``)
    is sane up to that step."""
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


def spectral_seed(seed: int, delta: float, d: int, k: int) -> list[int]:
    """The seed of draw ``k``'s sample of the spectral start's overlap at ``(δ, d)``."""
    return [seed, int(round(1000 * delta)), int(d), int(k), 1]


def _outcome(r: Any, s: TransitionSettings, T: int, hard: Sequence[int] | None, k: int,
             m0: Any) -> tuple[float, int, bool, str, bool, Any]:
    """:func:`run_draw`'s tuple (without the retry flag) from the draw's solve ``r``."""
    # first passage, before any blow-up (:func:`sane_steps`); a solve that stopped on
    # non-finite kernels counts if it escaped before.
    per = getattr(r, "cosine_per_direction", None)
    if per is None or hard is None:  # a stand-in solve (tests) or m = k = 1: the cosine
        stat = np.asarray(r.cosine, dtype=float)
    else:
        stat = np.asarray(per, dtype=float)[:, list(hard)].min(axis=1)
    upto = sane_steps(r)
    if s.init == "spectral":  # the statistic at T, or the last before a blow-up
        last = float(stat[upto - 1]) if upto > 0 else math.nan
        if not r.ok and upto < T + 1 and not last > s.success_cosine:
            return math.nan, -1, False, f"draw {k}: {r.message}", False, m0
        return last, T if last > s.success_cosine else -1, upto < stat.size, "", False, m0
    above = np.nonzero(stat[:upto] > s.success_cosine)[0]
    if not r.ok and not above.size:
        return math.nan, -1, False, f"draw {k}: {r.message}", False, m0
    last = float(stat[upto - 1]) if upto > 0 else math.nan
    stopped = _stopped_at(r)
    diverged = upto < stat.size and stopped is None
    gave_up = getattr(r, "diagnostics", {}).get("gave_up_at") is not None
    return last, int(above[0]) if above.size else -1, diverged, "", gave_up and not above.size, m0


def run_draw(problem: Problem, delta: float, d: int, k: int, m0: Any,
             s: TransitionSettings, T: int, hard: Sequence[int] | None = None,
             stop: bool = False) -> tuple[float, int, bool, str, bool, Any, bool]:
    """One DMFT draw: ``(last sane success statistic, step of success or −1, diverged, failure
    message, gave up, start, retried)``; the statistic is the smallest hard-direction projection
    (:mod:`dmftsolve.success`). Success is the first passage by step ``T``, or with
    ``s.init="spectral"`` the statistic at ``T`` (then the step of success is ``T``); a spectral
    draw given ``m0=None`` samples its start's overlap (:func:`~dmftsolve.finite_d.spectral.
    spectral_overlaps`), and ``start`` is the start used.

    A ``"forced"`` or ``"initial"`` draw whose solve fails before it passes is solved once more,
    from the same start and path seed, with :data:`RETRY_PATHS_FACTOR` times the kernel paths
    (``retried`` is then True); the failure message is kept only if that solve fails too."""
    if s.init == "spectral":
        if m0 is None:
            m0 = float(spectral_overlaps(problem, delta, d, 1, spectral_seed(s.seed, delta, d, k))[0])
        stop = False
    out = _outcome(solve_draw(problem, delta, d, k, m0, s, T, hard, stop), s, T, hard, k, m0)
    if not out[3] or s.construction == "finite_n":
        return (*out, False)
    s = resolve_settings(s, problem)
    more = dataclasses.replace(s, n_paths=RETRY_PATHS_FACTOR * kernel_paths(s, int(round(delta * d))),
                               paths_per_sample=None)
    again = _outcome(solve_draw(problem, delta, d, k, m0, more, T, hard, stop), more, T, hard, k, m0)
    if again[3]:
        again = (*again[:3], f"{again[3]} (also with {more.n_paths} kernel paths)", *again[4:])
    return (*again, True)
