"""The finite-d transition at any width and number of directions, the shared success criterion,
the first-passage stop of the DMFT and the self-bracketing δ_50 search."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import ndtr
from scipy.stats import chi2

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import DMFTSettings, solve_dmft
from dmftsolve.finite_d import (
    TransitionSettings,
    draw_starts,
    give_up_step,
    success_probability,
    transition,
    transition_directions,
)
from dmftsolve.finite_d.stopping import FirstPassage
from dmftsolve.results import Status
from dmftsolve.success import (
    direction_projections,
    projections_and_largest_cosine,
    success_directions,
    success_statistic,
)
from dmftsolve.thresholds.delta50 import DELTA_RANGE, search_delta_50


# --------------------------------------------------------------------------- success criterion
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3), m=st.integers(1, 4))
@example(seed=0, k=2, m=1)  # one neuron, two directions: projections are the two cosines
def test_direction_projections_match_an_explicit_projector(seed: int, k: int, m: int) -> None:
    """‖P_W θ_j‖ from (M, G) equals the norm of θ_j projected on an orthonormal basis of span(W)
    (a QR factor of an explicit W in d = 12 dimensions, Θ* the first k axes)."""
    rng = np.random.default_rng(seed)
    d = 12
    W = rng.standard_normal((d, m)) * rng.uniform(0.1, 3.0, size=m)
    W[:k] += rng.standard_normal((k, m))  # some overlap with the target
    Qf, _ = np.linalg.qr(W)
    direct = np.linalg.norm(Qf[:k, :], axis=1)  # ‖P_W e_j‖ = ‖row j of the basis‖
    got = direction_projections(W[:k], W.T @ W)
    np.testing.assert_allclose(got, direct, rtol=1e-9, atol=1e-12)
    assert np.all((got >= 0) & (got <= 1))
    if m == 1:
        np.testing.assert_allclose(got, np.abs(W[:k, 0]) / np.linalg.norm(W[:, 0]), rtol=1e-9)



@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3), m=st.integers(1, 4))
@example(seed=0, k=1, m=2)  # fewer directions than neurons
@example(seed=1, k=3, m=2)  # more directions than neurons
def test_projections_and_largest_cosine_from_an_explicit_basis(seed: int, k: int, m: int) -> None:
    """The fused projections and largest principal cosine equal those of an explicit W in
    d = 12 dimensions: the norms of the target axes projected on a QR basis of span(W), and the
    largest singular value of the target rows of that basis."""
    rng = np.random.default_rng(seed)
    d = 12
    W = rng.standard_normal((d, m)) * rng.uniform(0.1, 3.0, size=m)
    W[:k] += rng.standard_normal((k, m))
    Qf, _ = np.linalg.qr(W)
    Wperp = W[k:]
    proj, cos = projections_and_largest_cosine(W[:k], Wperp.T @ Wperp)
    np.testing.assert_allclose(proj, np.linalg.norm(Qf[:k, :], axis=1), rtol=1e-9, atol=1e-12)
    assert cos == pytest.approx(np.linalg.svd(Qf[:k, :], compute_uv=False).max(), rel=1e-9)
    bad, nan = projections_and_largest_cosine(np.full((k, m), np.nan), np.eye(m))
    assert np.isnan(bad).all() and np.isnan(nan)

def test_success_statistic_is_the_smallest_hard_projection() -> None:
    M = np.array([[0.6, 0.0], [0.0, 0.3]])
    G = np.diag([1.0, 1.0])  # W = (0.6 e1 + 0.8 u1, 0.3 e2 + …): unit columns
    assert float(success_statistic(M, G, [0, 1])) == pytest.approx(0.3)
    assert float(success_statistic(M, G, [0])) == pytest.approx(0.6)
    assert math.isnan(direction_projections(np.array([[np.nan]]), np.array([[1.0]]))[0])
    assert direction_projections(np.zeros((1, 1)), np.zeros((1, 1)))[0] == 0.0  # W = 0
    assert direction_projections(np.zeros((1, 2)), np.zeros((2, 2)))[0] == 0.0
    with pytest.raises(ValueError, match="at least one"):
        success_statistic(M, G, [])


def test_success_directions_and_transition_directions() -> None:
    assert success_directions(Problem.build(target="z**2 - 1")) == (0,)
    assert success_directions(Problem.build(target="z1*z2")) == (0, 1)
    assert transition_directions(Problem.build(target="z1 + z2**2 - 1")) == (1,)
    assert transition_directions(Problem.build(target="z1*z2", m=2)) == (0, 1)
    with pytest.raises(ValueError, match="no hard direction"):
        transition_directions(Problem.build(target="z1 + z2**3"))
    # a ridge and a bias are followed by the draws; a ridge of 1/eta or more is refused
    assert transition_directions(Problem.build(target="z**2", bias=True, lam=0.1)) == (0,)
    with pytest.raises(ValueError, match="lam must be below 1/eta = 2: with eta\\*lam = 1 each GD step"):
        transition_directions(Problem.build(target="z**2", eta=0.5, lam=2.0))


def test_simulator_success_uses_the_hard_directions() -> None:
    """GD on z1 + z2² − 1: the recorded success statistic is the projection of the hard
    direction z2 (not the largest cosine, which the easy z1 dominates)."""
    from dmftsolve.simulation.simulator import simulate

    p = Problem.build(target="z1 + z2**2 - 1", activation="gelu", eta=0.5, steps=30, m=2)
    r = simulate(p, 100, 3.0, seed=0, trials=2, record_every=10)
    assert r.success_directions() == (1,)
    np.testing.assert_allclose(r.success_statistic(), r.cosine_per_direction[:, :, 1])
    np.testing.assert_array_equal(r.success(0.5), r.cosine_per_direction[:, -1, 1] > 0.5)


# --------------------------------------------------------------------------- DMFT first passage
def test_stop_cosine_ends_the_solve_at_the_first_passage() -> None:
    """The stopped solve equals the full one up to the first step whose cosine exceeds 1/2
    (same seed), is a success, and is NaN afterwards."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=60, M0=[[0.1]], Q0=[[1.0]])
    kw = {"n_paths": 2000, "seed": 0, "errors": "none", "test_loss": "none"}
    full = solve_dmft(p, 8.0, **kw)
    t = int(np.argmax(full.cosine > 0.5))
    assert 0 < t < 60
    stop = solve_dmft(p, 8.0, stop=FirstPassage(0.5), **kw)
    assert stop.ok and stop.diagnostics["stopped_at"] == t
    np.testing.assert_allclose(stop.cosine[: t + 1], full.cosine[: t + 1], rtol=1e-12)
    np.testing.assert_allclose(stop.cosine_per_direction[: t + 1, 0], full.cosine[: t + 1], rtol=1e-9)
    assert np.all(np.isnan(stop.cosine[t + 1:])) and np.all(np.isnan(stop.M[t + 1:]))
    for bad in (0.0, 1.0, True, "0.5"):
        with pytest.raises(ValueError, match="stop_cosine"):
            FirstPassage(bad)
    with pytest.raises(ValueError, match="stop_directions"):
        solve_dmft(p, 8.0, stop=FirstPassage(0.5, (1,)), **kw)


def _give_up_step(c: np.ndarray, T: int, factor: float, level: float = 0.5) -> int | None:
    """The give-up rule of ``FirstPassage(give_up_factor=F)``, written out independently: the
    first ``t ≥ T/4`` (and ``≥ W``) with ``c_t + F max(c_t − c_{t−W}, 0)(T − t)/W < level − 0.1``."""
    W = max(1, round(T / 8))
    for t in range(T + 1):
        if c[t] > level:
            return None
        reach = c[t] + factor * max(c[t] - c[t - W], 0.0) * (T - t) / W
        if 4 * t >= T and t >= W and reach < level - 0.1:
            return t
    return None


@pytest.mark.parametrize("factor", [1.0, 20.0])
def test_give_up_stops_where_the_rule_says(factor: float) -> None:
    """A solve well below its transition gives up at the first step where the rule holds on the
    full solve's cosine (same seed), equals that solve up to there, and is NaN afterwards; the
    full solve never passes, so giving up lost nothing."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=80, M0=[[0.02]], Q0=[[1.0]])
    kw = {"n_paths": 2000, "seed": 0, "errors": "none", "test_loss": "none"}
    full = solve_dmft(p, 3.0, stop=FirstPassage(0.5), **kw)
    assert full.diagnostics["stopped_at"] is None  # never passes
    expect = _give_up_step(full.cosine, 80, factor)
    assert expect is not None and expect >= 20
    assert give_up_step(full.cosine, 80, factor) == expect
    # on a recording grid of every 5 steps the rule is checked at the recorded steps only
    grid = np.arange(0, 81, 5)
    on_grid = give_up_step(full.cosine[grid], 80, factor, steps=grid)
    assert on_grid is not None and on_grid % 5 == 0 and on_grid >= expect
    r = solve_dmft(p, 3.0, stop=FirstPassage(0.5, give_up_factor=factor), **kw)
    assert r.ok and r.diagnostics["gave_up_at"] == expect and r.diagnostics["stopped_at"] is None
    np.testing.assert_allclose(r.cosine[: expect + 1], full.cosine[: expect + 1], rtol=1e-12)
    assert np.all(np.isnan(r.cosine[expect + 1:])) and np.all(np.isnan(r.M[expect + 1:]))
    assert r.settings["stop"]["give_up_factor"] == factor


def test_give_up_does_not_stop_a_draw_that_passes() -> None:
    """A solve that passes is stopped at its passage with or without the rule (same steps)."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=60, M0=[[0.1]], Q0=[[1.0]])
    kw = {"n_paths": 2000, "seed": 0, "errors": "none", "test_loss": "none"}
    a = solve_dmft(p, 8.0, stop=FirstPassage(0.5), **kw)
    b = solve_dmft(p, 8.0, stop=FirstPassage(0.5, give_up_factor=20.0), **kw)
    assert a.diagnostics["stopped_at"] is not None
    assert b.diagnostics["stopped_at"] == a.diagnostics["stopped_at"] and b.diagnostics["gave_up_at"] is None


@pytest.mark.parametrize("bad, match", [
    (0.5, "give_up_factor must be a finite number >= 1"),
    (math.inf, "give_up_factor must be a finite number >= 1"),
    (True, "give_up_factor must be a finite number >= 1"),
    ("20", "give_up_factor must be a finite number >= 1"),
])
def test_give_up_factor_is_checked(bad: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FirstPassage(0.5, give_up_factor=bad)
    with pytest.raises(ValueError, match=match):
        TransitionSettings(give_up_factor=bad)


def test_old_stopping_options_name_their_replacement() -> None:
    """The stopping rule is a component: the former flat options are refused with the object to
    pass instead."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=4)
    with pytest.raises(TypeError, match="give_up_factor: pass stop=FirstPassage"):
        solve_dmft(p, 3.0, n_paths=200, give_up_factor=20.0)
    with pytest.raises(ValueError, match="stop must be None or an object with a build"):
        DMFTSettings(stop=0.5)


def test_given_up_draws_are_counted_and_change_no_outcome() -> None:
    """Below and near the transition (small configuration): the draws that give up are counted
    in the diagnostics, and every draw's outcome is the one it has when run to step T."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=80)
    base = TransitionSettings(draws=4, n_paths=2000, seed=3)
    for delta in (4.0, 9.0):
        on = success_probability(p, delta, 300, settings=base)
        off = success_probability(p, delta, 300, settings=TransitionSettings(
            draws=4, n_paths=2000, seed=3, give_up_factor=None))
        np.testing.assert_array_equal(on.escape_step, off.escape_step)
        assert on.diagnostics["given_up_draws"] <= int((on.escape_step < 0).sum())
        assert off.diagnostics["given_up_draws"] == 0
        if delta == 4.0:
            assert on.diagnostics["given_up_draws"] > 0


# --------------------------------------------------------------------------- starts and draws
def test_draw_starts_stratify_the_hard_block_norm() -> None:
    """Width 2 on z1*z2: (K, k, m) starts whose hard-block squared norms / q0 fall one in each
    of the K quantile bins of χ²(k_h m)."""
    p = Problem.build(target="z1*z2", activation="gelu", m=2, q0=2.0)
    K = 16
    X = draw_starts(p, 4.0, 1000, TransitionSettings(draws=K), (0, 1))
    assert X.shape == (K, 2, 2)
    u = chi2.cdf((X**2).sum(axis=(1, 2)) / 2.0, df=4)
    np.testing.assert_array_equal(np.sort(np.floor(u * K)), np.arange(K))
    one = draw_starts(Problem.build(target="z**2 - 1"), 4.0, 1000, TransitionSettings(draws=K), (0,))
    assert one.shape == (K, 1, 1)
    np.testing.assert_array_equal(np.sort(np.floor(ndtr(one[:, 0, 0]) * K)), np.arange(K))


@pytest.mark.parametrize("target", ["z**2 - 1", "z1 + z2**2 - 1"])
def test_width_two_extremes(target: str) -> None:
    """Two neurons: no draw learns far below the transition, every draw far above it
    (d = 200, 60 steps, 2000 paths); draws that escape stop at their first passage."""
    p = Problem.build(target=target, activation="gelu", eta=0.5, steps=60, m=2)
    s = TransitionSettings(draws=2, seed=0, n_paths=2000)
    lo = success_probability(p, 0.5, 200, settings=s)
    hi = success_probability(p, 25.0, 200, settings=s)
    assert lo.successes == 0 and hi.successes == 2
    assert lo.m0.shape == (2, p.k, 2)
    assert np.all(hi.final_cosine > 0.5) and np.all(hi.escape_step > 0)


# --------------------------------------------------------------------------- the search
def test_search_finds_a_known_curve_and_reports_the_ends() -> None:
    rng = np.random.default_rng(3)

    def curve(x: float, b: int) -> tuple[int, int]:
        return int(rng.binomial(40, ndtr((x - 11.0) / 1.0))), 40

    out = search_delta_50(curve, start=3.0, tol=0.15, max_trials=6000)
    assert out.reason == "" and out.delta_50_err <= 0.15
    assert abs(out.delta_50 - 11.0) <= 4 * out.delta_50_err
    never = search_delta_50(lambda x, b: (0, 8), start=6.0, tol=0.1, max_trials=10_000)
    assert never.reason == f"no success by step T up to delta = {DELTA_RANGE[1]:g}"
    always = search_delta_50(lambda x, b: (8, 8), start=6.0, tol=0.1, max_trials=10_000)
    assert always.reason == f"every trial succeeds down to delta = {DELTA_RANGE[0]:g}"
    capped = search_delta_50(curve, start=3.0, tol=1e-6, max_trials=400)
    assert capped.reason.startswith("max trials (400)") and capped.trials.sum() <= 400
    with pytest.raises(ValueError, match="start"):
        search_delta_50(curve, start=0.0, tol=0.1, max_trials=10)


def test_search_runs_its_batches_together_with_the_same_outcome() -> None:
    """``run_batches`` gets the two batches the search places together, and the search is the
    one ``run_batch`` gives (counts seeded by (δ, batch), as the theory's draws are)."""
    def curve(x: float, b: int) -> tuple[int, int]:
        rng = np.random.default_rng([int(round(1000 * x)), b])
        return int(rng.binomial(8, ndtr((x - 9.0) / 1.5))), 8

    sizes: list[int] = []

    def together(plan: list[tuple[float, int]]) -> list[tuple[int, int]]:
        sizes.append(len(plan))
        return [curve(x, b) for x, b in plan]

    one = search_delta_50(curve, start=4.0, tol=0.2, max_trials=3000)
    two = search_delta_50(curve, start=4.0, tol=0.2, max_trials=3000, run_batches=together)
    assert one.batches == two.batches and one.delta_50 == two.delta_50
    assert sizes and set(sizes) == {2}
    capped = search_delta_50(curve, start=4.0, tol=1e-6, max_trials=100, run_batches=together)
    assert capped.trials.sum() <= 100 and capped.reason.startswith("max trials (100)")


def test_transition_without_a_grid_and_an_unbracketed_grid() -> None:
    """No grid: the search brackets the transition by itself (P = 0 and 1 among its points);
    a grid that does not bracket δ_50 is a NO_ROOT failure that says so (it used to report
    success with a probit width of 4·10¹²)."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=40)
    s = TransitionSettings(draws=4, seed=0, n_paths=1000, tol=0.6, max_draws=64, start=20.0)
    c = transition(p, 100, None, settings=s, throw=False)
    assert c.settings["search"] == "adaptive"
    assert c.p.min() <= 0.25 and c.p.max() >= 0.75
    assert c.deltas.min() <= c.delta_50 <= c.deltas.max() and c.diagnostics["total_draws"] <= 64
    bad = transition(p, 100, [1.0, 1.5], settings=TransitionSettings(draws=2, n_paths=1000), throw=False)
    assert bad.status is Status.NO_ROOT and not bad.ok


def test_cli_transition_finds_delta50_and_refuses_an_unbracketed_grid(
        capsys: pytest.CaptureFixture[str]) -> None:
    from dmftsolve.cli import main

    code = main(["transition", "--d", "100", "--steps", "40", "--paths", "1000", "--draws", "4",
                 "--tol", "0.6", "--max-draws", "64", "--start", "20", "--m", "2", "--json"])
    out = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and out["settings"]["search"] == "adaptive"
    assert out["settings"]["problem"]["m"] == 2
    code = main(["transition", "--d", "100", "--delta", "5,6", "--draws", "2", "--steps", "20",
                 "--paths", "400"])
    err = capsys.readouterr().err
    assert code == 1 and ("not bracketed" in err or "outside the grid" in err)


def test_width_transition_script_tiny(load_validation) -> None:  # noqa: ANN001
    """``validation/width_transition.py --tiny``: both searches run on one problem object."""
    mod = load_validation("width_transition")
    out = mod.main(["--tiny"])
    for side in ("theory", "gd"):
        assert sum(out[side]["trials"]) <= 24 and len(out[side]["deltas"]) >= 2


def test_long_time_rule_at_width_two_picks_the_safe_null_rtol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The long-time rule at m >= 2 runs its DMFTs with null_rtol = 1e-3 unless told otherwise;
    width 1, a finite t, or an explicit value keep what they had."""
    import dmftsolve.thresholds.hessian_threshold as ht

    seen: list = []

    class Stop(Exception):
        pass

    def capture(problem, t, times, settings, *args):  # noqa: ANN001, ANN002, ANN202
        seen.append(settings.null_rtol)
        raise Stop

    monkeypatch.setattr(ht, "_run_replicates", capture)
    cases = [(2, None, None, ht.LONG_NULL_RTOL_WIDE), (1, None, None, None), (2, 2, None, None),
             (2, None, 1e-5, 1e-5)]
    for m, t, given_rtol, want in cases:
        p = Problem.build(target="z**2", activation="gelu", m=m)
        with pytest.raises(Stop):
            ht.delta_nn(p, t, settings=ht.ThresholdSettings(null_rtol=given_rtol))
        assert seen[-1] == want
    assert ht.LONG_NULL_RTOL_WIDE == 1e-3


def test_two_phase_script_tiny(load_validation) -> None:  # noqa: ANN001
    """``validation/two_phase.py --tiny``: z1 is easy, z2 hard; the easy projection grows in the
    DMFT and in GD within a few steps (from 0, and from GD's O(1/√d) start)."""
    out = load_validation("two_phase").main(["--tiny"])
    assert out["easy"] == (0,) and out["hard"] == (1,)
    assert out["dmft_easy_projection"][0] == 0.0 and out["dmft_easy_projection"][5] > 0.3
    assert out["gd_easy_projection"][5] > out["gd_easy_projection"][0] + 0.1


def test_width_figure_from_a_small_json(tmp_path, load_validation) -> None:  # noqa: ANN001
    """``validation/figures/width.py`` draws δ_50 against m from the search JSON (points not run
    are left out) and refits each side's counts with the search's error model."""
    mod = load_validation("width")
    counts = {"deltas": [2.0, 3.0, 4.0], "successes": [1, 10, 19], "trials": [20, 20, 20], "delta_50": 0.0,
              "err": 0.0}
    data = {"gelu_z2m1_m2|1000|gd": counts, "quad_z2m1_m1|1000|theory": counts}
    (tmp_path / "w.json").write_text(json.dumps(data))
    out = mod.main(["--json", str(tmp_path / "w.json"), "--out", str(tmp_path / "w.png")])
    assert out.stat().st_size > 1000
    gelu, quad = mod.SERIES["gelu"][1], mod.SERIES["quad"][1]
    pts = mod.points(data, gelu, "gd")
    assert [p[0] for p in pts] == [1, 2] and 2.5 < pts[1][1] < 3.5 and pts[1][2] > 0 and pts[1][3]
    assert pts[0] == (1, *mod.REFERENCE[("gelu_z2m1_m1", "gd")], True)  # m = 1 from the grid runs
    assert mod.points(data, quad, "gd") == []
    # the r² series takes each width's stable-step case, and a search with failed draws is
    # marked (drawn hollow)
    data[f"{quad[4]}|1000|theory"] = {**counts, "failed_draws": {"3": 1}}
    assert [(p[0], p[3]) for p in mod.points(data, quad, "theory")] == [(1, True), (4, False)]


def test_cli_transition_sim_file_is_checked_before_any_work(tmp_path, capsys) -> None:  # noqa: ANN001
    """A bad ``--sim`` file is refused up front (exit 2, one line), e.g. ``deltas`` as a string,
    which used to be read character by character and fitted."""
    from dmftsolve.cli import main

    bad = tmp_path / "sim.json"
    bad.write_text(json.dumps({"deltas": "ab", "successes": [1, 2], "trials": [3, 3]}))
    assert main(["transition", "--d", "100", "--sim", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "deltas must be a JSON array" in err[0]


@pytest.mark.parametrize(("argv", "words"), [
    (["--paths-per-sample", "1e-9", "--delta", "5,6"], "gives 0 kernel paths"),
    (["--delta", "1e-9,2e-9"], "at least 2 samples"),
    (["--draws", "100000", "--delta", "5,6,7,8,9,10,11,12,13,14", "--paths", "20000"], "would take about"),
    (["--max-draws", "100000", "--paths", "400000"], "would take about"),
])
def test_cli_transition_refuses_up_front(argv: list[str], words: str, capsys) -> None:  # noqa: ANN001
    """Inputs that used to be clamped silently, fail with another option's name, or start a
    days-long run are refused before any work, one line, exit 2."""
    from dmftsolve.cli import main

    assert main(["transition", "--d", "100", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_width_transition_horizon_counts(load_validation) -> None:  # noqa: ANN001
    """The "by horizon" table recounts a search's first passages: at a horizon past every passage
    it is the search's own counts; before the first passage every count is 0 (no fit)."""
    mod = load_validation("width_transition")
    v = {"deltas": [3.0, 4.0, 5.0], "successes": [1, 3, 4], "trials": [4, 4, 4],
         "escape_steps": {"3": [-1, -1, 120, -1], "4": [10, -1, 200, 390], "5": [5, 50, 60, 300]}}
    full = mod.at_horizon(v, 400)
    assert full["successes"] == [1, 3, 4]
    assert mod.at_horizon(v, 100)["successes"] == [0, 1, 3]
    assert mod.at_horizon(v, 200)["successes"] == [1, 2, 3]  # a passage at step 200 counts
    assert np.isnan(mod.at_horizon(v, 4)["delta_50"])  # nothing passed by step 4


def test_width_transition_report_marks_failed_draws_and_diverged_trials(load_validation) -> None:  # noqa: ANN001
    """A theory search with failed DMFT draws carries † and their number; GD trials that
    diverged carry ‡ and theirs; clean searches carry neither."""
    mod = load_validation("width_transition")
    base = {"deltas": [3.0, 4.0, 5.0], "successes": [1, 3, 4], "trials": [4, 4, 4], "seconds": 1.0,
            "escape_steps": {"3": [-1, -1, 20, -1], "4": [10, -1, 20, 39], "5": [5, 10, 6, 30]},
            "settings": {}}
    case = next(iter(mod.CASES))
    data = {f"{case}|1000|gd": {**base, "diverged": {"3": 2, "4": 1, "5": 0}},
            f"{case}|1000|theory": {**base, "status": "failed", "failed_draws": {"3": 3, "4": 0, "5": 0}},
            f"{case}|2000|gd": {**base, "diverged": {"3": 0}},
            f"{case}|2000|theory": {**base, "status": "success"}}
    rows = {line.split(" | ")[6]: line for line in mod.report(data).splitlines()
            if line.startswith(f"| {case} |")}
    assert "(12) ‡3" in rows["1000"] and "(12) †3" in rows["1000"] and "n/a (†)" in rows["1000"]
    assert "‡" not in rows["2000"] and "†" not in rows["2000"]


def test_stored_searches_are_skipped_unless_redo(tmp_path, load_validation, monkeypatch, capsys) -> None:  # noqa: ANN001
    """A stored (case, d, side) is not run again, and says so; ``--redo`` runs and replaces it."""
    mod = load_validation("width_transition")
    stored: dict = {"gelu_z2m1_m2|1000|gd": {"delta_50": 3.3}}
    ran: list[str] = []
    monkeypatch.setattr(mod, "_load", lambda: dict(stored))
    monkeypatch.setattr(mod, "_store", lambda key, v: stored.__setitem__(key, v))
    monkeypatch.setattr(mod, "OUT", tmp_path)
    monkeypatch.setattr(mod, "report", lambda data: "report\n")

    def fake_gd(case, d, **kw):  # noqa: ANN001, ANN003, ANN202
        ran.append(f"{case}|{d}")
        return {"delta_50": 3.4, "err": 0.1, "seconds": 0.0}

    monkeypatch.setattr(mod, "gd_search", fake_gd)
    mod.main(["--side", "gd", "--only", "gelu_z2m1_m2", "--ds", "1000"])
    assert ran == [] and "stored, skipped (--redo runs it again)" in capsys.readouterr().out
    mod.main(["--side", "gd", "--only", "gelu_z2m1_m2", "--ds", "1000", "--redo"])
    assert ran == ["gelu_z2m1_m2|1000"] and stored["gelu_z2m1_m2|1000|gd"]["delta_50"] == 3.4


def test_seed2_defaults_cases_run_the_defaults_with_seed_two(load_validation, monkeypatch) -> None:  # noqa: ANN001
    """``<case>_defaults_seed2`` runs the command's settings with seed 2 whatever ``--seed`` says,
    ``<case>_defaults`` with ``--seed``; both compare with the width case's GD."""
    mod = load_validation("width_transition")
    seen: list[tuple[int, float, float]] = []

    def fake_transition(p, d, deltas, *, settings, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append((settings.seed, settings.tol, settings.start))
        return SimpleNamespace(delta_50=3.0, delta_50_err=0.1, width=0.5, message="", deltas=[],
                               successes=[], draws=[], points=[], status=SimpleNamespace(value="success"))

    monkeypatch.setattr(mod, "transition", fake_transition)
    assert set(mod.WIDTH_CASES) <= set(mod.DEFAULT_CASES) and len(mod.WIDTH_CASES) == 6
    for of in mod.WIDTH_CASES:
        mod.theory_search(f"{of}_defaults_seed2", 1000, tol=0.5, max_draws=10, seed=1)
        mod.theory_search(f"{of}_defaults", 1000, tol=0.5, max_draws=10, seed=1)
        assert mod._key(f"{of}_defaults_seed2", 1000, "gd") == f"{of}|1000|gd"
    starts = [mod.CASES[of]["start"] for of in mod.WIDTH_CASES]
    assert seen == [x for s in starts for x in ((2, 0.15, s), (1, 0.15, s))]
