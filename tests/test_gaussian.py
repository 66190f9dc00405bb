"""Tests of dmftsolve.gaussian: reference values are closed-form Gaussian moments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve.gaussian import Expectation, expect, gauss_hermite_rule
from dmftsolve.results import SolverError, Status


def _double_factorial_odd(j: int) -> int:
    """(2j−1)!! = E[g^{2j}] for g ~ N(0, 1) (closed form)."""
    return math.prod(range(1, 2 * j, 2))


@given(dim=st.integers(1, 3), n=st.integers(1, 12), j=st.integers(0, 11))
@example(dim=1, n=1, j=0)
@example(dim=2, n=5, j=4)
@example(dim=1, n=200, j=10)
@settings(max_examples=40, deadline=None)
def test_rule_exact_for_low_degree(dim, n, j):
    x, w = gauss_hermite_rule(dim, n)
    assert x.shape == (n**dim, dim) and w.shape == (n**dim,)
    assert np.all(w > 0)
    assert w.sum() == pytest.approx(1.0, rel=1e-13)
    if 2 * j < 2 * n:  # degree 2j < 2n: exact
        got = w @ x[:, -1] ** (2 * j)
        assert got == pytest.approx(_double_factorial_odd(j), rel=1e-10)
    assert abs(w @ x[:, 0]) < 1e-12  # odd moments vanish


def test_rule_large_n_uses_stable_algorithm():
    x, w = gauss_hermite_rule(1, 500)
    assert np.all(np.isfinite(w)) and w.sum() == pytest.approx(1.0)
    assert w @ x[:, 0] ** 2 == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("dim, n", [(0, 3), (2, 0), (1.5, 3), (3, 2**10)])
def test_rule_bad_input(dim, n):
    with pytest.raises(ValueError):
        gauss_hermite_rule(dim, n)


@given(
    a=st.lists(st.floats(-1, 1), min_size=2, max_size=2),
    mu=st.lists(st.floats(-2, 2), min_size=2, max_size=2),
    s=st.floats(0.1, 1.5), r=st.floats(-0.9, 0.9),
)
@example(a=[0.5, -0.3], mu=[0.0, 1.0], s=1.0, r=0.0)
@settings(max_examples=25, deadline=None)
def test_quadrature_mgf(a, mu, s, r):
    """E[exp(aᵀG)] = exp(aᵀμ + aᵀΣa/2) (moment generating function, closed form)."""
    a, mu = np.array(a), np.array(mu)
    cov = np.array([[s * s, r * s], [r * s, 1.0]])
    res = expect(lambda x: np.exp(x @ a), mu, cov)
    assert res.status is Status.SUCCESS and res.method == "quadrature"
    assert res.value == pytest.approx(math.exp(a @ mu + a @ cov @ a / 2), rel=1e-9)
    assert res.error <= 1e-9 * res.value + 1e-12


def test_vector_valued_moments():
    mu = np.array([1.0, -2.0])
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    res = expect(lambda x: x[:, :, None] * x[:, None, :], mu, cov)
    assert res.value.shape == (2, 2) and res.error.shape == (2, 2)
    np.testing.assert_allclose(res.value, cov + np.outer(mu, mu), rtol=1e-12)


def test_singular_covariance():
    """cov = v vᵀ (rank 1): wᵀG ~ N(wᵀμ, (wᵀv)²), so E[(wᵀG)⁴] = 3 (wᵀv)⁴ for μ = 0."""
    v = np.array([1.0, 2.0, -1.0])
    w = np.array([0.3, 0.1, 0.7])
    res = expect(lambda x: (x @ w) ** 4, np.zeros(3), np.outer(v, v))
    assert res.method == "quadrature" and res.n_points < 100  # a 1-d rule
    assert res.value == pytest.approx(3 * (w @ v) ** 4, rel=1e-12)
    zero = expect(lambda x: x[:, 0] + 1.0, [2.0], [[0.0]])
    assert zero.value == 3.0 and zero.error == 0.0


def test_nonsmooth_quadrature_fails_and_auto_falls_back():
    func = lambda x: np.abs(x[:, 0])  # noqa: E731
    with pytest.raises(SolverError) as info:
        expect(func, [0.0], [[1.0]], method="quadrature")
    assert info.value.result.status is Status.NOT_CONVERGED
    res = expect(func, [0.0], [[1.0]], method="quadrature", throw=False)
    assert res.status is Status.NOT_CONVERGED and not res.ok
    auto = expect(func, [0.0], [[1.0]], seed=3)
    assert auto.ok and auto.method == "qmc"
    # E|G| = sqrt(2/π) (closed form)
    assert abs(auto.value - math.sqrt(2 / math.pi)) < 5 * auto.error


@pytest.mark.parametrize("method", ["qmc", "mc"])
def test_monte_carlo_within_standard_error(method):
    """E[Π cos G_i] = exp(−dim/2) for G ~ N(0, I) (closed form: characteristic function)."""
    dim = 5
    res = expect(lambda x: np.cos(x).prod(axis=1), np.zeros(dim), np.eye(dim), method=method,
                 n_samples=2**15, seed=np.random.default_rng(7))
    assert res.method == method and res.error > 0
    assert abs(res.value - math.exp(-dim / 2)) < 5 * res.error
    again = expect(lambda x: np.cos(x).prod(axis=1), np.zeros(dim), np.eye(dim), method=method,
                   n_samples=2**15, seed=7)
    assert again.value == res.value  # seeded


def test_auto_dimension_rules():
    # rank 4, polynomial: quadrature is exact (E‖G‖² = 4)
    res = expect(lambda x: (x**2).sum(axis=1), np.zeros(4), np.eye(4), seed=0)
    assert res.method == "quadrature" and res.value == pytest.approx(4.0, rel=1e-12)
    # rank 8: QMC (E‖G‖² = 8)
    res = expect(lambda x: (x**2).sum(axis=1), np.zeros(8), np.eye(8), seed=0)
    assert res.method == "qmc"
    assert abs(res.value - 8.0) < 5 * res.error + 1e-12


def test_nonfinite_values():
    with pytest.raises(SolverError):
        expect(lambda x: np.where(x[:, 0] > 0, np.inf, 0.0), [0.0], [[1.0]], method="mc", seed=0)
    res = expect(lambda x: np.where(x[:, 0] > 0, np.nan, 0.0), [0.0], [[1.0]], method="mc",
                 seed=0, throw=False)
    assert res.status is Status.NONFINITE


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mean": [0.0, 0.0], "cov": [[1.0, 0.5], [0.0, 1.0]]},        # not symmetric
        {"mean": [0.0, 0.0], "cov": [[1.0, 2.0], [2.0, 1.0]]},        # not PSD
        {"mean": [0.0], "cov": np.eye(2)},                          # shape mismatch
        {"mean": [np.nan], "cov": [[1.0]]},
        {"mean": [0.0], "cov": [[1.0]], "method": "simpson"},
        {"mean": [0.0], "cov": [[1.0]], "rtol": -1.0},
        {"mean": [0.0], "cov": [[1.0]], "n_samples": 1},
        {"mean": [0.0], "cov": [[1.0]], "seed": "seed"},
    ],
)
def test_bad_input(kwargs):
    with pytest.raises(ValueError):
        expect(lambda x: x[:, 0], **kwargs)


def test_func_shape_checked():
    with pytest.raises(ValueError, match="func must map"):
        expect(lambda x: x[:3, 0], [0.0], [[1.0]])
    with pytest.raises(ValueError, match="func must be callable"):
        expect(3.0, [0.0], [[1.0]])


def test_expectation_is_frozen():
    res = expect(lambda x: x[:, 0] ** 2, [0.0], [[1.0]])
    assert isinstance(res, Expectation) and res.ok
    with pytest.raises(AttributeError):
        res.value = 2.0
