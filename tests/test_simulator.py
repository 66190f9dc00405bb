"""The finite-d GD simulator: reproducibility, closed forms, the blocked step, the Hessian."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_problems import reference_problem

from dmftsolve import Problem, SolverError, Status
from dmftsolve.seeds import as_seed_sequence, from_record
from dmftsolve.simulation.kernels import gd_step_batch
from dmftsolve.simulation.simulator import (
    DENSE_HESSIAN_LIMIT,
    blas_threads,
    blocked_pass,
    dense_hessian_matrix,
    gd_step,
    hessian_operator,
    make_grad_rows,
    simulate,
    simulate_shared,
)
from dmftsolve.simulation.trials import replay_trial

QUAD = reference_problem("quad_phase", eta=0.05, steps=10)


# ----------------------------------------------------------------------------- reproducibility
def test_same_seed_same_numbers_and_trials_independent_of_count():
    a = simulate(QUAD, d=40, delta=3.0, seed=7, trials=3)
    b = simulate(QUAD, d=40, delta=3.0, seed=7, trials=3)
    c = simulate(QUAD, d=40, delta=3.0, seed=7, trials=2)
    other = simulate(QUAD, d=40, delta=3.0, seed=8, trials=3)
    for name in ("overlaps", "gram", "train_loss", "test_loss", "grad_norm", "cosine"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        # trial j uses the j-th child seed whatever the number of trials
        np.testing.assert_array_equal(getattr(a, name)[:2], getattr(c, name))
    assert not np.array_equal(a.train_loss, other.train_loss)
    # the trials differ from each other
    assert not np.array_equal(a.train_loss[0], a.train_loss[1])
    assert a.settings["seeds"][1]["spawn_key"] == [1]


def test_seed_sequence_and_generator_seeds_are_reproducible():
    ss = np.random.SeedSequence(11)
    a = simulate(QUAD, d=30, delta=2.0, seed=ss, trials=2)
    b = simulate(QUAD, d=30, delta=2.0, seed=ss, trials=2)  # ss is not mutated
    np.testing.assert_array_equal(a.cosine, b.cosine)
    c = simulate(QUAD, d=30, delta=2.0, seed=np.random.default_rng(3))
    e = simulate(QUAD, d=30, delta=2.0, seed=np.random.default_rng(3))
    np.testing.assert_array_equal(c.train_loss, e.train_loss)
    assert as_seed_sequence(None).entropy != as_seed_sequence(None).entropy


# ----------------------------------------------------------------------------- closed forms
def _quad_loss_given(M: np.ndarray, G: np.ndarray) -> np.ndarray:
    """E[(z² − V²)²]/2 for (z, V) centred Gaussian, Var z = 1, Cov = M, Var V = G.

    Wick: E z⁴ = 3, E V⁴ = 3G², E z²V² = G + 2M².
    """
    return (3 + 3 * G**2 - 2 * (G + 2 * M**2)) / 2


def test_step0_loss_matches_closed_form():
    q0 = 0.5
    p = reference_problem("quad_phase", eta=0.05, steps=0, q0=q0)
    run = simulate(p, d=200, delta=5.0, seed=1, trials=8)
    M, G = run.overlaps[:, 0, 0, 0], run.gram[:, 0, 0, 0]
    cond = _quad_loss_given(M, G)
    # given W the per-sample losses are i.i.d. with mean cond; the test-loss
    # standard error estimates the per-sample spread / sqrt(n) (n_test = n here)
    se = run.test_loss_stderr[:, 0]
    assert np.all(np.abs(run.train_loss[:, 0] - cond) < 5 * se)
    assert np.all(np.abs(run.test_loss[:, 0] - cond) < 5 * se)
    # unconditionally E[(z² − ξ²)²]/2 = (3 + 3 q0² − 2 q0)/2 with ξ ~ N(0, q0)
    exact = (3 + 3 * q0**2 - 2 * q0) / 2
    assert abs(run.mean("train_loss")[0] - exact) < 5 * run.stderr("train_loss")[0]
    # the check has power: the value for q0 = 1 is rejected
    wrong = (3 + 3 * 1.0**2 - 2 * 1.0) / 2
    assert abs(run.mean("train_loss")[0] - wrong) > 5 * run.stderr("train_loss")[0]


def test_random_init_gram_and_overlap_scale():
    p = reference_problem("quad_phase", steps=0, q0=2.0, m=2)
    run = simulate(p, d=2000, delta=1.0, seed=2)
    G = run.gram[0, 0]
    # W⁰ i.i.d. N(0, q0/d): G → q0 I with fluctuations O(q0 sqrt(2/d)) ≈ 0.06
    np.testing.assert_allclose(G, 2.0 * np.eye(2), atol=0.3)
    assert np.all(np.abs(run.overlaps[0, 0]) < 6 * math.sqrt(2.0 / 2000))


def test_cosine_equals_overlap_over_norm_for_single_neuron():
    p = reference_problem("easy_hard", eta=0.2, steps=30)
    run = simulate(p, d=60, delta=4.0, seed=0, trials=2)
    M, G = run.overlaps[..., 0], run.gram[..., 0, 0]  # (trials, R, k), (trials, R)
    np.testing.assert_allclose(run.cosine_per_direction, np.abs(M) / np.sqrt(G)[..., None],
                               rtol=1e-10)
    np.testing.assert_allclose(run.cosine, np.linalg.norm(M, axis=-1) / np.sqrt(G), rtol=1e-10)
    assert np.all((run.cosine >= 0) & (run.cosine <= 1))


# ----------------------------------------------------------------------------- blocked step
def _naive_step(problem, X, y, W):
    """Reference: two full matrix-vector products with ``problem.grad`` (dense numpy)."""
    n = X.shape[0]
    X64 = np.asarray(X, dtype=np.float64)
    G = problem.grad(y, X64 @ W)
    grad = X64.T @ G / n + problem.training.lam * W
    hz = list(problem.training.hold_zero)
    grad[hz] = 0.0
    W_new = W - problem.training.eta * grad
    W_new[hz] = 0.0
    return W_new, grad


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 60), d=st.integers(3, 30), m=st.integers(1, 3),
    block=st.one_of(st.none(), st.integers(1, 70)),
    activation=st.sampled_from(["gelu", "quad", "tanh", "relu", "r**3 - r"]),
    loss=st.sampled_from(["square", "logistic"]), lam=st.sampled_from([0.0, 0.3]),
    hold=st.booleans(), seed=st.integers(0, 2**32 - 1),
)
def test_blocked_step_equals_naive_two_matvec_step(n, d, m, block, activation, loss, lam, hold,
                                                   seed):
    p = Problem.build(target="z1**2 + z2", activation=activation, m=m, loss=loss, eta=0.3,
                      lam=lam, hold_zero=(0,) if hold else ())
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2 + X[:, 1]
    W = rng.standard_normal((d, m)) / math.sqrt(d)
    V = np.empty((n, m))
    W_new, grad = gd_step(p, X, y, W, block_rows=block, V_out=V)
    W_ref, grad_ref = _naive_step(p, X, y, W)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(W_new, W_ref, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(V, X @ W, rtol=1e-12, atol=1e-13)
    if hold:
        assert np.all(W_new[0] == 0.0)


def test_blocked_step_float32_close_to_float64():
    p = reference_problem("gelu_phase", eta=0.2)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 200))
    y = X[:, 0] ** 2
    W = rng.standard_normal((200, 1)) / math.sqrt(200)
    _, g64 = gd_step(p, X, y, W, block_rows=256)
    _, g32 = gd_step(p, X.astype(np.float32), y, W, block_rows=256)
    assert g32.dtype == np.float64
    # float32 products: relative error ~ 1e-7 · sqrt(block) per entry
    assert np.linalg.norm(g32 - g64) < 1e-5 * np.linalg.norm(g64)


@settings(max_examples=30, deadline=None)
@given(activation=st.sampled_from(["gelu", "quad", "tanh", "relu", "linear", "erf", "r**3 - r"]),
       loss=st.sampled_from(["square", "logistic", "(y - f)**4/4"]), m=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_batched_gradient_rows_equal_problem_grad_per_trial(activation, loss, m, seed):
    """make_grad_rows(trials=3) puts trial j in columns j*m:(j+1)*m; each block equals Problem.grad."""
    p = Problem.build(activation=activation, loss=loss, m=m, a=list(np.linspace(0.5, 1.5, m)))
    rng = np.random.default_rng(seed)
    V, y = rng.standard_normal((17, 3 * m)) * 2, rng.standard_normal(17)
    G = make_grad_rows(p, y, trials=3)(4, 9, V[4:9].copy())
    for j in range(3):
        cols = slice(j * m, (j + 1) * m)
        np.testing.assert_allclose(G[:, cols], p.grad(y[4:9], V[4:9, cols]), rtol=1e-12, atol=1e-14)


def test_blocked_pass_rejects_bad_shapes():
    X = np.zeros((5, 4))
    with pytest.raises(ValueError, match="W must have shape"):
        blocked_pass(X, np.zeros((3, 1)), lambda s, e, v: v)
    with pytest.raises(ValueError, match="block_rows must be >= 1"):
        blocked_pass(X, np.zeros((4, 1)), lambda s, e, v: v, block_rows=0)


def test_blas_threads_context_is_harmless():
    X = np.arange(12.0).reshape(3, 4)
    with blas_threads(1):
        a = X @ X.T
    with blas_threads(None):
        b = X @ X.T
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- Hessian
def _reference_hessian(p, X, y, W):
    """Independent dense Hessian: (1/n) Σ_i (x_i x_iᵀ) ⊗ D_i + λ I, by einsum."""
    n, d = X.shape
    m = p.m
    D = p.hess(y, X @ W)
    H = np.einsum("ia,ib,ijl->ajbl", X, X, D) / n
    return H.reshape(d * m, d * m) + p.training.lam * np.eye(d * m)


@pytest.mark.parametrize("m", [1, 2])
def test_hessian_operator_and_dense_match_reference(m):
    p = reference_problem("gelu_phase", m=m, lam=0.1)
    rng = np.random.default_rng(4)
    X = rng.standard_normal((120, 15))
    y = X[:, 0] ** 2
    W = rng.standard_normal((15, m)) / math.sqrt(15)
    H_ref = _reference_hessian(p, X, y, W)
    op = hessian_operator(p, X, y, W, block_rows=7)
    E = rng.standard_normal((15 * m, 3))
    np.testing.assert_allclose(op.matmat(E), H_ref @ E, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(dense_hessian_matrix(p, X, y, W, block_rows=11), H_ref,
                               rtol=1e-11, atol=1e-12)


def test_lanczos_eigenpairs_match_dense_eigh():
    p = reference_problem("quad_phase", eta=0.05, steps=6)
    kw = {"d": 60, "delta": 3.0, "seed": 5, "trials": 2, "hessian_at": [0, 6], "n_eigs": 3}
    lz = simulate(p, **kw)
    de = simulate(p, **kw, dense_hessian=True, full_spectrum=True)
    assert lz.hessian["method"] == "lanczos" and de.hessian["method"] == "dense"
    np.testing.assert_allclose(lz.hessian["low"], de.hessian["low"], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(lz.hessian["high"], de.hessian["high"], rtol=1e-8, atol=1e-8)
    # the most extreme eigenvectors are non-degenerate: their overlaps agree too
    for key in ("low_overlap_hard", "low_overlap_target"):
        np.testing.assert_allclose(lz.hessian[key][..., 0], de.hessian[key][..., 0], atol=1e-6)
    # the full spectrum: independent eigvalsh of the reference matrix at step 0
    rng = np.random.default_rng()  # unused stream; the data come from the simulator's seed
    del rng
    spec = de.hessian["spectrum"]
    assert spec.shape == (2, 2, 60)
    np.testing.assert_allclose(spec[..., :3], de.hessian["low"], rtol=1e-12)
    # the ordering convention: both ends ascending
    assert np.all(np.diff(lz.hessian["low"], axis=-1) >= 0)
    assert np.all(np.diff(lz.hessian["high"], axis=-1) >= 0)


def test_dense_hessian_refused_above_limit():
    d = DENSE_HESSIAN_LIMIT + 1
    with pytest.raises(ValueError, match="dense_hessian/full_spectrum need d\\*m <="):
        simulate(QUAD, d=d, delta=1.0, hessian_at=[0], dense_hessian=True)
    X = np.zeros((2, d))
    with pytest.raises(ValueError, match="dense Hessian needs d\\*m <="):
        dense_hessian_matrix(QUAD, X, np.zeros(2), np.zeros((d, 1)))


# ----------------------------------------------------------------------------- hold_zero, warm
def test_hold_zero_keeps_overlaps_exactly_zero():
    p = reference_problem("easy_hard", eta=0.3, steps=40, hold_zero=(0,))
    run = simulate(p, d=50, delta=4.0, seed=3, trials=2, hessian_at=[10], n_eigs=2)
    assert np.all(run.overlaps[:, :, 0, :] == 0.0)
    assert np.all(run.cosine_per_direction[:, :, 0] == 0.0)
    # the free easy direction z2 is learned, so the test is not vacuous
    assert np.all(np.abs(run.overlaps[:, -1, 1, 0]) > 0.1)
    assert run.hessian["hard"] == [0]  # default hard subspace = hold_zero


def test_warm_start_gives_requested_overlaps_and_gram():
    M0 = [[0.3, -0.1], [0.0, 0.2]]
    Q0 = [[0.5, 0.1], [0.1, 0.4]]
    p = reference_problem("tanh_product", eta=0.1, steps=3, M0=M0, Q0=Q0)
    run = simulate(p, d=40, delta=2.0, seed=0, trials=3)
    M0a, Q0a = np.asarray(M0), np.asarray(Q0)
    np.testing.assert_allclose(run.overlaps[:, 0], np.broadcast_to(M0a, (3, 2, 2)), atol=1e-15)
    np.testing.assert_allclose(run.gram[:, 0], np.broadcast_to(M0a.T @ M0a + Q0a, (3, 2, 2)),
                               rtol=1e-12, atol=1e-14)
    # the orthogonal part is random: the trials differ after one step
    assert not np.allclose(run.gram[0, 1], run.gram[1, 1])


def test_warm_start_conflicting_with_hold_zero_is_refused():
    p = reference_problem("quad_phase", M0=[[0.5]], hold_zero=(0,))
    with pytest.raises(ValueError, match="hold_zero"):
        simulate(p, d=20, delta=2.0)


# ----------------------------------------------------------------------------- gram="full"
def test_full_gram_diagonal_matches_equal_time_gram():
    p = reference_problem("gelu_phase", m=2, eta=0.2, steps=12)
    diag = simulate(p, d=30, delta=3.0, seed=4, record_every=5)
    full = simulate(p, d=30, delta=3.0, seed=4, record_every=5, gram="full")
    np.testing.assert_array_equal(diag.steps, [0, 5, 10, 12])
    R = len(diag.steps)
    assert full.gram.shape == (1, R, R, 2, 2)
    idx = np.arange(R)
    np.testing.assert_allclose(full.gram[:, idx, idx], diag.gram, rtol=1e-12)
    np.testing.assert_allclose(full.gram, np.swapaxes(np.swapaxes(full.gram, 1, 2), 3, 4),
                               rtol=1e-12)


# ----------------------------------------------------------------------------- result object
def test_result_helpers_and_json():
    run = simulate(QUAD, d=30, delta=3.0, seed=0, trials=3, hessian_at=[2], n_eigs=2)
    assert run.ok and run.status is Status.SUCCESS
    np.testing.assert_allclose(run.mean("cosine"), run.cosine.mean(axis=0))
    np.testing.assert_allclose(run.stderr("cosine"), run.cosine.std(axis=0, ddof=1) / math.sqrt(3))
    np.testing.assert_allclose(run.mean("low"), run.hessian["low"].mean(axis=0))
    assert run.success(0.0).dtype == bool and run.success(0.0).shape == (3,)
    rate, se = run.success_rate(-1.0 + 1e-9)
    assert rate == 1.0 and se == 0.0
    with pytest.raises(ValueError, match="name"):
        run.mean("nonsense")
    data = json.loads(json.dumps(run.to_dict(), allow_nan=False))
    assert data["settings"]["d"] == 30 and data["settings"]["n"] == 90
    assert data["status"] == "success"
    assert len(data["cosine"]) == 3


def test_nonfinite_run_raises_or_reports():
    p = reference_problem("quad_phase", eta=50.0, steps=30)
    with pytest.raises(SolverError, match="nonfinite"):
        simulate(p, d=20, delta=2.0, seed=0)
    run = simulate(p, d=20, delta=2.0, seed=0, throw=False)
    assert run.status is Status.NONFINITE
    assert not run.success().any()


def test_diverged_trials_are_reported_one_by_one():
    """Three r² units at η = 0.1 (d = 200, δ = 4): some GD trials overflow within 30 steps and
    some do not (the r² width cases of findings §10.1). Each trial's status says which
    (reference: its own recorded losses, non-finite exactly in the trials that diverged), the
    run's status is NONFINITE with one message part per diverged trial, the finite trials keep
    their numbers, and ``throw=True`` raises. At η = 0.05 the same data and starts stay finite."""
    kw = {"seed": 0, "trials": 8, "dtype": np.float32, "record_every": 5, "n_test": 64}
    p = Problem.build(target="z**2 - 1", activation="quad", m=3, eta=0.1, steps=30)
    run = simulate(p, 200, 4.0, throw=False, **kw)
    status = np.array(run.diagnostics["trial_status"])
    finite = np.isfinite(np.asarray(run.train_loss, dtype=float)).all(axis=1)
    assert 0 < finite.sum() < 8  # a mixed run, so the per-trial mapping is tested
    np.testing.assert_array_equal(status == "nonfinite", ~finite)
    assert np.all(status[finite] == "success")
    assert run.status is Status.NONFINITE
    assert [f"trial {j}:" in run.message for j in range(8)] == (~finite).tolist()
    assert np.all(np.isfinite(np.asarray(run.cosine, dtype=float)[finite]))
    with pytest.raises(SolverError, match="nonfinite"):
        simulate(p, 200, 4.0, **kw)
    slow = simulate(p.replace(eta=0.05), 200, 4.0, **kw)
    assert slow.status is Status.SUCCESS
    assert np.isfinite(np.asarray(slow.train_loss, dtype=float)).all()


def test_float32_run_close_to_float64():
    p = reference_problem("gelu_phase", eta=0.2, steps=20)
    a = simulate(p, d=50, delta=4.0, seed=0)
    b = simulate(p, d=50, delta=4.0, seed=0, dtype="float32")
    assert b.settings["dtype"] == "float32"
    # same seed: the same X rounded to float32, so the same trajectory to ~1e-6
    np.testing.assert_allclose(b.gram, a.gram, rtol=1e-4)
    np.testing.assert_allclose(b.train_loss, a.train_loss, rtol=1e-4)


def test_problem_pickles_and_still_computes():
    p = reference_problem("gelu_phase")
    _ = p.grad(np.ones(2), np.ones((2, 1)))  # populate the compiled caches
    q = pickle.loads(pickle.dumps(p))
    assert q == p
    np.testing.assert_array_equal(q.grad(np.ones(2), np.ones((2, 1))),
                                  p.grad(np.ones(2), np.ones((2, 1))))


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"d": 0}, "d must be >= 1, got 0"),
        ({"d": 1}, "d must be >= k \\+ m = 2, got 1"),
        ({"d": "ten"}, "d must be an integer"),
        ({"delta": -1.0}, "delta must be > 0"),
        ({"delta": math.nan}, "delta must be finite"),
        ({"delta": 0.01}, "need n >= 2"),
        ({"trials": 0}, "trials must be >= 1, got 0"),
        ({"seed": -1}, "seed must be None, an integer >= 0"),
        ({"seed": "abc"}, "seed must be None"),
        ({"gram": "half"}, "gram must be 'diag' or 'full'"),
        ({"record_every": 0}, "record_every must be >= 1"),
        ({"n_test": 1}, "n_test must be >= 2"),
        ({"hessian_at": [11]}, "hessian_at entries must be <= steps=10"),
        ({"hessian_at": [-1]}, "hessian_at entry must be >= 0"),
        ({"hessian_at": [0], "n_eigs": 0}, "n_eigs must be >= 1"),
        ({"hessian_at": [0], "n_eigs": 19}, "n_eigs must be < d\\*m - 1"),
        ({"hard": [3]}, "hard must name target directions"),
        ({"dtype": "int32"}, "dtype must be float32 or float64"),
        ({"dtype": "nonsense"}, "dtype must be float32 or float64"),
        ({"block_rows": 0}, "block_rows must be >= 1"),
        ({"blas_threads": 0}, "blas_threads must be >= 1"),
        ({"stop_cosine": 1.0}, "stop_cosine must be a number in \\(0, 1\\) or None, got 1.0"),
        ({"stop_cosine": True}, "stop_cosine must be a number"),
        ({"stop_cosine": 0.5, "hessian_at": [2]}, "stop_cosine cannot be combined with hessian_at"),
    ],
)
def test_invalid_arguments_are_named(kwargs, needle):
    args = {"d": 20, "delta": 2.0, **kwargs}
    with pytest.raises(ValueError, match=needle):
        simulate(QUAD, **args)


def test_problem_must_be_a_problem():
    with pytest.raises(ValueError, match="problem must be a Problem"):
        simulate("z**2", d=10, delta=2.0)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- transition
@pytest.mark.slow
def test_quad_neuron_transition_between_delta_3_and_6():
    """docs/findings.md §1.1 observations: the r² neuron at d=500, η=0.05, 2000 steps succeeds
    (cosine > 1/2) rarely at δ = 3 and commonly at δ = 6."""
    p = reference_problem("quad_phase", eta=0.05, steps=2000)
    low = simulate(p, d=500, delta=3.0, seed=100, trials=6, record_every=100)
    high = simulate(p, d=500, delta=6.0, seed=200, trials=6, record_every=100)
    rate_low, _ = low.success_rate(0.5)
    rate_high, _ = high.success_rate(0.5)
    print("final cosine δ=3:", np.round(low.cosine[:, -1], 3), "δ=6:",
          np.round(high.cosine[:, -1], 3))
    assert rate_low <= 1 / 3
    assert rate_high >= 1 / 2


# ----------------------------------------------------------------------- trial replay, shared-data batches
def test_replay_trial_reproduces_the_simulated_trajectory():
    """GD from replay_trial's (X, y, W0) gives the overlaps simulate recorded for that trial."""
    p = reference_problem("easy_hard", m=2, eta=0.2, steps=5)
    run = simulate(p, d=30, delta=3.0, seed=4, trials=3)
    X, y, W, ss = replay_trial(p, d=30, delta=3.0, seed=4, i=2)
    assert ss.spawn_key == (2,) and run.settings["seeds"][2]["spawn_key"] == [2]
    for t in range(6):
        np.testing.assert_allclose(W[:2], run.overlaps[2, t], rtol=1e-12, atol=1e-14)
        W, _ = gd_step(p, X, y, W)
    # the root seed record of a result rebuilds the seed
    X2, *_ = replay_trial(p, 30, 3.0, from_record(run.settings["root_seed"]), 2)
    np.testing.assert_array_equal(X, X2)
    with pytest.raises(ValueError, match="seed must be an integer >= 0 or a SeedSequence"):
        replay_trial(p, 30, 3.0, None, 0)


SHARED_CASES = {
    "gelu m=2, bias, hessian": (
        reference_problem("easy_hard", m=2, eta=0.2, steps=6, bias=True),
        dict(eta=[0.2, 0.1, 0.3], q0=[1.0, 0.5, 2.0], hessian_at=(3,), n_eigs=2)),
    "quad m=1, hold_zero, full gram": (
        Problem.build(target="z1**2 + z2", activation="quad", eta=0.05, steps=5, hold_zero=[1]),
        dict(eta=0.05, gram="full", record_every=2)),
    "tanh m=2, warm start": (
        reference_problem("tanh_product", eta=0.3, steps=4, M0=[[0.2, 0.0], [0.0, 0.2]]),
        dict(eta=[0.3, 0.6, 0.1])),
}


@pytest.mark.parametrize("name", list(SHARED_CASES))
def test_shared_batch_equals_trial_by_trial(name):
    """The batched (one GEMM) path agrees with the per-trial path to float round-off."""
    p, kw = SHARED_CASES[name]
    a = simulate_shared(p, d=40, delta=3.0, seed=5, trials=3, batch=True, **kw)
    b = simulate_shared(p, d=40, delta=3.0, seed=5, trials=3, batch=False, **kw)
    assert a.ok and b.ok and a.settings["batch"] and not b.settings["batch"]
    for field_name in ("overlaps", "gram", "train_loss", "test_loss", "grad_norm", "cosine", "bias"):
        np.testing.assert_allclose(getattr(a, field_name), getattr(b, field_name), rtol=1e-9, atol=1e-12,
                                   err_msg=field_name)
    for key, value in a.hessian.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            np.testing.assert_allclose(value, b.hessian[key], rtol=1e-7, atol=1e-9, err_msg=key)
    # the trials really differ (different init and eta)
    assert not np.allclose(a.overlaps[0], a.overlaps[1])


def test_shared_trial_zero_is_trial_zero_of_simulate():
    p = reference_problem("gelu_phase", eta=0.2, steps=6)
    shared = simulate_shared(p, d=40, delta=3.0, seed=8, trials=3)
    alone = simulate(p, d=40, delta=3.0, seed=8, trials=1)
    np.testing.assert_allclose(shared.overlaps[0], alone.overlaps[0], rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(shared.test_loss[0], alone.test_loss[0], rtol=1e-10)
    # the other trials start elsewhere on the same data: same train loss formula, other weights
    assert not np.allclose(shared.overlaps[1, 0], alone.overlaps[0, 0])


def test_shared_rejects_bad_eta_and_q0():
    p = reference_problem("gelu_phase", eta=0.2, steps=2)
    with pytest.raises(ValueError, match="eta must be a positive number or 3"):
        simulate_shared(p, d=20, delta=2.0, seed=0, trials=3, eta=[0.1, 0.2])
    with pytest.raises(ValueError, match="eta must be"):
        simulate_shared(p, d=20, delta=2.0, seed=0, trials=2, eta=-0.1)
    with pytest.raises(ValueError, match="q0 must be"):
        simulate_shared(p, d=20, delta=2.0, seed=0, trials=2, q0=float("nan"))
    warm = reference_problem("gelu_phase", eta=0.2, steps=2, M0=[[0.3]])
    with pytest.raises(ValueError, match="q0 applies to a random start only"):
        simulate_shared(warm, d=20, delta=2.0, seed=0, trials=2, q0=1.0)
    with pytest.raises(ValueError, match="gram must be"):
        simulate_shared(p, d=20, delta=2.0, seed=0, gram="bad")


def test_gd_step_batch_rejects_bad_shapes():
    p = reference_problem("gelu_phase", m=2, eta=0.2, steps=2)
    X, y = np.zeros((5, 4)), np.zeros(5)
    with pytest.raises(ValueError, match="W must have shape"):
        gd_step_batch(p, X, y, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="W must have shape"):
        gd_step(p, X, y, np.zeros((4, 4)))


# ----------------------------------------------------------------------------- first passage
@pytest.mark.parametrize(("d", "delta"), [(200, 6.0), (200, 3.0)])
def test_stop_at_first_passage_keeps_the_trajectory_and_the_outcome(d, delta):
    """A trial stopped at its first passage (``stop_cosine``) is the same trial up to the stop,
    blank after it, and has the first-passage outcome of the full run (reference: the same
    seeds run to T). Near the transition (d = 200, δ = 6, 120 steps) two of the six trials
    pass; at δ = 3, below it, none does, so nothing stops."""
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=120)
    full = simulate(p, d, delta, seed=3, trials=6, record_every=5)
    stop = simulate(p, d, delta, seed=3, trials=6, record_every=5, stop_cosine=0.5)
    np.testing.assert_array_equal(stop.success(0.5, first_passage=True),
                                  full.success(0.5, first_passage=True))
    stopped = stop.diagnostics["trial_stopped"]
    assert stop.settings["stop_cosine"] == 0.5
    for r, t in enumerate(stopped):
        if t is None:
            np.testing.assert_array_equal(stop.cosine[r], full.cosine[r])
            assert not full.success(0.5, first_passage=True)[r]
            continue
        i = int(np.searchsorted(full.steps, t))
        first = int(np.argmax(full.success_statistic()[r] > 0.5))
        assert i == first  # stopped at the first recorded passage of the full run
        np.testing.assert_array_equal(stop.overlaps[r, : i + 1], full.overlaps[r, : i + 1])
        assert np.all(np.isnan(stop.cosine[r, i + 1:]))
    if delta > 5:
        assert any(t is not None for t in stopped) and any(t is None for t in stopped), stopped
    else:
        assert all(t is None for t in stopped)
