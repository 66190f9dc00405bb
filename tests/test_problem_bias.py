"""The trained per-unit bias ``f(x) = Σ_j a_j σ(w_jᵀx + b_j)`` (``Problem.build(..., bias=True)``).

GD on ``(W, b)``: ``W ← W − η(∇_W L + λW)``, ``b ← b − η (1/n) Σ_i g_i`` (no ridge on
``b``, ``b⁰ = 0``), with ``g_i = ∇_V ℓ(y_i, V_i)`` and ``V_i = Wᵀx_i + b``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest
from reference_problems import reference_problem
from scipy.special import erf

from dmftsolve import Problem
from dmftsolve.cli._common import add_problem_arguments, problem_from_args
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.dynamics.fixed_point import solve_fixed_point
from dmftsolve.population import population_loss
from dmftsolve.seeds import child
from dmftsolve.simulation.simulator import dense_hessian_matrix, gd_step, simulate
from dmftsolve.simulation.trials import trial_seed


# ----------------------------------------------------------------------------- reference GD
def _gelu(r: np.ndarray) -> np.ndarray:
    return 0.5 * r * (1.0 + erf(r / math.sqrt(2.0)))


def _gelu1(r: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + erf(r / math.sqrt(2.0))) + r * np.exp(-0.5 * r * r) / math.sqrt(2.0 * math.pi)


def _gelu2(r: np.ndarray) -> np.ndarray:
    return (2.0 - r * r) * np.exp(-0.5 * r * r) / math.sqrt(2.0 * math.pi)


def _replay_data(problem: Problem, d: int, n: int, seed: int, trial: int) -> tuple[np.ndarray, ...]:
    """``X``, ``y``, ``W0`` of trial ``trial`` of ``simulate(problem, d, n/d, seed=seed)``, drawn
    from the simulator's seed streams as ``validation/spectrum_vs_simulation.py::gd_states`` does
    (data stream = child 0, init stream = child 1), the init written out here (random start)."""
    k, m = problem.k, problem.m
    ss = trial_seed(seed, trial)
    rng_data = np.random.default_rng(child(ss, 0))
    rng_init = np.random.default_rng(child(ss, 1))
    X = np.empty((n, d))
    rng_data.standard_normal(out=X)
    eps = rng_data.standard_normal(n)
    z = X[:, :k]
    y = z[:, 0] ** 2 + 0.3 * z[:, 1] + 0.2 * eps  # the target of test 1, written out
    W0 = rng_init.standard_normal((d, m)) * math.sqrt(problem.training.init.q0 / d)
    W0[list(problem.training.hold_zero)] = 0.0
    return X, y, W0


def _reference_gd(X: np.ndarray, y: np.ndarray, W0: np.ndarray, a: np.ndarray, eta: float, lam: float,
                  hold: list[int], steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain numpy GD of the square loss with GeLU units and a bias; returns the
    trajectories of ``W`` (T+1, d, m), ``b`` (T+1, m) and the train loss (T+1,)."""
    n = X.shape[0]
    W, b = W0.copy(), np.zeros(W0.shape[1])
    Ws, bs, losses = [], [], []
    for _ in range(steps + 1):
        V = X @ W + b
        f = _gelu(V) @ a
        Ws.append(W.copy())
        bs.append(b.copy())
        losses.append(0.5 * np.mean((y - f) ** 2))
        G = (f - y)[:, None] * a * _gelu1(V)
        gW = X.T @ G / n + lam * W
        gW[hold] = 0.0
        W = W - eta * gW
        W[hold] = 0.0
        b = b - eta * G.mean(axis=0)
    return np.array(Ws), np.array(bs), np.array(losses)


def test_simulator_matches_an_independent_reference_gd_with_bias() -> None:
    """W, b, train loss, Gram, overlaps and the dense W-Hessian of the library's GD (float64)
    equal a numpy GD written here (GeLU, m = 2, a = (1, −0.7), ridge, one held direction)
    on the same X, y, W0 to 1e-10."""
    d, n, seed, steps = 60, 240, 11, 6
    eta, lam = 0.4, 0.05
    p = Problem.build(target="z1**2 + 0.3*z2 + 0.2*eps", activation="gelu", m=2, a=(1.0, -0.7),
                      eta=eta, lam=lam, steps=steps, hold_zero=(1,), bias=True)
    X, y, W0 = _replay_data(p, d, n, seed, trial=1)
    a = np.array([1.0, -0.7])
    Wr, br, lr = _reference_gd(X, y, W0, a, eta, lam, [1], steps)
    assert np.abs(br[-1]).min() > 1e-2  # the bias really moves

    run = simulate(p, d, n / d, seed=seed, trials=2, dtype=np.float64, hessian_at=(steps,),
                   dense_hessian=True, n_eigs=3, n_test=2**17)
    assert run.bias.shape == (2, steps + 1, 2)
    np.testing.assert_allclose(run.bias[1], br, rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.train_loss[1], lr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(run.overlaps[1], Wr[:, :2, :], rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.gram[1], np.einsum("tdi,tdj->tij", Wr, Wr), rtol=0, atol=1e-10)

    # gd_step itself, on the whole of W
    W, b = W0.copy(), np.zeros(2)
    for _ in range(steps):
        W, _, b, gb = gd_step(p, X, y, W, b=b)
    np.testing.assert_allclose(gb, (br[-2] - br[-1]) / eta, rtol=0, atol=1e-10)
    np.testing.assert_allclose(W, Wr[-1], rtol=0, atol=1e-10)
    np.testing.assert_allclose(b, br[-1], rtol=0, atol=1e-10)

    # Hessian with respect to W at (W_T, b_T): (1/n) Σ_i (x_i x_iᵀ) ⊗ D_i + λ I
    V = X @ Wr[-1] + br[-1]
    f = _gelu(V) @ a
    u = a * _gelu1(V)
    D = u[:, :, None] * u[:, None, :]
    D[:, [0, 1], [0, 1]] += (f - y)[:, None] * a * _gelu2(V)
    H = np.einsum("ni,nab,nj->iajb", X, D, X).reshape(2 * d, 2 * d) / n + lam * np.eye(2 * d)
    Hlib = dense_hessian_matrix(p, X, y, Wr[-1], b=br[-1])
    np.testing.assert_allclose(Hlib, H, rtol=0, atol=1e-10)
    w = np.linalg.eigvalsh(H)
    np.testing.assert_allclose(run.hessian["low"][1, 0], w[:3], rtol=0, atol=1e-9)
    np.testing.assert_allclose(run.hessian["high"][1, 0], w[-3:], rtol=0, atol=1e-9)

    # the test loss is the population loss at (M_t, W_⊥ᵀW_⊥, b_t), up to its MC error
    Wt = Wr[-1]
    e = population_loss(p, Wt[:2], Wt[2:].T @ Wt[2:], br[-1], method="qmc", n_samples=2**18, seed=0)
    assert abs(run.test_loss[1, -1] - e.value) < 4 * (run.test_loss_stderr[1, -1] + e.error)
    e0 = population_loss(p, Wt[:2], Wt[2:].T @ Wt[2:], method="qmc", n_samples=2**18, seed=0)
    assert abs(run.test_loss[1, -1] - e0.value) > 4 * (run.test_loss_stderr[1, -1] + e0.error)


def test_population_loss_with_bias_closed_form() -> None:
    """Linear unit, y = z, square loss: E[(z − Mz − Ξ − b)²]/2 = ((1 − M)² + Q + b²)/2."""
    p = Problem.build(target="z", activation="linear", bias=True)
    e = population_loss(p, [[0.3]], [[0.5]], [0.8])
    assert e.value == pytest.approx(((1 - 0.3) ** 2 + 0.5 + 0.8**2) / 2, abs=1e-10)
    assert population_loss(p, [[0.3]], [[0.5]]).value == pytest.approx(((1 - 0.3) ** 2 + 0.5) / 2, abs=1e-10)
    with pytest.raises(ValueError, match="b must"):
        population_loss(p, [[0.3]], [[0.5]], [0.1, 0.2])


# ----------------------------------------------------------------------------- DMFT vs simulator
def test_dmft_matches_simulator_with_bias() -> None:
    """DMFT (Stein, 40 000 paths, replicate errors) vs GD at d = 2000, mean of 3 trials, for
    GeLU on y = z² − 1, m = 1, δ = 4, η = 0.5, 20 steps, hard direction held at zero.

    Reference numbers: both sides are computed in this test (no stored values), plus the
    closed form ``b_1 = −η E[σ(ξ)σ'(ξ)]``, ``ξ ~ N(0, 1)`` (= −0.17631, 80-point Gauss–Hermite
    computed here; at t = 0 ``V = ξ`` is independent of ``y`` and ``E[y] = 0``). Seen when the
    test was written (seeds below): t = 20, b DMFT −0.686 ± 0.008 vs GD −0.642 ± 0.013;
    Q(t,t) = ‖w_t‖² DMFT 2.42 ± 0.11 vs GD 2.51 ± 0.04; train loss 0.591 ± 0.017 vs
    0.598 ± 0.006; b_1 DMFT −0.180 ± 0.004, GD −0.171 ± 0.004. Tolerance
    2 max(1, |value|)/√d + 3 (DMFT error + GD standard error over trials). The same
    tolerance rejects the DMFT without a bias (b = 0, and Q(20,20) = 1.65), so the
    comparison can fail.
    """
    d, delta, T = 2000, 4.0, 20
    p = Problem.build(target="z**2 - 1", activation="gelu", m=1, eta=0.5, steps=T, hold_zero=(0,),
                      bias=True)
    run = simulate(p, d, delta, seed=5, trials=3)
    res = solve_dmft(p, delta, n_paths=40_000, seed=7)
    assert res.ok and run.ok

    sim = {"b": run.mean("bias")[:, 0], "Q": run.mean("gram")[:, 0, 0], "loss": run.mean("train_loss")}
    sim_se = {"b": run.stderr("bias")[:, 0], "Q": run.stderr("gram")[:, 0, 0],
              "loss": run.stderr("train_loss")}
    dm = {"b": res.b[:, 0], "Q": res.q_diag[:, 0, 0], "loss": res.train_loss}
    dm_err = {"b": res.b_err[:, 0], "Q": res.Q_err[:, 0, 0], "loss": res.train_loss_err}

    def tol(key: str) -> np.ndarray:
        return 2 * np.maximum(1.0, np.abs(dm[key])) / math.sqrt(d) + 3 * (dm_err[key] + sim_se[key])

    assert sim["b"][-1] < -0.3  # the bias moves well beyond the tolerance
    xi, wts = np.polynomial.hermite_e.hermegauss(80)
    b1 = -p.training.eta * float(np.sum(wts * _gelu(xi) * _gelu1(xi)) / wts.sum())
    assert abs(dm["b"][1] - b1) <= 4 * dm_err["b"][1]
    assert abs(sim["b"][1] - b1) <= 2 / math.sqrt(d) + 3 * sim_se["b"][1]
    for key in ("b", "Q", "loss"):
        assert np.all(np.abs(sim[key] - dm[key]) <= tol(key)), (key, sim[key], dm[key], tol(key))

    # the comparison can fail: the DMFT without a bias is rejected by the same tolerance
    nob = solve_dmft(p.replace(bias=False), delta, n_paths=40_000, seed=7, errors="batch")
    assert np.all(nob.b == 0.0)
    assert np.any(np.abs(sim["b"] - nob.b[:, 0]) > tol("b"))
    assert np.any(np.abs(sim["Q"] - nob.q_diag[:, 0, 0]) > tol("Q"))


# ----------------------------------------------------------------------------- bias=False unchanged
def test_no_bias_leaves_outputs_unchanged() -> None:
    """bias=False: no ``bias`` key in ``to_dict`` (the keys of before), zero bias arrays in the
    simulator, a DMFT bias exactly 0 with zero error, and gd_step's two-value return."""
    p = reference_problem("gelu_phase", eta=0.3, steps=4)
    assert p.to_dict() == {
        "target": "z**2", "activation": "gelu", "m": 1, "a": [1.0], "loss": "square", "eta": 0.3,
        "lam": 0.0, "steps": 4, "q0": 1.0, "M0": None, "Q0": None, "hold_zero": [], "k": 1,
    }
    assert "bias" not in p.describe()
    run = simulate(p, 40, 3.0, seed=0, trials=2)
    assert run.bias.shape == (2, 5, 1) and np.all(run.bias == 0.0)
    res = solve_dmft(p, 3.0, n_paths=2000, seed=0, errors="batch")
    assert res.b.shape == (5, 1) and np.all(res.b == 0.0) and np.all(res.b_err == 0.0)
    X = np.random.default_rng(0).standard_normal((20, 8))
    out = gd_step(p, X, X[:, 0] ** 2, np.full((8, 1), 0.1))
    assert len(out) == 2
    with pytest.raises(ValueError, match="bias=False"):
        gd_step(p, X, X[:, 0] ** 2, np.full((8, 1), 0.1), b=np.zeros(1))
    with pytest.raises(ValueError, match="bias=True"):
        gd_step(p.replace(bias=True), X, X[:, 0] ** 2, np.full((8, 1), 0.1))
    with pytest.raises(ValueError, match="bias=True"):
        dense_hessian_matrix(p.replace(bias=True), X, X[:, 0] ** 2, np.full((8, 1), 0.1))


def test_bias_round_trips_and_problem_api() -> None:
    p = Problem.build(target="z**2", m=2, bias=True, steps=3)
    assert p.bias and p.network.bias
    assert p.to_dict()["bias"] is True
    assert Problem.from_dict(p.to_dict()) == p
    assert p.replace(steps=7).bias
    assert not p.replace(bias=False).bias
    assert p.describe().endswith(", bias")
    with pytest.raises(ValueError, match="does not support a trained bias"):
        solve_fixed_point(p, 2.0)


@pytest.mark.parametrize("bad", ["yes", 1, 0.0, None])
def test_bad_bias_is_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="bias") as exc:
        Problem.build(bias=bad)
    assert repr(bad) in str(exc.value)


def test_cli_bias_flag() -> None:
    parser = argparse.ArgumentParser()
    add_problem_arguments(parser)
    assert "--bias" in parser.format_help()
    assert problem_from_args(parser.parse_args(["--bias"])).bias
    assert not problem_from_args(parser.parse_args([])).bias
