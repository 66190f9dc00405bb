"""δ_NN (``dmftsolve.thresholds.hessian_threshold``): the threshold search, the restricted
problem, and the TTI fixed point."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar

from dmftsolve import Problem, SolverError
from dmftsolve.cli import main
from dmftsolve.dynamics.fixed_point import FixedPointSettings, solve_fixed_point
from dmftsolve.gaussian import gauss_hermite_rule
from dmftsolve.simulation.simulator import simulate
from dmftsolve.thresholds.hessian_threshold import delta_nn
from dmftsolve.thresholds.restricted_hessian import restricted
from dmftsolve.thresholds.settings import ThresholdSettings


def _bbp_reference_t0() -> float:
    """δ_NN(0) for σ = r², y = min(z², 3), q0 = 1, by an independent route.

    At t = 0, V = ξ ~ N(0, 1) independent of z, and D = 6ξ² − 2y ≥ −6. For
    m = k = 1 an outlier exists iff F(s) = 1/s + E[D(z²−1)/(1 + sD/δ)] turns
    negative before the edge s_e = argmax_s z(s), z(s) = E[D/(1 + sD/δ)] − 1/s,
    s ∈ (0, δ/6). The edge here is negative, so the first outlier is already
    negative and δ_NN(0) solves F(s_e(δ)) = 0. Expectations by a 200² tensor
    Gauss–Hermite rule; edge by bounded scalar minimisation; root by Brent.
    """
    x, w = gauss_hermite_rule(2, 200)
    z, xi = x[:, 0], x[:, 1]
    D = 6 * xi**2 - 2 * np.minimum(z**2, 3)

    def f_edge(delta: float) -> float:
        smax = delta / 6.0
        r = minimize_scalar(lambda s: -(w @ (D / (1 + s * D / delta)) - 1 / s),
                            bounds=(1e-6 * smax, smax * (1 - 1e-9)), method="bounded",
                            options={"xatol": 1e-12})
        return 1 / r.x + w @ (D * (z**2 - 1) / (1 + r.x * D / delta))

    return brentq(f_edge, 1.2, 2.5, xtol=1e-10)


def test_delta_nn_at_t0_matches_independent_quadrature() -> None:
    ref = _bbp_reference_t0()  # 1.66960… (see the helper's docstring)
    p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05)
    res = delta_nn(p, 0, settings=ThresholdSettings(bracket=(0.5, 4.0), grid=5, xtol=0.02,
                                                    n_paths=40_000, seed=1))
    assert res.ok and res.hard == (0,)
    lo, hi = res.bracket
    assert hi - lo <= 0.02 + 1e-12
    # both ends were evaluated: no outlier at lo, an outlier at hi
    flags = {e["delta"]: e["has_outlier"] for e in res.evaluations}
    assert flags[lo] is False and flags[hi] is True
    # Monte Carlo error of the sampled law of D (4e4 paths) moves the edge by ~1e-2
    assert abs(res.delta_nn - ref) < 0.05
    assert res.delta_alg is not None and res.delta_alg < ref


def test_replicates_give_mean_and_standard_error_of_independent_searches() -> None:
    """Three seeds: delta_nn is the mean of the three verified bracket midpoints, stderr their
    standard error combined with the bisection resolution (w²/12 per midpoint), and the
    independent quadrature reference lies within 4 standard errors plus the bracket width (the
    search at 5000 paths has a seed spread of a few 1e-2)."""
    ref = _bbp_reference_t0()
    p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05)
    s = ThresholdSettings(bracket=(0.5, 4.0), grid=5, xtol=0.02, n_paths=5000, seed=7, replicates=3)
    res = delta_nn(p, 0, settings=s)
    assert [r["seed"] for r in res.replicates] == [7, 8, 9]
    mids = [0.5 * (a + b) for a, b in (r["bracket"] for r in res.replicates)]
    assert len(set(mids)) > 1  # the seeds differ
    assert res.delta_nn == pytest.approx(np.mean(mids), rel=1e-12)
    widths = np.array([b - a for a, b in (r["bracket"] for r in res.replicates)])
    resolution2 = np.mean(widths**2) / 12 / 3
    assert res.stderr == pytest.approx(np.sqrt(np.var(mids, ddof=1) / 3 + resolution2), rel=1e-12)
    assert res.bracket == (min(r["bracket"][0] for r in res.replicates),
                           max(r["bracket"][1] for r in res.replicates))
    for r in res.replicates:  # every replicate's bracket is verified at both ends
        lo, hi = r["bracket"]
        flags = {e["delta"]: e["has_outlier"] for e in res.evaluations if e["seed"] == r["seed"]}
        assert flags[lo] is False and flags[hi] is True
    assert abs(res.delta_nn - ref) < 4 * res.stderr + 0.02
    with pytest.raises(ValueError, match="replicates must be an integer >= 1"):
        ThresholdSettings(replicates=0)


def test_parallel_replicates_equal_the_serial_run() -> None:
    """The replicate searches spread over a process pool give exactly the serial result (same
    seeds): every bracket, every evaluated δ and outlier, the mean and standard error. The
    long-time rule (two times per DMFT run) is exercised on a short horizon."""
    p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05)
    base = dict(bracket=(0.5, 4.0), grid=4, xtol=0.2, n_paths=1000, seed=3, replicates=3, long_time=2)
    serial = delta_nn(p, None, settings=ThresholdSettings(**base, workers=1), throw=False)
    pooled = delta_nn(p, None, settings=ThresholdSettings(**base, workers=2), throw=False)
    assert serial.settings["workers"] == 1 and pooled.settings["workers"] == 2
    assert serial.stderr is not None and len(serial.evaluations) >= 3 * 2 * 4
    for name in ("delta_nn", "stderr", "bracket", "brackets", "replicates", "status", "message", "warnings"):
        assert getattr(pooled, name) == getattr(serial, name), name

    def numbers(res):
        return [{k: v for k, v in e.items() if k != "elapsed"} for e in res.evaluations]

    assert numbers(pooled) == numbers(serial)
    with pytest.raises(ValueError, match="workers must be an integer >= 1, got 0"):
        ThresholdSettings(workers=0)


def test_shorter_horizon_gives_the_same_law_at_earlier_times() -> None:
    """The long-time rule evaluates a δ first needed at T/2 with a DMFT run to T/2 only: the
    paths up to a step do not depend on the horizon, so the spectrum there is the same."""
    from dmftsolve.thresholds.restricted_hessian import hard_spectra

    p = Problem.build(target="z**2", activation="gelu", eta=0.5)
    s = ThresholdSettings(n_paths=2000, seed=4)
    both = hard_spectra(p, 21.0, (10, 20), settings=s, keep_law=True)[10]
    short = hard_spectra(p, 21.0, (10,), settings=s, keep_law=True)[10]
    np.testing.assert_array_equal(both.law.D, short.law.D)
    assert both.left_edge == short.left_edge and both.outliers.outliers == short.outliers.outliers


def test_long_time_rule_on_replicate_means() -> None:
    from dmftsolve.thresholds.hessian_threshold import combine_replicates

    s = ThresholdSettings(xtol=0.1, time_rtol=0.0)

    def reps(mid_t: list[float], mid_half: list[float]) -> list[dict]:
        return [{"seed": i, "status": "not_converged", "message": "", "bracket": (a - 0.05, a + 0.05),
                 "brackets": {"100": {"bracket": (b - 0.05, b + 0.05)}}}
                for i, (a, b) in enumerate(zip(mid_t, mid_half, strict=True))]

    # means 10 vs 10.1, standard errors ~0.6: within 2 combined standard errors
    st, msg, mean, se, _ = combine_replicates(reps([9, 10, 11], [9.1, 10.1, 11.1]), (100, 200), None, s)
    # spread 1/√3 and brackets 0.1 wide: resolution variance 0.1²/12/3
    assert st.value == "success" and mean == pytest.approx(10.0)
    assert se == pytest.approx(np.sqrt(1 / 3 + 0.01 / 36), rel=1e-9)
    # replicates in one and the same bracket: the error is the bisection resolution, not 0
    st, msg, mean, se, _ = combine_replicates(reps([10, 10, 10], [10, 10, 10]), (100, 200), None, s)
    assert se == pytest.approx(0.1 / np.sqrt(36), rel=1e-9) and "resolution included" in msg
    # means 10 vs 14 with the same spread: far outside
    st, msg, *_ = combine_replicates(reps([9, 10, 11], [13, 14, 15]), (100, 200), None, s)
    assert st.value == "not_converged" and "NOT met" in msg
    # at a fixed t a replicate that did not succeed fails the whole result
    bad = reps([9, 10, 11], [9, 10, 11])
    st, msg, mean, *_ = combine_replicates(bad, (200,), 200, s)
    assert st.value == "not_converged" and mean is None and "seed 0" in msg


def test_restricted_problem_holds_hard_directions() -> None:
    p, hard = restricted(Problem.build(target="z1 + z2**2"))
    assert hard == (1,) and p.training.hold_zero == (1,)
    with pytest.raises(ValueError, match="no hard direction"):
        restricted(Problem.build(target="z + 0.3*z**2"))
    with pytest.raises(ValueError, match="not spanned by coordinate axes"):
        restricted(Problem.build(target="(z1 + z2) + (z1 - z2)**2"))


def test_threshold_outside_bracket_reports_no_root() -> None:
    p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05)
    s = ThresholdSettings(bracket=(0.5, 1.0), grid=3, n_paths=5000)
    res = delta_nn(p, 0, settings=s, throw=False)
    assert res.status.value == "no_root" and res.delta_nn is None
    with pytest.raises(SolverError, match="above the bracket"):
        delta_nn(p, 0, settings=s)


def test_fixed_point_matches_gd_for_ridge_regression() -> None:
    # convex case (linear network, ridge): GD converges to the unique minimiser,
    # so the TTI fixed point must match the simulator's final state
    p = Problem.build(target="z + 0.5*eps", activation="linear", lam=0.5, eta=0.3, steps=150)
    fp = solve_fixed_point(p, 3.0, settings=FixedPointSettings(branch="newton", nodes=30))
    d = 800
    sim = simulate(p, d=d, delta=3.0, seed=2, trials=2, record_every=150)
    M = sim.overlaps[:, -1, 0, 0]
    Q = sim.gram[:, -1, 0, 0] - M**2
    tol = 3 / np.sqrt(d)
    assert abs(M.mean() - fp.M[0, 0]) < tol
    assert abs(Q.mean() - fp.Q[0, 0]) < tol
    assert abs(sim.train_loss[:, -1].mean() - fp.train_loss) < tol


def test_fixed_point_failure_raises() -> None:
    p = Problem.build(target="z**2", activation="gelu", hold_zero=[0])
    with pytest.raises(SolverError, match="no convergence"):
        solve_fixed_point(p, 4.0, settings=FixedPointSettings(maxiter=3, nodes=20))
    res = solve_fixed_point(p, 4.0, settings=FixedPointSettings(maxiter=3, nodes=20), throw=False)
    assert res.status.value == "not_converged" and "not_converged" in repr(res)


def test_threshold_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["threshold", "--target", "Min(z**2, 3)", "--activation", "quad", "--eta", "0.05",
                 "--t", "0", "--bracket", "1,3", "--grid", "3", "--xtol", "0.1", "--paths", "5000",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "success"
    assert out["bracket"][0] < out["delta_nn"] < out["bracket"][1]
    # default: three replicate seeds, their mean and its standard error
    assert [r["seed"] for r in out["replicates"]] == [0, 1, 2]
    mids = [0.5 * (a + b) for a, b in (r["bracket"] for r in out["replicates"])]
    assert out["delta_nn"] == pytest.approx(np.mean(mids))
    widths = np.array([b - a for a, b in (r["bracket"] for r in out["replicates"])])
    assert out["stderr"] == pytest.approx(np.sqrt(np.var(mids, ddof=1) / 3 + np.mean(widths**2) / 36))
    code = main(["threshold", "--target", "Min(z**2, 3)", "--activation", "quad", "--eta", "0.05",
                 "--t", "0", "--bracket", "1,3", "--grid", "3", "--xtol", "0.1", "--paths", "5000",
                 "--replicates", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["stderr"] is None and len(out["replicates"]) == 1


def test_threshold_cli_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["threshold", "--target", "z + 0.3*z**2", "--t", "0"]) == 2
    assert "no hard direction" in capsys.readouterr().err


def test_hard_spectrum_edges_outliers_law_and_unbounded_laws() -> None:
    """The one pipeline restricted → DMFT → Law → outliers (hard_spectrum; the spectrum command's
    JSON is tested with it in tests/test_spectrum.py). Bounded law (y = min(z², 3), σ = r², t = 0,
    δ = 3): finite left edge and a hard outlier below it (the t = 0 threshold is 1.67, test
    above); y = z²: D unbounded below, so no edge with tails="strict", a warning with "sample"."""
    from dmftsolve.hessian.law import Law
    from dmftsolve.hessian.outlier_equation import training_outliers
    from dmftsolve.thresholds.restricted_hessian import hard_spectrum

    hs = hard_spectrum(Problem.build(target="Min(z**2, 3)", activation="quad"), 3.0, 0,
                       settings=ThresholdSettings(n_paths=20_000, seed=0))
    locs = [o.location for o in hs.outliers.outliers]
    assert hs.left_edge is not None and len(locs) == 1 and locs[0] < hs.left_edge
    law = hs.law
    assert isinstance(law, Law) and law.t == 0 and law.n == 20_000 and law.kind == "monte_carlo"
    # the same hard outlier appears among those along span(θ*) + span(W_0), all of it "hard"
    learned = training_outliers(law, law.Vstar, law.V, hs.M, hs.Q, 3.0, hard=hs.hard, side="left")
    left = [o for o in learned.outliers if o.side == "left"]
    assert len(left) == 1 and left[0].location == pytest.approx(locs[0], rel=1e-6)
    assert left[0].parts["hard"] == pytest.approx(left[0].overlap2, rel=1e-3)
    gelu = Problem.build(target="z**2", activation="gelu")
    strict = hard_spectrum(gelu, 4.0, 0, settings=ThresholdSettings(n_paths=5000, tails="strict"),
                           throw=False)
    assert not strict.ok and strict.left_edge is None and "unbounded below" in strict.message
    sample = hard_spectrum(gelu, 4.0, 0, settings=ThresholdSettings(n_paths=5000), throw=False)
    assert sample.ok and sample.diagnostics["tail_unbounded"]
    assert any("unbounded below" in w for w in sample.warnings) and "unbounded" not in sample.message


def test_null_rtol_reaches_the_dmft_of_the_threshold_search() -> None:
    """``ThresholdSettings.null_rtol`` is the DMFT's: at width 2, GeLU, ``y = z² + 0.5 ε``, δ = 40,
    t = 200, 2000 paths, the default cut-off lets the Stein recursion diverge (the hard spectrum
    fails and says so, tests/test_dmft.py) and ``1e-3`` does not."""
    from dmftsolve.thresholds.restricted_hessian import hard_spectrum

    p = Problem.build(target="z**2 + 0.5*eps", activation="gelu", m=2, eta=0.5, steps=200)
    base = dict(n_paths=2000, seed=0, workers=1)
    bad = hard_spectrum(p, 40.0, 200, settings=ThresholdSettings(**base), throw=False)
    assert not bad.ok and "diverged" in bad.message
    good = hard_spectrum(p, 40.0, 200, settings=ThresholdSettings(**base, null_rtol=1e-3), throw=False)
    assert good.ok, good.message
    assert good.settings["null_rtol"] == 1e-3
    assert good.left_edge is not None and np.isfinite(good.left_edge)
