"""The 50 % point δ_50 of a success curve: the probit fit and a self-bracketing search.

Used alike by the theory (:func:`dmftsolve.finite_d.curve.transition`) and by
GD experiments (``python -m validation.width_transition``): :func:`search_delta_50` only needs a
function that runs one batch of trials at a given δ and returns its successes.

Examples
--------
A search against a known curve ``P = Φ((δ − 5)/0.5)``, 40 trials a batch:

>>> import numpy as np
>>> from scipy.special import ndtr
>>> rng = np.random.default_rng(0)
>>> def batch(x, b):
...     return int(rng.binomial(40, ndtr((x - 5.0) / 0.5))), 40
>>> out = search_delta_50(batch, start=9.0, tol=0.1, max_trials=4000)
>>> abs(out.delta_50 - 5.0) < 4 * out.delta_50_err, out.reason
(True, '')
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_ndtr, ndtr

__all__ = ["probit_fit", "posterior_sd", "fit_counts", "search_delta_50", "SearchOutcome", "DELTA_RANGE"]

#: The search's range of δ: a transition outside it is reported as not found.
DELTA_RANGE = (0.25, 200.0)


def _probit_mle(x: np.ndarray, k: np.ndarray, n: np.ndarray, bounded: bool = False) -> tuple[float, float]:
    """Maximum-likelihood ``(δ_50, w)``; ``bounded`` keeps δ_50 within one span of the points
    and ``w`` below ten spans (a non-monotone set of counts otherwise runs off to a flat curve
    centred thousands of spans away)."""
    def nll(theta: np.ndarray) -> float:
        mu, logw = theta
        u = (x - mu) / math.exp(logw)
        return float(-(k * log_ndtr(u) + (n - k) * log_ndtr(-u)).sum())

    p = k / n
    i = int(np.argmin(np.abs(p - 0.5)))
    start = np.array([x[i], math.log(max(0.1 * (x.max() - x.min()), 0.05))])
    bounds = None
    if bounded:
        span = max(float(x.max() - x.min()), 0.05)
        bounds = [(float(x.min()) - span, float(x.max()) + span),
                  (math.log(1e-4 * span), math.log(10 * span))]
        start = np.clip(start, [b[0] for b in bounds], [b[1] for b in bounds])
    res = minimize(nll, start, method="Nelder-Mead", bounds=bounds, options={"xatol": 1e-5, "fatol": 1e-8})
    return float(res.x[0]), float(math.exp(res.x[1]))


def _probit_mle_many(x: np.ndarray, k: np.ndarray, n: np.ndarray, start: tuple[float, float],
                     bounded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(δ_50, w)`` of the maximum-likelihood probit for each row of counts ``k`` (shape ``(B, P)``).

    Newton's method on ``P = Φ(a + b (x − c)/s)`` for all rows at once, where the
    log-likelihood is concave in ``(a, b)``, with step halving, from ``start = (δ_50, w)``.
    Rows that do not converge in 60 iterations (counts separated by δ: the MLE lies at
    ``w → 0``), whose fit is not increasing in δ, or that fall outside the bounds of
    :func:`_probit_mle` are refitted by it, so every row gets the same answer
    :func:`_probit_mle` gives, up to its tolerance, or a better one: Nelder–Mead can stop
    on a flat ridge far from the maximum (seen: −log L 38.7 where the maximum is 14.5, three
    points with 0/14, 2/40, 5/9), where Newton on the concave form cannot. (scipy has no probit
    fit and statsmodels' ``Probit`` fits one data set at a time; one Nelder–Mead fit per
    resample cost the bootstrap of :func:`probit_fit` about 0.5 s.)
    """
    c = 0.5 * (x.max() + x.min())
    s = max(0.5 * float(x.max() - x.min()), 1e-9)
    u = (x - c) / s
    mu0, w0 = start
    a = np.full(k.shape[0], (c - mu0) / w0)
    b = np.full(k.shape[0], s / w0)
    nk = n - k

    def loglik(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        eta = a[:, None] + b[:, None] * u
        return (k * log_ndtr(eta) + nk * log_ndtr(-eta)).sum(axis=1)

    ll = loglik(a, b)
    done = np.zeros(a.shape, bool)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(60):
            eta = a[:, None] + b[:, None] * u
            logphi = -0.5 * eta * eta - 0.5 * math.log(2 * math.pi)
            r1 = np.exp(logphi - log_ndtr(eta))   # φ/Φ(η)
            r2 = np.exp(logphi - log_ndtr(-eta))  # φ/Φ(−η)
            g = k * r1 - nk * r2
            h = -k * r1 * (eta + r1) - nk * r2 * (r2 - eta)  # ≤ 0: concave
            g0, g1 = g.sum(1), (g * u).sum(1)
            h00, h01, h11 = h.sum(1), (h * u).sum(1), (h * u * u).sum(1)
            det = h00 * h11 - h01 * h01
            da = -(h11 * g0 - h01 * g1) / det
            db = -(h00 * g1 - h01 * g0) / det
            ok = np.isfinite(da) & np.isfinite(db) & ~done
            step = np.where(ok, 1.0, 0.0)
            for _half in range(30):  # halve until the likelihood does not fall
                trial = loglik(a + step * np.where(ok, da, 0.0), b + step * np.where(ok, db, 0.0))
                worse = ok & ~(trial >= ll - 1e-12)
                if not worse.any():
                    break
                step = np.where(worse, 0.5 * step, step)
            a = a + step * np.where(ok, da, 0.0)
            b = b + step * np.where(ok, db, 0.0)
            ll = loglik(a, b)
            done |= ok & (np.abs(step * da) + np.abs(step * db) < 1e-10 * (1.0 + np.abs(b)))
            if done.all():
                break
        mu = c - a * s / b
        w = s / b
    refit = ~done | ~(b > 0) | ~np.isfinite(mu)
    if bounded:
        span = max(float(x.max() - x.min()), 0.05)
        refit |= (mu < x.min() - span) | (mu > x.max() + span) | (w < 1e-4 * span) | (w > 10 * span)
    for i in np.flatnonzero(refit):
        mu[i], w[i] = _probit_mle(x, k[i], n, bounded)
    return mu, w


#: nodes per axis of the posterior grids (δ_50, log w) of :func:`posterior_sd`
_POSTERIOR_NODES = 121


def _posterior_grid(x: np.ndarray, k: np.ndarray, n: np.ndarray, mu_range: tuple[float, float],
                    logw_range: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes in δ_50 and ``log w`` over the two ranges and the posterior mass of each node
    (flat priors), from the probit likelihood of the counts."""
    mus = np.linspace(*mu_range, _POSTERIOR_NODES)
    logw = np.linspace(*logw_range, _POSTERIOR_NODES)
    u = (x[None, None, :] - mus[:, None, None]) / np.exp(logw)[None, :, None]
    ll = (k * log_ndtr(u) + (n - k) * log_ndtr(-u)).sum(axis=-1)
    trap = np.ones(_POSTERIOR_NODES)
    trap[[0, -1]] = 0.5  # the trapezoidal rule: the density need not vanish at the box's edges
    post = np.exp(ll - ll.max()) * trap[:, None] * trap[None, :]
    return mus, logw, post / post.sum()


def posterior_sd(deltas: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> float:
    """The posterior standard deviation of δ_50 for a probit curve, flat priors on δ_50 within one
    span of the points and on ``log w`` over ``[10⁻³, 10]`` spans (the ranges of the bounded fit
    of :func:`probit_fit`), by the trapezoidal rule on a grid refined twice around the
    posterior's mass: within 10⁻⁵ of scipy's adaptive ``dblquad`` on search-like counts and
    within 1 % on separated ones, whose posterior has a step at the points
    (``tests/test_delta50.py``); about 7 ms.

    Integrating over the width is what makes it honest where the bootstrap is not: with few
    trials the fitted width is often too small, and a bootstrap around that fit (or a search
    stopped when its error happens to be small) reports too little (``docs/findings.md``
    §10.4).

    Parameters
    ----------
    deltas, successes, trials : array_like
        The sample ratios (at least two distinct), and the successes and trials at each.

    Returns
    -------
    float
        The posterior standard deviation of δ_50; NaN when every count is 0 or every count is
        its number of trials (δ_50 outside the points, as in :func:`probit_fit`).

    Raises
    ------
    ValueError
        For arrays of different shapes, fewer than two distinct δ, or impossible counts.

    Examples
    --------
    Four points of a search (a far bracketing one and three near δ_50): the posterior error is
    half again the bootstrap's, which holds the curve's width at its fitted value.

    >>> import numpy as np
    >>> x, k, n = np.array([6.0, 7.0, 7.6, 8.4]), np.array([1, 6, 9, 15]), np.array([8, 16, 16, 16])
    >>> round(posterior_sd(x, k, n), 3), round(probit_fit(x, k, n, shrink="fit")[1], 3)
    (0.274, 0.181)
    """
    x, k, n = (np.asarray(a, float) for a in (deltas, successes, trials))
    if not (x.shape == k.shape == n.shape) or x.ndim != 1 or np.unique(x).size < 2:
        raise ValueError(f"deltas, successes, trials must be equal-length 1-d arrays with at least 2 "
                         f"distinct deltas, got shapes {x.shape}, {k.shape}, {n.shape}")
    if not (np.all(np.isfinite(x)) and np.all(n >= 1) and np.all((0 <= k) & (k <= n))):
        raise ValueError("deltas must be finite, trials >= 1 and 0 <= successes <= trials")
    if np.all(k == 0) or np.all(k == n):
        return math.nan  # δ_50 outside the points, as in probit_fit
    span = max(float(x.max() - x.min()), 0.05)
    ranges = ((float(x.min()) - span, float(x.max()) + span),
              (math.log(1e-3 * span), math.log(10 * span)))
    for _ in range(3):  # the prior's box, then twice the box around the mass (one node beyond it)
        mus, logw, post = _posterior_grid(x, k, n, *ranges)
        box = []
        for axis, nodes, (lo, hi) in ((1, mus, ranges[0]), (0, logw, ranges[1])):
            marg = post.sum(axis=axis)
            mass = np.flatnonzero(marg > 1e-10 * marg.max())
            h = nodes[1] - nodes[0]
            box.append((max(lo, nodes[mass[0]] - h), min(hi, nodes[mass[-1]] + h)))
        ranges = (box[0], box[1])
    pm = post.sum(axis=1)
    mean = float(pm @ mus)
    return float(math.sqrt(max(float(pm @ (mus - mean) ** 2), 0.0)))


def probit_fit(deltas: np.ndarray, successes: np.ndarray, trials: np.ndarray, *,
               bootstrap: int = 200, seed: int = 0, shrink: str = "half",
               error: str = "bootstrap") -> tuple[float, float, float]:
    """Maximum-likelihood ``P = Φ((δ − δ_50)/w)``: returns ``(δ_50, se(δ_50), w)``.

    The standard error is a bootstrap over the counts: ``k*_i ~ Bin(n_i, (k_i + ½)/(n_i + 1))``
    (the observed rates shrunk towards ½, so an observed 0 or 1 still fluctuates), refitted;
    resamples with every count 0 or every count ``n`` are skipped. The observed-information
    error is useless here: with few trials per δ the curve is often nearly a step, the fitted
    width collapses and its curvature says nothing about δ_50. If every point is 0 or every
    point is 1, δ_50 lies outside the grid and ``(nan, nan, nan)`` is returned.

    ``shrink="fit"`` shrinks each rate towards the fitted curve instead of ½:
    ``(k_i + Φ((δ_i − δ_50)/w'))/(n_i + 1)``, with ``w'`` the largest of ``w``, ``0.05 δ_50`` and
    the gap between the points on either side of δ_50 (so an observed 0 or 1 next to the
    transition still fluctuates, as with ``"half"``). Use it when the
    points include far bracketing points with few trials (the adaptive search): shrunk towards
    ½, an observed 4 of 4 far above the transition fails in a resample with probability 0.1,
    and a handful of such points widen the fit of most resamples (an error of 1.8 where the
    points near δ_50 give 0.3, seen in a width-2 search at d = 100). With ``"fit"`` the fit is
    also bounded: δ_50 within one span of the points, ``w`` below ten spans.

    ``error="posterior"`` returns :func:`posterior_sd` as the error instead of the bootstrap's
    (the point estimate is the same maximum-likelihood δ_50). It is the error of
    :func:`search_delta_50`: a search that stops once its error is at most ``tol`` stops on
    fits whose width happens to be small, which makes the bootstrap's error (it holds the width
    at its fitted value) too small; the posterior's integrates over the width. With a fixed
    budget of trials the bootstrap's is honest. Calibration against known curves:
    ``docs/findings.md`` §10.4.
    """
    x = np.asarray(deltas, float)
    k = np.asarray(successes, float)
    n = np.asarray(trials, float)
    if not (x.shape == k.shape == n.shape) or x.size < 2:
        raise ValueError(f"deltas, successes, trials must be equal-length arrays of >= 2, got shapes "
                         f"{x.shape}, {k.shape}, {n.shape}")
    if np.all(k == 0) or np.all(k == n):
        return math.nan, math.nan, math.nan
    if shrink not in ("half", "fit"):
        raise ValueError(f"shrink must be 'half' or 'fit', got {shrink!r}")
    if error not in ("bootstrap", "posterior"):
        raise ValueError(f"error must be 'bootstrap' or 'posterior', got {error!r}")
    bounded = shrink == "fit"  # the search's fits (its points can be non-monotone early on)
    mu, w = _probit_mle(x, k, n, bounded)
    mu_, w_ = _probit_mle_many(x, k[None, :], n, (mu, w), bounded)  # polish: Newton from there
    mu, w = float(mu_[0]), float(w_[0])
    if error == "posterior":
        return mu, posterior_sd(x, k, n), w
    rng = np.random.default_rng(seed)
    if shrink == "half":
        prior: Any = 0.5
    else:  # towards the fit, no steeper than the points around δ_50 resolve
        below, above = x[x <= mu], x[x >= mu]
        gap = (above.min() - below.max()) if below.size and above.size else 0.0
        prior = ndtr((x - mu) / max(w, 0.05 * abs(mu), gap, 1e-9))
    ks = rng.binomial(n.astype(int), (k + prior) / (n + 1), size=(int(bootstrap), x.size)).astype(float)
    keep = ~(np.all(ks == 0, axis=1) | np.all(ks == n, axis=1))
    lo, hi = x.min() - (x.max() - x.min()), x.max() + (x.max() - x.min())
    boot = np.clip(_probit_mle_many(x, ks[keep], n, (mu, w), bounded)[0], lo, hi)
    se = float(boot.std(ddof=1)) if boot.size > 1 else math.nan
    return mu, se, w


def pool_counts(deltas: Any, successes: Any, trials: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts at equal δ added up, sorted by δ: ``(deltas, successes, trials)``.

    Two points at one δ are one binomial sample; fitted apart they look like a step of zero
    width there, and the fit's error collapses to zero.
    """
    x = np.asarray(deltas, float)
    k = np.asarray(successes, float)
    n = np.asarray(trials, float)
    xs, inverse = np.unique(x, return_inverse=True)
    return xs, np.bincount(inverse, k, xs.size), np.bincount(inverse, n, xs.size)


def fit_counts(deltas: Any, successes: Any, trials: Any, *, what: str = "counts",
               seed: int = 0) -> tuple[float, float, float]:
    """δ_50, its error and the width of a probit fit to success counts given by a user,
    refused (``ValueError`` naming ``what``) where they cannot be fitted.

    The counts are pooled at equal δ (:func:`pool_counts`), then refused if they lie at fewer
    than two δ, if every point is 0 or every point is all its trials (δ_50 outside the points),
    or if the success rate does not rise from the smallest δ to the largest. The fit is the
    maximum-likelihood probit with the posterior error (:func:`probit_fit`,
    ``error="posterior"``: honest for separated counts, where a bootstrap gives zero), refused
    if δ_50 lies outside the points (an extrapolation, not a measurement) or the error is not
    finite and positive.

    Parameters
    ----------
    deltas, successes, trials : array_like
        Equal-length 1-d arrays: sample ratios (> 0), successes and trials at each.
    what : str
        How the messages name the counts (e.g. ``"--sim 'gd.json'"``).
    seed : int
        Unused by the posterior error; kept for a bootstrap variant.

    Returns
    -------
    tuple of float
        ``(delta_50, error, width)``.

    Raises
    ------
    ValueError
        For counts that cannot be fitted (see above); the message says why and what to add.

    Examples
    --------
    >>> fit_counts([4, 5, 6, 7], [1, 4, 9, 15], [16, 16, 16, 16])[0] > 4
    True
    >>> fit_counts([5, 5], [0, 10], [10, 10])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: counts: all points are at delta = 5 (after pooling equal deltas); ...
    """
    x, k, n = pool_counts(deltas, successes, trials)
    if x.size < 2:
        raise ValueError(f"{what}: all points are at delta = {x[0]:g} (after pooling equal deltas); a "
                         "probit fit needs counts at 2 or more distinct deltas" if x.size else
                         f"{what}: no points")
    if not (np.all(np.isfinite(x)) and np.all(x > 0) and np.all(n >= 1) and np.all((k >= 0) & (k <= n))):
        raise ValueError(f"{what}: deltas must be finite and > 0, trials >= 1 and 0 <= successes <= trials")
    if np.all(k == 0):
        raise ValueError(f"{what}: no successes at any delta (up to {x.max():g}): delta_50 lies above the "
                         "points; add counts at larger delta")
    if np.all(k == n):
        raise ValueError(f"{what}: every trial succeeded (from delta {x.min():g}): delta_50 lies below the "
                         "points; add counts at smaller delta")
    rate = k / n
    if rate[-1] <= rate[0]:
        raise ValueError(f"{what}: the success rate does not rise with delta ({rate[0]:.3g} at {x[0]:g}, "
                         f"{rate[-1]:.3g} at {x[-1]:g}); a probit curve cannot be fitted")
    with np.errstate(all="ignore"):
        mu, se, w = probit_fit(x, k, n, shrink="fit", error="posterior", seed=seed)
    if not (math.isfinite(mu) and x.min() <= mu <= x.max()):
        raise ValueError(f"{what}: the fitted delta_50 = {mu:.3g} lies outside the points "
                         f"[{x.min():g}, {x.max():g}], an extrapolation; add counts on both sides of it")
    if not (math.isfinite(se) and se > 0):
        raise ValueError(f"{what}: the fit of delta_50 has no finite positive error (got {se!r})")
    return float(mu), float(se), float(w)


def _lattice(x: float) -> float:
    """Round a proposed δ to a lattice (0.05 below 10, 0.1 below 20, 0.25 above), so that
    batches placed near each other pool at one δ and seeds are reproducible."""
    q = 0.05 if x < 10 else 0.1 if x < 20 else 0.25
    return round(round(x / q) * q, 4)




def _next_deltas(counts: dict[float, list[int]], fit: tuple[float, float, float] | None) -> list[float]:
    """Where the next batches go: bracketing steps while the counts do not bracket 1/2 from
    both sides (a rate ≤ 1/4 left of a rate ≥ 3/4; where such rates cross, more trials at the
    two crossed points), then ``δ_50 ± 0.8 w`` (two batches)."""
    xs = sorted(counts)
    rate = {x: counts[x][0] / counts[x][1] for x in xs}
    lo = [x for x in xs if rate[x] <= 0.25]
    hi = [x for x in xs if rate[x] >= 0.75]
    if not lo or not hi or max(lo) >= min(hi):
        if not hi:  # no point mostly escaping: go up from the largest δ
            return [_lattice(min(max(xs) * 1.4, DELTA_RANGE[1]))]
        if not lo:  # go down from the smallest
            return [_lattice(max(min(xs) / 1.4, DELTA_RANGE[0]))]
        # crossed (noise): more trials at the two crossed points, whose rates then move to the
        # curve's. (A point between them could end up at a rate between 1/4 and 3/4 and leave
        # the crossing as it was: the search would then spend every further batch there.)
        return sorted({max(lo), min(hi)})
    assert fit is not None
    mu, _, w = fit
    span = max(hi) - min(lo)
    w = min(max(w, 0.02 * mu, 0.05), span)
    out = []
    for x in (mu - 0.8 * w, mu + 0.8 * w):
        near = [y for y in xs if abs(y - x) <= 0.25 * w]  # reuse a point already there: counts pool
        x = min(near, key=lambda y: abs(y - x)) if near else _lattice(x)
        out.append(min(max(x, DELTA_RANGE[0]), DELTA_RANGE[1]))
    return sorted(set(out))


@dataclass
class SearchOutcome:
    """What :func:`search_delta_50` found: the pooled counts per δ, the last probit fit and
    why it stopped (``reason`` empty when the error reached ``tol``)."""

    deltas: np.ndarray
    successes: np.ndarray
    trials: np.ndarray
    delta_50: float
    delta_50_err: float
    width: float
    reason: str
    batches: list[tuple[float, int, int, int]] = field(default_factory=list)  # (δ, batch, k, n)


def search_delta_50(run_batch: Callable[[float, int], tuple[int, int]], *, start: float, tol: float,
                    max_trials: int, label: str = "", progress: bool = False,
                    run_batches: Callable[[list[tuple[float, int]]], list[tuple[int, int]]] | None = None,
                    error: str = "posterior") -> SearchOutcome:
    """Find δ_50 by batches: bracket it from ``start``, then sharpen it to ``tol``.

    Parameters
    ----------
    run_batch : callable
        ``run_batch(delta, b) -> (successes, trials)`` runs batch ``b`` (0, 1, … at that δ)
        and returns its counts. Batches at one δ are pooled.
    start : float
        First δ tried.
    tol : float
        Stop once the standard error of δ_50 (:func:`probit_fit` with ``error``) is at most
        this, with a rate ≤ 1/4 and a rate ≥ 3/4 among the points.
    max_trials : int
        Stop (with a ``reason``) before spending more trials than this.
    label : str
        Prefix of the progress lines.
    progress : bool
        A line on stderr per batch, and the current δ_50 with an estimate of the time left.
    run_batches : callable, optional
        ``run_batches([(delta, b), ...]) -> [(successes, trials), ...]``: runs the batches the
        search places together (the two at ``δ_50 ± 0.8 w``) at once, e.g. on a process pool,
        so that one batch's slow trials do not leave workers idle. The counts must be those
        ``run_batch`` would give; the search is the same either way.
    error : {"posterior", "bootstrap"}
        The error that stops the search and is reported (:func:`probit_fit`): the posterior
        standard deviation (default) or the bootstrap's (see Notes).

        .. versionchanged:: 0.6
            The default is ``"posterior"``; it was ``"bootstrap"``.

    Returns
    -------
    SearchOutcome

    Notes
    -----
    Bracketing steps δ up or down by a factor 1.4 (on the lattice of :func:`_lattice`) until a
    point with rate ≤ 1/4 lies left of one with rate ≥ 3/4; then two batches go to
    ``δ_50 ± 0.8 w`` of the current fit (``w`` the probit width), where a trial informs both
    the location and the width. It stops with a reason when a point at an end of
    :data:`DELTA_RANGE` is still all failures (or all successes).

    The error: stopping once the bootstrap's error happens to be small biases it low, since the
    bootstrap holds the probit width at its fitted value; the posterior standard deviation (the
    default) integrates over the width and costs the search more trials. Calibration against
    known probit curves (``investigations-archive``: ``search_calibration``):
    ``docs/findings.md`` §10.4.
    """
    if not (math.isfinite(start) and DELTA_RANGE[0] <= start <= DELTA_RANGE[1]):
        raise ValueError(f"start must lie in {list(DELTA_RANGE)}, got {start!r}")
    if error not in ("bootstrap", "posterior"):  # before any batch runs
        raise ValueError(f"error must be 'bootstrap' or 'posterior', got {error!r}")
    counts: dict[float, list[int]] = {}
    nbatch: dict[float, int] = {}
    log: list[tuple[float, int, int, int]] = []
    fit: tuple[float, float, float] | None = None
    used, t0, reason = 0, time.perf_counter(), ""
    todo = [_lattice(start)]
    last_n = 0
    while True:
        plan: list[tuple[float, int]] = []
        for x in todo:
            if used + (len(plan) + 1) * max(last_n, 1) > max_trials:
                reason = f"max trials ({max_trials}) spent before the error reached tol"
                break
            plan.append((x, nbatch.get(x, 0)))
        if run_batches is not None and len(plan) > 1:
            results = list(run_batches(plan))
        else:
            results = [run_batch(x, b) for x, b in plan]
        for (x, b), (k, n) in zip(plan, results, strict=True):
            nbatch[x] = b + 1
            c = counts.setdefault(x, [0, 0])
            c[0] += int(k)
            c[1] += int(n)
            used += int(n)
            last_n = int(n)
            log.append((x, b, int(k), int(n)))
            if progress:
                print(f"{label}δ={x:g}: {k}/{n}; {used} in all, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
        if reason:
            break
        xs = np.array(sorted(counts))
        k = np.array([counts[x][0] for x in xs], float)
        n = np.array([counts[x][1] for x in xs], float)
        fit = (probit_fit(xs, k, n, shrink="fit", error=error) if xs.size >= 2 and 0 < k.sum() < n.sum()
               else None)
        bracketed = fit is not None and bool(np.any(k / n <= 0.25)) and bool(np.any(k / n >= 0.75))
        if bracketed and math.isfinite(fit[1]) and fit[1] <= tol:
            break
        todo = _next_deltas(counts, fit)
        edge = [x for x in todo if x in counts and x in DELTA_RANGE and counts[x][0] in (0, counts[x][1])]
        if edge:
            reason = (f"no success by step T up to delta = {edge[0]:g}" if edge[0] == DELTA_RANGE[1] else
                      f"every trial succeeds down to delta = {edge[0]:g}")
            break
        if progress and fit is not None and math.isfinite(fit[1]):
            per = (time.perf_counter() - t0) / max(used, 1)
            more = min(max(used * ((fit[1] / tol) ** 2 - 1.0), 2 * last_n), max_trials - used)
            print(f"{label}delta_50 = {fit[0]:.2f} ± {fit[1]:.2f} (target ± {tol:g}); about "
                  f"{more * per:.0f} s left", file=sys.stderr, flush=True)
    xs = np.array(sorted(counts))
    k = np.array([counts[x][0] for x in xs], int)
    n = np.array([counts[x][1] for x in xs], int)
    mu, se, w = (probit_fit(xs, k, n, shrink="fit", error=error) if xs.size >= 2
                 else (math.nan, math.nan, math.nan))
    return SearchOutcome(deltas=xs, successes=k, trials=n, delta_50=mu, delta_50_err=se, width=w,
                         reason=reason, batches=log)
