"""The spectral start of the finite-d transition (``dmftsolve.finite_d.spectral``).

References: ``T*(y) = 1 − 1/E[z²|y]`` in closed form for ``y = z²`` (``E[z²|y] = y``) and for the
discrete label ``1{|z| > 1}`` (``E[z² | |z| > 1] = 1 + φ(1)/Φ(−1)`` and ``E[z² | |z| < 1] =
1 − φ(1)/(Φ(1) − 1/2)``, from ``∫ z² φ = Φ − z φ``); the limiting overlap of the optimal spectral
estimator for ``z²``, ``ρ(4)² = 0.9245`` (Luo, Alghamdi and Lu 2019, root of ``F(r) = 1/δ`` in
``validation/figures/spectral_init.py``), against samples at d = 400 with a tolerance of
``3/√d`` plus three standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dmftsolve import Problem
from dmftsolve.finite_d import TransitionSettings, transition
from dmftsolve.finite_d.spectral import (
    optimal_preprocessing,
    spectral_overlaps,
    spectral_start,
    spectral_threshold,
)


def test_optimal_preprocessing_matches_closed_forms() -> None:
    T = optimal_preprocessing(Problem.build(target="z**2"))
    y = np.array([0.2, 0.7, 1.5, 3.0, 6.0])
    np.testing.assert_allclose(T(y), 1 - 1 / y, atol=0.02)
    T = optimal_preprocessing(Problem.build(target="Heaviside(Abs(z) - 1)"))
    phi, tail = norm.pdf(1.0), norm.cdf(-1.0)
    outside = 1 + phi / tail
    inside = 1 - phi / (norm.cdf(1.0) - 0.5)
    np.testing.assert_allclose(T(np.array([0.0, 1.0])), [1 - 1 / inside, 1 - 1 / outside], rtol=2e-3)


def test_spectral_overlap_samples_match_the_limit() -> None:
    d = 400
    r = spectral_overlaps(Problem.build(target="z**2"), 4.0, d, 6, seed=[3])
    assert r.shape == (6,) and np.all((r >= 0) & (r <= 1))
    se = r.std(ddof=1) / math.sqrt(r.size)
    assert abs(r.mean() - math.sqrt(0.9245)) <= 3 / math.sqrt(d) + 3 * se
    again = spectral_overlaps(Problem.build(target="z**2"), 4.0, d, 6, seed=[3])
    np.testing.assert_array_equal(r, again)  # the same seed, the same samples


def test_spectral_start_is_a_unit_norm_warm_start() -> None:
    M, Q = spectral_start(0.6, 2.0)
    assert M == pytest.approx(0.6 * math.sqrt(2.0)) and M * M + Q == pytest.approx(2.0)


def test_spectral_transition_succeeds_above_and_fails_below() -> None:
    """``y = z²`` at d = 200, 150 steps: from the spectral start GD keeps the overlap at δ = 6
    (ρ ≈ 0.98) and loses it at δ = 0.8 (ρ ≈ 0.45, below the success cosine: it cannot pass
    there); each draw records the overlap it started from."""
    p = Problem.build(target="z**2", steps=150)
    c = transition(p, 200, [0.8, 6.0], settings=TransitionSettings(draws=4, n_paths=2000, init="spectral"),
                   throw=False)
    assert c.successes.tolist() == [0, 4]
    low, high = c.points
    assert np.all(high.m0 > 0.9) and np.all(low.m0 < high.m0.min())
    assert np.all(high.escape_step == 150)  # success is the statistic at step T
    assert "at step T" in high.diagnostics["criterion"]


def test_spectral_start_refuses_what_it_cannot_do() -> None:
    assert spectral_threshold(Problem.build(target="z**2")) == pytest.approx(0.5, abs=1e-6)
    s = TransitionSettings(draws=2, n_paths=2000, init="spectral")
    with pytest.raises(ValueError, match="at or below the spectral threshold delta_alg = 0.5"):
        transition(Problem.build(target="z**2", steps=10), 200, [0.4, 2.0], settings=s)
    with pytest.raises(ValueError, match="one neuron and one target direction"):
        transition(Problem.build(target="z**2", m=2, steps=10), 200, [1.0, 2.0], settings=s)
    with pytest.raises(ValueError, match="init must be 'random' or 'spectral', got 'warm'"):
        TransitionSettings(init="warm")
