"""The probit fit behind every δ_50 (the batched Newton fit of the bootstrap against
Nelder–Mead one resample at a time, the score equations at its answer, the posterior error)
and the self-bracketing search that uses it (``dmftsolve.thresholds.delta50``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr

from dmftsolve.thresholds.delta50 import _probit_mle, _probit_mle_many, posterior_sd, probit_fit


def _nll(x: np.ndarray, k: np.ndarray, n: np.ndarray, mu: float, w: float) -> float:
    u = (x - mu) / w
    return float(-(k * log_ndtr(u) + (n - k) * log_ndtr(-u)).sum())


counts = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40)), min_size=2, max_size=7)


@settings(max_examples=60, deadline=None)
@given(counts=counts, bounded=st.booleans())
@example(counts=[(0, 14), (2, 40), (5, 9)], bounded=False)  # the counts of the stalled fit below
@example(counts=[(15, 40), (24, 40), (20, 40)], bounded=False)  # non-monotone counts
def test_batched_fit_is_at_least_as_likely_as_nelder_mead(counts: list[tuple[int, int]],
                                                          bounded: bool) -> None:
    n = np.array([max(a, b) for a, b in counts], float)
    k = np.array([min(a, b) for a, b in counts], float)
    x = 5.0 + np.arange(k.size, dtype=float) * 0.7 + 0.1 * np.arange(k.size) ** 2
    if np.all(k == 0) or np.all(k == n):
        return
    mu_nm, w_nm = _probit_mle(x, k, n, bounded)
    mu, w = _probit_mle_many(x, k[None, :], n, (mu_nm, w_nm), bounded)
    assert _nll(x, k, n, float(mu[0]), float(w[0])) <= _nll(x, k, n, mu_nm, w_nm) + 1e-7
    if bounded:
        span = x.max() - x.min()
        assert x.min() - span - 1e-9 <= mu[0] <= x.max() + span + 1e-9
        assert 1e-4 * span * (1 - 1e-9) <= w[0] <= 10 * span * (1 + 1e-9)


def test_batched_fit_finds_the_maximum_where_nelder_mead_stalls() -> None:
    """Three points (0/14 at 5.35, 2/40 at 6.39, 5/9 at 14.66): Nelder–Mead from its start stops
    at −log L = 38.7; the maximum, found by brute force on a 2001 × 1001 grid of (δ_50, log w),
    is 14.502 near δ_50 = 13.99, w = 4.35. The batched fit must reach it."""
    x = np.array([5.35, 6.39, 14.66])
    k = np.array([0.0, 2.0, 5.0])
    n = np.array([14.0, 40.0, 9.0])
    M, W = np.meshgrid(np.linspace(x.min() - 10, x.max() + 10, 2001), np.exp(np.linspace(-6, 4, 1001)))
    U = (x[:, None, None] - M) / W
    grid = -(k[:, None, None] * log_ndtr(U) + (n - k)[:, None, None] * log_ndtr(-U)).sum(axis=0)
    best = float(grid.min())
    mu_nm, w_nm = _probit_mle(x, k, n)
    assert _nll(x, k, n, mu_nm, w_nm) > best + 20  # the stall this fit exists to avoid
    mu, w = _probit_mle_many(x, k[None, :], n, (mu_nm, w_nm))
    assert best - 1e-3 <= _nll(x, k, n, float(mu[0]), float(w[0])) <= best + 1e-3
    assert abs(mu[0] - M.flat[grid.argmin()]) < 0.1  # grid spacing 0.02 in δ_50, flat likelihood


def test_batched_fit_solves_the_score_equations() -> None:
    """At an interior maximum the gradient of log L in (δ_50, log w) vanishes (central
    differences), for every row of a batch of resamples of a known curve."""
    rng = np.random.default_rng(3)
    x = np.array([5.0, 6.0, 7.0, 8.0, 9.0])
    n = np.full(5, 24.0)
    k = rng.binomial(24, [0.1, 0.3, 0.5, 0.7, 0.9], size=(40, 5)).astype(float)
    mu, w = _probit_mle_many(x, k, n, (7.0, 1.0))
    h = 1e-5
    for i in range(k.shape[0]):
        g_mu = (_nll(x, k[i], n, mu[i] + h, w[i]) - _nll(x, k[i], n, mu[i] - h, w[i])) / (2 * h)
        up, down = w[i] * math.exp(h), w[i] * math.exp(-h)
        g_w = (_nll(x, k[i], n, mu[i], up) - _nll(x, k[i], n, mu[i], down)) / (2 * h)
        assert abs(g_mu) < 1e-4 and abs(g_w) < 1e-4, (i, g_mu, g_w)


def test_bootstrap_error_matches_the_binomial_closed_form() -> None:
    """Many trials at two points: the bootstrap error of δ_50 is the delta-method error
    (independent binomials, a two-point probit is solved exactly: Φ⁻¹(p_i) = (x_i − μ)/w)."""
    from scipy.stats import norm
    x = np.array([6.0, 8.0])
    n = np.array([4000.0, 4000.0])
    p = np.array([0.3, 0.7])
    k = n * p
    mu, se, _ = probit_fit(x, k, n, bootstrap=400, seed=1)
    z = norm.ppf(p)
    # μ = (z2 x1 − z1 x2)/(z2 − z1); dμ/dz1 = (x1 − x2) z2/(z2 − z1)², dμ/dz2 = −(x1 − x2) z1/(z2 − z1)²
    dz = np.sqrt(p * (1 - p) / n) / norm.pdf(z)
    grad = np.array([(x[0] - x[1]) * z[1], -(x[0] - x[1]) * z[0]]) / (z[1] - z[0]) ** 2
    se_ref = float(np.sqrt(np.sum((grad * dz) ** 2)))
    assert abs(mu - 7.0) < 1e-6
    assert abs(se - se_ref) < 0.15 * se_ref  # 400 resamples: the bootstrap's own error ~ 1/√800


# ----------------------------------------------------------------------------- posterior error
def _posterior_moments_by_dblquad(x: np.ndarray, k: np.ndarray, n: np.ndarray) -> float:
    """The posterior sd of δ_50 (flat in δ_50 on one span beyond the points, flat in log w on
    [10⁻³, 10] spans) by scipy's adaptive quadrature: an independent reference for the grid."""
    from scipy.integrate import dblquad

    span = float(x.max() - x.min())
    lo, hi = float(x.min()) - span, float(x.max()) + span
    a, b = math.log(1e-3 * span), math.log(10 * span)
    top = -min(_nll(x, k, n, mu, math.exp(lw)) for mu in np.linspace(lo, hi, 201)
               for lw in np.linspace(a, b, 61))

    def dens(lw: float, mu: float, p: int) -> float:
        return mu**p * math.exp(-_nll(x, k, n, mu, math.exp(lw)) - top)

    z, m1, m2 = (dblquad(dens, lo, hi, a, b, args=(p,), epsabs=1e-11, epsrel=1e-9)[0] for p in (0, 1, 2))
    return math.sqrt(m2 / z - (m1 / z) ** 2)


def test_posterior_error_matches_adaptive_quadrature() -> None:
    # a search-like set of counts: a far bracketing point and three near δ_50
    x = np.array([6.0, 7.0, 7.6, 8.4])
    k = np.array([1.0, 6.0, 9.0, 15.0])
    n = np.array([8.0, 16.0, 16.0, 16.0])
    ref = _posterior_moments_by_dblquad(x, k, n)
    assert math.isclose(posterior_sd(x, k, n), ref, rel_tol=1e-4), (posterior_sd(x, k, n), ref)
    # separated counts (a bracketing search's start): the posterior has a step at the points
    xs, ks, ns = np.array([6.0, 8.4, 11.8]), np.array([0.0, 3.0, 8.0]), np.array([8.0, 8.0, 8.0])
    ref = _posterior_moments_by_dblquad(xs, ks, ns)
    assert math.isclose(posterior_sd(xs, ks, ns), ref, rel_tol=0.015), (posterior_sd(xs, ks, ns), ref)
    mu, se, _ = probit_fit(x, k, n, shrink="fit", error="posterior")
    assert se == posterior_sd(x, k, n)
    assert mu == probit_fit(x, k, n, shrink="fit")[0]  # the same maximum-likelihood δ_50


def test_posterior_error_tends_to_the_fisher_error() -> None:
    """With many trials the posterior is Gaussian with the inverse Fisher information as its
    covariance (closed form of the probit's information), so its sd is the asymptotic error."""
    from scipy.special import ndtr

    mu, w = 7.3, 0.8
    x = np.array([6.5, 7.0, 7.5, 8.0, 8.5])
    n = np.full(x.size, 4.0e4)
    p = ndtr((x - mu) / w)
    k = n * p  # the expected counts: the maximum-likelihood fit is (mu, w) itself
    u = (x - mu) / w
    phi = np.exp(-u * u / 2) / math.sqrt(2 * math.pi)
    c = n * phi**2 / (p * (1 - p))  # information of the linear predictor at each point
    # predictor (x − mu)/w: derivatives −1/w (mu) and −u (log w)
    J = np.stack([np.full(x.size, -1 / w), -u], axis=1)
    info = J.T @ (c[:, None] * J)
    fisher_sd = math.sqrt(np.linalg.inv(info)[0, 0])
    assert math.isclose(posterior_sd(x, k, n), fisher_sd, rel_tol=1e-3), (posterior_sd(x, k, n), fisher_sd)


@settings(max_examples=40, deadline=None)
@given(counts=counts, scale=st.floats(0.1, 10.0), shift=st.floats(-5.0, 50.0))
@example(counts=[(0, 8), (4, 8), (8, 8)], scale=2.0, shift=1.0)  # separated: a step between points
def test_posterior_error_scales_with_delta(counts: list[tuple[int, int]], scale: float, shift: float) -> None:
    """Flat priors on δ_50 and log w over ranges in units of the span: the posterior sd moves
    with an affine change of δ (sd(a x + b) = a sd(x)), and is positive and below the prior's."""
    n = np.array([max(a, b) for a, b in counts], float)
    k = np.array([min(a, b) for a, b in counts], float)
    x = 5.0 + np.arange(k.size, dtype=float) * 0.7 + 0.1 * np.arange(k.size) ** 2
    s0 = posterior_sd(x, k, n)
    s1 = posterior_sd(scale * x + shift, k, n)
    if np.all(k == 0) or np.all(k == n):  # δ_50 outside the points: no error, as in probit_fit
        assert math.isnan(s0) and math.isnan(s1)
        return
    assert math.isclose(s1, scale * s0, rel_tol=1e-6, abs_tol=1e-12)
    span = x.max() - x.min()
    assert 0 < s0 <= 3 * span / math.sqrt(12) + 1e-9  # the flat prior's sd on 3 spans bounds it


# ----------------------------------------------------------------------------- the search
def test_crossed_rates_get_more_trials_at_the_crossed_points() -> None:
    """A rate ≥ 3/4 left of a rate ≤ 1/4 (noise) is resolved where it happened: the next batches
    go to those two points. Before 0.6.0 they went between them, and once that point's rate
    sat between 1/4 and 3/4 the crossing never resolved (the counts below, seen in a search)."""
    from dmftsolve.thresholds.delta50 import _next_deltas

    counts = {6.0: [0, 8], 7.0: [6, 8], 7.1: [13, 32], 7.2: [2, 8], 8.4: [8, 8]}
    assert _next_deltas(counts, None) == [7.0, 7.2]


@pytest.mark.parametrize("error", ["posterior", "bootstrap"])
@pytest.mark.parametrize(("mu", "w", "budget"), [(7.0, 0.6, 64), (7.3, 0.8, 96), (11.0, 2.4, 512)])
def test_search_stops_at_tol_or_spends_its_budget(mu: float, w: float, budget: int, error: str) -> None:
    """The search's contract against known probit curves ``Φ((δ − δ_50)/w)`` in batches of 8
    (the curves of the calibration in docs/investigations.md): stopped by ``tol`` its reported
    error is at most ``tol`` and its δ_50 within four errors of the curve's; with ``tol`` out of
    reach it spends the trial budget, to within one batch, and says so."""
    from scipy.special import ndtr

    from dmftsolve.thresholds.delta50 import search_delta_50

    for stop in ("tol", "budget"):
        rng = np.random.default_rng(1000)

        def batch(x: float, b: int, rng: np.random.Generator = rng) -> tuple[int, int]:
            return int(rng.binomial(8, ndtr((x - mu) / w))), 8

        if stop == "tol":
            o = search_delta_50(batch, start=6.0, tol=0.15, max_trials=4000, error=error)
            assert o.reason == "" and o.delta_50_err <= 0.15, o.reason
            assert abs(o.delta_50 - mu) <= 4 * o.delta_50_err, o.delta_50
        else:
            o = search_delta_50(batch, start=6.0, tol=1e-9, max_trials=budget, error=error)
            assert budget - 8 < o.trials.sum() <= budget
            assert o.reason.startswith(f"max trials ({budget})"), o.reason


def test_search_that_used_to_stall_stops_near_the_curve() -> None:
    """The search seeded as run 21 of ``search_calibration`` (docs/investigations.md; curve
    δ_50 = 7.3, w = 0.8, batches of 8) crosses early, where a search that placed its next
    batches between the crossed points would spend its 4000-trial cap at δ = 7.1. Reference:
    the known curve; it must stop within a few hundred trials and within four of its errors of
    7.3."""
    from scipy.special import ndtr

    from dmftsolve.thresholds.delta50 import search_delta_50

    rng = np.random.default_rng(1021)

    def batch(x: float, b: int) -> tuple[int, int]:
        return int(rng.binomial(8, ndtr((x - 7.3) / 0.8))), 8

    out = search_delta_50(batch, start=6.0, tol=0.15, max_trials=4000)
    assert out.reason == "" and out.trials.sum() <= 400, (out.trials.sum(), out.reason)
    assert abs(out.delta_50 - 7.3) < 4 * out.delta_50_err


def test_posterior_error_and_search_reject_bad_input() -> None:
    from dmftsolve.thresholds.delta50 import search_delta_50

    x, n = np.array([6.0, 7.0]), np.array([8.0, 8.0])
    assert math.isnan(posterior_sd(x, np.array([0.0, 0.0]), n))  # outside the points
    for args, needle in [((x, np.array([1.0]), n), "equal-length"),
                         ((np.array([6.0, 6.0]), np.array([1.0, 2.0]), n), "2 distinct"),
                         ((x, np.array([1.0, 9.0]), n), "successes <= trials")]:
        with pytest.raises(ValueError, match=needle):
            posterior_sd(*args)
    ran = []
    with pytest.raises(ValueError, match="error must be 'bootstrap' or 'posterior', got 'boot'"):
        search_delta_50(lambda x, b: ran.append(x) or (0, 8), start=6.0, tol=0.1, max_trials=80,
                        error="boot")
    assert ran == []  # refused before running a batch
