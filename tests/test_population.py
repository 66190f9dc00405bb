"""Tests of dmftsolve.population against closed forms derived in the comments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from reference_problems import reference_problem

from dmftsolve import Problem
from dmftsolve.population import population_loss
from dmftsolve.results import Status


@given(q0=st.floats(0.0, 3.0))
@example(q0=0.0)
@example(q0=1.0)
@settings(max_examples=20, deadline=None)
def test_quad_neuron_random_init(q0):
    """σ(r) = r², y = z², M = 0, Q = q0: E[(z² − ξ²)²]/2 with ξ ~ N(0, q0) independent
    = (E z⁴ − 2 E z² E ξ² + E ξ⁴)/2 = (3 − 2 q0 + 3 q0²)/2."""
    p = reference_problem("quad_phase")
    res = population_loss(p, [[0.0]], [[q0]])
    assert res.status is Status.SUCCESS
    assert res.value == pytest.approx((3 + 3 * q0**2 - 2 * q0) / 2, rel=1e-12, abs=1e-12)


@given(mu=st.floats(-2.0, 2.0), q=st.floats(0.0, 2.0))
@example(mu=0.7, q=0.4)
@example(mu=1.0, q=0.0)   # perfect recovery: loss 0
@settings(max_examples=20, deadline=None)
def test_quad_neuron_with_overlap(mu, q):
    """σ(r) = r², y = z², V = μ z + ξ, ξ ~ N(0, q). With s = V: Var s = μ² + q, Cov(z, s) = μ,
    Isserlis: E z⁴ = 3, E s⁴ = 3 (μ² + q)², E z² s² = (μ² + q) + 2 μ². So
    E[(z² − s²)²]/2 = (3 − 2 (3 μ² + q) + 3 (μ² + q)²)/2."""
    p = reference_problem("quad_phase")
    res = population_loss(p, mu, q)
    expected = (3 - 2 * (3 * mu**2 + q) + 3 * (mu**2 + q) ** 2) / 2
    assert res.value == pytest.approx(expected, rel=1e-10, abs=1e-12)


@given(
    M=st.lists(st.floats(-1.5, 1.5), min_size=4, max_size=4),
    L=st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4),
)
@example(M=[1.0, 0.0, 0.0, -0.5], L=[0.0, 0.0, 0.0, 0.0])
@settings(max_examples=15, deadline=None)
def test_linear_network_multi_index(M, L):
    """σ(r) = r, a = (1, −2), y = z1 − 0.5 z2 + 0.3 ε: f = (M a)ᵀ V* + aᵀ Ξ, so
    E[(y − f)²]/2 = (‖θ − M a‖² + aᵀ Q a + 0.3²)/2 with θ = (1, −0.5) (Gaussian algebra)."""
    M = np.array(M).reshape(2, 2)
    B = np.array(L).reshape(2, 2)
    Q = B @ B.T  # PSD, possibly singular
    a = np.array([1.0, -2.0])
    p = Problem.build(target="z1 - 0.5*z2 + 0.3*eps", activation="linear", m=2, a=a)
    res = population_loss(p, M, Q)
    theta = np.array([1.0, -0.5])
    expected = (np.sum((theta - M @ a) ** 2) + a @ Q @ a + 0.09) / 2
    assert res.value == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("method", ["qmc", "mc"])
def test_monte_carlo_methods(method):
    """Same closed form as test_quad_neuron_with_overlap, within 5 standard errors."""
    p = reference_problem("quad_phase")
    res = population_loss(p, 0.5, 0.3, method=method, n_samples=2**15, seed=11)
    expected = (3 - 2 * (3 * 0.25 + 0.3) + 3 * (0.25 + 0.3) ** 2) / 2
    assert res.method == method
    assert abs(res.value - expected) < 5 * res.error


def test_nonsmooth_activation_falls_back_to_qmc():
    """ReLU neuron, y = z, M = 0, Q = 1: E[(z − relu(ξ))²]/2 = (1 + E relu(ξ)²)/2 = 3/4."""
    p = Problem.build(target="z", activation="relu")
    res = population_loss(p, 0.0, 1.0, seed=0)
    assert res.ok
    assert abs(res.value - 0.75) < 5 * res.error + 1e-9


@pytest.mark.parametrize(
    "M, Q",
    [
        ([[0.0, 0.0]], [[1.0]]),            # wrong M shape for k = m = 1
        ([[0.0]], [[1.0, 0.0], [0.0, 1.0]]),  # wrong Q shape
        ([[0.0]], [[-1.0]]),                # not PSD
        ([[np.nan]], [[1.0]]),
        ("x", [[1.0]]),
    ],
)
def test_bad_overlaps(M, Q):
    p = reference_problem("quad_phase")
    with pytest.raises(ValueError):
        population_loss(p, M, Q)


def test_problem_type_checked():
    with pytest.raises(ValueError, match="problem must be a Problem"):
        population_loss("z**2", 0.0, 1.0)
