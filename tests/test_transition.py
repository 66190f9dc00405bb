"""Tests of the finite-d hard-overlap law and the predicted GD transition (issue 9)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmftsolve import Problem, Status
from dmftsolve.finite_d import (
    TransitionSettings,
    kernel_paths,
    probit_fit,
    success_probability,
    transition,
)
from dmftsolve.finite_d.hard_overlap import (
    HardOverlapSettings,
    RestrictedPaths,
    gamma_star,
    hard_overlap_law,
    linear_response,
    noise_covariance,
    restricted_paths,
)

CENTRED = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=20)


def _synthetic_paths(seed: int, N: int, T: int) -> RestrictedPaths:
    rng = np.random.default_rng(seed)
    R = np.tril(rng.normal(size=(T + 1, T + 1)) * 0.3)
    np.fill_diagonal(R, 1.0)
    V = rng.normal(size=(T + 1, N))
    return RestrictedPaths(z=rng.normal(size=N), y=rng.normal(size=N), V=V, g=rng.normal(size=(T + 1, N)),
                           D=rng.normal(size=(T + 1, N)), R=R, Q=np.ones(T + 1), eta=0.5, delta=4.0,
                           problem=CENTRED)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), N=st.integers(2, 40), T=st.integers(1, 8))
def test_noise_covariance_is_psd_and_gamma_star_causal(seed: int, N: int, T: int) -> None:
    paths = _synthetic_paths(seed, N, T)
    C = noise_covariance(paths)
    assert np.allclose(C, C.T)
    assert np.linalg.eigvalsh(C).min() >= -1e-10 * max(1.0, np.abs(C).max())
    G = gamma_star(paths)
    assert np.all(np.triu(G, 1) == 0.0)  # Γ*(t, s) = 0 for s > t
    # Γ*(t, t) = E[z² D^t] (J(t, t) = 1)
    assert np.allclose(np.diag(G), (paths.z**2 * paths.D).mean(axis=1))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 12))
def test_linear_response_is_causal_and_variance_nonnegative(seed: int, T: int) -> None:
    rng = np.random.default_rng(seed)
    G = np.tril(rng.normal(size=(T + 1, T + 1)))
    H = linear_response(G, 0.3)
    for t in range(T + 1):
        assert np.all(H[t, 1 + t:] == 0.0)  # m_t does not see ν*_s for s >= t
    B = rng.normal(size=(T + 1, T + 1))
    C = B @ B.T
    var_noise = np.einsum("ts,su,tu->t", H[:, 1:], C[:-1, :-1], H[:, 1:])
    assert np.all(var_noise >= -1e-9 * max(1.0, np.abs(var_noise).max()))


def test_linear_response_closed_form() -> None:
    """Γ* diagonal and constant: m_{t+1} = (1 − ηγ) m_t − η ν_t."""
    T, eta, gam = 10, 0.5, -0.8
    H = linear_response(gam * np.eye(T + 1), eta)
    t = np.arange(T + 1)
    assert np.allclose(H[:, 0], (1 - eta * gam) ** t)
    # response at t to ν*_s: −η (1 − ηγ)^{t−s−1}
    assert math.isclose(H[7, 1 + 3], -eta * (1 - eta * gam) ** 3)


def test_hard_overlap_law_matches_gd_variance_at_early_times() -> None:
    """GeLU, y = z² − 1, η = 0.5, δ = 6: GD at d = 1000 (150 trials, random start and the same
    data with M_0 = 0; ``validation/results/transition_gd_var.json``) gives Var m_5 = 11.1 ± 1.3,
    noise part 6.7 ± 0.8, Var m_10 = 32.3 ± 3.8. Tolerance: 3 combined standard errors + 10 %
    (the O(1/√d) terms)."""
    law = hard_overlap_law(CENTRED, 6.0, settings=HardOverlapSettings(steps=10, n_paths=4000, replicates=3))
    for t, gd, gd_err, th, th_err in ((5, 11.1, 1.3, law.var[5], law.var_err[5]),
                                      (5, 6.7, 0.8, law.var_noise[5], law.var_noise_err[5]),
                                      (10, 32.3, 3.8, law.var[10], law.var_err[10])):
        assert abs(th - gd) <= 3 * math.hypot(gd_err, th_err) + 0.1 * gd, (t, th, gd)
    # the initial-condition part alone is far below GD: the force ν* is needed
    assert 1.0 * law.A[10] ** 2 < 0.6 * 32.3


def test_restricted_paths_reconstruct_the_memory_term() -> None:
    """V^t = Ξ^t − (η/δ) Σ R(t, s+1) g^s with Ξ Gaussian of variance Q(t, t)."""
    paths = restricted_paths(CENTRED, 6.0, steps=4, n_paths=4000, seed=3)
    c = paths.eta / paths.delta
    for t in range(1, 5):
        xi = paths.V[t] + c * (paths.R[t, 1:t + 1] @ paths.g[:t])
        assert abs(xi.var() / paths.Q[t] - 1.0) < 0.1
        assert abs(np.corrcoef(xi, paths.z)[0, 1]) < 0.06  # the restricted fields ignore the sign of z


def test_inputs_are_validated() -> None:
    with pytest.raises(ValueError, match="delta"):
        hard_overlap_law(CENTRED, -1.0)
    with pytest.raises(ValueError, match="even in z"):
        hard_overlap_law(Problem.build(target="z**3", activation="gelu"), 4.0)
    with pytest.raises(ValueError, match="needs the input dimension d"):
        hard_overlap_law(CENTRED, 4.0, settings=HardOverlapSettings(estimator="finite_d"))
    with pytest.raises(ValueError, match="draws"):
        TransitionSettings(draws=1)
    with pytest.raises(ValueError, match="success_cosine"):
        TransitionSettings(success_cosine=1.5)
    with pytest.raises(ValueError, match="construction must be one of .* got 'noise'"):
        TransitionSettings(construction="noise")
    for bad in (0, -1.0, True, "2n"):
        with pytest.raises(ValueError, match="paths_per_sample must be a number in"):
            TransitionSettings(paths_per_sample=bad)
    with pytest.raises(ValueError, match="force_weights must be 'poisson' or 'paired', got 'flat'"):
        TransitionSettings(force_weights="flat")
    with pytest.raises(ValueError, match="d must be"):
        success_probability(CENTRED, 6.0, 1)
    with pytest.raises(ValueError, match="deltas"):
        transition(CENTRED, 500, [6.0])


def test_probit_fit_recovers_a_known_curve() -> None:
    rng = np.random.default_rng(0)
    x = np.linspace(4, 9, 11)
    n = np.full(x.size, 400)
    k = rng.binomial(n, 0.5 * (1 + np.vectorize(math.erf)((x - 6.5) / (0.8 * math.sqrt(2)))))
    mu, se, w = probit_fit(x, k, n)
    assert abs(mu - 6.5) < 4 * se and 0.01 < se < 0.1
    assert abs(w - 0.8) < 0.15
    assert all(math.isnan(v) for v in probit_fit(x, np.zeros(x.size), n))


def test_success_probability_extremes() -> None:
    """Far above the transition every draw escapes, far below none does (d = 200, 150 steps)."""
    p = CENTRED.replace(steps=150)
    s = TransitionSettings(draws=4, seed=2)
    hi = success_probability(p, 20.0, 200, settings=s)
    lo = success_probability(p, 2.0, 200, settings=s)
    assert hi.p == 1.0 and np.all(hi.escape_step > 0)
    assert lo.p == 0.0 and np.all(lo.escape_step == -1)
    assert hi.p_err > 0  # never a zero error bar from a finite number of draws


def _fake_solve(cosine: list[float], ok: bool):  # noqa: ANN202
    """A stand-in for ``solve_dmft`` returning a fixed cosine path (NaN after a failure)."""
    from types import SimpleNamespace

    c = np.asarray(cosine, dtype=float)
    M = np.where(np.isfinite(c), 0.1 * c, np.nan)[:, None, None]
    q = np.where(np.isfinite(c), 1.0, np.nan)[:, None, None]

    def solve(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        return SimpleNamespace(ok=ok, message="" if ok else "non-finite kernels at step 3",
                               cosine=c, M=M, q_diag=q)
    return solve


@pytest.mark.parametrize(("cosine", "ok", "expected", "last"), [
    ([0.1, 0.3, 0.6, np.nan, np.nan], False, 2, 0.6),  # escaped at 2, then the solve failed: counts
    ([0.1, 0.2, 0.3, np.nan, np.nan], False, -1, np.nan),  # failed before escaping: a failure
    ([0.1, 0.2, 0.3, 0.6, 0.7], True, 3, 0.7),
])
def test_a_draw_that_fails_after_its_escape_counts(monkeypatch: pytest.MonkeyPatch, cosine: list[float],
                                                   ok: bool, expected: int, last: float) -> None:
    import dmftsolve.dynamics.dmft as dmft_module
    from dmftsolve.finite_d import run_draw

    monkeypatch.setattr(dmft_module, "solve_dmft", _fake_solve(cosine, ok))
    final, esc, diverged, msg, _, _, _ = run_draw(CENTRED, 6.0, 500, 0, 0.3, TransitionSettings(draws=2), 4)
    assert esc == expected
    assert bool(msg) == (expected == -1 and not ok)  # a failure is reported only if no escape came first
    assert diverged == (not ok and expected >= 0)
    np.testing.assert_equal(final, last)


def test_a_failed_draw_is_solved_again_with_more_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """A draw whose solve fails before it passes is solved once more from the same start and seed
    with RETRY_PATHS_FACTOR times the kernel paths; its outcome is the second solve's, and a failure
    of both names the second path count."""
    import dmftsolve.dynamics.dmft as dmft_module
    from dmftsolve.finite_d import run_draw
    from dmftsolve.finite_d.draws import RETRY_PATHS_FACTOR

    calls: list[tuple[int, int]] = []
    failing = _fake_solve([0.1, 0.2, 0.3, np.nan, np.nan], False)
    passing = _fake_solve([0.1, 0.2, 0.6, 0.7, 0.8], True)

    def solve(p, delta, seed, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append((kw["n_paths"], seed))
        return (failing if len(calls) == 1 else passing)()

    monkeypatch.setattr(dmft_module, "solve_dmft", solve)
    s = TransitionSettings(draws=2, n_paths=3000)
    _, esc, _, msg, _, _, retried = run_draw(CENTRED, 6.0, 500, 0, 0.3, s, 4)
    assert (esc, msg, retried) == (2, "", True)
    assert calls[1] == (RETRY_PATHS_FACTOR * 3000, calls[0][1])  # same seed, 4× the paths
    monkeypatch.setattr(dmft_module, "solve_dmft", lambda *a, **k: failing())
    _, esc, _, msg, _, _, retried = run_draw(CENTRED, 6.0, 500, 0, 0.3, s, 4)
    assert esc == -1 and retried and msg.endswith(f"(also with {RETRY_PATHS_FACTOR * 3000} kernel paths)")
    monkeypatch.setattr(dmft_module, "solve_dmft", lambda *a, **k: passing())
    assert run_draw(CENTRED, 6.0, 500, 0, 0.3, s, 4)[6] is False  # no failure: solved once


def test_r2_draw_that_diverges_at_few_paths_is_recovered() -> None:
    """r² on z² − 1 (η = 0.1, T = 600) at δ = 3.65, d = 1000, seed 0: draw 4 (start 0.13) diverges at
    step 6 with the default N = 2n = 7360 paths (its Q(t,t) grows 10⁷-fold in three steps; with
    2·10⁴ paths the same start runs to T). Solved again with four times the paths, the point has no
    failed draw."""
    from dmftsolve.finite_d import resolve_settings
    from dmftsolve.finite_d.draws import solve_draw, stratified_starts

    p = Problem.build(target="z**2 - 1", activation="quad", eta=0.1, steps=600)
    s = resolve_settings(TransitionSettings(draws=8), p)
    first = solve_draw(p, 3.65, 1000, 4, stratified_starts(p, 3.65, 1000, s)[4], s, 600)
    if first.ok:  # float32 rounding differs between CPUs: here the draw does not diverge
        pytest.skip("draw 4 does not diverge at the default paths on this CPU")
    r = success_probability(p, 3.65, 1000, settings=TransitionSettings(draws=8), throw=False)
    assert r.ok and r.diagnostics["failures"] == [] and r.diagnostics["retried_draws"] >= 1


@pytest.mark.slow
def test_transition_matches_gd_centred_label_d1000() -> None:
    """GeLU, y = z² − 1, d = 1000, escapes by step 400: GD's probit δ_50 is 6.89 ± 0.07
    (``validation/results/gd_transition_counts.json``: 40 float32 trials at each of
    δ = 5.5 … 8). The forced construction (16 draws per δ) must land within the issue's
    max(0.3, 5 %) plus two combined standard errors (measured: 7.01 ± 0.13)."""
    p = CENTRED.replace(steps=400)
    c = transition(p, 1000, [6.0, 6.5, 7.0, 7.5, 8.0],
                   settings=TransitionSettings(draws=16, seed=1, workers=2))
    assert abs(c.delta_50 - 6.89) <= max(0.3, 0.05 * 6.89) + 2 * math.hypot(c.delta_50_err, 0.07)


@pytest.mark.parametrize("construction", ["forced", "initial", "finite_n"])
def test_cli_transition_json_records_the_construction(construction: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``dmftsolve transition --construction C --json``: every construction runs, is recorded in
    the settings and diagnostics, and gives P = 0 far below and P = 1 far above the transition
    (d = 200, δ = 2 and 20, 120 steps)."""
    import json

    from dmftsolve.cli import main

    code = main(["transition", "--d", "200", "--delta", "2,20", "--draws", "2", "--steps", "120",
                 "--paths", "2000", "--construction", construction, "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)["result"]
    assert code == 0
    assert out["settings"]["construction"] == construction
    assert [p["successes"] for p in out["points"]] == [0, 2]
    # forced at δ = 20: n = 4000 > N = 2000 paths, excess 2n/N − 1 = 3 (paired): warned, in the JSON too
    assert len(out["warnings"]) == (construction == "forced")
    assert ("warning: the kernel paths' own noise" in captured.err) == (construction == "forced")
    assert out["points"][0]["diagnostics"]["construction"].split()[0] in {"finite-n", "initial", "GD's"}


def test_workers_do_not_change_the_result() -> None:
    """Each draw has its own seed: two processes give the same counts and escape steps as one."""
    p = CENTRED.replace(steps=60)
    kw = {"draws": 3, "seed": 5, "n_paths": 2000}
    a = transition(p, 300, [4.0, 12.0], settings=TransitionSettings(**kw), throw=False)
    b = transition(p, 300, [4.0, 12.0], settings=TransitionSettings(workers=2, **kw), throw=False)
    for pa, pb in zip(a.points, b.points, strict=True):
        np.testing.assert_array_equal(pa.escape_step, pb.escape_step)
        np.testing.assert_array_equal(pa.final_cosine, pb.final_cosine)
    assert b.settings["workers"] == 2
    # the adaptive search runs its two batches at once on the pool: the same points
    kw = {"draws": 2, "seed": 5, "n_paths": 2000, "tol": 0.1, "max_draws": 16, "start": 6.0}
    a = transition(p, 300, None, settings=TransitionSettings(**kw), throw=False)
    b = transition(p, 300, None, settings=TransitionSettings(workers=2, **kw), throw=False)
    assert a.deltas.size >= 6  # past the bracketing: batches placed in pairs
    assert a.deltas.tolist() == b.deltas.tolist() and a.successes.tolist() == b.successes.tolist()
    for pa, pb in zip(a.points, b.points, strict=True):
        np.testing.assert_array_equal(pa.escape_step, pb.escape_step)


def test_curvature_excess_counts_the_paths_noise() -> None:
    """``curvature_excess``: the paths' share ``2n/N`` of the curvature noise with Poisson weights,
    ``max(2n/N − 1, 0)`` with paired ones (closed forms of ``DMFTSettings.force_weights``), N
    from ``n_paths`` or ``paths_per_sample``; NaN without a force."""
    from dmftsolve.finite_d import curvature_excess, kernel_paths

    assert curvature_excess(TransitionSettings(n_paths=20_000, force_weights="poisson"), 30_000) == \
        pytest.approx(3.0)
    assert curvature_excess(TransitionSettings(n_paths=20_000, force_weights="paired"), 30_000) == \
        pytest.approx(2.0)
    s2 = TransitionSettings(paths_per_sample=2, force_weights="paired")
    assert kernel_paths(s2, 30_000) == 60_000 and curvature_excess(s2, 30_000) == 0.0
    assert curvature_excess(TransitionSettings(paths_per_sample=2, force_weights="poisson"), 30_000) == \
        pytest.approx(1.0)
    assert TransitionSettings().force_weights == "paired"  # the default since the d = 500–4000 tests
    assert math.isnan(curvature_excess(TransitionSettings(construction="initial"), 30_000))


def test_curvature_warning_fires_when_the_paths_noise_exceeds_gds() -> None:
    """``curvature_warning``: None while the worst ``curvature_excess`` over the grid is at most
    ``CURVATURE_EXCESS_WARN`` = 1, else one line naming that δ, N, n and the remedy. Excesses
    from the closed forms of ``test_curvature_excess_counts_the_paths_noise``."""
    from dmftsolve.finite_d.diagnostics import CURVATURE_EXCESS_WARN, curvature_warning

    assert CURVATURE_EXCESS_WARN == 1.0
    paired = TransitionSettings(n_paths=20_000)
    # d = 4000, δ = 7.5: n = 30000, 2n/N − 1 = 2 (the worst of the grid)
    w = curvature_warning(paired, 4000, [6.0, 7.5, 7.0])
    assert w is not None and "is 2 x GD's at delta = 7.5" in w and "N = 20000 paths, n = 30000" in w
    assert "paths_per_sample=2" in w and "or 4 if memory allows" in w
    assert curvature_warning(paired, 2000, [6.0, 9.0]) is None  # 2·18000/20000 − 1 = 0.8
    assert curvature_warning(paired, 2000, [10.0]) is None  # exactly 1: not above
    assert curvature_warning(TransitionSettings(paths_per_sample=2), 4000, [7.5]) is None
    poisson = TransitionSettings(n_paths=20_000, force_weights="poisson")
    assert "1.1 x GD's" in curvature_warning(poisson, 1000, [11.0])  # 2n/N = 1.1
    assert curvature_warning(TransitionSettings(construction="initial"), 4000, [7.5]) is None


def test_cli_transition_paired_weights(capsys: pytest.CaptureFixture[str]) -> None:
    """``--force-weights paired --paths-per-sample 2``: recorded in the settings, the excess
    reported as 0 per point, P = 0 far below and 1 far above the transition (d = 200)."""
    import json

    from dmftsolve.cli import main

    code = main(["transition", "--d", "200", "--delta", "2,20", "--draws", "2", "--steps", "120",
                 "--paths-per-sample", "2", "--force-weights", "paired", "--json"])
    out = json.loads(capsys.readouterr().out)["result"]
    assert code == 0
    assert out["settings"]["force_weights"] == "paired" and out["settings"]["paths_per_sample"] == 2
    assert [p["successes"] for p in out["points"]] == [0, 2]
    assert [p["diagnostics"]["curvature_excess"] for p in out["points"]] == [0.0, 0.0]
    assert [p["diagnostics"]["kernel_paths"] for p in out["points"]] == [800, 8000]
    assert out["warnings"] == []
    assert main(["transition", "--force-weights", "flat"]) == 2
    assert "invalid choice: 'flat'" in capsys.readouterr().err


def test_success_probability_carries_the_curvature_warning() -> None:
    """A single point says what ``curvature_warning`` says for its own δ: Poisson weights with
    N = 2000 paths at n = 4000 samples give an excess 2n/N = 4 (closed form), above the limit;
    N = 2n paired paths give none (d = 200, 2 draws, 20 steps)."""
    from dmftsolve.finite_d import curvature_warning

    p = CENTRED.replace(steps=20)
    poisson = TransitionSettings(draws=2, seed=3, n_paths=2000, force_weights="poisson")
    r = success_probability(p, 20.0, 200, settings=poisson)
    assert r.diagnostics["curvature_excess"] == pytest.approx(4.0)
    assert list(r.warnings) == [curvature_warning(poisson, 200, [20.0])]
    assert "4 x GD's at delta = 20" in r.warnings[0]
    paired = TransitionSettings(draws=2, seed=3, paths_per_sample=2)
    assert list(success_probability(p, 20.0, 200, settings=paired).warnings) == []


def test_a_failed_point_is_named_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A curve with failed draws says at which δ and why (it used to say only how many points)."""
    import dmftsolve.dynamics.dmft as dmft_module

    calls = {"n": 0}

    def solve(problem, delta, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls["n"] += 1
        return _fake_solve([0.1, 0.2, np.nan, np.nan, np.nan] if delta < 5 else
                           [0.1, 0.3, 0.6, 0.7, 0.8], delta >= 5)(problem, delta, **kwargs)

    monkeypatch.setattr(dmft_module, "solve_dmft", solve)
    c = transition(CENTRED.replace(steps=4), 500, [3.0, 8.0], settings=TransitionSettings(draws=2),
                   throw=False)
    assert calls["n"] == 6  # two draws per δ, and each failing draw once more with more paths
    assert c.status is Status.FAILED
    assert c.diagnostics["retried_draws"] == 2
    assert c.message.startswith("1 of 2 points had failed draws: δ = 3: 2 DMFT draws failed")
    assert "non-finite kernels at step 3" in c.message and "δ = 8" not in c.message


def test_kernel_paths_default_by_width() -> None:
    """With neither n_paths nor paths_per_sample given, a centred label gets 2n kernel paths
    (n = δd GD samples), at least 5000, at every width; a label with a non-zero mean (``z**2``:
    mean 1; findings §10.4, §10.6) a fixed 8e4 at widths 1 and 2. null_rtol=None resolves to 3e-3
    except on an uncentred label at width 1 (1e-4); explicit values are kept (a given
    paths_per_sample gets no least number); the draws record them, and the cut-off reaches the
    draw's DMFT solve."""
    from dmftsolve.finite_d import default_kernel_paths, default_paths_per_sample, resolve_settings

    assert [default_kernel_paths(m) for m in (1, 2, 3, 4)] == [5000, 5000, 5000, 5000]
    assert [default_paths_per_sample(m) for m in (1, 2, 3, 4)] == [2.0, 2.0, 2.0, 2.0]
    assert [default_kernel_paths(m, uncentred=True) for m in (1, 2, 3)] == [80_000, 80_000, 20_000]
    assert [default_paths_per_sample(m, uncentred=True) for m in (1, 2, 3)] == [None, None, None]
    expected = {"z**2": (80_000, None, 1e-4), "abs(z)": (80_000, None, 1e-4),
                "z**2 - 1": (5000, 2.0, 3e-3), "z**2 - 1 + 0.5*eps": (5000, 2.0, 3e-3)}
    for target, want in expected.items():
        p = Problem.build(target=target, activation="gelu", eta=0.5, steps=2)
        s = resolve_settings(TransitionSettings(), p)
        assert (s.n_paths, s.paths_per_sample, s.null_rtol) == want, target
    p2 = Problem.build(target="z**2 - 1", activation="gelu", m=2, eta=0.5, steps=2)
    s2 = resolve_settings(TransitionSettings(), p2)
    assert (s2.n_paths, s2.paths_per_sample) == (5000, 2.0)
    assert [kernel_paths(s2, n) for n in (1000, 2500, 3000, 7001)] == [5000, 5000, 6000, 14002]
    assert (resolve_settings(TransitionSettings(n_paths=4000), p2).paths_per_sample) is None
    given = resolve_settings(TransitionSettings(paths_per_sample=1.0), p2)
    assert given.n_paths is None and kernel_paths(given, 1000) == 1000
    assert kernel_paths(TransitionSettings(n_paths=3000, paths_per_sample=1.0), 1000) == 3000
    assert s2.null_rtol == 3e-3
    assert resolve_settings(TransitionSettings(null_rtol=0.0), p2).null_rtol == 0.0
    r = success_probability(p2, 5.0, 200, settings=TransitionSettings(draws=2))
    assert r.settings["n_paths"] == 5000 and r.settings["paths_per_sample"] == 2.0
    assert r.diagnostics["kernel_paths"] == 5000  # 2n = 2000 at δ = 5, d = 200: the least number
    assert r.settings["null_rtol"] == 3e-3
    p2u = Problem.build(target="z**2", activation="gelu", m=2, eta=0.5, steps=2)
    assert resolve_settings(TransitionSettings(), p2u).n_paths == 80_000
    p3 = Problem.build(target="z**2 - 1", activation="gelu", m=3, eta=0.5, steps=2)
    assert resolve_settings(TransitionSettings(), p3).null_rtol == 3e-3
    p1 = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=2)
    r1 = success_probability(p1, 5.0, 200, settings=TransitionSettings(draws=2))
    used = (r1.settings["n_paths"], r1.settings["paths_per_sample"], r1.settings["null_rtol"])
    assert used == (5000, 2.0, 3e-3)
    assert resolve_settings(TransitionSettings(n_paths=4000), p1).null_rtol == 3e-3  # cut-off still filled
    from dmftsolve.finite_d.draws import solve_draw

    s2 = resolve_settings(TransitionSettings(draws=2, null_rtol=0.02), p2)
    assert solve_draw(p2, 5.0, 200, 0, 0.3, s2, 2).settings["null_rtol"] == 0.02
    for bad in (1.0, -0.1, "0.1", True, float("nan")):
        with pytest.raises(ValueError, match="null_rtol must be a number in"):
            TransitionSettings(null_rtol=bad)
    with pytest.raises(ValueError, match="n_paths is None"):
        kernel_paths(TransitionSettings(), 100)
    with pytest.raises(ValueError, match="problem must be a Problem"):  # checked before resolving
        transition("z**2", 100)


def test_draws_regress_on_the_innovations_by_default() -> None:
    """A draw's responses are the least-squares coefficients of g on the innovations
    (``Stein(regression=True)``) unless ``stein_regression=False``; the
    setting reaches the draw's DMFT solve, whose diagnostics say at which steps it regressed."""
    from dmftsolve.finite_d import solve_draw

    assert TransitionSettings().stein_regression is True
    with pytest.raises(ValueError, match="stein_regression must be True or False, got 'yes'"):
        TransitionSettings(stein_regression="yes")
    for reg in (True, False):
        s = TransitionSettings(n_paths=2000, stein_regression=reg)
        r = solve_draw(CENTRED, 6.0, 500, 0, 0.5, s, 30)
        assert r.ok
        assert r.settings["stein_regression"] is reg
        assert bool(np.asarray(r.diagnostics["stein_regressed"])[30]) is reg


def test_draws_keep_the_compact_history_by_default() -> None:
    """A draw keeps each path's memory terms at the non-null innovations
    (``DMFTSettings.history="compact"``) unless ``history="full"``; the setting reaches the
    draw's DMFT solve and its record. In float64 the two give the same overlaps (reference:
    the full-history solve; measured agreement 1e-9)."""
    from dmftsolve.finite_d import solve_draw

    assert TransitionSettings().history == "compact"
    with pytest.raises(ValueError, match="history must be 'compact' or 'full', got 'short'"):
        TransitionSettings(history="short")
    runs = {}
    for h in ("compact", "full"):
        s = TransitionSettings(n_paths=2000, history=h, path_dtype="float64")
        runs[h] = solve_draw(CENTRED, 6.0, 500, 0, 0.5, s, 40)
        assert runs[h].ok
    assert runs["compact"].settings["history"] == "compact" and runs["full"].settings["history"] == "full"
    np.testing.assert_allclose(runs["compact"].M, runs["full"].M, rtol=0, atol=1e-8)
    np.testing.assert_allclose(runs["compact"].cosine, runs["full"].cosine, rtol=0, atol=1e-8)


def test_label_mean_warning_fires_on_uncentred_labels_at_the_default_paths() -> None:
    """``label_mean_warning``: the label's mean against ``LABEL_MEAN_WARN`` times its standard
    deviation. References (closed forms): ``E[z²] = 1``, sd √2; ``E|z| = √(2/π) ≈ 0.80``, sd
    ``√(1 − 2/π) ≈ 0.60``; ``z² − 1``, ``z1*z2`` and ``z1 + z2² − 1`` have mean 0, and so has
    ``z² − 1 + 0.5 ε``. It names the paths and asks for 8e4 at width 1 (the default there, so it
    is silent at the default) and at width 2 (its uncentred default too), and is silent with that many,
    with ``paths_per_sample``, and for the other constructions."""
    from dmftsolve.finite_d import label_mean_warning

    def warn(target: str, m: int = 1, **kw: object) -> str | None:
        return label_mean_warning(Problem.build(target=target, activation="gelu", m=m),
                                  TransitionSettings(**kw))

    assert warn("z**2") is None  # width 1: the default is already the 8e4 it would ask for
    w = warn("z**2", n_paths=20_000)
    assert w is not None and "mean is 1 (sd 1.4)" in w and "(--paths 80000)" in w and "about 4x" in w
    assert warn("abs(z)", m=2) is None
    w2 = warn("abs(z)", m=2, n_paths=20_000)
    assert w2 is not None and "mean is 0.8 (sd 0.6" in w2 and "(--paths 80000)" in w2
    assert warn("z**2 + 0.5*eps", n_paths=20_000) is not None
    for t, m in (("z**2 - 1", 1), ("z1*z2", 2), ("z1 + z2**2 - 1", 2), ("z**2 - 1 + 0.5*eps", 1)):
        assert warn(t, m=m) is None and warn(t, m=m, n_paths=4000) is None, t
    assert warn("z**2", n_paths=80_000) is None
    assert warn("z**2", n_paths=79_999) is not None
    assert warn("abs(z)", m=2, n_paths=80_000) is None
    assert warn("z**2", paths_per_sample=2) is None
    assert warn("z**2", construction="initial") is None


def test_a_draw_follows_the_ridge_and_the_bias() -> None:
    """A ridge enters a draw's overlap update as GD's does: at step 0 the fields do not depend on
    λ, so ``M_1(λ) − M_1(0) = −ηλ M_0`` exactly (same seed, same force). A trained bias is evolved
    by the draw (``b_1 = −η E[g^0]``, non-zero for ``z² − 1`` under GeLU) and leaves the draw's
    ``M_1`` unchanged at step 0 (``b_0 = 0``)."""
    from dmftsolve.finite_d import solve_draw

    s = TransitionSettings(n_paths=2000, path_dtype="float64")
    runs = {}
    for name, kw in (("plain", {}), ("ridge", {"lam": 0.1}), ("bias", {"bias": True})):
        p = CENTRED.replace(steps=2, **kw)
        runs[name] = solve_draw(p, 6.0, 500, 0, 2.0, s, 2)
        assert runs[name].ok
    M0 = 2.0 / math.sqrt(500)
    eta = CENTRED.training.eta
    assert runs["ridge"].M[1, 0, 0] - runs["plain"].M[1, 0, 0] == pytest.approx(-eta * 0.1 * M0, rel=1e-9)
    assert runs["bias"].M[1, 0, 0] == pytest.approx(runs["plain"].M[1, 0, 0], rel=1e-12)
    assert abs(runs["bias"].b[1, 0]) > 1e-3 and np.all(runs["plain"].b == 0)
