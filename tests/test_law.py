"""Tests of dmftsolve.hessian.law: the Law of the training fields and the exact t = 0 quadrature law.

Reference values, with their origin:

* ``E[min(z², 3)] = P(|z| < √3) − 2√3 φ(√3) + 3 P(|z| > √3)`` (closed form:
  ``E[z² 1{|z|<a}] = P(|z|<a) − 2aφ(a)`` by parts).
* ``σ = r²``, square loss: ``D = ℓ''σ'² + ℓ'σ'' = 6V² − 2y``, so at ``t = 0`` (``V ~ N(0, q0)``
  independent of ``y``) ``E[D] = 6 q0 − 2 E[y]`` (closed form).
* the spectrum of the quadrature law against a large Monte Carlo law of the same fields
  (independent draws, several seeds: the reference's own error is their standard error).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import t0_min_quad_reference
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import ndtr

from dmftsolve.hessian.law import Law, find_kinks, gaussian_rule_1d
from dmftsolve.hessian.outlier_equation import outliers
from dmftsolve.hessian.spectrum import bulk_spectrum, density, edges, stieltjes_trace
from dmftsolve.problem import Problem

SQ3 = math.sqrt(3.0)
PHI_SQ3 = math.exp(-1.5) / math.sqrt(2 * math.pi)
E_MIN_Z2_3 = (2 * ndtr(SQ3) - 1) - 2 * SQ3 * PHI_SQ3 + 3 * 2 * (1 - ndtr(SQ3))


def _min_quad(**kw) -> Problem:
    return Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05, hold_zero=[0], **kw)


# --------------------------------------------------------------------------- rules
@given(n=st.integers(4, 300), kinks=st.lists(st.floats(-6, 6), max_size=4))
@example(n=200, kinks=[-SQ3, SQ3])
@example(n=8, kinks=[0.0])
@settings(max_examples=40, deadline=None)
def test_rule_weights_positive_and_normalised(n: int, kinks: list[float]) -> None:
    x, w = gaussian_rule_1d(n, kinks)
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0, abs=1e-13)
    assert np.all(np.isfinite(x))
    # second moment of N(0, 1): exact for Gauss-Hermite (n >= 2); the composite rule converges
    # fast (worst over 300 random kink sets, measured: 8e-7 at n = 60, 8e-8 at n = 200)
    tol = 0 if not kinks else (4e-6 if n >= 60 else None)
    if tol is not None:
        assert float(w @ x**2) == pytest.approx(1.0, abs=tol + 1e-12)


def test_split_rule_integrates_the_kinked_label() -> None:
    x, w = gaussian_rule_1d(200, [-SQ3, SQ3])
    assert float(w @ np.minimum(x * x, 3.0)) == pytest.approx(E_MIN_Z2_3, abs=1e-13)
    # the unsplit Gauss-Hermite rule of the same size is far worse on the kink
    xh, wh = gaussian_rule_1d(200)
    assert abs(float(wh @ np.minimum(xh * xh, 3.0)) - E_MIN_Z2_3) > 1e-8


def test_find_kinks() -> None:
    p = _min_quad()
    kinks, unresolved = find_kinks(p.target.sympy_expr, p.target.symbols)
    assert kinks[p.target.symbols[0]] == pytest.approx([-SQ3, SQ3], abs=1e-14) and not unresolved
    q = Problem.build(target="Abs(z1 + z2) + Max(z1, 1)")
    kinks, unresolved = find_kinks(q.target.sympy_expr, q.target.symbols)
    assert kinks[q.target.symbols[0]] == [1.0] and len(unresolved) == 1


# --------------------------------------------------------------------------- the Law
def test_law_validation() -> None:
    D = np.ones((4, 1, 1))
    Vs = np.zeros((4, 1))
    with pytest.raises(ValueError, match="weights must sum to 1"):
        Law(D=D, Vstar=Vs, weights=np.full(4, 0.3))
    with pytest.raises(ValueError, match=">= 0"):
        Law(D=D, Vstar=Vs, weights=np.array([1.5, -0.5, 0.0, 0.0]))
    with pytest.raises(ValueError, match="finite"):
        Law(D=np.array([1.0, np.nan, 1.0, 1.0]), Vstar=Vs)
    with pytest.raises(ValueError, match="Vstar"):
        Law(D=D, Vstar=np.zeros((3, 1)))
    with pytest.raises(ValueError, match="symmetric"):
        Law(D=np.array([[[0.0, 1.0], [0.0, 0.0]]]), Vstar=np.zeros((1, 1)))
    with pytest.raises(ValueError, match="kind"):
        Law(D=D, Vstar=Vs, kind="bootstrap")  # type: ignore[arg-type]
    law = Law.from_samples({"D": D[:, :, 0].ravel(), "Vstar": Vs, "y": np.ones(4)}, t=3)
    assert law.kind == "monte_carlo" and law.n_paths == 4 and law.t == 3 and law.m == 1
    assert not law.D.flags.writeable
    with pytest.raises(ValueError, match="lacks"):
        Law.from_samples({"D": D})


def test_initial_law_moments_match_closed_forms() -> None:
    law = Law.initial(_min_quad(q0=0.7))
    assert law.kind == "quadrature" and law.t == 0
    assert law.probabilities.sum() == pytest.approx(1.0, abs=1e-14)
    assert float(law.expect(law.y)) == pytest.approx(E_MIN_Z2_3, abs=1e-12)
    assert float(law.expect(law.D[:, 0, 0])) == pytest.approx(6 * 0.7 - 2 * E_MIN_Z2_3, abs=1e-11)
    assert law.diagnostics["error"]["E[D]"] < 1e-10
    assert law.diagnostics["unbounded_above"] is True and law.diagnostics["unbounded_below"] is False


def test_initial_law_is_deterministic_and_accepted_everywhere() -> None:
    a, b = Law.initial(_min_quad(), nodes=40), Law.initial(_min_quad(), nodes=40)
    np.testing.assert_array_equal(a.D, b.D)
    e1 = edges(a, 3.0)
    e2 = edges(a.D, 3.0, weights=a.weights, unbounded_above=True, unbounded_below=False)
    assert e1 == e2 and e1[1] is None
    with pytest.raises(ValueError, match="weights must be None"):
        bulk_spectrum(a, 3.0, weights=a.weights)


def test_density_of_quadrature_law_integrates_to_one() -> None:
    # tanh: D bounded on both sides, so the whole bulk is on the grid
    law = Law.initial(Problem.build(target="Min(z**2, 3)", activation="tanh", hold_zero=[0]), nodes=60)
    res = bulk_spectrum(law, 2.0, npoints=801)
    assert res.left_edge is not None and res.right_edge is not None
    assert res.total_mass == pytest.approx(1.0, abs=5e-3)


@given(x=st.floats(-20, 20), y=st.floats(1e-3, 20))
@example(x=-2.2, y=1e-3)
@settings(max_examples=25, deadline=None)
def test_stieltjes_of_quadrature_law_is_nevanlinna(x: float, y: float) -> None:
    law = _LAW_SMALL
    s = stieltjes_trace(law, 3.0, complex(x, y))
    assert s.imag > 0
    assert abs(s) <= 1 / y + 1e-12  # |s(ζ)| <= 1/Im ζ for a probability measure


def test_stieltjes_at_infinity() -> None:
    for zeta in (1e6j, 1e6 + 1e3j, -1e6 + 1.0j):
        s = stieltjes_trace(_LAW_SMALL, 3.0, zeta)
        assert s * zeta == pytest.approx(-1.0, abs=1e-4)


_LAW_SMALL = Law.initial(_min_quad(), nodes=30, error=False)


def test_t0_quadrature_spectrum_agrees_with_large_monte_carlo() -> None:
    """Left edge of the quadrature law vs Monte Carlo laws of the same t = 0 fields (4 seeds × 2e5)."""
    law = Law.initial(_min_quad())
    edge_q = edges(law, 3.0)[0]
    mc = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        z, v = rng.standard_normal(200_000), rng.standard_normal(200_000)
        D = 6 * v * v - 2 * np.minimum(z * z, 3.0)
        mc.append(edges(D, 3.0, unbounded_above=True, unbounded_below=False)[0])
    se = float(np.std(mc, ddof=1) / 2)
    assert abs(edge_q - float(np.mean(mc))) <= 4 * se + 1e-3
    assert edge_q == pytest.approx(t0_min_quad_reference()[0], abs=2e-6)


@pytest.mark.slow
def test_t0_quadrature_outlier_converges() -> None:
    """The hard outlier at t = 0: rules of 135, 200 and 300 nodes agree to 1e-6 (measured)."""
    vals = []
    for n in (135, 200, 300):
        law = Law.initial(_min_quad(), nodes=n, error=False)
        (o,) = outliers(law, law.Vstar, 3.0).outliers
        vals.append((o.location, o.overlap2))
    np.testing.assert_allclose(vals, [vals[-1]] * 3, atol=1e-6)
    assert vals[-1][0] == pytest.approx(t0_min_quad_reference()[1], abs=2e-6)


def test_density_accepts_law() -> None:
    law = _LAW_SMALL
    x = np.array([-1.0, 0.0, 1.0])
    np.testing.assert_allclose(density(law, 3.0, x), density(law.D, 3.0, x, weights=law.weights))
