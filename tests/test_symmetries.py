"""Symmetries of GD and of its DMFT, and reproducibility, through the public API
(``Problem.build``, ``solve_dmft``, ``simulate``, ``transition``).

* Hidden units are exchangeable once their second-layer weights go with them: permuting the
  units of ``a`` and of the start permutes the overlaps ``M``'s columns, the Gram matrices and
  leaves the losses. GD from a start in ``span(Θ*)`` (``Q0 = 0``: no random orthogonal part)
  on the same data is then the same computation with its columns permuted, so the simulator's
  trajectories agree to rounding. The DMFT's innovations are drawn per unit, so two solves
  agree in law: within their reported Monte Carlo errors.
* Latent directions are exchangeable: renaming ``z_i → z_σ(i)`` in the target and permuting
  ``M0``'s rows alike permutes ``M``'s rows (the DMFT, in law).
* A label even in ``z`` cannot tell ``θ*`` from ``−θ*``: a start at ``−M0`` has the law of a
  start at ``M0`` with ``M → −M`` (losses and ``|M|`` unchanged), in the DMFT and in GD.
* The same seed gives the same numbers, bit for bit, and another seed other numbers.

Tolerances of the comparisons in law: ``TOL`` combined standard errors (``√(σ₁² + σ₂²)``
of the two runs' reported errors) per entry; two independent estimates differ by more than
4.5 of them with probability about 7·10⁻⁶ per entry. Sizes are small (the file runs in
seconds); each property has its pinned ``@example``s.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve import Problem, simulate, solve_dmft, transition
from dmftsolve.finite_d import TransitionSettings

TOL = 4.5
#: a target with an easy (z1) and a hard (z2) direction, and one with three latents
TARGETS = {2: "z1 + z2**2 - 1", 3: "z1*z2 + z3**2 - 1"}


def within_errors(a: np.ndarray, a_err: np.ndarray, b: np.ndarray, b_err: np.ndarray) -> None:
    """``|a − b| ≤ TOL √(a_err² + b_err²)`` entrywise (+ 1e-12 where both are exact)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    bound = TOL * np.hypot(np.asarray(a_err, float), np.asarray(b_err, float)) + 1e-12
    excess = np.abs(a - b) - bound
    where = np.unravel_index(excess.argmax(), a.shape)
    assert np.all(excess <= 0), f"largest excess {excess.max():.3g} at {where}"


def warm(target: str, a: list[float], M0: np.ndarray, Q0: np.ndarray, steps: int) -> Problem:
    return Problem.build(target=target, activation="gelu", m=len(a), a=a, eta=0.3, steps=steps,
                         M0=M0.tolist(), Q0=Q0.tolist())


# ----------------------------------------------------------------------------- hidden units
units = st.integers(2, 3).flatmap(lambda m: st.tuples(
    st.permutations(range(m)),
    st.lists(st.floats(-1.5, 1.5).filter(lambda x: abs(x) > 0.1), min_size=m, max_size=m),
    st.lists(st.floats(-0.5, 0.5), min_size=2 * m, max_size=2 * m)))


@given(case=units)
@example(case=((1, 0), [1.0, 0.5], [0.3, -0.2, 0.1, 0.25]))
@example(case=((2, 0, 1), [1.0, -0.7, 0.4], [0.3, 0.0, -0.2, 0.1, 0.2, 0.0]))
@settings(max_examples=8, deadline=None)
def test_simulator_trajectories_permute_with_the_hidden_units(case: tuple) -> None:
    perm, a, m0 = case
    perm, m = list(perm), len(a)
    M0, Q0 = np.reshape(m0, (2, m)), np.zeros((m, m))
    p = warm(TARGETS[2], a, M0, Q0, steps=6)
    q = warm(TARGETS[2], [a[j] for j in perm], M0[:, perm], Q0, steps=6)
    r, s = (simulate(x, 40, 3.0, seed=5, trials=2) for x in (p, q))
    overlaps = np.asarray(r.overlaps)[..., perm]
    np.testing.assert_allclose(np.asarray(s.overlaps), overlaps, rtol=1e-10, atol=1e-12)
    gram = np.asarray(r.gram)[..., perm, :][..., perm]
    np.testing.assert_allclose(np.asarray(s.gram), gram, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(s.train_loss), np.asarray(r.train_loss), rtol=1e-10, atol=1e-12)


@given(case=units)
@example(case=((1, 0), [1.0, 0.5], [0.3, -0.2, 0.1, 0.25]))
@example(case=((2, 0, 1), [1.0, -0.7, 0.4], [0.3, 0.0, -0.2, 0.1, 0.2, 0.0]))
@settings(max_examples=2, deadline=None)
def test_dmft_law_permutes_with_the_hidden_units(case: tuple) -> None:
    perm, a, m0 = case
    perm, m = list(perm), len(a)
    M0 = np.reshape(m0, (2, m))
    Q0 = 0.6 * np.eye(m) + 0.2  # a random start's orthogonal part, correlated across units
    p = warm(TARGETS[2], a, M0, Q0, steps=8)
    q = warm(TARGETS[2], [a[j] for j in perm], M0[:, perm], Q0[np.ix_(perm, perm)], steps=8)
    r, s = (solve_dmft(x, 3.0, n_paths=4000, seed=0) for x in (p, q))
    within_errors(s.M, s.M_err, r.M[..., perm], r.M_err[..., perm])
    within_errors(s.q_diag, s.Q_err, r.q_diag[:, perm][:, :, perm], r.Q_err[:, perm][:, :, perm])
    within_errors(s.train_loss, s.train_loss_err, r.train_loss, r.train_loss_err)
    within_errors(s.test_loss, s.test_loss_err, r.test_loss, r.test_loss_err)


# ----------------------------------------------------------------------------- latent indices
def renamed(target: str, sigma: list[int]) -> str:
    """``target`` with ``z_i`` renamed ``z_σ(i)`` (indices from 1)."""
    return re.sub(r"z(\d+)", lambda g: f"z{sigma[int(g.group(1)) - 1] + 1}", target)


@given(sigma=st.integers(2, 3).flatmap(lambda k: st.permutations(range(k))))
@example(sigma=(1, 0))
@example(sigma=(2, 0, 1))
@settings(max_examples=2, deadline=None)
def test_dmft_latent_permutation_permutes_the_rows_of_M(sigma: tuple) -> None:
    sigma = list(sigma)
    k = len(sigma)
    M0 = np.array([[0.3, -0.1], [0.2, 0.15], [-0.25, 0.1]])[:k]
    Q0 = np.array([[0.8, 0.1], [0.1, 0.6]])
    p = warm(TARGETS[k], [1.0, 0.5], M0, Q0, steps=8)
    M0_renamed = np.empty_like(M0)
    M0_renamed[sigma] = M0  # row σ(i) of the renamed start is row i of this one
    q = warm(renamed(TARGETS[k], sigma), [1.0, 0.5], M0_renamed, Q0, steps=8)
    r, s = (solve_dmft(x, 3.0, n_paths=4000, seed=0) for x in (p, q))
    within_errors(s.M[:, sigma], s.M_err[:, sigma], r.M, r.M_err)
    within_errors(s.q_diag, s.Q_err, r.q_diag, r.Q_err)
    within_errors(s.train_loss, s.train_loss_err, r.train_loss, r.train_loss_err)


def test_renaming_is_a_permutation_of_the_latents() -> None:
    """The helper above: ``z1*z2 + z3**2`` under σ = (2, 0, 1) (z1 → z3, z2 → z1, z3 → z2)."""
    assert renamed("z1*z2 + z3**2 - 1", [2, 0, 1]) == "z3*z1 + z2**2 - 1"
    z = np.random.default_rng(0).standard_normal((5, 3))
    y = Problem.build(target="z1*z2 + z3**2 - 1").labels(z, np.zeros(5))
    other = Problem.build(target=renamed("z1*z2 + z3**2 - 1", [2, 0, 1]))
    y_renamed = other.labels(z[:, [1, 2, 0]], np.zeros(5))  # latent σ(i) of the renamed is z_i
    np.testing.assert_allclose(y_renamed, y, rtol=1e-14)


# ----------------------------------------------------------------------------- z -> -z
even_labels = st.sampled_from(["z**2 - 1", "abs(z) + 0.3*eps", "z**2*exp(-z**2/4)"])


@given(target=even_labels, m0=st.floats(0.1, 0.6), q0=st.sampled_from([0.0, 0.8]))
@example(target="z**2 - 1", m0=0.4, q0=0.0)
@example(target="abs(z) + 0.3*eps", m0=0.4, q0=0.8)
@settings(max_examples=2, deadline=None)
def test_even_label_dmft_is_unchanged_by_z_to_minus_z(target: str, m0: float, q0: float) -> None:
    p, q = (warm(target, [1.0], np.array([[s * m0]]), np.array([[q0]]), steps=10) for s in (1, -1))
    r, s = (solve_dmft(x, 3.0, n_paths=4000, seed=0) for x in (p, q))
    within_errors(s.M, s.M_err, -r.M, r.M_err)
    within_errors(s.q_diag, s.Q_err, r.q_diag, r.Q_err)
    within_errors(s.train_loss, s.train_loss_err, r.train_loss, r.train_loss_err)
    within_errors(s.test_loss, s.test_loss_err, r.test_loss, r.test_loss_err)


@pytest.mark.parametrize("target", ["z**2 - 1", "abs(z) + 0.3*eps"])
def test_even_label_gd_is_unchanged_by_z_to_minus_z(target: str) -> None:
    """GD from ``±M0`` (d = 200, 16 trials each): the mean |M_t| and training loss agree within
    the trials' standard errors (the two runs share the data; their difference is smaller than
    for independent runs, so the bound is conservative)."""
    runs = [simulate(warm(target, [1.0], np.array([[s * 0.4]]), np.array([[0.8]]), steps=10), 200, 3.0,
                     seed=2, trials=16) for s in (1, -1)]
    for field in ("overlaps", "train_loss"):
        x = [np.abs(np.asarray(getattr(r, field), float)).reshape(16, 11, -1) for r in runs]
        means = [v.mean(axis=0) for v in x]
        errs = [v.std(axis=0, ddof=1) / np.sqrt(16) for v in x]
        within_errors(means[0], errs[0], means[1], errs[1])


# ----------------------------------------------------------------------------- seeds
@given(seed=st.integers(0, 2**31 - 1))
@example(seed=0)
@example(seed=2**31 - 1)
@settings(max_examples=2, deadline=None)
def test_same_seed_same_numbers(seed: int) -> None:
    """DMFT, simulator and a tiny transition, run twice with one seed: equal bit for bit; with
    the next seed: different (so the seed is what fixes them)."""
    p = warm(TARGETS[2], [1.0, 0.5], np.array([[0.3, -0.2], [0.1, 0.25]]), 0.7 * np.eye(2), steps=5)
    one, two, other = (solve_dmft(p, 3.0, n_paths=1000, seed=x) for x in (seed, seed, seed + 1))
    for field in ("M", "Q", "train_loss", "test_loss", "M_err"):
        np.testing.assert_array_equal(getattr(one, field), getattr(two, field))
    assert not np.array_equal(one.M, other.M)
    one, two, other = (simulate(p, 40, 3.0, seed=x, trials=2) for x in (seed, seed, seed + 1))
    for field in ("overlaps", "gram", "train_loss", "test_loss"):
        np.testing.assert_array_equal(np.asarray(getattr(one, field)), np.asarray(getattr(two, field)))
    assert not np.array_equal(np.asarray(one.overlaps), np.asarray(other.overlaps))
    centred = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=30)
    one, two, other = (transition(centred, 200, [4.0, 8.0], throw=False,
                                  settings=TransitionSettings(draws=3, n_paths=400, seed=x))
                       for x in (seed, seed, seed + 1))
    for a, b in zip(one.points, two.points, strict=True):
        np.testing.assert_array_equal(a.final_cosine, b.final_cosine)
        np.testing.assert_array_equal(a.escape_step, b.escape_step)
    assert one.delta_50 == two.delta_50 or (np.isnan(one.delta_50) and np.isnan(two.delta_50))
    assert not np.array_equal(one.points[0].m0, other.points[0].m0)
