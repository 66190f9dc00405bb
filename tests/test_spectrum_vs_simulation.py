"""Small, fast versions of ``validation/spectrum_vs_simulation.py``.

Hessian bulk and hard-direction outliers predicted from the DMFT law of ``(D, z_hard)`` at step
``t`` against the dense Hessian of the finite-d GD run on the same problem (docs/theory.md §3-§4),
and the O(1)-step learning of a direction with ``E[zy] = 0`` but ``E[z | y] ≠ 0``.
Tolerances are ``C/√d`` plus a multiple of the DMFT Monte Carlo error (estimated from the
two halves of the paths), fixed seeds throughout.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.hessian.outlier_equation import outliers
from dmftsolve.simulation.simulator import simulate
from dmftsolve.thresholds.directions import split_directions
from validation import spectrum_vs_simulation as svs


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _sim_at(problem, d, delta, seed, t, hard, trial=0):
    """(eigen info, plug-in D, plug-in z) of the trial's Hessian at step t."""
    for _, X, y, W in svs.gd_states(problem, d, delta, seed, trial, (t,)):
        e = svs.hessian_eigen(problem, X, y, W, hard)
        return e, problem.hess(y, X @ W), X[:, list(hard)]
    raise AssertionError("unreachable")


def _halves(fn, D, z):
    """fn on all samples and half the gap between the two halves (the MC error)."""
    h = D.shape[0] // 2
    return fn(D, z), fn(D[:h], z[:h]), fn(D[h:], z[h:])


# --------------------------------------------------------------------------- replay
def test_replay_matches_simulate():
    # gd_states must replay simulate()'s random streams exactly: the validation script relies
    # on it to get X, y, W_t for the full eigendecomposition and the plug-in law.
    p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.1, steps=3, hold_zero=(0,))
    s = simulate(p, d=60, delta=3.0, seed=7, trials=2, hessian_at=(0, 3), n_eigs=3,
                 dense_hessian=True)
    for j in range(2):
        for i, (_t, X, y, W) in enumerate(svs.gd_states(p, 60, 3.0, 7, j, (0, 3))):
            e = svs.hessian_eigen(p, X, y, W, (0,), n_ext=3)
            np.testing.assert_allclose(e["low"], s.hessian["low"][j, i], rtol=0, atol=1e-9)
            np.testing.assert_allclose(e["low_hard"], s.hessian["low_overlap_hard"][j, i],
                                       rtol=0, atol=1e-7)
            np.testing.assert_allclose(e["high"], s.hessian["high"][j, i], rtol=1e-10)


# --------------------------------------------------------------------------- bulk
def test_bulk_density_matches_simulated_spectrum():
    # GeLU neuron, bounded target (docs/theory.md §4.5's h = min(z², 3)), δ = 4, η = 0.2, hard direction
    # held at zero, t = 5. Reference: the DMFT law of D at t = 5 in the Stieltjes equation of
    # docs/theory.md §3. The validation run (d = 2000) has KS ≈ 0.01; the plug-in law (the simulator's
    # own D_i) gives the pure random-matrix error, ≈ 0.005 at d = 600.
    d, delta, t = 400, 4.0, 5
    p = Problem.build(target="Min(z**2, 3)", activation="gelu", eta=0.2, steps=t, hold_zero=(0,))
    r = solve_dmft(p, delta, n_paths=20_000, seed=3, keep_samples_at=(t,))
    D = r.samples(t)["D"][:, 0, 0]
    e, Dp, _ = _sim_at(p, d, delta, 3, t, (0,))
    lo, hi = e["eigs"].min(), e["eigs"].max()
    grid = np.linspace(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo), 300)
    flags = dict(unbounded_below=False, unbounded_above=False)
    F, info = svs.theory_cdf(D, delta, grid, **flags)
    FA, _ = svs.theory_cdf(D[: D.size // 2], delta, grid, **flags)
    FB, _ = svs.theory_cdf(D[D.size // 2:], delta, grid, **flags)
    mc = np.max(np.abs(FA - FB)) / 2
    ks, w1 = svs.distances(F, grid, e["eigs"])
    assert info["mass_on_grid"] == pytest.approx(1.0, abs=2e-3)
    assert ks < 0.6 / math.sqrt(d) + 3 * mc, (ks, mc)
    # the plug-in law is closer still: only the random-matrix finite-d error is left
    Fp, _ = svs.theory_cdf(Dp[:, 0, 0], delta, grid, **flags)
    ksp, _ = svs.distances(Fp, grid, e["eigs"])
    assert ksp < 0.3 / math.sqrt(d)
    # bounded law: finite left edge (at t = 5 the finite-d λ_min converges to it slowly: the
    # edge is set by the thin lower tail of D; see test_no_outlier_after_training for t = 20)
    assert info["left_edge"] is not None


def test_bulk_unbounded_law_has_no_left_edge():
    # y = z²: D = σ'² + (σ − y)σ'' is unbounded below at early times (docs/theory.md §3.5): no left edge.
    p = Problem.build(target="z**2", activation="gelu", eta=0.2, steps=0, hold_zero=(0,))
    r = solve_dmft(p, 4.0, n_paths=20_000, seed=1, keep_samples_at=(0,))
    D = r.samples(0)["D"][:, 0, 0]
    grid = np.linspace(-4, 4, 50)
    _, info = svs.theory_cdf(D, 4.0, grid, unbounded_below=True, unbounded_above=False)
    assert info["left_edge"] is None and "unbounded below" in info["message"]


# --------------------------------------------------------------------------- outliers
def _outlier_check(p, delta, t, d, seed, n_paths=40_000, flags=None):
    flags = flags or dict(unbounded_below=False, unbounded_above=False)
    r = solve_dmft(p, delta, n_paths=n_paths, seed=seed, keep_samples_at=(t,))
    s = r.samples(t)
    o, oA, oB = _halves(lambda D, z: outliers(D, z, delta, throw=False, **flags),
                        s["D"], s["Vstar"][:, :1])
    e, _, _ = _sim_at(p, d, delta, seed, t, (0,))
    return o, oA, oB, e


def test_outlier_gelu_bounded_target():
    # GeLU, h = min(z², 3), δ = 4, t = 0: predicted outlier −1.023 with overlap² 0.28 (DMFT law,
    # 200k paths, validation run); d = 2000 simulation: −1.02 / 0.30.
    d = 500
    p = Problem.build(target="Min(z**2, 3)", activation="gelu", eta=0.2, steps=0, hold_zero=(0,))
    o, oA, oB, e = _outlier_check(p, 4.0, 0, d, seed=2)
    assert len(o.outliers) == 1
    x = o.outliers[0]
    mc_loc = abs(oA.locations[0] - oB.locations[0]) / 2
    mc_ov = abs(oA.overlaps2[0] - oB.overlaps2[0]) / 2
    assert e["low"][0] == pytest.approx(x.location, abs=1.0 / math.sqrt(d) + 3 * mc_loc)
    assert e["low_hard"][0] == pytest.approx(x.overlap2, abs=3.0 / math.sqrt(d) + 3 * mc_ov)
    assert e["low_hard"][1] < 0.1  # the next one is bulk


def test_no_outlier_after_training():
    # Same problem at t = 20: no outlier predicted; the lowest eigenvectors have no hard overlap.
    d = 400
    p = Problem.build(target="Min(z**2, 3)", activation="gelu", eta=0.2, steps=20, hold_zero=(0,))
    o, _, _, e = _outlier_check(p, 4.0, 20, d, seed=4, n_paths=20_000)
    assert o.outliers == []
    assert np.all(e["low_hard"][:3] < 0.1)
    # the smallest eigenvalue is the bulk's left edge (validation, d = 600: −0.487 vs −0.499)
    assert e["low"][0] == pytest.approx(o.left_edge, abs=1.0 / math.sqrt(d))


def test_outlier_non_sign_symmetric_hard_direction():
    # y = 3·1_A(z), A = (−∞, −c) ∪ (1.5, 2.5) with φ(c) = φ(1.5) − φ(2.5): E[z | y] = 0
    # exactly, but the law of (y, z) is not invariant under z → −z. docs/theory.md §4.6 "Beyond sign
    # symmetry": the outlier equation should still hold. GeLU, δ = 8, t = 0: predicted −0.414,
    # overlap² 0.44 (exact law, 200k samples).
    c = svs.C_IND
    from scipy.stats import norm

    assert norm.pdf(c) == pytest.approx(norm.pdf(1.5) - norm.pdf(2.5), rel=1e-12)
    rng = np.random.default_rng(0)
    z = rng.standard_normal(400_000)
    y = Problem.build(target=svs.INDICATOR).labels(z[:, None])
    for v in (0.0, 3.0):
        sel = y == v
        assert abs(z[sel].mean()) < 4 * z[sel].std() / math.sqrt(sel.sum())
    assert abs((z[y == 3.0] ** 3).mean()) > 0.5  # asymmetric conditional law (≈ 0.9)
    d = 400
    p = Problem.build(target=svs.INDICATOR, activation="gelu", eta=0.2, steps=0, hold_zero=(0,))
    o, oA, oB, e = _outlier_check(p, 8.0, 0, d, seed=5)
    assert len(o.outliers) == 1
    x = o.outliers[0]
    mc_loc = abs(oA.locations[0] - oB.locations[0]) / 2
    assert e["low"][0] == pytest.approx(x.location, abs=1.0 / math.sqrt(d) + 3 * mc_loc)
    assert e["low_hard"][0] == pytest.approx(x.overlap2, abs=3.0 / math.sqrt(d))


def test_split_directions_non_sign_symmetric_is_hard():
    # y = min(|z|², 3) + tanh(Re((z1 + i z2)³)) is invariant under rotations by 120°, so
    # E[z | y] = 0 exactly (the only fixed vector of the rotation is 0); both directions are hard.
    split = split_directions(svs.CUBIC_HARMONIC)
    assert split.hard_indices == (0, 1)


# --------------------------------------------------------------------------- easy direction
def test_direction_with_zero_linear_correlation_is_learned_in_O1_steps():
    # y = z² + z³ − 3z: E[z y] = 0, so M_1 = 0 in the DMFT, but E[z | y] ≠ 0, so M_t moves off
    # zero through the memory term from t = 2 on. tanh neuron, δ = 4, η = 0.2: the validation
    # run has M_15 ≈ −0.34 (DMFT) at every d in 500 … 4000.
    T = 15
    p = Problem.build(target="z**2 + z**3 - 3*z", activation="tanh", eta=0.2, steps=T)
    r = solve_dmft(p, 4.0, n_paths=20_000, seed=6)
    M = r.M[:, 0, 0]
    assert M[1] == pytest.approx(0.0, abs=5 * r.M_err[1, 0, 0] + 1e-3)
    assert abs(M[T]) > 0.25
    for d in (200, 400):
        s = simulate(p, d=d, delta=4.0, seed=d, trials=4)
        Ms = s.overlaps[:, T, 0, 0]
        se = Ms.std(ddof=1) / 2
        assert Ms.mean() == pytest.approx(M[T], abs=1.0 / math.sqrt(d) + 3 * se + 3 * r.M_err[T, 0, 0])
        assert np.all(np.abs(Ms) > 2.5 / math.sqrt(d))  # not a finite-d fluctuation
