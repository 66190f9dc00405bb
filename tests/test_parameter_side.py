"""The parameter side of the DMFT (:mod:`dmftsolve.dynamics.parameter_side`): pure linear algebra
on the kernel stores, checked without Monte Carlo paths.

References: the recursions of ``docs/theory.md`` §2.3 written out densely in this file (the
``support`` argument must give the same rows), and closed forms for a response that is a
multiple of the identity at equal times.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve.dynamics.parameter_side import kernel_step, next_R_row


def _stores(rng: np.random.Generator, t: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric positive definite ``Q`` and a block-lower-triangular ``R`` with identity
    diagonal blocks, both ``(t+2)m`` square (the solver's layout)."""
    n = (t + 2) * m
    A = rng.standard_normal((n, n))
    Q = A @ A.T / n + np.eye(n)
    R = np.tril(rng.standard_normal((n, n)) * 0.3)
    for s in range(t + 2):
        R[s * m:(s + 1) * m, s * m:(s + 1) * m] = np.eye(m)
    R[np.triu_indices(n, 1)] = 0.0
    return Q, R


def _sparse_gamma(rng: np.random.Generator, E: int, t: int, m: int,
                  keep: float) -> tuple[np.ndarray, np.ndarray]:
    """A stack of ``Γ(t, ≤t)`` rows that vanish outside a random set of columns (the non-null
    innovations), and that set."""
    t1m = (t + 1) * m
    support = np.flatnonzero(rng.random(t1m) < keep)
    G = np.zeros((E, m, t1m))
    G[:, :, support] = rng.standard_normal((E, m, support.size))
    return G, support


@settings(max_examples=40, deadline=None)
@given(t=st.integers(0, 12), m=st.integers(1, 4), lam=st.sampled_from([0.0, 0.3]),
       keep=st.floats(0.0, 1.0), seed=st.integers(0, 2**31))
@example(t=0, m=1, lam=0.0, keep=0.0, seed=0)  # no non-null innovation yet
@example(t=9, m=2, lam=0.3, keep=0.2, seed=1)  # a ridge on a sparse row
def test_support_gives_the_dense_rows(t: int, m: int, lam: float, keep: float, seed: int) -> None:
    """Reading only the support's rows of ``R`` and ``Q`` gives the dense recursion's rows."""
    rng = np.random.default_rng(seed)
    Q, R = _stores(rng, t, m)
    E, eta = 3, 0.4
    G, support = _sparse_gamma(rng, E, t, m, keep)
    t1m, tm = (t + 1) * m, t * m
    Gt = G.copy()
    Gt[:, :, tm:t1m] += lam * np.eye(m)
    # the dense formulas of the module docstring
    R_dense = R[tm:t1m, :t1m] - eta * (Gt[0] @ R[:t1m, :t1m])
    np.testing.assert_allclose(next_R_row(R, G[0], t, m, eta, lam, support), R_dense, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(next_R_row(R, G[0], t, m, eta, lam), R_dense, rtol=1e-12, atol=1e-12)
    Cnu = rng.standard_normal((E, m, m))
    Cnu = Cnu @ Cnu.transpose(0, 2, 1)
    N_row = rng.standard_normal((E, m, t1m))
    GQ = Gt @ Q[:t1m, :t1m]
    F = N_row + GQ
    NG = N_row @ Gt.transpose(0, 2, 1)
    Ephi = Cnu + NG + NG.transpose(0, 2, 1) + GQ @ Gt.transpose(0, 2, 1)
    Ft = F[:, :, tm:t1m]
    Qn = Q[tm:t1m, tm:t1m] - eta * (Ft + Ft.transpose(0, 2, 1)) + eta**2 * Ephi
    for sup in (support, None):
        ks = kernel_step(Q, G, Cnu, N_row, t, m, eta, lam, sup)
        np.testing.assert_allclose(ks.Q_row, Q[tm:t1m, :t1m] - eta * F[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ks.E_phiphi, Ephi, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ks.Q_next, (Qn + Qn.transpose(0, 2, 1)) / 2, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(ks.Q_next, ks.Q_next.transpose(0, 2, 1))


@pytest.mark.parametrize("m", [1, 3])
def test_equal_time_response_decays_geometrically(m: int) -> None:
    """``Γ(t, u) = γ I δ_{tu}`` gives ``R(t, s) = (1 − η(γ + λ))^{t−s} I`` (closed form)."""
    T, eta, gamma, lam = 8, 0.3, 0.7, 0.2
    n = (T + 2) * m
    R = np.zeros((n, n))
    R[:m, :m] = np.eye(m)
    for t in range(T):
        t1m = (t + 1) * m
        G = np.zeros((m, t1m))
        G[:, t * m:t1m] = gamma * np.eye(m)
        R[t1m:t1m + m, :t1m] = next_R_row(R, G, t, m, eta, lam, np.arange(t * m, t1m))
        R[t1m:t1m + m, t1m:t1m + m] = np.eye(m)
    for t in range(T + 1):
        for s in range(t + 1):
            np.testing.assert_allclose(R[t * m:(t + 1) * m, s * m:(s + 1) * m],
                                       (1 - eta * (gamma + lam)) ** (t - s) * np.eye(m), rtol=1e-13)


def test_without_response_Q_is_a_random_walk() -> None:
    """With ``Γ = 0`` and ``N = 0`` the step is ``ω^{t+1} = ω^t − η ν^t`` with ``ν`` independent
    of the past: ``Q(t+1, t+1) = Q(t, t) + η² Cν(t, t)`` and ``Q(t+1, s) = Q(t, s)``."""
    rng = np.random.default_rng(3)
    t, m, eta = 4, 2, 0.5
    Q, _ = _stores(rng, t, m)
    t1m, tm = (t + 1) * m, t * m
    C = np.array([[[2.0, 0.5], [0.5, 1.0]]])
    ks = kernel_step(Q, np.zeros((1, m, t1m)), C, np.zeros((1, m, t1m)), t, m, eta, 0.0,
                     np.array([], dtype=int))
    np.testing.assert_allclose(ks.Q_next[0], Q[tm:t1m, tm:t1m] + eta**2 * C[0], rtol=1e-14)
    np.testing.assert_array_equal(ks.Q_row, Q[tm:t1m, :t1m])


@pytest.mark.parametrize("m, lam", [(1, 0.0), (2, 0.1)])
def test_a_solve_reading_the_support_is_the_dense_solve(m: int, lam: float,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """In a solve the Stein ``Γ`` rows are zero at the null innovations, so the parameter side
    reads ``R`` and ``Q`` there only. Reference: the same float64 forced draw with every column
    read (the estimator declaring ``zero_at_null = False``); overlaps and kernels agree to
    round-off, and the run has null innovations."""
    from dmftsolve import Problem
    from dmftsolve.dynamics.dmft import solve_dmft
    from dmftsolve.dynamics.stein import Stein, SteinResponse
    from dmftsolve.finite_d.force import BootstrapForce

    p = Problem.build(target="z**2 - 1", activation="gelu", m=m, eta=0.5, steps=40, lam=lam,
                      M0=np.full((1, m), 0.1).tolist())
    kw = dict(n_paths=4000, seed=5, reflect=(0,), force=BootstrapForce(3000, "paired"), errors="none",
              test_loss="none", method=Stein(regression=True), path_dtype="float64")
    sparse = solve_dmft(p, 4.0, **kw)
    monkeypatch.setattr(SteinResponse, "zero_at_null", False)
    dense = solve_dmft(p, 4.0, **kw)
    assert sparse.ok and dense.ok
    assert sparse.diagnostics["zero_variance_innovations"].sum() > 10
    for f in ("M", "cosine", "R", "Gamma", "q_diag"):
        a, b = np.asarray(getattr(dense, f)), np.asarray(getattr(sparse, f))
        assert np.array_equal(np.isnan(a), np.isnan(b)), f
        # round-off only: the two read the stores in different orders, and the Stein solve
        # divides by innovations just above the cut-off (a dropped column would differ by O(1))
        assert np.nanmax(np.abs(a - b)) <= 1e-6 * np.nanmax(np.abs(a)), f
